"""The scenario scripts (single_route/, personalized/, diversity/evaluate.py):
preferences (benchmark 2), best match and route diversity (benchmark 3), and
each row of the table in paper-protocol.md under both protocols (the same
input, two verdicts).  The funnel and the metrics: test_records.py."""

import json
import os
import tempfile
import unittest

from tests.support import common
from tests.support.evaluator_rows import (east, evaluate_to_files, prompt, route,
                                          write_samples, write_station_file)
from personalized.evaluate import Personalized, parse_req_type, preference_compliance, transfers
from diversity.evaluate import Diversity, best_match, present_routes, route_diversity
from single_route.evaluate import SingleRoute

REF, PAPER = common.REFERENCE, common.PAPER


def R(protocol=REF, **fields):
    return common.Route(route(**fields), protocol)


class Preferences(unittest.TestCase):
    def verdict(self, req, pred, label, protocol=REF):
        return preference_compliance(req, R(protocol, **pred), R(protocol, **label), protocol).ok

    def test_fewer_transfers(self):
        two = {"line_sequence": ["L1", "L2"]}
        one = {"line_sequence": ["L1"]}
        self.assertTrue(self.verdict(2, one, two))
        self.assertTrue(self.verdict(2, two, two))
        self.assertFalse(self.verdict(2, two, one))
        self.assertEqual(transfers(R(line_sequence=[]), REF), 0)    # floored at 0

    def test_fewer_transfers_counts_differ_by_protocol(self):
        # ["L1", "【换乘】", "L2"]: reference counts list entries (2 transfers),
        # the paper transit legs (1 transfer)
        pred = {"line_sequence": ["L1", "【换乘】", "L2"]}
        label = {"line_sequence": ["L3", "L4"]}
        self.assertFalse(self.verdict(2, pred, label, REF))
        self.assertTrue(self.verdict(2, pred, label, PAPER))

    def test_no_subway_vs_bus_first(self):
        mixed = {"line_sequence": ["977路", "地铁2号线"]}
        bus = {"line_sequence": ["977路"]}
        metro = {"line_sequence": ["5号线"]}
        self.assertFalse(self.verdict(5, mixed, bus, REF))         # uses a subway line
        self.assertTrue(self.verdict(5, mixed, bus, PAPER))        # has a bus leg
        self.assertTrue(self.verdict(5, bus, bus, REF))
        self.assertTrue(self.verdict(5, bus, bus, PAPER))
        self.assertFalse(self.verdict(5, metro, bus, PAPER))
        self.assertTrue(self.verdict(5, {"line_sequence": []}, bus, REF))
        self.assertFalse(self.verdict(5, {"line_sequence": []}, bus, PAPER))

    def test_subway_first(self):
        for protocol in (REF, PAPER):
            self.assertTrue(self.verdict(7, {"line_sequence": ["977路", "5号线"]}, {}, protocol))
            self.assertFalse(self.verdict(7, {"line_sequence": ["977路"]}, {}, protocol))

    def test_shorter_time(self):
        label = {"total_time": "40"}
        self.assertTrue(self.verdict(8, {"total_time": "44"}, label))     # 1.1 x 40 = 44
        self.assertFalse(self.verdict(8, {"total_time": "44.1"}, label))
        self.assertTrue(self.verdict(8, {"total_time": "999"}, {"total_time": ""}))

    def test_shorter_time_uses_protocol_time_parsing(self):
        # "1小时7分钟" is 60 min (reference) or 67 min (paper); the label is 60 min
        pred, label = {"total_time": "1小时7分钟"}, {"total_time": "60"}
        self.assertTrue(self.verdict(8, pred, label, REF))
        self.assertFalse(self.verdict(8, pred, label, PAPER))

    def test_unknown_type_is_compliant(self):
        self.assertTrue(self.verdict(3, {}, {}))
        self.assertTrue(self.verdict(0, {}, {}))


class ReqTypeCells(unittest.TestCase):
    def test_a_req_type_cell_given_as_a_number_reads_as_its_digits(self):
        # The Python API's rows as pandas or parquet give them: 2, 2.0, NaN, None.
        for cell, expected in (("2", 2), (" 7 ", 7), ("", 0), (None, 0), (2, 2), (2.0, 2),
                               (float("nan"), 0), (2.5, None), ("x", None), (True, None),
                               ([2], None)):
            self.assertEqual(parse_req_type(cell), expected, repr(cell))


class CsvCase(object):
    """Mixin: tiny CSVs through the real CLI driver."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.stations = os.path.join(self.dir, "stations.csv")
        write_station_file(self.stations)

    def tearDown(self):
        self.tmp.cleanup()

    def run_json(self, benchmark, rows, columns=None, extra=()):
        path = os.path.join(self.dir, "in.csv")
        if columns:
            write_samples(path, rows, columns)
        else:
            write_samples(path, rows)
        return evaluate_to_files(
            benchmark, ["--input", path, "--station_info", self.stations] + list(extra),
            self.dir)

    def row(self, i, pred, label=None, **extra):
        base = {"index_id": "id%d" % i, "sft_prompt": prompt(),
                "sft_label": route() if label is None else label, "generate_results": pred}
        base.update(extra)
        return base


class EndToEnd(CsvCase, unittest.TestCase):
    def test_bad_rows_become_error_rows_and_the_run_goes_on(self):
        rows = [self.row(1, route()),
                self.row(2, "{not json"),
                self.row(3, "null"),
                self.row(4, route(station_sequence=5)),
                self.row(5, route(total_time=["20"])),
                self.row(6, route(), sft_prompt=json.dumps({"query": "x"})),
                self.row(7, route(), sft_prompt="[]"),
                self.row(8, route(line_sequence="地铁1号线")),
                self.row(9, "")]
        report, details, stdout = self.run_json(SingleRoute(), rows)
        self.assertEqual(report["counts"], {"samples": 9, "evaluated": 1, "errors": 8,
                                            "no_response": 0, "failed": 8})
        self.assertEqual(len(details), 9)
        self.assertEqual([d["row"] for d in details], list(range(1, 10)))
        self.assertEqual(report["rounds"]["reachability"], {"input": 9, "passed": 1})
        errors = {d["index_id"]: d["error"] for d in details if d["status"] == "error"}
        self.assertIn("not valid JSON", errors["id2"])
        self.assertIn("expected a JSON object", errors["id3"])
        self.assertIn("station_sequence is a number", errors["id4"])
        self.assertIn("total_time is a list", errors["id5"])
        self.assertIn("no start coordinates", errors["id6"])
        self.assertIn("line_sequence is text", errors["id8"])
        self.assertIn("empty", errors["id9"])
        for index_id in errors:
            self.assertIn(index_id, stdout)      # listed in the text report

    def test_details_carry_verdicts_and_failed_round(self):
        rows = [self.row(1, route()),
                self.row(2, route(station_sequence=["A", "C"])),
                self.row(3, route(station_sequence=["A", "B"])),
                self.row(4, route(total_fare="9"))]
        report, details, _ = self.run_json(SingleRoute(), rows)
        self.assertEqual([d["failed_round"] for d in details],
                         [None, "reachability", "overlap", "accuracy"])
        self.assertEqual(details[1]["reachable_reason"], "A -> C not connected")
        self.assertAlmostEqual(details[2]["station_iou"], 0.5)
        for key in ("station_grounding_reason", "distance_plausibility_reason", "line_iou",
                    "transfer_mode_match", "exact_match", "score", "label_score",
                    "time_mape_pct", "overall_accurate"):
            self.assertIn(key, details[0])

    def test_empty_route_reference_vs_paper(self):
        rows = [self.row(1, route(station_sequence=[])), self.row(2, route())]
        ref, _, _ = self.run_json(SingleRoute(), rows)
        paper, details, _ = self.run_json(SingleRoute(), rows, extra=["--protocol", "paper"])
        self.assertEqual(ref["rounds"]["reachability"]["passed"], 2)
        self.assertEqual(paper["rounds"]["reachability"]["passed"], 1)
        self.assertEqual(paper["protocol"], "paper")
        self.assertIn("fewer than 2 stations", details[0]["reachable_reason"])

    def test_personalized_round5_and_invalid_req_type(self):
        cols = ("index_id", "sft_prompt", "sft_label", "generate_results", "req_type")
        rows = [self.row(1, route(line_sequence=["977路"]), req_type="5"),
                self.row(2, route(), req_type="5"),          # subway line: violates 5
                self.row(3, route(), req_type="3"),          # unknown: compliant
                self.row(4, route(), req_type=""),           # empty -> 0
                self.row(5, route(), req_type="abc"),        # invalid -> error row
                self.row(6, "{bad", req_type="7")]
        report, details, stdout = self.run_json(Personalized(), rows, cols)
        pref = report["rounds"]["preference"]
        self.assertEqual((pref["input"], pref["compliant"]), (4, 3))
        self.assertEqual(pref["by_req_type"], {"5": {"name": "no_subway", "samples": 2,
                                                     "compliant": 1, "label_compliant": 0}})
        self.assertIn("req_type 'abc' is not a whole number", details[4]["error"])
        self.assertIn("preference 5", stdout)
        paper, _, _ = self.run_json(Personalized(), rows, cols, ["--protocol", "paper"])
        pref = paper["rounds"]["preference"]
        # known types only (rows 1, 2 and the error row 6); the error row is not compliant
        self.assertEqual((pref["input"], pref["compliant"]), (3, 1))
        self.assertAlmostEqual(paper["metrics"]["pc"], 1 / 3)


class MultiRoute(unittest.TestCase):
    def setUp(self):
        self.net = common.StationNetwork.from_dict({
            s: (lng, lat, hops) for s, lng, lat, hops in
            [("A", east(0), 0, ["B"]), ("B", east(1), 0, ["A", "C"]),
             ("C", east(2), 0, ["B", "D"]), ("D", east(3), 0, ["C"])]})

    def test_best_match_in_second_then_third(self):
        label = R()
        routes = {"first": R(station_sequence=["A", "B"]),
                  "second": R(station_sequence=["A", "C"]),              # unreachable
                  "third": R(station_sequence=["A", "B", "C", "D"])}
        def reachable():
            return {key for key, route in routes.items()
                    if common.check_reachability(route.stations, self.net, REF).ok}
        self.assertEqual(best_match(routes, label, reachable()), "third")
        routes["second"] = R(station_sequence=["D", "C", "B", "A"])     # same set, reachable
        self.assertEqual(best_match(routes, label, reachable()), "second")
        # Only reachable routes are matched.
        self.assertIsNone(best_match(routes, label, {"first"}))
        del routes["second"], routes["third"]
        self.assertIsNone(best_match(routes, label, reachable()))

    def test_present_routes_reuses_equal_routes_of_the_other_side(self):
        same, other = route(), route(station_sequence=["A", "B"])
        prediction = {"first": same, "second": other, "third": None}
        preds = present_routes(prediction, "prediction", REF)
        self.assertEqual(sorted(preds), ["first", "second"])
        # Equal (same key, equal JSON) -> the same Route; different -> its own.
        label = {"first": json.loads(json.dumps(same)), "second": same, "third": other}
        labels = present_routes(label, "label", REF, (prediction, preds))
        self.assertIs(labels["first"], preds["first"])
        self.assertIsNot(labels["second"], preds["first"])
        self.assertEqual(labels["second"].stations, preds["first"].stations)
        self.assertEqual(labels["third"].stations, ["A", "B"])
        # A label route that is not valid is still named as the label's.
        with self.assertRaisesRegex(common.RowError, "^label second"):
            present_routes({"second": {"total_time": []}}, "label", REF, (prediction, preds))
        # The other side not being an object does not matter.
        self.assertIs(present_routes(label, "label", REF, ([], {}))["first"].__class__,
                      common.Route)

    def test_rd_reference_with_shared_access_modes(self):
        # signatures: {L1, 接驳:步行}, {L2, 接驳:步行}: IoU 1/3 -> RD 2/3
        a = R(line_sequence=["L1"], end_transfer_mode="")
        b = R(line_sequence=["L2"], end_transfer_mode="")
        rd, n = route_diversity([a, b], REF)
        self.assertEqual(n, 2)
        self.assertAlmostEqual(rd, 2 / 3)
        # the paper reads the empty end mode as 步行: the same sets here
        self.assertAlmostEqual(route_diversity([a, b], PAPER)[0], 2 / 3)

    def test_rd_three_routes_and_degenerate_cases(self):
        a = R(line_sequence=["L1"])
        b = R(line_sequence=["L1"])
        c = R(line_sequence=["L2"], start_transfer_mode="骑行")
        # pairs: a-b IoU 1 -> 0; a-c {L1,步行} vs {L2,骑行,步行}: 1/4 -> 3/4; b-c 3/4
        self.assertAlmostEqual(route_diversity([a, b, c], REF)[0], 0.5)
        self.assertEqual(route_diversity([a], REF), (0.0, 1))
        empty = R(line_sequence=[], start_transfer_mode="", end_transfer_mode="")
        # reference ignores a route with an empty signature; the paper does not
        self.assertEqual(route_diversity([a, empty], REF), (0.0, 1))
        rd, n = route_diversity([a, empty], PAPER)
        self.assertEqual(n, 2)
        self.assertAlmostEqual(rd, 0.5)      # {L1, 接驳:步行} vs {接驳:步行}


class MultiRouteEndToEnd(CsvCase, unittest.TestCase):
    def test_best_match_reference_first_only_paper(self):
        label = {"first": route(), "second": route(line_sequence=["L9"])}
        rows = [
            self.row(1, {"first": route(), "second": route(line_sequence=["L9"])}, label),
            self.row(2, {"first": route(station_sequence=["A", "B"]),
                         "second": route(station_sequence=["D", "C", "B", "A"])}, label),
            self.row(3, {"first": route(station_sequence=["A", "B"]),
                         "third": route(station_sequence=["A", "B", "C", "D"])}, label),
            self.row(4, {"second": route()}, label),                  # no first
            self.row(5, {"foo": 1}, label),                           # no route: error
        ]
        ref, details, stdout = self.run_json(Diversity(), rows)
        div = ref["diversity"]
        self.assertEqual(div["best_match_hits"], {"first": 1, "second": 1, "third": 1})
        self.assertEqual(ref["rounds"]["reachability"], {"input": 3, "passed": 3})
        self.assertEqual(ref["rounds"]["overlap"]["exact_match"], 3)
        self.assertEqual(ref["counts"]["errors"], 1)
        self.assertEqual(div["route_reachability"]["first"], {"present": 3, "reachable": 3})
        self.assertEqual(div["route_count_distribution"], {"1": 1, "2": 3})
        self.assertIn("prediction has no route", details[4]["error"])
        paper, _, _ = self.run_json(Diversity(), rows, extra=["--protocol", "paper"])
        self.assertNotIn("best_match_hits", paper["diversity"])
        self.assertEqual(paper["rounds"]["reachability"], {"input": 5, "passed": 3})
        self.assertEqual(paper["rounds"]["overlap"]["exact_match"], 1)
        # RD over all five rows: rows 1-4 have two routes (row 1: {L1,步行} vs {L9,步行}
        # -> 2/3; rows 2, 3 identical lines -> 0; row 4 one route -> 0; row 5 error -> 0
        self.assertAlmostEqual(paper["diversity"]["rd_mean"], (2 / 3) / 5)
        self.assertAlmostEqual(paper["metrics"]["rd"], (2 / 3) / 5)
