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
from tests.support.evaluator_rows import (RefusalAssertions, prompt, route, run_evaluator,
                                          write_samples, write_station_file)
import transitlm.api  # noqa: E402
import transitlm.evaluation.catalog  # noqa: E402
import transitlm.evaluation.inputs  # noqa: E402
import transitlm.evaluation.records  # noqa: E402

DATA = os.path.join(REPO, "data")


def benchmark(name):
    return transitlm.evaluation.records.load_benchmark(name)


class InputsTest(RefusalAssertions, unittest.TestCase):
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

    # -- whole-file problems are whole-file errors (issue 46) -------------------

    def test_a_header_without_rows_is_refused_by_every_evaluator(self):
        empty = self.path("empty.csv")
        with open(empty, "w", encoding="utf-8") as handle:
            handle.write("index_id,sft_prompt,sft_label,generate_results,req_type\r\n\r\n")
        # Blank lines past the first bytes read: found after the rows, the same line.
        blank = self.path("blank.csv")
        with open(blank, "w", encoding="utf-8") as handle:
            handle.write("index_id,sft_prompt,sft_label,generate_results,req_type\n")
            handle.write("\n" * (transitlm.evaluation.inputs.CHUNK_BYTES + 10))
        for path in (empty, blank):
            for name in transitlm.evaluation.catalog.BENCHMARK_NAMES:
                with self.subTest(file=path, benchmark=name):
                    out = self.path("run-" + name)
                    lines = (["--line_info", os.path.join(DATA, "line_info.csv")]
                             if name == "general_llm" else [])
                    status, _, err = run_evaluator(benchmark(name), [
                        "--input", path, "--station_info", self.stations, "--out", out]
                        + lines)
                    self.assert_refused(status, err, "holds no rows (a header only)")
                    self.assertFalse(os.path.exists(out))
        # --sample_count 0 asks for no row of a file that holds some: not refused
        status, out, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations, "--sample_count", "0",
            "--json", "-", "--input_field", "sft_label"])
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["counts"]["samples"], 0)

    def test_a_file_that_is_not_utf8_is_refused_naming_its_encoding(self):
        with open(os.path.join(DATA, "benchmark1_single_route_example.csv"),
                  encoding="utf-8") as handle:
            text = handle.read()
        gbk = self.path("gbk.csv")
        with open(gbk, "wb") as handle:
            handle.write(text.encode("gbk"))
        utf16 = self.path("utf16.csv")
        with open(utf16, "wb") as handle:
            handle.write(text.encode("utf-16"))
        big5 = self.path("big5.csv")        # traditional Chinese, as Taiwan's files are
        header = text.split("\n", 1)[0]
        row = ('1,0,710000,row%d,你是臺北的交通助手,"{""query"": ""臺北車站到松山機場怎麼走？""}",'
               '"{""line_sequence"": [""板南線"", ""文湖線""], ""total_time"": ""32分鐘""}",'
               '"{""total_distance"": ""約5.3公里"", ""total_fare"": ""25元""}"')
        with open(big5, "wb") as handle:
            handle.write("\n".join([header] + [row % k for k in range(5)]).encode("big5"))
        cases = ((gbk, ["none of its first 38 rows is", "GB18030 (GBK",
                        "iconv -f GB18030 -t UTF-8"]),
                 (big5, ["none of its first 5 rows is", "reads as Big5 (traditional Chinese)",
                         "iconv -f BIG5 -t UTF-8"]),
                 (utf16, ["line 1 is not", "UTF-16"]))
        for path, words in cases:
            for workers in ("1", "2"):
                with self.subTest(file=path, workers=workers):
                    status, _, err = run_evaluator(benchmark("single_route"), [
                        "--input", path, "--quiet", "--workers", workers])
                    self.assert_refused(status, err, "is not UTF-8 text", *words)
        # A few rows that are not UTF-8 stay error rows.
        lines = text.encode("utf-8").split(b"\n")
        for number in (3, 30):
            lines[number] = lines[number].decode("utf-8").encode("gbk")
        some = self.path("some.csv")
        with open(some, "wb") as handle:
            handle.write(b"\n".join(lines))
        details = self.path("some.jsonl")
        status, out, err = run_evaluator(benchmark("single_route"), [
            "--input", some, "--details", details, "--quiet"])
        self.assertEqual(status, 0, err)
        with open(details, encoding="utf-8") as handle:
            codes = [json.loads(line)["failure_codes"] for line in handle]
        self.assertEqual(len(codes), 38)
        self.assertEqual([number for number, row in enumerate(codes, start=1)
                          if row == ["error.invalid_encoding"]], [3, 30])

    def test_a_release_file_without_answers_names_the_ways_to_give_them(self):
        status, _, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations, "--quiet"])
        self.assert_refused(status, err, "lacks column(s) generate_results",
                            "--predictions FILE", "--input_field sft_label")
        with self.assertRaises(transitlm.evaluation.inputs.InputError) as caught:
            transitlm.api.evaluate("single_route", input=self.input,
                                   station_info=self.stations)
        self.assertIn("predictions=FILE", str(caught.exception))
        self.assertIn("input_field='sft_label'", str(caught.exception))

    def test_repeated_test_ids_are_a_warning_without_predictions(self):
        repeated = self.path("repeated.csv")
        rows = [{"index_id": "t%d" % (i % 3), "sft_prompt": prompt(), "sft_label": route(),
                 "generate_results": route()} for i in range(7)]
        write_samples(repeated, rows)
        status, out, err = run_evaluator(benchmark("single_route"), [
            "--input", repeated, "--station_info", self.stations, "--json", "-"])
        self.assertEqual(status, 0, err)
        warnings = json.loads(out)["warnings"]
        self.assertEqual(warnings, [
            "4 test row(s) repeat an earlier row's id, e.g. t0 (rows 1 and 4), t1 (rows 2 "
            "and 5), t2 (rows 3 and 6), t0 (rows 1 and 7): rows are told apart by id (a "
            "predictions file is joined and compare.py pairs runs by it), so give each row "
            "an id of its own"])
        status, out, err = run_evaluator(benchmark("single_route"), [
            "--input", self.input, "--station_info", self.stations, "--json", "-",
            "--input_field", "sft_label"])
        self.assertEqual((status, json.loads(out)["warnings"]), (0, []), err)

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
