"""OpenRLHF: ``reward_func`` for ``--reward.remote_url /path/to/transitlm/reward/openrlhf.py``
(older: ``--remote_rm_url``), and what the HTTP service answers.

OpenRLHF loads this file by its path and calls ``reward_func(queries,
prompts, labels)`` with three lists (openrlhf/utils/agent.py,
SingleTurnAgentExecutor): a query is the prompt with the response after it,
decoded with its special tokens (so ``<|im_end|>`` may end it); a label is
the dataset's ``--data.label_key`` column -- the release row as ``reward.py
prepare --format openrlhf`` writes it (its JSON text).  It wants
``{"rewards": [...], "scores": [...], "extra_logs": {key: [...]}}``: rewards
as shaped (an unreadable completion scores ``failure``), scores the same but
never below 0 (they drive dynamic filtering in [0, 1]), extra_logs every
numeric key of transitlm.reward.scoring.KEYS (OpenRLHF turns each into a
tensor: no text).  Settings from the environment (transitlm.reward.settings);
each row under its own protocol unless one is set there
(transitlm.reward.row_protocol).

Standard library only; Python 3.8+.
"""

import os
import sys

if __package__ in (None, ""):            # loaded by its path: the package beside it
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from transitlm.reward.batch import score_batch  # noqa: E402
from transitlm.reward.scoring import KEYS  # noqa: E402

# The keys logged (numeric only) and their order.
LOGGED = tuple(key for key in KEYS if key not in ("score", "error_code", "pred"))
PROMPT_TAIL = 256      # characters of a (left-truncated) prompt looked for in its query
# Where chat templates start the assistant's turn (ChatML, Llama 3, Mistral, Phi).
ASSISTANT_MARKERS = ("<|im_start|>assistant", "<|start_header_id|>assistant<|end_header_id|>",
                     "[/INST]", "<|assistant|>")


def response_of(query, prompt):
    """The response part of an OpenRLHF query (the prompt, then the response).

    The query starts with the prompt, unless OpenRLHF cut the prompt's start
    to fit the context; then the response follows the last place where the
    prompt's end stands in the query, else the last place a chat template
    starts the assistant's turn.  Failing both, the whole query is read.
    """
    if not isinstance(query, str):
        return query            # None, bytes, another value: read (or refused) as a completion
    prompt = prompt if isinstance(prompt, str) else ""
    if prompt and query.startswith(prompt):
        return query[len(prompt):]
    tail = prompt[-PROMPT_TAIL:]
    if tail:
        at = query.rfind(tail)
        if at != -1:
            return query[at + len(tail):]
    starts = [query.rfind(marker) + len(marker) for marker in ASSISTANT_MARKERS
              if marker in query]
    return query[max(starts):] if starts else query


def reward_func(queries, prompts, labels, **kwargs):
    """OpenRLHF's reward function: one reward per query."""
    queries = list(queries or ())
    prompts = list(prompts or ())
    labels = list(labels or ())
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError("queries, prompts and labels differ in length (%d, %d, %d)"
                         % (len(queries), len(prompts), len(labels)))
    responses = [response_of(query, prompt) for query, prompt in zip(queries, prompts)]
    results = score_batch(responses, labels, **kwargs)
    return {"rewards": [result["score"] for result in results],
            "scores": [max(0.0, result["score"]) for result in results],
            "extra_logs": {key: [result[key] for result in results] for key in LOGGED}}
