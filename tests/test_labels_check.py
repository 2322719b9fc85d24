"""The labels scored as answers read as a sanity check (issue 39.3): the
text report, report.json and the page say how many labels fail and why, by
failure code -- the general LLM's labels 82.4 % connected under the
published rules (a one-line label's intermediate stations) and 100 % under
the paper's; worker processes count the same; a model's run has no such
section."""

import contextlib
import io
import json
import os
import tempfile
import unittest

import transitlm
import transitlm.evaluation.inputs
import transitlm.evaluation.workers
from general_llm.evaluate import GeneralLLM
from personalized.evaluate import Personalized
from tests.support import REPO
from transitlm.cli import run as run_cli

DATA = os.path.join(REPO, "data")
GENERAL = os.path.join(DATA, "general_llm_example.csv")
COUNT_MISMATCH = "reachability.count_mismatch"


class LabelsCheck(unittest.TestCase):
    def test_the_general_llms_labels_under_both_protocols(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run")
            with contextlib.redirect_stdout(io.StringIO()):
                status = run_cli(GeneralLLM(), ["--input", GENERAL, "--input_field",
                                                "sft_label", "--out", out, "--quiet"])
            self.assertEqual(status, 0)
            with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
                report = json.load(handle)
            check = report["labels_check"]
            self.assertEqual((check["labels"], check["failing"]), (34, 6))
            self.assertEqual(list(check["by_code"]), [COUNT_MISMATCH])
            self.assertEqual(check["by_code"][COUNT_MISMATCH]["rows"], 6)
            self.assertIn("intermediate stations", check["by_code"][COUNT_MISMATCH]["why"])
            self.assertEqual(round(report["metrics"]["conn"] * 100, 1), 82.4)
            with open(os.path.join(out, "report.txt"), encoding="utf-8") as handle:
                text = handle.read()
            with open(os.path.join(out, "report.html"), encoding="utf-8") as handle:
                page = handle.read()
            self.assertIn("Labels check (the labels scored as answers: a sanity check)\n"
                          "  6 of 34 labels fail their own check (17.6%)", text)
            self.assertIn("  %s  6 row(s): a one-line label" % COUNT_MISMATCH, text)
            self.assertIn('<div class="labels-check"><b>Labels check</b>', page)
            self.assertIn(COUNT_MISMATCH + "  6 row(s)", page)
        paper, _ = transitlm.evaluate("general_llm", input=GENERAL, input_field="sft_label",
                                      protocol="paper")
        self.assertEqual(paper["labels_check"],
                         {"labels": 34, "failing": 0, "by_code": {}})
        self.assertEqual(paper["metrics"]["conn"], 1.0)
        self.assertEqual(transitlm.evaluation.reports.labels_check_lines(paper),
                         ["every one of the 34 labels passes every check"])

    def test_a_models_run_has_no_labels_check(self):
        report, _ = transitlm.evaluate("single_route")
        self.assertNotIn("labels_check", report)
        self.assertEqual(transitlm.evaluation.reports.labels_check_lines(report), [])
        self.assertEqual(transitlm.evaluation.reports.labels_check_lines(
            {"labels_check": {"labels": "x", "failing": 1}}), [])       # not ours: nothing

    @unittest.skipUnless(transitlm.evaluation.workers.can_fork(), "no fork on this platform")
    def test_worker_processes_count_the_same(self):
        saved = transitlm.evaluation.inputs.CHUNK_BYTES
        outputs = []
        with tempfile.TemporaryDirectory() as tmp:
            try:
                for workers, chunk in ((1, None), (2, 4000)):
                    if chunk:
                        transitlm.evaluation.inputs.CHUNK_BYTES = chunk
                    path = os.path.join(tmp, "r%d.json" % workers)
                    with contextlib.redirect_stdout(io.StringIO()):
                        status = run_cli(Personalized(), [
                            "--input", os.path.join(DATA, "benchmark2_personalized_example.csv"),
                            "--input_field", "sft_label", "--workers", str(workers),
                            "--json", path, "--quiet"])
                    self.assertEqual(status, 0)
                    with open(path, encoding="utf-8") as handle:
                        outputs.append(json.load(handle)["labels_check"])
            finally:
                transitlm.evaluation.inputs.CHUNK_BYTES = saved
        self.assertEqual(outputs[0], outputs[1])
        self.assertEqual(outputs[0]["by_code"]["preference.no_subway"]["rows"], 1)


if __name__ == "__main__":
    unittest.main()
