"""The machinery of the TransitLM evaluators, beside the rules in ``common.py``.

One module per concern, a folder per tool; dependencies run one way (scenario
scripts and commands -> this package -> ``common``):

- the evaluators (top level): ``catalog`` (the benchmarks, metrics and data
  files), ``inputs`` (the sample CSV, streamed, chunked, hashed; predictions
  files), ``engine`` (``Benchmark``, what a scenario script subclasses, and the
  row stream), ``workers`` (``--workers``: forked processes and their tasks),
  ``records`` (per-row records, failure codes, aggregation), ``reports`` (JSON
  report, details lines, text report, signature), ``provenance`` (run.json),
  ``files`` (run-folder names; outputs written whole, never over an input),
  ``cli`` (the evaluators' command line), ``api`` (``evaluate()``), ``pages/``
  (the evaluator's HTML page and what pages share);
- shared by every tool: ``exit_status`` (exit statuses, Ctrl-C and SIGTERM),
  ``terminal`` (escaping for a terminal, the progress line), ``http_client``
  (requests bounded by a deadline), ``bounded_json``, ``prompts`` (a row's
  chat messages, one rule for generate.py, harness.py and reward.py, and the
  record of a run's prompt the signature names);
- ``compare/``: everything compare.py runs (docs/comparison.md);
- ``generate/``: everything generate.py runs (docs/model-runner.md);
- ``networks/``: the GTFS importer, fares, the router behind every label, the
  benchmark builder and the demo network (docs/gtfs-and-benchmarks.md).

With the repository root on ``sys.path``::

    import transitlm
    report, records = transitlm.evaluate("single_route", input="data/benchmark1_single_route_example.csv")
"""


def __getattr__(name):
    # ``transitlm.evaluate`` and ``transitlm.VERSION`` are loaded on first use,
    # so that a tool importing one small module (transitlm.exit_status, as
    # every command does first) does not load the rules and the machinery
    # with it.
    if name == "evaluate":
        from transitlm.api import evaluate
        return evaluate
    if name == "VERSION":
        from common import VERSION
        return VERSION
    raise AttributeError("module 'transitlm' has no attribute %r" % name)
