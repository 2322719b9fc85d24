"""generate.py's settings and resuming (issue 22): the settings sidecar
recorded beside the output and compared on resume, --restart, --adopt, what a
failed or interrupted run leaves, no output over an input, --version.  Runs
killed at many instants, then resumed: tests/test_generate_interrupts.py."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from tests.support import REPO, common
from tests.support.services import (HOSTILE_KEY as KEY, HostileServer as Hostile, completion,
                                    raw_answer, read_lines, run_generate, write_input)

SCRIPT = os.path.join(REPO, "generate.py")


class SettingsAndRestart(unittest.TestCase):
    """The settings sidecar: recorded, compared on resume, --restart, --adopt,
    what a failed run leaves, --version (issue 22)."""

    @classmethod
    def setUpClass(cls):
        def behave(handler, case, nth, body):
            if case == "ok":
                raw_answer(handler, "HTTP/1.1 200 OK", [], completion("route"))
            elif case == "hang":
                time.sleep(5)
            else:
                raw_answer(handler, "HTTP/1.1 404 Not Found", [], b'{"error": "no model"}')
        cls.server = Hostile(behave)

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.input = write_input(self.dir, rows=3)
        self.out = os.path.join(self.dir, "runs", "a", "preds.jsonl")
        self.sidecar = self.out + ".settings.json"

    def tearDown(self):
        self.tmp.cleanup()

    def generate(self, *extra, **kwargs):
        argv = ["--input", self.input, "--api_url", kwargs.get("url", self.server.url("ok")),
                "--model", "m", "--out", self.out] + list(extra)
        return run_generate(argv, environ=kwargs.get("environ", {}))

    def snapshot(self):
        found = {}
        for folder, _, names in os.walk(self.dir):
            for name in names:
                with open(os.path.join(folder, name), "rb") as handle:
                    found[os.path.relpath(os.path.join(folder, name), self.dir)] = handle.read()
        return found

    def test_settings_recorded_beside_the_output(self):
        status, _, stderr = self.generate("--temperature", "0.5", "--extra_body", '{"top_k": 3}')
        self.assertEqual(status, 0, stderr)          # the folders were created
        with open(self.sidecar, encoding="utf-8") as handle:
            recorded = json.load(handle)
        self.assertEqual(recorded, {
            "settings_schema": 1, "tool": "generate.py", "version": common.VERSION,
            "model": "m", "api_url": "http://127.0.0.1:%d/ok/v1" % self.server.port,
            "system_prompt_sha256": None, "temperature": 0.5, "top_p": None,
            "max_tokens": None, "extra_body": {"top_k": 3},
            "input_sha256": common.file_sha256(self.input),
            "prompt": {"source": "column",
                       "sha256": hashlib.sha256(b"You plan routes.").hexdigest()},
            "output": {"ids": 3, "answered": 3, "failed": 0, "empty_answers": 0,
                       "cut_by_token_limit": 0, "models": {"hostile-model": 3}}})
        from transitlm.generate.settings import base_url
        self.assertEqual(base_url("http://user:%s@127.0.0.1:8000/v1/?api-key=%s#f" % (KEY, KEY)),
                         "http://127.0.0.1:8000/v1")
        self.assertEqual(base_url("HTTP://Host:8000/v1/chat/completions/"), "http://host:8000/v1")

    def test_same_settings_resume_other_settings_stop(self):
        status, _, stderr = self.generate("--sample_count", "1")
        self.assertEqual(status, 0, stderr)
        status, stdout, stderr = self.generate()          # more rows, same settings: resumes
        self.assertEqual(status, 0, stderr)
        self.assertIn("already done                    1", stdout)
        before = self.snapshot()
        for extra, named in ((["--temperature", "0.7"], "temperature 0.0 (now 0.7)"),
                             (["--model", "n"], 'model "m" (now "n")'),
                             (["--max_tokens", "5"], "max_tokens null (now 5)"),
                             (["--extra_body", '{"a": 1}'], 'extra_body {} (now {"a": 1})')):
            with self.subTest(named):
                status, _, stderr = self.generate(*extra)    # a later --model wins
                self.assertEqual(status, 2)
                self.assertEqual(stderr.count("\n"), 1, stderr)
                self.assertIn("was made with other settings", stderr)
                self.assertIn(named, stderr)
                self.assertIn("--restart", stderr)
                self.assertEqual(self.snapshot(), before)      # left as it was
        with open(self.input, "a", encoding="utf-8") as handle:
            handle.write("r4,You plan routes.,prompt 4\n")       # another input file
        status, _, stderr = self.generate()
        self.assertEqual(status, 2)
        self.assertIn("input_sha256", stderr)
        asked = len(self.server.seen("ok"))
        status, _, stderr = self.generate("--restart", "--temperature", "0.7")
        self.assertEqual(status, 0, stderr)
        self.assertEqual(len(self.server.seen("ok")) - asked, 4)          # all asked again
        self.assertEqual(len(read_lines(self.out)), 4)
        with open(self.sidecar, encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["temperature"], 0.7)

    def test_thinking_off_is_a_setting(self):
        status, _, stderr = self.generate("--no_thinking", "--sample_count", "1",
                                          "--extra_body", '{"top_k": 1}')
        self.assertEqual(status, 0, stderr)
        request = json.loads(self.server.seen("ok")[-1][3].decode("utf-8"))
        self.assertEqual((request["chat_template_kwargs"], request["top_k"]),
                         ({"enable_thinking": False}, 1))
        with open(self.sidecar, encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["extra_body"], {
                "top_k": 1, "chat_template_kwargs": {"enable_thinking": False}})
        status, _, stderr = self.generate("--extra_body", '{"top_k": 1}')
        self.assertEqual(status, 2)
        self.assertIn("extra_body {\"chat_template_kwargs\": {\"enable_thinking\": false}, "
                      "\"top... (now {\"top_k\": 1})", stderr)
        status, _, stderr = self.generate("--extra_body", '{"top_k": 1, "chat_template_kwargs":'
                                          ' {"enable_thinking": false}}')
        self.assertEqual(status, 0, stderr)      # the same request, spelled out: resumes

    def test_a_settings_file_holding_nan_is_refused(self):
        status, _, stderr = self.generate("--sample_count", "1")
        self.assertEqual(status, 0, stderr)
        with open(self.sidecar, encoding="utf-8") as handle:
            text = handle.read()
        with open(self.sidecar, "w", encoding="utf-8") as handle:
            handle.write(text.replace('"temperature": 0.0', '"temperature": NaN'))
        status, _, stderr = self.generate()
        self.assertEqual(status, 2)
        self.assertEqual(stderr.count("\n"), 1, stderr)
        self.assertIn("is not a settings file of generate.py (not JSON (NaN is not a JSON "
                      "value)); run with --restart", stderr)

    def test_an_output_without_settings_is_refused_unless_adopted(self):
        os.makedirs(os.path.dirname(self.out))
        with open(self.out, "w", encoding="utf-8") as handle:
            handle.write('{"indexid": "r1", "generate_results": "old"}\n')
        before = self.snapshot()
        status, _, stderr = self.generate()
        self.assertEqual(status, 2)
        self.assertEqual(stderr.count("\n"), 1)
        self.assertIn("holds 1 line but no settings file", stderr)
        self.assertIn("--adopt", stderr)
        self.assertEqual(self.snapshot(), before)
        status, _, stderr = self.generate("--adopt")
        self.assertEqual(status, 0, stderr)
        self.assertEqual(read_lines(self.out)[0]["generate_results"], "old")
        self.assertTrue(os.path.exists(self.sidecar))
        status, _, _ = self.generate("--adopt", "--restart")
        self.assertEqual(status, 2)
        with open(self.sidecar, "w") as handle:
            handle.write("[" * 5000)
        status, _, stderr = self.generate()
        self.assertEqual(status, 2)
        self.assertIn("is not a settings file of generate.py", stderr)

    def test_a_run_that_fails_before_any_answer_leaves_nothing(self):
        status, _, stderr = self.generate(url=self.server.url("missing"))
        self.assertEqual(status, 2)
        self.assertEqual(os.listdir(self.dir), ["input.csv"])
        # An orphan settings file is put back as it was; an existing empty output stays.
        os.makedirs(os.path.dirname(self.out))
        with open(self.sidecar, "w") as handle:
            handle.write('{"model": "old"}')
        open(self.out, "w").close()
        before = self.snapshot()
        status, _, stderr = self.generate(url=self.server.url("missing"))
        self.assertEqual(status, 2)
        self.assertEqual(self.snapshot(), before)

    def test_an_interrupted_run_before_any_answer_leaves_nothing(self):
        process = subprocess.Popen(
            [sys.executable, SCRIPT, "--input", self.input, "--api_url",
             self.server.url("hang"), "--model", "m", "--out", self.out],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120       # a bound, never reached when all is well
        while not self.server.seen("hang") and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
        self.assertEqual(process.returncode, 143, stderr)
        self.assertEqual(os.listdir(self.dir), ["input.csv"])

    def test_no_output_replaces_an_input(self):
        system = os.path.join(self.dir, "system.txt")
        with open(system, "w") as handle:
            handle.write("plan")
        link = os.path.join(self.dir, "link.csv")
        os.symlink(self.input, link)
        with open(os.path.join(self.dir, "x.settings.json"), "w") as handle:
            handle.write("prompt")                   # the settings file --out x would write
        before = self.snapshot()
        for extra in (["--out", self.input], ["--out", link],
                      ["--system_prompt_file", system, "--out", system],
                      ["--out", os.path.join(self.dir, "x"), "--system_prompt_file",
                       os.path.join(self.dir, "x.settings.json")],
                      ["--evaluate", "--eval_out", self.input]):
            with self.subTest(extra):
                status, _, stderr = self.generate(*extra)
                self.assertEqual(status, 2, stderr)
                self.assertIn("an output never replaces an input", stderr)
                self.assertEqual(self.snapshot(), before)

    def test_version(self):
        for script in (SCRIPT, os.path.join(REPO, "general_llm", "server.py")):
            done = subprocess.run([sys.executable, script, "--version"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertEqual((done.returncode, done.stdout.decode(), done.stderr),
                             (0, "transitlm %s\n" % common.VERSION, b""), script)


if __name__ == "__main__":
    unittest.main()
