"""general_llm/route_eval.py, judging cases (protocol.md section 11):
reachability over the lines' hops and transfers, station grounding against
the origin and destination, per-case errors of evaluate_cases; hand-computed
small cases, plus a parity check against the figures the published evaluator
printed (../shared/parity, skipped when absent)."""

import csv
import json
import math
import os
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from common import StationNetwork, parse_lnglat  # noqa: E402
from general_llm.route_eval import (  # noqa: E402
    NOT_CHECKED, NOT_CHECKED_UNREACHABLE, LineTable, evaluate_case, evaluate_cases,
    normalise_transfer_names)
from tests.support import PARITY  # noqa: E402
from tests.support.services import line_table as table  # noqa: E402

SHENZHEN = "深圳"
SHANGHAI = "上海"
WALK = "步行"
CYCLE = "骑行"
TAXI = "打车"
RIDE_HAILING = "网约车"
DIDI = "滴滴"
DIDI_TAXI = "滴滴打车"
BUS = "公交"

EARTH_RADIUS_KM = 6371.0
BASE = (114.0, 22.5)


def south_of(point, km):
    """The point ``km`` due south of ``point`` (haversine along a meridian)."""
    return (point[0], point[1] - math.degrees(km / EARTH_RADIUS_KM))


def make_case(lines, names, city=SHENZHEN, start=BASE, end=BASE, start_mode=WALK,
              end_mode=WALK):
    return {"city": city, "start": list(start), "end": list(end),
            "pred": {"line_sequence": lines, "station_name": names,
                     "start_transfer_mode": start_mode, "end_transfer_mode": end_mode}}


# ---------------------------------------------------------------------------
# evaluate_case: reachability
# ---------------------------------------------------------------------------

LINE_1 = "地铁1号线(罗湖--机场东)"
LINE_2 = "地铁2号线(赤湾--新秀)"
LINE_3 = "3路"
STATIONS_1 = [("罗湖", "bus-1"), ("国贸", "bus-2"), ("老街", "bus-3")]
STATIONS_2 = [("老街", "bus-3"), ("大剧院", "4"), ("湖贝", "bus-5")]
STATIONS_3 = [("湖贝", "6"), ("黄贝岭", "bus-7"), ("孤岛", "bus-9")]


def network():
    """Stops one step apart (0.01 degree ~ 1 km) along a parallel."""
    def at(i):
        return (BASE[0] + 0.01 * i, BASE[1])
    return StationNetwork.from_dict({
        "bus-1": at(1) + (["bus-2"],),
        "bus-2": at(2) + (["bus-1", "bus-3"],),
        "bus-3": at(3) + (["bus-2", "bus-4"],),
        "bus-4": at(4) + (["bus-3", "bus-5"],),
        "bus-5": at(5) + (["bus-4", "bus-6"],),   # next hop "bus-6" = line 3's stop "6"
        "bus-6": at(6) + (["bus-7"],),
        "bus-7": at(7) + ([],),
    })


def lines_123():
    return table(("0755", LINE_1, STATIONS_1), ("0755", LINE_2, STATIONS_2),
                 ("0755", LINE_3, STATIONS_3))


class ReachabilityTest(unittest.TestCase):

    def setUp(self):
        self.lines = lines_123()
        self.stations = network()

    def check(self, lines, names, **kw):
        return evaluate_case(make_case(lines, names, **kw), self.lines, self.stations)

    def assertUnreachable(self, result, reason_part, code):
        self.assertFalse(result["reachable"], result)
        self.assertIn(reason_part, result["reachable_reason"])
        self.assertEqual(result["reachable_code"], code)
        self.assertFalse(result["station_grounding"])
        self.assertEqual(result["station_grounding_reason"], NOT_CHECKED_UNREACHABLE)
        self.assertEqual(result["station_grounding_codes"], [])

    def test_single_leg(self):
        result = self.check(["地铁1号线"], ["罗湖", "老街"])
        self.assertTrue(result["reachable"], result)
        self.assertIsNone(result["reachable_code"])
        self.assertEqual(result["match_details"], [{
            "line_query": "地铁1号线", "line_name": LINE_1,
            "boarding_query": "罗湖", "boarding_name": "罗湖", "boarding_stop_id": "bus-1",
            "alighting_query": "老街", "alighting_name": "老街", "alighting_stop_id": "bus-3"}])

    def test_legs_are_not_checked_inside(self):
        # Boarding and alighting of one leg need not be one hop apart (bus-1, bus-3).
        self.assertTrue(self.check(["地铁1号线"], ["罗湖", "老街"])["reachable"])

    def test_transfer_at_the_same_stop_is_connected(self):
        result = self.check(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "老街", "湖贝"])
        self.assertTrue(result["reachable"], result)
        self.assertEqual([d["line_name"] for d in result["match_details"]], [LINE_1, LINE_2])

    def test_next_hop_target_with_bus_prefix(self):
        # bus-3's next hops hold "bus-4"; line 2 lists that stop as "4".
        result = self.check(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "大剧院", "湖贝"])
        self.assertTrue(result["reachable"], result)

    def test_next_hop_source_with_bus_prefix(self):
        # Alighting at line 2's "4" (no entry) -> the entry of "bus-4" is used.
        lines = table(("0755", "A线", [("甲", "bus-1"), ("乙", "4")]),
                      ("0755", "B线", [("丙", "bus-5"), ("丁", "bus-7")]))
        result = evaluate_case(make_case(["A线", "B线"], ["甲", "乙", "丙", "丁"]),
                               lines, self.stations)
        self.assertTrue(result["reachable"], result)

    def test_both_prefix_fallbacks(self):
        # "bus-5" -> "6" holds via bus-5's hop "bus-6".
        result = self.check(["地铁2号线", "3路"], ["老街", "湖贝", "湖贝", "黄贝岭"])
        self.assertTrue(result["reachable"], result)

    def test_not_connected(self):
        result = self.check(["地铁1号线", "地铁2号线"], ["罗湖", "国贸", "大剧院", "湖贝"])
        self.assertUnreachable(result, "bus-2 \u2192 4 not connected", "broken_hop")

    def test_no_next_hop_information(self):
        result = self.check(["3路", "地铁1号线"], ["湖贝", "孤岛", "罗湖", "国贸"])
        self.assertUnreachable(result, "bus-9 has no next-hop information", "unknown_hop")

    def test_count_mismatch(self):
        self.assertUnreachable(self.check(["地铁1号线"], ["罗湖", "国贸", "老街"]),
                               "count mismatch", "count_mismatch")
        self.assertUnreachable(self.check(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "湖贝"]),
                               "count mismatch", "count_mismatch")

    def test_empty_lines_or_names(self):
        self.assertUnreachable(self.check([], ["罗湖", "国贸"]), "no lines", "no_lines")
        self.assertUnreachable(self.check(None, ["罗湖", "国贸"]), "no lines", "no_lines")
        self.assertUnreachable(self.check(["地铁1号线"], []), "no station names", "no_stations")
        self.assertUnreachable(self.check(["地铁1号线"], None), "no station names", "no_stations")

    def test_empty_line_entry(self):
        for lines in ([""], [None], ["  "]):
            self.assertUnreachable(self.check(lines, ["罗湖", "国贸"]), "line name is empty",
                                   "empty_line_name")

    def test_line_not_found(self):
        result = self.check(["977路"], ["罗湖", "国贸"])
        self.assertUnreachable(result, "line \"977路\" not found in city 0755",
                               "unknown_line")
        self.assertEqual(result["match_details"][0]["line_name"], None)

    def test_line_of_another_city(self):
        self.assertUnreachable(self.check(["地铁1号线"], ["罗湖", "国贸"], city=SHANGHAI),
                               "not found in city 021", "unknown_line")

    def test_unknown_city_searches_all_lines(self):
        self.assertTrue(self.check(["地铁1号线"], ["罗湖", "国贸"], city="广州")["reachable"])
        self.assertTrue(self.check(["地铁1号线"], ["罗湖", "国贸"], city=None)["reachable"])

    def test_station_not_found(self):
        result = self.check(["地铁1号线"], ["罗湖", "西丽"])
        self.assertUnreachable(result, "station \"西丽\" not found on line %s" % LINE_1,
                               "unknown_station")
        detail = result["match_details"][0]
        self.assertEqual((detail["boarding_stop_id"], detail["alighting_stop_id"]),
                         ("bus-1", None))
        # An unknown boarding name has the same code.
        self.assertUnreachable(self.check(["地铁1号线"], ["西丽", "罗湖"]),
                               "station \"西丽\" not found", "unknown_station")

    def test_fuzzy_station_names(self):
        result = self.check(["地铁1号线"], ["罗湖站", "老街站"])   # bigram Jaccard 1/2
        self.assertTrue(result["reachable"], result)
        self.assertEqual(result["match_details"][0]["boarding_name"], "罗湖")

    def test_same_boarding_and_alighting_stop(self):
        self.assertUnreachable(self.check(["地铁1号线"], ["罗湖", "罗湖"]),
                               "boarding and alighting are the same stop bus-1 on " + LINE_1,
                               "same_stop")
        # Two names that match the same station are the same stop too.
        self.assertUnreachable(self.check(["地铁1号线"], ["罗湖站", "罗湖"]), "same stop bus-1",
                               "same_stop")

    def test_first_failure_is_reported(self):
        result = self.check(["地铁1号线", "977路"], ["罗湖", "罗湖", "甲", "乙"])
        self.assertUnreachable(result, "same stop", "same_stop")
        self.assertEqual(len(result["match_details"]), 1)


# ---------------------------------------------------------------------------
# evaluate_case: station grounding
# ---------------------------------------------------------------------------

STOP_A = (114.0, 22.5)
STOP_B = (114.05, 22.5)


class StationGroundingTest(unittest.TestCase):

    def setUp(self):
        self.lines = table(("0755", "10路", [("甲", "bus-a"), ("乙", "b"), ("丙", "bus-c")]))
        self.stations = StationNetwork.from_dict({
            "bus-a": STOP_A + (["bus-b"],),
            "bus-b": STOP_B + ([],),      # line_info says "b": found with the prefix
        })

    def grounding(self, start_km=0.0, end_km=0.0, start_mode=WALK, end_mode=WALK,
                  names=("甲", "乙")):
        case = make_case(["10路"], list(names), start=south_of(STOP_A, start_km),
                         end=south_of(STOP_B, end_km), start_mode=start_mode,
                         end_mode=end_mode)
        result = evaluate_case(case, self.lines, self.stations)
        self.assertTrue(result["reachable"], result)
        return result

    def assertLimit(self, mode, limit_km):
        """SG passes just inside the limit and fails just outside, on both ends."""
        inside = self.grounding(start_km=limit_km - 0.01, start_mode=mode)
        self.assertTrue(inside["station_grounding"], mode)
        self.assertEqual(inside["station_grounding_codes"], [])
        outside = self.grounding(start_km=limit_km + 0.01, start_mode=mode)
        self.assertFalse(outside["station_grounding"], mode)
        self.assertEqual(outside["station_grounding_codes"], ["origin_too_far"])
        self.assertIn("first station bus-a is %.2f km from the origin (limit %g km"
                      % (limit_km + 0.01, limit_km), outside["station_grounding_reason"])
        self.assertTrue(self.grounding(end_km=limit_km - 0.01, end_mode=mode)
                        ["station_grounding"], mode)
        outside = self.grounding(end_km=limit_km + 0.01, end_mode=mode)
        self.assertFalse(outside["station_grounding"], mode)
        self.assertEqual(outside["station_grounding_codes"], ["destination_too_far"])
        self.assertIn("last station b is", outside["station_grounding_reason"])

    def test_walk_3_km(self):
        self.assertLimit(WALK, 3.0)

    def test_empty_mode_is_walk(self):
        self.assertLimit("", 3.0)

    def test_cycle_5_km(self):
        self.assertLimit(CYCLE, 5.0)

    def test_taxi_10_km(self):
        self.assertLimit(TAXI, 10.0)
        self.assertLimit(RIDE_HAILING, 10.0)
        self.assertLimit(DIDI_TAXI, 10.0)     # contains 打车

    def test_didi_is_not_a_taxi_for_the_service(self):
        self.assertLimit(DIDI, 3.0)

    def test_other_modes_3_km(self):
        self.assertLimit(BUS, 3.0)

    def test_null_mode_is_walk(self):
        case = make_case(["10路"], ["甲", "乙"], start=south_of(STOP_A, 3.01), end=STOP_B)
        case["pred"]["start_transfer_mode"] = None
        del case["pred"]["end_transfer_mode"]
        result = evaluate_case(case, self.lines, self.stations)
        self.assertFalse(result["station_grounding"])
        self.assertIn("limit 3 km for 步行", result["station_grounding_reason"])

    def test_both_ends_fail(self):
        result = self.grounding(start_km=4, end_km=4)
        self.assertFalse(result["station_grounding"])
        self.assertIn("first station", result["station_grounding_reason"])
        self.assertIn("last station", result["station_grounding_reason"])
        self.assertEqual(result["station_grounding_codes"],
                         ["origin_too_far", "destination_too_far"])

    def test_coordinates_found_with_bus_prefix(self):
        # The alighting stop "b" is only in station_info as "bus-b".
        self.assertTrue(self.grounding(end_km=2.99)["station_grounding"])
        self.assertFalse(self.grounding(end_km=3.01)["station_grounding"])

    def test_stop_without_coordinates_passes(self):
        # "bus-c" (and "bus-bus-c") is not in station_info: SG does not fail.
        result = self.grounding(names=("甲", "丙"), end_km=500)
        self.assertTrue(result["station_grounding"], result)
        self.assertIn("bus-c has no coordinates", result["station_grounding_reason"])

    def test_coordinates_come_from_station_info_not_line_info(self):
        lines = LineTable.from_rows([("0755", "10路", [
            {"station_name": "甲", "stop_id": "bus-a", "x": 120.0, "y": 30.0},
            {"station_name": "乙", "stop_id": "b", "x": 120.0, "y": 30.0}])])
        case = make_case(["10路"], ["甲", "乙"], start=STOP_A, end=STOP_B)
        self.assertTrue(evaluate_case(case, lines, self.stations)["station_grounding"])

    def test_first_boarding_and_last_alighting_of_a_multi_leg_route(self):
        lines = lines_123()
        stations = network()
        first, last = stations.coords("bus-1"), stations.coords("bus-5")
        case = make_case(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "老街", "湖贝"],
                         start=south_of(first, 2.9), end=south_of(last, 2.9))
        self.assertTrue(evaluate_case(case, lines, stations)["station_grounding"])
        case["end"] = list(south_of(last, 3.1))
        result = evaluate_case(case, lines, stations)
        self.assertFalse(result["station_grounding"])
        self.assertIn("last station bus-5", result["station_grounding_reason"])


# ---------------------------------------------------------------------------
# evaluate_cases: per-case errors
# ---------------------------------------------------------------------------

class EvaluateCasesTest(unittest.TestCase):

    def setUp(self):
        self.lines = lines_123()
        self.stations = network()

    def good(self):
        return make_case(["地铁1号线"], ["罗湖", "国贸"], start=(114.01, 22.5), end=(114.02, 22.5))

    def bad_cases(self):
        def with_pred(**changes):
            case = self.good()
            case["pred"].update(changes)
            return case

        def with_case(**changes):
            case = self.good()
            case.update(changes)
            return case

        missing_city = self.good()
        del missing_city["city"]
        missing_names = self.good()
        del missing_names["pred"]["station_name"]
        return [
            ("case is a list, expected a JSON object", ["地铁1号线"]),
            ("no \"city\"", missing_city),
            ("no \"station_name\"", missing_names),
            ("pred is text", with_case(pred="地铁1号线")),
            ("start is text", with_case(start="114.0,22.5")),
            ("start is a list of 3", with_case(start=[114.0, 22.5, 0.0])),
            ("not two finite numbers", with_case(end=[114.0, "22.5"])),
            ("not two finite numbers", with_case(end=[True, 22.5])),
            ("not two finite numbers", with_case(end=[float("nan"), 22.5])),
            ("not two finite numbers", with_case(start=[114.0, float("inf")])),
            ("not two finite numbers", with_case(start=[10 ** 400, 22.5])),
            ("start latitude 140 is outside -90..90", with_case(start=[114.0, 140])),
            ("end latitude -90.5 is outside -90..90", with_case(end=[114.0, -90.5])),
            ("end longitude 180.1 is outside -180..180", with_case(end=[180.1, 22.5])),
            ("pred station_name entry 2 holds a lone surrogate",
             with_pred(station_name=["罗湖", "国\ud800贸"])),
            ("pred line_sequence entry 1 holds a lone surrogate",
             with_pred(line_sequence=["\udfff"])),
            ("city holds a lone surrogate", with_case(city="深\udc80圳")),
            ("pred end_transfer_mode holds a lone surrogate",
             with_pred(end_transfer_mode="\ud83d")),
            ("city is a number", with_case(city=755)),
            ("station_name is text", with_pred(station_name="罗湖")),
            ("station_name entry 2 is a list", with_pred(station_name=["罗湖", ["国贸"]])),
            ("line_sequence entry 1 is a number", with_pred(line_sequence=[1])),
            ("start_transfer_mode is a list", with_pred(start_transfer_mode=[WALK])),
        ]

    def test_errors_are_results_in_order(self):
        bad = self.bad_cases()
        cases = []
        for _, case in bad:
            cases.extend([self.good(), case])
        results = evaluate_cases(cases, self.lines, self.stations)
        self.assertEqual(len(results), len(cases))
        for i, (expected, _) in enumerate(bad):
            ok, error = results[2 * i], results[2 * i + 1]
            self.assertTrue(ok["reachable"] and ok["station_grounding"], ok)
            self.assertIn(expected, error.get("error", ""), error)
            self.assertEqual(error, {
                "error": error["error"], "reachable": False,
                "reachable_reason": error["error"], "reachable_code": "case_error",
                "station_grounding": False, "station_grounding_reason": NOT_CHECKED,
                "station_grounding_codes": [], "match_details": []})

    def test_empty_batch(self):
        self.assertEqual(evaluate_cases([], self.lines, self.stations), [])

    def test_globe_edges_are_valid_coordinates(self):
        case = self.good()
        case["start"], case["end"] = [-180, -90], [180.0, 90.0]
        result = evaluate_cases([case], self.lines, self.stations)[0]
        self.assertNotIn("error", result)
        self.assertTrue(result["reachable"])
        self.assertEqual(result["station_grounding_codes"],
                         ["origin_too_far", "destination_too_far"])

    def test_surrogate_pair_written_as_one_character_is_text(self):
        # An astral character (a proper pair in JSON) is ordinary text.
        case = self.good()
        case["pred"]["station_name"] = ["罗湖", "国贸\U0001F687"]
        result = evaluate_cases([case], self.lines, self.stations)[0]
        self.assertNotIn("error", result)
        self.assertTrue(result["reachable"], result)

    def test_unexpected_failure_is_that_cases_error(self):
        class BrokenNetwork(object):
            """A station network whose lookups fail with a bug-like exception."""

            def next_hops(self, stop):
                raise TypeError("boom")

            def coords(self, stop):
                return None

        two_legs = make_case(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "老街", "湖贝"])
        one_leg = make_case(["地铁1号线"], ["罗湖", "国贸"])
        results = evaluate_cases([two_legs, one_leg], self.lines, BrokenNetwork())
        self.assertEqual(results[0]["reachable_code"], "case_error")
        self.assertIn("internal error: TypeError: boom", results[0]["error"])
        self.assertTrue(results[1]["reachable"], results[1])     # no hop lookup needed

    def test_malformed_station_cell_is_a_case_error(self):
        # StationNetwork decodes a stop's cells on first use: only the case
        # that reaches the broken stop is affected.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "st.csv")
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write("stop_id,ad_code,coord_x,coord_y,next_hop_stations\n"
                             "bus-1,440300,114.01,22.5,\"[\"\"bus-2\"\"]\"\n"
                             "bus-3,440300,114.03,22.5,[not json\n")
            stations = StationNetwork.load(path)
            two_legs = make_case(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "老街", "湖贝"])
            results = evaluate_cases([two_legs, self.good()], self.lines, stations)
        self.assertIn("st.csv line 3", results[0]["error"])
        self.assertNotIn("error", results[1])

    def test_results_are_json_serialisable(self):
        results = evaluate_cases([self.good(), 5], self.lines, self.stations)
        self.assertEqual(json.loads(json.dumps(results)), results)


# ---------------------------------------------------------------------------
# Parity with the published service's figures
# ---------------------------------------------------------------------------

def parity_folders():
    if not os.path.isdir(PARITY):
        return []
    wanted = ("general.csv", "line_info.csv", "station_info.csv", "golden_general.json")
    return [os.path.join(PARITY, name) for name in sorted(os.listdir(PARITY))
            if all(os.path.isfile(os.path.join(PARITY, name, f)) for f in wanted)]


def parity_cases(folder):
    """Cases built from general.csv as section 11 says (evaluated rows only)."""
    cases = []
    with open(os.path.join(folder, "general.csv"), encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            if not row["generate_results"].strip():
                continue                       # no response
            try:
                pred = json.loads(row["generate_results"])
                prompt = json.loads(row["sft_prompt"])
            except ValueError:
                continue                       # error row
            if not isinstance(pred, dict) or not isinstance(prompt, dict):
                continue
            lines = pred.get("line_sequence") or []
            names = pred.get("station_name") or pred.get("station_sequence") or []
            cases.append({
                "city": prompt.get("city"),
                "start": list(parse_lnglat(prompt.get("start"), "start")),
                "end": list(parse_lnglat(prompt.get("end"), "end")),
                "pred": {"line_sequence": lines,
                         "station_name": normalise_transfer_names(names, len(lines)),
                         "start_transfer_mode": pred.get("start_transfer_mode"),
                         "end_transfer_mode": pred.get("end_transfer_mode")}})
    return cases


@unittest.skipUnless(parity_folders(), "../shared/parity is not available")
class ParityTest(unittest.TestCase):

    def test_reachable_and_grounded_counts(self):
        for folder in parity_folders():
            with self.subTest(folder=os.path.basename(folder)):
                lines = LineTable.load(os.path.join(folder, "line_info.csv"))
                stations = StationNetwork.load(os.path.join(folder, "station_info.csv"))
                with open(os.path.join(folder, "golden_general.json"), encoding="utf-8") as f:
                    rounds = json.load(f)["rounds"]
                results = evaluate_cases(parity_cases(folder), lines, stations)
                self.assertFalse([r for r in results if "error" in r])
                reachable = [r for r in results if r["reachable"]]
                self.assertEqual(len(reachable), rounds["reachability"]["passed"])
                self.assertEqual(sum(1 for r in reachable if r["station_grounding"]),
                                 rounds["grounding"]["station_grounding"])


if __name__ == "__main__":
    unittest.main()
