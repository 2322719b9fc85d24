"""The released-dataset workflow: a test file in release format plus model
outputs in a separate, shuffled file (JSON Lines or CSV) give the same figures
as the inline form; ids that do not join are reported; fenced outputs."""

import csv
import json
import os
import random
import tempfile
import unittest

from tests.support import PARITY, REPO, common
from tests.support.evaluator_rows import (evaluate_to_files, prompt, route, run_evaluator,
                                          write_samples, write_station_file)
import transitlm.evaluation.catalog  # noqa: E402
import transitlm.evaluation.engine  # noqa: E402
from single_route.evaluate import SingleRoute
from personalized.evaluate import Personalized
from diversity.evaluate import Diversity

RELEASE_COLUMNS = ["task_id", "req_type", "adcode", "indexid", "system_prompt",
                   "sft_prompt", "sft_label"]


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def figures(report):
    return {key: report.get(key) for key in ("rounds", "metrics", "diversity")}


class ReleaseWorkflow(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def report(self, benchmark, argv):
        out = os.path.join(self.dir, "r.json")
        status, _, err = run_evaluator(benchmark, argv + ["--json", out, "--quiet"])
        self.assertEqual(status, 0, err)
        with open(out, encoding="utf-8") as handle:
            return json.load(handle)

    def split_release(self, inline_path):
        """inline CSV -> (release-format test CSV, shuffled JSONL, shuffled CSV)."""
        rows = read_rows(inline_path)
        release = os.path.join(self.dir, "test.csv")
        with open(release, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(RELEASE_COLUMNS)
            for i, row in enumerate(rows):
                writer.writerow(["t%d" % i, row.get("req_type", "0"), "110000",
                                 row["index_id"], "You plan routes.", row["sft_prompt"],
                                 row["sft_label"]])
        shuffled = list(rows)
        random.Random(7).shuffle(shuffled)
        jsonl = os.path.join(self.dir, "pred.jsonl")
        with open(jsonl, "w", encoding="utf-8") as handle:
            for i, row in enumerate(shuffled):
                value = row["generate_results"]
                try:               # half as objects, half as text: both are accepted
                    value = json.loads(value) if i % 2 else value
                except ValueError:
                    pass
                key = "indexid" if i % 3 else "index_id"
                handle.write(json.dumps({key: row["index_id"], "generate_results": value},
                                        ensure_ascii=False) + "\n")
        pred_csv = os.path.join(self.dir, "pred.csv")
        with open(pred_csv, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["index_id", "generate_results"])
            for row in shuffled:
                writer.writerow([row["index_id"], row["generate_results"]])
        return release, jsonl, pred_csv

    def check_same_figures(self, benchmark, inline, stations):
        base = ["--station_info", stations]
        inline_report = self.report(benchmark, ["--input", inline] + base)
        release, jsonl, pred_csv = self.split_release(inline)
        for predictions in (jsonl, pred_csv):
            with self.subTest(predictions=os.path.basename(predictions)):
                joined = self.report(benchmark, ["--input", release, "--predictions",
                                                 predictions, "--strict_json"] + base)
                self.assertEqual(figures(joined), figures(inline_report))
                self.assertEqual(joined["counts"]["samples"], inline_report["counts"]["samples"])
                self.assertEqual(joined["input_notes"]["predictions_join"]["missing"], 0)

    def cases(self):
        found = []
        folders = [os.path.join(REPO, "data")]
        if os.path.isdir(PARITY):
            folders.append(os.path.join(PARITY, "generated"))
        names = [(SingleRoute, ("benchmark1_single_route_example.csv", "b1.csv")),
                 (Personalized, ("benchmark2_personalized_example.csv", "b2.csv")),
                 (Diversity, ("benchmark3_diversity_example.csv", "b3.csv"))]
        for folder in folders:
            stations = os.path.join(folder, "station_info.csv")
            for cls, files in names:
                for name in files:
                    path = os.path.join(folder, name)
                    if os.path.isfile(path) and os.path.isfile(stations):
                        found.append((cls, path, stations))
        return found

    def test_release_format_with_shuffled_predictions(self):
        cases = self.cases()
        self.assertGreaterEqual(len(cases), 3, "no example data found")
        for cls, path, stations in cases:
            with self.subTest(input=path):
                self.check_same_figures(cls(), path, stations)


class JoinProblems(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.stations = os.path.join(self.dir, "st.csv")
        write_station_file(self.stations)
        self.test = os.path.join(self.dir, "test.csv")
        write_samples(self.test, [{"indexid": "id%d" % i, "sft_prompt": prompt(),
                                   "sft_label": route()} for i in range(4)],
                      ("indexid", "sft_prompt", "sft_label"))

    def tearDown(self):
        self.tmp.cleanup()

    def run_with(self, lines, *extra):
        path = os.path.join(self.dir, "p.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            for index_id, value in lines:
                handle.write(json.dumps({"indexid": index_id, "generate_results": value},
                                        ensure_ascii=False) + "\n")
        return evaluate_to_files(SingleRoute(), [
            "--input", self.test, "--station_info", self.stations, "--predictions", path]
            + list(extra), self.dir)

    def test_unknown_duplicate_and_missing_ids(self):
        text = json.dumps(route(), ensure_ascii=False)
        report, rows, stdout = self.run_with([("id0", text), ("id1", route()),
                                              ("id1", route(station_sequence=["A", "C"])),
                                              ("ghost", text), ("ghost2", text)])
        join = report["input_notes"]["predictions_join"]
        self.assertEqual((join["predictions"], join["joined"], join["missing"]), (5, 2, 2))
        self.assertEqual((join["unknown_ids"], join["duplicate_ids"]), (2, 1))
        self.assertEqual(join["unknown_id_examples"], ["ghost", "ghost2"])
        self.assertEqual(join["duplicate_id_examples"], ["id1"])
        self.assertEqual(report["counts"], {"samples": 4, "evaluated": 2, "errors": 0,
                                            "no_response": 2, "failed": 2})
        # the first id1 prediction (an exact copy) is the one used
        self.assertTrue(rows[1]["exact_match"])
        self.assertEqual([r["status"] for r in rows],
                         ["evaluated", "evaluated", "no_response", "no_response"])
        self.assertEqual(report["rounds"]["reachability"], {"input": 4, "passed": 2})
        self.assertIn("2 prediction(s) with an id not in the test file, e.g. ghost, ghost2",
                      stdout)
        self.assertIn("1 duplicate prediction(s) left over", stdout)
        self.assertIn("no response", stdout)

    def test_fenced_outputs_are_extracted_unless_strict(self):
        body = json.dumps(route(), ensure_ascii=False)
        lines = [("id0", "```json\n" + body + "\n```"),
                 ("id1", "Here is the route: " + body + " Have a nice trip."),
                 ("id2", body),
                 ("id3", "I cannot plan this route.")]
        report, rows, stdout = self.run_with(lines)
        self.assertEqual(report["input_notes"]["json_extracted"], 2)
        self.assertEqual([r["status"] for r in rows],
                         ["evaluated", "evaluated", "evaluated", "error"])
        self.assertIn("2 prediction(s) had text around the JSON", stdout)
        strict, rows, _ = self.run_with(lines, "--strict_json")
        self.assertEqual([r["status"] for r in rows], ["error", "error", "evaluated", "error"])
        self.assertNotIn("json_extracted", strict.get("input_notes", {}))

    def test_inline_cells_stay_strict(self):
        inline = os.path.join(self.dir, "inline.csv")
        write_samples(inline, [{"index_id": "x", "sft_prompt": prompt(), "sft_label": route(),
                                "generate_results": "```json\n{}\n```"}])
        status, _, _ = run_evaluator(SingleRoute(), ["--input", inline, "--station_info",
                                                     self.stations, "--json",
                                                     os.path.join(self.dir, "r.json")])
        with open(os.path.join(self.dir, "r.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["counts"]["errors"], 1)

    def test_malformed_predictions_file(self):
        path = os.path.join(self.dir, "p.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('{"indexid": "id0", "generate_results": {}}\n{oops\n')
        status, _, err = run_evaluator(SingleRoute(), ["--input", self.test, "--station_info",
                                                       self.stations, "--predictions", path])
        self.assertEqual(status, 2)
        self.assertIn("line 2", err)

    def test_transitlm_data_folder(self):
        folder = os.path.join(self.dir, "release")
        os.mkdir(folder)
        write_station_file(os.path.join(folder, "transit-lm-station-info.csv"))
        old = os.environ.get(transitlm.evaluation.catalog.DATA_ENV)
        os.environ[transitlm.evaluation.catalog.DATA_ENV] = folder
        try:
            self.assertEqual(transitlm.evaluation.catalog.default_data_file(transitlm.evaluation.catalog.STATION_FILE_NAMES),
                             os.path.join(folder, "transit-lm-station-info.csv"))
        finally:
            if old is None:
                del os.environ[transitlm.evaluation.catalog.DATA_ENV]
            else:
                os.environ[transitlm.evaluation.catalog.DATA_ENV] = old
        if old is None:
            self.assertEqual(transitlm.evaluation.catalog.default_data_file(transitlm.evaluation.catalog.STATION_FILE_NAMES),
                             os.path.join(transitlm.evaluation.catalog.DATA_DIR, "station_info.csv"))
