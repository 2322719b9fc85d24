"""The evaluators' command line and its inputs: a predictions file that joins
no test row, the line file that belongs to the station file, no output over
any file a run reads (whatever the path's spelling), strict JSON in what a run
folder copies.  In-process (transitlm.cli.run), one real process where the
environment matters."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import (prompt, route, run_evaluator, write_samples,
                                          write_station_file)
import transitlm.evaluation.catalog  # noqa: E402
import transitlm.evaluation.records  # noqa: E402

DATA = os.path.join(REPO, "data")


def benchmark(name):
    return transitlm.evaluation.records.load_benchmark(name)


class InputsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        self.stations = self.path("stations.csv")
        write_station_file(self.stations)
        self.input = self.path("test.csv")
        write_samples(self.input, [{"index_id": "t%d" % i, "sft_prompt": prompt(),
                                    "sft_label": route()} for i in range(3)],
                      columns=("index_id", "sft_prompt", "sft_label"))

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def write_predictions(self, ids, name="p.jsonl"):
        path = self.path(name)
        with open(path, "w", encoding="utf-8") as handle:
            for index_id in ids:
                handle.write(json.dumps({"indexid": index_id,
                                         "generate_results": json.dumps(route())}) + "\n")
        return path

    def assert_refused(self, status, err, *words):
        self.assertEqual(status, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        for word in words:
            self.assertIn(word, err)

    # -- predictions that match no test row -----------------------------------

    def test_predictions_of_another_test_file_exit_2_and_write_nothing(self):
        predictions = self.write_predictions(["other-1", "other-2"])
        out = self.path("run")
        status, _, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations,
            "--predictions", predictions, "--out", out])
        self.assert_refused(status, err, "'other-1'", "'t0'", "none of the 2 prediction(s)")
        self.assertFalse(os.path.exists(out))

    def test_an_empty_predictions_file_is_refused(self):
        predictions = self.path("empty.jsonl")
        open(predictions, "w").close()
        status, _, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations,
            "--predictions", predictions, "--quiet"])
        self.assertEqual(status, 2, err)

    def test_a_partial_join_stays_a_warning(self):
        predictions = self.write_predictions(["t0", "other"])
        status, out, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations,
            "--predictions", predictions, "--json", "-"])
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertEqual(report["input_notes"]["predictions_join"]["joined"], 1)
        self.assertTrue(any("not in the test file" in w for w in report["warnings"]))

    # -- the line file follows the station file --------------------------------

    def general_rows(self, folder):
        path = os.path.join(folder, "general.csv")
        shutil.copy(os.path.join(DATA, "general_llm_example.csv"), path)
        return path

    def test_the_line_file_beside_the_station_file_is_used(self):
        network = self.path("net")
        os.mkdir(network)
        for name in ("station_info.csv", "line_info.csv"):
            shutil.copy(os.path.join(DATA, name), network)
        status, out, err = run_evaluator(benchmark("general_llm"), [
            "--input", self.general_rows(self.dir), "--json", "-",
            "--station_info", os.path.join(network, "station_info.csv")])
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["inputs"]["line_info"],
                         os.path.join(network, "line_info.csv"))

    def test_no_line_file_beside_another_network_is_refused(self):
        # The bundled line file never pairs silently with another network.
        status, _, err = run_evaluator(benchmark("general_llm"), [
            "--input", self.general_rows(self.dir), "--station_info", self.stations,
            "--quiet"])
        self.assert_refused(status, err, "no line file beside", self.stations, "--line_info")
        status, _, err = run_evaluator(benchmark("general_llm"), [
            "--input", self.general_rows(self.dir), "--station_info", self.stations,
            "--line_info", os.path.join(DATA, "line_info.csv"), "--quiet"])
        self.assertEqual(status, 0, err)     # named on purpose: the user's choice

    def test_transitlm_data_without_a_line_file(self):
        folder = self.path("release")
        os.mkdir(folder)
        write_station_file(os.path.join(folder, "transit-lm-station-info.csv"))
        env = dict(os.environ, TRANSITLM_DATA=folder)
        done = subprocess.run([sys.executable, os.path.join(REPO, "general_llm", "evaluate.py"),
                               "--input", self.general_rows(self.dir), "--quiet"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assert_refused(done.returncode, done.stderr, "transit-lm-station-info.csv")

    # -- no output over an input, whatever the spelling -----------------------

    def test_no_output_over_any_file_the_run_reads(self):
        predictions = self.write_predictions(["t0", "t1", "t2"])
        sidecar = predictions + ".settings.json"
        with open(sidecar, "w") as handle:
            handle.write('{"model": "m"}')
        line_copy = self.path("lines.csv")
        shutil.copy(os.path.join(DATA, "line_info.csv"), line_copy)
        os.link(self.stations, self.path("hard-link.csv"))
        os.symlink(self.input, self.path("sym-link.csv"))
        cases = [
            ("single_route", ["--json", self.stations]),
            ("single_route", ["--html", self.path("hard-link.csv")]),
            ("single_route", ["--details", self.path("sym-link.csv")]),
            ("single_route", ["--json", self.path(".", "test.csv")]),
            ("single_route", ["--predictions", predictions, "--json", sidecar]),
            ("single_route", ["--predictions", predictions, "--html", predictions]),
            ("general_llm", ["--line_info", line_copy, "--json", line_copy]),
        ]
        before = {}
        for name in os.listdir(self.dir):
            with open(self.path(name), "rb") as handle:
                before[name] = handle.read()
        for name, extra in cases:
            with self.subTest(benchmark=name, flags=extra):
                status, _, err = run_evaluator(benchmark(name), [
                    "--input", self.input, "--station_info", self.stations,
                    "--quiet"] + extra)
                self.assert_refused(status, err, "an output never replaces an input")
        for name, data in before.items():
            with open(self.path(name), "rb") as handle:
                self.assertEqual(handle.read(), data, name)

    def test_the_bundled_station_file_is_protected_too(self):
        # No --station_info: the file in use is $TRANSITLM_DATA's or the bundled one.
        folder = self.path("release")
        os.mkdir(folder)
        station = os.path.join(folder, "station_info.csv")
        write_station_file(station)
        env = dict(os.environ, TRANSITLM_DATA=folder)
        for target in (station, os.path.join(DATA, "station_info.csv")):
            with open(target, "rb") as handle:
                data = handle.read()
            done = subprocess.run(
                [sys.executable, os.path.join(REPO, "single_route", "evaluate.py"),
                 "--input", self.input, "--quiet", "--html", target],
                env=env if target == station else dict(os.environ, TRANSITLM_DATA=""),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assert_refused(done.returncode, done.stderr, "the station file")
            with open(target, "rb") as handle:
                self.assertEqual(handle.read(), data)

    # -- strict JSON in what a run folder copies ------------------------------

    def test_a_settings_file_holding_nan_is_refused(self):
        predictions = self.write_predictions(["t0", "t1", "t2"])
        with open(predictions + ".settings.json", "w") as handle:
            handle.write('{"model": "m", "temperature": NaN}')
        out = self.path("run")
        status, _, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations,
            "--predictions", predictions, "--out", out])
        self.assert_refused(status, err, "NaN is not a JSON value")
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
