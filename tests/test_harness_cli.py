"""harness.py (transitlm/harness/cli.py): ``lm-eval`` writes the task folder
and says how to run it; the benchmark of a file is inferred or given; every
problem is exit status 2 with one line, and nothing is written."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO, run_in_process

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
        for flag in ("--input", "--benchmark", "--station_info", "--line_info", "--protocol",
                     "--max_gen_toks", "--out", "--overwrite"):
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

    def test_every_problem_is_one_line_and_exit_status_2(self):
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        with open(os.path.join(other, "x.txt"), "w") as handle:
            handle.write("x\n")
        cases = [
            (), ("lm-eval",), ("nothing",), ("lm-eval", "--out", self.out, "--max_gen_toks", "0"),
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
