"""transitlm/io/terminal.py: text from outside reaches a terminal escaped.

The escaping itself, then every stream of every tool fed hostile names --
a folder name holding an ANSI escape, an OSC 52 clipboard write, a C1 CSI
(U+009B), a right-to-left override (U+202E) and a newline: on stdout and
stderr no control character and no bidirectional control is left raw, and an
error message stays on one line.
"""

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import (prompt, route, run_evaluator, write_samples,
                                          write_station_file)
from transitlm.io.terminal import CommandParser, one_line, printable  # noqa: E402
import transitlm.evaluation.records  # noqa: E402

HOSTILE = "run\x1b[31mRED\x1b]52;c;ZXZpbA==\x07\x9b2J\u202eevil\u2066x\nline2"
# Raw controls a terminal would act on: C0 but tab and newline, DEL, C1,
# bidirectional controls; and for one line, U+2028/2029 too.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class EscapingTest(unittest.TestCase):
    def test_printable(self):
        text = printable(HOSTILE)
        self.assertIsNone(RAW.search(text))
        self.assertIn("\\x1b[31m", text)
        self.assertIn("\\u202e", text)
        self.assertIn("\\x9b", text)
        self.assertIn("\n", text)                       # a text report keeps its lines
        self.assertEqual(printable("北京 a\tb"), "北京 a\tb")
        self.assertEqual(printable("\ud800"), "\\ud800")

    def test_one_line(self):
        text = one_line(HOSTILE + "\u2028\u2029\t")
        self.assertIsNone(RAW.search(text))
        self.assertNotIn("\n", text)
        self.assertNotIn("\u2028", text)
        self.assertTrue(text.endswith("\\u2028\\u2029\\x09"))
        self.assertEqual(one_line("x" * 50, limit=10), "xxxxxxxxxx... (50 characters)")

    def test_usage_errors_are_one_escaped_line(self):
        parser = CommandParser(prog="tool.py")
        parser.add_argument("--n", type=int)
        err = io.StringIO()
        old, sys.stderr = sys.stderr, err
        try:
            with self.assertRaises(SystemExit) as caught:
                parser.parse_args(["--n", "1\x1b[2J\nerror: forged", HOSTILE])
        finally:
            sys.stderr = old
        self.assertEqual(caught.exception.code, 2)
        self.assertEqual(err.getvalue().count("\n"), 1)
        self.assertTrue(err.getvalue().startswith("tool.py: error: "))
        self.assertIsNone(RAW.search(err.getvalue().rstrip("\n")))


class StreamsTest(unittest.TestCase):
    """Each tool's stdout and stderr with hostile names."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.folder = os.path.join(self.tmp.name, HOSTILE)
        os.makedirs(self.folder)
        self.stations = os.path.join(self.folder, "stations.csv")
        write_station_file(self.stations)
        self.input = os.path.join(self.folder, "in.csv")
        write_samples(self.input, [
            {"index_id": "r\x1b[2J\u202e%d" % i, "sft_prompt": prompt(), "sft_label": route(),
             "generate_results": route(station_sequence=["A", "Z"]) if i else route()}
            for i in range(3)])

    def assert_clean(self, stdout, stderr, one_line_error=False):
        for name, text in (("stdout", stdout), ("stderr", stderr)):
            match = RAW.search(text)
            self.assertIsNone(match, "%s holds %r: %r" % (name, match and match.group(),
                                                          text[:300]))
        if one_line_error:
            self.assertEqual(stderr.count("\n"), 1, stderr)

    def run_script(self, script, *args):
        done = subprocess.run([sys.executable, os.path.join(REPO, script)] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              encoding="utf-8", errors="surrogateescape", cwd=self.tmp.name)
        return done.returncode, done.stdout, done.stderr

    def test_evaluators(self):
        benchmark = transitlm.evaluation.records.load_benchmark("single_route")
        out = os.path.join(self.folder, "run")
        status, stdout, stderr = run_evaluator(benchmark, [
            "--input", self.input, "--station_info", self.stations, "--out", out])
        self.assertEqual(status, 0, stderr)
        self.assert_clean(stdout, stderr)
        self.assertIn("\\u202e", stdout)                  # the ids and paths, escaped
        status, stdout, stderr = self.run_script(
            os.path.join("single_route", "evaluate.py"), "--details", "-", "--input",
            self.input, "--station_info", self.stations)
        self.assertEqual(status, 0, stderr)
        self.assert_clean(stdout, stderr)
        status, stdout, stderr = run_evaluator(benchmark, [
            "--input", os.path.join(self.folder, "missing.csv"), "--station_info", self.stations])
        self.assertEqual(status, 2)
        self.assert_clean(stdout, stderr, one_line_error=True)
        status, stdout, stderr = run_evaluator(benchmark, ["--nope" + HOSTILE])
        self.assertEqual(status, 2)
        self.assert_clean(stdout, stderr, one_line_error=True)
        self.compare(out)

    def compare(self, run):
        other = os.path.join(self.folder, "run-2")
        shutil.copytree(run, other)
        for fmt in ("text", "markdown", "csv", "latex"):
            status, stdout, stderr = self.run_script("compare.py", run, other, "--format", fmt)
            self.assertEqual(status, 0, stderr)
            self.assert_clean(stdout, stderr)
        status, stdout, stderr = self.run_script("compare.py", os.path.join(self.folder, "gone"))
        self.assertEqual(status, 2)
        self.assert_clean(stdout, stderr, one_line_error=True)

    def test_route_eval_server_start_up(self):
        status, stdout, stderr = self.run_script(
            os.path.join("general_llm", "server.py"), "--station_info",
            os.path.join(self.folder, "missing.csv"), "--port", "0")
        self.assertEqual(status, 2)
        self.assert_clean(stdout, stderr, one_line_error=True)

    def test_data_tools_and_generate(self):
        missing = os.path.join(self.folder, "missing")
        for args in ((os.path.join("data", "import_gtfs.py"), missing, "--city", "X", "--out",
                      os.path.join(self.folder, "net")),
                     (os.path.join("data", "make_benchmark.py"), "--network", missing, "--out",
                      os.path.join(self.folder, "b"), "--samples", "1"),
                     (os.path.join("data", "make_dataset.py"), "--network", missing, "--out",
                      os.path.join(self.folder, "d")),
                     ("generate.py", "--input", missing, "--api_url", "http://127.0.0.1:9/v1",
                      "--model", HOSTILE, "--out", os.path.join(self.folder, "o.jsonl"))):
            with self.subTest(tool=args[0]):
                status, stdout, stderr = self.run_script(*args)
                self.assertEqual(status, 2, stderr)
                self.assert_clean(stdout, stderr, one_line_error=True)


if __name__ == "__main__":
    unittest.main()
