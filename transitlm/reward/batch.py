"""A trainer's batch scored: rows put together from the dataset's columns,
every completion scored once, the results kept for the next reward function
of the same batch (TRL calls one function per component on the same batch).

Standard library only; Python 3.8+.
"""

import threading

from transitlm.reward import binding
from transitlm.reward.scoring import KEYS, score
from transitlm.reward.settings import settings

# The columns of a release row that scoring reads (others are left alone).
ROW_COLUMNS = ("sft_prompt", "sft_label", "req_type", "task_id", "index_id", "indexid",
               "system_prompt") + binding.KEYS


def rows_from_columns(columns, count):
    """Rows (dicts) from dataset columns given as lists, one entry per completion
    (TRL passes every column so).  ValueError when a column's length differs."""
    present = {}
    for name in ROW_COLUMNS:
        values = columns.get(name)
        if values is None:
            continue
        if not isinstance(values, (list, tuple)) or len(values) != count:
            raise ValueError("dataset column %s has %s values for %d completions"
                             % (name, len(values) if isinstance(values, (list, tuple))
                                else "no list of", count))
        present[name] = values
    if "sft_label" not in present or "sft_prompt" not in present:
        raise ValueError("the dataset needs the columns sft_prompt and sft_label (and task_id "
                         "or a benchmark); it has: %s" % ", ".join(sorted(columns)))
    return [{name: values[index] for name, values in present.items()} for index in range(count)]


class BatchMemo(object):
    """The results of the last batch scored, by what went in: the same
    completions and rows with the same settings are not scored twice."""

    def __init__(self):
        self._lock = threading.Lock()
        self._key = None
        self._results = None

    def results(self, completions, rows, options):
        key = (tuple(_hashable(c) for c in completions),
               tuple(_hashable(r) for r in rows), _hashable(options))
        with self._lock:
            if key == self._key:
                return self._results
        results = [score(completion, row, **options) for completion, row in zip(completions, rows)]
        with self._lock:
            self._key, self._results = key, results
        return results


def _hashable(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def score_batch(completions, rows, memo=None, **options):
    """Every completion scored against its row -> list of dicts (KEYS)."""
    options = settings(**options)
    if memo is not None:
        return memo.results(list(completions), list(rows), options)
    return [score(completion, row, **options) for completion, row in zip(completions, rows)]


def means(results):
    """{key: mean over the batch} of the numeric keys."""
    numeric = [key for key in KEYS if key not in ("error_code", "pred")]
    count = len(results) or 1
    return {key: sum(result[key] for result in results) / count for key in numeric}
