"""Issue 39.4: an output never replaces a device or a pipe.  Every output
flag of every tool writes through an existing character device (a /dev/null
twin the test makes), a FIFO (read by a thread) or a descriptor named as
/dev/fd/N or /dev/stdout; a folder, a socket or a block device is refused
with one line; a link someone else planted is still replaced, never
followed; and a folder flag (a run folder, a task folder, a data tool's
folder) given a device is refused.  No real /dev/null is touched."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import run_evaluator, run_in_process
from tests.support.synthetic_runs import benchmark_records, run_compare, write_run
from tests.support.services import run_generate, run_reward
from tests.support.streams import (UNUSED_BLOCK_DEVICE, FifoReader, PipeReader, device_node,
                                   is_device, unix_socket)
import transitlm.evaluation.records  # noqa: E402
from transitlm import api  # noqa: E402
from transitlm.io.files import OutputFile, Outputs  # noqa: E402

DATA = os.path.join(REPO, "data")
B1 = os.path.join(DATA, "benchmark1_single_route_example.csv")
LABELS = ["--input", B1, "--input_field", "sft_label", "--quiet", "--workers", "1"]


def evaluate(*argv):
    return run_evaluator(transitlm.evaluation.records.load_benchmark("single_route"),
                         LABELS + list(argv))


class StreamCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def device(self, *names):
        return device_node(self.path(*names))

    def assert_untouched(self, path, folder=None):
        """Still a device, and no temporary file was left beside it."""
        self.assertTrue(is_device(path), path)
        folder = folder or os.path.dirname(path)
        self.assertEqual([name for name in os.listdir(folder) if name.startswith(".")], [])

    def refused(self, result, *expected):
        status, _, err = result
        self.assertEqual(status, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for text in expected:
            self.assertIn(text, err)
        return err


class OutputFileTest(StreamCase):
    def test_a_device_a_fifo_and_a_descriptor_are_written_through(self):
        device = self.device("null")
        with OutputFile(device) as handle:
            handle.write("gone")
        self.assert_untouched(device)
        with FifoReader(self.path("fifo")) as fifo:
            with OutputFile(fifo.path) as handle:
                handle.write("through ")
                handle.write("the pipe")
        self.assertEqual(fifo.text(), "through the pipe")
        with PipeReader() as pipe:
            with Outputs() as outputs:
                outputs.write(pipe.path, "by descriptor")
            os.fstat(pipe.write_end)        # the descriptor itself stays open
        self.assertEqual(pipe.data, b"by descriptor")

    def test_a_link_of_ours_is_followed_and_a_planted_one_replaced(self):
        device = self.device("null")
        ours = self.path("ours")
        os.symlink(device, ours)
        with OutputFile(ours) as handle:
            handle.write("x")
        self.assertTrue(os.path.islink(ours))
        if os.geteuid() != 0:
            self.skipTest("a link of another user needs root to make")
        planted = self.path("planted")
        os.symlink(device, planted)
        os.lchown(planted, 54321, 54321)
        with OutputFile(planted) as handle:
            handle.write("kept apart")
        self.assertFalse(os.path.islink(planted))
        with open(planted) as handle:
            self.assertEqual(handle.read(), "kept apart")
        self.assertTrue(is_device(device))

    def test_other_targets_are_refused(self):
        os.mkdir(self.path("folder"))
        sock = unix_socket(self.path("sock"))
        self.addCleanup(sock.close)
        targets = [(self.path("folder"), "is a folder"), (self.path("sock"), "is a socket")]
        try:
            targets.append((device_node(self.path("block"), block=True,
                                        numbers=UNUSED_BLOCK_DEVICE), "is a block device"))
        except unittest.SkipTest:
            pass
        for path, expected in targets:
            with self.subTest(expected):
                with self.assertRaises(Exception) as caught:
                    OutputFile(path)
                self.assertIn(expected, str(caught.exception))
                status, _, err = evaluate("--json", path)
                self.assertEqual(status, 2, err)
                self.assertIn("--json %s %s" % (path, expected), err)
        self.assertTrue(is_device(self.path("block"), block=True)
                        if os.path.lexists(self.path("block")) else True)


class EvaluatorTest(StreamCase):
    def test_json_details_and_html_through_fifos(self):
        with FifoReader(self.path("json")) as report, \
                FifoReader(self.path("details")) as details, \
                FifoReader(self.path("html")) as page:
            status, _, err = evaluate("--json", report.path, "--details", details.path,
                                      "--html", page.path)
        self.assertEqual(status, 0, err)
        figures = json.loads(report.text())
        self.assertEqual(len(details.text().splitlines()), figures["counts"]["samples"])
        self.assertTrue(page.text().startswith("<!DOCTYPE html>"), page.text()[:80])
        for name in ("json", "details", "html"):
            self.assertFalse(os.path.isfile(self.path(name)))

    def test_through_devices_and_a_run_folder_holding_them(self):
        targets = [self.device(name) for name in ("json", "details", "html")]
        status, _, err = evaluate("--json", targets[0], "--details", targets[1],
                                  "--html", targets[2])
        self.assertEqual(status, 0, err)
        for target in targets:
            self.assert_untouched(target)
        folder = self.path("run")
        os.mkdir(folder)
        device_node(os.path.join(folder, "report.html"))
        with FifoReader(os.path.join(folder, "details.jsonl")) as details:
            status, _, err = evaluate("--out", folder, "--overwrite")
        self.assertEqual(status, 0, err)
        self.assertGreater(len(details.text().splitlines()), 10)
        self.assert_untouched(os.path.join(folder, "report.html"))
        with open(os.path.join(folder, "report.json")) as handle:
            self.assertIn("counts", json.load(handle))

    def test_details_through_a_fifo_beside_a_page_and_a_file(self):
        # The page reads the details back: from the --out folder's file, not the pipe.
        with FifoReader(self.path("details")) as details:
            status, _, err = evaluate("--details", details.path, "--out", self.path("run"))
        self.assertEqual(status, 0, err)
        with open(self.path("run", "details.jsonl"), "rb") as handle:
            self.assertEqual(details.data, handle.read())
        with FifoReader(self.path("details2")) as details:
            status, _, err = evaluate("--details", details.path, "--html", self.path("p.html"))
        self.assertEqual(status, 0, err)
        self.assertGreater(len(details.text().splitlines()), 10)
        with open(self.path("p.html"), encoding="utf-8") as handle:
            self.assertIn("<!DOCTYPE html>", handle.read(200))

    def test_a_pipe_named_by_its_descriptor(self):
        with PipeReader() as pipe:
            status, _, err = evaluate("--json", pipe.path)
        self.assertEqual(status, 0, err)
        self.assertIn("rounds", json.loads(pipe.data.decode("utf-8")))

    def test_dev_stdout(self):
        # The one real device path: the child's own standard output, a pipe here.
        done = subprocess.run([sys.executable, os.path.join(REPO, "single_route", "evaluate.py"),
                               "--input_field", "sft_label", "--quiet", "--workers", "1",
                               "--json", "/dev/stdout"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        text = done.stdout.decode("utf-8")
        # The whole JSON report first (written as the run wrote it), then the text report.
        report, end = json.JSONDecoder().raw_decode(text)
        self.assertIn("rounds", report)
        self.assertIn("benchmark 1: single route", text[end:])

    def test_a_run_folder_or_an_input_is_still_protected(self):
        device = self.device("null")
        self.refused(evaluate("--out", device), device)
        self.assert_untouched(device)
        self.refused(evaluate("--json", B1), "an output never replaces an input")

    def test_the_python_api(self):
        folder = self.path("api")
        os.mkdir(folder)
        device_node(os.path.join(folder, "report.txt"))
        with FifoReader(os.path.join(folder, "report.json")) as report:
            api.evaluate("single_route", input=B1, out=folder, overwrite=True,
                         input_field="sft_label")
        self.assertIn("rounds", json.loads(report.text()))
        self.assert_untouched(os.path.join(folder, "report.txt"))


class CompareTest(StreamCase):
    def test_json_and_html_through_a_fifo_and_a_device(self):
        runs = []
        for name, quality in (("a", 0.2), ("b", 0.8)):
            runs.append(write_run(self.path(name), benchmark_records("single_route", 20,
                                                                     quality, seed=1)))
        device = self.device("null")
        with FifoReader(self.path("fifo")) as fifo:
            status, _, err = run_compare(runs + ["--json", fifo.path, "--html", device,
                                                 "--bootstrap", "0"])
        self.assertEqual(status, 0, err)
        self.assertIn("models", json.loads(fifo.text()))
        self.assert_untouched(device)
        sock = unix_socket(self.path("sock"))
        self.addCleanup(sock.close)
        self.refused(run_compare(runs + ["--json", self.path("sock")]), "is a socket")


class OtherToolsTest(StreamCase):
    def test_reward_prepare(self):
        device = self.device("null")
        status, _, err = run_reward(["prepare", "--input", B1, "--format", "trl", "--out",
                                     device])
        self.assertEqual(status, 0, err)
        self.assert_untouched(device)
        with FifoReader(self.path("fifo")) as fifo:
            status, _, err = run_reward(["prepare", "--input", B1, "--format", "trl", "--out",
                                         fifo.path])
        self.assertEqual(status, 0, err)
        self.assertEqual(len(fifo.text().splitlines()), 38)

    def test_generate_refuses_a_stream_it_could_not_read_back(self):
        # generate.py reads --out back to resume and writes PATH.settings.json
        # beside it: a device or a pipe is refused before anything is asked.
        for path in (self.device("null"), FifoReader(self.path("fifo")).path):
            with self.subTest(path):
                status, _, err = run_generate(["--input", B1, "--api_url",
                                               "http://127.0.0.1:9/v1", "--model", "m",
                                               "--out", path])
                self.assertEqual(status, 2, err)
                self.assertIn("is not a regular file (it is read back to resume)", err)
                self.assertTrue(set(os.listdir(self.dir)) <= {"null", "fifo"})
        device_node(self.path("x.jsonl.settings.json"))       # its settings file too
        status, _, err = run_generate(["--input", B1, "--api_url", "http://127.0.0.1:9/v1",
                                       "--model", "m", "--out", self.path("x.jsonl")])
        self.assertEqual(status, 2, err)
        self.assertIn("settings.json is not a regular file", err)
        self.assert_untouched(self.path("x.jsonl.settings.json"))
        with PipeReader() as pipe:         # /dev/fd/N, /dev/stdout: even on a regular file
            status, _, err = run_generate(["--input", B1, "--api_url", "http://127.0.0.1:9/v1",
                                           "--model", "m", "--out", pipe.path])
        self.assertEqual(status, 2, err)
        self.assertIn("is not a regular file", err)
        self.assert_untouched(self.path("null"))

    def test_harness_refuses_a_device_for_its_folder(self):
        from transitlm.harness.cli import main
        device = self.device("null")
        self.refused(run_in_process(main, ["lm-eval", "--input", B1, "--out", device]),
                     "is a file: give a folder")
        self.assert_untouched(device)

    def test_data_tools_write_through(self):
        from transitlm.networks import benchmark_builder, gtfs_import
        from transitlm.networks.demo import build as make_demo
        from tests.support.gtfs_feeds import BASE_FEED, write_feed
        out = self.path("bench")
        os.mkdir(out)
        device_node(os.path.join(out, "benchmark1_single_route.csv"))
        with FifoReader(os.path.join(out, "general_llm.csv")) as fifo:
            status, _, err = run_in_process(benchmark_builder.main,
                                            ["--network", DATA, "--out", out, "--samples", "1"])
        self.assertEqual(status, 0, err)
        self.assertIn("indexid", fifo.text().splitlines()[0])
        self.assert_untouched(os.path.join(out, "benchmark1_single_route.csv"))
        out = self.path("demo")
        os.mkdir(out)
        device_node(os.path.join(out, "line_info.csv"))
        status, _, err = run_in_process(make_demo.main, ["--out", out])
        self.assertEqual(status, 0, err)
        self.assert_untouched(os.path.join(out, "line_info.csv"))
        feed = write_feed(self.dir, BASE_FEED)
        out = self.path("imported")
        os.mkdir(out)
        sock = unix_socket(os.path.join(out, "station_info.csv"))
        self.addCleanup(sock.close)
        self.refused(run_in_process(gtfs_import.main, [feed, "--city", "T", "--out", out]),
                     "station_info.csv is a socket")
        os.remove(os.path.join(out, "station_info.csv"))
        with FifoReader(os.path.join(out, "line_info.csv")) as fifo:
            status, _, err = run_in_process(gtfs_import.main, [feed, "--city", "T", "--out",
                                                               out])
        self.assertEqual(status, 0, err)
        self.assertTrue(fifo.text().startswith("citycode,line_name,"), fifo.text()[:80])


if __name__ == "__main__":
    unittest.main()
