"""Constant memory: a finished row leaves nothing behind.

The evaluators pause the cyclic garbage collector (nothing they build needs
it), so a row that left a reference cycle behind -- an exception kept with its
traceback, whose frames hold the batch of rows -- would never be freed and
memory would grow with the rows.  Here the garbage a run leaves must not grow
with the number of rows, for every kind of row (passed, failed, error).
"""

import unittest

from tests.support.lane import Offloaded

# The runs, counted in a process of their own beside the suite (the lane's
# threads would add garbage of their own to a count made in this process).
COUNTS = Offloaded("tests.support.engine_garbage:garbage_counts", 30, 600)


class NoCyclesPerRow(unittest.TestCase):
    def test_garbage_does_not_grow_with_rows(self):
        counts = COUNTS.result()
        for benchmark in ("single_route", "diversity", "general_llm"):
            with self.subTest(benchmark=benchmark):
                (small, small_statuses), (large, large_statuses) = counts[benchmark]
                expected = (["error", "evaluated", "no_response"] if benchmark == "general_llm"
                            else ["error", "evaluated"])
                self.assertEqual(small_statuses, expected)
                self.assertEqual(large_statuses, expected)
                self.assertLessEqual(large, small + 10, (small, large))


if __name__ == "__main__":
    unittest.main()
