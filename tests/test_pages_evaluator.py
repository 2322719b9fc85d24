"""transitlm.pages.evaluator: the evaluator's page.  Rows selected (failures
first, every code before any code's second row) and fetched; the page parses,
makes no network reference, shows the figures of the JSON report and one map
per listed row; hostile text is escaped; error rows draw their label route;
the benchmark-3 route switch; verdicts of checks a row never reached read
"not reached", the general LLM's unchecked plausibility "not checked"; on
hand-made run folders and on real runs of the four evaluators (--out)."""

import atexit
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import common
import transitlm.evaluation.reports  # noqa: E402
import transitlm.pages.evaluator
import transitlm.pages.layout
import transitlm.pages.maps
import transitlm.pages.static
from tests.support import REPO
from tests.support.html_pages import external_references, parse_page
from tests.support.lane import Background
from tests.support.page_runs import (EVALUATORS, page_error_row as error_row,
                                     page_network as network, page_record as evaluated,
                                     page_report as fixture_report, page_route as route,
                                     write_details)


def fixture_records(benchmark):
    records = [
        evaluated(1, []),
        evaluated(2, ["reachability.not_connected"], reachable=False, exact=False,
                    prediction_routes={"first": route(["bus-1", "bus-3", "bus-404"])}),
        evaluated(3, ["overlap.stations"], exact=False, city="深圳"),
        evaluated(4, ["accuracy.distance"], accurate=False),
        error_row(5),
        evaluated(6, []),
    ]
    if benchmark == "personalized":
        for record in records:
            if record["status"] == "evaluated":
                record.update(req_type=2 if record["row"] % 2 else 5, compliant=True,
                              compliant_reason="ok", label_compliant=True)
        records[5].update(compliant=False, compliant_reason="2 transfers, label 1")
        records[5]["failure_codes"] = ["preference.fewer_transfers"]
    if benchmark == "diversity":
        for record in records:
            if record["status"] == "evaluated":
                record["prediction_routes"]["second"] = route(["bus-2", "bus-3", "bus-4"])
                record["prediction_routes"]["third"] = route(["bus-1", "bus-2"])
                record.update(routes={"first": {"reachable": True, "reachable_reason": "r",
                                                "score": 1.0}},
                              best_match="first", rd=0.5, route_count=3, rd_label=0.4,
                              label_route_count=3, all_routes_reachable=True,
                              label_first_score=1.0)
    if benchmark == "general_llm":
        for record in records:
            if record["status"] == "evaluated":
                record["prediction_routes"] = {"first": route(["甲", "乙"])}
                record["label_routes"] = {"first": route(["甲", "丁"])}
                # Ids without the bus- prefix: found through the fallback.
                record["match_details"] = [
                    {"line_query": "1号线", "line_name": "1号线", "boarding_query": "甲",
                     "boarding_name": "甲站", "boarding_stop_id": "1",
                     "alighting_query": "乙", "alighting_name": "乙站",
                     "alighting_stop_id": "3"}]
        records.append({"row": 7, "index_id": "id7", "status": "no_response",
                        "error": "empty prediction", "failed_round": None,
                        "failure_codes": ["no_response"], "city": None, "in_funnel": True,
                        "origin": None, "destination": None, "prediction_routes": None,
                        "label_routes": None})
    return records


def plain(text):
    """A page's text without the isolation of outside text (<bdi>, FSI/PDI)."""
    return re.sub("</?bdi>|[\u2068\u2069]", "", text)


class TempDir(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="html_test_")
        self.addCleanup(shutil.rmtree, self.folder, True)

    def page_for(self, benchmark, records=None, html_rows=500, net=None):
        records = fixture_records(benchmark) if records is None else records
        report = fixture_report(benchmark, records)
        path = write_details(self.folder, records)
        text = transitlm.pages.evaluator.evaluator_page(report, path, net or network(), html_rows)
        return report, text


# ---------------------------------------------------------------------------
# Row selection (pass 1) and fetching (pass 2)
# ---------------------------------------------------------------------------

class SelectionTest(TempDir):
    def scan(self, records, limit):
        scan = transitlm.pages.evaluator.DetailsScan(limit)
        for number, record in enumerate(records, start=1):
            scan.add(number, record)
        return scan

    def test_failures_first_then_passed_in_file_order(self):
        records = [{"failure_codes": []}, {"failure_codes": ["overlap.x"]},
                   {"failure_codes": []}, {"failure_codes": ["error.y"]}]
        keys = self.scan(records, 3).selected()
        self.assertEqual([key[3] for key in keys[:2]], [2, 4])
        self.assertIn(keys[2][3], (1, 3))
        self.assertEqual(keys, self.scan(records, 3).selected())      # deterministic

    def test_every_code_gets_a_row_before_a_code_gets_its_second(self):
        records = [{"failure_codes": ["overlap.x"]}] * 5 + [{"failure_codes": ["accuracy.t"]}]
        keys = self.scan(records, 2).selected()
        self.assertIn(6, [key[3] for key in keys])

    def test_limit_zero_and_no_rows(self):
        self.assertEqual(self.scan([{"failure_codes": ["a.b"]}], 0).selected(), [])
        scan = self.scan([], 5)
        self.assertEqual((scan.rows, scan.selected()), (0, []))

    def test_counts(self):
        records = fixture_records("single_route")
        scan = self.scan(records, 10)
        self.assertEqual(scan.rows, 6)
        self.assertEqual(scan.failing, 4)
        self.assertEqual(scan.code_counts["error.invalid_json"], 1)
        self.assertEqual(scan.by_city["北京"]["samples"], 4)
        self.assertEqual(scan.by_city["北京"]["reachable"], 3)
        self.assertEqual(scan.by_city["深圳"].get("exact", 0), 0)

    def test_codes_of_schema_1_details(self):
        self.assertEqual(transitlm.pages.evaluator.failure_codes({"status": "error"}), ["error"])
        self.assertEqual(transitlm.pages.evaluator.failure_codes({"status": "evaluated",
                                                    "failed_round": "overlap"}), ["overlap"])
        self.assertEqual(transitlm.pages.evaluator.failure_codes({"status": "evaluated"}), [])

    def test_fetch_rows_returns_only_wanted_lines(self):
        path = write_details(self.folder, fixture_records("single_route"))
        rows = transitlm.pages.evaluator.fetch_rows(path, [2, 5])
        self.assertEqual(sorted(rows), [2, 5])
        self.assertEqual(rows[5]["status"], "error")
        self.assertEqual(transitlm.pages.evaluator.fetch_rows(path, []), {})

    def test_bad_details_file_is_an_input_error(self):
        path = os.path.join(self.folder, "bad.jsonl")
        with open(path, "w") as handle:
            handle.write('{"row": 1}\nnot json\n')
        with self.assertRaises(common.InputError) as caught:
            transitlm.pages.evaluator.scan_details(path, 5)
        self.assertIn("line 2", str(caught.exception))
        with self.assertRaises(common.InputError):
            transitlm.pages.evaluator.scan_details(os.path.join(self.folder, "missing.jsonl"), 5)


# ---------------------------------------------------------------------------
# Evaluator pages
# ---------------------------------------------------------------------------

def funnel_table(parser):
    return {row[0]: int(row[1]) for row in parser.tables["funnel-table"][1:]}


class EvaluatorPageTest(TempDir):
    def check_page(self, benchmark, report, text, records):
        parser = parse_page(text)
        self.assertEqual(external_references(parser), [])
        self.assertNotIn("http://", text)
        self.assertNotIn("https://", text)
        counts, rounds = report["counts"], report["rounds"]
        expected = {"samples": counts["samples"], "evaluated": counts["evaluated"],
                    "Round 1 input": rounds["reachability"]["input"],
                    "reachable": rounds["reachability"]["passed"],
                    "station grounding": rounds["grounding"]["station_grounding"],
                    "distance plausibility": rounds["grounding"]["distance_plausibility"],
                    "exact match": rounds["overlap"]["exact_match"],
                    "accurate (overall)": rounds["accuracy"]["overall"]}
        if "preference" in rounds:
            expected["preference-compliant"] = rounds["preference"]["compliant"]
        self.assertEqual(funnel_table(parser), expected)
        shown = {key: transitlm.pages.layout.fmt_metric(key, value)
                 for key, value in report["metrics"].items()}
        self.assertEqual(parser.metrics, shown)
        self.assertIn(html.escape(transitlm.evaluation.reports.summary_line(report["metrics"]), quote=True), text)
        self.assertEqual(parser.listed_rows, len(records))
        self.assertEqual(parser.maps, parser.listed_rows)
        return parser

    def test_each_benchmark(self):
        for benchmark in EVALUATORS:
            with self.subTest(benchmark=benchmark):
                records = fixture_records(benchmark)
                report, text = self.page_for(benchmark, records)
                self.check_page(benchmark, report, text, records)
                self.assertIn(report["signature"], text)
                self.assertIn("ab" * 32, text)                  # input hash
                self.assertIn("3 prediction(s) with an id", text)   # warnings

    def test_failure_code_bars_link_to_the_filter(self):
        _, text = self.page_for("single_route")
        self.assertIn('href="#code=reachability.not_connected"', text)
        self.assertIn('<option value="reachability.not_connected">', text)

    def test_broken_hop_dashed_red_and_missing_stations_listed(self):
        _, text = self.page_for("single_route")
        text = plain(text)
        self.assertIn("bus-1 \u2192 bus-3 not connected", text)
        self.assertIn('stroke="%s"' % transitlm.pages.maps.BROKEN_RED, text)
        self.assertIn("Not in the station file: bus-404 (prediction)", text)

    def test_access_circles_scale_with_the_mode(self):
        records = [evaluated(1, [], prediction_routes={
            "first": route(["bus-1", "bus-2"], start="打车", end="步行")})]
        _, text = self.page_for("single_route", records)
        radii = [float(r) for r in re.findall(r'<circle class="limit" cx="[^"]+" cy="[^"]+" '
                                              r'r="([^"]+)"', text)]
        self.assertEqual(len(radii), 2)
        self.assertAlmostEqual(radii[0] / radii[1],
                               common.TAXI_LIMIT_KM / common.WALK_LIMIT_KM, delta=0.05)
        self.assertIn("access limit 10 km (打车)", plain(text))

    def test_general_llm_matched_stops_with_names(self):
        _, text = self.page_for("general_llm")
        text = plain(text)
        self.assertIn("boarding: 甲站 (1), asked: 甲", text)
        self.assertIn("alighting: 乙站 (3), asked: 乙", text)

    def test_diversity_routes_in_three_colours(self):
        _, text = self.page_for("diversity")
        for key in common.ROUTE_KEYS:
            self.assertIn('stroke="%s"' % transitlm.pages.maps.ROUTE_COLOURS[key], text)
            self.assertIn("%s route:" % key, text)

    def test_row_limit_and_left_out_count(self):
        records = fixture_records("single_route")
        report, text = self.page_for("single_route", records, html_rows=2)
        parser = parse_page(text)
        self.assertEqual((parser.listed_rows, parser.maps), (2, 2))
        self.assertIn("<b>4 rows left out</b>", text)
        _, text = self.page_for("single_route", records, html_rows=0)
        parser = parse_page(text)
        self.assertEqual((parser.listed_rows, parser.maps), (0, 0))
        self.assertIn("<b>6 rows left out</b>", text)

    def test_hostile_text_is_escaped_and_written(self):
        records = fixture_records("single_route")
        records[4]["index_id"] = "<script>alert(1)</script>"
        records[4]["error"] = "\x1b[31mbad\udcff </script> http://evil.example/x.png"
        records[0]["city"] = "\ud800城"
        report, text = self.page_for("single_route", records)
        self.assertNotIn("<script>alert", text)
        self.assertEqual(parse_page(text).script_types, [""])      # only our own script
        self.assertNotIn("\x1b", text)
        path = os.path.join(self.folder, "page.html")
        transitlm.pages.evaluator.write_evaluator_page(path, report,
                                         os.path.join(self.folder, "details.jsonl"),
                                         network())
        with open(path, encoding="utf-8") as handle:
            self.assertIn("\\x1b[31mbad\\udcff", handle.read())

    def test_empty_details(self):
        report, text = self.page_for("single_route", [])
        parser = parse_page(text)
        self.assertEqual((parser.listed_rows, parser.maps), (0, 0))
        self.assertIn("No row failed a check.", text)

    def test_rows_without_coordinates(self):
        records = [error_row(1)]
        records[0]["origin"] = records[0]["destination"] = None
        _, text = self.page_for("single_route", records)
        self.assertEqual(parse_page(text).maps, 1)
        self.assertIn("No coordinates to draw", text)

    def row_html(self, text, row):
        """The html of one listed row (its tbody)."""
        for body in re.findall(r'<tbody class="r".*?</details></td></tr></tbody>', text, re.S):
            if re.search(r'<td class="num">%d</td>' % row, body):
                return body
        self.fail("row %d is not listed" % row)

    def test_verdict_parts_are_separate_cells(self):
        _, text = self.page_for("single_route")
        body = self.row_html(text, 4)
        table = re.search(r'<table class="verdicts">(.*?)</table>', body, re.S).group(1)
        rows = [[html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in
                 re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", line, re.S)]
                for line in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
        self.assertEqual(rows[0], ["check", "verdict", "detail"])
        self.assertTrue(all(len(line) == 3 for line in rows))
        self.assertIn(["expert score", "same", "10 vs label 10 (0%)"], rows)
        self.assertIn(["access distances accurate", "yes", ""], rows)
        self.assertIn(["distance accurate", "no", "MAPE 1%"], rows)
        # The cells are apart on screen: no rule of the row list reaches into
        # the verdicts table nested in it (the bug: its cells lost their padding).
        css = transitlm.pages.static.CSS
        self.assertNotRegex(css, r"table\.rows( [a-z.]+)* td\b")
        self.assertRegex(css, r"table\.verdicts td[,{][^}]*padding:3px 10px 3px 0|"
                              r"table\.verdicts td\{[^}]*padding")

    def verdicts(self, text, row):
        table = re.search(r'<table class="verdicts">(.*?)</table>', self.row_html(text, row),
                          re.S).group(1)
        return {cells[0]: cells[1:] for cells in (
            [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in
             re.findall(r"<td[^>]*>(.*?)</td>", line, re.S)]
            for line in re.findall(r"<tr>(.*?)</tr>", table, re.S)) if cells}

    def test_checks_never_reached_read_not_reached(self):
        # Unreachable, yet its other verdicts say yes (as the engine computes
        # them): none of them may show "yes".
        records = [evaluated(1, ["reachability.broken_hop"], reachable=False, exact=True),
                   evaluated(2, ["overlap.station_mismatch"], exact=False)]
        _, text = self.page_for("single_route", records)
        unreachable = self.verdicts(text, 1)
        self.assertEqual(unreachable["reachable"][0], "no")
        for check in ("station grounding", "distance plausibility", "exact match",
                      "expert score", "distance accurate", "access distances accurate"):
            self.assertEqual(unreachable[check], ["not reached",
                                                  "the route is not reachable (Round 1)"])
        self.assertNotIn("yes", [verdict for verdict, _ in unreachable.values()])
        inexact = self.verdicts(text, 2)
        self.assertEqual(inexact["station grounding"][0], "yes")
        self.assertEqual(inexact["fare accurate"], ["not reached",
                                                   "not an exact match (Round 3)"])
        self.assertIn('<td class="v-na">not reached</td>', self.row_html(text, 1))

    def test_general_llm_plausibility_is_not_checked_under_the_published_rules(self):
        records = fixture_records("general_llm")
        report = fixture_report("general_llm", records)
        for protocol, shown in (("reference", "not checked"), ("paper", "yes")):
            report["protocol"] = protocol
            path = write_details(self.folder, records)
            text = transitlm.pages.evaluator.evaluator_page(report, path, network())
            self.assertEqual(self.verdicts(text, 1)["distance plausibility"][0], shown)

    def test_an_error_is_shown_once(self):
        records = [error_row(1, "generator error: HTTP 500 from the model server"),
                   error_row(2, "prediction is not valid JSON"), evaluated(3, [])]
        records[0].update(status="no_response", failure_codes=["no_response"],
                          generator_error="HTTP 500 from the model server")
        records[1]["generator_error"] = "rate limited"
        _, text = self.page_for("single_route", records)
        first = self.row_html(text, 1)
        self.assertEqual(first.count("HTTP 500 from the model server"), 1)
        second = self.row_html(text, 2)
        self.assertEqual(second.count("prediction is not valid JSON"), 1)
        self.assertEqual(second.count("rate limited"), 1)
        self.assertIn("prediction is not valid JSON (generator error: rate limited)", second)
        self.assertEqual(transitlm.pages.evaluator.error_text(
            {"error": None, "generator_error": "timeout"}), "generator error: timeout")
        self.assertEqual(transitlm.pages.evaluator.error_text({"error": "x"}), "x")

    def test_error_rows_draw_the_label_route(self):
        label = {"first": route(["bus-1", "bus-2", "bus-3", "bus-4"])}
        records = [error_row(1), error_row(2)]
        records[0]["label_routes"] = label
        records[1].update(status="no_response", failure_codes=["no_response"],
                          label_routes=label)
        _, text = self.page_for("single_route", records)
        for row in (1, 2):
            body = self.row_html(text, row)
            self.assertIn('stroke="%s"' % transitlm.pages.maps.LABEL_GREY, body)
            self.assertIn("label route (grey, wide;", body)
            self.assertEqual(body.count("<circle cx"), 4)        # the label's stops
        # A label that did not parse (no label_routes): origin and destination only.
        _, text = self.page_for("single_route", [error_row(3)])
        self.assertNotIn('stroke="%s"' % transitlm.pages.maps.LABEL_GREY, self.row_html(text, 3))

    def test_general_llm_label_of_station_names_is_listed(self):
        records = fixture_records("general_llm")
        _, text = self.page_for("general_llm", records)
        self.assertIn("Label route (station names, not placed on the map): 1\u53f7\u7ebf; "
                      "stations \u7532 \u2192 \u4e01", plain(self.row_html(text, 1)))

    def test_diversity_route_switch(self):
        _, text = self.page_for("diversity")
        body = self.row_html(text, 1)
        names = set()
        for key in ("all",) + common.ROUTE_KEYS:
            match = re.search(r'<input type="radio" name="([^"]+)" id="[^"]+" class="o-%s"'
                              % key, body)
            self.assertIsNotNone(match, key)
            names.add(match.group(1))
        self.assertEqual(len(names), 1)                       # one radio group a row
        self.assertIn('class="o-all" checked', body)
        # The switch precedes the map (the CSS shows the chosen route through ~).
        self.assertLess(body.index('class="o-third"'), body.index('<svg class="map"'))
        for key in common.ROUTE_KEYS:
            groups = "".join(re.findall(r'<g class="rk rk-%s">(.*?)</g>' % key, body, re.S))
            self.assertIn('stroke="%s"' % transitlm.pages.maps.ROUTE_COLOURS[key], groups)
            for other in common.ROUTE_KEYS:
                if other != key:
                    self.assertNotIn('stroke="%s"' % transitlm.pages.maps.ROUTE_COLOURS[other],
                                     groups)
            self.assertIn(".o-%s:checked~svg .rk:not(.rk-%s)" % (key, key),
                          transitlm.pages.static.CSS)
        # Radio names differ between rows; single-route maps have no switch.
        all_names = re.findall(r'<input type="radio" name="([^"]+)" id="[^"]+" class="o-all"',
                               text)
        self.assertEqual(len(all_names), len(set(all_names)))
        self.assertGreater(len(all_names), 1)
        _, text = self.page_for("single_route")
        self.assertNotIn('type="radio"', text)

    def test_font_stack_has_cjk_fallbacks(self):
        css = transitlm.pages.static.CSS
        body = re.search(r"body\{font:[^;]*;", css).group()
        for family in ("Noto Sans CJK SC", "Microsoft YaHei", "PingFang SC",
                       "WenQuanYi Micro Hei"):
            self.assertIn('"%s"' % family, body)
        self.assertTrue(body.endswith(",sans-serif;"))
        self.assertNotIn("@font-face", css)                   # no web font

    def test_write_failure_is_an_input_error(self):
        records = fixture_records("single_route")
        report = fixture_report("single_route", records)
        path = write_details(self.folder, records)
        with self.assertRaises(common.InputError) as caught:
            transitlm.pages.evaluator.write_evaluator_page(self.folder, report, path, network())
        self.assertTrue(str(caught.exception).startswith("cannot write "))


class LabelOfRowsNotEvaluatedTest(unittest.TestCase):
    """Error and no-response records carry the label's routes when the label
    parses (Benchmark.label_drawing), so their map draws it."""

    LABEL = {"line_sequence": ["L1"], "station_sequence": ["A", "B"],
             "total_distance": "1\u516c\u91cc", "total_time": "5\u5206\u949f",
             "total_fare": "2", "start_transfer_mode": "\u6b65\u884c",
             "end_transfer_mode": "\u6b65\u884c", "start_transfer_distance": "0.1\u516c\u91cc",
             "end_transfer_distance": "0.1\u516c\u91cc"}
    PROMPT = json.dumps({"query": "q", "start": "0.0,0.0", "end": "0.001,0.0",
                         "city": "\u5317\u4eac"})

    def records(self, benchmark, rows):
        import transitlm.api
        # Stations A and B are not in the bundled network: the labels are
        # another network's, scored anyway (transitlm.evaluation.network_check).
        return transitlm.api.evaluate(benchmark, [
            {"index_id": "id%d" % index, "sft_prompt": self.PROMPT, "sft_label": label,
             "generate_results": prediction} for index, (label, prediction) in enumerate(rows)],
            allow_foreign_network=True)[1]

    def test_single_route(self):
        label = json.dumps(self.LABEL)
        records = self.records("single_route", [(label, "not json"), ("{bad", label),
                                                ('"text"', "not json")])
        self.assertEqual([r["failure_codes"] for r in records],
                         [["error.invalid_json"], ["error.invalid_label"], ["error.invalid_json"]])
        self.assertEqual(records[0]["label_routes"]["first"]["stations"], ["A", "B"])
        self.assertEqual(records[0]["label_routes"]["first"]["lines"], ["L1"])
        self.assertIsNone(records[1]["label_routes"])       # the label does not parse
        self.assertIsNone(records[2]["label_routes"])       # a label that is not an object

    def test_diversity_and_general_llm(self):
        label = json.dumps({"first": self.LABEL, "third": self.LABEL})
        record = self.records("diversity", [(label, "{}")])[0]
        self.assertEqual(record["failure_codes"], ["error.no_route"])
        self.assertEqual(sorted(record["label_routes"]), ["first", "third"])
        record = self.records("general_llm", [(json.dumps(self.LABEL), "")])[0]
        self.assertEqual(record["status"], "no_response")
        self.assertEqual(record["label_routes"]["first"]["stations"], ["A", "B"])


# ---------------------------------------------------------------------------
# Real run folders (the evaluators with --out)
# ---------------------------------------------------------------------------

def real_runs():
    """Each evaluator's command run on its bundled example with --out, one
    after another -> the folder holding a run folder per benchmark."""
    folder = tempfile.mkdtemp(prefix="html_real_runs_")
    atexit.register(shutil.rmtree, folder, True)
    for benchmark in EVALUATORS:
        subprocess.run([sys.executable, os.path.join(REPO, benchmark, "evaluate.py"),
                        "--quiet", "--out", os.path.join(folder, benchmark)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return folder


# Programs of their own, started as the module loads and run in the lane
# beside the suite (tests.support.Background).
REAL_RUNS = Background(real_runs)


class RunFolderTest(TempDir):
    def test_pages_of_real_runs(self):
        net = common.StationNetwork.load(os.path.join(REPO, "data", "station_info.csv"))
        runs = REAL_RUNS.result()
        for benchmark in EVALUATORS:
            with self.subTest(benchmark=benchmark):
                out = os.path.join(runs, benchmark)
                with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
                    report = json.load(handle)
                details = os.path.join(out, "details.jsonl")
                with open(details, encoding="utf-8") as handle:
                    records = [json.loads(line) for line in handle]
                text = transitlm.pages.evaluator.evaluator_page(report, details, net)
                EvaluatorPageTest.check_page(self, benchmark, report, text, records)


if __name__ == "__main__":
    unittest.main()
