"""The command line as a user meets it: exit statuses, one-line errors without
tracebacks, --json/--details/--quiet/--sample_count, determinism, any cwd."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import prompt, route, write_samples, write_station_file

SCRIPTS = {name: os.path.join(REPO, name, "evaluate.py")
           for name in ("single_route", "personalized", "diversity", "general_llm")}


def run(script, *args, cwd=None):
    proc = subprocess.run([sys.executable, SCRIPTS[script]] + list(args), cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          encoding="utf-8")
    return proc.returncode, proc.stdout, proc.stderr


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.stations = self.path("stations.csv")
        write_station_file(self.stations)
        self.input = self.path("in.csv")
        rows = [{"index_id": "r%d" % i, "sft_prompt": prompt(), "sft_label": route(),
                 "generate_results": route(station_sequence=["A", "C"]) if i % 2 else route()}
                for i in range(6)]
        write_samples(self.input, rows)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_one_line_error(self, status, stderr, *words):
        self.assertEqual(status, 2, stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        for word in words:
            self.assertIn(word, stderr)

    def test_missing_input_file(self):
        status, _, err = run("single_route", "--input", self.path("nope.csv"),
                             "--station_info", self.stations)
        self.assert_one_line_error(status, err, "nope.csv")

    def test_missing_column_is_named(self):
        with open(self.path("bad.csv"), "w", encoding="utf-8") as handle:
            handle.write("index_id,sft_prompt,generate_results\n1,{},{}\n")
        status, _, err = run("single_route", "--input", self.path("bad.csv"),
                             "--station_info", self.stations)
        self.assert_one_line_error(status, err, "sft_label")
        status, _, err = run("personalized", "--input", self.input,
                             "--station_info", self.stations)
        self.assert_one_line_error(status, err, "req_type")

    def test_bad_station_files(self):
        with open(self.path("st1.csv"), "w", encoding="utf-8") as handle:
            handle.write("stop_id,coord_x,coord_y\nA,1,2\n")
        status, _, err = run("single_route", "--input", self.input,
                             "--station_info", self.path("st1.csv"))
        self.assert_one_line_error(status, err, "next_hop_stations")
        with open(self.path("st2.csv"), "wb") as handle:
            handle.write(b"stop_id,coord_x,coord_y,next_hop_stations\nA,\xff\xfe,2,[]\n")
        status, _, err = run("single_route", "--input", self.input,
                             "--station_info", self.path("st2.csv"))
        self.assert_one_line_error(status, err, "UTF-8")
        status, _, err = run("single_route", "--input", self.input,
                             "--station_info", self.path("none.csv"))
        self.assert_one_line_error(status, err, "none.csv")
        with open(self.path("st3.csv"), "w", encoding="utf-8") as handle:
            handle.write('stop_id,coord_x,coord_y,next_hop_stations\nA,0,0,"[B"\nB,0,0,[]\n')
        status, _, err = run("single_route", "--input", self.input,
                             "--station_info", self.path("st3.csv"))
        self.assert_one_line_error(status, err, "line 2", "next_hop_stations")

    def test_usage_error_exits_2(self):
        status, _, err = run("single_route", "--sample_count", "many")
        self.assertEqual(status, 2)
        self.assertNotIn("Traceback", err)

    def test_help_lists_every_flag(self):
        status, out, _ = run("general_llm", "--help")
        self.assertEqual(status, 0)
        for flag in ("--input", "--input_field", "--sample_count", "--station_info", "--json",
                     "--details", "--quiet", "--protocol", "--predictions", "--api_url",
                     "--batch_size", "--line_info", "--allow_service_errors"):
            self.assertIn(flag, out)

    def test_json_stdout_is_pure_json_and_deterministic(self):
        args = ("--input", self.input, "--station_info", self.stations, "--json", "-")
        status, out1, _ = run("single_route", *args)
        self.assertEqual(status, 0)
        report = json.loads(out1)
        self.assertEqual(report["schema_version"], 3)
        self.assertEqual(report["rounds"]["reachability"], {"input": 6, "passed": 3})
        self.assertEqual(report["inputs"]["station_info"], self.stations)
        with open(self.input, "rb") as handle:
            self.assertEqual(report["inputs"]["sha256"]["input"],
                             hashlib.sha256(handle.read()).hexdigest())
        self.assertEqual(sorted(report["inputs"]["sha256"]), ["input", "station_info"])
        _, out2, _ = run("single_route", *args)
        self.assertEqual(out1, out2)

    def test_text_report_quiet_and_sample_count(self):
        status, out, err = run("single_route", "--input", self.input, "--station_info",
                               self.stations, "--sample_count", "4")
        self.assertEqual(status, 0, err)
        self.assertIn("samples 4", out)
        self.assertIn("A -> C not connected", out)
        self.assertIn("Conn 50.0% |", out)
        self.assertEqual(err, "")             # no progress line when stderr is not a tty
        _, quiet, _ = run("single_route", "--input", self.input, "--station_info",
                          self.stations, "--quiet")
        self.assertNotIn("A -> C not connected", quiet)
        self.assertIn("Conn 50.0% |", quiet)

    def test_label_against_itself(self):
        status, out, _ = run("single_route", "--input", self.input, "--station_info",
                             self.stations, "--input_field", "sft_label", "--json", "-")
        report = json.loads(out)
        self.assertEqual(report["metrics"]["conn"], 1.0)
        self.assertEqual(report["metrics"]["rem"], 1.0)
        self.assertEqual(report["inputs"]["input_field"], "sft_label")

    def test_runs_from_any_directory(self):
        status, out, err = run("single_route", "--input", self.input, "--station_info",
                               self.stations, cwd=self.dir)
        self.assertEqual(status, 0, err)

    def test_details_one_line_per_row(self):
        details = self.path("d.jsonl")
        run("single_route", "--input", self.input, "--station_info", self.stations,
            "--details", details)
        with open(details, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle]
        self.assertEqual(len(lines), 6)
        self.assertEqual([line["index_id"] for line in lines], ["r%d" % i for i in range(6)])
