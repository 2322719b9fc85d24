"""The machinery of the TransitLM evaluators, beside the rules in ``common.py``.

One module per concern; dependencies run one way (scenario scripts and
workflow tools -> this package -> ``common``):

- ``reading``: the sample CSV (streamed, chunked, hashed) and predictions files;
- ``records``: per-row records, failure codes and their aggregation;
- ``reports``: the JSON report, the details lines, the text report, the signature;
- ``engine``: ``Benchmark`` (what a scenario script subclasses) and the row stream;
- ``worker_pool``: the forked worker processes of ``--workers``;
- ``cli``: the command line every evaluator shares;
- ``api``: ``evaluate()``, the Python API;
- ``terminal``: escaping text for a terminal, the progress line;
- ``status``: exit statuses and the errors that stop a run;
- compare.py's machinery (docs/comparison.md): ``runs`` (reading run folders),
  ``metric_terms`` (per-row terms of every metric), ``resampling`` (bootstrap
  intervals, paired p-values), ``comparison`` (one benchmark group),
  ``breakdowns`` (--by), ``signature`` (comparability), ``run_groups`` (names,
  groups, the whole result), ``main_table``, ``compare_formats`` (text,
  Markdown, CSV, JSON), ``compare_latex``, ``compare_cli``.

With the repository root on ``sys.path``::

    import transitlm
    report, records = transitlm.evaluate("single_route", input="data/benchmark1_single_route_example.csv")
"""

from common import VERSION  # noqa: F401  (the project's version)


def __getattr__(name):
    # ``transitlm.evaluate`` is loaded on first use, so that a tool importing
    # one small module (transitlm.exit_status, transitlm.terminal) does not load the
    # whole evaluator machinery with it.
    if name == "evaluate":
        from transitlm.api import evaluate
        return evaluate
    raise AttributeError("module 'transitlm' has no attribute %r" % name)
