"""The machinery of the TransitLM evaluators, beside the rules in ``common.py``.

Floors, lowest first; a module imports its own floor or a lower one (tests/test_layout.py):

- ``common`` (the repository's top): the rules every evaluator shares;
- ``io/``: the plumbing every tool shares -- outputs written whole
  (``files``), terminal text (``terminal``), exit statuses and signals
  (``exit_status``), the HTTP client, the JSON service, bounded and stepwise
  JSON, CSV rows;
- ``evaluation/``: the evaluator core -- the catalogue of benchmarks, metrics
  and data files (``catalog``), inputs, the engine and its workers, per-row
  records, reports, answers, terms, the network check, provenance, the prompt
  texts (``prompt_texts``) and the rule that picks a row's prompt and chat
  messages (``chat_messages``);
- the tools: this package's face (``evaluate``, ``VERSION``), ``api`` (the
  Python API), ``cli`` (the evaluators' command line), and a folder per tool:
  ``pages/``, ``compare/``, ``generate/``, ``harness/``, ``networks/``,
  ``reward/``; ``records`` is the former path of ``evaluation.records``;
- the commands (the repository's scripts) on top.

With the repository root on ``sys.path``::

    import transitlm
    report, records = transitlm.evaluate("single_route", input="data/benchmark1_single_route_example.csv")
"""


def __getattr__(name):
    # ``transitlm.evaluate`` and ``transitlm.VERSION`` are loaded on first use,
    # so that a tool importing one small module (transitlm.io.exit_status, as
    # every command does first) does not load the rules and the machinery
    # with it.
    if name == "evaluate":
        from transitlm.api import evaluate
        return evaluate
    if name == "VERSION":
        from common import VERSION
        return VERSION
    raise AttributeError("module 'transitlm' has no attribute %r" % name)
