"""Another benchmark's test file is refused (transitlm/evaluation/benchmark_check.py,
issue 46): each evaluator recognises the other three benchmarks' files by
their content (labels with first/second/third routes, labels naming
stations, req_type preferences, task_id), never by the file's name; it exits
2 with one line naming the evaluator to use, unless --allow_other_benchmark
(allow_other_benchmark=True in the Python API), which the report and
run.json record."""

import csv
import json
import os
import shutil
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import (RefusalAssertions, prompt, route, run_evaluator,
                                          write_samples, write_station_file)
import transitlm  # noqa: E402
from common import InputError, StationNetwork  # noqa: E402
from transitlm.evaluation import benchmark_check  # noqa: E402
from transitlm.evaluation.catalog import BENCHMARKS, benchmark_info, load_benchmark  # noqa: E402
from transitlm.evaluation.inputs import FileHead  # noqa: E402

DATA = os.path.join(REPO, "data")
EXAMPLES = {info.name: os.path.join(DATA, info.default_input) for info in BENCHMARKS}


def head_of(path):
    with open(path, "rb") as handle:
        return FileHead(handle.read(), True)


def verdict(benchmark, header, rows, network=None):
    return benchmark_check.benchmark_verdict(benchmark, header, rows, network)


def label_row(label, **cells):
    row = {"sft_label": json.dumps(label, ensure_ascii=False)}
    row.update(cells)
    return row


ID_LABEL = route(station_sequence=["bus-1", "bus-2", "【换乘】", "bus-3"])
NAME_LABEL = route(station_sequence=["天安门东", "王府井", "东单"])
THREE_LABEL = {"first": ID_LABEL, "second": ID_LABEL}


class VerdictTest(unittest.TestCase):
    """The check function on rows: each signal, and what says nothing."""

    @classmethod
    def setUpClass(cls):
        cls.network = StationNetwork.load(os.path.join(DATA, "station_info.csv"))

    def test_each_bundled_example_fits_its_evaluator_only(self):
        for name, path in EXAMPLES.items():
            head = head_of(path)
            for network in (None, self.network):
                for evaluator in EXAMPLES:
                    with self.subTest(file=name, evaluator=evaluator, network=bool(network)):
                        found = verdict(evaluator, head.header, head.rows, network)
                        self.assertEqual(found.ok, evaluator == name, found.reason)
                        if not found.ok:
                            self.assertEqual(found.looks_like, name)

    def test_label_shapes(self):
        header = ["index_id", "sft_prompt", "sft_label"]
        rows = [label_row(THREE_LABEL)] * 3
        self.assertEqual(verdict("single_route", header, rows).reason,
                         "its labels hold first/second/third routes")
        self.assertTrue(verdict("diversity", header, rows).ok)
        names = [label_row(NAME_LABEL)] * 3
        self.assertEqual(verdict("diversity", header, names).looks_like, "general_llm")
        self.assertEqual(verdict("single_route", header, names).reason,
                         "its labels name stations, not stop ids")
        ids = [label_row(ID_LABEL)] * 3
        self.assertEqual(verdict("general_llm", header, ids).looks_like, "single_route")
        self.assertTrue(verdict("single_route", header, ids).ok)

    def test_req_type_and_task_id_tell_benchmarks_1_and_2_apart(self):
        header = ["index_id", "sft_prompt", "sft_label", "req_type"]
        # A benchmark-2 file has a few rows without a preference: they fit either.
        b2 = [label_row(ID_LABEL, req_type=value) for value in ("2", "5", "0", "7", "8")]
        self.assertTrue(verdict("personalized", header, b2).ok)
        found = verdict("single_route", header, b2)
        self.assertEqual((found.looks_like, found.reason), (
            "personalized", "its labels hold one route of stop ids and req_type holds a "
            "preference in 4 of its first 5 rows"))
        # make_benchmark.py's benchmark-1 file: req_type 0 on every row.
        b1 = [label_row(ID_LABEL, req_type="0")] * 4
        self.assertTrue(verdict("single_route", header, b1).ok)
        self.assertEqual(verdict("personalized", header, b1).reason,
                         "its labels hold one route of stop ids and req_type holds no "
                         "preference in its first 4 rows")
        self.assertEqual(verdict("personalized", header[:3], b1).reason,
                         "its labels hold one route of stop ids and it has no req_type column")
        # task_id decides between them, whatever req_type holds
        tasked = [label_row(ID_LABEL, req_type="0", task_id="benchmark2-test")] * 4
        self.assertTrue(verdict("personalized", header + ["task_id"], tasked).ok)
        self.assertIn("its task_id says benchmark2-test",
                      verdict("single_route", header + ["task_id"], tasked).reason)
        # ... but not against the labels: a general-LLM label stays the general LLM's
        named = [label_row(NAME_LABEL, task_id="benchmark1-test")] * 4
        self.assertEqual(verdict("single_route", ["sft_label", "task_id"], named).looks_like,
                         "general_llm")

    def test_stations_told_apart_by_the_station_file(self):
        # A network whose ids are not the release's and whose names are not Han
        # (a GTFS import): the station file tells ids from names.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "stations.csv")
            with open(path, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(["stop_id", "coord_x", "coord_y", "next_hop_stations",
                                 "station_name"])
                for stop, name in (("101", "Van Cortlandt Park"), ("103", "238 St"),
                                   ("104", "231 St")):
                    writer.writerow([stop, "-73.9", "40.8", "[]", name])
            network = StationNetwork.load(path)
            ids = [label_row(route(station_sequence=["101", "103", "104"]))] * 3
            names = [label_row(route(station_sequence=["Van Cortlandt Park", "238 St"]))] * 3
            header = ["sft_label"]
            self.assertEqual(verdict("general_llm", header, ids, network).looks_like,
                             "single_route")
            self.assertEqual(verdict("single_route", header, names, network).looks_like,
                             "general_llm")
            # without the station file neither can be told: nothing is said
            self.assertTrue(verdict("general_llm", header, ids).ok)
            self.assertTrue(verdict("single_route", header, names).ok)

    def test_what_says_nothing(self):
        header = ["sft_label"]
        for rows in ([], [{"sft_label": "not json"}] * 5, [{"sft_label": "[1, 2]"}],
                     [{"sft_label": "{}"}], [{}], [label_row({"station_sequence": []})],
                     [label_row(route(station_sequence=["X", "Y"]))]):
            for name in EXAMPLES:
                with self.subTest(rows=rows, evaluator=name):
                    self.assertTrue(verdict(name, header, rows).ok)

    def test_a_file_of_mostly_one_shape(self):
        header = ["sft_label"]
        rows = [label_row(ID_LABEL)] * 6 + [label_row(THREE_LABEL)] * 4
        self.assertTrue(verdict("single_route", header, rows).ok)       # 6 of 10 fit
        self.assertEqual(verdict("diversity", header, rows).looks_like, "single_route")
        half = [label_row(ID_LABEL)] * 5 + [label_row(THREE_LABEL)] * 5
        self.assertTrue(verdict("single_route", header, half).ok)       # half fit: not plain
        self.assertTrue(verdict("diversity", header, half).ok)

    def test_a_mix_of_benchmarks(self):
        rows = ([label_row(ID_LABEL)] * 4 + [label_row(THREE_LABEL)] * 3
                + [label_row(NAME_LABEL)] * 3)
        found = verdict("personalized", ["sft_label", "req_type"], rows)
        self.assertEqual((found.ok, found.looks_like), (False, None))
        self.assertEqual(found.reason, "of its first 10 rows with a label, 4 benchmark-1, "
                                       "3 benchmark-3, 3 general-LLM, 0 benchmark-2")


class EvaluatorsTest(RefusalAssertions, unittest.TestCase):
    """The command line and the Python API."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name

    def test_every_evaluator_refuses_the_others_files(self):
        for name, path in EXAMPLES.items():
            for evaluator in EXAMPLES:
                if evaluator == name:
                    continue
                with self.subTest(file=name, evaluator=evaluator):
                    out = os.path.join(self.dir, "run-%s-%s" % (name, evaluator))
                    status, stdout, err = run_evaluator(load_benchmark(evaluator), [
                        "--input", path, "--out", out, "--quiet"])
                    info = benchmark_info(name)
                    self.assert_refused(status, err, "looks like a %s file" % info.file_kind,
                                        "use %s/evaluate.py" % name, "--allow_other_benchmark")
                    self.assertEqual(stdout, "")
                    self.assertFalse(os.path.exists(out))

    def test_by_content_not_by_name(self):
        # A benchmark-3 file under the release's benchmark-1 name is still refused;
        # a benchmark-1 file under a benchmark-3 name is scored.
        b3 = os.path.join(self.dir, "transit-lm-benchmark1-test.csv")
        shutil.copy(EXAMPLES["diversity"], b3)
        b1 = os.path.join(self.dir, "benchmark3_diversity.csv")
        shutil.copy(EXAMPLES["single_route"], b1)
        status, _, err = run_evaluator(load_benchmark("single_route"), ["--input", b3, "--quiet"])
        self.assert_refused(status, err, "use diversity/evaluate.py")
        status, _, err = run_evaluator(load_benchmark("single_route"), ["--input", b1, "--quiet"])
        self.assertEqual(status, 0, err)

    def test_the_override_is_recorded(self):
        out = os.path.join(self.dir, "run")
        status, stdout, err = run_evaluator(load_benchmark("single_route"), [
            "--input", EXAMPLES["diversity"], "--out", out, "--allow_other_benchmark"])
        self.assertEqual(status, 0, err)
        expected = {"looks_like": "diversity", "allowed": True,
                    "reason": "its labels hold first/second/third routes"}
        with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
            report = json.load(handle)
        with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
            run = json.load(handle)
        self.assertEqual(report["inputs"]["benchmark_check"], expected)
        self.assertEqual(run["benchmark_check"], expected)
        self.assertIn("--allow_other_benchmark given: input file %s looks like a benchmark-3 "
                      "file" % EXAMPLES["diversity"], report["warnings"][0])
        self.assertIn("WARNING: --allow_other_benchmark given", stdout)
        # A file that fits: no such key anywhere (the bundled runs' bytes are unchanged).
        plain = os.path.join(self.dir, "plain")
        status, _, err = run_evaluator(load_benchmark("single_route"), [
            "--out", plain, "--quiet", "--allow_other_benchmark"])
        self.assertEqual(status, 0, err)
        with open(os.path.join(plain, "report.json"), encoding="utf-8") as handle:
            self.assertNotIn("benchmark_check", json.load(handle)["inputs"])
        with open(os.path.join(plain, "run.json"), encoding="utf-8") as handle:
            self.assertNotIn("benchmark_check", json.load(handle))

    def test_the_python_api(self):
        with self.assertRaises(InputError) as caught:
            transitlm.evaluate("general_llm", input=EXAMPLES["single_route"])
        message = str(caught.exception)
        self.assertIn("looks like a benchmark-1 file", message)
        self.assertIn("use transitlm.evaluate('single_route', ...)", message)
        self.assertIn("allow_other_benchmark=True", message)
        stations = os.path.join(self.dir, "stations.csv")
        write_station_file(stations)
        rows = [{"index_id": "r%d" % i, "sft_prompt": prompt(),
                 "sft_label": {"first": route(), "second": route()},
                 "generate_results": route()} for i in range(3)]
        with self.assertRaisesRegex(InputError, "^the rows given looks like a benchmark-3"):
            transitlm.evaluate("single_route", rows=rows, station_info=stations)
        out = os.path.join(self.dir, "api")
        report, records = transitlm.evaluate("single_route", rows=rows, out=out,
                                             station_info=stations, allow_other_benchmark=True)
        self.assertEqual(len(records), 3)
        self.assertEqual(report["inputs"]["benchmark_check"]["looks_like"], "diversity")
        self.assertTrue(report["warnings"][0].startswith(
            "allow_other_benchmark=True given: the rows given looks like"))
        with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
            run = json.load(handle)
        self.assertEqual(run["benchmark_check"]["looks_like"], "diversity")
        self.assertIn("allow_other_benchmark=True", run["command"][0])

    def test_personalized_needs_its_column_even_when_allowed(self):
        stations = os.path.join(self.dir, "stations.csv")
        write_station_file(stations)
        path = os.path.join(self.dir, "b1.csv")
        write_samples(path, [{"index_id": "a", "sft_prompt": prompt(), "sft_label": route(),
                              "generate_results": route()}])
        status, _, err = run_evaluator(load_benchmark("personalized"), [
            "--input", path, "--station_info", stations, "--quiet"])
        self.assert_refused(status, err, "no req_type column", "use single_route/evaluate.py")
        status, _, err = run_evaluator(load_benchmark("personalized"), [
            "--input", path, "--station_info", stations, "--quiet", "--allow_other_benchmark"])
        self.assert_refused(status, err, "lacks column(s) req_type")


if __name__ == "__main__":
    unittest.main()
