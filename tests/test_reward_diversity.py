"""The RD the reward credits on benchmark 3 pays only for real alternatives
(issue 46; transitlm/reward/diversity.py, diversity/real_routes.py).

The published RD compares line names whatever the routes are: the label's
first route copied twice under invented names (幻想0号线, 梦境0号线) scored
above its label on 21 of the 33 bundled rows under reference and 20 under
paper.  Here, on every bundled benchmark-3 row under both protocols: each
alternative that is not real outscored its label before (the published RD
credited) and none does now, under any shaping; the label's own alternatives
are real and earn their RD in full; dropping, copying or faking an
alternative never raises the credit; without a line file the credit never
exceeds what the stations show; the rules the credit reads, one by one."""

import csv
import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

from common import PROTOCOLS, ROUTE_KEYS, TRANSFER, calls_in_order, full_line_set, iou
from diversity import real_routes
from tests.support import reward_search
from transitlm.reward import binding, diversity, scoring
from transitlm.reward.scoring import RowDataError, network_files

ROWS = reward_search.example_rows("diversity")
MIN = scoring.MIN_ROUTE_STATIONS
# Invented line names: data of the completions (what a model might write).
INVENTED = "幻想0号线"


def text(value):
    return json.dumps(value, ensure_ascii=False)


def published_pairs(record, walk):
    """The published diversity of each pair of predicted routes (or None)."""
    routes = record.get("prediction_routes") or {}
    out = {}
    for one, other in diversity.PAIRS:
        if one in routes and other in routes:
            out[(one, other)] = 1.0 - iou(*[full_line_set(
                routes[key]["lines"], routes[key]["start_mode"], routes[key]["end_mode"], walk)
                for key in (one, other)])
    return out


def station_diversity(record):
    """The mean over the three pairs of the station-set diversity of the
    pairs of real routes (0 for a pair with a route missing or not real)."""
    routes = record["prediction_routes"]
    real = [key for key, why in diversity.not_real(record, MIN).items() if why is None]
    return sum(1.0 - iou(routes[one]["stations"], routes[other]["stations"])
               for one, other in diversity.PAIRS if one in real and other in real) / 3


CREDITED = scoring.credited


def before_the_fix(values, checks):
    """The score's credit as before issue 46: the published RD (every route
    of these completions is reachable, which was its only other condition)."""
    return CREDITED(values, dict(checks, real_rd=values["rd"]))


class Judged(object):
    """A completion's record, terms and checks on one row, and its scores
    now and as before the fix, under every shaping."""

    def __init__(self, scorer, completion, row):
        self.record, self.values, self.checks = scorer.verdicts(completion, row)
        self.now, self.before = {}, {}
        for shaping in scoring.SHAPINGS:
            self.now[shaping] = scoring.shaped(self.values, self.checks, shaping, None, "rd")
            with mock.patch.object(scoring, "credited", before_the_fix):
                self.before[shaping] = scoring.shaped(self.values, self.checks, shaping, None,
                                                      "rd")


def each_row(protocol):
    """(row, its label decoded, another row's label, the label judged)."""
    scorer = scoring.scorer_for("diversity", protocol)
    for index, row in enumerate(ROWS):
        other = json.loads(ROWS[(index + 1) % len(ROWS)]["sft_label"])
        yield scorer, row, json.loads(row["sft_label"]), other, Judged(
            scorer, row["sft_label"], row)


class LabelsTest(unittest.TestCase):
    def test_the_labels_alternatives_are_real_and_earn_their_rd(self):
        for protocol in PROTOCOLS:
            for scorer, row, label, _, own in each_row(protocol):
                where = (protocol, row["index_id"])
                self.assertEqual(diversity.not_real(own.record, MIN),
                                 dict.fromkeys(ROUTE_KEYS), where)
                self.assertGreater(own.values["rd"], 0.0, where)
                self.assertEqual(own.checks["real_rd"], own.values["rd"], where)
                credit, accepted = scoring.credited(own.values, own.checks)
                self.assertTrue(accepted, where)
                self.assertEqual(credit["rd"], own.values["rd"], where)
                self.assertEqual(own.now, own.before, where)


class UnrealAlternativesTest(unittest.TestCase):
    def test_each_outscored_its_label_before_and_none_does_now(self):
        above_before = {}
        for protocol in PROTOCOLS:
            for scorer, row, label, other, own in each_row(protocol):
                for name, whole in reward_search.diversity_mutations(label, other):
                    got = Judged(scorer, text(whole), row)
                    where = (protocol, row["index_id"], name)
                    for shaping in scoring.SHAPINGS:
                        self.assertLessEqual(got.now[shaping], own.now[shaping], where)
                        if got.before[shaping] > own.before[shaping]:
                            key = (name, protocol, shaping)
                            above_before[key] = above_before.get(key, 0) + 1
                    self.assertLess(got.checks["real_rd"], own.checks["real_rd"], where)
                    if name in reward_search.UNREAL_ALTERNATIVES:
                        self.assertLess(got.now["dense"], own.now["dense"], where)
        # The issue's own figures: the first route copied under invented names.
        name = "first copied under invented names"
        self.assertEqual(above_before[(name, "reference", "dense")], 21)
        self.assertEqual(above_before[(name, "paper", "dense")], 20)
        for name in reward_search.UNREAL_ALTERNATIVES:
            for protocol in PROTOCOLS:
                for shaping in ("dense", "gated"):
                    self.assertGreater(above_before.get((name, protocol, shaping), 0), 0,
                                       (name, protocol, shaping))
        # Sparse pays the accepted first route alone: RD never raised it.
        self.assertFalse([key for key in above_before if key[2] == "sparse"])

    def test_the_cap_keeps_near_copies_to_what_their_stations_show(self):
        # Real routes a station shorter than the first, whose line names
        # differ from the first's only by their access modes: paid their
        # published pair diversity, they outscored the label on a few rows;
        # capped by their stations (and the real lines), on none.
        def uncapped(first, second, walk, *lines):
            return published_pairs({"prediction_routes": {"first": first, "second": second}},
                                   walk)[("first", "second")]

        name = "near copies of the first by other access modes"
        above, real = {"capped": 0, "uncapped": 0}, 0
        for protocol in PROTOCOLS:
            for scorer, row, label, other, own in each_row(protocol):
                completion = text(dict(reward_search.diversity_mutations(label, other))[name])
                got = Judged(scorer, completion, row)
                real += not any(diversity.not_real(got.record, MIN).values())
                above["capped"] += got.now["dense"] > own.now["dense"]
                with mock.patch.object(diversity, "pair_credit", uncapped):
                    got = Judged(scorer, completion, row)
                above["uncapped"] += got.now["dense"] > own.now["dense"]
        self.assertGreater(real, len(ROWS))         # most near copies are real routes
        self.assertGreater(above["uncapped"], 0)
        self.assertEqual(above["capped"], 0)


class DroppingCopyingFakingTest(unittest.TestCase):
    def assert_only_real_alternatives_outscore(self, got, own, where):
        """A completion above its label has real alternatives, more diverse."""
        if any(got.now[shaping] > own.now[shaping] for shaping in scoring.SHAPINGS):
            self.assertFalse(any(diversity.not_real(got.record, MIN).values()), where)
            self.assertGreater(got.checks["real_rd"], own.checks["real_rd"], where)

    def test_never_raises_the_credit(self):
        for protocol in PROTOCOLS:
            walk = PROTOCOLS[protocol].line_set_with_access
            for scorer, row, label, other, own in each_row(protocol):
                first, second, third = (label[key] for key in ROUTE_KEYS)
                backwards = dict(second, station_sequence=second["station_sequence"][::-1],
                                 line_sequence=second["line_sequence"][::-1])
                changed = {
                    "first only": {"first": first},
                    "third dropped": {"first": first, "second": second},
                    "second dropped": {"first": first, "third": third},
                    "third a copy of the second": dict(label, third=second),
                    "third the second backwards": dict(label, third=backwards),
                    "third the second under an invented name": dict(
                        label, third=dict(second, line_sequence=[INVENTED] * len(
                            second["line_sequence"]))),
                    "second made up": dict(label, second=dict(
                        second, station_sequence=["?"] + second["station_sequence"])),
                    "every route the first": {key: first for key in ROUTE_KEYS},
                }
                pairs = published_pairs(own.record, walk)
                for name, whole in changed.items():
                    got = Judged(scorer, text(whole), row)
                    where = (protocol, row["index_id"], name)
                    self.assertLessEqual(got.checks["real_rd"], own.checks["real_rd"], where)
                    self.assertLessEqual(got.checks["real_rd"], got.values["rd"], where)
                    self.assertLessEqual(got.now["dense"], own.now["dense"], where)
                    if name in ("first only", "every route the first"):
                        self.assertEqual(got.checks["real_rd"], 0.0, where)
                    if name in ("third dropped", "third a copy of the second",
                                "third the second under an invented name"):
                        self.assertAlmostEqual(got.checks["real_rd"],
                                               pairs[("first", "second")] / 3, 12, where)
                # Another row's routes as the alternatives: when they are real
                # (the bundled network is small) and more diverse, they may win.
                for key in ("second", "third"):
                    got = Judged(scorer, text(dict(label, **{key: other[key]})), row)
                    self.assert_only_real_alternatives_outscore(got, own, (protocol, key))


class NoLineFileTest(unittest.TestCase):
    """The bundled station file alone (the published release ships no line
    file): names cannot be checked, so a pair is credited no more than its
    stations differ."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp()
        station, _ = network_files()
        shutil.copy(station, cls.folder)
        cls.station = os.path.join(cls.folder, os.path.basename(station))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder)

    def test_the_credit_never_exceeds_what_the_stations_show(self):
        for protocol in PROTOCOLS:
            scorer = scoring.Scorer("diversity", protocol, self.station)
            self.assertIsNone(scorer.line_info)
            for index, row in enumerate(ROWS):
                label = json.loads(row["sft_label"])
                other = json.loads(ROWS[(index + 1) % len(ROWS)]["sft_label"])
                own = Judged(scorer, row["sft_label"], row)
                where = (protocol, row["index_id"])
                self.assertGreater(own.checks["real_rd"], 0.0, where)
                self.assertLessEqual(own.checks["real_rd"],
                                     min(own.values["rd"], station_diversity(own.record)), where)
                for name, whole in reward_search.diversity_mutations(label, other):
                    got = Judged(scorer, text(whole), row)
                    self.assertLessEqual(got.checks["real_rd"], station_diversity(got.record),
                                         where + (name,))
                    if name == "first copied under invented names":
                        self.assertEqual(got.checks["real_rd"], 0.0, where)
                        self.assertLess(got.now["dense"], own.now["dense"], where)


class RealFeedsTest(unittest.TestCase):
    """The labels make_benchmark.py builds on the real GTFS feeds of
    ../shared/gtfs (tests.real_feeds, built once per run): every route is
    real but for the copy rule, which only one line's two patterns or
    directions over the same stations meet (Newport's R1); none earns more
    than its published RD."""

    def test_every_label_route_rides_its_lines(self):
        from tests import real_feeds
        feeds = [name for name in sorted(real_feeds.CITIES) if real_feeds.available(name)]
        if not feeds:
            self.skipTest("no GTFS feed in ../shared/gtfs")
        earning = 0
        for name in feeds:
            network, bench, _ = real_feeds.built(name, real_feeds.SAMPLES)
            station = os.path.join(network, "station_info.csv")
            with open(os.path.join(bench, "benchmark3_diversity.csv"), encoding="utf-8",
                      newline="") as handle:
                rows = list(csv.DictReader(handle))
            for protocol in PROTOCOLS:
                scorer = scoring.Scorer("diversity", protocol, station)
                self.assertEqual(scorer.line_info, os.path.join(network, "line_info.csv"))
                for row in rows:
                    record, values, checks = scorer.verdicts(row["sft_label"], row)
                    where = (name, protocol, row.get("index_id") or row.get("indexid"))
                    reasons = [why for why in diversity.not_real(record, MIN).values() if why]
                    self.assertFalse([why for why in reasons if "stations and lines" not in why],
                                     where)
                    self.assertLessEqual(checks["real_rd"], values["rd"], where)
                    if not reasons:
                        self.assertEqual(checks["real_rd"], values["rd"], where)
                        earning += values["rd"] > 0
        self.assertGreater(earning, len(feeds) * real_feeds.SAMPLES)


class BindingTest(unittest.TestCase):
    def test_a_row_prepared_on_another_line_file_is_refused(self):
        station, _ = network_files()
        line = os.path.join(os.path.dirname(station), "line_info.csv")
        row = dict(ROWS[0], **binding.row_fields(station, line))
        self.assertGreater(scoring.score(row["sft_label"], row, benchmark="diversity")["rd"],
                           0.0)
        row[binding.LINE_SHA] = "0" * 64
        with self.assertRaises(RowDataError) as caught:
            scoring.score(row["sft_label"], row, benchmark="diversity")
        self.assertIn("line file", str(caught.exception))


class RulesTest(unittest.TestCase):
    def test_calls_in_order(self):
        calls = ["a", "b", "c", "d", "a"]           # a loop line ends where it starts
        for leg in (["b", "c"], ["b", "d"], ["c", "d", "a"], ["a"], []):
            self.assertTrue(calls_in_order(calls, leg), leg)
        for leg in (["c", "b"], ["b", "x"], ["b", "b"], ["d", "a", "b"]):
            self.assertFalse(calls_in_order(calls, leg), leg)

    def test_the_lines_a_route_names(self):
        from common import REFERENCE, Route, city_code_of
        row = ROWS[0]
        code = city_code_of(json.loads(row["sft_prompt"])["city"])
        lines = scoring.scorer_for("diversity", "reference").benchmark.lines
        first = json.loads(row["sft_label"])["first"]
        name = first["line_sequence"][0]
        self.assertEqual(len(first["line_sequence"]), 1)
        seq = first["station_sequence"]
        stripped = name.split("(")[0]
        other_direction = reward_search.other_direction(name)
        self.assertNotEqual(other_direction, name)
        cases = [(first, True, [name]),
                 (dict(first, line_sequence=[stripped]), True, [name]),  # match_line's rule
                 (dict(first, line_sequence=[INVENTED]), False, "unknown_line"),
                 (dict(first, station_sequence=seq[::-1]), False, "line_order"),
                 (dict(first, line_sequence=[other_direction]), False, "line_order"),
                 (dict(first, line_sequence=[]), False, "line_count"),
                 (dict(first, line_sequence=[name, name]), False, "line_count"),
                 (dict(first, station_sequence=seq[:2] + [TRANSFER] + seq[2:]), False,
                  "line_count")]
        for route, ok, expected in cases:
            verdict, names = real_routes.check_lines(Route(route, REFERENCE), lines, code)
            self.assertEqual(verdict.ok, ok, route)
            self.assertEqual(names if ok else verdict.codes[0], expected, route)
        # Without a line file: a line named for each leg is all that is asked.
        verdict, names = real_routes.check_lines(
            Route(dict(first, line_sequence=[INVENTED]), REFERENCE), None, code)
        self.assertEqual((verdict.ok, names), (True, None))

    def test_a_pair_is_credited_what_its_stations_or_real_lines_show(self):
        route = {"stations": ["s1", "s2", "s3", "s4"], "lines": ["L1"], "start_mode": "步行",
                 "end_mode": "步行"}
        near = dict(route, stations=["s2", "s3", "s4"], start_mode="打车", end_mode="骑行")
        for walk in (False, True):
            # published 1 - 1/4 (the names differ by their modes), stations 1 - 3/4
            self.assertEqual(diversity.pair_credit(route, near, walk), 0.25)
            self.assertEqual(diversity.pair_credit(route, near, walk, ["L1"], ["L1"]), 0.25)
        same_stations = dict(route, lines=["L2"])         # another line, the same stops
        self.assertEqual(diversity.pair_credit(route, same_stations, False), 0.0)
        self.assertAlmostEqual(diversity.pair_credit(route, same_stations, False, ["L1"],
                                                     ["L2"]), 2.0 / 3)
        elsewhere = dict(route, stations=["t1", "t2"])     # never above the published
        self.assertEqual(diversity.pair_credit(route, elsewhere, False), 0.0)

    def test_the_cheapest_alternatives_are_not_real(self):
        row = ROWS[0]
        label = json.loads(row["sft_label"])
        second = label["second"]
        stop = second["station_sequence"][0]
        scorer = scoring.scorer_for("diversity", "reference")
        cases = {
            "one station twice": (dict(second, station_sequence=[stop, stop]),
                                  "fewer than 2 distinct stations"),
            "no line named": (dict(second, line_sequence=[]), "0 line name(s) for 1 leg(s)"),
            "an invented line": (dict(second, line_sequence=[INVENTED]),
                                 "line %s is not in the line file" % INVENTED),
            "the first again": (label["first"], "the stations and lines of the first route"),
        }
        self.assertEqual(len(second["line_sequence"]), 1)
        for name, (route, reason) in cases.items():
            record = scorer.verdicts(text(dict(label, second=route)), row)[0]
            self.assertEqual(diversity.not_real(record, MIN)["second"], reason, name)


if __name__ == "__main__":
    unittest.main()
