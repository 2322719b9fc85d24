"""transitlm.compare.bootstrap: percentiles, paired p-values, packed column
sums and the bootstrap's draws; and the intervals compare.py reports from them
(coverage of a known rate, width against the normal approximation)."""

import math
import os
import random
import statistics
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from transitlm.compare import bootstrap as resampling  # noqa: E402
from tests.support.lane import Offloaded  # noqa: E402


# ---------------------------------------------------------------------------
# transitlm.compare.bootstrap
# ---------------------------------------------------------------------------

class PercentileTest(unittest.TestCase):
    def test_linear_interpolation(self):
        values = [1.0, 2.0, 3.0, 4.0]
        self.assertEqual(resampling.percentile(values, 0.0), 1.0)
        self.assertEqual(resampling.percentile(values, 1.0), 4.0)
        self.assertEqual(resampling.percentile(values, 0.5), 2.5)       # position 1.5
        self.assertAlmostEqual(resampling.percentile(values, 0.25), 1.75)  # position 0.75

    def test_degenerate(self):
        self.assertIsNone(resampling.percentile([], 0.5))
        self.assertEqual(resampling.percentile([7.0], 0.025), 7.0)

    def test_interval_leaves_out_undefined_resamples(self):
        values = [None] + [float(i) for i in range(101)] + [None]
        low, high = resampling.percentile_interval(values, 0.9)
        self.assertAlmostEqual(low, 5.0, places=9)       # position 0.05 * 100
        self.assertAlmostEqual(high, 95.0, places=9)
        self.assertIsNone(resampling.percentile_interval([None, None], 0.95))
        self.assertIsNone(resampling.percentile_interval([], 0.95))


class PValueTest(unittest.TestCase):
    def test_all_zero_differences_give_one(self):
        self.assertEqual(resampling.paired_p_value([0.0] * 50), 1.0)

    def test_all_on_one_side_give_zero(self):
        self.assertEqual(resampling.paired_p_value([0.1, 0.2, 0.3]), 0.0)
        self.assertEqual(resampling.paired_p_value([-0.1, -0.2]), 0.0)

    def test_twice_the_smaller_side(self):
        # one of four at or below zero: 2 * 1/4
        self.assertEqual(resampling.paired_p_value([-1.0, 1.0, 2.0, 3.0]), 0.5)
        # zero counts on both sides: min(2, 3) = 2 of 4 -> 1.0
        self.assertEqual(resampling.paired_p_value([-1.0, 0.0, 2.0, 3.0]), 1.0)

    def test_undefined(self):
        self.assertIsNone(resampling.paired_p_value([]))
        self.assertIsNone(resampling.paired_p_value([None, None]))
        self.assertEqual(resampling.paired_p_value([None, 1.0]), 0.0)


class PackingTest(unittest.TestCase):
    def test_integer_columns_sum_exactly(self):
        columns = [[0, 1, 1, 0, 1], [3, 0, 3, 3, 0], [-2, 5, 0, 1, 1], [True, False] * 2 + [True]]
        packed, layout = resampling.pack_columns(columns, 5)
        self.assertEqual(len(packed), 5)
        self.assertEqual(resampling.unpack_sums(sum(packed), layout, 5), [3, 9, 5, 3])
        # a multiset of rows (row 2 three times, row 0 twice)
        total = packed[2] * 3 + packed[0] * 2
        self.assertEqual(resampling.unpack_sums(total, layout, 5), [3, 15, -4, 5])

    def test_real_columns_sum_to_double_precision(self):
        values = [1 / 3.0, 0.0, 0.75, 2.5e6, 1e-9, 0.1]
        packed, layout = resampling.pack_columns([values, [-0.5, 0.25, 0, 0, 0, 0]], 6)
        sums = resampling.unpack_sums(sum(packed), layout, 6)
        self.assertAlmostEqual(sums[0], math.fsum(values), delta=1e-9)
        self.assertAlmostEqual(sums[1], -0.25, delta=1e-15)

    def test_unpackable_column_is_none(self):
        packed, layout = resampling.pack_columns([[1, None], [1.0, float("nan")], [1, 2]], 2)
        self.assertEqual(resampling.unpack_sums(sum(packed), layout, 2), [None, None, 3])

    def test_no_rows(self):
        packed, layout = resampling.pack_columns([[], []], 0)
        self.assertEqual(packed, [])
        self.assertEqual(resampling.unpack_sums(0, layout, 0), [0, 0])


class BootstrapSumsTest(unittest.TestCase):
    def test_deterministic_for_a_seed(self):
        columns = [[1, 0, 0, 1, 1, 0, 1], [0.5, 0.25, 1.0, 0.0, 0.0, 0.75, 0.1]]
        first = resampling.bootstrap_column_sums(columns, 7, 20, seed=3)
        self.assertEqual(first, resampling.bootstrap_column_sums(columns, 7, 20, seed=3))
        self.assertNotEqual(first, resampling.bootstrap_column_sums(columns, 7, 20, seed=4))
        self.assertEqual(len(first), 20)

    def test_a_resample_draws_n_rows(self):
        ones = [1] * 9
        for sums in resampling.bootstrap_column_sums([ones, list(range(9))], 9, 30, seed=1):
            self.assertEqual(sums[0], 9)
            self.assertTrue(0 <= sums[1] <= 8 * 9)

    def test_draws_match_an_explicit_resample(self):
        # The same rows a plain random.Random(seed).choices draw picks.
        values = [5, 0, 2, 9, 1]
        sums = resampling.bootstrap_column_sums([values], 5, 3, seed=11)
        rng = random.Random(11)
        expected = [[sum(values[i] for i in rng.choices(range(5), k=5))] for _ in range(3)]
        self.assertEqual(sums, expected)

    def test_tiny_inputs(self):
        self.assertEqual(resampling.bootstrap_column_sums([[]], 0, 2, seed=0), [[0], [0]])
        self.assertEqual(resampling.bootstrap_column_sums([[4]], 1, 2, seed=0), [[4], [4]])
        self.assertEqual(resampling.bootstrap_column_sums([[4]], 1, 0, seed=0), [])


# ---------------------------------------------------------------------------
# Interval quality
# ---------------------------------------------------------------------------

# Simulations of many samples (tests/support/interval_quality.py), started as
# the module loads, each in a process of its own beside the suite (pure
# computation: tests.support.Offloaded).  200 independent samples of 100 rows
# with true Conn 0.3, 400 resamples each; one sample of 10000 rows, 1000
# resamples.
COVERAGE_RATE, COVERAGE_SAMPLES = 0.3, 200
COVERAGE = Offloaded("tests.support.interval_quality:coverage_hits", COVERAGE_RATE,
                     COVERAGE_SAMPLES, 100, 400)
WIDE = Offloaded("tests.support.interval_quality:one_interval", 10000, 0.3, 7, 1000, 1)


class IntervalQualityTest(unittest.TestCase):
    def test_coverage_of_a_known_rate(self):
        # The 95 % interval should contain 0.3 about 95 % of the time (fixed
        # seeds: deterministic; the bound is coarse).
        hits = COVERAGE.result()
        self.assertGreaterEqual(hits / COVERAGE_SAMPLES, 0.85)
        self.assertLessEqual(hits / COVERAGE_SAMPLES, 0.99)

    def test_width_matches_the_normal_approximation_at_10000_rows(self):
        found = WIDE.result()
        rate, low, high = found["rate"], found["low"], found["high"]
        z = statistics.NormalDist().inv_cdf(0.975)
        normal_width = 2 * z * math.sqrt(rate * (1 - rate) / 10000)
        self.assertLess(abs((high - low) / normal_width - 1), 0.15)
        self.assertLess(low, rate)
        self.assertGreater(high, rate)


if __name__ == "__main__":
    unittest.main()
