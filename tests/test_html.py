"""HTML report pages (transitlm.pages): parsing, self-containment, figures equal
to the JSON report, one map per listed row, row selection, escaping, maps."""

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import common
import transitlm.records  # noqa: E402
import transitlm.reports  # noqa: E402
import transitlm.compare.page
import transitlm.pages.evaluator
import transitlm.pages.layout
import transitlm.pages.maps
import transitlm.pages.static

from tests.support import (  # the run-folder fixtures, under the names these tests use
    EVALUATORS, REPO, page_error_row as error_row, page_network as network,
    page_record as evaluated, page_records as fixture_records, page_report as fixture_report,
    page_route as route, write_details)


# ---------------------------------------------------------------------------
# A small parser collecting what the tests look at
# ---------------------------------------------------------------------------

class PageParser(html.parser.HTMLParser):
    def __init__(self):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.references = []          # values of src / href attributes
        self.styles = []              # <style> texts and style attributes
        self.maps = 0                 # <svg class="map">
        self.listed_rows = 0          # <tbody class="r">
        self.tables = {}              # table id -> rows of cell texts
        self.metrics = {}             # data-metric -> value text
        self.script_types = []
        self._stack = []
        self._table = None
        self._cell = None
        self._metric = None
        self._in_mval = False
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href", "xlink:href", "action", "data"):
            if attrs.get(name):
                self.references.append(attrs[name])
        if attrs.get("style"):
            self.styles.append(attrs["style"])
        classes = (attrs.get("class") or "").split()
        if tag == "svg" and "map" in classes:
            self.maps += 1
        if tag == "tbody" and "r" in classes:
            self.listed_rows += 1
        if tag == "table" and attrs.get("id"):
            self._table = attrs["id"]
            self.tables[self._table] = []
        if tag == "tr" and self._table:
            self.tables[self._table].append([])
        if tag in ("td", "th") and self._table:
            self._cell = []
        if attrs.get("data-metric"):
            self._metric = attrs["data-metric"]
        if "mval" in classes:
            self._in_mval = True
        if tag == "style":
            self._in_style = True
        if tag == "script":
            self.script_types.append(attrs.get("type", ""))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        if tag == "table":
            self._table = None
        if tag == "div" and self._in_mval:
            self._in_mval = False
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_mval and self._metric:
            self.metrics[self._metric] = data.strip()
        if self._in_style:
            self.styles.append(data)


def parse_page(text):
    parser = PageParser()
    parser.feed(text)
    parser.close()
    return parser


def external_references(parser):
    """Every http(s) reference in src/href attributes or CSS url()."""
    found = [ref for ref in parser.references if re.match(r"\s*(https?:)?//", ref, re.I)]
    for style in parser.styles:
        for url in re.findall(r"url\(\s*['\"]?([^'\")]*)", style, re.I):
            if re.match(r"\s*(https?:)?//", url, re.I):
                found.append(url)
    return found


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
# Pure helpers
# ---------------------------------------------------------------------------

class TextTest(unittest.TestCase):
    def test_clean_text_escapes_surrogates_and_controls(self):
        self.assertEqual(transitlm.pages.layout.clean_text("a\udcffb"), "a\\udcffb")
        self.assertEqual(transitlm.pages.layout.clean_text("\x1b[31mred"), "\\x1b[31mred")
        self.assertEqual(transitlm.pages.layout.clean_text("tab\tnl\n"), "tab\tnl\n")
        self.assertEqual(transitlm.pages.layout.clean_text(12), "12")

    def test_esc(self):
        self.assertEqual(transitlm.pages.layout.esc("<script>\"'&"),
                         "&lt;script&gt;&quot;&#x27;&amp;")
        self.assertEqual(transitlm.pages.layout.esc(None), "")

    def test_fmt_metric(self):
        self.assertEqual(transitlm.pages.layout.fmt_metric("conn", 0.8421), "84.2%")
        self.assertEqual(transitlm.pages.layout.fmt_metric("lo", 0.77083), "0.771")
        self.assertEqual(transitlm.pages.layout.fmt_metric("mape", 7.2345), "7.23%")
        self.assertEqual(transitlm.pages.layout.fmt_metric("conn", None), "-")
        self.assertEqual(transitlm.pages.layout.fmt_metric("conn", float("nan")), "-")

    def test_fmt_delta(self):
        self.assertEqual(transitlm.pages.layout.fmt_delta("rem", 0.031), "+3.1 pp")
        self.assertEqual(transitlm.pages.layout.fmt_delta("sso", -0.0123), "-0.012")
        self.assertEqual(transitlm.pages.layout.fmt_delta("mape", None), "-")

    def test_fmt_count_pct(self):
        self.assertEqual(transitlm.pages.layout.fmt_count_pct(32, 38), "32 (84.2%)")
        self.assertEqual(transitlm.pages.layout.fmt_count_pct(0, 0), "0")


class GeometryTest(unittest.TestCase):
    def test_scale_bar_picks_largest_fitting_length(self):
        self.assertEqual(transitlm.pages.maps.scale_bar_km(10.0, 110), 10)
        self.assertEqual(transitlm.pages.maps.scale_bar_km(10.0, 99), 5)
        self.assertEqual(transitlm.pages.maps.scale_bar_km(1e6, 10), 0.05)   # nothing fits: smallest

    def test_projection_north_up_and_same_scale_both_axes(self):
        # Mean latitude 60: a degree of longitude is cos(60) = half a degree of latitude.
        project = transitlm.pages.maps.Projection([(10.0, 59.5), (12.0, 60.5)])
        west, east = project((10.0, 60.0)), project((12.0, 60.0))
        south, north = project((10.0, 59.5)), project((10.0, 60.5))
        self.assertLess(north[1], south[1])
        self.assertAlmostEqual(east[0] - west[0], south[1] - north[1], delta=0.5)

    def test_projection_of_one_point_or_none(self):
        x, y = transitlm.pages.maps.Projection([(116.0, 40.0)])((116.0, 40.0))
        self.assertTrue(0 < x < transitlm.pages.maps.MAP_WIDTH and 0 < y < transitlm.pages.maps.MAP_HEIGHT)
        transitlm.pages.maps.Projection([])((0.0, 0.0))      # no crash

    def test_split_legs(self):
        split = transitlm.pages.maps.split_legs
        self.assertEqual(split(["a", "b", common.TRANSFER, "c", "d"]),
                         [["a", "b"], ["c", "d"]])
        self.assertEqual(split(["a", "b", "b", "c"]), [["a", "b"], ["b", "c"]])
        self.assertEqual(split(["a", "b"]), [["a", "b"]])
        self.assertEqual(split([]), [])
        self.assertEqual(split([common.TRANSFER]), [])
        # the details' leg sizes win when they fit the stations, else ignored
        self.assertEqual(split(["a", "b", "c", "d"], [1, 3]), [["a"], ["b", "c", "d"]])
        self.assertEqual(split(["a", "b", "b", "c"], [1, 2]), [["a", "b"], ["b", "c"]])
        self.assertEqual(split(["a", "b"], [0, 2]), [["a", "b"]])

    def test_valid_point(self):
        self.assertTrue(transitlm.pages.maps.valid_point([116.0, 39.0]))
        self.assertFalse(transitlm.pages.maps.valid_point([116.0, 99.0]))
        self.assertFalse(transitlm.pages.maps.valid_point(None))
        self.assertFalse(transitlm.pages.maps.valid_point(["x", 1]))
        self.assertFalse(transitlm.pages.maps.valid_point([float("nan"), 1]))


class StopsTest(unittest.TestCase):
    def test_malformed_stop_reads_as_unknown(self):
        class Broken(object):
            def coords(self, stop):
                raise common.InputError("line 3: coord_x/coord_y of stop x is malformed")
            next_hops = name = coords
        stops = transitlm.pages.maps.Stops(Broken())
        self.assertIsNone(stops.coords("x"))
        self.assertIsNone(stops.name("x"))
        self.assertIsNone(stops.connected("x", "y"))

    def test_prefix_fallback_only_for_general_llm(self):
        net = network()
        self.assertIsNone(transitlm.pages.maps.Stops(net).coords("1"))
        fallback = transitlm.pages.maps.Stops(net, prefix_fallback=True)
        self.assertEqual(fallback.coords("1"), (116.30, 39.90))
        self.assertTrue(fallback.connected("1", "2"))
        self.assertFalse(fallback.connected("1", "3"))

    def test_no_network(self):
        self.assertIsNone(transitlm.pages.maps.Stops(None).coords("bus-1"))


# ---------------------------------------------------------------------------
# Label placement on maps
# ---------------------------------------------------------------------------

def overlapping_pairs(boxes):
    """Index pairs of boxes (left, top, width, height) that overlap."""
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if transitlm.pages.maps.boxes_overlap(boxes[i], boxes[j])]


def crowded_map(seed, labels=8, spread=40.0):
    """A synthetic crowded map: ``labels`` labels whose points lie within
    ``spread`` px of one point of a 440 x 300 map, two marker obstacles among
    them.  -> (label requests, obstacles)."""
    import random
    rng = random.Random(seed)
    cx, cy = rng.uniform(60, 380), rng.uniform(50, 250)
    texts = ["origin", "destination", "\u6b65\u884c 1.2 km", "\u6253\u8f66 7.6 km",
             "\u5317\u4eac\u5357\u7ad9", "bus-100022", "a", "\u9a91\u884c 0.4 km"]
    requests = []
    for index in range(labels):
        x, y = cx + rng.uniform(-spread, spread), cy + rng.uniform(-spread, spread)
        width, height = transitlm.pages.maps.text_box_size(texts[index % len(texts)], 11)
        requests.append((x, y, width, height, 9.0))
    obstacles = [(requests[0][0] - 6, requests[0][1] - 6, 12, 12),
                 (requests[1][0] - 6, requests[1][1] - 6, 12, 12)]
    return requests, obstacles


class LabelPlacementTest(unittest.TestCase):
    BOUNDS = (2, 2, 436, 296)

    def test_text_box_size(self):
        size = transitlm.pages.maps.text_box_size
        self.assertEqual(size("ab", 10), (12.4, 12.5))        # 2 x 0.62 em
        self.assertEqual(size("\u5317\u4eac", 10), (20.0, 12.5))  # CJK: 1 em each
        self.assertEqual(size("", 10), (0.0, 12.5))

    def test_boxes_overlap(self):
        overlap = transitlm.pages.maps.boxes_overlap
        self.assertTrue(overlap((0, 0, 10, 10), (5, 5, 10, 10)))
        self.assertFalse(overlap((0, 0, 10, 10), (10, 0, 10, 10)))      # touching
        self.assertTrue(overlap((0, 0, 10, 10), (11, 0, 10, 10), gap=2))
        self.assertFalse(overlap((0, 0, 10, 10), (0, 30, 10, 10)))

    def test_candidates_start_right_of_the_point(self):
        first = transitlm.pages.maps.label_candidates(100, 50, 30, 10, 9)[0]
        self.assertEqual(first, (109, 45.0, 30, 10))
        second = transitlm.pages.maps.label_candidates(100, 50, 30, 10, 9)[1]
        self.assertEqual(second, (61, 45.0, 30, 10))                     # left

    def test_empty_and_single(self):
        place = transitlm.pages.maps.place_labels
        self.assertEqual(place([]), [])
        self.assertEqual(place([(100, 50, 30, 10, 9)]), [(109, 45.0, 30, 10)])

    def test_a_free_label_keeps_its_first_place_and_bounds_are_kept(self):
        place = transitlm.pages.maps.place_labels
        # Near the right edge the label cannot go right: it goes left.
        box = place([(430, 150, 40, 12, 9)], bounds=self.BOUNDS)[0]
        self.assertEqual(box, (381, 144.0, 40, 12))
        # A label whose first place is taken by an obstacle moves.
        box = place([(100, 50, 30, 10, 9)], obstacles=[(105, 40, 50, 20)])[0]
        self.assertEqual(box, (61, 45.0, 30, 10))

    def test_crowded_maps_have_no_overlapping_labels(self):
        place = transitlm.pages.maps.place_labels
        for seed in range(60):
            labels, spread = ((8, 40.0), (16, 10.0), (24, 5.0))[seed % 3]
            with self.subTest(seed=seed, labels=labels, spread=spread):
                requests, obstacles = crowded_map(seed, labels, spread)
                boxes = place(requests, obstacles, self.BOUNDS)
                self.assertEqual(overlapping_pairs(boxes), [])
                for box in boxes:
                    self.assertFalse(any(transitlm.pages.maps.boxes_overlap(box, obstacle)
                                         for obstacle in obstacles))
                    self.assertTrue(transitlm.pages.maps._inside(box, self.BOUNDS))

    def test_the_check_fails_without_placement(self):
        # Every label at its first candidate (no placement): the crowded maps
        # above do have overlapping labels, so the test above can fail.
        candidates = transitlm.pages.maps.label_candidates
        crowded = 0
        for seed in range(60):
            requests, _ = crowded_map(seed)
            naive = [candidates(*request)[0] for request in requests]
            crowded += bool(overlapping_pairs(naive))
        self.assertGreater(crowded, 50)

    def test_labels_of_a_crowded_row_map(self):
        # Origin and destination 150 m apart, both access legs between them:
        # four labels in a few pixels once the map spans 10 km.
        net = common.StationNetwork.from_dict({
            "s1": (116.3000, 39.9000, ["s2"]), "s2": (116.4000, 39.9600, ["s1"])})
        record = {"row": 1, "status": "evaluated", "origin": [116.3001, 39.9001],
                  "destination": [116.3010, 39.9010],
                  "prediction_routes": {"first": route(["s1", "s2"], end="\u6253\u8f66")},
                  "label_routes": None}
        builder_boxes = []
        original = transitlm.pages.maps.MapBuilder._place_labels

        def spy(builder):
            original(builder)
            builder_boxes.extend(builder.label_boxes)
        transitlm.pages.maps.MapBuilder._place_labels = spy
        try:
            svg, _ = transitlm.pages.maps.row_map(record, "single_route",
                                                  transitlm.pages.maps.Stops(net))
        finally:
            transitlm.pages.maps.MapBuilder._place_labels = original
        self.assertEqual(len(builder_boxes), 4)            # origin, destination, 2 access
        self.assertEqual(overlapping_pairs(builder_boxes), [])
        self.assertEqual(len(re.findall(r'<text class="(?:mk|acc)', svg)), 4)


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
        self.assertIn(html.escape(transitlm.reports.summary_line(report["metrics"]), quote=True), text)
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
        self.assertIn("access limit 10 km (打车)", text)

    def test_general_llm_matched_stops_with_names(self):
        _, text = self.page_for("general_llm")
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
            self.assertIn("label route (grey, wide)", body)
            self.assertEqual(body.count("<circle cx"), 4)        # the label's stops
        # A label that did not parse (no label_routes): origin and destination only.
        _, text = self.page_for("single_route", [error_row(3)])
        self.assertNotIn('stroke="%s"' % transitlm.pages.maps.LABEL_GREY, self.row_html(text, 3))

    def test_general_llm_label_of_station_names_is_listed(self):
        records = fixture_records("general_llm")
        _, text = self.page_for("general_llm", records)
        self.assertIn("Label route (station names, not placed on the map): 1\u53f7\u7ebf; "
                      "stations \u7532 \u2192 \u4e01", self.row_html(text, 1))

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
        return transitlm.api.evaluate(benchmark, [
            {"index_id": "id%d" % index, "sft_prompt": self.PROMPT, "sft_label": label,
             "generate_results": prediction} for index, (label, prediction) in enumerate(rows)])[1]

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
# Comparison page
# ---------------------------------------------------------------------------

COMPARISON = {
    "schema_version": 1, "confidence": 0.95, "bootstrap": 1000, "seed": 12345,
    "baseline": "base", "rows": {"paired": 38, "missing": 0},
    "runs": [{"name": "base", "path": "/runs/a", "benchmark": "single_route",
              "protocol": "reference", "signature": "sig-a", "rows": 38,
              "metrics": {"conn": {"value": 0.842, "ci": [0.71, 0.95]},
                          "mape": {"value": 7.23, "ci": None}}},
             {"name": "<new>", "path": "/runs/b", "benchmark": "single_route",
              "protocol": "reference", "signature": "sig-b", "rows": 38,
              "metrics": {"conn": {"value": 0.9, "ci": [0.8, 0.97]},
                          "mape": {"value": None, "ci": None}}}],
    "comparisons": [{"run": "<new>", "metric": "conn", "delta": 0.058, "ci": [-0.02, 0.13],
                     "p_value": 0.21, "significant": False}],
    "breakdowns": {"city": {"北京": {"base": 0.8, "<new>": 0.9}}},
}


class ComparisonPageTest(unittest.TestCase):
    def test_page(self):
        text = transitlm.compare.page.comparison_page(COMPARISON)
        parser = parse_page(text)
        self.assertEqual(external_references(parser), [])
        self.assertNotIn("<new>", text)
        self.assertIn("84.2% [71.0%, 95.0%]", text)
        self.assertIn("+5.8 pp", text)
        self.assertIn("[-2.0 pp, +13.0 pp]", text)
        self.assertIn("p=0.210", text)             # p-values as in the other formats
        self.assertEqual(text.count('class="whisker"'), 2)    # two intervals for conn
        self.assertEqual(text.count('<figure class="mchart">'), 2)
        self.assertIn("北京", text)

    def test_empty_result(self):
        text = transitlm.compare.page.comparison_page({})
        parse_page(text)
        self.assertIn("No comparisons.", text)


# ---------------------------------------------------------------------------
# Real run folders (the evaluators with --out)
# ---------------------------------------------------------------------------

class RunFolderTest(TempDir):
    def test_pages_of_real_runs(self):
        net = common.StationNetwork.load(os.path.join(REPO, "data", "station_info.csv"))
        for benchmark in EVALUATORS:
            with self.subTest(benchmark=benchmark):
                out = os.path.join(self.folder, benchmark)
                subprocess.run([sys.executable, os.path.join(REPO, benchmark, "evaluate.py"),
                                "--quiet", "--out", out], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
                    report = json.load(handle)
                details = os.path.join(out, "details.jsonl")
                with open(details, encoding="utf-8") as handle:
                    records = [json.loads(line) for line in handle]
                text = transitlm.pages.evaluator.evaluator_page(report, details, net)
                EvaluatorPageTest.check_page(self, benchmark, report, text, records)


if __name__ == "__main__":
    unittest.main()
