"""A trainer's batch scored: rows put together from the dataset's columns,
every completion scored once, the results kept for the next reward function
of the same batch (TRL calls one function per component on the same batch).

Standard library only; Python 3.8+.
"""

import threading

from transitlm.reward import binding, row_protocol
from transitlm.reward.scoring import KEYS, score
from transitlm.reward.settings import settings

# The columns of a release row that scoring reads (others are left alone).
ROW_COLUMNS = ("sft_prompt", "sft_label", "req_type", "task_id", "index_id", "indexid",
               "system_prompt", row_protocol.KEY) + binding.KEYS


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
    completions and rows with the same settings are not scored twice.  A
    batch holding a value that cannot be compared safely (an object of
    another type, nesting over MEMO_DEPTH levels) is scored without it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._key = None
        self._results = None

    def results(self, completions, rows, options):
        return self.scored(completions, rows, options)[0]

    def scored(self, completions, rows, options):
        """-> (the results, whether they were scored by this call rather than
        kept from the last one)."""
        try:
            key = (memo_key(completions), memo_key(rows), memo_key(options))
        except Unkeyable:
            key = None
        with self._lock:
            if key is not None and key == self._key:
                return self._results, False
        results = [score(completion, row, **options) for completion, row in zip(completions, rows)]
        if key is not None:
            with self._lock:
                self._key, self._results = key, results
        return results, True


# How deep a batch's values are compared for the memo (a chat completion
# nests 3 levels, a decoded label 4); deeper batches are not memoised.
MEMO_DEPTH = 32
# Values compared as they are (by exact type: a subclass may compare oddly).
_LEAVES = (str, bytes, int, float, bool, type(None))


class Unkeyable(Exception):
    """A value the memo does not compare."""


def memo_key(value, depth=0):
    """A value as nested tuples that compare equal only for equal values of
    the same types (dicts in their key order); Unkeyable otherwise."""
    kind = type(value)
    if kind is str:
        return value
    if kind in _LEAVES:
        return (kind.__name__, value)
    if depth >= MEMO_DEPTH:
        raise Unkeyable()
    if kind is dict:
        return ("dict",) + tuple((memo_key(k, depth + 1), memo_key(v, depth + 1))
                                 for k, v in value.items())
    if kind is list or kind is tuple:
        return (kind.__name__,) + tuple(memo_key(v, depth + 1) for v in value)
    raise Unkeyable()


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
