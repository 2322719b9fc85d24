"""TransitLM inside other tools' evaluation runs (docs/harness.md).

lm-evaluation-harness: ``harness.py lm-eval`` writes a task folder for the
harness's ``--include_path`` (``lm_eval_tasks``: the rows, the task files,
their settings); the harness then calls the functions of
``lm_eval_scoring`` -- each answer scored by the project's own scoring, each
figure aggregated by the evaluator's own aggregation; ``cli`` is harness.py's
command line.
"""
