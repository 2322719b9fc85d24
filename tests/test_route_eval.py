"""Tests of general_llm/route_eval.py: the route-eval rules of protocol.md section 11.

Hand-computed small cases, plus a parity check against the figures the
published evaluator printed (../shared/parity, skipped when absent).
"""

import csv
import json
import math
import os
import random
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from common import (  # noqa: E402
    InputError, StationNetwork, bigram_jaccard, city_code_of, parse_lnglat, strip_line_suffix)
from general_llm.route_eval import (  # noqa: E402
    NOT_CHECKED, NOT_CHECKED_UNREACHABLE, LineTable, evaluate_case, evaluate_cases,
    json_shape_problem, match_station, normalise_transfer_names)

SHARED = os.path.join(REPO, "..", "shared")
PARITY = os.path.join(SHARED, "parity")

T = "【换乘】"
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


def table(*rows):
    """LineTable from (citycode, line name, [(station name, stop id), ...]) rows."""
    return LineTable.from_rows(
        [(city, name, [{"station_name": s, "stop_id": i} for s, i in stations])
         for city, name, stations in rows])


def names_of(lines):
    return None if lines is None else lines.name


def make_case(lines, names, city=SHENZHEN, start=BASE, end=BASE, start_mode=WALK,
              end_mode=WALK):
    return {"city": city, "start": list(start), "end": list(end),
            "pred": {"line_sequence": lines, "station_name": names,
                     "start_transfer_mode": start_mode, "end_transfer_mode": end_mode}}


# ---------------------------------------------------------------------------
# Name rules
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


class MatchLineTest(unittest.TestCase):

    def test_exact_name(self):
        lines = table(("0755", "地铁2号线(赤湾--新秀)", []), ("0755", "地铁2号线(新秀--赤湾)", []))
        self.assertEqual(names_of(lines.match_line("地铁2号线(新秀--赤湾)", "0755")),
                         "地铁2号线(新秀--赤湾)")

    def test_stripped_name_first_in_file_order(self):
        lines = table(("0755", "地铁2号线(赤湾--新秀)", []), ("0755", "地铁2号线(新秀--赤湾)", []))
        self.assertEqual(names_of(lines.match_line("地铁2号线", "0755")), "地铁2号线(赤湾--新秀)")

    def test_name_or_stripped_form_in_one_pass(self):
        # The rule is one pass in file order: an earlier line whose *stripped*
        # form equals the query beats a later line whose raw name equals it.
        lines = table(("0755", "10路(甲--乙)", []), ("0755", "10路", []))
        self.assertEqual(names_of(lines.match_line("10路", "0755")), "10路(甲--乙)")
        lines = table(("0755", "10路", []), ("0755", "10路(甲--乙)", []))
        self.assertEqual(names_of(lines.match_line("10路", "0755")), "10路")

    def test_nested_suffix_exact(self):
        lines = table(("021", "地铁2号线(国家会展中心(2号线)--浦东1号2号航站楼)", []))
        self.assertEqual(names_of(lines.match_line("地铁2号线", "021")),
                         "地铁2号线(国家会展中心(2号线)--浦东1号2号航站楼)")

    def test_query_whitespace_is_stripped(self):
        lines = table(("0755", "977路(启英学校--田贝总站)", []))
        self.assertEqual(names_of(lines.match_line("  977路 ", "0755")),
                         "977路(启英学校--田贝总站)")

    def test_containment_shortest_stripped_name(self):
        lines = table(("0755", "10路快线(甲--乙)", []),   # stripped 10路快线 (5)
                      ("0755", "M310路(丙--丁丁丁丁)", []),  # stripped M310路 (5)
                      ("0755", "310路(戊--己己己己己己)", []))  # stripped 310路 (4)
        self.assertEqual(names_of(lines.match_line("10路", "0755")), "310路(戊--己己己己己己)")

    def test_containment_file_order_on_equal_length(self):
        lines = table(("0755", "M210路", []), ("0755", "210路(甲--乙)", []),
                      ("0755", "310路", []))
        # 210路 and 310路 both have 4 characters once stripped: the earlier wins.
        self.assertEqual(names_of(lines.match_line("10路", "0755")), "210路(甲--乙)")

    def test_containment_in_raw_name_or_stripped_name(self):
        lines = table(("0755", "快线(机场)专线", []))           # stripped 快线专线
        self.assertEqual(names_of(lines.match_line("机场", "0755")), "快线(机场)专线")
        self.assertEqual(names_of(lines.match_line("快线专", "0755")), "快线(机场)专线")

    def test_not_found_and_empty_query(self):
        lines = table(("0755", "地铁1号线", []))
        self.assertIsNone(lines.match_line("977路", "0755"))
        self.assertIsNone(lines.match_line("", "0755"))
        self.assertIsNone(lines.match_line("   ", None))

    def test_city_restricts_and_unknown_city_searches_all(self):
        lines = table(("021", "地铁11号线(花桥--迪士尼)", []), ("0755", "地铁1号线", []),
                      ("010", "地铁11号线", []))
        self.assertIsNone(lines.match_line("地铁11号线", "0755"))
        self.assertEqual(names_of(lines.match_line("地铁11号线", "010")), "地铁11号线")
        # Unknown city: every line, in file order (the Shanghai row comes first).
        self.assertEqual(names_of(lines.match_line("地铁11号线", None)),
                         "地铁11号线(花桥--迪士尼)")
        self.assertIsNone(lines.match_line("地铁1号线", "028"))   # a known city without lines

    def test_indexes_pick_what_the_sequential_rule_picks(self):
        """The precomputed lookups agree with a literal reading of section 11."""
        rng = random.Random(11)
        parts = ["1", "2", "号线", "路", "(", ")", "甲", "-"]

        def naive(query, city, lines):
            query = query.strip()
            pool = [l for l in lines if city is None or l.citycode == city]
            for line in pool:
                if query in (line.name, strip_line_suffix(line.name)):
                    return line
            hits = [l for l in pool if query in l.name or query in strip_line_suffix(l.name)]
            return min(hits, key=lambda l: len(strip_line_suffix(l.name))) if hits else None

        for _ in range(200):
            rows = [(rng.choice(["010", "021"]),
                     "".join(rng.choice(parts) for _ in range(rng.randint(1, 6))), [])
                    for _ in range(rng.randint(1, 8))]
            lines = table(*rows)
            for _ in range(10):
                query = "".join(rng.choice(parts) for _ in range(rng.randint(1, 3)))
                for city in ("010", "021", None):
                    self.assertIs(lines.match_line(query, city), naive(query, city, lines.lines),
                                  (rows, query, city))


class MatchStationTest(unittest.TestCase):

    def line(self, *station_names):
        rows = [(n, "s%d" % i) for i, n in enumerate(station_names)]
        return table(("0755", "L", rows)).lines[0]

    def test_exact_name_first(self):
        line = self.line("罗湖", "国贸", "罗湖")
        self.assertEqual(match_station("罗湖", line).stop_id, "s0")
        self.assertEqual(match_station(" 国贸 ", line).stop_id, "s1")

    def test_exact_beats_similarity(self):
        line = self.line("世纪大道站", "世纪大道")
        self.assertEqual(match_station("世纪大道", line).stop_id, "s1")

    def test_at_threshold_matches(self):
        self.assertEqual(match_station("ABCD", self.line("XYZ", "ABCEF")).stop_id, "s1")  # 0.4

    def test_just_above_threshold_matches(self):
        # {AB, BC, CD, DE, EF} vs {AB, BC, CD, DX, XY}: 3 / 7 = 0.43
        self.assertEqual(match_station("ABCDEF", self.line("ABCDXY")).stop_id, "s0")

    def test_just_below_threshold_does_not_match(self):
        self.assertIsNone(match_station("ABCDEF", self.line("ABCDXYZ", "QQ")))  # 0.375

    def test_highest_score_then_first_on_ties(self):
        line = self.line("ABCX", "ABCD", "ABCD")   # ABCDE vs ABCD: 3/4, vs ABCX: 2/5
        self.assertEqual(match_station("ABCDE", line).stop_id, "s1")
        line = self.line("ABXY", "ABCE", "ABCF")   # ABCD vs ABCE = ABCF = 2/4
        self.assertEqual(match_station("ABCD", line).stop_id, "s1")

    def test_one_character_names(self):
        self.assertEqual(match_station("湖", self.line("西湖北", "湖北")).stop_id, "s1")  # 1/2
        self.assertIsNone(match_station("湖", self.line("西湖北")))                       # 1/3
        self.assertEqual(match_station("湖北", self.line("湖")).stop_id, "s0")            # 1/2

    def test_empty_line(self):
        self.assertIsNone(match_station("罗湖", self.line()))


# ---------------------------------------------------------------------------
# line_info.csv
# ---------------------------------------------------------------------------

class LineTableLoadTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rows, header=("citycode", "line_name", "station_list")):
        path = os.path.join(self.tmp.name, "line_info.csv")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            for row in rows:
                writer.writerow(row)
        return path

    @staticmethod
    def stations(*pairs):
        return json.dumps([{"station_name": n, "stop_id": i, "x": 1.0, "y": 2.0,
                            "station_id": i} for n, i in pairs], ensure_ascii=False)

    def test_duplicate_rows_merge_new_stops_in_order(self):
        path = self.write([
            ("0755", "1路", self.stations(("甲", "a"), ("乙", "b"))),
            ("0755", "2路", self.stations(("丙", "c"))),
            ("0755", "1路", self.stations(("乙", "b"), ("丁", "d"))),
            ("021", "1路", self.stations(("戊", "e"))),
        ])
        lines = LineTable.load(path)
        self.assertEqual(len(lines), 3)
        first = lines.match_line("1路", "0755")
        self.assertEqual([(s.name, s.stop_id) for s in first.stations],
                         [("甲", "a"), ("乙", "b"), ("丁", "d")])
        # The merged line keeps the position of its first row.
        self.assertEqual([l.name for l in lines.lines_of("0755")], ["1路", "2路"])
        self.assertEqual([l.stations[0].stop_id for l in lines.lines_of(None)], ["a", "c", "e"])

    def test_merged_stations_are_matchable(self):
        path = self.write([("0755", "1路", self.stations(("甲", "a"))),
                           ("0755", "1路", self.stations(("乙", "b")))])
        lines = LineTable.load(path)
        line = lines.match_line("1路", "0755")
        self.assertEqual(match_station("乙", line).stop_id, "b")

    def test_missing_file(self):
        with self.assertRaises(InputError) as ctx:
            LineTable.load(os.path.join(self.tmp.name, "nope.csv"))
        self.assertIn("nope.csv", str(ctx.exception))

    def test_missing_column(self):
        path = self.write([("0755", "1路")], header=("citycode", "line_name"))
        with self.assertRaises(InputError) as ctx:
            LineTable.load(path)
        self.assertIn("station_list", str(ctx.exception))
        self.assertIn(path, str(ctx.exception))

    def test_malformed_json_names_file_and_line(self):
        path = self.write([("0755", "1路", self.stations(("甲", "a"))),
                           ("0755", "2路", "[{\"station_name\": ")])
        with self.assertRaises(InputError) as ctx:
            LineTable.load(path)
        message = str(ctx.exception)
        self.assertIn(path, message)
        self.assertIn("line 3", message)
        self.assertNotIn("\n", message)

    def test_deeply_nested_station_list_names_file_and_line(self):
        for depth in (101, 3000, 100000):
            with self.subTest(depth=depth):
                path = self.write([("0755", "1路", self.stations(("甲", "a"))),
                                   ("0755", "2路", "[" * depth + "]" * depth)])
                with self.assertRaises(InputError) as ctx:
                    LineTable.load(path)
                message = str(ctx.exception)
                self.assertIn(path, message)
                self.assertIn("line 3", message)
                self.assertIn("nested more than 100 levels", message)

    def test_nesting_at_the_limit_is_read(self):
        # 100 levels: the list, the station object and 98 levels of an extra field.
        extra = "[" * 98 + "]" * 98
        cell = '[{"station_name": "甲", "stop_id": "a", "x": %s}]' % extra
        lines = LineTable.load(self.write([("0755", "1路", cell)]))
        self.assertEqual(lines.lines[0].stations[0].stop_id, "a")

    def test_station_list_not_an_array(self):
        path = self.write([("0755", "1路", "{\"a\": 1}")])
        with self.assertRaises(InputError) as ctx:
            LineTable.load(path)
        self.assertIn("line 2", str(ctx.exception))

    def test_empty_station_list_cell(self):
        lines = LineTable.load(self.write([("0755", "1路", "")]))
        self.assertEqual(lines.lines[0].stations, [])


class JsonShapeTest(unittest.TestCase):
    """json_shape_problem: the scan of untrusted JSON text before decoding."""

    def test_plain_texts_pass(self):
        for text in ("", "null", "[]", '{"a": [1, 2, {"b": "[[["}]}', "[" * 100 + "]" * 100,
                     "not json at all"):
            self.assertIsNone(json_shape_problem(text), text)

    def test_depth(self):
        self.assertEqual(json_shape_problem("[" * 101 + "]" * 101),
                         ("too_deep", "nested more than 100 levels deep"))
        self.assertEqual(json_shape_problem('{"a": [{"b": [1]}]}', max_depth=3)[0],
                         "too_deep")
        self.assertIsNone(json_shape_problem('{"a": [{"b": 1}]}', max_depth=3))
        # Unbalanced closers (invalid JSON) are left to the decoder.
        self.assertIsNone(json_shape_problem("]]]" + "[" * 50, max_depth=100))

    def test_items_only_when_asked(self):
        many = "[%s]" % ",".join(["0"] * 5000)
        self.assertIsNone(json_shape_problem(many))
        self.assertEqual(json_shape_problem(many, max_items=1000),
                         ("too_long", "a list holds more than 1000 items"))
        self.assertIsNone(json_shape_problem('{"a": 1, "b": 2, "c": 3}', max_items=2))

    def test_strings_are_skipped_whole(self):
        # A long string, escaped quotes, and brackets inside strings.
        text = '["%s", "a\\"[[[", "\\\\", "{"]' % ("x" * 1000000)
        self.assertEqual(len(json.loads(text)), 4)
        self.assertIsNone(json_shape_problem(text, max_items=4, max_depth=1))
        self.assertEqual(json_shape_problem(text, max_items=3)[0], "too_long")


# ---------------------------------------------------------------------------
# Transfer-station normalisation
# ---------------------------------------------------------------------------

class NormaliseTransferNamesTest(unittest.TestCase):

    def test_segments_keep_first_and_last(self):
        names = ["A", "B", "C", T, "C", "D", T, "D", "E", "F"]
        self.assertEqual(normalise_transfer_names(names, 3), ["A", "C", "C", "D", "D", "F"])

    def test_single_entry_segment_keeps_one(self):
        self.assertEqual(normalise_transfer_names(["A", T, "B", "C"], 2), ["A", "B", "C"])

    def test_empty_segments_are_skipped(self):
        self.assertEqual(normalise_transfer_names([T, "A", "B", T, T, "C", "D"], 2),
                         ["A", "B", "C", "D"])

    def test_empty_entries_dropped(self):
        self.assertEqual(normalise_transfer_names(["A", "", None, "  ", "B"], 1), ["A", "B"])
        self.assertEqual(normalise_transfer_names(["A", "", T, None, "B", "C"], 2),
                         ["A", "B", "C"])

    def test_without_transfer_kept_as_is(self):
        self.assertEqual(normalise_transfer_names(["A", "B", "C"], 1), ["A", "B", "C"])
        self.assertEqual(normalise_transfer_names(["A", "B", "B", "C"], 2),
                         ["A", "B", "B", "C"])

    def test_no_lines_drops_transfer_only(self):
        self.assertEqual(normalise_transfer_names(["A", T, "B", "C"], 0), ["A", "B", "C"])
        self.assertEqual(normalise_transfer_names(["A", T, "B", "C"], -1), ["A", "B", "C"])
        self.assertEqual(normalise_transfer_names(["A", "B", "C"], 0, trim_single_leg=True),
                         ["A", "B", "C"])

    def test_trim_single_leg(self):
        self.assertEqual(normalise_transfer_names(["A", "B", "C"], 1, trim_single_leg=True),
                         ["A", "C"])
        self.assertEqual(normalise_transfer_names(["A"], 1, trim_single_leg=True), ["A"])
        self.assertEqual(normalise_transfer_names(["A", "B"], 1, trim_single_leg=True),
                         ["A", "B"])
        # Only single-line routes are trimmed; lists with 【换乘】 follow the segment rule.
        self.assertEqual(normalise_transfer_names(["A", "B", "C"], 2, trim_single_leg=True),
                         ["A", "B", "C"])
        self.assertEqual(normalise_transfer_names(["A", "B", T, "C"], 1, trim_single_leg=True),
                         ["A", "B", "C"])

    def test_input_not_modified(self):
        names = ["A", "", T, "B"]
        normalise_transfer_names(names, 2)
        self.assertEqual(names, ["A", "", T, "B"])


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
