"""general_llm/route_eval.py, matching names (protocol.md section 11): a
predicted line to the table's lines, a station name to a stop of a line, the
line table read from line_info.csv, the shape of a prediction's JSON, the
transfer markers of a station list normalised, and every predicted name
found on the predicted lines (names_on_lines, for the page's map).
Hand-computed small cases."""

import csv
import json
import os
import random
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from common import InputError, strip_line_suffix  # noqa: E402
from general_llm.route_eval import (  # noqa: E402
    MAX_MAP_NAME_CHARS, MAX_MAP_NAMES, LineTable, match_station, names_on_lines,
    normalise_transfer_names)
from tests.support.services import line_table as table  # noqa: E402
from transitlm.io.bounded_json import json_shape_problem  # noqa: E402

T = "【换乘】"


def names_of(lines):
    return None if lines is None else lines.name


# ---------------------------------------------------------------------------
# Matching a line, matching a station
# ---------------------------------------------------------------------------

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
    """json_shape_problem (transitlm/io/bounded_json.py): the scan of untrusted
    JSON text before decoding."""

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
# Every predicted name found on the predicted lines (the page's map of a
# route the check stopped on)
# ---------------------------------------------------------------------------

class NamesOnLinesTest(unittest.TestCase):
    LINES = (("0755", "1号线(甲--丁)", [("甲站", "s1"), ("乙站", "s2"), ("丙站", "s3")]),
             ("0755", "2号线(丙--戊)", [("丙站", "s3"), ("丁站", "s4"), ("戊站", "s5")]))

    def case(self, lines, names, city="深圳"):
        return {"city": city, "start": [114.0, 22.5], "end": [114.1, 22.6],
                "pred": {"line_sequence": lines, "station_name": names}}

    def test_each_name_on_the_first_predicted_line_that_holds_it(self):
        lines = table(*self.LINES)
        # a count mismatch the check stops on: every name is still placed
        found = names_on_lines(self.case(["2号线", "1号线"], ["甲站", "丙站", "戊站", "无名"]),
                               lines)
        self.assertEqual([(item["query"], item["line_name"], item["stop_id"])
                          for item in found],
                         [("甲站", "1号线(甲--丁)", "s1"), ("丙站", "2号线(丙--戊)", "s3"),
                          ("戊站", "2号线(丙--戊)", "s5")])
        self.assertEqual(found[0]["name"], "甲站")

    def test_nothing_to_place(self):
        lines = table(*self.LINES)
        self.assertEqual(names_on_lines(self.case([], ["甲站"]), lines), [])
        self.assertEqual(names_on_lines(self.case(["9号线"], ["甲站"]), lines), [])
        self.assertEqual(names_on_lines({"pred": "bad"}, lines), [])       # never raises

    def test_bounded(self):
        lines = table(*self.LINES)
        names = ["甲站"] * (MAX_MAP_NAMES + 50) + ["x" * (MAX_MAP_NAME_CHARS + 1)]
        found = names_on_lines(self.case(["1号线"], names), lines)
        self.assertEqual(len(found), MAX_MAP_NAMES)


if __name__ == "__main__":
    unittest.main()
