"""The release's files (transitlm/evaluation/catalog.py) and the tools on a release
folder: every file is recognised by its exact name -- the general LLM's
``transit-lm-general-benchmark1-test.csv`` never as benchmark 1, a train file
as a train file -- and the evaluators, generate.py, reward.py prepare and
harness.py lm-eval work on a folder laid out as the release (and as
data/make_dataset.py writes it) with TRANSITLM_DATA=FOLDER or --station_info;
harness.py lm-eval --data takes its four test files in one call.

The folder (tests/support/release_folders.py) is the bundled examples in the
release's names and columns, on joint station and line files that differ
from the bundled ones, with the network.json that names them."""

import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

from tests.support import REPO
from tests.support.evaluator_rows import run_evaluator, run_in_process
from tests.support.services import StandIn, answers_from, read_lines, run_generate, run_reward
from tests.support.release_folders import (
    LINE_FILE, SFT_FILES, STATION_FILE, TEST_FILES, make_release_folder)
from common import file_sha256
from transitlm.evaluation import catalog
from transitlm.generate import runner
from transitlm.reward.scoring import benchmark_of

# What each SFT file of the release is.
EXPECTED = {"transit-lm-benchmark1-train.csv": ("single_route", "train"),
            "transit-lm-benchmark1-test.csv": ("single_route", "test"),
            "transit-lm-benchmark2-train.csv": ("personalized", "train"),
            "transit-lm-benchmark2-test.csv": ("personalized", "test"),
            "transit-lm-benchmark3-train.csv": ("diversity", "train"),
            "transit-lm-benchmark3-test.csv": ("diversity", "test"),
            "transit-lm-general-benchmark1-test.csv": ("general_llm", "test")}


class ReleaseNamesTest(unittest.TestCase):
    """catalog: the release's names, recognised exactly."""

    def test_every_release_file_is_what_its_name_says(self):
        self.assertEqual(catalog.RELEASE_FILES, EXPECTED)
        self.assertEqual(catalog.RELEASE_TEST_FILES, tuple(TEST_FILES.values()))
        self.assertEqual(catalog.RELEASE_STATION_FILE, STATION_FILE)
        self.assertEqual(catalog.RELEASE_LINE_FILE, LINE_FILE)
        for name, task_id, _ in SFT_FILES:
            benchmark, split = EXPECTED[name]
            for spelled in (name, name.upper(), "/some/where/" + name, "rel/" + name):
                self.assertEqual(catalog.release_file(spelled), (benchmark, split), spelled)
                self.assertEqual(catalog.benchmark_of_task(spelled), benchmark, spelled)
            self.assertEqual(catalog.benchmark_of_task(task_id), benchmark, task_id)
            info = catalog.benchmark_info(benchmark)
            self.assertEqual((info.release_task_id(split), info.release_file(split)),
                             (task_id, name))

    def test_the_general_benchmark_is_never_benchmark_1(self):
        # It holds "benchmark1"; a substring match took it for benchmark 1.
        for text in ("transit-lm-general-benchmark1-test.csv", "general-benchmark1-test",
                     "GENERAL-BENCHMARK1-TEST", "/data/transit-lm-general-benchmark1-test.csv",
                     "transit-lm-general-benchmark1-test.head100.csv",
                     "general_benchmark1_test.csv", "transit-lm-general-benchmark1-train.csv"):
            self.assertEqual(catalog.benchmark_of_task(text), "general_llm", text)
        self.assertEqual(catalog.release_file("transit-lm-general-benchmark1-test.csv"),
                         ("general_llm", "test"))
        # the release has no general train file: that name is no release file
        self.assertIsNone(catalog.release_file("transit-lm-general-benchmark1-train.csv"))

    def test_only_the_exact_names_are_release_files(self):
        for name in ("transit-lm-benchmark1-test.csv.bak", "my-transit-lm-benchmark1-test.csv",
                     "transit-lm-benchmark1-test.jsonl", "transit-lm-benchmark4-test.csv",
                     "transit-lm-benchmark1-dev.csv", "benchmark1_single_route.csv", "", None):
            self.assertIsNone(catalog.release_file(name), name)

    def test_other_names_by_whole_words(self):
        for text, expected in (
                # make_benchmark.py's files and task ids, the bundled examples
                ("benchmark1_single_route.csv", "single_route"), ("1", "single_route"),
                ("benchmark2_personalized.csv", "personalized"), ("2", "personalized"),
                ("benchmark3_diversity.csv", "diversity"), ("3", "diversity"),
                ("general_llm.csv", "general_llm"), ("general", "general_llm"),
                ("general_llm_example.csv", "general_llm"),
                # verl's data_source, the evaluators' names, a user's names
                ("transitlm/general_llm", "general_llm"), ("transitlm/diversity", "diversity"),
                ("personalized", "personalized"), ("my_diversity_rows.csv", "diversity"),
                ("BENCHMARK1.csv", "single_route"), ("transit-lm-benchmark2-test.part1.csv",
                                                     "personalized"),
                # none: no word, part of a longer word, two benchmarks' words
                ("t.csv", None), ("benchmark10.csv", None), ("generally.csv", None),
                ("rebenchmark1.csv", None), ("benchmark1_vs_benchmark2.csv", None),
                ("general_vs_benchmark1.csv", None), ("", None), (None, None)):
            self.assertEqual(catalog.benchmark_of_task(text), expected, text)

    def test_a_release_row_is_scored_by_its_task_id(self):
        # the reward's benchmark of a row (TRL, OpenRLHF, the service)
        for _, task_id, _ in SFT_FILES:
            self.assertEqual(benchmark_of({"task_id": task_id}),
                             EXPECTED["transit-lm-%s.csv" % task_id][0], task_id)

    def test_generate_infers_the_benchmark_from_the_name_before_the_data(self):
        plain = runner.InputScan()          # data that says nothing: the name decides
        for name, (benchmark, _) in EXPECTED.items():
            self.assertEqual(runner.infer_benchmark("/r/" + name, plain),
                             (benchmark, "from the file name"), name)

    def test_a_station_file_is_paired_with_the_line_file_named_alike(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder, True)
        for name in ("station_info.csv", "line_info.csv", STATION_FILE, LINE_FILE):
            with open(os.path.join(folder, name), "w") as handle:
                handle.write("x\n")
        self.assertEqual(catalog.line_file(None, os.path.join(folder, STATION_FILE)),
                         os.path.join(folder, LINE_FILE))
        self.assertEqual(catalog.line_file(None, os.path.join(folder, "station_info.csv")),
                         os.path.join(folder, "line_info.csv"))
        os.remove(os.path.join(folder, LINE_FILE))      # else the one there is
        self.assertEqual(catalog.line_file(None, os.path.join(folder, STATION_FILE)),
                         os.path.join(folder, "line_info.csv"))


class ReleaseFolderTestCase(unittest.TestCase):
    """A release folder made once for the class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.folder = make_release_folder(os.path.join(cls.tmp, "release"))
        cls.station = os.path.join(cls.folder, STATION_FILE)
        cls.line = os.path.join(cls.folder, LINE_FILE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def setUp(self):
        self.work = tempfile.mkdtemp(dir=self.tmp)

    def data_env(self, folder=None):
        """The environment with TRANSITLM_DATA naming the folder (and no other
        network variable)."""
        values = {name: value for name, value in os.environ.items()
                  if name not in ("TRANSITLM_STATION_INFO", "TRANSITLM_LINE_INFO")}
        values[catalog.DATA_ENV] = folder or self.folder
        return mock.patch.dict(os.environ, values, clear=True)

    def no_data_env(self):
        values = {name: value for name, value in os.environ.items()
                  if name not in (catalog.DATA_ENV, "TRANSITLM_STATION_INFO",
                                  "TRANSITLM_LINE_INFO")}
        return mock.patch.dict(os.environ, values, clear=True)

    def evaluate(self, benchmark, *argv):
        """The evaluator of ``benchmark`` on its release test file's labels ->
        (exit status, report or None, stderr)."""
        out = os.path.join(self.work, "%s-%d" % (benchmark, len(os.listdir(self.work))))
        status, _, stderr = run_evaluator(catalog.load_benchmark(benchmark), [
            "--input", os.path.join(self.folder, TEST_FILES[benchmark]),
            "--input_field", "sft_label", "--quiet", "--workers", "1", "--out", out] + list(argv))
        if status != 0:
            return status, None, stderr
        with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
            return status, json.load(handle), stderr


class EvaluatorsTest(ReleaseFolderTestCase):

    def test_each_evaluator_scores_its_test_file_on_the_folders_network(self):
        with self.data_env():
            for benchmark in catalog.BENCHMARK_NAMES:
                with self.subTest(benchmark=benchmark):
                    status, report, stderr = self.evaluate(benchmark)
                    self.assertEqual(status, 0, stderr)
                    self.assertEqual(report["benchmark"], benchmark)
                    self.assertEqual(report["counts"]["samples"],
                                     report["counts"]["evaluated"])
                    signature = report["signature"]
                    self.assertIn("|stations:%s|" % file_sha256(self.station)[:8], signature)
                    if benchmark == "general_llm":
                        self.assertTrue(signature.endswith("|lines:%s"
                                                           % file_sha256(self.line)[:8]))
                    else:
                        self.assertEqual(report["metrics"]["rem"], 1.0)   # labels vs themselves

    def test_the_station_file_given_works_as_the_folder_does(self):
        with self.no_data_env():
            for benchmark in ("personalized", "general_llm"):
                status, report, stderr = self.evaluate(benchmark, "--station_info", self.station)
                self.assertEqual(status, 0, stderr)
                self.assertIn("|stations:%s|" % file_sha256(self.station)[:8],
                              report["signature"])

    def test_without_the_folders_network_the_file_is_refused_by_its_network_json(self):
        with self.no_data_env():
            status, report, stderr = self.evaluate("single_route")
        self.assertEqual(status, 2)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        self.assertIn("give --station_info %s (or TRANSITLM_DATA=%s)"
                      % (self.station, self.folder), stderr)

    def test_a_moved_folder_is_still_its_own_network(self):
        moved = os.path.join(self.work, "moved")
        shutil.copytree(self.folder, moved)          # network.json names the first place
        with self.data_env(moved):
            status, report, stderr = self.evaluate("diversity")
            self.assertEqual(status, 0, stderr)
        with self.no_data_env():                      # the refusal names the files here
            status, _, stderr = run_evaluator(catalog.load_benchmark("diversity"), [
                "--input", os.path.join(moved, TEST_FILES["diversity"]),
                "--input_field", "sft_label", "--quiet"])
        self.assertEqual(status, 2)
        self.assertIn("give --station_info %s (or TRANSITLM_DATA=%s)"
                      % (os.path.join(moved, STATION_FILE), moved), stderr)


class HarnessTest(ReleaseFolderTestCase):

    def lm_eval(self, *argv):
        from transitlm.harness.cli import main
        return run_in_process(main, ["lm-eval"] + list(argv))

    def test_the_four_test_files_in_one_call(self):
        out = os.path.join(self.work, "tasks")
        with self.no_data_env():
            status, stdout, stderr = self.lm_eval("--data", self.folder, "--out", out)
        self.assertEqual((status, stderr), (0, ""))
        with open(os.path.join(out, "transitlm_tasks.json"), encoding="utf-8") as handle:
            settings = json.load(handle)
        self.assertEqual((settings["station_info"], settings["line_info"]),
                         (self.station, self.line))
        self.assertEqual({task["benchmark"]: os.path.basename(task["input"])
                          for task in settings["tasks"].values()}, TEST_FILES)
        for benchmark, name in TEST_FILES.items():
            self.assertRegex(stdout, r"transitlm_\w+ +\d+ rows  %s  \(release test file\)"
                             % os.path.join(self.folder, name))
        self.assertIn("stations " + self.station, stdout)

    def test_the_folder_may_lack_a_test_file_and_must_hold_one(self):
        partial = make_release_folder(os.path.join(self.work, "partial"),
                                      files=("transit-lm-benchmark3-test.csv",
                                             "transit-lm-general-benchmark1-test.csv"))
        out = os.path.join(self.work, "tasks")
        status, stdout, stderr = self.lm_eval("--data", partial, "--out", out)
        self.assertEqual(status, 0, stderr)
        self.assertIn("not in %s: transit-lm-benchmark1-test.csv, "
                      "transit-lm-benchmark2-test.csv (no task written for it)" % partial, stdout)
        empty = make_release_folder(os.path.join(self.work, "empty"),
                                    files=("transit-lm-benchmark1-train.csv",))
        for argv, message in (
                (["--data", empty], "holds none of the release's test files"),
                (["--data", os.path.join(self.work, "absent")], "is not a folder"),
                (["--data", self.folder, "--input", self.station], "without --input"),
                (["--data", self.folder, "--benchmark", "diversity"], "without --input")):
            status, stdout, stderr = self.lm_eval(*(argv + ["--out", out + "2"]))
            self.assertEqual(status, 2, argv)
            self.assertIn(message, stderr)
            self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertFalse(os.path.exists(out + "2"))

    def test_a_folder_without_a_station_file_needs_one_given(self):
        bare = os.path.join(self.work, "bare")
        os.mkdir(bare)
        shutil.copy(os.path.join(self.folder, TEST_FILES["diversity"]), bare)
        status, _, stderr = self.lm_eval("--data", bare, "--out", os.path.join(bare, "t"))
        self.assertEqual(status, 2)
        self.assertIn("holds no station file (transit-lm-station-info.csv or "
                      "station_info.csv): give --station_info", stderr)
        status, _, stderr = self.lm_eval("--data", bare, "--station_info", self.station,
                                         "--out", os.path.join(bare, "t"))
        self.assertEqual(status, 0, stderr)

    def test_inputs_by_name_with_the_data_folder_and_a_train_file_named(self):
        # general-benchmark1 and benchmark1 side by side: two tasks, not a clash
        out = os.path.join(self.work, "tasks")
        train = os.path.join(self.folder, "transit-lm-benchmark1-train.csv")
        with self.data_env():
            status, stdout, stderr = self.lm_eval(
                "--input", train, "--input", os.path.join(self.folder, TEST_FILES["general_llm"]),
                "--out", out)
        self.assertEqual(status, 0, stderr)
        self.assertIn("transitlm_single_route     38 rows  %s  (from the file name)" % train,
                      stdout)
        self.assertIn("WARNING: transit-lm-benchmark1-train.csv is the release's training "
                      "split", stdout)
        self.assertIn("transitlm_general          34 rows", stdout)
        self.assertIn("stations " + self.station, stdout)


class GenerateAndPrepareTest(ReleaseFolderTestCase):

    def test_generate_asks_and_evaluates_the_general_file_as_the_general_llm(self):
        source = os.path.join(REPO, "data", "general_llm_example.csv")
        answers = answers_from(source)
        server = StandIn(lambda user, nth: ("ok", answers[user]))
        self.addCleanup(server.close)
        test_file = os.path.join(self.folder, TEST_FILES["general_llm"])
        for how, extra in (("TRANSITLM_DATA", []), ("--station_info", ["--station_info",
                                                                      self.station])):
            with self.subTest(how=how):
                out = os.path.join(self.work, how + ".jsonl")
                environ = {catalog.DATA_ENV: self.folder} if not extra else {}
                with (self.data_env() if not extra else self.no_data_env()):
                    status, stdout, stderr = run_generate(
                        ["--input", test_file, "--api_url", server.url,
                         "--model", "stand-in-model", "--out", out, "--evaluate"] + extra,
                        environ)
                self.assertEqual(status, 0, stderr)
                self.assertIn("evaluating with general_llm/evaluate.py (from the file name)",
                              stdout)
                lines = read_lines(out)
                self.assertEqual(len(lines), 34)
                self.assertTrue(all(line["indexid"].startswith("general-benchmark1-test-")
                                    for line in lines))
                with open(os.path.join(runner.run_dir_for(out), "report.json"),
                          encoding="utf-8") as handle:
                    report = json.load(handle)
                self.assertEqual(report["benchmark"], "general_llm")
                self.assertIn("|stations:%s|" % file_sha256(self.station)[:8],
                              report["signature"])

    def test_prepare_takes_every_file_of_the_folder_for_what_it_is(self):
        for how in ("TRANSITLM_DATA", "--station_info"):
            for name, (benchmark, split) in sorted(EXPECTED.items()):
                with self.subTest(how=how, name=name):
                    out = os.path.join(self.work, "%s.%s.jsonl" % (how, name))
                    argv = ["prepare", "--input", os.path.join(self.folder, name),
                            "--format", "verl", "--out", out]
                    if how == "--station_info":
                        argv += ["--station_info", self.station]
                    if benchmark == "general_llm":      # its labels pass under paper (46.2)
                        argv += ["--protocol", "paper"]
                    env = self.data_env() if how == "TRANSITLM_DATA" else self.no_data_env()
                    with env:
                        status, stdout, stderr = run_reward(argv)
                    self.assertEqual(status, 0, stderr)
                    self.assertIn("  %-14s %8d rows" % (benchmark, len(read_lines(out))), stdout)
                    self.assertIn("the release's %s split of %s" % (split, benchmark), stdout)
                    self.assertIn("bound to the station file %s" % self.station, stdout)
                    rows = read_lines(out)
                    self.assertEqual({row["data_source"] for row in rows},
                                     {"transitlm/" + benchmark})
                    self.assertEqual({row["extra_info"]["split"] for row in rows}, {split})
                    truth = json.loads(rows[0]["reward_model"]["ground_truth"])
                    self.assertEqual(truth["network_station_info"], self.station)
                    self.assertEqual(truth["network_line_info"], self.line)

    def test_prepare_without_the_folders_network_is_refused(self):
        with self.no_data_env():
            status, _, stderr = run_reward(["prepare", "--input", os.path.join(
                self.folder, "transit-lm-benchmark2-train.csv"), "--format", "trl",
                "--out", os.path.join(self.work, "x.jsonl")])
        self.assertEqual(status, 2)
        self.assertIn("TRANSITLM_DATA=%s" % self.folder, stderr)


if __name__ == "__main__":
    unittest.main()
