"""transitlm.evaluation.terms: each row's numerator and denominator of every metric, and
their sums reproducing the metrics of the evaluators' own reports (synthetic
rows, the bundled examples, the parity case folders); compare's run metrics
from them (transitlm.compare.metric_terms)."""

import json
import os
import shutil
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import transitlm.api  # noqa: E402
from transitlm.compare import metric_terms  # noqa: E402
from transitlm.evaluation.terms import metric_terms as row_terms  # noqa: E402
from transitlm.compare import run_folders as runs  # noqa: E402
from tests.support import PARITY
from tests.support.synthetic_runs import (error_record, evaluated_record, metrics_of,
                                          synthetic_records)

SCRIPTS = {"single_route": "b1", "personalized": "b2", "diversity": "b3",
           "general_llm": "general"}


def term_sums(benchmark, protocol, records):
    """{metric: sum(num) / sum(den)} from transitlm.evaluation.terms.metric_terms."""
    totals = {}
    for record in records:
        for key, (num, den) in row_terms(benchmark, protocol, record).items():
            acc = totals.setdefault(key, [0, 0])
            acc[0] += num
            acc[1] += den
    return {key: (num / den if den else None) for key, (num, den) in totals.items()}


# ---------------------------------------------------------------------------
# Per-row terms
# ---------------------------------------------------------------------------

class MetricTermsTest(unittest.TestCase):
    def terms(self, record, benchmark="single_route", protocol="reference"):
        return row_terms(benchmark, protocol, record)

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


if __name__ == "__main__":
    unittest.main()
