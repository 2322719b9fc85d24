"""transitlm/datasets/statistics.py: the dataset's statistics are counters,
deterministic whatever the order rows come in, additive across processes
(merge, from_json) and bounded whatever the rows hold."""

import json
import os
import random
import unittest

from tests import support  # noqa: F401  (puts the repository on sys.path)
from tests.support import REPO
from transitlm.datasets import corpus_texts as ct
from transitlm.datasets import statistics as st
from transitlm.networks import benchmark_builder as mb
from transitlm.networks import router

SUBWAY, BUS = "地铁1号线(a--b)", "5路(c--d)"


def label(lines, distance="12.3公里", start="步行", end=""):
    return {"line_sequence": lines, "station_sequence": [], "total_distance": distance, "total_time": "45分钟",
            "total_fare": "4", "start_transfer_mode": start, "end_transfer_mode": end,
            "start_transfer_distance": "", "end_transfer_distance": ""}


ROWS = [("benchmark1-train", 0, label([SUBWAY])),
        ("benchmark1-train", 0, label([BUS, SUBWAY], "850米", start="骑行")),
        ("benchmark1-test", 0, label([BUS], "约40公里", end="打车")),
        ("benchmark2-train", 5, label([BUS, BUS, BUS, BUS], "5公里")),
        ("benchmark2-train", 7, label([SUBWAY], "19.9", end="网约车")),
        ("benchmark3-train", 0, {"first": label([SUBWAY, BUS]), "second": label([BUS]), "third": label([BUS])})]
RECORDS = [("session", "text one", {"routes": [label([SUBWAY]), label([BUS])]}),
           ("line", "a line", {"line_name": "x"}),
           ("station", "站点", {"stop_id": "s"}),
           ("session", "text two", {"routes": [label([BUS])]})]


def gathered(rows, records):
    stats = st.DatasetStatistics()
    for row in rows:
        stats.add_sft_row(*row)
    for record in records:
        stats.add_corpus_record(*record)
    stats.add_network("北京", "010", 280, 40)
    stats.set_leakage({"held_out_pairs": 3, "excluded": 1})
    return stats


def dumped(stats):
    return json.dumps(stats.as_json(), ensure_ascii=False)


class StatisticsTest(unittest.TestCase):

    def test_counts(self):
        out = gathered(ROWS, RECORDS).as_json()
        self.assertEqual(out["sft_rows"], 6)
        b1 = out["sft"]["benchmark1-train"]
        self.assertEqual(b1["rows"], 2)
        self.assertEqual(b1["route_types"], {"subway": 1, "bus": 0, "mixed": 1})
        self.assertEqual(b1["distance_bands"]["10-20 km"], 1)
        self.assertEqual(b1["distance_bands"]["<5 km"], 1)
        self.assertEqual(b1["transfers"], {"0": 1, "1": 1, "2": 0, "3+": 0})
        self.assertEqual(b1["access_modes"], {"walk": 3, "bike": 1, "taxi": 0, "other": 0})
        b2 = out["sft"]["benchmark2-train"]
        self.assertEqual(b2["req_types"], {"5": 1, "7": 1})
        self.assertEqual(b2["transfers"]["3+"], 1)
        self.assertEqual(b2["distance_bands"]["5-10 km"], 1)
        self.assertEqual(b2["distance_bands"]["10-20 km"], 1)
        self.assertEqual(b2["access_modes"]["taxi"], 1)
        self.assertEqual(out["sft"]["benchmark1-test"]["distance_bands"][">=40 km"], 1)
        b3 = out["sft"]["benchmark3-train"]           # counted by its first route
        self.assertEqual((b3["rows"], b3["route_types"]["mixed"], b3["transfers"]["1"]), (1, 1, 1))
        corpus = out["corpus"]
        self.assertEqual(corpus["records"], 4)
        self.assertEqual(corpus["characters"], sum(len(t) for _, t, _ in RECORDS))
        self.assertEqual(corpus["kinds"]["session"], {"records": 2, "characters": 16})
        self.assertEqual(corpus["candidates_per_session"], {"1": 1, "2": 1, "3": 0, "4": 0, "5": 0})
        self.assertEqual(corpus["session_route_types"], {"subway": 1, "bus": 1, "mixed": 0})
        self.assertEqual((out["stations"], out["lines"]), (280, 40))
        self.assertEqual(out["leakage"], {"excluded": 1, "held_out_pairs": 3})

    def test_deterministic_whatever_the_order(self):
        expected = dumped(gathered(ROWS, RECORDS))
        rng = random.Random(5)
        for _ in range(5):
            rows, records = list(ROWS), list(RECORDS)
            rng.shuffle(rows)
            rng.shuffle(records)
            self.assertEqual(dumped(gathered(rows, records)), expected)

    def test_merge_and_from_json_add_up(self):
        whole = gathered(ROWS, RECORDS)
        first = gathered(ROWS[:2], RECORDS[:1])
        second = st.DatasetStatistics()
        for row in ROWS[2:]:
            second.add_sft_row(*row)
        for record in RECORDS[1:]:
            second.add_corpus_record(*record)
        self.assertEqual(dumped(first.merge(second)), dumped(whole))
        again = st.DatasetStatistics.from_json(json.loads(dumped(whole)))
        self.assertEqual(dumped(again), dumped(whole))
        split = st.DatasetStatistics.from_json(json.loads(dumped(gathered(ROWS[:3], RECORDS[:2]))))
        rest = gathered(ROWS[3:], RECORDS[2:])
        self.assertEqual(dumped(split.merge(rest)), dumped(whole))

    def test_counts_without_networks_come_from_the_static_records(self):
        stats = st.DatasetStatistics()
        for record in RECORDS:
            stats.add_corpus_record(*record)
        self.assertEqual((stats.as_json()["stations"], stats.as_json()["lines"]), (1, 1))

    def test_bounded_whatever_the_rows(self):
        stats = st.DatasetStatistics()
        rng = random.Random(1)
        for n in range(3000):
            stats.add_sft_row("task%d" % rng.randrange(500), rng.randrange(10 ** 6),
                              label(["L%d" % n], "%d公里" % rng.randrange(100), start="mode%d" % n))
            stats.add_corpus_record("kind%d" % n, "x" * (n % 7), {"routes": [label([])] * (n % 9)})
        out = stats.as_json()
        self.assertLessEqual(len(out["sft"]), st.MAX_KEYS + 1)
        for entry in out["sft"].values():
            for name in ("req_types", "route_types", "distance_bands", "transfers", "access_modes"):
                self.assertLessEqual(len(entry[name]), st.MAX_KEYS + 1)
        self.assertEqual(sum(e["rows"] for e in out["sft"].values()), 3000)
        self.assertLessEqual(len(out["corpus"]["kinds"]), len(st.CORPUS_KINDS) + 1)
        self.assertEqual(out["corpus"]["records"], 3000)
        self.assertLessEqual(len(out["corpus"]["candidates_per_session"]), st.MAX_KEYS + 1)
        self.assertEqual(json.loads(json.dumps(out)), out)

    def test_bad_labels_are_counted_not_raised(self):
        stats = st.DatasetStatistics()
        for bad in ({}, {"line_sequence": None, "total_distance": 5}, {"total_distance": ["x"]}, "not a dict"):
            stats.add_sft_row("benchmark1-train", 0, bad)
        out = stats.as_json()["sft"]["benchmark1-train"]
        self.assertEqual(out["rows"], 4)
        self.assertEqual(out["distance_bands"].get(st.UNREADABLE), 1)
        self.assertEqual(sum(out["route_types"].values()), 4)

    def test_band_edges(self):
        for text, band in (("4.9公里", "<5 km"), ("5公里", "5-10 km"), ("9.99", "5-10 km"),
                           ("约40公里", ">=40 km"), ("850米", "<5 km"), ("20.0公里", "20-40 km")):
            self.assertEqual(st.distance_band(text), band, text)
        self.assertEqual(st.access_mode(""), "walk")
        self.assertEqual(st.access_mode("滴滴"), "taxi")
        self.assertEqual(st.route_type({"line_sequence": []}), "bus")

    def test_on_demo_sessions(self):
        net = mb.load_network(os.path.join(REPO, "data"))
        rng = random.Random(4)
        district = net.districts[0]
        stats = st.DatasetStatistics()
        built = 0
        for attempt in range(60):
            od = router.draw_od(net, rng, district, *mb.TRIP_KM)
            if od is None:
                continue
            trip = mb.Trip(net, district, od[0], od[1])
            routes = router.distinct_alternatives(trip, router.Prefs(), 5, 1.5)
            if not routes:
                continue
            text, record = ct.session_entry(net, district.city.name, od[0], od[1], routes, random.Random(attempt))
            stats.add_corpus_record("session", text, record)
            stats.add_sft_row("benchmark1-train", 0, record["routes"][0])
            built += 1
        for kind, entries in (("line", ct.line_entries(net)), ("station", ct.station_entries(net))):
            for text, record in entries:
                stats.add_corpus_record(kind, text, record)
        out = stats.as_json()
        self.assertGreater(built, 10)
        self.assertEqual(out["corpus"]["kinds"]["session"]["records"], built)
        self.assertEqual((out["stations"], out["lines"]), (len(net.ids), len(net.linedirs)))
        self.assertEqual(sum(out["corpus"]["candidates_per_session"].values()), built)
        self.assertEqual(out["sft"]["benchmark1-train"]["distance_bands"].get(st.UNREADABLE, 0), 0)


if __name__ == "__main__":
    unittest.main()
