"""Hostile inputs found by a probe of the evaluators: each now gives an error row,
a warning, or exit 2 with one line -- never a traceback."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import (prompt, route, write_samples, write_station_file,
                                          TOY_STATIONS)

SINGLE = os.path.join(REPO, "single_route", "evaluate.py")
GENERAL = os.path.join(REPO, "general_llm", "evaluate.py")


def run(script, *args, env=None, stdin=None, stdout=subprocess.PIPE):
    environment = dict(os.environ)
    environment.update(env or {})
    done = subprocess.run([sys.executable, script] + list(args), stdout=stdout,
                          stderr=subprocess.PIPE, input=stdin, env=environment, timeout=60)
    out = done.stdout.decode("utf-8", "replace") if done.stdout is not None else ""
    return done.returncode, out, done.stderr.decode("utf-8", "replace")


class Hostile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.stations = os.path.join(self.dir, "st.csv")
        write_station_file(self.stations)

    def tearDown(self):
        self.tmp.cleanup()

    def samples(self, rows, name="in.csv"):
        path = os.path.join(self.dir, name)
        write_samples(path, rows)
        return path

    def details(self, *args):
        path = os.path.join(self.dir, "d.jsonl")
        status, out, err = run(SINGLE, "--station_info", self.stations, "--details", path,
                               *args)
        self.assertEqual(status, 0, err)
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle], out, err

    def test_numbers_coordinates_and_surrogates_become_error_rows(self):
        huge = '{"station_sequence": ["A", "B"], "total_distance": %s}' % ("1" * 400)
        bad_start = prompt(start=(0.0, 0.0)).replace('"0.000000,0.000000"', '"inf,0"')
        far_north = json.dumps({"start": "10,140", "end": "0,0"})
        nan_start = json.dumps({"start": "nan,nan", "end": "0,0"})
        rows = [{"index_id": "big", "sft_prompt": prompt(), "sft_label": route(),
                 "generate_results": huge},
                {"index_id": "inf", "sft_prompt": bad_start, "sft_label": route(),
                 "generate_results": route()},
                {"index_id": "lat", "sft_prompt": far_north, "sft_label": route(),
                 "generate_results": route()},
                {"index_id": "nan", "sft_prompt": nan_start, "sft_label": route(),
                 "generate_results": route()},
                {"index_id": "\ud800x", "sft_prompt": prompt(), "sft_label": route(),
                 "generate_results": '{"station_sequence": ["A", "\\ud800"], '
                                     '"line_sequence": ["\\u001b[31mred"]}'}]
        path = os.path.join(self.dir, "in.csv")
        with open(path, "w", encoding="utf-8", errors="surrogatepass", newline="") as handle:
            import csv
            writer = csv.writer(handle)
            writer.writerow(["index_id", "sft_prompt", "sft_label", "generate_results"])
            for row in rows:
                writer.writerow([row["index_id"], row["sft_prompt"],
                                 json.dumps(row["sft_label"]),
                                 row["generate_results"] if isinstance(row["generate_results"], str)
                                 else json.dumps(row["generate_results"])])
        records, out, _ = self.details("--input", path)
        self.assertEqual([r["failure_codes"][0] for r in records[:4]],
                         ["error.invalid_prediction", "error.invalid_prompt",
                          "error.invalid_prompt", "error.invalid_prompt"])
        self.assertEqual(records[4]["failure_codes"], ["error.invalid_encoding"])
        self.assertNotIn("\x1b", out)

    def test_escape_sequences_and_surrogates_in_model_text_are_printed_escaped(self):
        prediction = json.dumps(route(station_sequence=["A", "\ud800", "\x1b[31m"]))
        self.assertIn("\\ud800", prediction)          # a JSON escape: the file is UTF-8
        path = self.samples([{"index_id": "x\x1b[2J", "sft_prompt": prompt(),
                              "sft_label": route(), "generate_results": prediction}])
        status, out, err = run(SINGLE, "--input", path, "--station_info", self.stations)
        self.assertEqual(status, 0, err)
        self.assertNotIn("\x1b", out)
        self.assertIn("\\x1b", out)
        records, _, _ = self.details("--input", path)
        self.assertIn("\ud800", records[0]["prediction_routes"]["first"]["stations"])

    def test_output_encoding_and_full_disk(self):
        path = self.samples([{"index_id": "a", "sft_prompt": prompt(), "sft_label": route(),
                              "generate_results": route(station_sequence=["A", "站"])}])
        status, out, err = run(SINGLE, "--input", path, "--station_info", self.stations,
                               env={"PYTHONIOENCODING": "ascii"})
        self.assertEqual((status, err), (0, ""))
        self.assertIn("\\u7ad9", out)
        if os.path.exists("/dev/full"):
            with open("/dev/full", "w") as full:
                status, _, err = run(SINGLE, "--input", path, "--station_info",
                                     self.stations, stdout=full)
            self.assertEqual(status, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("standard output", err)

    def test_inputs_from_pipes_are_read_once_and_hashed(self):
        rows = [{"index_id": "a", "sft_prompt": prompt(), "sft_label": route()}]
        path = self.samples(rows)
        with open(path, "rb") as handle:
            data = handle.read()
        import hashlib
        status, out, err = run(SINGLE, "--input", "/dev/stdin", "--station_info",
                               self.stations, "--json", "-", "--input_field", "sft_label",
                               stdin=data)
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertEqual(report["inputs"]["sha256"]["input"], hashlib.sha256(data).hexdigest())
        self.assertEqual(report["counts"]["samples"], 1)
        predictions = json.dumps({"indexid": "a", "generate_results": route()}).encode()
        status, out, err = run(SINGLE, "--input", path, "--station_info", self.stations,
                               "--predictions", "/dev/stdin", "--json", "-", stdin=predictions)
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["rounds"]["reachability"], {"input": 1, "passed": 1})
        if hasattr(os, "mkfifo"):
            fifo = os.path.join(self.dir, "fifo")
            os.mkfifo(fifo)
            writer = subprocess.Popen(["sh", "-c", 'cat "$1" > "$2"', "sh", path, fifo])
            status, out, err = run(SINGLE, "--input", fifo, "--station_info", self.stations,
                                   "--input_field", "sft_label", "--json", "-")
            writer.wait(timeout=30)
            self.assertEqual(status, 0, err)
            self.assertEqual(json.loads(out)["counts"]["samples"], 1)

    def test_details_to_stdout(self):
        path = self.samples([{"index_id": "a", "sft_prompt": prompt(), "sft_label": route(),
                              "generate_results": route()}])
        status, out, err = run(SINGLE, "--input", path, "--station_info", self.stations,
                               "--details", "-")
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["index_id"], "a")
        self.assertFalse(os.path.exists(os.path.join(os.getcwd(), "-")) and False)
        status, _, err = run(SINGLE, "--input", path, "--details", "-", "--json", "-")
        self.assertEqual(status, 2)
        self.assertIn("only one output", err)

    def test_warnings_for_duplicates(self):
        stations = list(TOY_STATIONS) + [TOY_STATIONS[0]]
        write_station_file(self.stations, stations)
        path = os.path.join(self.dir, "dup.csv")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            import csv
            writer = csv.writer(handle)
            writer.writerow(["index_id", "sft_prompt", "sft_label", "generate_results",
                             "index_id"])
            for index_id in ("a", "a"):
                writer.writerow([index_id, prompt(), json.dumps(route()),
                                 json.dumps(route()), "other"])
        predictions = os.path.join(self.dir, "p.jsonl")
        with open(predictions, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"indexid": "a", "generate_results": route()}) + "\n")
        status, out, err = run(SINGLE, "--input", path, "--station_info", self.stations,
                               "--predictions", predictions, "--json", "-")
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        warnings = "\n".join(report["warnings"])
        self.assertIn("lists 1 stop id(s) more than once (e.g. A)", warnings)
        self.assertIn("repeats column(s) index_id", warnings)
        self.assertIn("1 test row(s) repeat an earlier row's id", warnings)
        self.assertEqual(report["counts"]["no_response"], 1)

    def test_station_file_with_bad_coordinates_names_file_and_line(self):
        stations = [(stop, float("inf") if stop == "A" else lng, lat, hops)
                    for stop, lng, lat, hops in TOY_STATIONS]
        write_station_file(self.stations, stations)
        path = self.samples([{"index_id": "a", "sft_prompt": prompt(), "sft_label": route(),
                              "generate_results": route()}])
        status, _, err = run(SINGLE, "--input", path, "--station_info", self.stations)
        self.assertEqual(status, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("%s line 2" % self.stations, err)

    def test_general_llm_usage_errors(self):
        for args in (["--api_url", "127.0.0.1:8765"], ["--api_url", "http://127.0.0.1:9",
                                                         "--timeout", "nan"],
                     ["--api_url", "http://127.0.0.1:9", "--timeout", "-1"],
                     ["--api_url", "http://127.0.0.1:9", "--timeout", "inf"]):
            status, _, err = run(GENERAL, "--quiet", *args)
            self.assertEqual(status, 2, args)
            self.assertEqual(len(err.strip().splitlines()), 1, err)


if __name__ == "__main__":
    unittest.main()
