"""Unit tests of common.py: value parsing, geometry, checks, funnel and metrics,
the station file, the progress line and the station-name rules.

Every expected figure is computed by hand (see the comments)."""

import unittest

from tests.support import common
from tests.support.services import SHENZHEN
from tests.support.evaluator_rows import east, route
from common import bigram_jaccard, city_code_of, strip_line_suffix
import transitlm.io.terminal  # noqa: E402
from general_llm import route_eval

REF, PAPER = common.REFERENCE, common.PAPER


def toy_network():
    """A -- B -- C -- D in a row (both directions), 1 km apart on the equator;
    E is isolated with no hops; X has no coordinates in the file (unknown)."""
    return common.StationNetwork.from_dict({
        "A": (east(0), 0.0, ["B"]),
        "B": (east(1), 0.0, ["A", "C"]),
        "C": (east(2), 0.0, ["B", "D"]),
        "D": (east(3), 0.0, ["C"]),
        "E": (east(10), 0.0, []),
    })


class DistanceParsing(unittest.TestCase):
    def test_formats(self):
        cases = [(None, 0.0), ("", 0.0), ("12.5", 12.5), (3, 3.0), (2.5, 2.5),
                 ("344米", 0.344), ("344 米", 0.344), ("1.4公里", 1.4), ("约8.1公里", 8.1),
                 ("8.1km", 8.1), ("8.1 KM", 8.1), ("about 7", 7.0), ("abc", 0.0),
                 ("1公里200米", 0.2)]          # quirk: the first number before 米 wins
        for value, expected in cases:
            with self.subTest(value=value):
                self.assertAlmostEqual(common.parse_distance_km(value), expected)

    def test_metre_sign_without_number_falls_through(self):
        self.assertAlmostEqual(common.parse_distance_km("米 5"), 5.0)

    def test_list_or_object_is_a_row_error(self):
        for value in ([1], {"km": 1}):
            with self.assertRaises(common.RowError):
                common.parse_distance_km(value)


class TimeParsing(unittest.TestCase):
    def test_reference_ignores_minutes_after_hours(self):
        self.assertEqual(common.parse_time_minutes("1小时7分钟"), 60.0)     # quirk
        self.assertEqual(common.parse_time_minutes("1.5小时"), 90.0)
        self.assertEqual(common.parse_time_minutes("37分钟"), 37.0)
        self.assertEqual(common.parse_time_minutes("约26分钟"), 26.0)
        self.assertEqual(common.parse_time_minutes("45"), 45.0)
        self.assertEqual(common.parse_time_minutes(""), 0.0)
        self.assertEqual(common.parse_time_minutes(None), 0.0)
        self.assertEqual(common.parse_time_minutes("half an hour"), 0.0)
        self.assertEqual(common.parse_time_minutes("about 20 min"), 20.0)

    def test_reference_hours_without_number_fall_to_minutes(self):
        self.assertEqual(common.parse_time_minutes("小时 30分钟"), 30.0)
        # the number must directly precede 小时: "1 小时" has no hours, first number
        self.assertEqual(common.parse_time_minutes("1 小时"), 1.0)
        self.assertEqual(common.parse_time_minutes("1 小时 20分钟"), 20.0)

    def test_paper_adds_hours_and_minutes(self):
        full = lambda v: common.parse_time_minutes(v, full=True)
        self.assertEqual(full("1小时7分钟"), 67.0)
        self.assertEqual(full("1小时"), 60.0)
        self.assertEqual(full("1.5小时"), 90.0)
        self.assertEqual(full("45分钟"), 45.0)
        self.assertEqual(full("2小时 5分钟"), 125.0)
        self.assertEqual(full("2小时5 分钟"), 125.0)
        self.assertEqual(full("about 20"), 20.0)
        self.assertEqual(full(""), 0.0)

    def test_object_is_a_row_error(self):
        with self.assertRaises(common.RowError):
            common.parse_time_minutes({"m": 3})


class FareParsing(unittest.TestCase):
    def test_formats(self):
        for value, expected in [("3元", 3.0), ("2.0", 2.0), (4, 4.0), ("", 0.0),
                                (None, 0.0), ("free", 0.0), ("约5元", 5.0)]:
            with self.subTest(value=value):
                self.assertEqual(common.parse_fare_cny(value), expected)


class Geometry(unittest.TestCase):
    def test_haversine_one_degree_on_equator(self):
        self.assertAlmostEqual(common.haversine_km(0, 0, 1, 0), 111.19492664, places=6)
        self.assertEqual(common.haversine_km(116.4, 39.9, 116.4, 39.9), 0.0)

    def test_access_thresholds(self):
        for mode, limit in [("", 3), ("步行", 3), ("骑行", 5), ("打车", 10), ("网约车", 10),
                            ("滴滴", 10), ("公交", 3), ("步行+骑行", 3)]:
            with self.subTest(mode=mode):
                self.assertEqual(common.access_threshold_km(mode), limit)
        # the route-eval service does not treat 滴滴 as a taxi
        self.assertEqual(common.access_threshold_km("滴滴", route_eval.SERVICE_TAXI_MARKERS), 3)

    def test_english_access_modes(self):
        # What an English benchmark's prompt asks for reads as the mode it names.
        for text, mode, limit in (("walk", "步行", 3), ("Bike", "骑行", 5), ("TAXI", "打车", 10),
                                  ("foot", "foot", 3), ("walking", "walking", 3)):
            with self.subTest(text):
                self.assertEqual(common.access_mode(text), mode)
                self.assertEqual(common.access_threshold_km(common.access_mode(text)), limit)

    def test_iou(self):
        self.assertEqual(common.iou([], ["a"]), 0.0)
        self.assertEqual(common.iou(["a"], []), 0.0)
        self.assertEqual(common.iou([], []), 0.0)
        self.assertEqual(common.iou(["a", "b"], ["b", "c"]), 1 / 3)
        self.assertEqual(common.iou(["a", "a"], ["a"]), 1.0)
        # Sets as they are, sets and lists mixed, duplicates counted once.
        self.assertEqual(common.iou({"a", "b", "c"}, {"b", "c", "d", "e"}), 2 / 5)
        self.assertEqual(common.iou({"a", "b"}, ["b", "b", "c"]), 1 / 3)
        self.assertEqual(common.iou(["x", "y", "x"], {"x"}), 1 / 2)
        self.assertEqual(common.iou(set(), {"a"}), 0.0)
        self.assertEqual(common.iou(["a", "b", "c"], ["d"]), 0.0)
        a, b = {"a", "b"}, ["b", "c"]
        common.iou(a, b)
        self.assertEqual((a, b), ({"a", "b"}, ["b", "c"]))     # inputs left alone

    def test_plain_sum_adds_left_to_right(self):
        # Each partial sum rounded, as sum() up to Python 3.11: a compensated
        # (3.12's sum) or exact (math.fsum) sum gives 1.0 here, and 0.0 below.
        self.assertEqual(common.plain_sum([0.1] * 10), 0.9999999999999999)
        self.assertEqual(common.plain_sum([1e16, 1.0, -1e16]), 0.0)
        self.assertEqual(common.plain_sum([1.0, 1e16, -1e16]), 0.0)
        self.assertEqual(common.plain_sum([-1e16, 1e16, 1.0]), 1.0)
        self.assertEqual(common.plain_sum([]), 0)
        self.assertEqual(common.plain_sum(iter([1, 2.5])), 3.5)
        self.assertEqual(common.plain_sum([0.1] * 9, 0.1), 0.9999999999999999)
        self.assertEqual(common.plain_sum([], 2.5), 2.5)
        self.assertEqual(common.mean([0.1] * 10), 0.09999999999999999)

    def test_mean_and_ratio(self):
        self.assertIsNone(common.mean([]))
        self.assertEqual(common.mean([1, 2]), 1.5)
        self.assertIsNone(common.ratio(1, 0))


class RouteReading(unittest.TestCase):
    def test_leg_sizes(self):
        self.assertEqual(common.leg_sizes(["A", "B", "【换乘】", "B", "C", "D"]), [2, 3])
        self.assertEqual(common.leg_sizes(["A", " ", "B"]), [2])
        self.assertEqual(common.leg_sizes([]), [])
        self.assertEqual(common.leg_sizes(["【换乘】", "A", "【换乘】", " 【换乘】 "]), [1])
        judged = common.route_json(common.Route(route(
            station_sequence=["A", "B", "【换乘】", "C", "D"]), REF))
        self.assertEqual((judged["stations"], judged["leg_sizes"]), (["A", "B", "C", "D"], [2, 2]))

    def test_stations_skip_transfer_and_blank_entries(self):
        r = common.Route(route(station_sequence=["A", " ", "【换乘】", None, "B", " 【换乘】 "]), REF)
        self.assertEqual(r.stations, ["A", "B"])

    def test_line_count_cycling_and_expert_score(self):
        # 30 min -> 30*60/300 = 6; 2 transit lines + 1 cycling leg; fare 4 -> 13
        r = common.Route(route(line_sequence=["L1", "【换乘】", " ", "L2"], total_time="30分钟",
                               total_fare="4元", start_transfer_mode="骑行"), REF)
        self.assertEqual(r.transit_lines, 2)
        self.assertEqual(r.cycling_legs, 1)
        self.assertAlmostEqual(r.score, 13.0)

    def test_time_parsing_follows_protocol(self):
        self.assertEqual(common.Route(route(total_time="1小时7分钟"), REF).time_min, 60)
        self.assertEqual(common.Route(route(total_time="1小时7分钟"), PAPER).time_min, 67)

    def test_wrong_types_are_row_errors(self):
        bad = [route(station_sequence="A,B"), route(station_sequence=5),
               route(line_sequence="L1"), route(station_sequence=["A", 3]),
               route(total_time=[20]), route(start_transfer_mode=["步行"]), ["not a route"]]
        for obj in bad:
            with self.subTest(obj=obj), self.assertRaises(common.RowError):
                common.Route(obj, REF)

    def test_nulls_read_as_empty(self):
        r = common.Route(route(station_sequence=None, line_sequence=None, total_time=None,
                               start_transfer_mode=None), REF)
        self.assertEqual((r.stations, r.lines, r.time_min, r.start_mode), ([], [], 0.0, ""))

    def test_score_deviation_and_band(self):
        self.assertEqual(common.score_deviation_pct(11, 10), 10.0)
        self.assertEqual(common.score_deviation_pct(5, 0), 0.0)
        self.assertEqual(common.score_band(0.11), "worse")
        self.assertEqual(common.score_band(0.1), "same")
        self.assertEqual(common.score_band(-0.1), "same")
        self.assertEqual(common.score_band(-0.11), "better")


class Reachability(unittest.TestCase):
    def setUp(self):
        self.net = toy_network()

    def check(self, stations, protocol=REF):
        return common.check_reachability(stations, self.net, protocol)

    def test_connected_chain_and_self_hop(self):
        self.assertTrue(self.check(["A", "B", "C", "D"]).ok)
        self.assertTrue(self.check(["A", "B", "B", "C"]).ok)      # "B 【换乘】 B": self-hop
        self.assertTrue(self.check(["E", "E"]).ok)                # empty next-hop list + self

    def test_broken_hop_names_the_pair(self):
        verdict = self.check(["A", "C"])
        self.assertFalse(verdict.ok)
        self.assertEqual(verdict.reason, "A -> C not connected")

    def test_unknown_station(self):
        verdict = self.check(["A", "B", "X", "C"])
        self.assertFalse(verdict.ok)
        self.assertEqual(verdict.reason, "B -> X not connected")
        self.assertEqual(self.check(["X", "A"]).reason, "X has no next-hop information")

    def test_empty_and_one_station_routes(self):
        self.assertTrue(self.check([]).ok)                        # reference quirk
        self.assertTrue(self.check(["X"]).ok)
        self.assertFalse(self.check([], PAPER).ok)
        self.assertFalse(self.check(["A"], PAPER).ok)
        self.assertTrue(self.check(["A", "B"], PAPER).ok)

    def test_station_file_empty_cells(self):
        net = common.StationNetwork.from_cells({"S": ("", "", "")})
        self.assertEqual(net.coords("S"), (0.0, 0.0))
        self.assertEqual(set(net.next_hops("S")), {"S"})

    def test_malformed_next_hops_is_an_input_error(self):
        net = common.StationNetwork.from_cells({"R": ("1", "2", "[]"), "S": ("1", "2", "[oops")},
                                               "st.csv")
        with self.assertRaises(common.InputError) as ctx:
            net.next_hops("S")
        self.assertIn("st.csv line 3", str(ctx.exception))


class Grounding(unittest.TestCase):
    """Origin at (0,0); A at 0 km, D at 3 km east: distances are exact multiples."""

    def setUp(self):
        self.net = toy_network()

    def ground(self, protocol=REF, origin_km=0.0, dest_km=3.0, **fields):
        r = common.Route(route(**fields), protocol)
        return common.check_grounding(r, (east(origin_km), 0.0), (east(dest_km), 0.0),
                                      self.net, protocol)

    def test_walk_limit_both_sides(self):
        self.assertTrue(self.ground(origin_km=-2.99)[0].ok)
        self.assertFalse(self.ground(origin_km=-3.01)[0].ok)
        self.assertTrue(self.ground(dest_km=5.99)[0].ok)
        self.assertFalse(self.ground(dest_km=6.01)[0].ok)

    def test_bike_and_taxi_limits(self):
        self.assertTrue(self.ground(origin_km=-4.99, start_transfer_mode="骑行")[0].ok)
        self.assertFalse(self.ground(origin_km=-5.01, start_transfer_mode="骑行")[0].ok)
        for taxi in ("打车", "网约车", "滴滴"):
            self.assertTrue(self.ground(origin_km=-9.99, start_transfer_mode=taxi)[0].ok)
            self.assertFalse(self.ground(origin_km=-10.01, start_transfer_mode=taxi)[0].ok)
        self.assertFalse(self.ground(origin_km=-3.01, start_transfer_mode="")[0].ok)

    def test_missing_coordinates_fail_grounding_not_plausibility(self):
        sg, dp = self.ground(station_sequence=["X"], start_transfer_distance="1")
        self.assertFalse(sg.ok)
        self.assertIn("no coordinates", sg.reason)
        self.assertTrue(dp.ok)

    def test_no_stations_not_checked(self):
        sg, dp = self.ground(station_sequence=[])
        self.assertTrue(sg.ok and dp.ok)

    def test_plausibility_reference_slack(self):
        # straight line d = 2 km: plausible range [1.5, 6.5] in reference, [2, 6] in paper
        for td, ref_ok, paper_ok in [("1.49", False, False), ("1.5", True, False),
                                     ("1.99", True, False), ("2.0", True, True),
                                     ("6.0", True, True), ("6.01", True, False),
                                     ("6.5", True, False), ("6.51", False, False)]:
            with self.subTest(td=td):
                self.assertEqual(self.ground(REF, origin_km=-2, start_transfer_distance=td)[1].ok,
                                 ref_ok)
                self.assertEqual(self.ground(PAPER, origin_km=-2,
                                             start_transfer_distance=td)[1].ok, paper_ok)

    def test_plausibility_skipped_without_distance(self):
        self.assertTrue(self.ground(PAPER, origin_km=-2, start_transfer_distance="")[1].ok)
        self.assertTrue(self.ground(PAPER, origin_km=-2, start_transfer_distance="0")[1].ok)

    def test_destination_side(self):
        sg, dp = self.ground(dest_km=5.0, end_transfer_distance="10")   # d = 2, 3d+0.5 = 6.5
        self.assertTrue(sg.ok)
        self.assertFalse(dp.ok)
        self.assertIn("destination", dp.reason)


class OverlapAndAccuracy(unittest.TestCase):
    def compare(self, pred, label=None, protocol=REF):
        p = common.Route(route(**pred), protocol)
        l = common.Route(route(**(label or {})), protocol)
        return common.compare_routes(p, l, protocol)

    def test_identical_route(self):
        rec = self.compare({})
        self.assertEqual((rec["line_iou"], rec["station_iou"]), (1.0, 1.0))
        self.assertTrue(rec["exact_match"] and rec["overall_accurate"] and rec["transfer_accurate"])
        self.assertEqual(rec["score_band"], "same")

    def test_line_iou_raw_names_and_empty(self):
        self.assertEqual(self.compare({"line_sequence": ["地铁1号线"]})["line_iou"], 0.0)
        self.assertEqual(self.compare({"line_sequence": []})["line_iou"], 0.0)
        rec = self.compare({"line_sequence": ["L1", "L2"]}, {"line_sequence": ["L2", "L3"]})
        self.assertAlmostEqual(rec["line_iou"], 1 / 3)

    def test_exact_match_rules_differ_by_protocol(self):
        # same stations and modes, other line name: reference exact, paper not
        self.assertTrue(self.compare({"line_sequence": ["other"]})["exact_match"])
        self.assertFalse(self.compare({"line_sequence": ["other"]}, None, PAPER)["exact_match"])
        # same stations and lines, other access mode: paper LO < 1 too
        rec = self.compare({"end_transfer_mode": "骑行"})
        self.assertFalse(rec["exact_match"])
        self.assertFalse(self.compare({"end_transfer_mode": "骑行"}, None, PAPER)["exact_match"])

    def test_mode_match_empty_is_walk(self):
        self.assertTrue(self.compare({"start_transfer_mode": ""})["transfer_mode_match"])
        self.assertFalse(self.compare({"start_transfer_mode": "打车"})["transfer_mode_match"])

    def test_paper_line_set_includes_access_modes(self):
        # pred {L, 接驳:步行}, label {L, 接驳:步行, 接驳:骑行} -> 2/3; raw names: 1
        rec = self.compare({}, {"end_transfer_mode": "骑行"}, PAPER)
        self.assertAlmostEqual(rec["line_iou"], 2 / 3)
        self.assertEqual(self.compare({}, {"end_transfer_mode": "骑行"}, REF)["line_iou"], 1.0)
        # an empty mode counts as 步行
        self.assertEqual(self.compare({"start_transfer_mode": ""}, None, PAPER)["line_iou"], 1.0)

    def test_distance_tolerances(self):
        # label 3.0 km: 10 % = 0.3 km, absolute 0.5 km -> accurate up to 3.5
        self.assertTrue(self.compare({"total_distance": "3.5"})["distance_accurate"])
        self.assertFalse(self.compare({"total_distance": "3.51"})["distance_accurate"])
        # label 10 km: 10 % = 1 km beats 0.5 km
        rec = self.compare({"total_distance": "11"}, {"total_distance": "10"})
        self.assertTrue(rec["distance_accurate"])
        self.assertAlmostEqual(rec["distance_mape_pct"], 10.0)
        self.assertFalse(self.compare({"total_distance": "11.01"},
                                      {"total_distance": "10"})["distance_accurate"])

    def test_time_tolerances(self):
        self.assertTrue(self.compare({"total_time": "25分钟"})["time_accurate"])      # 5 min
        self.assertFalse(self.compare({"total_time": "25.1"})["time_accurate"])
        self.assertTrue(self.compare({"total_time": "110"}, {"total_time": "100"})["time_accurate"])
        self.assertFalse(self.compare({"total_time": "110.5"},
                                      {"total_time": "100"})["time_accurate"])

    def test_fare_tolerances(self):
        self.assertTrue(self.compare({"total_fare": "4"})["fare_accurate"])          # 1 CNY
        self.assertFalse(self.compare({"total_fare": "4.01"})["fare_accurate"])
        self.assertTrue(self.compare({"total_fare": "22"}, {"total_fare": "20"})["fare_accurate"])
        self.assertFalse(self.compare({"total_fare": "22.1"},
                                      {"total_fare": "20"})["fare_accurate"])

    def test_overall_needs_all_three(self):
        rec = self.compare({"total_fare": "9"})
        self.assertTrue(rec["distance_accurate"] and rec["time_accurate"])
        self.assertFalse(rec["overall_accurate"])

    def test_zero_label_gives_zero_mape(self):
        rec = self.compare({"total_fare": "3"}, {"total_fare": ""})
        self.assertEqual(rec["fare_mape_pct"], 0.0)
        # MAPE is 0 for a zero label, so the 10 % test passes whatever was predicted
        self.assertTrue(rec["fare_accurate"])

    def test_transfer_accuracy(self):
        label = {"start_transfer_distance": "1.0", "end_transfer_distance": ""}
        self.assertTrue(self.compare({"start_transfer_distance": "1.5"}, label)["transfer_accurate"])
        self.assertFalse(self.compare({"start_transfer_distance": "1.51"},
                                      label)["transfer_accurate"])
        # the label's end distance is 0: any predicted end distance passes
        self.assertTrue(self.compare({"start_transfer_distance": "1",
                                      "end_transfer_distance": "9"}, label)["transfer_accurate"])


class StationFile(unittest.TestCase):
    """The station file is indexed by line offset; odd files take the csv path."""

    def load(self, text):
        import tempfile, os
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "st.csv")
            with open(path, "wb") as handle:
                handle.write(text.encode("utf-8"))
            return common.StationNetwork.load(path)

    def test_fast_index_reads_cells(self):
        net = self.load('\ufeffstop_id,ad_code,coord_x,coord_y,next_hop_stations,station_name\n'
                        'A,010,1.5,2.5,"[""B""]",甲站\r\n\nB,010,,,,"乙,站"\n')
        self.assertEqual(len(net), 2)
        self.assertEqual(net.coords("A"), (1.5, 2.5))
        self.assertEqual(set(net.next_hops("A")), {"A", "B"})
        self.assertEqual(net.coords("B"), (0.0, 0.0))
        self.assertEqual(set(net.next_hops("B")), {"B"})
        self.assertEqual(net.name("B"), "乙,站")
        self.assertIsNone(net.coords("C"))
        self.assertEqual(len(net.sha256), 64)

    def test_quoted_ids_and_other_column_order_use_csv(self):
        net = self.load('coord_x,coord_y,stop_id,next_hop_stations\n1,2,"A","[""B""]"\n')
        self.assertEqual(set(net.next_hops("A")), {"A", "B"})
        net = self.load('stop_id,coord_x,coord_y,next_hop_stations\n"A",1,2,"[]"\n'
                        '"B\nC",3,4,[]\n')
        self.assertEqual(net.coords("A"), (1.0, 2.0))
        self.assertEqual(net.coords("B\nC"), (3.0, 4.0))

    def test_malformed_cells_name_the_line(self):
        net = self.load('stop_id,coord_x,coord_y,next_hop_stations\nA,1,2,[]\nB,x,2,[]\n'
                        'C,1,2\n')
        with self.assertRaises(common.InputError) as ctx:
            net.coords("B")
        self.assertIn("line 3", str(ctx.exception))
        with self.assertRaises(common.InputError) as ctx:
            net.next_hops("C")
        self.assertIn("line 4", str(ctx.exception))

    def test_header_problems(self):
        for text in ("", "stop_id,coord_x\nA,1\n"):
            with self.assertRaises(common.InputError):
                self.load(text)


class ProgressLine(unittest.TestCase):
    def make(self, enabled):
        import io
        self.now = [100.0]
        self.stream = io.StringIO()
        return transitlm.io.terminal.Progress(1000, enabled, self.stream, clock=lambda: self.now[0])

    def test_eta_from_the_share_of_the_input_read(self):
        import io
        now = [100.0]
        stream = io.StringIO()
        progress = transitlm.io.terminal.Progress(None, True, stream, clock=lambda: now[0],
                                   fraction=lambda: 0.25)
        now[0] = 104.0
        progress.step(400)                      # a quarter read in 4 s -> 12 s left
        self.assertEqual(stream.getvalue(), "\r  400 rows  25%  100 rows/s  ETA 12 s ")

    def test_silent_for_short_runs_and_when_disabled(self):
        progress = self.make(True)
        self.now[0] = 101.0
        progress.step(10)
        progress.finish()
        self.assertEqual(self.stream.getvalue(), "")
        progress = self.make(False)
        self.now[0] = 200.0
        progress.step(10)
        self.assertEqual(self.stream.getvalue(), "")

    def test_one_updating_line_with_rate_and_eta(self):
        progress = self.make(True)
        self.now[0] = 104.0
        progress.step(400)                      # 100 rows/s, 600 left -> 6 s
        self.assertEqual(self.stream.getvalue(), "\r  400/1000 rows  100 rows/s  ETA 6 s ")
        self.now[0] = 104.1
        progress.step(1)                        # within the update interval: no write
        self.assertNotIn("401/", self.stream.getvalue())
        progress.finish()
        self.assertTrue(self.stream.getvalue().endswith("\r"))
        self.assertNotIn("\n", self.stream.getvalue())


# ---------------------------------------------------------------------------
# The station-name rules (strip_line_suffix, bigram_jaccard, city_code_of),
# common.py's since they left general_llm/route_eval.py
# ---------------------------------------------------------------------------

class StripLineSuffixTest(unittest.TestCase):

    def test_single_group(self):
        self.assertEqual(strip_line_suffix("地铁9号线(上海松江站--曹路)"), "地铁9号线")

    def test_nested_groups_innermost_first(self):
        self.assertEqual(strip_line_suffix("地铁2号线(国家会展中心(2号线)--浦东1号2号航站楼)"),
                         "地铁2号线")
        self.assertEqual(strip_line_suffix("a(b(c)d)e"), "ae")

    def test_several_groups_and_whitespace(self):
        self.assertEqual(strip_line_suffix("地铁1号线(罗宝线)(罗湖--机场东)"), "地铁1号线")
        self.assertEqual(strip_line_suffix(" 5路 (甲--乙) "), "5路")

    def test_only_ascii_balanced_pairs(self):
        self.assertEqual(strip_line_suffix("1号线（东段）"), "1号线（东段）")
        self.assertEqual(strip_line_suffix("a(b"), "a(b")
        self.assertEqual(strip_line_suffix("a)b(c)"), "a)b")

    def test_no_group(self):
        self.assertEqual(strip_line_suffix("977路"), "977路")
        self.assertEqual(strip_line_suffix(""), "")


class BigramJaccardTest(unittest.TestCase):

    def test_bigram_sets(self):
        # {AB, BC, CD} vs {AB, BC, CE, EF}: 2 / 5
        self.assertEqual(bigram_jaccard("ABCD", "ABCEF"), 0.4)
        # {AB, BC, CD, DE, EF} vs {AB, BC, CD, DX, XY, YZ}: 3 / 8
        self.assertEqual(bigram_jaccard("ABCDEF", "ABCDXYZ"), 0.375)
        self.assertEqual(bigram_jaccard("世纪大道", "世纪大道站"), 0.75)

    def test_repeated_bigrams_count_once(self):
        self.assertEqual(bigram_jaccard("AAAA", "AA"), 1.0)

    def test_short_strings_use_character_sets(self):
        self.assertEqual(bigram_jaccard("湖", "湖北"), 0.5)       # {湖} vs {湖, 北}
        self.assertAlmostEqual(bigram_jaccard("湖", "西湖北"), 1 / 3)
        self.assertEqual(bigram_jaccard("湖北", "湖"), 0.5)       # either side shorter
        self.assertEqual(bigram_jaccard("a", "a"), 1.0)

    def test_empty(self):
        self.assertEqual(bigram_jaccard("", ""), 0.0)
        self.assertEqual(bigram_jaccard("", "ab"), 0.0)


class CityCodeTest(unittest.TestCase):

    def test_names_codes_and_unknown(self):
        self.assertEqual(city_code_of(SHENZHEN), "0755")
        self.assertEqual(city_code_of("0755"), "0755")
        self.assertIsNone(city_code_of("广州"))
        self.assertIsNone(city_code_of(""))
