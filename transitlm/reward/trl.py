"""TRL's GRPOTrainer: ``transitlm.reward.trl.route_reward`` as a reward function.

    from transitlm.reward.trl import route_reward
    GRPOTrainer(..., reward_funcs=[route_reward], ...)
    # or, per component, weighted (the weights are GRPOConfig's):
    GRPOTrainer(..., reward_funcs=[route_conn, route_rem, route_ea],
                args=GRPOConfig(..., reward_weights=[1.0, 2.0, 1.0]))
    # TRL's command line imports a dotted path:
    trl grpo ... --reward_funcs transitlm.reward.trl.route_reward

(In GRPOTrainer itself a string in ``reward_funcs`` names a reward *model*
to load: pass the function.)

TRL calls a reward function by keyword -- ``prompts``, ``completions`` (text,
or for a conversational dataset lists of messages), ``completion_ids``,
``trainer_state``, ``log_extra``, ``log_metric`` and every dataset column as a
list with one entry per completion (trl/trainer/grpo_trainer.py,
GRPOTrainer._calculate_rewards) -- and wants one float per completion.  The
dataset (``reward.py prepare --format trl``) carries the release's columns
``sft_prompt``, ``sft_label``, ``req_type`` and ``task_id``.  When TRL passes
``log_metric`` (v1.0 on), the mean of every component over the batch is
logged through it as ``transitlm/<key>`` by the function that scored the
batch: ``route_reward``, or the first of the component functions (the
others reuse its results).

``make_reward(name, **settings)`` makes a reward function with other settings
(protocol, shaping, failure, station file, ...) and its own ``__name__``.
Settings otherwise come from the environment (transitlm.reward.settings).
Each row is scored under the protocol its ``protocol`` column names (as
prepare wrote it), unless a protocol is set (transitlm.reward.row_protocol).

Standard library only; Python 3.8+.
"""

from transitlm.reward.batch import BatchMemo, means, rows_from_columns
from transitlm.reward.settings import settings

_MEMO = BatchMemo()
_SETTINGS = ("benchmark", "protocol", "shaping", "failure", "station_info", "line_info",
             "weights")


def _results(completions, columns, options):
    """-> (each completion's result, whether this call scored the batch)."""
    completions = list(completions or ())
    rows = rows_from_columns(columns, len(completions))
    return _MEMO.scored(completions, rows, settings(**options))


def make_reward(name="route_reward", key="score", **options):
    """A TRL reward function named ``name`` returning each completion's ``key``
    (``score``, or one component: format, conn, sg, ...) under ``options``
    (the keywords of transitlm.reward.score)."""
    unknown = sorted(set(options) - set(_SETTINGS))
    if unknown:
        raise ValueError("unknown setting(s) %s (known: %s)" % (", ".join(unknown),
                                                              ", ".join(_SETTINGS)))
    settings(**options)      # weights and failure checked when set, not mid-training

    def reward(prompts=None, completions=None, completion_ids=None, log_metric=None,
               log_extra=None, trainer_state=None, **columns):
        results, scored = _results(completions, columns, options)
        # Logged by the function that scored the batch (the first component of
        # a batch, every route_reward call); TRL averages what it is given.
        if log_metric is not None and (scored or key == "score"):
            for component, value in sorted(means(results).items()):
                log_metric("transitlm/%s" % component, value)
        return [result[key] for result in results]

    reward.__name__ = reward.__qualname__ = name
    reward.__doc__ = "TransitLM reward for TRL: each completion's %s." % key
    return reward


route_reward = make_reward("route_reward")

# One function per component, each with its own __name__ (for reward_weights,
# and so TRL logs rewards/<name>/mean apart).
route_format = make_reward("route_format", "format")
route_conn = make_reward("route_conn", "conn")
route_sg = make_reward("route_sg", "sg")
route_dp = make_reward("route_dp", "dp")
route_lo = make_reward("route_lo", "lo")
route_sso = make_reward("route_sso", "sso")
route_rem = make_reward("route_rem", "rem")
route_ea = make_reward("route_ea", "ea")
route_pc = make_reward("route_pc", "pc")
route_rd = make_reward("route_rd", "rd")
COMPONENTS = {"format": route_format, "conn": route_conn, "sg": route_sg, "dp": route_dp,
              "lo": route_lo, "sso": route_sso, "rem": route_rem, "ea": route_ea,
              "pc": route_pc, "rd": route_rd}
