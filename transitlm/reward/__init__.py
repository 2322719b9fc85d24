"""The benchmark's own verdicts as an RL reward: scoring, the adapters trl, verl and openrlhf, the HTTP service and prepare; docs/reward.md.
May import transitlm.evaluation, transitlm.io and common."""


def __getattr__(name):
    # transitlm.reward.score without importing the engine until it is used.
    if name in ("score", "Scorer", "RowDataError", "KEYS"):
        from transitlm.reward import scoring
        return getattr(scoring, name)
    raise AttributeError("module 'transitlm.reward' has no attribute %r" % name)
