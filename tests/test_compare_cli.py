"""compare.py end to end (transitlm.compare.cli): significance between runs,
the JSON layout and its figures, identical bytes for the same seed, missing
rows, the text, Markdown, LaTeX and CSV formats, breakdowns, the --html
wiring, and one-line usage errors for bad runs and bad options."""

import csv
import io
import json
import os
import random
import shutil
import sys
import tempfile
import unittest
from unittest import mock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from transitlm.compare import group_figures as comparison  # noqa: E402
from transitlm.compare import metric_terms  # noqa: E402
from tests.support.synthetic_runs import (evaluated_record, metrics_of, run_compare,
                                          synthetic_records)


# ---------------------------------------------------------------------------
# Run folders of report schema 2 (compare reads them too)
# ---------------------------------------------------------------------------

def write_run(folder, records, benchmark="single_route", protocol="reference",
              metrics=None):
    """A run folder as --out writes it: report.json and details.jsonl."""
    os.makedirs(folder, exist_ok=True)
    report = {"schema_version": 2, "version": "test", "benchmark": benchmark,
              "protocol": protocol,
              "signature": "transitlm:test|%s|protocol:%s|rows:%d"
                           % (benchmark, protocol, len(records)),
              "counts": {"samples": len(records)},
              "metrics": metrics_of(benchmark, protocol, records) if metrics is None
              else metrics}
    with open(os.path.join(folder, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, ensure_ascii=False)
    with open(os.path.join(folder, "details.jsonl"), "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return folder


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="compare_test_")
        self.addCleanup(shutil.rmtree, self.tmp)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


# ---------------------------------------------------------------------------
# Significance
# ---------------------------------------------------------------------------

class SignificanceTest(TempDirTest):
    def test_clearly_better_run_is_significant_and_a_run_is_not_against_itself(self):
        rng = random.Random(2)
        worse, better = [], []
        for i in range(300):
            u = rng.random()
            # paired rows: the better model reaches every row the worse one reaches
            worse.append(evaluated_record(i + 1, "id%d" % i, reachable=u < 0.6))
            better.append(evaluated_record(i + 1, "id%d" % i, reachable=u < 0.9))
        a = write_run(self.path("worse"), worse)
        b = write_run(self.path("better"), better)
        status, _, err = run_compare([a, b, a, "--names", "worse,better,again",
                                      "--json", self.path("c.json")])
        self.assertEqual(status, 0, err)
        with open(self.path("c.json"), encoding="utf-8") as handle:
            result = json.load(handle)
        by = {(c["run"], c["metric"]): c for c in result["comparisons"]}
        self.assertTrue(by[("better", "conn")]["significant"])
        self.assertAlmostEqual(by[("better", "conn")]["delta"], 0.3, delta=0.06)
        self.assertGreater(by[("better", "conn")]["ci"][0], 0)
        self.assertEqual(by[("better", "conn")]["p_value"], 0.0)
        for key in metric_terms.metric_names("single_route", result["runs"][0]["metrics"]):
            self.assertEqual(by[("again", key)]["delta"], 0.0 if by[("again", key)]["delta"]
                             is not None else None)
            self.assertFalse(by[("again", key)]["significant"], key)
        self.assertEqual(by[("again", "conn")]["p_value"], 1.0)
        self.assertEqual(by[("again", "conn")]["ci"], [0.0, 0.0])
        self.assertNotIn(("worse", "conn"), by)          # no baseline-vs-baseline entry


# ---------------------------------------------------------------------------
# The command line end to end
# ---------------------------------------------------------------------------

class CompareCommandTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.records = synthetic_records(120, 0.8, seed=1)
        degraded = []
        for record in self.records:
            record = dict(record)
            if record["status"] == "evaluated" and record["row"] % 4 == 0:
                record.update(reachable=False, failed_round="reachability",
                              failure_codes=["reachability.not_connected"])
            degraded.append(record)
        self.degraded = degraded
        self.a = write_run(self.path("model_a"), self.records)
        self.b = write_run(self.path("model_b"), self.degraded)

    def compare_json(self, argv):
        path = self.path("out.json")
        status, out, err = run_compare(list(argv) + ["--json", path])
        self.assertEqual(status, 0, err)
        with open(path, encoding="utf-8") as handle:
            return json.load(handle), out

    def test_json_layout_and_values_equal_the_reports(self):
        result, out = self.compare_json([self.a, self.b, "--by", "city"])
        self.assertEqual(result["schema_version"], 2)
        self.assertEqual((result["confidence"], result["bootstrap"], result["seed"]),
                         (0.95, 1000, comparison.DEFAULT_SEED))
        self.assertEqual(result["baseline"], "model_a")          # folder name, first run
        self.assertEqual(result["rows"]["paired"], 120)
        self.assertEqual(result["rows"]["missing"]["count"], 0)
        self.assertEqual([r["name"] for r in result["runs"]], ["model_a", "model_b"])
        for run, records in zip(result["runs"], (self.records, self.degraded)):
            self.assertEqual(run["rows"], 120)
            self.assertEqual(list(run["metrics"]),
                             ["conn", "sg", "dp", "lo", "sso", "rem", "ea", "mape"])
            expected = metrics_of("single_route", "reference", records)
            for key, figure in run["metrics"].items():
                self.assertEqual(figure["value"], expected[key])
                low, high = figure["ci"]
                self.assertLessEqual(low, figure["value"] + 1e-12)
                self.assertGreaterEqual(high, figure["value"] - 1e-12)
        conn = [c for c in result["comparisons"] if c["metric"] == "conn"][0]
        self.assertEqual(set(conn), {"run", "metric", "delta", "ci", "p_value", "significant"})
        self.assertEqual(conn["delta"], result["runs"][1]["metrics"]["conn"]["value"]
                         - result["runs"][0]["metrics"]["conn"]["value"])
        self.assertTrue(conn["significant"])
        self.assertIn("Conn %", out)

    def test_same_inputs_and_seed_give_identical_bytes(self):
        outputs = []
        for _ in range(2):
            outputs.append(run_compare([self.a, self.b, "--format", "csv", "--seed", "9",
                                        "--json", self.path("x.json")]))
            with open(self.path("x.json"), "rb") as handle:
                outputs.append(handle.read())
        self.assertEqual(outputs[0], outputs[2])
        self.assertEqual(outputs[1], outputs[3])
        other = run_compare([self.a, self.b, "--format", "csv", "--seed", "10"])
        self.assertNotEqual(other[1], outputs[0][1])

    def test_bootstrap_zero_gives_no_intervals(self):
        result, out = self.compare_json([self.a, self.b, "--bootstrap", "0"])
        self.assertTrue(all(f["ci"] is None for run in result["runs"]
                            for f in run["metrics"].values()))
        self.assertTrue(all(c["ci"] is None and c["p_value"] is None and not c["significant"]
                            for c in result["comparisons"]))
        self.assertNotIn("[", out.split("Metrics")[1].split("\n")[2])

    def test_missing_rows_are_reported_and_left_out_of_the_pairs(self):
        short = write_run(self.path("short"), self.degraded[:100])
        result, text = self.compare_json([self.a, short])
        self.assertEqual(result["rows"]["paired"], 100)
        missing = result["rows"]["missing"]
        self.assertEqual(missing["count"], 20)
        self.assertEqual(missing["runs"]["short"]["count"], 20)
        self.assertEqual(missing["runs"]["short"]["first_ids"][:2], ["id00100", "id00101"])
        # each run's value is over all its rows, the delta over the paired rows
        self.assertEqual(result["runs"][0]["metrics"]["conn"]["value"],
                         metrics_of("single_route", "reference", self.records)["conn"])
        paired_delta = (metrics_of("single_route", "reference", self.degraded[:100])["conn"]
                        - metrics_of("single_route", "reference", self.records[:100])["conn"])
        conn = [c for c in result["comparisons"] if c["metric"] == "conn"][0]
        self.assertAlmostEqual(conn["delta"], paired_delta, places=12)
        self.assertIn("20 row(s) are missing", text)
        for fmt in ("markdown", "latex"):
            self.assertIn("20 row(s) are missing", run_compare([self.a, short, "--format",
                                                                fmt])[1], fmt)
        rows = list(csv.DictReader(io.StringIO(run_compare([self.a, short, "--format",
                                                             "csv"])[1])))
        self.assertTrue(all(r["missing_rows"] == "20" and r["paired_rows"] == "100"
                            for r in rows if r["section"] == "metrics"))

    def test_repeated_ids_are_paired_once(self):
        # A test file holding its rows twice (issue 46): 240 rows, 120 ids.
        # Each id is paired once, by its first row: the paired statistics
        # are those of the 120 distinct rows, each run's value that of its
        # 240 rows (its report's), and a note says so.
        def twice(records):
            return [dict(record, row=record["row"] + offset)
                    for offset in (0, len(records)) for record in records]
        doubled_a = write_run(self.path("doubled_a"), twice(self.records))
        doubled_b = write_run(self.path("doubled_b"), twice(self.degraded))
        result, text = self.compare_json([doubled_a, doubled_b, "--seed", "3",
                                          "--names", "a,b"])
        once, _ = self.compare_json([self.a, self.b, "--seed", "3", "--names", "a,b"])
        self.assertEqual(result["rows"]["paired"], 120)
        self.assertEqual(result["rows"]["missing"]["count"], 0)
        self.assertEqual([run["rows"] for run in result["runs"]], [240, 240])
        self.assertEqual(result["comparisons"], once["comparisons"])
        self.assertEqual(result["runs"][0]["metrics"]["conn"]["value"],
                         metrics_of("single_route", "reference", twice(self.records))["conn"])
        self.assertIn("a has 120 row(s) repeating an earlier row's index_id "
                      "(first ids: id00000, id00001", text)
        self.assertIn("each id is paired once, by its first row", text)
        self.assertNotIn("repeating", self.compare_json([self.a, self.b])[1])

    def test_a_runs_interval_is_over_its_own_rows_with_the_shared_draws(self):
        alone, _ = self.compare_json([self.a])
        together, _ = self.compare_json([self.a, self.b])
        short = write_run(self.path("short"), self.degraded[:100])
        with_missing, _ = self.compare_json([self.a, short])
        self.assertEqual(alone["runs"][0]["metrics"], together["runs"][0]["metrics"])
        self.assertEqual(alone["runs"][0]["metrics"], with_missing["runs"][0]["metrics"])
        # b's interval in the pair equals b's interval alone: the same drawn rows
        b_alone, _ = self.compare_json([self.b])
        self.assertEqual(b_alone["runs"][0]["metrics"], together["runs"][1]["metrics"])

    def test_details_file_with_its_report_beside_it(self):
        os.rename(os.path.join(self.a, "details.jsonl"), os.path.join(self.a, "run7.jsonl"))
        os.rename(os.path.join(self.a, "report.json"), os.path.join(self.a, "run7.json"))
        result, _ = self.compare_json([os.path.join(self.a, "run7.jsonl"), self.b,
                                       "--names", "x,y", "--baseline", "y"])
        self.assertEqual([r["name"] for r in result["runs"]], ["x", "y"])
        self.assertEqual(result["baseline"], "y")
        self.assertEqual({c["run"] for c in result["comparisons"]}, {"x"})

    def test_formats(self):
        _, markdown, _ = run_compare([self.a, self.b, "--format", "markdown"])
        table = [line for line in markdown.splitlines() if line.startswith("|")]
        self.assertTrue(table[1].startswith("|---|---|---:|"))
        self.assertEqual(len({line.count("|") for line in table[:4]}), 1)
        self.assertIn("| model_a | - | 120 |", markdown)
        _, latex, _ = run_compare([self.a, self.b, "--format", "latex"])
        for part in (r"\begin{tabular}", r"\toprule", r"\midrule", r"\bottomrule",
                     r"\end{tabular}", r"\textbf{", r"$\pm$", "model\\_a"):
            self.assertIn(part, latex)
        # the better run holds the bold Conn value
        row_a = [l for l in latex.splitlines() if l.startswith("model\\_a")][0]
        self.assertTrue(row_a.split(" & ")[2].startswith(r"\textbf{"))
        _, text, _ = run_compare([self.a, self.b, "--format", "csv"])
        rows = [row for row in csv.DictReader(io.StringIO(text))
                if row["section"] == "metrics"]
        self.assertEqual(len(rows), 2 * 8)
        self.assertEqual(rows[0]["run"], "model_a")
        self.assertEqual(rows[0]["delta"], "")
        self.assertEqual(rows[8]["significant"], "true")

    def test_breakdowns(self):
        result, text = self.compare_json([self.a, self.b, "--by", "city", "--by", "failure"])
        cities = result["breakdowns"]["city"]
        self.assertEqual([c["city"] for c in cities][-1], None)   # error rows have no city
        for entry in cities:
            for name in ("model_a", "model_b"):
                records = [r for r in (self.records if name == "model_a" else self.degraded)
                           if r["city"] == entry["city"]]
                self.assertEqual(entry["rows"][name], len(records))
                self.assertEqual(entry["metrics"][name],
                                 metrics_of("single_route", "reference", records))
        failure = result["breakdowns"]["failure"]
        stages = [s["stage"] for s in failure["stages"]]
        self.assertEqual(stages[0], "reachability")
        totals = [sum(s["rows"].values()) for s in failure["stages"]]
        self.assertEqual(totals, sorted(totals, reverse=True))
        unreachable = sum(1 for r in self.degraded if r["status"] == "evaluated"
                          and not r["reachable"])
        code = [c for c in failure["codes"] if c["code"] == "reachability.not_connected"][0]
        self.assertEqual(code["rows"]["model_b"], unreachable)
        self.assertEqual(failure["passed"]["model_a"],
                         sum(1 for r in self.records if not r["failure_codes"]))
        self.assertIn("By failure code", text)
        self.assertIn("北京", text)

    def test_req_type_breakdown(self):
        records = []
        for i in range(40):
            req = (2, 5, 7, 8)[i % 4]
            records.append(evaluated_record(i + 1, "p%d" % i, req_type=req,
                                            compliant=i % 3 != 0, label_compliant=True))
        a = write_run(self.path("p1"), records, benchmark="personalized")
        result, text = self.compare_json([a, a, "--names", "m,n", "--by", "req_type"])
        rows = {e["req_type"]: e for e in result["breakdowns"]["req_type"]}
        self.assertEqual(sorted(rows), ["2", "5", "7", "8"])
        self.assertEqual(rows["2"]["runs"]["m"]["samples"], 10)
        compliant = sum(1 for i in range(0, 40, 4) if i % 3 != 0)
        self.assertEqual(rows["2"]["runs"]["m"]["compliant"], compliant)
        self.assertIn("pc", result["runs"][0]["metrics"])
        status, _, err = run_compare([self.a, "--by", "req_type"])
        self.assertEqual(status, 2)
        self.assertIn("personalized", err)

    def test_html_wiring(self):
        import transitlm.compare.page
        path = self.path("c.html")
        status, _, err = run_compare([self.a, self.b, "--html", path,
                                      "--json", self.path("c.json")])
        self.assertEqual(status, 0, err)
        with open(self.path("c.json"), encoding="utf-8") as handle:
            result = json.load(handle)
        with open(path, encoding="utf-8") as handle:
            self.assertEqual(handle.read(), transitlm.compare.page.comparison_page(result))

    def test_dash_writes_json_or_html_to_stdout(self):
        status, _, err = run_compare([self.a, self.b, "--json", self.path("c.json"),
                                      "--html", self.path("c.html")])
        self.assertEqual(status, 0, err)
        for flag, name in (("--json", "c.json"), ("--html", "c.html")):
            status, out, err = run_compare([self.a, self.b, flag, "-"])
            self.assertEqual(status, 0, err)
            with open(self.path(name), encoding="utf-8") as handle:
                self.assertEqual(out, handle.read())              # the file's text
        self.assertFalse(os.path.exists("-"))
        status, out, err = run_compare([self.a, "--json", "-", "--html", self.path("x.html")])
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["runs"][0]["name"], "model_a")
        self.assertTrue(os.path.exists(self.path("x.html")))
        for argv, words in (([self.a, "--json", "-", "--html", "-"], "only one output"),
                            ([self.a, "--json", "-", "--format", "csv"], "--format csv")):
            status, out, err = run_compare(argv)
            self.assertEqual((status, out), (2, ""))
            self.assertIn(words, err)
            self.assertEqual(err.count("\n"), 1)

    def test_a_file_of_a_run_folder_stands_for_the_folder(self):
        folder, _ = self.compare_json([self.a, self.b])
        for name in ("report.json", "details.jsonl", "report.txt"):
            if name == "report.txt":
                open(os.path.join(self.a, name), "w").close()
            result, _ = self.compare_json([os.path.join(self.a, name), self.b])
            self.assertEqual(result["runs"], folder["runs"], name)
        # a report JSON alone, or beside its details: refused, saying what to give
        lonely = self.path("lonely")
        os.makedirs(lonely)
        shutil.copy(os.path.join(self.a, "report.json"), os.path.join(lonely, "report.json"))
        shutil.copy(os.path.join(self.a, "report.json"), os.path.join(lonely, "b1.json"))
        shutil.copy(os.path.join(self.a, "details.jsonl"), os.path.join(lonely, "b1.jsonl"))
        for path, words in ((os.path.join(lonely, "report.json"), "has no details.jsonl"),
                            (os.path.join(lonely, "b1.json"),
                             "give the details file %s" % os.path.join(lonely, "b1.jsonl"))):
            status, out, err = run_compare([path])
            self.assertEqual((status, out), (2, ""), err)
            self.assertIn(words, err)
            self.assertNotIn("looked for report.json, report.json", err)
        result, _ = self.compare_json([os.path.join(lonely, "b1.jsonl")])
        self.assertEqual(result["runs"][0]["name"], "b1")

    def test_html_without_its_module_is_a_usage_error(self):
        with mock.patch.dict(sys.modules, {"transitlm.pages": None, "transitlm.compare.page": None}):
            status, out, err = run_compare([self.a, "--html", self.path("c.html")])
        self.assertEqual(status, 2)
        self.assertIn("transitlm.pages", err)
        self.assertFalse(os.path.exists(self.path("c.html")))


class CompareInputErrorTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.records = synthetic_records(30, 0.8, seed=4)
        self.a = write_run(self.path("a"), self.records)

    def assert_usage_error(self, argv, *fragments):
        status, out, err = run_compare(argv)
        self.assertEqual(status, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        for fragment in fragments:
            self.assertIn(fragment, err)

    def test_missing_run(self):
        self.assert_usage_error([self.path("nope")], "nope")
        os.remove(os.path.join(self.a, "details.jsonl"))
        self.assert_usage_error([self.a], "details.jsonl")

    def test_different_protocols_form_groups_and_req_type_needs_benchmark_2(self):
        c = write_run(self.path("c"), self.records, protocol="paper")
        status, out, err = run_compare([self.a, c, "--names", "m,m", "--format", "csv"])
        self.assertEqual(status, 0, err)
        groups = {(r["benchmark"], r["protocol"]) for r in csv.DictReader(io.StringIO(out))
                  if r["section"] == "metrics"}
        self.assertEqual(groups, {("single_route", "reference"), ("single_route", "paper")})
        self.assert_usage_error([self.a, c, "--by", "req_type"], "needs benchmark 2")

    def test_metrics_that_do_not_match_the_report(self):
        metrics = metrics_of("single_route", "reference", self.records)
        metrics["conn"] += 0.01
        b = write_run(self.path("b"), self.records, metrics=metrics)
        self.assert_usage_error([b], "conn", "do not belong together")

    def test_unreadable_details_lines(self):
        path = os.path.join(self.a, "details.jsonl")
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
        for bad, message in (("{not json\n", "line 3: not JSON"),
                             ("[1, 2]\n", "line 3: expected a JSON object"),
                             ("\n", "line 3: empty line"),
                             ('{"row": 3}\n', "line 3: no 'index_id' key"),
                             ('{"index_id": "q", "status": 5, "in_funnel": true}\n',
                              "line 3: status 5 is not one of"),
                             ('{"index_id": "q", "status": "error", "in_funnel": 1}\n',
                              "line 3: in_funnel is")):
            with open(path, "w", encoding="utf-8") as handle:
                handle.writelines(lines[:2] + [bad] + lines[3:])
            self.assert_usage_error([self.a], path, message)

    def test_a_missing_verdict_is_named(self):
        records = [dict(r) for r in self.records]
        reachable = next(i for i, r in enumerate(records) if r.get("reachable"))
        del records[reachable]["line_iou"]
        write_run(self.path("b"), self.records)          # report from the full records
        with open(self.path("b", "details.jsonl"), "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.assert_usage_error([self.path("b")], "line %d: no 'line_iou' key" % (reachable + 1))

    def test_wrong_type_figure(self):
        records = [dict(r) for r in self.records]
        reachable = next(i for i, r in enumerate(records) if r.get("reachable"))
        records[reachable]["line_iou"] = "0.5"
        self.write_details(records)
        status, _, err = run_compare([self.a])
        self.assertEqual(status, 2)
        self.assertNotIn("Traceback", err)

    def write_details(self, records):
        with open(os.path.join(self.a, "details.jsonl"), "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    def test_row_count_differs_from_the_report(self):
        self.write_details(self.records[:-1])
        self.assert_usage_error([self.a], "do not belong together")

    def test_bad_options(self):
        self.assert_usage_error([self.a, "--baseline", "zzz"], "--baseline zzz")
        self.assert_usage_error([self.a, self.a, "--names", "one"], "--names")
        self.assert_usage_error([self.a, self.a, "--names", "x,x"], "repeats")
        self.assert_usage_error([self.a, "--bootstrap", "-1"], "--bootstrap")
        self.assert_usage_error([self.a, "--confidence", "95"], "--confidence")

    def test_breakdown_keys_are_required_when_asked_for(self):
        self.write_details([{k: v for k, v in r.items() if k != "failure_codes"}
                            for r in self.records])
        self.assert_usage_error([self.a, "--by", "failure"], "line 1: no 'failure_codes' key")
        self.write_details([dict(r, failure_codes="reachability.x") for r in self.records])
        self.assert_usage_error([self.a, "--by", "failure"],
                                "failure_codes is text, expected a list of texts")

    def test_default_names_stay_unique(self):
        status, out, err = run_compare([self.a, self.a, "--format", "csv"])
        self.assertEqual(status, 0, err)
        names = [r["run"] for r in csv.DictReader(io.StringIO(out))
                 if r["section"] == "metrics" and r["metric"] == "conn"]
        self.assertEqual(names, [os.path.normpath(self.a), os.path.normpath(self.a) + "#2"])
        status, out, err = run_compare([self.a, "--format", "csv"])
        self.assertEqual([r["run"] for r in csv.DictReader(io.StringIO(out))][0], "a")


if __name__ == "__main__":
    unittest.main()
