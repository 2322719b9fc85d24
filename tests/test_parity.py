"""Every evaluator over every case folder of ../shared/parity, compared with the
figures the published evaluator printed (golden_*.json) and with the paper
protocol's independent figures (golden_paper_*.json).  Skips when ../shared is
absent."""

import contextlib
import io
import json
import os
import tempfile
import unittest

from tests.support import PARITY, common
from tests.support.parity import golden_differences, load_golden, parity_cases
import transitlm.cli  # noqa: E402

from single_route.evaluate import SingleRoute
from personalized.evaluate import Personalized
from diversity.evaluate import Diversity
from general_llm.evaluate import GeneralLLM

BENCHMARKS = [("b1", SingleRoute), ("b2", Personalized), ("b3", Diversity),
              ("general", GeneralLLM)]


def run_report(benchmark, folder, sample_name, protocol):
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "report.json")
        argv = ["--input", os.path.join(folder, sample_name),
                "--station_info", os.path.join(folder, "station_info.csv"),
                "--protocol", protocol, "--json", out_path, "--quiet"]
        if "line_info" in benchmark.option_defaults():
            argv += ["--line_info", os.path.join(folder, "line_info.csv")]
        with contextlib.redirect_stdout(io.StringIO()):
            status = transitlm.cli.run(benchmark, argv)
        assert status == 0, "exit status %d" % status
        with open(out_path, encoding="utf-8") as handle:
            return json.load(handle)


@unittest.skipUnless(os.path.isdir(PARITY), "../shared/parity is not available")
class Parity(unittest.TestCase):
    def check(self, protocol, golden_pattern):
        checked = 0
        for short, cls in BENCHMARKS:
            golden_name = golden_pattern % short
            for case, folder in parity_cases(golden_name, short + ".csv"):
                with self.subTest(benchmark=short, case=case, protocol=protocol):
                    report = run_report(cls(), folder, short + ".csv", protocol)
                    diffs = golden_differences(load_golden(folder, golden_name), report)
                    self.assertEqual(diffs, [], "\n".join(diffs))
                    checked += 1
        self.assertGreater(checked, 0, "no parity case found")

    def test_reference_protocol_matches_published_figures(self):
        self.check("reference", "golden_%s.json")

    def test_paper_protocol_matches_independent_figures(self):
        self.check("paper", "golden_paper_%s.json")


class GoldenComparator(unittest.TestCase):
    """The comparator itself must be able to fail."""

    def test_rounding_rule(self):
        self.assertEqual(golden_differences({"x": [0.8182, 4]}, {"x": 0.81824}), [])
        self.assertNotEqual(golden_differences({"x": [0.8182, 4]}, {"x": 0.81826}), [])
        self.assertNotEqual(golden_differences({"x": 3}, {"x": 4}), [])
        self.assertNotEqual(golden_differences({"x": {"y": 1}}, {"x": {}}), [])
        self.assertNotEqual(golden_differences({"x": [1.0, 2]}, {"x": None}), [])
