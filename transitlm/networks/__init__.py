"""Networks and benchmarks for any city: the GTFS importer and fares, the router behind every label, the benchmark builder, their limits and the demo network; docs/gtfs-and-benchmarks.md.
May import transitlm.evaluation, transitlm.io and common."""
