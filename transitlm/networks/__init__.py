"""Networks and benchmarks for any city: the data tools' machinery.

``gtfs_import`` (a GTFS feed -> a network folder; data/import_gtfs.py),
``gtfs_fares`` (GTFS fares per ride), ``router`` (the shortest-path router
behind every label), ``benchmark_builder`` (the four benchmark files of a
network; data/make_benchmark.py), ``limits`` (the input limits of these
tools) and ``demo/`` (the bundled demo network and examples;
data/make_demo.py).  See docs/gtfs-and-benchmarks.md.
"""
