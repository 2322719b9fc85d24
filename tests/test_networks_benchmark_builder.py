"""data/make_benchmark.py and transitlm/networks/benchmark_builder.py: network
loading, labels, and every label scored against itself by the four evaluators
(demo network; MTA feeds when present)."""

import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "data")
SCRIPT = os.path.join(DATA, "make_benchmark.py")
IMPORTER = os.path.join(DATA, "import_gtfs.py")
SHARED_GTFS = os.path.join(REPO, "..", "shared", "gtfs")

from tests.support import evaluator_rows  # noqa: E402
import common  # noqa: E402
import transitlm.evaluation.records  # noqa: E402
from transitlm.networks import benchmark_builder as mb  # noqa: E402
from transitlm.networks import gtfs_import  # noqa: E402
from tests import real_feeds  # noqa: E402
from tests import route_oracle as oracle  # noqa: E402
from transitlm.networks import router as routing  # noqa: E402
from tests.support.gtfs_feeds import BASE_FEED, write_feed  # noqa: E402

csv.field_size_limit(2 ** 31 - 1)

COLUMNS = ["task_id", "req_type", "adcode", "indexid", "system_prompt", "sft_prompt",
           "sft_label", "generate_results"]
EVALUATORS = (("single_route", "benchmark1_single_route.csv"),
              ("personalized", "benchmark2_personalized.csv"),
              ("diversity", "benchmark3_diversity.csv"),
              ("general_llm", "general_llm.csv"))


def run(script, *args):
    return subprocess.run([sys.executable, script] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def self_scores(network, bench, protocol, evaluators=EVALUATORS):
    """benchmark file -> (report JSON, details records) of its labels scored against
    themselves (the evaluators run in this process)."""
    out = {}
    for evaluator, filename in evaluators:
        args = ["--input", os.path.join(bench, filename), "--input_field", "sft_label",
                "--station_info", os.path.join(network, "station_info.csv"),
                "--protocol", protocol, "--quiet"]
        if evaluator == "general_llm":
            args += ["--line_info", os.path.join(network, "line_info.csv")]
        with tempfile.TemporaryDirectory() as tmp:
            loaded, records, _ = evaluator_rows.evaluate_to_files(transitlm.evaluation.records.load_benchmark(evaluator), args, tmp)
        out[evaluator] = (loaded, records)
    return out


class SelfScoreMixin(object):
    """Every label passes every check of its benchmark (general LLM under reference:
    only the published count quirk of one-line full station lists may fail)."""

    def assert_labels_pass(self, network, bench, evaluators=EVALUATORS):
        for protocol in ("reference", "paper"):
            scores = self_scores(network, bench, protocol, evaluators)
            for evaluator, (report, records) in scores.items():
                where = "%s %s" % (evaluator, protocol)
                self.assertEqual(report["counts"]["errors"], 0, where)
                quirk = [r for r in records if r.get("reachable") is False]
                if evaluator == "general_llm" and protocol == "reference":
                    # one-line routes with a full station list: the published
                    # client sends every name, the service expects two
                    for r in quirk:
                        self.assertIn("count mismatch", r["reachable_reason"], where)
                        self.assertIn("for 1 line(s)", r["reachable_reason"], where)
                else:
                    self.assertEqual(quirk, [], where)
                metrics = report["metrics"]
                expect_conn = metrics["conn"] if (evaluator, protocol) == ("general_llm", "reference") else 1.0
                self.assertEqual(metrics["conn"], expect_conn, where)
                for key in ("sg", "dp", "lo", "sso", "rem", "ea"):
                    self.assertEqual(metrics[key], 1.0, "%s %s" % (where, key))
                self.assertEqual(metrics["mape"], 0.0, where)
                if evaluator == "personalized":
                    self.assertEqual(metrics["pc"], 1.0, where)
                if evaluator == "diversity":
                    self.assertGreater(metrics["rd"], 0.0, where)
        return scores


MODES = {"": routing.ACCESS_WALK, routing.MODE_WALK: routing.ACCESS_WALK,
         routing.MODE_BIKE: routing.ACCESS_BIKE, routing.MODE_TAXI: routing.ACCESS_TAXI,
         routing.MODE_RIDE_HAILING: routing.ACCESS_TAXI}


def label_legs(net, code, label, by_name):
    """A label's legs [(ld_id, i, j)] from its line names and stations (ids, or
    names for the general LLM)."""
    legs, current = [], []
    pieces = []
    for item in label["station_sequence"] + [routing.TRANSFER]:
        if item == routing.TRANSFER:
            pieces.append(current)
            current = []
        else:
            current.append(item)
    for line, stations in zip(label["line_sequence"], pieces):
        ld = net.line_by_name[(code, line)]
        seen = [net.names[s] if by_name else net.ids[s] for s in ld.stops]
        starts = [i for i in range(len(seen)) if seen[i:i + len(stations)] == stations]
        if not starts:
            raise AssertionError("%s does not ride %s" % (stations, line))
        legs.append((ld.ld_id, starts[0], starts[0] + len(stations) - 1))
    return legs


class LabelJudgeMixin(object):
    """Every label is legal and optimal under its documented cost: its cost
    equals the least one a textbook Dijkstra (tests/route_oracle.py) finds over
    all legal itineraries; benchmark 3's second and third are the best routes
    riding none of the lines before them, within the documented factor of the
    first; origin and destination lie TRIP_KM apart."""

    def judge(self, net, row, label, prefs, by_name=False):
        prompt = json.loads(row["sft_prompt"])
        origin = tuple(float(v) for v in prompt["start"].split(","))
        dest = tuple(float(v) for v in prompt["end"].split(","))
        code = row["adcode"]
        district = next(d for d in net.districts if d.city.code == code)
        legs = label_legs(net, code, label, by_name)
        first = net.linedirs[legs[0][0]].stops[legs[0][1]]
        last = net.linedirs[legs[-1][0]].stops[legs[-1][2]]
        start = routing.Access(MODES[label["start_transfer_mode"]], net.dist_to(first, origin))
        end = routing.Access(MODES[label["end_transfer_mode"]], net.dist_to(last, dest))
        where = "%s %s" % (row["indexid"], label["line_sequence"])
        self.assertIsNone(oracle.illegal(net, legs, prefs), where)
        cost = oracle.itinerary_cost(net, legs, start, end, prefs)
        best = oracle.dijkstra_best(net, district, origin, dest, prefs)
        self.assertAlmostEqual(cost, best, places=6, msg=where)
        km = common.haversine_km(origin[0], origin[1], dest[0], dest[1])
        self.assertTrue(mb.TRIP_KM[0] <= km <= mb.TRIP_KM[1], "%s: %.2f km" % (where, km))
        self.assertNotEqual(first, last, where)
        return routing.Itinerary(net, origin, dest, legs, start, end)

    def assert_labels_optimal(self, network, bench):
        net = mb.load_network(network)
        judged = 0
        for _, filename in EVALUATORS:
            _, rows = read_rows(os.path.join(bench, filename))
            for row in rows:
                label = json.loads(row["sft_label"])
                if "first" in label:
                    prefs = routing.Prefs()
                    routes = []
                    for key in ("first", "second", "third"):
                        routes.append(self.judge(net, row, label[key], prefs))
                        prefs = prefs.without_lines(routes[-1].line_ids(net))
                    score, minutes = routing.expert_score(routes[0]), routes[0].minutes
                    for other in routes[1:]:
                        self.assertLessEqual(routing.expert_score(other), mb.ALTERNATIVE_FACTOR * score)
                        self.assertLessEqual(other.minutes, mb.ALTERNATIVE_FACTOR * minutes)
                else:
                    req = int(row["req_type"])
                    prefs = routing.prefs_for_req(req) if filename.startswith("benchmark2") \
                        else routing.Prefs()
                    self.judge(net, row, label, prefs, by_name=filename == "general_llm.csv")
                judged += 1
        return judged


class HelperTest(unittest.TestCase):
    def test_wait_from_headway(self):
        self.assertEqual(mb.wait_from_headway("8.0", routing.KIND_METRO), 4.0)
        self.assertEqual(mb.wait_from_headway("60", routing.KIND_BUS), 15.0)
        self.assertEqual(mb.wait_from_headway("0.5", routing.KIND_BUS), 1.0)
        self.assertEqual(mb.wait_from_headway("", routing.KIND_BUS), routing.WAIT_MIN[routing.KIND_BUS])
        self.assertEqual(mb.wait_from_headway(None, routing.KIND_METRO), 3.0)

    def test_fare_table(self):
        bands, step = mb.fare_table("2.9", routing.KIND_METRO)
        self.assertEqual(routing.fare_band(bands, step, 80.0), (2.9, float("inf")))
        bands, step = mb.fare_table("", routing.KIND_BUS)
        self.assertEqual(routing.fare_band(bands, step, 12.0), (3.0, 15.0))
        self.assertEqual(routing.fare_band(bands, step, 0.0), (2.0, 10.0))

    def test_plausible_access_text(self):
        self.assertEqual(mb.plausible_access_text("0.1公里", 0.1004), "111米")
        self.assertEqual(mb.plausible_access_text("300米", 0.2), "300米")
        self.assertEqual(mb.plausible_access_text("", 0.5), "")
        self.assertEqual(mb.plausible_access_text("2公里", 0.5), "550米")

    def test_resolve_station_and_names(self):
        net = routing.Network(1.0)
        city = mb.City("X", "0")
        for k, name in enumerate(("Alpha", "Beta", "Alpha")):
            net.add_stop("s%d" % k, name, 0.0, 0.01 * k, "0")
        line = routing.Line(0, city, routing.KIND_BUS, "1", [0, 1, 2], None)
        ld = routing.LineDir(0, line, "1(Alpha--Alpha)", [0, 1, 2], [0, 1, 2], [0, 1, 2], 5.0,
                             ((10.0, 2.0),), 5.0)
        net.add_linedir(ld)
        self.assertEqual(mb.resolve_station(net, ld, "Alpha"), 0)
        self.assertEqual(mb.resolve_station(net, ld, "Gamma"), None)
        ok = routing.make_route(net, (0.0, 0.0), (0.0, 0.01), [(0, 0, 1)], "walk", "walk")
        looped = routing.make_route(net, (0.0, 0.0), (0.0, 0.02), [(0, 1, 2)], "walk", "walk")
        self.assertTrue(mb.names_resolve(net, ok))
        self.assertFalse(mb.names_resolve(net, looped))   # "Alpha" resolves to the first stop


class SmallFeedNetworkTest(unittest.TestCase):
    """A network imported from a GTFS feed takes its times from the schedule."""

    def test_schedule_times_waits_and_links(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "net")
            done = run(IMPORTER, write_feed(tmp, BASE_FEED), "--out", out, "--city", "Test City")
            self.assertEqual(done.returncode, 0, done.stderr)
            net = mb.load_network(out)
        by_name = {ld.name: ld for ld in net.linedirs}
        metro = by_name["地铁1(Alpha--Gamma 地铁站)"]
        # hop_times.csv, not a speed: runs 2.5 and 2.75 min, dwell 0.25 min at B1
        self.assertEqual((metro.cumarr, metro.cumtime), ([0.0, 2.5, 5.5], [0.0, 2.75, 5.5]))
        self.assertEqual(metro.ride_minutes(0, 1), 2.5)          # not the dwell where it alights
        self.assertEqual(metro.ride_minutes(0, 2), 5.5)          # the dwell it sits through
        self.assertEqual(metro.wait_min, 15.0)                  # headway 60 min -> capped half
        self.assertEqual(metro.kind, routing.KIND_METRO)
        self.assertIs(metro.line, by_name["地铁1(Gamma 地铁站--Alpha)"].line)   # one route
        bus = by_name["Crosstown 号·线(Gamma 地·铁站--Delta)"]
        self.assertEqual(bus.kind, routing.KIND_BUS)
        index = net.stop_index()
        self.assertEqual(net.link_set[index["B1"]], {index["B2"]})
        self.assertEqual(net.transfer_min[(index["B1"], index["B2"])], 2.0)
        self.assertEqual(mb.satisfiable_req_types(net), ([2, 5, 7, 8], []))
        self.assertEqual(net.districts[0].city.name, "Test City")

    def test_no_trip_in_range_is_a_reported_shortfall(self):
        # Every stop within 1.2 km of every other: no origin and destination 2.5 km apart.
        files = dict(BASE_FEED)
        files["stops.txt"] = files["stops.txt"].replace("40.020", "40.006").replace("40.030", "40.009") \
            .replace("40.010", "40.003").replace("40.0101", "40.0031")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "net")
            done = run(IMPORTER, write_feed(tmp, files), "--out", out, "--city", "Tiny")
            self.assertEqual(done.returncode, 0, done.stderr)
            done = run(SCRIPT, "--network", out, "--out", os.path.join(tmp, "b"), "--samples", "2")
            # a failed run leaves none of its outputs (nor the folder it made)
            self.assertFalse(os.path.exists(os.path.join(tmp, "b")))
        # nothing written at all: exit 2 with one line
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr.count("\n"), 1)
        self.assertIn("no trip 2.5-13 km long with a label: no row written", done.stderr)
        self.assertIn("benchmark1_single_route.csv      0 rows,   0% change lines  (2 short: 6 rows found "
                      "no trip in 200 draws each; draws rejected: 1200 without an origin and destination "
                      "2.5-13 km apart, 0 without a fitting label)", done.stdout)

    def test_walking_range_is_below_the_trip_range(self):
        self.assertGreater(mb.TRIP_KM[0], routing.ACCESS_RANGE_KM[routing.ACCESS_WALK][1])

    def test_hop_table_and_scheduled_times(self):
        rows = [{"line_name": "L", "from_stop_id": "a", "to_stop_id": "b", "run_min": "4", "dwell_min": "1.5",
                 "pickup": "1", "drop_off": "0"},
                {"line_name": "L", "from_stop_id": "b", "to_stop_id": "c", "run_min": "3", "dwell_min": "",
                 "pickup": "0", "drop_off": "1"},
                {"line_name": "", "from_stop_id": "c", "to_stop_id": "d", "run_min": "2.5", "dwell_min": "",
                 "pickup": "", "drop_off": ""}]
        lines, transfers = mb.hop_minutes_table(rows)
        self.assertEqual(transfers, {("c", "d"): 2.5})
        departure, arrival, board, alight = mb.scheduled_times(lines["L"])
        self.assertEqual((departure, arrival), ([0.0, 5.5, 8.5], [0.0, 4.0, 8.5]))
        self.assertEqual((board, alight), ([True, False, False], [False, False, True]))
        self.assertEqual(mb.scheduled_times([]), ([0.0], [0.0], [False], [False]))
        self.assertEqual(mb.hop_minutes_table(None), ({}, {}))
        for bad in ({"run_min": "x"}, {"pickup": "yes"}, {"drop_off": ""}):
            with self.assertRaises(mb.NetworkError):
                mb.hop_minutes_table([dict(rows[0], **bad)])

    def test_draw_od_keeps_the_range(self):
        net = mb.load_network(DATA)
        district = net.districts[0]
        rng = routing.sub_rng(1, "test")
        drawn = [routing.draw_od(net, rng, district, 2.5, 13.0) for _ in range(40)]
        pairs = [od for od in drawn if od is not None]
        self.assertTrue(pairs)
        for origin, dest in pairs:
            self.assertTrue(2.5 <= common.haversine_km(origin[0], origin[1], dest[0], dest[1]) <= 13.0)
        lonely = routing.District(9, district.city, 0.0, 0.0)
        lonely.stops = district.stops[:1]
        lonely.coords = district.coords[:1]
        self.assertIsNone(routing.draw_od(net, rng, lonely, 2.5, 13.0))

    def test_zone_fare_table(self):
        text = json.dumps({"zones": ["1", "1", "2"], "fares": [[2.0, 3.0], [None, 2.0]]})
        self.assertEqual(mb.zone_fare_table(text, "L", 3), ([0, 0, 1], [[2.0, 3.0], [None, 2.0]]))
        self.assertIsNone(mb.zone_fare_table("", "L", 3))
        for bad in ("{", json.dumps({"zones": ["1"], "fares": [[1]]}),
                    json.dumps({"zones": ["1", "1", "2"], "fares": [[2.0, -1], [None, 2.0]]}),
                    json.dumps({"zones": ["1", "1", "2"], "fares": [[2.0]]})):
            with self.assertRaises(mb.NetworkError):
                mb.zone_fare_table(bad, "L", 3)

    def test_an_out_holding_a_benchmark_is_replaced_only_with_overwrite(self):
        # Issue 46.4: a second build into the same --out is refused (exit 2, one
        # line, nothing touched) unless --overwrite, as the evaluators do.
        names = [filename for _, filename in EVALUATORS] + ["network.json"]
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench")
            argv = ["--network", DATA, "--out", out, "--samples", "1"]
            status, _, err = evaluator_rows.run_in_process(mb.main, argv)
            self.assertEqual(status, 0, err)

            def contents():
                found = {}
                for name in names:
                    with open(os.path.join(out, name), "rb") as handle:
                        found[name] = handle.read()
                return found

            before = contents()
            status, stdout, err = evaluator_rows.run_in_process(mb.main, argv + ["--seed", "7"])
            self.assertEqual((status, stdout), (2, ""))
            self.assertEqual(err, "make_benchmark.py: --out %s already holds a benchmark (%s); "
                             "pass --overwrite to replace it, or choose another --out\n"
                             % (out, ", ".join(names)))
            self.assertEqual(contents(), before)
            os.remove(os.path.join(out, names[0]))
            status, _, err = evaluator_rows.run_in_process(mb.main, argv + ["--seed", "7"])
            self.assertEqual(status, 2)
            self.assertIn("already holds a benchmark (%s)" % ", ".join(names[1:]), err)
            status, _, err = evaluator_rows.run_in_process(mb.main, argv + ["--seed", "7", "--overwrite"])
            self.assertEqual(status, 0, err)
            after = contents()
            self.assertNotEqual(after[names[1]], before[names[1]])   # another seed's rows
            self.assertEqual(sorted(os.listdir(out)), sorted(names))
            # the network's own folder takes a benchmark beside the network
            net = os.path.join(tmp, "net")
            done = run(IMPORTER, write_feed(tmp, BASE_FEED), "--out", net, "--city", "T")
            self.assertEqual(done.returncode, 0, done.stderr)
            status, _, err = evaluator_rows.run_in_process(mb.main, ["--network", net, "--out", net,
                                                              "--samples", "1"])
            self.assertEqual(status, 0, err)

    def test_bad_network_folder_exits_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            done = run(SCRIPT, "--network", tmp, "--out", os.path.join(tmp, "o"), "--samples", "2")
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr.count("\n"), 1)
        self.assertIn("station_info.csv does not exist", done.stderr)


class DemoNetworkBenchmarkTest(SelfScoreMixin, LabelJudgeMixin, unittest.TestCase):
    """Built on the bundled demo network (make_demo.py's output)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "bench")
        cls.done = run(SCRIPT, "--network", DATA, "--out", cls.out, "--samples", "12")
        cls.en = os.path.join(cls.tmp.name, "bench_en")
        cls.done_en = run(SCRIPT, "--network", DATA, "--out", cls.en, "--samples", "4", "--lang", "en")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_layout(self):
        self.assertEqual(self.done.returncode, 0, self.done.stderr)
        for _, filename in EVALUATORS:
            header, rows = read_rows(os.path.join(self.out, filename))
            self.assertEqual(header, COLUMNS, filename)
            self.assertEqual(len(rows), 12, filename)
            self.assertEqual({r["generate_results"] for r in rows}, {""}, filename)
            self.assertTrue(all("JSON" in r["system_prompt"] for r in rows), filename)
            self.assertEqual(len({r["indexid"] for r in rows}), 12, filename)
            for r in rows:
                prompt = json.loads(r["sft_prompt"])
                self.assertIn(prompt["city"], ("北京", "深圳"))
                self.assertIn("怎么走", prompt["query"])
        _, rows = read_rows(os.path.join(self.out, "benchmark2_personalized.csv"))
        self.assertEqual([r["req_type"] for r in rows[:4]], ["2", "5", "7", "8"])
        _, rows = read_rows(os.path.join(self.out, "benchmark3_diversity.csv"))
        for r in rows:
            label = json.loads(r["sft_label"])
            self.assertEqual(sorted(label), ["first", "second", "third"])
            self.assertEqual(len({tuple(label[k]["line_sequence"]) for k in label}), 3)

    def test_english_prompts(self):
        self.assertEqual(self.done_en.returncode, 0, self.done_en.stderr)
        _, rows = read_rows(os.path.join(self.en, "benchmark2_personalized.csv"))
        self.assertTrue(rows[0]["system_prompt"].startswith("You are a public transport"))
        self.assertIn("How do I get from", json.loads(rows[0]["sft_prompt"])["query"])

    def test_english_benchmark_agrees_with_itself(self):
        # Its prompt asks for English access modes, and the evaluators read a
        # route written with them as the label written with the Chinese ones.
        self.assertEqual(self.done_en.returncode, 0, self.done_en.stderr)
        english = dict((mode, word) for word, mode in common.ENGLISH_ACCESS_MODES.items())
        for evaluator, filename in EVALUATORS:
            path = os.path.join(self.en, filename)
            _, rows = read_rows(path)
            with self.subTest(evaluator):
                self.assertIn('"start_transfer_mode": "walk|bike|taxi"', rows[0]["system_prompt"])
                self.assertNotIn(common.WALK, rows[0]["system_prompt"])
                predictions = os.path.join(self.tmp.name, "en-" + evaluator + ".jsonl")
                translated = 0
                with open(predictions, "w", encoding="utf-8") as handle:
                    for row in rows:
                        label = json.loads(row["sft_label"])
                        for route in (label.values() if evaluator == "diversity" else [label]):
                            for side in ("start_transfer_mode", "end_transfer_mode"):
                                if route.get(side) in english:
                                    route[side] = english[route[side]]
                                    translated += 1
                        handle.write(json.dumps({"indexid": row["indexid"],
                                                 "generate_results": label},
                                                ensure_ascii=False) + "\n")
                self.assertGreater(translated, 0)
                argv = ["--input", path, "--station_info", os.path.join(DATA, "station_info.csv"),
                        "--line_info", os.path.join(DATA, "line_info.csv")] \
                    if evaluator == "general_llm" else \
                    ["--input", path, "--station_info", os.path.join(DATA, "station_info.csv")]
                with tempfile.TemporaryDirectory() as out:
                    ours, records, _ = evaluator_rows.evaluate_to_files(
                        transitlm.evaluation.records.load_benchmark(evaluator),
                        argv + ["--predictions", predictions, "--workers", "1"], out)
                    labels, _, _ = evaluator_rows.evaluate_to_files(
                        transitlm.evaluation.records.load_benchmark(evaluator),
                        argv + ["--input_field", "sft_label", "--workers", "1"], out)
                self.assertFalse([r for r in records
                                  if "overlap.access_mode_mismatch" in r.get("failure_codes", [])])
                self.assertEqual(ours["metrics"], labels["metrics"])

    def test_deterministic(self):
        with tempfile.TemporaryDirectory() as again:
            done = run(SCRIPT, "--network", DATA, "--out", again, "--samples", "12")
            self.assertEqual(done.returncode, 0, done.stderr)
            for _, filename in EVALUATORS:
                with open(os.path.join(again, filename), "rb") as a, \
                        open(os.path.join(self.out, filename), "rb") as b:
                    self.assertEqual(a.read(), b.read(), filename)

    def test_same_bytes_for_any_workers(self):
        # self.out was built with the default (one worker per core)
        for workers in ("1", "3"):
            with tempfile.TemporaryDirectory() as again:
                done = run(SCRIPT, "--network", DATA, "--out", again, "--samples", "12",
                           "--workers", workers)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(done.stdout, self.done.stdout)
                for filename in mb.output_names():
                    with open(os.path.join(again, filename), "rb") as a, \
                            open(os.path.join(self.out, filename), "rb") as b:
                        self.assertEqual(a.read(), b.read(), (workers, filename))

    def test_labels_pass_their_own_benchmark(self):
        self.assert_labels_pass(DATA, self.out)

    def test_labels_are_optimal(self):
        self.assertEqual(self.assert_labels_optimal(DATA, self.out), 48)


class RowWorkersTest(unittest.TestCase):
    """Rows built ahead by workers are those of one process, even when a row
    finds no trip and benchmark 2's preferences move over the later rows."""

    def test_rows_that_find_no_trip(self):
        net = mb.load_network(DATA)
        real, lost = mb.build_row, {1, 2, 9}

        def some_rows_find_no_trip(net, seed, kind, task_id, row, lang, req_type, districts,
                                   draws=None, **options):
            if row in lost:
                draws["route"] = draws.get("route", 0) + 5
                return None
            return real(net, seed, kind, task_id, row, lang, req_type, districts, draws, **options)

        made = {}
        with mock.patch.object(mb, "build_row", some_rows_find_no_trip):
            for workers in (1, 3):
                with mb.RowMaker(net, 7, "zh", workers) as maker:
                    again = mock.patch.object(maker, "here", wraps=maker.here)
                    with again as here:
                        made[workers] = [mb.build_file(net, 7, kind, "1", 8, "zh", [2, 5, 7, 8], maker)
                                         for kind in ("b1", "b2")]
                    if workers > 1:         # the moved preferences were built again here
                        self.assertGreater(here.call_count, 0)
        self.assertEqual(made[1], made[3])
        with mb.RowMaker(net, 7, "zh", 2) as maker:
            progress = mock.Mock()
            rows, _ = mb.build_file(net, 7, "b1", "1", 8, "zh", [2, 5, 7, 8], maker, progress)
        self.assertEqual(progress.step.call_count, len(rows))    # a step per row written
        rows, figures = made[3][1]
        self.assertEqual([r[1] for r in rows], ["2", "5", "7", "8"] * 2)
        self.assertEqual((figures["no_trip"], figures["short"]), (3, 0))
        self.assertGreaterEqual(figures["no_label"], 3 * 5)


    def test_a_killed_worker_stops_the_run_with_a_message(self):
        # The out-of-memory killer, say: exit status 1, one line naming the
        # signal, nothing written.
        original = mb._row_in_worker

        def dies_past_row_5(task):          # (kind, task_id, row, req_type)
            if task[2] > 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(task)

        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(mb, "_row_in_worker", dies_past_row_5):
            out = os.path.join(tmp, "bench")
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                status = mb.main(["--network", DATA, "--out", out, "--samples", "20",
                                  "--workers", "2"])
            self.assertEqual(status, 1)
            self.assertRegex(err.getvalue(), r"^make_benchmark.py: worker process \d+ was killed by "
                                             r"signal 9 \(SIGKILL\) while building rows \(out of "
                                             r"memory\?\); nothing was written: run again, or with "
                                             r"--workers 1\n$")
            self.assertFalse(os.path.exists(out))


def label_with_prefix(label, prefix):
    """A benchmark 1-3 label with ``prefix`` before each stop id."""
    if "first" in label:
        return {key: label_with_prefix(route, prefix) for key, route in label.items()}
    return dict(label, station_sequence=[
        entry if entry == routing.TRANSFER else prefix + entry
        for entry in label["station_sequence"]])


class PrefixedNetworkTest(SelfScoreMixin, unittest.TestCase):
    """Issue 45.4: a network imported with --id_prefix builds the benchmark the
    unprefixed network builds, every stop id of its labels prefixed (the
    prompts, the general LLM's labels, which name stations, and everything
    else the same; only the row ids, made from the network's files, differ),
    and its labels pass the evaluators, as make_benchmark's labels do."""

    def assert_same_but_prefixed(self, plain, prefixed, prefix):
        """-> rows per benchmark file."""
        counts = {}
        for evaluator, filename in EVALUATORS:
            _, ours = read_rows(os.path.join(prefixed, filename))
            _, theirs = read_rows(os.path.join(plain, filename))
            self.assertEqual(len(ours), len(theirs), filename)
            for mine, other in zip(ours, theirs):
                label = json.loads(other["sft_label"])
                if evaluator != "general_llm":
                    label = label_with_prefix(label, prefix)
                self.assertEqual(json.loads(mine["sft_label"]), label, filename)
                self.assertNotEqual(mine["indexid"], other["indexid"])
                for column in COLUMNS:
                    if column not in ("sft_label", "indexid"):
                        self.assertEqual(mine[column], other[column], (filename, column))
            counts[evaluator] = len(ours)
        return counts

    def test_small_feed(self):
        with tempfile.TemporaryDirectory() as tmp:
            feed = write_feed(tmp, BASE_FEED)
            folders = {}
            for prefix in (None, "t1:"):
                net = os.path.join(tmp, "net-%s" % bool(prefix))
                bench = os.path.join(tmp, "bench-%s" % bool(prefix))
                status, _, err = evaluator_rows.run_in_process(gtfs_import.main, [
                    feed, "--out", net, "--city", "Test City"]
                    + (["--id_prefix", prefix] if prefix else []))
                self.assertEqual(status, 0, err)
                status, _, err = evaluator_rows.run_in_process(mb.main, [
                    "--network", net, "--out", bench, "--samples", "3"])
                self.assertEqual(status, 0, err)
                folders[prefix] = (net, bench)
            counts = self.assert_same_but_prefixed(folders[None][1], folders["t1:"][1], "t1:")
            # this network has no three routes riding distinct lines: no benchmark-3 row
            self.assertEqual(counts, {"single_route": 3, "personalized": 3, "diversity": 0,
                                      "general_llm": 3})
            self.assert_labels_pass(*folders["t1:"], evaluators=[
                (evaluator, filename) for evaluator, filename in EVALUATORS
                if counts[evaluator]])

    @unittest.skipUnless(os.path.isdir(SHARED_GTFS), "../shared/gtfs is absent")
    def test_shared_feeds(self):
        for name, prefix in sorted(real_feeds.PREFIXED.items()):
            with self.subTest(feed=name):
                if not real_feeds.available(name):
                    self.skipTest("%s is absent" % name)
                _, plain, _ = real_feeds.built(name, real_feeds.SAMPLES)
                network, bench, _ = real_feeds.built(name, real_feeds.SAMPLES, prefix)
                counts = self.assert_same_but_prefixed(plain, bench, prefix)
                self.assertEqual(set(counts.values()), {real_feeds.SAMPLES})
                self.assert_labels_pass(network, bench)


@unittest.skipUnless(os.path.isdir(SHARED_GTFS), "../shared/gtfs is absent")
class RealFeedBenchmarkTest(SelfScoreMixin, LabelJudgeMixin, unittest.TestCase):
    """On every shared feed: labels pass both protocols, are optimal, and keep
    the timetable's rules on the trips their legs ride."""

    def check(self, feed, samples, left_out):
        if not real_feeds.available(feed):
            self.skipTest("%s is absent" % feed)
        network, bench, stdout = real_feeds.built(feed, samples)
        if left_out is not None:
            self.assertIn("left out        req_type %s: the network has no %s line" % left_out, stdout)
            _, rows = read_rows(os.path.join(bench, "benchmark2_personalized.csv"))
            self.assertEqual(len(rows), samples)
            self.assertNotIn(str(left_out[0]), {r["req_type"] for r in rows})
        self.assert_labels_pass(network, bench)
        written = sum(len(read_rows(os.path.join(bench, f))[1]) for _, f in EVALUATORS)
        self.assertEqual(self.assert_labels_optimal(network, bench), written)
        if left_out is not None:
            self.assertEqual(written, 4 * samples)
        self.assert_timetable_kept(feed, network, bench)
        return network, bench

    def assert_timetable_kept(self, feed, network, bench):
        """The trips a label's leg rides (the feed's trips of the line's route with
        its stops and rules, as many as line_service.csv counts) let riders on
        where the leg boards and off where it alights."""
        trips = {}
        for route_id, calls in real_feeds.feed_trips(feed).values():
            seen = real_feeds.rider_calls(calls)
            key = (route_id, tuple(c[0] for c in seen))
            trips.setdefault(key, []).append(([c[1] for c in seen], [c[2] for c in seen]))
        _, service = read_rows(os.path.join(network, "line_service.csv"))
        service = {r["line_name"]: r for r in service}
        net = mb.load_network(network)
        legs = 0
        for _, filename in EVALUATORS:
            _, rows = read_rows(os.path.join(bench, filename))
            for row in rows:
                label = json.loads(row["sft_label"])
                for route in ([label[k] for k in ("first", "second", "third")] if "first" in label else [label]):
                    for ld_id, i, j in label_legs(net, row["adcode"], route, filename == "general_llm.csv"):
                        ld = net.linedirs[ld_id]
                        info = service[ld.name]
                        runs = [(b, a) for b, a in trips[(info["route_id"], tuple(net.ids[s] for s in ld.stops))]
                                if b[:-1] == ld.board[:-1] and a[1:] == ld.alight[1:]]
                        self.assertEqual(len(runs), int(info["trips"]), ld.name)
                        for board, alight in runs:
                            self.assertTrue(board[i] and alight[j], "%s %d..%d" % (ld.name, i, j))
                        legs += 1
        self.assertGreater(legs, 0)

    def test_nyc_subway(self):
        network, bench = self.check("nyc-subway.zip", 8, (5, "bus"))
        changes = 0
        for name in ("benchmark1_single_route.csv", "benchmark2_personalized.csv", "general_llm.csv"):
            _, rows = read_rows(os.path.join(bench, name))
            changes += sum(len(json.loads(r["sft_label"])["line_sequence"]) > 1 for r in rows)
        self.assertGreaterEqual(changes, 2, "labels should often change lines")

    def test_nyc_lirr(self):
        self.check("nyc-lirr.zip", 8, (5, "bus"))

    def test_caltrain(self):
        network, bench = self.check("caltrain.zip", 8, (5, "bus"))
        # zone fares per ride: every label's fare is one of the feed's fares or a sum of them
        _, rows = read_rows(os.path.join(bench, "benchmark1_single_route.csv"))
        fares = {float(json.loads(r["sft_label"])["total_fare"].rstrip(routing.UNIT_YUAN)) for r in rows}
        self.assertTrue(fares - {3.75}, fares)

    def test_cairns(self):
        self.check("cairns.zip", 8, (7, "subway"))

    def test_newport(self):
        self.check("newport.zip", 8, (7, "subway"))

    def test_other_feeds(self):
        for name in real_feeds.other_feeds():
            with self.subTest(feed=name):
                self.check(name, 4, None)


def feed_across_the_meridian(feed, out_zip):
    """A copy of a GTFS feed whose stops are moved east or west so that the
    180th meridian runs through the middle of them (longitudes kept within
    ±180)."""
    import zipfile
    with zipfile.ZipFile(feed) as source, zipfile.ZipFile(out_zip, "w") as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if os.path.basename(info.filename) == "stops.txt":
                rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
                column = rows[0].index("stop_lon")
                lngs = [float(r[column]) for r in rows[1:] if r[column]]
                shift = 180.0 - (min(lngs) + max(lngs)) / 2
                for row in rows[1:]:
                    if row[column]:
                        lng = float(row[column]) + shift
                        row[column] = "%.6f" % (lng - 360.0 if lng > 180.0 else lng)
                text = io.StringIO()
                csv.writer(text, lineterminator="\n").writerows(rows)
                data = text.getvalue().encode("utf-8")
            out.writestr(info.filename, data)


class AntimeridianTest(SelfScoreMixin, LabelJudgeMixin, unittest.TestCase):
    """Cairns' buses moved onto the 180th meridian: a trip's points are on the
    map (longitudes within ±180), stations across the meridian are in reach of
    a point (access and egress cross it), and every label passes and is
    optimal."""

    @classmethod
    def setUpClass(cls):
        feed = os.path.join(real_feeds.SHARED_GTFS, "cairns.zip")
        if not real_feeds.available("cairns.zip"):
            raise unittest.SkipTest("cairns.zip is absent")
        cls.tmp = tempfile.mkdtemp(prefix="transitlm-meridian-")
        moved = os.path.join(cls.tmp, "cairns-180.zip")
        feed_across_the_meridian(feed, moved)
        cls.network, cls.bench = os.path.join(cls.tmp, "net"), os.path.join(cls.tmp, "bench")
        for main, argv in ((gtfs_import.main, [moved, "--city", "Cairns", "--out", cls.network]),
                           (mb.main, ["--network", cls.network, "--out", cls.bench, "--samples", "12",
                                      "--workers", "1"])):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert main(argv) == 0, argv

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.tmp, True)

    def test_points_on_the_map_and_access_across(self):
        _, stations = read_rows(os.path.join(self.network, "station_info.csv"))
        east = {r["stop_id"]: float(r["coord_x"]) < 0 for r in stations}
        self.assertEqual(set(east.values()), {True, False})
        across = 0
        for _, filename in EVALUATORS:
            for row in read_rows(os.path.join(self.bench, filename))[1]:
                prompt = json.loads(row["sft_prompt"])
                ends = [float(prompt[k].split(",")[0]) for k in ("start", "end")]
                for lng in ends:
                    self.assertTrue(-180.0 <= lng <= 180.0, prompt)
                if filename == "general_llm.csv":
                    continue
                label = json.loads(row["sft_label"])
                for route in ([label[k] for k in ("first", "second", "third")]
                              if "first" in label else [label]):
                    stops = [s for s in route["station_sequence"] if s in east]
                    across += (east[stops[0]] != (ends[0] < 0)) + (east[stops[-1]] != (ends[1] < 0))
        self.assertGreater(across, 0, "no access or egress crosses the meridian")

    def test_labels_pass_and_are_optimal(self):
        self.assert_labels_pass(self.network, self.bench)
        self.assertGreater(self.assert_labels_optimal(self.network, self.bench), 0)


if __name__ == "__main__":
    unittest.main()
