"""TransitLM inside other tools' evaluation runs (docs/harness.md).

lm-evaluation-harness: ``harness.py lm-eval`` writes a task folder for the
harness's ``--include_path`` (``lm_eval_tasks``: the rows, the task files,
their settings); the harness then calls the functions of
``lm_eval_scoring`` -- each answer scored by the project's own scoring, each
figure aggregated by the evaluator's own aggregation (``context_fit`` fits
the answers into a server's context).  ``harness.py import`` reads what the
harness wrote (``lm_eval_output``) and scores the logged answers with the
evaluator's engine into run folders (``lm_eval_import``); ``cli`` is
harness.py's command line.
"""
