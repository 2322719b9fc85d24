"""compare.py on its inputs: comparable signatures and run.json's model
(issue 22), refusing runs scored on different input files, and damaged or
hostile run folders (issue 23): wrong types and huge numbers in every field
compare reads, control characters in printed text, names that are not UTF-8,
outputs pointed at inputs, files that would hang or exhaust memory."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from tests.support.synthetic_runs import (COMPARE, STATIONS_SHA256 as STATIONS,
                                          benchmark_records, digest, run_compare, write_run)
from transitlm.compare import run_folders as runs

FORMATS = ("text", "markdown", "latex", "csv")


def run_compare_process(argv, timeout=60, cwd=None):
    """compare.py in a fresh process -> (exit status, stdout bytes, stderr bytes)."""
    done = subprocess.run([sys.executable, COMPARE] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="compare_inputs_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def assert_refused(self, argv, *fragments):
        status, out, err = run_compare(argv)
        self.assertEqual(status, 2, "exit %s; stderr: %s" % (status, err))
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertTrue(err.startswith("error: "), err)
        self.assertNotIn("Traceback", err)
        self.assertLess(len(err), 600, err)
        for fragment in fragments:
            self.assertIn(fragment, err)
        return err

    def every_output(self, argv):
        """stdout of every format, the JSON and the HTML page, as text."""
        outputs = {}
        for fmt in FORMATS:
            status, out, err = run_compare(list(argv) + ["--format", fmt])
            self.assertEqual(status, 0, err)
            outputs[fmt] = out
        json_path, html_path = self.path("out.json"), self.path("out.html")
        status, _, err = run_compare(list(argv) + ["--json", json_path, "--html", html_path])
        self.assertEqual(status, 0, err)
        for name, path in (("json", json_path), ("html", html_path)):
            with open(path, encoding="utf-8") as handle:
                outputs[name] = handle.read()
        return outputs


# ---------------------------------------------------------------------------
# Issue 22: signature, model, refusal
# ---------------------------------------------------------------------------

class SignatureTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.records = benchmark_records("single_route", 40, 0.5, seed=1)
        self.better = benchmark_records("single_route", 40, 0.9, seed=1)

    def test_two_models_on_one_test_file_share_the_signature_printed_once(self):
        a = write_run(self.path("a"), self.records, model="qwen-7b")
        b = write_run(self.path("b"), self.better, model="llama-8b")
        with open(os.path.join(a, "report.json"), encoding="utf-8") as handle:
            signature = json.load(handle)["signature"]
        self.assertNotIn("predictions", signature)
        outputs = self.every_output([a, b])
        for name, text in outputs.items():
            if name != "json":
                self.assertEqual(text.count(signature), 1, name)
        result = json.loads(outputs["json"])
        self.assertEqual(result["signature"], signature)
        self.assertEqual([run["model"] for run in result["runs"]], ["qwen-7b", "llama-8b"])
        self.assertIn("signature: " + signature, outputs["text"])
        for name in ("text", "markdown", "latex", "csv", "html"):
            self.assertIn("qwen-7b", outputs[name], name)
            self.assertIn("llama-8b", outputs[name], name)

    def test_old_schema_runs_without_run_json_are_accepted(self):
        a = write_run(self.path("a"), self.records, old_schema=True)
        b = write_run(self.path("b"), self.better, old_schema=True)
        self.assertFalse(os.path.exists(os.path.join(a, "run.json")))
        with open(os.path.join(a, "report.json"), encoding="utf-8") as handle:
            old = json.load(handle)["signature"]
        self.assertIn("|predictions:", old)
        shared = "|".join(p for p in old.split("|") if not p.startswith("predictions:"))
        outputs = self.every_output([a, b])
        result = json.loads(outputs["json"])
        self.assertEqual(result["signature"], shared)
        self.assertEqual([run["model"] for run in result["runs"]], [None, None])
        self.assertEqual([run["name"] for run in result["runs"]], ["a", "b"])
        for name in ("text", "markdown", "csv", "latex", "html"):
            self.assertIn(shared, outputs[name], name)

    def test_a_run_json_without_generation_leaves_the_model_unknown(self):
        a = write_run(self.path("a"), self.records, model=None)
        b = write_run(self.path("b"), self.better, model="m")
        status, out, err = run_compare([a, b, "--format", "csv"])
        self.assertEqual(status, 0, err)
        rows = [r for r in csv.DictReader(io.StringIO(out)) if r["section"] == "metrics"]
        self.assertEqual({(r["run"], r["model"]) for r in rows}, {("a", ""), ("m", "m")})

    def test_signatures_that_differ_are_listed_per_run(self):
        a = write_run(self.path("a"), self.records, version="1.2.0")
        b = write_run(self.path("b"), self.better, version="1.2.1")
        status, out, err = run_compare([a, b])
        self.assertEqual(status, 0, err)
        self.assertIn("signatures differ between the runs:", out)
        self.assertIn("transitlm:1.2.0|", out)
        self.assertIn("transitlm:1.2.1|", out)


class RefusalTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.records = benchmark_records("single_route", 40, 0.5, seed=2)
        self.a = write_run(self.path("a"), self.records, model="qwen")

    def test_a_different_test_file_is_refused_naming_the_runs(self):
        b = write_run(self.path("b"), self.records, model="llama", input_text="other test")
        self.assert_refused([self.a, b], "qwen", "llama", "test file",
                            "--allow_different_inputs")

    def test_a_different_station_file_is_refused(self):
        b = write_run(self.path("b"), self.records, model="llama",
                      stations=digest("other stations"))
        err = self.assert_refused([self.a, b], "station file", STATIONS[:8])
        self.assertNotIn("test file", err)

    def test_predictions_may_differ(self):
        b = write_run(self.path("b"), self.records, model="llama", predictions=digest("p2"))
        self.assertEqual(run_compare([self.a, b])[0], 0)

    def test_the_hashes_decide_not_the_signature_text(self):
        b = write_run(self.path("b"), self.records, model="llama", input_text="other test")
        with open(os.path.join(self.a, "report.json"), encoding="utf-8") as handle:
            signature = json.load(handle)["signature"]
        report_b = os.path.join(b, "report.json")
        with open(report_b, encoding="utf-8") as handle:
            report = json.load(handle)
        report["signature"] = signature                 # same text, other hash
        with open(report_b, "w", encoding="utf-8") as handle:
            json.dump(report, handle)
        self.assert_refused([self.a, b], "test file")

    def test_allowed_different_inputs_are_noted_in_every_output(self):
        b = write_run(self.path("b"), self.records, model="llama", input_text="other test")
        outputs = self.every_output([self.a, b, "--allow_different_inputs"])
        for name, text in outputs.items():
            self.assertIn("NOT COMPARABLE", text, name)
        self.assertTrue(json.loads(outputs["json"])["allow_different_inputs"])

    def test_runs_without_hashes_are_compared_with_a_note(self):
        b = write_run(self.path("b"), self.records, model="llama")
        report_b = os.path.join(b, "report.json")
        with open(report_b, encoding="utf-8") as handle:
            report = json.load(handle)
        del report["inputs"]
        with open(report_b, "w", encoding="utf-8") as handle:
            json.dump(report, handle)
        status, out, err = run_compare([self.a, b])
        self.assertEqual(status, 0, err)
        self.assertIn("not checked", out)


# ---------------------------------------------------------------------------
# Issue 23: damaged and hostile run folders
# ---------------------------------------------------------------------------

HUGE = 10 ** 400
WRONG_VALUES = {"a list": [1, 2], "an object": {"x": 1}, "text": "0.5", "a boolean": True,
                "a huge integer": HUGE, "a negative number": -3}


class ReportFieldTest(TempDirTest):
    """Every field of report.json compare reads, with values of the wrong
    type or range: one line, exit 2, the file named."""

    def setUp(self):
        super().setUp()
        self.records = benchmark_records("personalized", 30, 0.6, seed=3)
        self.run = write_run(self.path("r"), self.records, "personalized", model="m")
        with open(os.path.join(self.run, "report.json"), encoding="utf-8") as handle:
            self.report = json.load(handle)

    def write_report(self, report, raw=None):
        with open(os.path.join(self.run, "report.json"), "w", encoding="utf-8") as handle:
            handle.write(raw if raw is not None else json.dumps(report))

    def test_wrong_values_in_every_field(self):
        fields = [("benchmark",), ("protocol",), ("metrics",), ("metrics", "conn"),
                  ("metrics", "pc"), ("metrics", "mape"), ("counts",), ("counts", "samples"),
                  ("signature",), ("inputs",), ("inputs", "sha256"),
                  ("inputs", "sha256", "input"), ("inputs", "sha256", "station_info"),
                  ("inputs", "sha256", "line_info")]
        for field in fields:
            for kind, value in WRONG_VALUES.items():
                if field == ("signature",) and kind == "text" or \
                        field in (("counts",), ("inputs",), ("inputs", "sha256")) and \
                        kind == "an object":
                    continue                             # valid (unknown keys are ignored)
                report = json.loads(json.dumps(self.report))
                target = report
                for key in field[:-1]:
                    target = target[key]
                target[field[-1]] = value
                with self.subTest(field=".".join(field), value=kind):
                    self.write_report(report)
                    self.assert_refused([self.run], "report.json")

    def test_non_finite_numbers_are_refused(self):
        text = json.dumps(self.report)
        conn = json.dumps(self.report["metrics"]["conn"])
        for token in ("NaN", "Infinity", "-Infinity", "1e400"):
            with self.subTest(token=token):
                self.write_report(None, text.replace('"conn": ' + conn, '"conn": ' + token))
                self.assert_refused([self.run], "report.json")

    def test_not_an_object_not_json_not_utf8(self):
        for raw in ("[1, 2]", "{", "", "\ufeff{}", "null"):
            with self.subTest(raw=raw):
                self.write_report(None, raw)
                self.assert_refused([self.run], "report.json")
        with open(os.path.join(self.run, "report.json"), "wb") as handle:
            handle.write(b'{"benchmark": "\xff"}')
        self.assert_refused([self.run], "not UTF-8")

    def test_deep_nesting_and_size_limits(self):
        self.write_report(None, "[" * 100000 + "]" * 100000)
        self.assert_refused([self.run], "report.json")
        self.write_report(self.report)
        with mock.patch.object(runs, "MAX_REPORT_BYTES", 100):
            self.assert_refused([self.run], "report.json", "more than")


class DetailsFieldTest(TempDirTest):
    """Every field of details.jsonl compare reads, with values of the wrong
    type or range, on one line: one line naming the file and line, exit 2."""

    FIELDS = ("index_id", "status", "in_funnel", "reachable", "station_grounding",
              "distance_plausibility", "station_iou_exact", "exact_match", "line_iou",
              "station_iou", "score", "label_score", "score_deviation_pct", "score_band",
              "distance_accurate", "time_accurate", "fare_accurate", "transfer_accurate",
              "overall_accurate", "distance_mape_pct", "time_mape_pct", "fare_mape_pct",
              "city", "failure_codes", "req_type", "compliant", "label_compliant")
    DIVERSITY_FIELDS = ("routes", "rd", "route_count", "rd_label", "label_route_count",
                        "all_routes_reachable", "label_first_score", "best_match")
    # Values a field may legitimately hold (not "wrong").
    ALLOWED = {("index_id", "text"), ("index_id", "a huge integer"),
               ("index_id", "a negative number"), ("city", "text"),
               ("score", "a negative number"), ("label_score", "a negative number"),
               ("score_deviation_pct", "a negative number"),
               ("label_first_score", "a negative number"), ("req_type", "a negative number")}

    def check_fields(self, benchmark, fields):
        records = benchmark_records(benchmark, 20, 0.8, seed=4)
        line = next(i for i, r in enumerate(records)
                    if r["status"] == "evaluated" and r["reachable"] and r["exact_match"])
        for field in fields:
            for kind, value in WRONG_VALUES.items():
                if (field, kind) in self.ALLOWED or (field in runs.BOOL_KEYS
                                                     and kind == "a boolean"):
                    continue
                broken = [dict(r) for r in records]
                broken[line][field] = value
                with self.subTest(benchmark=benchmark, field=field, value=kind):
                    folder = write_run(self.path("%s-%s" % (field, len(kind))), records,
                                       benchmark)
                    with open(os.path.join(folder, "details.jsonl"), "w",
                              encoding="utf-8") as handle:
                        for record in broken:
                            handle.write(json.dumps(record) + "\n")
                    self.assert_refused([folder, "--by", "city", "--by", "failure"]
                                        + (["--by", "req_type"]
                                           if benchmark == "personalized" else []),
                                        "details.jsonl line %d: " % (line + 1), field)
                    shutil.rmtree(folder)

    def test_single_route_and_personalized_fields(self):
        self.check_fields("personalized", self.FIELDS)

    def test_diversity_fields(self):
        self.check_fields("diversity", self.DIVERSITY_FIELDS)

    def test_nested_route_fields(self):
        records = benchmark_records("diversity", 20, 0.8, seed=5)
        line = next(i for i, r in enumerate(records) if r["status"] == "evaluated")
        for route in ({"first": {"reachable": "yes", "score": 1.0}},
                      {"first": {"reachable": True, "score": HUGE}},
                      {"first": {"reachable": True}}, {"fourth": {"reachable": True,
                                                                  "score": 1.0}},
                      {"first": [1]}):
            broken = [dict(r) for r in records]
            broken[line]["routes"] = route
            with self.subTest(route=route):
                folder = write_run(self.path("d"), records, "diversity")
                with open(os.path.join(folder, "details.jsonl"), "w",
                          encoding="utf-8") as handle:
                    for record in broken:
                        handle.write(json.dumps(record) + "\n")
                self.assert_refused([folder], "line %d" % (line + 1), "routes")
                shutil.rmtree(folder)

    def test_non_finite_tokens_long_lines_and_deep_nesting(self):
        records = benchmark_records("single_route", 10, 0.8, seed=6)
        folder = write_run(self.path("r"), records)
        details = os.path.join(folder, "details.jsonl")
        good = [json.dumps(r) for r in records]
        for bad, fragment in (('{"index_id": "x", "status": "error", "in_funnel": false, '
                               '"line_iou": NaN}', "not JSON"),
                              ('{"index_id": 1e400, "status": "error", "in_funnel": false}',
                               "index_id"),
                              ("[" * 990 + "]" * 990, "line 2"),
                              ("x" * 3000, "longer than")):
            with self.subTest(bad=bad[:30]):
                with open(details, "w", encoding="utf-8") as handle:
                    handle.write("\n".join([good[0], bad] + good[2:]) + "\n")
                with mock.patch.object(runs, "MAX_LINE_CHARS", 2000):
                    self.assert_refused([folder], "line 2", fragment)


class RunJsonTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.run = write_run(self.path("r"), benchmark_records("single_route", 20, 0.5, 7),
                             model="m")
        self.run_json = os.path.join(self.run, "run.json")

    def test_damaged_run_json(self):
        for raw in ("{", "[]", '{"generation": []}', '{"generation": {"model": 5}}',
                    '{"generation": {"model": ["a"]}}',
                    json.dumps({"generation": {"model": "x" * 5000}}), "\x00"):
            with self.subTest(raw=raw[:40]):
                with open(self.run_json, "w", encoding="utf-8") as handle:
                    handle.write(raw)
                self.assert_refused([self.run], "run.json")

    def test_run_json_that_is_not_a_file(self):
        os.remove(self.run_json)
        os.mkdir(self.run_json)
        self.assert_refused([self.run], "run.json")

    def test_a_fifo_is_not_read(self):
        if not hasattr(os, "mkfifo"):
            self.skipTest("no named pipes here")
        os.remove(os.path.join(self.run, "details.jsonl"))
        os.mkfifo(os.path.join(self.run, "details.jsonl"))
        status, out, err = run_compare_process([self.run], timeout=30)
        self.assertEqual(status, 2)
        self.assertIn(b"details.jsonl", err)


class TerminalEscapeTest(TempDirTest):
    """Text from files reaches the terminal escaped: folder names, models,
    cities, failure codes, signatures and ids with ANSI escapes or C1
    controls, and folder names that are not UTF-8."""

    ESC = "\x1b[31mred\x1b[0m\x9b2J\x07"

    def check_escaped(self, out, fmt):
        for raw in (b"\x1b", b"\x07", "\x9b".encode("utf-8")):
            self.assertNotIn(raw, out)
        self.assertIn(b"x1b[31mred", out)
        if fmt != "latex":
            self.assertIn(b"\\x1b[31mred", out)

    def test_control_characters_in_every_printed_field(self):
        records = benchmark_records("single_route", 30, 0.6, seed=8,
                                    cities=("Bei" + self.ESC, "Shen\nzhen"), prefix=self.ESC)
        for record in records:
            record["failure_codes"] = [code + self.ESC for code in record["failure_codes"]]
        a = write_run(os.path.join(self.tmp, "run" + self.ESC), records,
                      model="qwen" + self.ESC)
        b = write_run(self.path("b"), records[:25], model="llama")  # missing ids in notes
        report = os.path.join(a, "report.json")
        with open(report, encoding="utf-8") as handle:
            data = json.load(handle)
        data["signature"] += "|x" + self.ESC
        with open(report, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        argv = [a, b, "--by", "city", "--by", "failure", "--bootstrap", "50"]
        for fmt in FORMATS:
            with self.subTest(format=fmt):
                status, out, err = run_compare(argv + ["--format", fmt])
                self.assertEqual(status, 0, err)
                self.check_escaped(out.encode("utf-8"), fmt)
        status, out, err = run_compare_process(argv)           # a real stdout
        self.assertEqual(status, 0, err)
        self.check_escaped(out, "text")
        # an error message quoting a folder name is escaped too
        status, out, err = run_compare_process([os.path.join(self.tmp, "none" + self.ESC)])
        self.assertEqual(status, 2)
        self.assertNotIn(b"\x1b", err)
        self.assertIn(b"\\x1b", err)

    def test_folder_name_that_is_not_utf8(self):
        records = benchmark_records("single_route", 20, 0.5, seed=9)
        folder = os.fsdecode(os.path.join(os.fsencode(self.tmp), b"run\xff\xfe"))
        try:
            write_run(folder, records)
        except (OSError, UnicodeError):
            self.skipTest("this file system refuses names that are not UTF-8")
        b = write_run(self.path("b"), records)
        out_json, out_html = self.path("c.json"), self.path("c.html")
        for fmt in FORMATS:
            status, out, err = run_compare([folder, b, "--format", fmt, "--json", out_json,
                                            "--html", out_html])
            self.assertEqual(status, 0, err)
            out = out.encode("utf-8")                    # strict: no lone surrogate left
            self.assertIn(b"udcff", out)
            if fmt != "latex":
                self.assertIn(b"run\\udcff\\udcfe", out)
        status, out, err = run_compare_process([folder, b])     # a real stdout
        self.assertEqual(status, 0, err)
        self.assertIn(b"run\\udcff\\udcfe", out)
        with open(out_json, encoding="utf-8") as handle:
            result = json.load(handle)
        self.assertEqual(result["runs"][0]["name"], "run\udcff\udcfe")
        with open(out_html, encoding="utf-8") as handle:
            self.assertNotIn("\udcff", handle.read())


class OutputCollisionTest(TempDirTest):
    """No output may replace an input: by path, ./ and .. spellings, symlinks
    and hard links; nor a run folder's other files, nor another output."""

    def setUp(self):
        super().setUp()
        self.a = write_run(self.path("a"), benchmark_records("single_route", 20, 0.5, 10),
                           model="m")
        self.b = write_run(self.path("b"), benchmark_records("single_route", 20, 0.7, 10),
                           model="n")
        self.before = self.snapshot()

    def snapshot(self):
        files = {}
        for folder in (self.a, self.b):
            for name in os.listdir(folder):
                with open(os.path.join(folder, name), "rb") as handle:
                    files[(folder, name)] = handle.read()
        return files

    def refused(self, *extra, cwd=None):
        if cwd:
            status, out, err = run_compare_process([self.a, self.b] + list(extra), cwd=cwd)
            err = err.decode("utf-8")
        else:
            status, out, err = run_compare([self.a, self.b] + list(extra))
        self.assertEqual(status, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(self.snapshot(), self.before)
        return err

    def test_inputs_by_every_spelling(self):
        report = os.path.join(self.a, "report.json")
        os.symlink(report, self.path("link.json"))
        os.link(os.path.join(self.b, "details.jsonl"), self.path("hard.jsonl"))
        os.symlink(self.a, self.path("alias"))
        cases = [("--json", report), ("--html", os.path.join(self.b, "details.jsonl")),
                 ("--json", os.path.join(self.a, "run.json")),
                 ("--json", self.path("link.json")), ("--html", self.path("hard.jsonl")),
                 ("--json", os.path.join(self.path("alias"), "report.json")),
                 ("--json", os.path.join(self.a, "..", "a", ".", "report.json")),
                 ("--html", os.path.join(self.a, "report.html"))]
        for flag, target in cases:
            with self.subTest(flag=flag, target=target):
                self.assertIn("an output never replaces an input", self.refused(flag, target))
        with self.subTest("relative ./ path"):
            self.assertIn("would overwrite", self.refused("--json", "./report.json", cwd=self.a))

    def test_outputs_may_not_share_a_file(self):
        err = self.refused("--json", self.path("x.out"), "--html", self.path("x.out"))
        self.assertIn("would both be written to", err)

    def test_an_input_given_as_a_details_file(self):
        details = os.path.join(self.a, "details.jsonl")
        status, _, err = run_compare([details, self.b, "--json", os.path.join(self.a,
                                                                               "report.json")])
        self.assertEqual(status, 2, err)
        self.assertEqual(self.snapshot(), self.before)

    def test_a_new_file_in_a_run_folder_is_fine(self):
        status, _, err = run_compare([self.a, self.b, "--json", os.path.join(self.a, "c.json")])
        self.assertEqual(status, 0, err)


class OptionLimitTest(TempDirTest):
    def test_resamples_and_confidence_are_bounded(self):
        a = write_run(self.path("a"), benchmark_records("single_route", 10, 0.5, 11))
        self.assert_refused([a, "--bootstrap", str(10 ** 30)], "--bootstrap")
        self.assert_refused([a, "--confidence", "nan"], "--confidence")
        self.assert_refused([a, "--confidence", "inf"], "--confidence")


if __name__ == "__main__":
    unittest.main()
