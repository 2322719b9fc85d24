"""The evaluator core: the benchmarks' catalogue, inputs, the engine and its workers, per-row records, reports, answers, terms, the network check, provenance and the prompts.
May import transitlm.io and common; never a tool (compare, generate, harness, networks, pages, reward, datasets) nor the package's face."""
