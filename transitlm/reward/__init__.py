"""The benchmark's own verdicts as a reward for RL trainers (docs/reward.md).

``transitlm.reward.score(completion, row, ...)`` scores one completion against
one row of the release by the evaluators' own rules (``scoring``); the
adapters call it as each trainer expects: ``trl.route_reward`` (TRL's
GRPOTrainer), ``verl.compute_score`` (verl), ``openrlhf.reward_func``
(OpenRLHF, in-process) and the HTTP service of ``reward.py serve``
(``service``); ``prepare`` writes a release CSV in each trainer's layout.
"""


def __getattr__(name):
    # transitlm.reward.score without importing the engine until it is used.
    if name in ("score", "Scorer", "RowDataError", "KEYS"):
        from transitlm.reward import scoring
        return getattr(scoring, name)
    raise AttributeError("module 'transitlm.reward' has no attribute %r" % name)
