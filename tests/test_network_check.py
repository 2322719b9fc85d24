"""A test file and a network that do not belong together are refused
(transitlm/evaluation/network_check.py, issue 39 point 1; the reward's binding,
transitlm/reward/binding.py, issue 38 point 5).

A benchmark is built from a small GTFS feed in a temporary folder (the
importer and data/make_benchmark.py, as a user runs them) and scored by every
tool with and without its station file: refused without it (exit 2, one line,
no outputs), accepted with it; a station file that lacks a few of the labels'
stations gives a warning in the text report, report.json and the page;
--allow_foreign_network scores anyway and run.json says so; make_benchmark's
network.json is read by every tool; prepare's rows carry the network and the
adapters use it, or refuse a row bound to another network."""

import csv
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from tests.support import REPO
from tests.support.services import ServerTestCase
from tests.support.evaluator_rows import run_evaluator, run_in_process
from tests.support.gtfs_feeds import write_feed
from tests.support.lane import Background
from tests.support.services import example_rows
from tests.support.gtfs_feeds import BASE_FEED
import common  # noqa: E402
from transitlm import api  # noqa: E402
from transitlm.evaluation import network_check  # noqa: E402
from transitlm.evaluation.catalog import load_benchmark  # noqa: E402
from transitlm.harness import cli as harness_cli  # noqa: E402
from transitlm.reward import binding, openrlhf, prepare, service, trl, verl  # noqa: E402
from transitlm.reward.scoring import DATA_ENV, LINE_ENV, STATION_ENV, RowDataError  # noqa: E402

DATA = os.path.join(REPO, "data")
STATIONS = os.path.join(DATA, "station_info.csv")
FILES = {"single_route": "benchmark1_single_route.csv",
         "personalized": "benchmark2_personalized.csv",
         "general_llm": "general_llm.csv"}
NO_NETWORK_ENV = {STATION_ENV: None, DATA_ENV: None, LINE_ENV: None}


def without_network_env():
    """The environment without the variables that name a station file."""
    environ = {key: value for key, value in os.environ.items() if key not in NO_NETWORK_ENV}
    return mock.patch.dict(os.environ, environ, clear=True)


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(REPO, script)] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def build_gtfs_benchmark():
    """A temporary folder holding net/ (a small GTFS feed imported), bench/ (a
    benchmark built on it) and bare/ (bench's files without network.json),
    made by the commands as a user runs them."""
    tmp = tempfile.TemporaryDirectory()
    root = tmp.name
    net, bench, bare = (os.path.join(root, name) for name in ("net", "bench", "bare"))
    done = run("data/import_gtfs.py", write_feed(root, BASE_FEED), "--out", net,
               "--city", "Springfield")
    assert done.returncode == 0, done.stderr
    done = run("data/make_benchmark.py", "--network", net, "--out", bench, "--samples", "3")
    assert done.returncode == 0, done.stderr
    os.mkdir(bare)
    for name in FILES.values():
        shutil.copy(os.path.join(bench, name), bare)
    return tmp


# A build of its own for each class below, as its setUpClass made them:
# commands run one after another, started as the module loads and made beside
# the suite (tests.support.Background).
BUILDS = {name: Background(build_gtfs_benchmark)
          for name in ("EvaluatorTest", "OtherToolsTest", "PrepareTest")}


class GtfsBenchmark(unittest.TestCase):
    """A network imported from a small GTFS feed, a benchmark built on it
    (``bench``, with network.json) and the same files without the record
    (``bare``)."""

    @classmethod
    def setUpClass(cls):
        build = BUILDS.pop(cls.__name__, None)
        cls.tmp = build.result() if build is not None else build_gtfs_benchmark()
        root = cls.tmp.name
        cls.net = os.path.join(root, "net")
        cls.bench = os.path.join(root, "bench")
        cls.bare = os.path.join(root, "bare")
        cls.stations = os.path.join(cls.net, "station_info.csv")
        cls.lines = os.path.join(cls.net, "line_info.csv")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.work = tempfile.TemporaryDirectory()
        self.addCleanup(self.work.cleanup)

    def path(self, *parts):
        return os.path.join(self.work.name, *parts)

    def evaluate(self, benchmark, *argv):
        return run_evaluator(load_benchmark(benchmark), list(argv) + ["--quiet"])

    def assertOneLine(self, stderr, *words):
        self.assertEqual(stderr.count("\n"), 1, stderr)
        for word in words:
            self.assertIn(word, stderr)


class EvaluatorTest(GtfsBenchmark):

    def test_refused_without_its_station_file(self):
        for benchmark, name in FILES.items():
            with self.subTest(benchmark):
                run_dir = self.path(benchmark)
                status, out, err = self.evaluate(
                    benchmark, "--input", os.path.join(self.bare, name), "--input_field",
                    "sft_label", "--out", run_dir, "--json", self.path(benchmark + ".json"))
                self.assertEqual(status, 2, err)
                self.assertOneLine(err, " label stations are in %s: is --station_info the "
                                   "network this file was built on?" % STATIONS,
                                   "--allow_foreign_network")
                self.assertRegex(err, r"error: 0 of \d+ label stations")
                self.assertEqual(out, "")
                self.assertFalse(os.path.exists(run_dir))
                self.assertEqual(os.listdir(self.work.name), [])

    def test_accepted_with_its_station_file(self):
        for benchmark, name in FILES.items():
            for folder in (self.bare, self.bench):
                with self.subTest(benchmark, folder=folder):
                    report = self.path("%s-%s.json" % (benchmark, len(folder)))
                    status, _, err = self.evaluate(
                        benchmark, "--input", os.path.join(folder, name), "--input_field",
                        "sft_label", "--station_info", self.stations, "--json", report)
                    self.assertEqual(status, 0, err)
                    with open(report, encoding="utf-8") as handle:
                        report = json.load(handle)
                    self.assertEqual(report["warnings"], [])
                    check = report["inputs"]["network_check"]
                    self.assertEqual(check["level"], "match")
                    self.assertGreater(check["label_stations"], 0)
                    self.assertEqual(check["in_station_file"], check["label_stations"])

    def test_the_network_record_names_the_station_file(self):
        # The labels' stations are all in this station file, but it is not the
        # file the benchmark was built on (one stop more): network.json says so.
        other = self.path("station_info.csv")
        shutil.copy(self.stations, other)
        with open(other, "a", encoding="utf-8") as handle:
            handle.write('ZZ,0,-73.0,40.5,"[]",Zulu\n')
        shutil.copy(self.lines, self.path("line_info.csv"))
        test_file = os.path.join(self.bench, FILES["single_route"])
        status, _, err = self.evaluate("single_route", "--input", test_file,
                                       "--station_info", other)
        self.assertEqual(status, 2, err)
        self.assertOneLine(err, os.path.join(self.bench, "network.json"),
                           "built on the station file %s" % self.stations,
                           "give --station_info %s" % self.stations)
        # Without the record the same station file passes: it holds every station.
        status, _, err = self.evaluate("single_route", "--input",
                                       os.path.join(self.bare, FILES["single_route"]),
                                       "--station_info", other)
        self.assertEqual(status, 0, err)
        # Allowed: scored, and said.
        status, out, err = self.evaluate("single_route", "--input", test_file,
                                         "--station_info", other, "--allow_foreign_network")
        self.assertEqual(status, 0, err)
        self.assertIn("WARNING: --allow_foreign_network given: %s says"
                      % os.path.join(self.bench, "network.json"), out)

    def test_a_station_file_changed_in_place_is_said_to_have_changed(self):
        # Issue 46.4: the user gives the very path network.json names, but the
        # file there changed since the benchmark was built (a stop added): the
        # message says so instead of asking for the path already given.
        net, bench = self.path("net"), self.path("bench")
        shutil.copytree(self.net, net)
        shutil.copytree(self.bench, bench)
        stations = os.path.join(net, "station_info.csv")
        with open(os.path.join(bench, "network.json"), "w", encoding="utf-8") as handle:
            handle.write(network_check.network_record(stations, os.path.join(net, "line_info.csv"),
                                                      net))
        with open(stations, "a", encoding="utf-8") as handle:
            handle.write('ZZ,0,-73.0,40.5,"[]",Zulu\n')
        run_dir = self.path("run")
        status, out, err = self.evaluate("single_route", "--input",
                                         os.path.join(bench, FILES["single_route"]),
                                         "--station_info", stations, "--out", run_dir)
        self.assertEqual((status, out), (2, ""), err)
        self.assertOneLine(err, "built on the station file %s" % stations,
                           "the file at that path has changed since the benchmark was built",
                           "--allow_foreign_network")
        self.assertNotIn("give --station_info", err)
        self.assertFalse(os.path.exists(run_dir))

    def test_a_release_file_on_another_network_scores_only_when_allowed(self):
        run_dir = self.path("run")
        argv = ["--station_info", self.stations, "--out", run_dir]
        status, _, err = self.evaluate("diversity", *argv)
        self.assertEqual(status, 2, err)
        self.assertOneLine(err, "0 of ", " label stations are in %s" % self.stations)
        self.assertFalse(os.path.exists(run_dir))
        status, _, err = self.evaluate("diversity", *(argv + ["--allow_foreign_network"]))
        self.assertEqual(status, 0, err)
        with open(os.path.join(run_dir, "report.json"), encoding="utf-8") as handle:
            report = json.load(handle)
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
            run_record = json.load(handle)
        [warning] = [w for w in report["warnings"] if "label stations" in w]
        self.assertTrue(warning.startswith("--allow_foreign_network given: 0 of "), warning)
        self.assertEqual(run_record["network_check"]["allowed"], True)
        self.assertEqual(run_record["network_check"]["level"], "foreign")
        for name in ("report.txt", "report.html"):
            with open(os.path.join(run_dir, name), encoding="utf-8") as handle:
                self.assertIn("--allow_foreign_network given: 0 of ", handle.read(), name)

    def test_some_stations_missing_is_a_warning_everywhere(self):
        # The bundled network without one stop that two labels of benchmark 1 use.
        with open(STATIONS, encoding="utf-8", newline="") as handle:
            lines = handle.read().splitlines(True)
        stop = "bus-100027"
        kept = [line for line in lines if not line.startswith(stop + ",")]
        self.assertEqual(len(kept), len(lines) - 1)
        partial = self.path("partial.csv")
        with open(partial, "w", encoding="utf-8", newline="") as handle:
            handle.writelines(kept)
        run_dir = self.path("run")
        status, out, err = self.evaluate("single_route", "--station_info", partial,
                                         "--out", run_dir)
        self.assertEqual(status, 0, err)
        with open(os.path.join(run_dir, "report.json"), encoding="utf-8") as handle:
            report = json.load(handle)
        uses = sum(1 for row in example_rows("single_route")
                   if stop in json.loads(row["sft_label"])["station_sequence"])
        self.assertGreater(uses, 1)          # counted once however many labels name it
        [warning] = report["warnings"]
        self.assertRegex(warning, r"^1 of \d+ label stations are not in %s" % partial)
        self.assertEqual(report["inputs"]["network_check"]["level"], "partial")
        self.assertIn("WARNING: " + warning, out)
        for name in ("report.txt", "report.html"):
            with open(os.path.join(run_dir, name), encoding="utf-8") as handle:
                self.assertIn(warning, handle.read(), name)

    def test_the_python_api(self):
        test_file = os.path.join(self.bare, FILES["single_route"])
        with self.assertRaises(common.InputError) as caught:
            api.evaluate("single_route", input=test_file, input_field="sft_label")
        self.assertIn("allow_foreign_network= overrides this", str(caught.exception))
        with open(test_file, encoding="utf-8", newline="") as handle:
            rows = [dict(row, generate_results=row["sft_label"])
                    for row in csv.DictReader(handle)]
        with self.assertRaises(common.InputError):
            api.evaluate("single_route", rows=rows)
        report, records = api.evaluate("single_route", rows=rows, allow_foreign_network=True,
                                       out=self.path("run"))
        self.assertEqual(len(records), len(rows))
        self.assertTrue(report["warnings"][-1].startswith("allow_foreign_network= given: "))
        with open(self.path("run", "run.json"), encoding="utf-8") as handle:
            self.assertTrue(json.load(handle)["network_check"]["allowed"])
        report, _ = api.evaluate("single_route", rows=rows, station_info=self.stations)
        self.assertEqual(report["warnings"], [])


class OtherToolsTest(GtfsBenchmark):

    def test_generate_evaluate_refuses_before_asking(self):
        test_file = os.path.join(self.bare, FILES["general_llm"])
        out = self.path("answers.jsonl")
        argv = ["generate.py", "--input", test_file, "--api_url", "http://127.0.0.1:9/v1",
                "--model", "m", "--out", out, "--evaluate", "--dry_run"]
        done = run(*argv)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertOneLine(done.stderr, "--evaluate: 0 of ", "label stations are in %s"
                           % STATIONS)
        self.assertFalse(os.path.exists(out))
        done = run(*(argv + ["--station_info", self.stations]))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("label stations", done.stderr)

    def test_generate_passes_the_flag_to_the_evaluator(self):
        from transitlm.generate.cli import build_parser, evaluator_command
        args = build_parser().parse_args(["--input", "t.csv", "--api_url", "http://h/v1",
                                          "--model", "m", "--out", "o.jsonl", "--evaluate",
                                          "--allow_foreign_network"])
        self.assertIn("--allow_foreign_network",
                      evaluator_command("single_route", "t.csv", "o.jsonl", "run", args))
        args.allow_foreign_network = False
        self.assertNotIn("--allow_foreign_network",
                         evaluator_command("single_route", "t.csv", "o.jsonl", "run", args))

    def test_harness_lm_eval(self):
        test_file = os.path.join(self.bare, FILES["personalized"])
        argv = ["lm-eval", "--input", test_file, "--out", self.path("tasks")]
        status, out, err = run_in_process(harness_cli.main, argv)
        self.assertEqual(status, 2, err)
        self.assertOneLine(err, "0 of ", "label stations are in %s" % STATIONS)
        self.assertFalse(os.path.exists(self.path("tasks")))
        status, out, err = run_in_process(harness_cli.main,
                                          argv + ["--station_info", self.stations])
        self.assertEqual(status, 0, err)
        self.assertNotIn("WARNING", out)
        status, out, err = run_in_process(harness_cli.main,
                                          argv + ["--allow_foreign_network", "--overwrite"])
        self.assertEqual(status, 0, err)
        self.assertIn("WARNING: --allow_foreign_network given: 0 of ", out)

    def test_the_route_eval_service_refuses_two_networks_files(self):
        from general_llm import server
        status, _, err = run_in_process(server.main, [
            "--station_info", self.stations, "--line_info", os.path.join(DATA, "line_info.csv"),
            "--port", "0"])
        self.assertEqual(status, 2, err)
        self.assertOneLine(err, "0 of 280 stop ids of line file ", "are in %s" % self.stations)


class PrepareTest(GtfsBenchmark):

    def prepared(self, source, layout="trl", **options):
        out = self.path("%s.%s.jsonl" % (os.path.basename(source), layout))
        with without_network_env():
            preparer = prepare.prepare(source, layout, out, **options)
        with open(out, encoding="utf-8") as handle:
            return preparer, [json.loads(line) for line in handle]

    def test_refused_without_its_station_file(self):
        source = os.path.join(self.bare, FILES["single_route"])
        out = self.path("rows.jsonl")
        status, _, err = run_in_process(
            __import__("transitlm.reward.cli", fromlist=["main"]).main,
            ["prepare", "--input", source, "--format", "verl", "--out", out])
        self.assertEqual(status, 2, err)
        self.assertOneLine(err, "0 of ", "label stations are in %s" % STATIONS)
        self.assertFalse(os.path.exists(out))
        # network.json beside the file names its network, whatever the stations say
        other = self.path("station_info.csv")
        shutil.copy(self.stations, other)
        with open(other, "a", encoding="utf-8") as handle:
            handle.write('ZZ,0,-73.0,40.5,"[]",Zulu\n')
        with self.assertRaises(common.InputError) as caught:
            self.prepared(os.path.join(self.bench, FILES["single_route"]), station_info=other)
        self.assertIn("network.json says", str(caught.exception))

    def test_rows_carry_their_network_and_the_labels_that_pass(self):
        source = os.path.join(self.bench, FILES["single_route"])
        preparer, rows = self.prepared(source, station_info=self.stations)
        self.assertEqual((preparer.network.passing, preparer.network.labels), (3, 3))
        digest = network_check.cached_sha256(self.stations)
        for row in rows:
            self.assertEqual(row[binding.STATION_SHA], digest)
            self.assertEqual(row[binding.STATION_PATH], os.path.abspath(self.stations))
            self.assertEqual(row[binding.LINE_SHA], network_check.cached_sha256(self.lines))
        for layout in ("verl", "openrlhf"):
            _, lines = self.prepared(source, layout, station_info=self.stations)
            text = (lines[0]["reward_model"]["ground_truth"] if layout == "verl"
                    else lines[0]["label"])
            self.assertEqual(json.loads(text)[binding.STATION_SHA], digest)

    def test_general_llm_labels_under_each_protocol(self):
        source = os.path.join(DATA, "general_llm_example.csv")
        for protocol, passing in (("reference", 28), ("paper", 34)):
            preparer, _ = self.prepared(source, protocol=protocol)
            self.assertEqual((preparer.network.passing, preparer.network.labels),
                             (passing, 34))
            self.assertIn("  %d of 34 labels pass every check of their benchmark under the %s "
                          "protocol (docs/reward.md)" % (passing, protocol),
                          prepare.summary_lines(preparer, "x.jsonl"))

    def test_the_adapters_use_the_rows_network_or_refuse_another(self):
        source = os.path.join(self.bench, FILES["single_route"])
        _, rows = self.prepared(source, station_info=self.stations)
        columns = {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}
        labels = columns["sft_label"]
        truths = [json.dumps({k: v for k, v in row.items() if k != "prompt"})
                  for row in rows]
        with without_network_env():
            # None configured: the row's own station file
            self.assertEqual(trl.route_reward(completions=labels, **columns), [1.0] * 3)
            self.assertEqual(verl.compute_score("transitlm/single_route", labels[0],
                                                truths[0])["score"], 1.0)
            self.assertEqual(openrlhf.reward_func(labels, [""] * 3, truths)["rewards"],
                             [1.0] * 3)
            # Another network configured: refused, naming both files
            with self.assertRaises(RowDataError) as caught:
                verl.compute_score("transitlm/single_route", labels[0], truths[0],
                                   station_info=STATIONS)
            self.assertIn("prepared on the station file %s" % os.path.abspath(self.stations),
                          str(caught.exception))
            with self.assertRaises(RowDataError):
                openrlhf.reward_func(labels, [""] * 3, truths, station_info=STATIONS)
            with self.assertRaises(RowDataError):
                trl.make_reward(station_info=STATIONS)(completions=labels, **columns)
            # Its own file, configured: scored
            self.assertEqual(verl.compute_score("transitlm/single_route", labels[0], truths[0],
                                                station_info=self.stations)["score"], 1.0)
            # The row's file gone: refused, not scored on the bundled network
            moved = json.loads(truths[0])
            moved[binding.STATION_PATH] = self.path("gone", "station_info.csv")
            with self.assertRaises(RowDataError) as caught:
                verl.compute_score("transitlm/single_route", labels[0], json.dumps(moved))
            self.assertIn("which is not here", str(caught.exception))
        with mock.patch.dict(os.environ, {STATION_ENV: STATIONS}):
            with self.assertRaises(RowDataError):
                verl.compute_score("transitlm/single_route", labels[0], truths[0])


class ServiceTest(ServerTestCase):
    """reward.py serve on the bundled network: a row bound to another is a 422."""

    def make_server(self):
        self.options = service.checked_settings(station_info=STATIONS)
        return service.make_server(self.options, "127.0.0.1", 0, log=self.log.append)

    def test_a_row_of_another_network_is_a_422(self):
        row = dict(example_rows("single_route")[0], task_id="benchmark1-train")
        good = {key: row[key] for key in ("index_id", "task_id", "sft_prompt", "sft_label")}
        good.update(binding.row_fields(STATIONS))
        other = dict(good, **{binding.STATION_SHA: "0" * 64})
        body = {"query": [row["sft_label"]] * 2, "prompts": [""] * 2,
                "labels": [json.dumps(good), json.dumps(other)]}
        status, _, answer = self.request("POST", service.REWARD_PATH, body)
        self.assertEqual(status, 422, answer)
        self.assertIn("labels[1]: the row was prepared on the station file", answer["error"])
        body["labels"][1] = body["labels"][0]
        status, _, answer = self.request("POST", service.REWARD_PATH, body)
        self.assertEqual((status, answer["rewards"]), (200, [1.0, 1.0]))


class CheckTest(unittest.TestCase):
    """The check itself."""

    def test_verdicts(self):
        self.assertEqual(network_check.station_verdict(0, 0, "s.csv").level, "match")
        self.assertEqual(network_check.station_verdict(10, 10, "s.csv").level, "match")
        self.assertEqual(network_check.station_verdict(9, 10, "s.csv").level, "partial")
        self.assertEqual(network_check.station_verdict(5, 10, "s.csv").level, "partial")
        self.assertEqual(network_check.station_verdict(4, 10, "s.csv").level, "foreign")
        verdict = network_check.station_verdict(0, 412, "data/station_info.csv")
        self.assertEqual(verdict.reason, "0 of 412 label stations are in data/station_info.csv: "
                         "is --station_info the network this file was built on?")
        with self.assertRaises(common.InputError):
            network_check.enforce(verdict, False)
        self.assertEqual(network_check.enforce(verdict, True),
                         ["--allow_foreign_network given: " + verdict.reason])

    def test_names_match_by_the_evaluators_rules(self):
        names = network_check.NameIndex(["人民广场", "西江大道", "A"])
        self.assertIn("人民广场", names)
        self.assertIn("西江大道", names)
        # bigram Jaccard at least MIN_STATION_SIMILARITY (0.4): 2 of 4 bigrams
        self.assertIn("人民广场站", names)
        self.assertGreaterEqual(common.bigram_jaccard("人民广场站", "人民广场"),
                                common.MIN_STATION_SIMILARITY)
        self.assertLess(common.bigram_jaccard("人民公园", "人民广场"),
                        common.MIN_STATION_SIMILARITY)
        self.assertNotIn("人民公园", names)
        self.assertIn("A", names)
        self.assertNotIn("B", names)

    def test_names_found_are_those_the_rule_matches(self):
        # Short names included: the rule compares characters, not bigrams, when
        # either side has fewer than two (common.bigram_jaccard).
        rng = random.Random(5)
        alphabet = "人民广场西江大道AB站"
        names = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
                 for _ in range(200)]
        index = network_check.NameIndex(names)
        for _ in range(2000):
            query = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
            index.fuzzy_left = 1
            expected = query in names or any(
                common.bigram_jaccard(query, name) >= common.MIN_STATION_SIMILARITY
                for name in names)
            self.assertEqual(query in index, expected, query)

    def test_worker_sets_merge_into_the_parents(self):
        # A worker's tally comes back as a dict; its station set joins the parent's.
        from transitlm.evaluation.engine import Context, Options
        context = Context(Options(load_benchmark("single_route")), None, None)
        stations = network_check.LabelStations(common.StationNetwork.from_dict(
            {"a": (0, 0, ["b"]), "b": (0, 0, [])}), tally=context)
        stations.add({"station_sequence": ["a", "x"]})
        for key, amount in {network_check.TALLY_STATIONS: {"b", "y", "【换乘】"}}.items():
            context.count(key, amount)
        seen = context.tally.pop(network_check.TALLY_STATIONS)
        self.assertEqual(stations.counts(seen), (2, 4))

    def test_similarity_matching_is_bounded(self):
        with mock.patch.object(network_check, "FUZZY_LIMIT", 1):
            names = network_check.NameIndex(["人民广场", "西江大道"])
            self.assertIn("人民广场站", names)           # by similarity: the one allowed
            self.assertIn("西江大道", names)             # exact names are always matched
            self.assertNotIn("西江大道站", names)        # not looked at: counted missing
            self.assertEqual(names.unsure, 1)

    def test_line_file_stop_ids_with_or_without_the_prefix(self):
        # as the route-eval check looks them up: as they are, else with "bus-"
        network = common.StationNetwork.from_dict({"bus-1": (0, 0, []), "bus-2": (0, 0, [])})
        self.assertEqual(network_check.line_file_verdict(["1", "bus-2"], network, "l").level,
                         "match")
        self.assertEqual(network_check.line_file_verdict(["1", "x", "y"], network, "l").level,
                         "foreign")

    def test_label_entries(self):
        route = {"station_sequence": ["a", "【换乘】", "a ", "b", ""]}
        self.assertEqual(network_check.label_entries(route), {"a", "b"})
        self.assertEqual(network_check.label_entries({"first": route, "second": "x",
                                                      "third": {"station_sequence": ["c"]}}),
                         {"a", "b", "c"})
        self.assertEqual(network_check.label_entries([route]), set())
        self.assertEqual(network_check.label_entries({"station_sequence": "ab"}), set())

    def test_the_record_says_what_became_of_the_file_it_names(self):
        # Issue 46.4: network.json names the station file a benchmark was
        # built on; when the file given differs, the message says why -- the
        # user gave another file, or the file at that path changed since.
        with tempfile.TemporaryDirectory() as tmp:
            built_on, other = os.path.join(tmp, "built_on.csv"), os.path.join(tmp, "other.csv")
            for path, text in ((built_on, "a\n"), (other, "b\n")):
                with open(path, "w") as handle:
                    handle.write(text)
            test_file = os.path.join(tmp, "b1.csv")
            with open(os.path.join(tmp, network_check.NETWORK_RECORD), "w") as handle:
                handle.write(network_check.network_record(built_on))
            sha = network_check.cached_sha256

            def reason(given):
                verdict = network_check.record_verdict(test_file, sha(given))
                self.assertEqual(verdict.level, "foreign")
                self.assertNotIn("\n", verdict.reason)
                return verdict.reason

            self.assertEqual(network_check.record_verdict(test_file, sha(built_on)).level,
                             "match")
            # another file given; the one built on is still there, unchanged
            self.assertTrue(reason(other).endswith(
                "not on the one given (SHA-256 %s): give --station_info %s"
                % (sha(other)[:12], built_on)))
            original = sha(built_on)
            # the file at the recorded path changed, and it is the one given
            with open(built_on, "a") as handle:
                handle.write("c\n")
            changed = reason(built_on)
            self.assertIn("was built on the station file %s (SHA-256 %s); the file at that "
                          "path has changed since the benchmark was built (SHA-256 now %s)"
                          % (built_on, original[:12], sha(built_on)[:12]), changed)
            self.assertNotIn("give --station_info", changed)
            # another file given, and the recorded one changed too
            both = reason(other)
            self.assertIn("not on the one given (SHA-256 %s), and the file at that path has "
                          "changed since the benchmark was built" % sha(other)[:12], both)
            self.assertNotIn("give --station_info %s" % built_on, both)
            # the recorded file is gone
            os.remove(built_on)
            self.assertIn("which is no longer there", reason(other))

    def test_a_release_record_names_its_files_beside_it(self):
        # make_dataset.py's network.json names the files by their names in
        # its own folder: the same bytes wherever the folder is built, and
        # read against that folder wherever it is moved.
        with tempfile.TemporaryDirectory() as tmp:
            records = []
            for name in ("built", "elsewhere"):
                folder = os.path.join(tmp, name)
                os.mkdir(folder)
                station = os.path.join(folder, "transit-lm-station-info.csv")
                with open(station, "w") as handle:
                    handle.write("a\n")
                records.append(network_check.network_record(station, beside=True))
            self.assertEqual(records[0], records[1])
            self.assertEqual(json.loads(records[0])["station_info"]["path"],
                             "transit-lm-station-info.csv")
            moved = os.path.join(tmp, "moved")
            os.rename(os.path.join(tmp, "built"), moved)
            with open(os.path.join(moved, network_check.NETWORK_RECORD), "w") as handle:
                handle.write(records[0])
            test_file = os.path.join(moved, "b1.csv")
            station = os.path.join(moved, "transit-lm-station-info.csv")
            record = network_check.read_record(test_file)
            self.assertEqual(record["station_info"]["path"], station)
            sha = network_check.cached_sha256
            self.assertEqual(network_check.record_verdict(test_file, sha(station)).level, "match")
            other = os.path.join(tmp, "other.csv")
            with open(other, "w") as handle:
                handle.write("b\n")
            verdict = network_check.record_verdict(test_file, sha(other))
            self.assertEqual(verdict.level, "foreign")
            self.assertIn("give --station_info %s" % station, verdict.reason)

    def test_hashes_are_computed_once_per_file_state(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "f.csv")
            with open(path, "w") as handle:
                handle.write("a\n")
            first = network_check.cached_sha256(path)
            with mock.patch("hashlib.sha256", side_effect=AssertionError("hashed again")):
                self.assertEqual(network_check.cached_sha256(path), first)
            with open(path, "a") as handle:
                handle.write("bb\n")
            self.assertNotEqual(network_check.cached_sha256(path), first)


if __name__ == "__main__":
    unittest.main()
