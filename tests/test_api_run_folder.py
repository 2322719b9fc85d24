"""Run folders (--out), failure codes, the signature and the Python API.

The failure-code rule is checked on every bundled example and every case folder
of ../shared/parity under both protocols: a stage's codes go on exactly the rows
that fail that round among the rows it takes as input (error and no-response
rows carry their one code instead).
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO, common
from tests.support.lane import Offloaded
from tests.support.run_folders import EVALUATORS, cases, run_to_folder
import transitlm
import transitlm.api
import transitlm.evaluation.records

BUNDLED = {"b1": "benchmark1_single_route_example.csv",
           "b2": "benchmark2_personalized_example.csv",
           "b3": "benchmark3_diversity_example.csv",
           "general": "general_llm_example.csv"}
KNOWN_REQ_TYPES = (2, 5, 7, 8)


def code_problems(report, rows):
    """Every way the rows' failure codes disagree with the report's rounds."""
    problems = []

    def stage_rows(stage):
        return [r for r in rows if any(c.split(".")[0] == stage for c in r["failure_codes"])]

    def check(name, got, expected):
        if got != expected:
            problems.append("%s: %d row(s) with codes, expected %d" % (name, got, expected))

    for row in rows:
        codes = row["failure_codes"]
        stages = [code.split(".")[0] for code in codes]
        if stages != sorted(stages, key=transitlm.evaluation.records.STAGES.index):
            problems.append("row %d: codes out of stage order %s" % (row["row"], codes))
        if row["status"] == "error" and (len(codes) != 1 or not codes[0].startswith("error.")):
            problems.append("row %d: error row with codes %s" % (row["row"], codes))
        if row["status"] == "no_response" and codes != ["no_response"]:
            problems.append("row %d: no-response row with codes %s" % (row["row"], codes))
        if row["status"] == "evaluated" and any(s in ("error", "no_response") for s in stages):
            problems.append("row %d: evaluated row with codes %s" % (row["row"], codes))
    counts, rounds = report["counts"], report["rounds"]
    check("error", len(stage_rows("error")), counts["errors"])
    check("no_response", len(stage_rows("no_response")), counts["no_response"])
    # Rows a round counts but that were not evaluated fail it without its code.
    not_evaluated = sum(1 for r in rows if r["status"] != "evaluated" and r["in_funnel"])
    reach = rounds["reachability"]
    check("reachability", len(stage_rows("reachability")),
          reach["input"] - reach["passed"] - not_evaluated)
    ground = rounds["grounding"]
    check("grounding", len(stage_rows("grounding")),
          ground["input"] - ground["station_grounding"])
    check("plausibility", len(stage_rows("plausibility")),
          ground["input"] - ground["distance_plausibility"])
    overlap = rounds["overlap"]
    check("overlap", len(stage_rows("overlap")), overlap["input"] - overlap["exact_match"])
    accuracy = rounds["accuracy"]
    for key, code in (("distance", "accuracy.distance"), ("time", "accuracy.time"),
                      ("fare", "accuracy.fare"), ("transfer", "accuracy.access_distance")):
        check(code, sum(1 for r in rows if code in r["failure_codes"]),
              accuracy["input"] - accuracy[key])
    for row in rows:
        codes = row["failure_codes"]
        if any(c.startswith("overlap.") for c in codes) and row.get("exact_match"):
            problems.append("row %d: exact match with an overlap code" % row["row"])
        if any(c.startswith(("grounding.", "plausibility.", "overlap.", "accuracy."))
               for c in codes) and not (row.get("in_funnel") and row.get("reachable")):
            problems.append("row %d: Round 2-4 code on a row outside their input" % row["row"])
    if "preference" in rounds:
        pref = rounds["preference"]
        exempt = sum(1 for r in rows if r["status"] != "evaluated"
                     and (r.get("req_type") in KNOWN_REQ_TYPES
                          if report["protocol"] == "paper" else False))
        check("preference", len(stage_rows("preference")),
              pref["input"] - pref["compliant"] - exempt)
    if report["benchmark"] == "diversity":
        for row in rows:
            if row["status"] != "evaluated":
                continue
            for key in ("second", "third"):
                route = row["routes"].get(key)
                expected = route is not None and not route["reachable"]
                if expected != ("diversity.%s_unreachable" % key in row["failure_codes"]):
                    problems.append("row %d: diversity code for route %s" % (row["row"], key))
    for row in rows:
        if not row["failure_codes"] and (row["status"] != "evaluated"
                                         or row.get("failed_round") is not None):
            problems.append("row %d: no code but failed %s" % (row["row"], row["failed_round"]))
    return problems


# The runs of many cases, started as the module loads, in a process of their
# own beside the suite (tests/support/run_folders.py; tests.support.Offloaded).
API_RUNS = Offloaded("tests.support.run_folders:every_case_by_the_api")
COMMAND_RUNS = Offloaded("tests.support.run_folders:every_bundled_run_by_the_command")


class FailureCodes(unittest.TestCase):
    def test_codes_match_the_rounds_everywhere(self):
        checked = 0
        for name, short, protocol, report, rows in API_RUNS.result():
            with self.subTest(case=name, benchmark=short, protocol=protocol):
                self.assertEqual(len(rows), report["counts"]["samples"])
                self.assertEqual([r["row"] for r in rows], list(range(1, len(rows) + 1)))
                self.assertEqual(code_problems(report, rows), [])
                # every code is <stage>.<snake_case> (or no_response)
                for row in rows:
                    for code in row["failure_codes"]:
                        stage, _, reason = code.partition(".")
                        self.assertIn(stage, transitlm.evaluation.records.STAGES)
                        self.assertTrue(reason.replace("_", "").isalnum()
                                        or code == "no_response", code)
                checked += 1
        self.assertEqual(checked, 2 * len(cases()))
        self.assertGreaterEqual(checked, 8)

    def test_code_check_detects_a_missing_code(self):
        # The checker itself must fail when a code is dropped.
        with tempfile.TemporaryDirectory() as tmp:
            report, rows, _, _ = run_to_folder("b1", tmp, "reference")
            victim = next(r for r in rows if any(c.startswith("overlap.")
                                                 for c in r["failure_codes"]))
            victim["failure_codes"] = []
            self.assertTrue(code_problems(report, rows))


class RunFolder(unittest.TestCase):
    def test_out_writes_the_three_files_and_prints_the_same_text(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = os.path.join(tmp, "nested", "run")
            report, rows, text, stdout = run_to_folder("b1", folder, "reference")
            self.assertEqual(text, stdout)
            self.assertEqual(report["schema_version"], 3)
            self.assertEqual(report["version"], common.VERSION)
            self.assertIn("signature: " + report["signature"], text)
            self.assertTrue(report["signature"].startswith(
                "transitlm:%s|single_route|protocol:reference|rows:%d|"
                % (common.VERSION, report["counts"]["samples"])))
            with open(os.path.join(REPO, "data", BUNDLED["b1"]), "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            self.assertEqual(report["inputs"]["sha256"]["input"], digest)
            self.assertIn("input:" + digest[:8], report["signature"])
            self.assertEqual(report["inputs"]["options"],
                             {"protocol": "reference", "input_field": "generate_results",
                              "sample_count": None, "strict_json": False})
            row = next(r for r in rows if r["status"] == "evaluated")
            for key in ("city", "origin", "destination", "prediction_routes", "label_routes",
                        "failure_codes"):
                self.assertIn(key, row)
            self.assertEqual(sorted(row["prediction_routes"]["first"]),
                             ["end_mode", "leg_sizes", "lines", "start_mode", "stations"])

    def test_signature_names_non_default_options(self):
        with tempfile.TemporaryDirectory() as tmp:
            report, _, _, _ = run_to_folder("b1", tmp, "paper",
                                            extra=["--sample_count", "5"])
            self.assertIn("|protocol:paper|", report["signature"])
            self.assertIn("|sample_count:5", report["signature"])
            self.assertEqual(report["counts"]["samples"], 5)

    def test_general_llm_records_lines_and_routes_with_names(self):
        with tempfile.TemporaryDirectory() as tmp:
            report, rows, _, _ = run_to_folder("general", tmp, "paper")
            self.assertIn("line_info", report["inputs"]["sha256"])
            self.assertEqual(report["inputs"]["options"]["allow_service_errors"], False)
            row = next(r for r in rows if r["status"] == "evaluated" and r["reachable"])
            self.assertTrue(row["match_details"])
            self.assertEqual(row["prediction_routes"]["first"]["stations"],
                             row["boarding_alighting_names"])

    def test_same_path_twice_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x")
            done = subprocess.run([sys.executable, os.path.join(REPO, "single_route",
                                                                "evaluate.py"),
                                   "--json", path, "--details", path],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 2)
            self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
            self.assertFalse(os.path.exists(path))


class PythonApi(unittest.TestCase):
    def test_rows_from_a_notebook(self):
        # The README's example, on rows read from the bundled file.
        import csv
        with open(os.path.join(REPO, "data", BUNDLED["b1"]), encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        report, records = transitlm.api.evaluate("single_route", rows, protocol="paper")
        _, file_records = transitlm.api.evaluate("single_route", protocol="paper")
        self.assertEqual(len(records), len(rows))
        self.assertEqual([r["failure_codes"] for r in records],
                         [r["failure_codes"] for r in file_records])
        cli_report, _, _, _ = run_to_folder("b1", tempfile.mkdtemp(), "paper")
        self.assertEqual(report["metrics"], cli_report["metrics"])
        self.assertEqual(report["rounds"], cli_report["rounds"])

    def test_decoded_objects_and_unknown_options(self):
        from tests.support.evaluator_rows import prompt, route
        stations = os.path.join(tempfile.mkdtemp(), "st.csv")
        from tests.support.evaluator_rows import write_station_file
        write_station_file(stations)
        rows = [{"index_id": "a", "sft_prompt": prompt(), "sft_label": route(),
                 "generate_results": route()},
                {"index_id": "b", "sft_prompt": prompt(), "sft_label": route(),
                 "generate_results": route(station_sequence=["A", "C"])}]
        report, records = transitlm.api.evaluate("single_route", rows, station_info=stations)
        self.assertEqual(report["metrics"]["conn"], 0.5)
        self.assertEqual(records[1]["failure_codes"], ["reachability.broken_hop"])
        with self.assertRaises(common.InputError):
            transitlm.api.evaluate("single_route", rows, station_info=stations, protcol="paper")

    def test_a_run_folder_records_the_call_that_made_it(self):
        # Issue 39.5: run.json's command is the API call, not the process's argv
        # (a notebook kernel's, a test runner's).
        import csv
        with open(os.path.join(REPO, "data", BUNDLED["b1"]), encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run")
            transitlm.evaluate("single_route", rows, out=out, protocol="paper")
            with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
                command = json.load(handle)["command"]
            self.assertEqual(command, ["transitlm.evaluate('single_route', out=%r, "
                                       "protocol='paper', rows=<%d rows>)" % (out, len(rows))])
            report, records = transitlm.evaluate("single_route", input_field="sft_label")
            transitlm.api.write_run_folder(out, report, records, overwrite=True)
            with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
                command = json.load(handle)["command"]
            self.assertEqual(command, ["transitlm.api.write_run_folder(%r, overwrite=True)"
                                       % out])

    def test_aggregate_records_equals_the_report(self):
        runs = COMMAND_RUNS.result()
        self.assertEqual(len(runs), 2 * len(EVALUATORS))
        for short, protocol, report, rows in runs:
            figures = transitlm.evaluation.records.aggregate_records(report["benchmark"], protocol, rows)
            for key in ("counts", "rounds", "metrics", "diversity"):
                self.assertEqual(figures.get(key), report.get(key), (short, key))


if __name__ == "__main__":
    unittest.main()
