"""compare.py and its machinery (transitlm.compare.bootstrap, metric_terms, runs,
comparison, breakdowns, compare_formats, compare_cli): resampling statistics,
per-row metric terms, pairing, significance, formats and the command line."""

import csv
import io
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import unittest
from unittest import mock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


import transitlm.api  # noqa: E402
from transitlm.compare import group_figures as comparison  # noqa: E402
from transitlm.compare import metric_terms  # noqa: E402
from transitlm.compare import bootstrap as resampling  # noqa: E402
from transitlm.compare import run_folders as runs  # noqa: E402
from tests.support import (  # noqa: E402
    error_record, evaluated_record, metrics_of, run_compare, synthetic_records)

SHARED = os.path.join(REPO, "..", "shared")
PARITY = os.path.join(SHARED, "parity")
SCRIPTS = {"single_route": "b1", "personalized": "b2", "diversity": "b3",
           "general_llm": "general"}


# ---------------------------------------------------------------------------
# Synthetic details records and run folders
# ---------------------------------------------------------------------------


def write_run(folder, records, benchmark="single_route", protocol="reference",
              metrics=None):
    """A run folder as --out writes it: report.json and details.jsonl."""
    os.makedirs(folder, exist_ok=True)
    report = {"schema_version": 2, "version": "test", "benchmark": benchmark,
              "protocol": protocol,
              "signature": "transitlm:test|%s|protocol:%s|rows:%d"
                           % (benchmark, protocol, len(records)),
              "counts": {"samples": len(records)},
              "metrics": metrics_of(benchmark, protocol, records) if metrics is None
              else metrics}
    with open(os.path.join(folder, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, ensure_ascii=False)
    with open(os.path.join(folder, "details.jsonl"), "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return folder


def term_sums(benchmark, protocol, records):
    """{metric: sum(num) / sum(den)} from metric_terms.metric_terms."""
    totals = {}
    for record in records:
        for key, (num, den) in metric_terms.metric_terms(benchmark, protocol, record).items():
            acc = totals.setdefault(key, [0, 0])
            acc[0] += num
            acc[1] += den
    return {key: (num / den if den else None) for key, (num, den) in totals.items()}


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="compare_test_")
        self.addCleanup(shutil.rmtree, self.tmp)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


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
# Per-row terms
# ---------------------------------------------------------------------------

class MetricTermsTest(unittest.TestCase):
    def terms(self, record, benchmark="single_route", protocol="reference"):
        return metric_terms.metric_terms(benchmark, protocol, record)

    def test_error_row_in_round_one(self):
        terms = self.terms(error_record(1, "x"))
        self.assertEqual(terms["conn"], (0, 1))
        for key in ("sg", "dp", "lo", "sso", "rem"):
            self.assertEqual(terms[key], (0, 0))
        self.assertEqual(terms["ea"], (0, 0))
        self.assertEqual(terms["mape"], (0, 0))

    def test_error_row_outside_round_one(self):
        self.assertEqual(self.terms(error_record(1, "x", in_funnel=False))["conn"], (0, 0))

    def test_unreachable_row(self):
        terms = self.terms(evaluated_record(1, "x", reachable=False, exact=False))
        self.assertEqual(terms["conn"], (0, 1))
        self.assertEqual(terms["lo"], (0, 0))
        self.assertEqual(terms["rem"], (0, 0))

    def test_reachable_row_that_is_not_an_exact_match(self):
        terms = self.terms(evaluated_record(1, "x", exact=False, grounded=False,
                                            line_iou=0.25, station_iou=0.5, mape=40.0))
        self.assertEqual(terms["conn"], (1, 1))
        self.assertEqual(terms["sg"], (0, 1))
        self.assertEqual(terms["dp"], (1, 1))
        self.assertEqual(terms["lo"], (0.25, 1))
        self.assertEqual(terms["sso"], (0.5, 1))
        self.assertEqual(terms["rem"], (0, 1))
        self.assertEqual(terms["ea"], (0, 0))          # accuracy only on exact matches
        self.assertEqual(terms["mape"], (0, 0))

    def test_exact_match_counts_three_estimates(self):
        record = evaluated_record(1, "x", mape=0.0, distance_accurate=False,
                                  distance_mape_pct=30.0, time_mape_pct=6.0)
        terms = self.terms(record)
        self.assertEqual(terms["ea"], (2, 3))
        self.assertEqual(terms["mape"], (36.0, 3))     # (30 + 6 + 0) / 3 per row

    def test_null_figure_leaves_the_numerator_none(self):
        terms = self.terms(evaluated_record(1, "x", fare_mape_pct=None))
        self.assertIsNone(terms["mape"][0])
        self.assertEqual(terms["mape"][1], 3)

    def test_wrong_type_is_an_error(self):
        with self.assertRaises(ValueError):
            self.terms(evaluated_record(1, "x", line_iou="1.0"))

    def test_preference_scope_per_protocol(self):
        compliant = evaluated_record(1, "x", req_type=2, compliant=True, label_compliant=True)
        unknown = evaluated_record(2, "y", req_type=3, compliant=True, label_compliant=True)
        failed = dict(error_record(3, "z"), req_type=5)
        for protocol, expected in (("reference", [(1, 1), (1, 1), (0, 0)]),
                                   ("paper", [(1, 1), (0, 0), (0, 1)])):
            got = [self.terms(r, "personalized", protocol)["pc"]
                   for r in (compliant, unknown, failed)]
            self.assertEqual(got, expected, protocol)

    def test_route_diversity_scope_per_protocol(self):
        two = evaluated_record(1, "x", rd=0.5, route_count=2)
        one = evaluated_record(2, "y", rd=0.0, route_count=1)
        failed = error_record(3, "z")
        reference = [self.terms(r, "diversity", "reference")["rd"] for r in (two, one, failed)]
        paper = [self.terms(r, "diversity", "paper")["rd"] for r in (two, one, failed)]
        self.assertEqual(reference, [(0.5, 1), (0, 0), (0, 0)])
        self.assertEqual(paper, [(0.5, 1), (0.0, 1), (0, 1)])

    def test_no_scenario_terms_elsewhere(self):
        terms = self.terms(evaluated_record(1, "x"))
        self.assertNotIn("pc", terms)
        self.assertNotIn("rd", terms)


class TermsReproduceMetricsTest(unittest.TestCase):
    """sum(numerators) / sum(denominators) equals the engine's metrics."""

    def assert_same_metrics(self, expected, got, where):
        self.assertEqual(sorted(k for k in expected), sorted(k for k in got), where)
        for key, value in expected.items():
            if value is None:
                self.assertIsNone(got[key], "%s %s" % (where, key))
            else:
                self.assertAlmostEqual(got[key], value, places=9, msg="%s %s" % (where, key))

    def test_synthetic_rows(self):
        records = synthetic_records(500, 0.7, seed=5)
        for protocol in ("reference", "paper"):
            self.assert_same_metrics(metrics_of("single_route", protocol, records),
                                     term_sums("single_route", protocol, records), protocol)

    def test_no_rows(self):
        self.assertEqual(term_sums("single_route", "reference", []), {})

    def run_folder_cases(self, cases, folder):
        """cases: (benchmark, protocol, extra argv); run each evaluator into a
        run folder in `folder` and check the terms against report.json.  The
        evaluators run in-process, through the Python API's run folder (the
        same bytes as --out's: tests/test_provenance.py)."""
        for benchmark, protocol, argv in cases:
            out = os.path.join(folder, "%s-%s" % (benchmark, protocol))
            options = {flag[2:]: value for flag, value in zip(argv[::2], argv[1::2])}
            transitlm.api.evaluate(benchmark, protocol=protocol, out=out, overwrite=True,
                                   **options)
            with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
                report = json.load(handle)
            records = runs.read_details(os.path.join(out, "details.jsonl"))
            where = "%s %s %s" % (benchmark, protocol, " ".join(argv))
            self.assert_same_metrics(report["metrics"],
                                     term_sums(benchmark, protocol, records), where)
            self.assertEqual(metric_terms.run_metrics(runs.load_run(out))[0],
                             report["metrics"], where)

    def test_bundled_examples(self):
        folder = tempfile.mkdtemp(prefix="compare_terms_")
        self.addCleanup(shutil.rmtree, folder)
        self.run_folder_cases([(b, p, []) for b in SCRIPTS for p in ("reference", "paper")],
                              folder)

    @unittest.skipUnless(os.path.isdir(PARITY), "../shared/parity not present")
    def test_parity_case_folders(self):
        folder = tempfile.mkdtemp(prefix="compare_parity_")
        self.addCleanup(shutil.rmtree, folder)
        cases = []
        for case in sorted(os.listdir(PARITY)):
            case_dir = os.path.join(PARITY, case)
            for benchmark, stem in SCRIPTS.items():
                sample = os.path.join(case_dir, stem + ".csv")
                if not os.path.isfile(sample):
                    continue
                argv = ["--input", sample,
                        "--station_info", os.path.join(case_dir, "station_info.csv")]
                if benchmark == "general_llm":
                    argv += ["--line_info", os.path.join(case_dir, "line_info.csv")]
                for protocol in ("reference", "paper"):
                    cases.append((benchmark, protocol, argv))
        self.assertTrue(cases)
        self.run_folder_cases(cases, folder)


# ---------------------------------------------------------------------------
# Interval quality and significance
# ---------------------------------------------------------------------------

def conn_interval(records, resamples, seed, confidence=0.95):
    columns = metric_terms.term_columns(FakeRun(), records, ["conn"])
    series = [(columns[0]["conn"], columns[1]["conn"])]
    draws = comparison.resampled_metrics(series, len(records), resamples, seed)[0]
    return resampling.percentile_interval(draws, confidence)


class FakeRun(object):
    benchmark, protocol, details_path = "single_route", "reference", "<memory>"


def bernoulli_records(n, rate, seed):
    rng = random.Random(seed)
    return [evaluated_record(i + 1, "r%d" % i, reachable=rng.random() < rate)
            for i in range(n)]


class IntervalQualityTest(unittest.TestCase):
    def test_coverage_of_a_known_rate(self):
        # 200 independent samples of 100 rows with true Conn 0.3: the 95 %
        # interval should contain 0.3 about 95 % of the time (fixed seeds:
        # deterministic; the bound is coarse).
        true_rate, hits, draws = 0.3, 0, 200
        for seed in range(draws):
            low, high = conn_interval(bernoulli_records(100, true_rate, seed), 400, seed)
            hits += low <= true_rate <= high
        self.assertGreaterEqual(hits / draws, 0.85)
        self.assertLessEqual(hits / draws, 0.99)

    def test_width_matches_the_normal_approximation_at_10000_rows(self):
        records = bernoulli_records(10000, 0.3, seed=7)
        rate = sum(r["reachable"] for r in records) / len(records)
        low, high = conn_interval(records, 1000, seed=1)
        z = statistics.NormalDist().inv_cdf(0.975)
        normal_width = 2 * z * math.sqrt(rate * (1 - rate) / len(records))
        self.assertLess(abs((high - low) / normal_width - 1), 0.15)
        self.assertLess(low, rate)
        self.assertGreater(high, rate)


class SignificanceTest(TempDirTest):
    def test_clearly_better_run_is_significant_and_a_run_is_not_against_itself(self):
        rng = random.Random(2)
        worse, better = [], []
        for i in range(300):
            u = rng.random()
            # paired rows: the better model reaches every row the worse one reaches
            worse.append(evaluated_record(i + 1, "id%d" % i, reachable=u < 0.6))
            better.append(evaluated_record(i + 1, "id%d" % i, reachable=u < 0.9))
        a = write_run(self.path("worse"), worse)
        b = write_run(self.path("better"), better)
        status, _, err = run_compare([a, b, a, "--names", "worse,better,again",
                                      "--json", self.path("c.json")])
        self.assertEqual(status, 0, err)
        with open(self.path("c.json"), encoding="utf-8") as handle:
            result = json.load(handle)
        by = {(c["run"], c["metric"]): c for c in result["comparisons"]}
        self.assertTrue(by[("better", "conn")]["significant"])
        self.assertAlmostEqual(by[("better", "conn")]["delta"], 0.3, delta=0.06)
        self.assertGreater(by[("better", "conn")]["ci"][0], 0)
        self.assertEqual(by[("better", "conn")]["p_value"], 0.0)
        for key in metric_terms.metric_names("single_route", result["runs"][0]["metrics"]):
            self.assertEqual(by[("again", key)]["delta"], 0.0 if by[("again", key)]["delta"]
                             is not None else None)
            self.assertFalse(by[("again", key)]["significant"], key)
        self.assertEqual(by[("again", "conn")]["p_value"], 1.0)
        self.assertEqual(by[("again", "conn")]["ci"], [0.0, 0.0])
        self.assertNotIn(("worse", "conn"), by)          # no baseline-vs-baseline entry


# ---------------------------------------------------------------------------
# The command line end to end
# ---------------------------------------------------------------------------

class CompareCommandTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.records = synthetic_records(120, 0.8, seed=1)
        degraded = []
        for record in self.records:
            record = dict(record)
            if record["status"] == "evaluated" and record["row"] % 4 == 0:
                record.update(reachable=False, failed_round="reachability",
                              failure_codes=["reachability.not_connected"])
            degraded.append(record)
        self.degraded = degraded
        self.a = write_run(self.path("model_a"), self.records)
        self.b = write_run(self.path("model_b"), self.degraded)

    def compare_json(self, argv):
        path = self.path("out.json")
        status, out, err = run_compare(list(argv) + ["--json", path])
        self.assertEqual(status, 0, err)
        with open(path, encoding="utf-8") as handle:
            return json.load(handle), out

    def test_json_layout_and_values_equal_the_reports(self):
        result, out = self.compare_json([self.a, self.b, "--by", "city"])
        self.assertEqual(result["schema_version"], 2)
        self.assertEqual((result["confidence"], result["bootstrap"], result["seed"]),
                         (0.95, 1000, comparison.DEFAULT_SEED))
        self.assertEqual(result["baseline"], "model_a")          # folder name, first run
        self.assertEqual(result["rows"]["paired"], 120)
        self.assertEqual(result["rows"]["missing"]["count"], 0)
        self.assertEqual([r["name"] for r in result["runs"]], ["model_a", "model_b"])
        for run, records in zip(result["runs"], (self.records, self.degraded)):
            self.assertEqual(run["rows"], 120)
            self.assertEqual(list(run["metrics"]),
                             ["conn", "sg", "dp", "lo", "sso", "rem", "ea", "mape"])
            expected = metrics_of("single_route", "reference", records)
            for key, figure in run["metrics"].items():
                self.assertEqual(figure["value"], expected[key])
                low, high = figure["ci"]
                self.assertLessEqual(low, figure["value"] + 1e-12)
                self.assertGreaterEqual(high, figure["value"] - 1e-12)
        conn = [c for c in result["comparisons"] if c["metric"] == "conn"][0]
        self.assertEqual(set(conn), {"run", "metric", "delta", "ci", "p_value", "significant"})
        self.assertEqual(conn["delta"], result["runs"][1]["metrics"]["conn"]["value"]
                         - result["runs"][0]["metrics"]["conn"]["value"])
        self.assertTrue(conn["significant"])
        self.assertIn("Conn %", out)

    def test_same_inputs_and_seed_give_identical_bytes(self):
        outputs = []
        for _ in range(2):
            outputs.append(run_compare([self.a, self.b, "--format", "csv", "--seed", "9",
                                        "--json", self.path("x.json")]))
            with open(self.path("x.json"), "rb") as handle:
                outputs.append(handle.read())
        self.assertEqual(outputs[0], outputs[2])
        self.assertEqual(outputs[1], outputs[3])
        other = run_compare([self.a, self.b, "--format", "csv", "--seed", "10"])
        self.assertNotEqual(other[1], outputs[0][1])

    def test_bootstrap_zero_gives_no_intervals(self):
        result, out = self.compare_json([self.a, self.b, "--bootstrap", "0"])
        self.assertTrue(all(f["ci"] is None for run in result["runs"]
                            for f in run["metrics"].values()))
        self.assertTrue(all(c["ci"] is None and c["p_value"] is None and not c["significant"]
                            for c in result["comparisons"]))
        self.assertNotIn("[", out.split("Metrics")[1].split("\n")[2])

    def test_missing_rows_are_reported_and_left_out_of_the_pairs(self):
        short = write_run(self.path("short"), self.degraded[:100])
        result, text = self.compare_json([self.a, short])
        self.assertEqual(result["rows"]["paired"], 100)
        missing = result["rows"]["missing"]
        self.assertEqual(missing["count"], 20)
        self.assertEqual(missing["runs"]["short"]["count"], 20)
        self.assertEqual(missing["runs"]["short"]["first_ids"][:2], ["id00100", "id00101"])
        # each run's value is over all its rows, the delta over the paired rows
        self.assertEqual(result["runs"][0]["metrics"]["conn"]["value"],
                         metrics_of("single_route", "reference", self.records)["conn"])
        paired_delta = (metrics_of("single_route", "reference", self.degraded[:100])["conn"]
                        - metrics_of("single_route", "reference", self.records[:100])["conn"])
        conn = [c for c in result["comparisons"] if c["metric"] == "conn"][0]
        self.assertAlmostEqual(conn["delta"], paired_delta, places=12)
        self.assertIn("20 row(s) are missing", text)
        for fmt in ("markdown", "latex"):
            self.assertIn("20 row(s) are missing", run_compare([self.a, short, "--format",
                                                                fmt])[1], fmt)
        rows = list(csv.DictReader(io.StringIO(run_compare([self.a, short, "--format",
                                                             "csv"])[1])))
        self.assertTrue(all(r["missing_rows"] == "20" and r["paired_rows"] == "100"
                            for r in rows if r["section"] == "metrics"))

    def test_a_runs_interval_is_over_its_own_rows_with_the_shared_draws(self):
        alone, _ = self.compare_json([self.a])
        together, _ = self.compare_json([self.a, self.b])
        short = write_run(self.path("short"), self.degraded[:100])
        with_missing, _ = self.compare_json([self.a, short])
        self.assertEqual(alone["runs"][0]["metrics"], together["runs"][0]["metrics"])
        self.assertEqual(alone["runs"][0]["metrics"], with_missing["runs"][0]["metrics"])
        # b's interval in the pair equals b's interval alone: the same drawn rows
        b_alone, _ = self.compare_json([self.b])
        self.assertEqual(b_alone["runs"][0]["metrics"], together["runs"][1]["metrics"])

    def test_details_file_with_its_report_beside_it(self):
        os.rename(os.path.join(self.a, "details.jsonl"), os.path.join(self.a, "run7.jsonl"))
        os.rename(os.path.join(self.a, "report.json"), os.path.join(self.a, "run7.json"))
        result, _ = self.compare_json([os.path.join(self.a, "run7.jsonl"), self.b,
                                       "--names", "x,y", "--baseline", "y"])
        self.assertEqual([r["name"] for r in result["runs"]], ["x", "y"])
        self.assertEqual(result["baseline"], "y")
        self.assertEqual({c["run"] for c in result["comparisons"]}, {"x"})

    def test_formats(self):
        _, markdown, _ = run_compare([self.a, self.b, "--format", "markdown"])
        table = [line for line in markdown.splitlines() if line.startswith("|")]
        self.assertTrue(table[1].startswith("|---|---|---:|"))
        self.assertEqual(len({line.count("|") for line in table[:4]}), 1)
        self.assertIn("| model_a | - | 120 |", markdown)
        _, latex, _ = run_compare([self.a, self.b, "--format", "latex"])
        for part in (r"\begin{tabular}", r"\toprule", r"\midrule", r"\bottomrule",
                     r"\end{tabular}", r"\textbf{", r"$\pm$", "model\\_a"):
            self.assertIn(part, latex)
        # the better run holds the bold Conn value
        row_a = [l for l in latex.splitlines() if l.startswith("model\\_a")][0]
        self.assertTrue(row_a.split(" & ")[2].startswith(r"\textbf{"))
        _, text, _ = run_compare([self.a, self.b, "--format", "csv"])
        rows = [row for row in csv.DictReader(io.StringIO(text))
                if row["section"] == "metrics"]
        self.assertEqual(len(rows), 2 * 8)
        self.assertEqual(rows[0]["run"], "model_a")
        self.assertEqual(rows[0]["delta"], "")
        self.assertEqual(rows[8]["significant"], "true")

    def test_breakdowns(self):
        result, text = self.compare_json([self.a, self.b, "--by", "city", "--by", "failure"])
        cities = result["breakdowns"]["city"]
        self.assertEqual([c["city"] for c in cities][-1], None)   # error rows have no city
        for entry in cities:
            for name in ("model_a", "model_b"):
                records = [r for r in (self.records if name == "model_a" else self.degraded)
                           if r["city"] == entry["city"]]
                self.assertEqual(entry["rows"][name], len(records))
                self.assertEqual(entry["metrics"][name],
                                 metrics_of("single_route", "reference", records))
        failure = result["breakdowns"]["failure"]
        stages = [s["stage"] for s in failure["stages"]]
        self.assertEqual(stages[0], "reachability")
        totals = [sum(s["rows"].values()) for s in failure["stages"]]
        self.assertEqual(totals, sorted(totals, reverse=True))
        unreachable = sum(1 for r in self.degraded if r["status"] == "evaluated"
                          and not r["reachable"])
        code = [c for c in failure["codes"] if c["code"] == "reachability.not_connected"][0]
        self.assertEqual(code["rows"]["model_b"], unreachable)
        self.assertEqual(failure["passed"]["model_a"],
                         sum(1 for r in self.records if not r["failure_codes"]))
        self.assertIn("By failure code", text)
        self.assertIn("北京", text)

    def test_req_type_breakdown(self):
        records = []
        for i in range(40):
            req = (2, 5, 7, 8)[i % 4]
            records.append(evaluated_record(i + 1, "p%d" % i, req_type=req,
                                            compliant=i % 3 != 0, label_compliant=True))
        a = write_run(self.path("p1"), records, benchmark="personalized")
        result, text = self.compare_json([a, a, "--names", "m,n", "--by", "req_type"])
        rows = {e["req_type"]: e for e in result["breakdowns"]["req_type"]}
        self.assertEqual(sorted(rows), ["2", "5", "7", "8"])
        self.assertEqual(rows["2"]["runs"]["m"]["samples"], 10)
        compliant = sum(1 for i in range(0, 40, 4) if i % 3 != 0)
        self.assertEqual(rows["2"]["runs"]["m"]["compliant"], compliant)
        self.assertIn("pc", result["runs"][0]["metrics"])
        status, _, err = run_compare([self.a, "--by", "req_type"])
        self.assertEqual(status, 2)
        self.assertIn("personalized", err)

    def test_html_wiring(self):
        import transitlm.compare.page
        path = self.path("c.html")
        status, _, err = run_compare([self.a, self.b, "--html", path,
                                      "--json", self.path("c.json")])
        self.assertEqual(status, 0, err)
        with open(self.path("c.json"), encoding="utf-8") as handle:
            result = json.load(handle)
        with open(path, encoding="utf-8") as handle:
            self.assertEqual(handle.read(), transitlm.compare.page.comparison_page(result))

    def test_html_without_its_module_is_a_usage_error(self):
        with mock.patch.dict(sys.modules, {"transitlm.pages": None, "transitlm.compare.page": None}):
            status, out, err = run_compare([self.a, "--html", self.path("c.html")])
        self.assertEqual(status, 2)
        self.assertIn("transitlm.pages", err)
        self.assertFalse(os.path.exists(self.path("c.html")))


class CompareInputErrorTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.records = synthetic_records(30, 0.8, seed=4)
        self.a = write_run(self.path("a"), self.records)

    def assert_usage_error(self, argv, *fragments):
        status, out, err = run_compare(argv)
        self.assertEqual(status, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        for fragment in fragments:
            self.assertIn(fragment, err)

    def test_missing_run(self):
        self.assert_usage_error([self.path("nope")], "nope")
        os.remove(os.path.join(self.a, "details.jsonl"))
        self.assert_usage_error([self.a], "details.jsonl")

    def test_different_protocols_form_groups_and_req_type_needs_benchmark_2(self):
        c = write_run(self.path("c"), self.records, protocol="paper")
        status, out, err = run_compare([self.a, c, "--names", "m,m", "--format", "csv"])
        self.assertEqual(status, 0, err)
        groups = {(r["benchmark"], r["protocol"]) for r in csv.DictReader(io.StringIO(out))
                  if r["section"] == "metrics"}
        self.assertEqual(groups, {("single_route", "reference"), ("single_route", "paper")})
        self.assert_usage_error([self.a, c, "--by", "req_type"], "needs benchmark 2")

    def test_metrics_that_do_not_match_the_report(self):
        metrics = metrics_of("single_route", "reference", self.records)
        metrics["conn"] += 0.01
        b = write_run(self.path("b"), self.records, metrics=metrics)
        self.assert_usage_error([b], "conn", "do not belong together")

    def test_unreadable_details_lines(self):
        path = os.path.join(self.a, "details.jsonl")
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
        for bad, message in (("{not json\n", "line 3: not JSON"),
                             ("[1, 2]\n", "line 3: expected a JSON object"),
                             ("\n", "line 3: empty line"),
                             ('{"row": 3}\n', "line 3: no 'index_id' key"),
                             ('{"index_id": "q", "status": 5, "in_funnel": true}\n',
                              "line 3: status 5 is not one of"),
                             ('{"index_id": "q", "status": "error", "in_funnel": 1}\n',
                              "line 3: in_funnel is")):
            with open(path, "w", encoding="utf-8") as handle:
                handle.writelines(lines[:2] + [bad] + lines[3:])
            self.assert_usage_error([self.a], path, message)

    def test_a_missing_verdict_is_named(self):
        records = [dict(r) for r in self.records]
        reachable = next(i for i, r in enumerate(records) if r.get("reachable"))
        del records[reachable]["line_iou"]
        write_run(self.path("b"), self.records)          # report from the full records
        with open(self.path("b", "details.jsonl"), "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.assert_usage_error([self.path("b")], "line %d: no 'line_iou' key" % (reachable + 1))

    def test_wrong_type_figure(self):
        records = [dict(r) for r in self.records]
        reachable = next(i for i, r in enumerate(records) if r.get("reachable"))
        records[reachable]["line_iou"] = "0.5"
        self.write_details(records)
        status, _, err = run_compare([self.a])
        self.assertEqual(status, 2)
        self.assertNotIn("Traceback", err)

    def write_details(self, records):
        with open(os.path.join(self.a, "details.jsonl"), "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    def test_row_count_differs_from_the_report(self):
        self.write_details(self.records[:-1])
        self.assert_usage_error([self.a], "do not belong together")

    def test_bad_options(self):
        self.assert_usage_error([self.a, "--baseline", "zzz"], "--baseline zzz")
        self.assert_usage_error([self.a, self.a, "--names", "one"], "--names")
        self.assert_usage_error([self.a, self.a, "--names", "x,x"], "repeats")
        self.assert_usage_error([self.a, "--bootstrap", "-1"], "--bootstrap")
        self.assert_usage_error([self.a, "--confidence", "95"], "--confidence")

    def test_breakdown_keys_are_required_when_asked_for(self):
        self.write_details([{k: v for k, v in r.items() if k != "failure_codes"}
                            for r in self.records])
        self.assert_usage_error([self.a, "--by", "failure"], "line 1: no 'failure_codes' key")
        self.write_details([dict(r, failure_codes="reachability.x") for r in self.records])
        self.assert_usage_error([self.a, "--by", "failure"],
                                "failure_codes is text, expected a list of texts")

    def test_default_names_stay_unique(self):
        status, out, err = run_compare([self.a, self.a, "--format", "csv"])
        self.assertEqual(status, 0, err)
        names = [r["run"] for r in csv.DictReader(io.StringIO(out))
                 if r["section"] == "metrics" and r["metric"] == "conn"]
        self.assertEqual(names, [os.path.normpath(self.a), os.path.normpath(self.a) + "#2"])
        status, out, err = run_compare([self.a, "--format", "csv"])
        self.assertEqual([r["run"] for r in csv.DictReader(io.StringIO(out))][0], "a")


if __name__ == "__main__":
    unittest.main()
