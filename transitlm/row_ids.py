"""Test rows that repeat an earlier row's id.

Rows are told apart by their id (a predictions file is joined by it,
compare.py pairs runs by it), so a test file that gives two rows one id is
worth a warning, also when the answers are in the file itself.  ``RowIds``
keeps 8 bytes a row (a 64-bit BLAKE2b hash of the id, in row order) and the
text of the first KEEP_IDS ids (for the examples); after the run its
``repeats()`` sorts the hashes in 256 buckets and finds the repeats.  Rows
folded in worker processes send their hashes to the parent, which appends
them in input order (``state``/``merge``), so row n is hash n - 1.

Standard library only; Python 3.8+.
"""

import array
import hashlib
import heapq

KEEP_IDS = 10000          # ids kept as text, for the examples of a warning
EXAMPLES = 5


def id_hash(index_id):
    """A 64-bit hash of an id (its text; None as "null")."""
    text = "null" if index_id is None else str(index_id)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class RowIds(object):
    """The ids of a run's rows, in row order (see the module's docstring)."""

    __slots__ = ("hashes", "ids")

    def __init__(self):
        self.hashes = array.array("q")
        self.ids = []

    def add(self, index_id):
        self.hashes.append(id_hash(index_id))
        if len(self.ids) < KEEP_IDS:
            self.ids.append(index_id)

    def state(self):
        """What a worker's RowIds holds, picklable, for merge()."""
        return self.hashes.tobytes(), self.ids

    def merge(self, state):
        data, ids = state
        self.hashes.frombytes(data)
        room = KEEP_IDS - len(self.ids)
        if room > 0:
            self.ids.extend(ids[:room])

    def repeats(self):
        """(how many rows repeat an earlier row's id, examples): the first
        EXAMPLES such rows as (row, the row whose id it repeats, the id or
        None when not kept)."""
        hashes = self.hashes
        if len(hashes) < 2:
            return 0, []
        buckets = [array.array("l") for _ in range(256)]
        for position, value in enumerate(hashes):
            buckets[(value >> 56) & 0xff].append(position)
        count, first = 0, []
        for bucket in buckets:
            if len(bucket) < 2:
                continue
            order = sorted(bucket, key=hashes.__getitem__)     # ties: in row order
            start = 0
            for index in range(1, len(order) + 1):
                if index < len(order) and hashes[order[index]] == hashes[order[start]]:
                    continue
                if index - start > 1:
                    original = order[start]
                    count += index - start - 1
                    # a group is in row order: its first repeats are its earliest
                    first = heapq.nsmallest(EXAMPLES, first + [
                        (position, original)
                        for position in order[start + 1:min(index, start + 1 + EXAMPLES)]])
                start = index
        ids = self.ids
        return count, [(position + 1, original + 1,
                        ids[original] if original < len(ids) else None)
                       for position, original in sorted(first)]

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
