"""verl: ``compute_score`` as a custom reward function.

    reward.custom_reward_function.path=/path/to/transitlm/transitlm/reward/verl.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.shaping=gated     # optional

verl loads this file by its path and calls, for every sample,
``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``
(verl/experimental/reward_loop/reward_manager/naive.py, run_single; the
legacy verl/workers/reward_manager/naive.py the same), with the
``reward_kwargs`` as further keywords; it collects one list per key across a
batch, so every sample returns the same keys, whatever its benchmark
(transitlm.reward.scoring.KEYS: ``score``, ``acc`` for the validation
accuracy, ``pred`` for majority voting, ...).  ``compute_score_batch`` is the
same for verl's legacy batch reward manager (``data_sources=``,
``solution_strs=``, ``ground_truths=``, ``extra_infos=``).

``ground_truth`` is the row as ``reward.py prepare --format verl`` writes it
(the release row's JSON text); a ground truth that is only the label takes
the row's other fields from ``extra_info``.  The benchmark is the
``benchmark`` keyword, else the row's task_id, else the data source's name
(``transitlm/single_route``); the protocol the ``protocol`` keyword, else
the environment's, else the row's own (transitlm.reward.row_protocol).

Standard library only; Python 3.8+.
"""

import os
import sys

if __package__ in (None, ""):            # loaded by its path: the package beside it
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from transitlm.evaluation.catalog import benchmark_of_task  # noqa: E402
from transitlm.reward.scoring import RowDataError, row_dict, score  # noqa: E402
from transitlm.reward.settings import settings  # noqa: E402


def verl_row(ground_truth, extra_info):
    """The release row of a sample: ``ground_truth`` itself (a row, or its
    JSON text), else its label with the other fields from ``extra_info``."""
    try:
        row = row_dict(ground_truth)
    except RowDataError:
        row = None
    if row is None or "sft_prompt" not in row:
        row = dict(extra_info or {}, sft_label=ground_truth)
    return row


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None,
                  **kwargs):
    """One sample -> a dict with ``score`` and the same keys for every sample."""
    row = verl_row(ground_truth, extra_info if isinstance(extra_info, dict) else None)
    options = settings(**kwargs)
    if options["benchmark"] is None and "task_id" not in row:
        options["benchmark"] = benchmark_of_task(data_source)
    return score(solution_str, row, **options)


def compute_score_batch(data_sources=None, solution_strs=None, ground_truths=None,
                        extra_infos=None, **kwargs):
    """verl's batch reward manager: one dict per sample, in order."""
    solution_strs = list(solution_strs if solution_strs is not None else ())
    count = len(solution_strs)
    data_sources = list(data_sources) if data_sources is not None else [None] * count
    ground_truths = list(ground_truths) if ground_truths is not None else [None] * count
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * count
    if not len(data_sources) == len(ground_truths) == len(extra_infos) == count:
        raise ValueError("data_sources, solution_strs, ground_truths and extra_infos differ "
                         "in length (%d, %d, %d, %d)" % (len(data_sources), count,
                                                         len(ground_truths), len(extra_infos)))
    return [compute_score(source, text, truth, extra, **kwargs)
            for source, text, truth, extra in zip(data_sources, solution_strs, ground_truths,
                                                    extra_infos)]

