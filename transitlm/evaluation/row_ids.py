"""Test rows that repeat an earlier row's id.

Rows are told apart by their id (a predictions file is joined by it,
compare.py pairs runs by it), so a test file that gives two rows one id is
worth a warning, also when the answers are in the file itself.  ``RowIds``
keeps 16 bytes a row: each id's 64-bit hash (Python's own, about 0.1 us; the
worker processes are forked, so they hash as the parent does) in row order,
and again in one of 256 buckets by its low byte; and the text of the first
KEEP_IDS ids (for the examples).  After the run ``repeats()`` sorts each
bucket (in C, a few thousand hashes at a time however long the file) to
find the hashes seen twice, then reads the row order for those only.  Rows
folded in worker processes send their hashes to the parent, which appends
them in input order (``state``/``merge``), so row n is hash n - 1.

Two different ids share a 64-bit hash with a chance of about n^2 / 2^65 for
n rows (3 in 10^8 at a million rows): a false repeat is that unlikely.

Standard library only; Python 3.8+.
"""

import array
import itertools

KEEP_IDS = 10000          # ids kept as text, for the examples of a warning
EXAMPLES = 5
BUCKETS = 256


def id_hash(index_id):
    """The 64-bit hash of an id (its text; None as "null")."""
    return hash("null" if index_id is None else str(index_id))


class RowIds(object):
    """The ids of a run's rows, in row order (see the module's docstring)."""

    __slots__ = ("hashes", "buckets", "ids")

    def __init__(self):
        self.hashes = array.array("q")
        self.buckets = [array.array("q") for _ in range(BUCKETS)]
        self.ids = []

    def add(self, index_id):
        value = id_hash(index_id)
        self.hashes.append(value)
        self.buckets[value & 0xff].append(value)
        if len(self.ids) < KEEP_IDS:
            self.ids.append(index_id)

    def state(self):
        """What a worker's RowIds holds, picklable, for merge()."""
        return (self.hashes.tobytes(), [bucket.tobytes() for bucket in self.buckets],
                self.ids)

    def merge(self, state):
        data, buckets, ids = state
        self.hashes.frombytes(data)
        for bucket, more in zip(self.buckets, buckets):
            bucket.frombytes(more)
        room = KEEP_IDS - len(self.ids)
        if room > 0:
            self.ids.extend(ids[:room])

    def repeated_hashes(self):
        """The hashes seen more than once (a set)."""
        found = set()
        for bucket in self.buckets:
            if len(bucket) > 1:
                ordered = sorted(bucket)
                found.update(a for a, b in zip(ordered, itertools.islice(ordered, 1, None))
                             if a == b)
        return found

    def repeats(self):
        """(how many rows repeat an earlier row's id, examples): the first
        EXAMPLES such rows as (row, the first row with its id, the id, or
        None when not kept)."""
        repeated = self.repeated_hashes()
        if not repeated:
            return 0, []
        first, count, examples = {}, 0, []
        for position, value in enumerate(self.hashes):
            if value not in repeated:
                continue
            if value not in first:
                first[value] = position
                continue
            count += 1
            if len(examples) < EXAMPLES:
                original = first[value]
                examples.append((position + 1, original + 1,
                                 self.ids[original] if original < len(self.ids) else None))
        return count, examples

    def warning(self):
        """The report's warning line about repeated ids, or None."""
        count, examples = self.repeats()
        if not count:
            return None
        shown = ", ".join("%s (rows %d and %d)" % (_short(index_id), original, row)
                          if index_id is not None else "rows %d and %d" % (original, row)
                          for row, original, index_id in examples)
        return ("%d test row(s) repeat an earlier row's id, e.g. %s: rows are told apart by "
                "id (a predictions file is joined and compare.py pairs runs by it), so give "
                "each row an id of its own" % (count, shown))


def _short(index_id, limit=40):
    text = "null" if index_id is None else str(index_id)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"
