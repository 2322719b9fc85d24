"""What produced a run (issue 22, the evaluators' side): run.json, a signature
two models share, no silent overwrite, no debris, --version, the progress line."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

from tests.support import REPO, common
from tests.support.lane import Background
import transitlm
import transitlm.evaluation.provenance
import transitlm.cli
import transitlm.evaluation.engine
import transitlm.evaluation.workers
import transitlm.evaluation.provenance
import transitlm.evaluation.records
import transitlm.io.terminal

SCRIPTS = ("single_route", "personalized", "diversity", "general_llm")
B1 = os.path.join(REPO, "data", "benchmark1_single_route_example.csv")


def evaluator(script, *argv, **kwargs):
    return subprocess.run([sys.executable, os.path.join(REPO, script, "evaluate.py")]
                          + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kwargs)


def predictions_from_labels(path, target, every=1):
    """A predictions JSONL holding the labels of every ``every``-th row."""
    import csv
    with open(path, encoding="utf-8", newline="") as handle, \
            open(target, "w", encoding="utf-8") as out:
        for number, row in enumerate(csv.DictReader(handle)):
            if number % every == 0:
                out.write(json.dumps({"indexid": row.get("indexid", row.get("index_id")),
                                      "generate_results": row["sft_label"]}) + "\n")


class RunFile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, *parts):
        return os.path.join(self.tmp.name, *parts)

    def test_run_json_says_who_made_the_run(self):
        out = self.path("runs", "a")
        done = evaluator("single_route", "--quiet", "--out", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["details.jsonl", "report.html", "report.json",
                                                   "report.txt", "run.json"])
        with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
            run = json.load(handle)
        self.assertEqual(run["run_schema"], 1)
        self.assertEqual(run["version"], common.VERSION)
        self.assertEqual(run["benchmark"], "single_route")
        self.assertEqual(run["protocol"], "reference")
        self.assertEqual(run["command"][1:], ["--quiet", "--out", out])
        self.assertTrue(run["command"][0].endswith(os.path.join("single_route", "evaluate.py")))
        self.assertRegex(run["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertIsNone(run["generation"])
        with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
            self.assertNotIn("created", handle.read())      # report.json stays deterministic

    def test_the_model_that_made_the_predictions_is_recorded(self):
        predictions = self.path("model.jsonl")
        predictions_from_labels(B1, predictions)
        settings = {"model": "qwen-7b-sft", "api_url": "http://127.0.0.1:8000/v1",
                    "temperature": 0, "top_p": None, "max_tokens": 512, "extra_body": None,
                    "system_prompt_sha256": None, "input_sha256": "ab" * 32,
                    "version": common.VERSION}
        with open(transitlm.evaluation.provenance.settings_path(predictions), "w") as handle:
            json.dump(settings, handle)
        out = self.path("run")
        done = evaluator("single_route", "--quiet", "--predictions", predictions, "--out", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["generation"], settings)

    def test_an_unreadable_settings_file_stops_the_run(self):
        predictions = self.path("model.jsonl")
        predictions_from_labels(B1, predictions)
        for content in ("not json", "[1, 2]", "{" * 100000):
            with self.subTest(content=content[:10]):
                with open(transitlm.evaluation.provenance.settings_path(predictions), "w") as handle:
                    handle.write(content)
                out = self.path("never")
                done = evaluator("single_route", "--quiet", "--predictions", predictions,
                                 "--out", out)
                self.assertEqual(done.returncode, 2)
                self.assertRegex(done.stderr, r"^error: .*model\.jsonl\.settings\.json is not "
                                              r"(valid JSON|a JSON object).*\n$")
                self.assertFalse(os.path.exists(out))

    def test_python_api_writes_a_run_folder_compare_accepts(self):
        api = self.path("api")
        transitlm.evaluate("single_route", out=api)
        cli = self.path("cli")
        self.assertEqual(evaluator("single_route", "--out", cli).returncode, 0)
        for name in ("report.json", "details.jsonl", "report.txt"):
            with open(os.path.join(api, name), "rb") as a, open(os.path.join(cli, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        labels = self.path("labels")
        transitlm.evaluate("single_route", out=labels, input_field="sft_label")
        done = subprocess.run([sys.executable, os.path.join(REPO, "compare.py"), api, labels,
                               "--bootstrap", "50"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with self.assertRaises(common.InputError):
            transitlm.evaluate("single_route", out=api)     # holds a run already
        transitlm.evaluate("single_route", out=api, overwrite=True)


class Signature(unittest.TestCase):
    def test_two_models_on_the_same_test_share_the_signature(self):
        with tempfile.TemporaryDirectory() as tmp:
            reports = []
            for every in (1, 3):
                predictions = os.path.join(tmp, "model%d.jsonl" % every)
                predictions_from_labels(B1, predictions, every)
                report, _ = transitlm.evaluate("single_route", predictions=predictions)
                reports.append(report)
        first, second = reports
        self.assertNotEqual(first["metrics"], second["metrics"])
        self.assertNotEqual(first["inputs"]["sha256"]["predictions"],
                            second["inputs"]["sha256"]["predictions"])
        self.assertEqual(first["signature"], second["signature"])
        self.assertNotIn("predictions", first["signature"])
        self.assertEqual(first["signature"],
                         "transitlm:%s|single_route|protocol:reference|"
                         "rows:%d|stations:%s|input:%s|prompt:unknown" % (
                             common.VERSION, first["counts"]["samples"],
                             first["inputs"]["sha256"]["station_info"][:8],
                             first["inputs"]["sha256"]["input"][:8]))
        third, _ = transitlm.evaluate("single_route", protocol="paper")
        self.assertNotEqual(third["signature"], first["signature"])


class NoOverwriteNoDebris(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_out_onto_a_run_is_refused_unless_overwrite(self):
        out = os.path.join(self.tmp.name, "run")
        self.assertEqual(evaluator("single_route", "--quiet", "--out", out).returncode, 0)
        before = {}
        for name in os.listdir(out):
            with open(os.path.join(out, name), "rb") as handle:
                before[name] = handle.read()
        done = evaluator("single_route", "--quiet", "--protocol", "paper", "--out", out)
        self.assertEqual(done.returncode, 2)
        self.assertRegex(done.stderr, r"^error: run folder .*run already holds a run "
                                      r"\(report\.json, .*\); pass --overwrite to replace it, "
                                      r"or choose another --out\n$")
        for name, data in before.items():
            with open(os.path.join(out, name), "rb") as handle:
                self.assertEqual(handle.read(), data, name)
        done = evaluator("single_route", "--quiet", "--protocol", "paper", "--out", out,
                         "--overwrite")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["protocol"], "paper")

    def test_an_empty_or_unrelated_folder_is_fine(self):
        out = os.path.join(self.tmp.name, "mine")
        os.mkdir(out)
        with open(os.path.join(out, "notes.md"), "w") as handle:
            handle.write("mine")
        self.assertEqual(evaluator("single_route", "--quiet", "--out", out).returncode, 0)
        self.assertIn("notes.md", os.listdir(out))

    def test_a_failed_run_leaves_no_folder_it_created(self):
        out = os.path.join(self.tmp.name, "a", "b", "run")
        bad = os.path.join(self.tmp.name, "bad.csv")
        with open(bad, "w") as handle:
            handle.write("no,such,columns\n1,2,3\n")
        done = evaluator("single_route", "--quiet", "--input", bad, "--out", out)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["bad.csv"])
        # A folder that was there before stays; only what the run made goes.
        os.mkdir(os.path.join(self.tmp.name, "a"))
        done = evaluator("single_route", "--quiet", "--input", bad, "--out", out)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(os.listdir(os.path.join(self.tmp.name, "a")), [])

    @unittest.skipUnless(hasattr(os, "mkfifo"), "no FIFOs here")
    def test_an_interrupted_run_leaves_no_folder_it_created(self):
        fifo = os.path.join(self.tmp.name, "input.csv")
        os.mkfifo(fifo)
        out = os.path.join(self.tmp.name, "new", "run")
        for stop in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=stop.name):
                process = subprocess.Popen(
                    [sys.executable, os.path.join(REPO, "single_route", "evaluate.py"),
                     "--quiet", "--input", fifo, "--out", out],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                deadline = time.time() + 120     # a bound, never reached when all is well
                while not os.path.isdir(out) and time.time() < deadline:
                    time.sleep(0.02)        # the run made its folder and waits on the FIFO
                self.assertTrue(os.path.isdir(out))
                process.send_signal(stop)
                _, err = process.communicate(timeout=120)
                if stop == signal.SIGTERM:
                    self.assertEqual((process.returncode, err), (143, "\nterminated (SIGTERM)\n"))
                else:
                    self.assertEqual((process.returncode, err), (130, "\ninterrupted\n"))
                self.assertEqual(sorted(os.listdir(self.tmp.name)), ["input.csv"])


VERSION_SCRIPTS = [os.path.join(name, "evaluate.py") for name in SCRIPTS] + [
    os.path.join("general_llm", "server.py"), "generate.py", "compare.py", "harness.py",
    "reward.py", os.path.join("data", "import_gtfs.py"),
    os.path.join("data", "make_benchmark.py"), os.path.join("data", "make_dataset.py"),
    os.path.join("data", "make_demo.py")]


def versions():
    """Every script's --version, side by side -> [(script, status, stdout, stderr)]."""
    runs = [(script, subprocess.Popen([sys.executable, os.path.join(REPO, script), "--version"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      universal_newlines=True))
            for script in VERSION_SCRIPTS]
    answers = []
    for script, run in runs:
        out, err = run.communicate(timeout=60)
        answers.append((script, run.returncode, out, err))
    return answers


# Programs of their own, started as the module loads and run beside the
# suite (tests.support.Background).
VERSIONS = Background(versions)


class Version(unittest.TestCase):
    def test_every_script_answers_version(self):
        answers = VERSIONS.result()
        self.assertEqual([script for script, _, _, _ in answers], VERSION_SCRIPTS)
        for script, status, out, err in answers:
            with self.subTest(script=script):
                self.assertEqual((status, out, err), (0, "transitlm %s\n" % common.VERSION, ""))


class ProgressCount(unittest.TestCase):
    def test_progress_counts_the_rows_to_evaluate_under_sample_count(self):
        class Terminal(io.StringIO):
            def isatty(self):
                return True
        stream = Terminal()
        with mock.patch.object(sys, "stderr", stream), \
                mock.patch.object(transitlm.io.terminal.Progress, "DELAY", 0.0), \
                mock.patch.object(transitlm.io.terminal.Progress, "INTERVAL", 0.0):
            transitlm.evaluate("single_route", sample_count=7, workers=1, quiet=False)
        lines = [line for line in stream.getvalue().split("\r") if "rows" in line]
        self.assertTrue(lines)
        self.assertTrue(all(line.lstrip().split()[0].endswith("/7") for line in lines), lines)
        self.assertNotIn("%", stream.getvalue())


class ProgressWithPredictions(unittest.TestCase):
    def test_share_done_is_the_share_read_scaled_by_rows_done(self):
        share = transitlm.evaluation.engine._share_done
        self.assertIsNone(share(lambda: None, lambda: 10, lambda: 5))        # a pipe
        self.assertEqual(share(lambda: 0.5, lambda: 0, lambda: 0), 0.5)     # nothing read yet
        self.assertEqual(share(lambda: 1.0, lambda: 100, lambda: 96), 0.96)
        self.assertEqual(share(lambda: 0.4, lambda: 100, lambda: 100), 0.4)
        self.assertEqual(share(lambda: 0.4, lambda: 100, lambda: 120), 0.4)  # never over

    @unittest.skipUnless(transitlm.evaluation.workers.can_fork(), "no fork here")
    def test_progress_with_predictions_and_workers_never_runs_ahead(self):
        # Workers get rows a thousand at a time while this process reads
        # ahead: the share shown must follow the rows evaluated, not read.
        import csv
        with open(B1, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        with tempfile.TemporaryDirectory() as tmp:
            test_file = os.path.join(tmp, "test.csv")
            predictions = os.path.join(tmp, "model.jsonl")
            total = 3000
            with open(test_file, "w", encoding="utf-8", newline="") as handle, \
                    open(predictions, "w", encoding="utf-8") as answers:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                for number in range(total):
                    row = dict(rows[number % len(rows)], index_id="r%d" % number)
                    writer.writerow(row)
                    answers.write(json.dumps({"indexid": row["index_id"],
                                              "generate_results": row["sft_label"]}) + "\n")

            class Terminal(io.StringIO):
                def isatty(self):
                    return True
            stream = Terminal()
            with mock.patch.object(sys, "stderr", stream), \
                    mock.patch.object(sys, "stdout", io.StringIO()), \
                    mock.patch.object(transitlm.io.terminal.Progress, "DELAY", 0.0), \
                    mock.patch.object(transitlm.io.terminal.Progress, "INTERVAL", 0.0):
                transitlm.cli.run(transitlm.evaluation.records.load_benchmark("single_route"),
                                  ["--input", test_file, "--predictions", predictions,
                                   "--workers", "2", "--json", os.path.join(tmp, "r.json")])
        lines = [line.split() for line in stream.getvalue().split("\r") if "rows/s" in line]
        self.assertTrue(lines)
        for line in lines:
            done, percent = int(line[0]), float(line[2].rstrip("%"))
            self.assertLessEqual(abs(percent - 100.0 * done / total), 3.0, line)


class NoCredentialsInRunFolders(unittest.TestCase):
    def test_without_credentials(self):
        clean = transitlm.evaluation.provenance.without_credentials
        self.assertEqual(clean("http://bob:s3cret@host:8765/api"), "http://<redacted>@host:8765/api")
        self.assertEqual(clean("HTTPS://token@h/x?q=1"), "HTTPS://<redacted>@h/x?q=1")
        for kept in ("http://host/p@x", "a@b.c", "--quiet", "", None):
            self.assertEqual(clean(kept), kept)

    def test_a_service_url_with_credentials_is_recorded_without_them(self):
        with socket.socket() as probe:                  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = "http://alice:s3cret@127.0.0.1:%d" % port
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run")
            done = evaluator("general_llm", "--quiet", "--api_url", url, "--retries", "0",
                             "--allow_service_errors", "--out", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertNotIn("s3cret", done.stdout + done.stderr)
            for name in os.listdir(out):
                with open(os.path.join(out, name), encoding="utf-8") as handle:
                    self.assertNotIn("s3cret", handle.read(), name)
            with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
                self.assertIn("http://<redacted>@127.0.0.1:%d" % port,
                              json.load(handle)["command"])


if __name__ == "__main__":
    unittest.main()
