"""harness.py (transitlm/harness/cli.py): ``lm-eval`` writes the task folder
and says how to run it; the benchmark of a file is inferred or given; every
problem is exit status 2 with one line, and nothing is written."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import (prompt, route, run_in_process, write_samples,
                                          write_station_file)

DATA = os.path.join(REPO, "data")
B1 = os.path.join(DATA, "benchmark1_single_route_example.csv")
B2 = os.path.join(DATA, "benchmark2_personalized_example.csv")


def harness(*argv, cwd=None):
    done = subprocess.run([sys.executable, os.path.join(REPO, "harness.py")] + list(argv),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=cwd, timeout=60,
                          env=dict(os.environ, TRANSITLM_CACHE_DIR="off"))
    return done.returncode, done.stdout, done.stderr


def harness_in_process(*argv):
    """harness.py's main in this process -> (exit status, stdout, stderr)."""
    from transitlm.harness.cli import main
    return run_in_process(main, list(argv))


class CommandTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.out = os.path.join(self.tmp, "tasks")

    def test_help(self):
        # (--version: tests/test_provenance.py, with every script's.)
        status, stdout, _ = harness("lm-eval", "--help")
        self.assertEqual(status, 0)
        for flag in ("--input", "--data", "--benchmark", "--station_info", "--line_info",
                     "--protocol", "--max_gen_toks", "--context_size", "--out", "--overwrite"):
            self.assertIn(flag, stdout)
        status, stdout, _ = harness("import", "--help")
        self.assertEqual(status, 0)
        for flag in ("LM_EVAL_OUTPUT", "--out", "--overwrite"):
            self.assertIn(flag, stdout)

    def test_the_bundled_examples_by_default(self):
        status, stdout, stderr = harness("lm-eval", "--out", "tasks", cwd=self.tmp)
        self.assertEqual((status, stderr), (0, ""))
        lines = stdout.splitlines()
        self.assertEqual(lines[0], "Wrote the lm-evaluation-harness task folder " + self.out)
        self.assertRegex(lines[1], r"^  transitlm_single_route     38 rows  .*"
                                   r"benchmark1_single_route_example\.csv  \(bundled example\)$")
        self.assertEqual([line.split()[0] for line in lines[1:5]],
                         ["transitlm_single_route", "transitlm_personalized",
                          "transitlm_diversity", "transitlm_general"])
        self.assertEqual(lines[5], "  group transitlm_all, protocol reference, stations "
                         + os.path.join(DATA, "station_info.csv"))
        self.assertIn(" --tasks transitlm_all --include_path %s --apply_chat_template " % self.out,
                      lines[-1])
        self.assertTrue(os.path.isfile(os.path.join(self.out, "transitlm_all.yaml")))

    def test_the_benchmark_of_a_file_from_its_name_or_the_command_line(self):
        renamed = os.path.join(self.tmp, "transit-lm-benchmark2-test.csv")
        shutil.copy(B2, renamed)
        status, stdout, _ = harness_in_process("lm-eval", "--input", renamed, "--input", B1,
                                               "--protocol", "paper", "--out", self.out)
        self.assertEqual(status, 0)
        self.assertIn("transitlm_personalized     37 rows  %s  (from the file name)"
                      % renamed, stdout)
        self.assertIn("transitlm_single_route     38 rows  %s  (from the file name)" % B1, stdout)
        self.assertIn("protocol paper", stdout)
        plain = os.path.join(self.tmp, "rows.csv")
        shutil.copy(B2, plain)
        status, stdout, _ = harness_in_process("lm-eval", "--input", plain, "--benchmark",
                                               "personalized",
                                    "--out", self.out, "--overwrite")
        self.assertEqual(status, 0)
        self.assertIn("(--benchmark)", stdout)

    def test_the_context_size_sets_max_gen_toks_and_names_the_rows_that_may_not_fit(self):
        station = os.path.join(self.tmp, "station_info.csv")
        write_station_file(station)
        rows = [{"index_id": "t%d" % number, "system_prompt": "Plan a route.",
                 "sft_prompt": prompt(), "sft_label": route()} for number in range(1, 4)]
        rows[1]["system_prompt"] = "路" * 700            # 2,100 bytes: over a 2,048 context
        path = os.path.join(self.tmp, "b1.csv")
        write_samples(path, rows, columns=("index_id", "system_prompt", "sft_prompt",
                                           "sft_label"))
        longest = max(len((row["system_prompt"] + row["sft_prompt"]).encode("utf-8"))
                      for row in (rows[0], rows[2])) + 64
        status, stdout, stderr = harness_in_process(
            "lm-eval", "--input", path, "--benchmark", "single_route", "--station_info",
            station, "--context_size", "2048", "--out", self.out)
        self.assertEqual((status, stderr), (0, ""))
        self.assertIn("max_gen_toks %d: a 2048-token context less the longest prompt, ~%d "
                      "tokens (estimated from its UTF-8 bytes)" % (2048 - longest, longest),
                      stdout)
        warnings = [line for line in stdout.splitlines() if "WARNING" in line]
        self.assertEqual(len(warnings), 1)
        self.assertIn("transitlm_single_route: 1 row(s) whose prompt alone may not fit a "
                      "2048-token context (estimated from UTF-8 bytes, an upper bound): row 2;",
                      warnings[0])
        with open(os.path.join(self.out, "transitlm_single_route.yaml"), encoding="utf-8") as h:
            self.assertIn("  max_gen_toks: %d\n" % (2048 - longest), h.read())
        # --max_gen_toks stays the most; no room at all is refused.
        status, stdout, _ = harness_in_process(
            "lm-eval", "--input", path, "--benchmark", "single_route", "--station_info",
            station, "--context_size", "32768", "--max_gen_toks", "4096", "--out", self.out,
            "--overwrite")
        self.assertIn("max_gen_toks 4096:", stdout)
        status, stdout, stderr = harness_in_process(
            "lm-eval", "--input", path, "--benchmark", "single_route", "--station_info",
            station, "--context_size", "64", "--out", self.out, "--overwrite")
        self.assertEqual((status, stdout), (2, ""))
        self.assertIn("no prompt of transitlm_single_route fits a 64-token context", stderr)

    def test_every_problem_is_one_line_and_exit_status_2(self):
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        with open(os.path.join(other, "x.txt"), "w") as handle:
            handle.write("x\n")
        cases = [
            (), ("lm-eval",), ("nothing",), ("lm-eval", "--out", self.out, "--max_gen_toks", "0"),
            ("lm-eval", "--out", self.out, "--context_size", "0"), ("import", "--out", self.out),
            ("lm-eval", "--out", self.out, "--input", os.path.join(self.tmp, "missing.csv")),
            ("lm-eval", "--out", self.out, "--input", os.path.join(DATA, "station_info.csv"),
             "--benchmark", "single_route"),
            ("lm-eval", "--out", self.out, "--input", B1, "--input", B1),
            ("lm-eval", "--out", self.out, "--input", B1, "--input", B2,
             "--benchmark", "single_route"),
            ("lm-eval", "--out", self.out, "--benchmark", "single_route"),
            ("lm-eval", "--out", self.out, "--station_info", os.path.join(self.tmp, "no.csv")),
            ("lm-eval", "--out", self.out, "--line_info", os.path.join(self.tmp, "no.csv")),
            ("lm-eval", "--out", other),
            ("lm-eval", "--out", os.path.join(other, "x.txt")),
        ]
        for argv in cases:
            with self.subTest(argv=argv):
                status, stdout, stderr = harness_in_process(*argv)
                self.assertEqual(status, 2)
                self.assertEqual(stdout, "")
                self.assertEqual(len(stderr.splitlines()), 1, stderr)
                self.assertTrue(stderr.startswith("harness.py"), stderr)
                self.assertNotIn("Traceback", stderr)
                self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    unittest.main()
