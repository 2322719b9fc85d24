"""How a reward is set up when a trainer calls it: keyword arguments where the
trainer passes them (verl's ``reward_kwargs``), else environment variables
(OpenRLHF calls ``reward_func`` with three lists and nothing else; TRL's
dotted path takes no arguments), else the defaults.

    TRANSITLM_REWARD_BENCHMARK   single_route, personalized, diversity, general_llm
                                 (default: each row's task_id)
    TRANSITLM_REWARD_PROTOCOL    reference or paper (default: each row's own, as
                                 prepare recorded it, else reference)
    TRANSITLM_REWARD_SHAPING     dense (default), gated or sparse
    TRANSITLM_REWARD_FAILURE     the score of an unreadable completion (default 0)
    TRANSITLM_STATION_INFO, TRANSITLM_LINE_INFO, TRANSITLM_DATA   the network files

Standard library only; Python 3.8+.
"""

import math
import os

from common import PROTOCOLS
from transitlm.reward.scoring import checked_weights

ENV = {"benchmark": "TRANSITLM_REWARD_BENCHMARK", "protocol": "TRANSITLM_REWARD_PROTOCOL",
       "shaping": "TRANSITLM_REWARD_SHAPING", "failure": "TRANSITLM_REWARD_FAILURE"}
DEFAULTS = {"benchmark": None, "protocol": None, "shaping": "dense", "failure": 0.0,
            "station_info": None, "line_info": None, "weights": None}


def settings(**given):
    """The score() keywords of a call: those given (None = not given), else
    the environment's, else the defaults (a protocol of None: each row's
    own, transitlm.reward.row_protocol).  Keys not of score() are ignored
    (a trainer's own keywords, such as TRL's trainer_state).  ValueError for
    a failure score that is not a finite number, a protocol that is none
    or weights that cannot be used (transitlm.reward.scoring.checked_weights):
    the score is always a finite number."""
    values = dict(DEFAULTS)
    for key, variable in ENV.items():
        if os.environ.get(variable):
            values[key] = os.environ[variable]
    for key in DEFAULTS:
        if given.get(key) is not None:
            values[key] = given[key]
    try:
        failure = float(values["failure"])
    except (TypeError, ValueError, OverflowError):
        failure = None
    if failure is None or not math.isfinite(failure):
        raise ValueError("the failure score must be a finite number, not %r"
                         % (values["failure"],))
    values["failure"] = failure
    if values["protocol"] is not None and values["protocol"] not in PROTOCOLS:
        raise ValueError("unknown protocol %r (known: %s)"
                         % (values["protocol"], ", ".join(sorted(PROTOCOLS))))
    values["weights"] = checked_weights(values["weights"])
    return values
