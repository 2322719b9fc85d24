"""--workers: the same records and reports from several processes as from one."""

import csv
import os
import tempfile
import unittest

from tests.golden import PARITY
from tests.helpers import common, run_evaluator
from single_route.evaluate import SingleRoute
from diversity.evaluate import Diversity
from general_llm.evaluate import GeneralLLM

GENERATED = os.path.join(PARITY, "generated")


@unittest.skipUnless(os.path.isdir(GENERATED), "../shared/parity is not available")
@unittest.skipUnless(common._can_fork(), "no fork on this platform")
class Workers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def enlarge(self, name, copies=8):
        """The parity sample file repeated (ids made unique): enough rows for workers."""
        source = os.path.join(GENERATED, name)
        target = os.path.join(self.tmp.name, name)
        with open(source, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
        with open(target, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(rows[0])
            for copy in range(copies):
                for row in rows[1:]:
                    writer.writerow(["%s-%d" % (row[0], copy)] + row[1:])
        return target

    def outputs(self, benchmark, sample, workers, extra=()):
        json_path = os.path.join(self.tmp.name, "r%s.json" % workers)
        details = os.path.join(self.tmp.name, "d%s.jsonl" % workers)
        status, stdout, err = run_evaluator(benchmark, [
            "--input", sample, "--station_info", os.path.join(GENERATED, "station_info.csv"),
            "--workers", str(workers), "--json", json_path, "--details", details]
            + list(extra))
        self.assertEqual(status, 0, err)
        with open(json_path, encoding="utf-8") as a, open(details, encoding="utf-8") as b:
            return a.read(), b.read(), stdout

    def test_identical_outputs(self):
        line_info = ["--line_info", os.path.join(GENERATED, "line_info.csv")]
        for cls, name, extra in ((SingleRoute, "b1.csv", ()), (Diversity, "b3.csv", ()),
                                 (GeneralLLM, "general.csv", line_info)):
            with self.subTest(benchmark=cls.name):
                sample = self.enlarge(name)
                one = self.outputs(cls(), sample, 1, extra)
                two = self.outputs(cls(), sample, 2, extra)
                self.assertEqual(one, two)
                self.assertEqual(one[1].count("\n"), 1200)
