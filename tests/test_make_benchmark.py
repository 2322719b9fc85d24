"""Tests for data/make_benchmark.py: network loading, labels, and every label
scored against itself by the four evaluators (demo network; MTA feeds when present)."""

import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "data")
SCRIPT = os.path.join(DATA, "make_benchmark.py")
IMPORTER = os.path.join(DATA, "import_gtfs.py")
SHARED_GTFS = os.path.join(REPO, "..", "shared", "gtfs")
sys.path.insert(0, DATA)
sys.path.insert(0, HERE)

import make_benchmark as mb  # noqa: E402
import routing  # noqa: E402
from test_gtfs import BASE_FEED, write_feed  # noqa: E402

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


def self_scores(network, bench, protocol):
    """benchmark file -> (report JSON, details records) of its labels scored against themselves."""
    out = {}
    for evaluator, filename in EVALUATORS:
        with tempfile.TemporaryDirectory() as tmp:
            report, details = os.path.join(tmp, "r.json"), os.path.join(tmp, "d.jsonl")
            args = ["--input", os.path.join(bench, filename), "--input_field", "sft_label",
                    "--station_info", os.path.join(network, "station_info.csv"),
                    "--protocol", protocol, "--json", report, "--details", details, "--quiet"]
            if evaluator == "general_llm":
                args += ["--line_info", os.path.join(network, "line_info.csv")]
            done = run(os.path.join(REPO, evaluator, "evaluate.py"), *args)
            if done.returncode != 0:
                raise AssertionError("%s failed: %s" % (evaluator, done.stderr))
            with open(report, encoding="utf-8") as handle:
                loaded = json.load(handle)
            with open(details, encoding="utf-8") as handle:
                records = [json.loads(line) for line in handle]
        out[evaluator] = (loaded, records)
    return out


class SelfScoreMixin(object):
    """Every label passes every check of its benchmark (general LLM under reference:
    only the published count quirk of one-line full station lists may fail)."""

    def assert_labels_pass(self, network, bench):
        for protocol in ("reference", "paper"):
            scores = self_scores(network, bench, protocol)
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
            done = run(IMPORTER, write_feed(tmp, BASE_FEED), "--out", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            net = mb.load_network(out)
        by_name = {ld.name: ld for ld in net.linedirs}
        metro = by_name["地铁1(Alpha--Gamma 地铁站)"]
        self.assertEqual(metro.cumtime, [0.0, 2.75, 5.5])       # hop_times.csv, not a speed
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

    def test_bad_network_folder_exits_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            done = run(SCRIPT, "--network", tmp, "--out", os.path.join(tmp, "o"), "--samples", "2")
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr.count("\n"), 1)
        self.assertIn("station_info.csv does not exist", done.stderr)


class DemoNetworkBenchmarkTest(SelfScoreMixin, unittest.TestCase):
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

    def test_deterministic(self):
        with tempfile.TemporaryDirectory() as again:
            done = run(SCRIPT, "--network", DATA, "--out", again, "--samples", "12")
            self.assertEqual(done.returncode, 0, done.stderr)
            for _, filename in EVALUATORS:
                with open(os.path.join(again, filename), "rb") as a, \
                        open(os.path.join(self.out, filename), "rb") as b:
                    self.assertEqual(a.read(), b.read(), filename)

    def test_labels_pass_their_own_benchmark(self):
        self.assert_labels_pass(DATA, self.out)


@unittest.skipUnless(os.path.isdir(SHARED_GTFS), "../shared/gtfs is absent")
class RealFeedBenchmarkTest(SelfScoreMixin, unittest.TestCase):
    def build(self, feed, samples):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        network, bench = os.path.join(tmp.name, "net"), os.path.join(tmp.name, "bench")
        done = run(IMPORTER, os.path.join(SHARED_GTFS, feed), "--out", network)
        self.assertEqual(done.returncode, 0, done.stderr)
        done = run(SCRIPT, "--network", network, "--out", bench, "--samples", str(samples))
        self.assertEqual(done.returncode, 0, done.stderr)
        return network, bench, done.stdout

    def check(self, feed):
        network, bench, stdout = self.build(feed, 16)
        # The MTA feeds are rail only: no bus line, so req_type 5 is left out and said so.
        self.assertIn("left out        req_type 5: the network has no bus line", stdout)
        _, rows = read_rows(os.path.join(bench, "benchmark2_personalized.csv"))
        self.assertEqual(len(rows), 16)
        self.assertNotIn("5", {r["req_type"] for r in rows})
        _, rows = read_rows(os.path.join(bench, "benchmark1_single_route.csv"))
        changes = sum(len(json.loads(r["sft_label"])["line_sequence"]) > 1 for r in rows)
        self.assertGreaterEqual(changes, 2, "labels should often change lines")
        self.assert_labels_pass(network, bench)

    def test_nyc_subway(self):
        self.check("nyc-subway.zip")

    def test_nyc_lirr(self):
        self.check("nyc-lirr.zip")


if __name__ == "__main__":
    unittest.main()
