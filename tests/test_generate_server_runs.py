"""generate.py, whole runs against a local OpenAI-compatible stand-in server
(stdlib http.server on 127.0.0.1, port 0) that answers fenced and unfenced
JSON, 429 with Retry-After, 500s, slow answers past the timeout, dropped
connections and a 400 for one row: every row ends with one line, the key is
never written, a resume asks only for what is missing, and the run stops on
what no retry can mend."""

import csv
import json
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

from tests.support.services import (B1, SECRET, StandIn, answers_from, read_csv, read_lines,
                                    run_generate)
from transitlm.generate import chat
from transitlm.generate import runner


# ---------------------------------------------------------------------------
# Whole runs against the stand-in server
# ---------------------------------------------------------------------------

class ServerRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.out = os.path.join(self.dir, "preds.jsonl")
        self.servers = []
        self.answers = answers_from(B1)
        self.rows = read_csv(B1)

    def tearDown(self):
        for server in self.servers:
            server.close()
        self.tmp.cleanup()

    def serve(self, script, key=None):
        server = StandIn(script, key=key)
        self.servers.append(server)
        return server

    def argv(self, server, *extra, **options):
        argv = ["--input", options.get("input", B1), "--api_url", server.url,
                "--model", "stand-in-model", "--out", self.out]
        return argv + list(extra)

    def prompt(self, row):
        return self.rows[row - 1]["sft_prompt"]

    def test_faults_every_row_ends_with_one_line(self):
        rate_limited, flaky, slow, refused, dropped, down = (self.prompt(n) for n in range(1, 7))

        def script(user, nth):
            if user == rate_limited and nth == 1:
                return ("status", 429, "slow down", {"Retry-After": "2"})
            if user == flaky and nth <= 2:
                return ("status", 500, "internal error", None)
            if user == slow and nth == 1:
                return ("slow", 4.0, self.answers[user])
            if user == refused:
                return ("status", 400, "This model's maximum context length is 8192 tokens",
                        None)
            if user == dropped and nth == 1:
                return ("drop",)
            if user == down:
                return ("status", 503, "overloaded", None)
            return ("ok", self.answers[user])

        server = self.serve(script, key=SECRET)
        sleeps = []
        status, stdout, stderr = run_generate(
            self.argv(server, "--timeout", "0.8", "--retries", "3", "--concurrency", "4"),
            environ={"OPENAI_API_KEY": SECRET}, sleep=sleeps.append)
        self.assertEqual(status, 0, stderr)
        lines = read_lines(self.out)
        by_id = {line["indexid"]: line for line in lines}
        self.assertEqual(len(lines), len(self.rows))
        self.assertEqual(set(by_id), set(row["index_id"] for row in self.rows))
        ids = [row["index_id"] for row in self.rows]
        self.assertEqual(by_id[ids[3]]["http_status"], 400)
        self.assertIn("maximum context length", by_id[ids[3]]["error"])
        self.assertEqual(by_id[ids[3]]["attempts"], 1)
        self.assertNotIn("generate_results", by_id[ids[3]])
        self.assertEqual(by_id[ids[5]]["attempts"], 4)
        self.assertIn("HTTP 503: overloaded (gave up after 4 attempts)", by_id[ids[5]]["error"])
        for number in (0, 1, 2, 4):
            self.assertEqual(by_id[ids[number]]["generate_results"],
                             self.answers[self.prompt(number + 1)])
        self.assertEqual(by_id[ids[0]]["attempts"], 2)
        self.assertEqual(by_id[ids[1]]["attempts"], 3)
        self.assertEqual(by_id[ids[2]]["attempts"], 2)
        self.assertEqual(by_id[ids[4]]["attempts"], 2)
        self.assertIn(2.0, sleeps)                           # Retry-After honoured
        first = by_id[ids[6]]
        self.assertEqual(first["model"], "stand-in-model")
        self.assertEqual(first["finish_reason"], "stop")
        self.assertEqual(first["usage"]["total_tokens"], 15)
        self.assertGreaterEqual(first["latency_s"], 0)
        self.assertIn("  failed                          2   ", stdout)
        # 429 once, 500 twice, timeout once, dropped once, 503 three times
        self.assertIn("  retried requests                8\n", stdout)
        for _, auth, _ in server.requests:
            self.assertEqual(auth, "Bearer " + SECRET)

    def test_timeout_bounds_an_answer_that_trickles_in(self):
        trickled = self.prompt(1)

        def script(user, nth):
            if user == trickled and nth == 1:
                return ("trickle", 0.5, self.answers[user])    # over a minute in all
            return ("ok", self.answers[user])

        server = self.serve(script)
        started = time.monotonic()
        status, _, stderr = run_generate(
            self.argv(server, "--timeout", "0.6", "--retries", "2", "--sample_count", "2"),
            sleep=lambda seconds: None)         # the retry's backoff is not what is timed
        elapsed = time.monotonic() - started
        self.assertEqual(status, 0, stderr)
        by_id = {line["indexid"]: line for line in read_lines(self.out)}
        first = by_id[self.rows[0]["index_id"]]
        self.assertEqual(first["generate_results"], self.answers[trickled])
        self.assertEqual(first["attempts"], 2)          # the trickle was cut off, retried
        # The trickled answer alone would take over a minute; the timeout cut it
        # at 0.6 s (the bound leaves a busy machine half a minute to spare).
        self.assertLess(elapsed, 30.0)

    def test_key_never_written(self):
        def script(user, nth):
            if user == self.prompt(1):
                return ("status", 400, "bad request from key %s" % SECRET, None)
            return ("ok", self.answers[user])
        server = self.serve(script, key=SECRET)
        environ = {"MY_KEY": SECRET}
        status, stdout, stderr = run_generate(self.argv(server, "--api_key_env", "MY_KEY"),
                                              environ=environ)
        self.assertEqual(status, 0, stderr)
        with open(self.out, encoding="utf-8") as handle:
            written = handle.read()
        self.assertIn("bad request from key <redacted>", written)
        for text in (stdout, stderr, written):
            self.assertNotIn(SECRET, text)
        status, stdout, stderr = run_generate(self.argv(server, "--dry_run"),
                                              environ={"OPENAI_API_KEY": SECRET})
        self.assertEqual(status, 0)
        self.assertIn("Authorization: Bearer <redacted: $OPENAI_API_KEY>", stdout)
        self.assertNotIn(SECRET, stdout + stderr)

    def test_wrong_key_stops_at_once(self):
        server = self.serve(lambda user, nth: ("ok", self.answers[user]), key=SECRET)
        wrong = "sk-wrong-KEY-987"
        status, stdout, stderr = run_generate(self.argv(server, "--concurrency", "2"),
                                              environ={"OPENAI_API_KEY": wrong})
        self.assertEqual(status, 2)
        self.assertEqual(stderr.count("\n"), 1, stderr)     # the stop (the input has its system_prompt)
        self.assertIn("stopped: %s/chat/completions answered HTTP 401: Incorrect API key "
                      "provided: <redacted> (check the key" % server.url, stderr)
        self.assertNotIn(wrong, stderr + stdout)
        self.assertLessEqual(len(server.requests), 2)
        self.assertEqual(os.listdir(self.dir), [])        # no empty output, no settings file

    def test_unknown_model_and_path_stop(self):
        server = self.serve(lambda user, nth: ("ok", self.answers[user]))
        argv = self.argv(server)
        argv[argv.index("stand-in-model")] = "no-such-model"
        status, _, stderr = run_generate(argv)
        self.assertEqual(status, 2)
        self.assertIn("%s/chat/completions answered HTTP 404: The model `no-such-model` does "
                      "not exist (is --api_url right" % server.url, stderr)
        argv = self.argv(server)
        argv[argv.index(server.url)] = server.url[:-3] + "/v2"
        status, _, stderr = run_generate(argv)
        self.assertEqual(status, 2)
        self.assertIn("/v2/chat/completions answered HTTP 404: no such path", stderr)

    def test_resume_asks_only_for_missing_and_failed_rows(self):
        refused = self.prompt(3)
        fail = [True]

        def script(user, nth):
            if user == refused and fail[0]:
                return ("status", 400, "refused", None)
            return ("ok", self.answers[user])

        server = self.serve(script)
        status, _, stderr = run_generate(self.argv(server, "--sample_count", "5"))
        self.assertEqual(status, 0, stderr)
        self.assertEqual(len(read_lines(self.out)), 5)
        self.assertEqual(len(server.requests), 5)

        del server.requests[:]
        status, stdout, _ = run_generate(self.argv(server, "--no_retry_errors"))
        self.assertEqual(status, 0)
        asked = set(server.users())
        self.assertEqual(asked, set(self.prompt(n) for n in range(6, len(self.rows) + 1)))
        self.assertIn("earlier errors kept", stdout)

        del server.requests[:]
        fail[0] = False
        status, stdout, _ = run_generate(self.argv(server))
        self.assertEqual(status, 0)
        self.assertEqual(server.users(), [refused])
        lines = read_lines(self.out)
        self.assertEqual(len(lines), len(self.rows))
        self.assertTrue(all("generate_results" in line for line in lines))
        self.assertIn("1 superseded line dropped", stdout)

        del server.requests[:]
        status, stdout, _ = run_generate(self.argv(server))
        self.assertEqual(status, 0)
        self.assertEqual(server.requests, [])
        self.assertIn("  already done                   38   (skipped)", stdout)

    def test_partial_last_line_is_dropped(self):
        ids = [row["index_id"] for row in self.rows]
        with open(self.out, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"indexid": ids[0], "generate_results": "old"}) + "\n")
            handle.write('{"indexid": "%s", "generate_res' % ids[1])
        server = self.serve(lambda user, nth: ("ok", self.answers[user]))
        status, _, stderr = run_generate(self.argv(server, "--adopt"))
        self.assertEqual(status, 0, stderr)
        lines = read_lines(self.out)
        self.assertEqual(len(lines), len(self.rows))
        self.assertEqual(lines[0], {"indexid": ids[0], "generate_results": "old"})
        self.assertNotIn(self.prompt(1), server.users())
        self.assertIn(self.prompt(2), server.users())

    def test_duplicate_ids_asked_once(self):
        path = os.path.join(self.dir, "dup.csv")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["indexid", "system_prompt", "sft_prompt"])
            writer.writerow(["a", "You plan routes.", self.prompt(1)])
            writer.writerow(["b", "You plan routes.", self.prompt(2)])
            writer.writerow(["a", "You plan routes.", self.prompt(3)])
        server = self.serve(lambda user, nth: ("ok", self.answers[user]))
        status, _, stderr = run_generate(self.argv(server, input=path))
        self.assertEqual(status, 0, stderr)
        self.assertIn("input repeats 1 id in 1 more row (each id asked once), e.g. a", stderr)
        self.assertEqual(sorted(line["indexid"] for line in read_lines(self.out)), ["a", "b"])
        self.assertEqual(server.users(), [self.prompt(1), self.prompt(2)]
                         if server.users()[0] == self.prompt(1)
                         else [self.prompt(2), self.prompt(1)])
        body = server.requests[0][2]
        self.assertEqual(body["messages"][0], {"role": "system", "content": "You plan routes."})
        self.assertEqual(body["temperature"], 0.0)

    def test_system_prompt_file_and_sampling_options(self):
        system = os.path.join(self.dir, "system.txt")
        with open(system, "w", encoding="utf-8") as handle:
            handle.write("你是路线规划助手。")
        server = self.serve(lambda user, nth: ("ok", self.answers[user]))
        status, _, stderr = run_generate(self.argv(
            server, "--sample_count", "1", "--system_prompt_file", system, "--temperature",
            "0.7", "--max_tokens", "512", "--top_p", "0.9", "--extra_body",
            '{"chat_template_kwargs": {"enable_thinking": false}}', "--rate_limit", "50"))
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("system_prompt column", stderr)
        body = server.requests[0][2]
        self.assertEqual(body["messages"], [{"role": "system", "content": "你是路线规划助手。"},
                                            {"role": "user", "content": self.prompt(1)}])
        self.assertEqual((body["temperature"], body["max_tokens"], body["top_p"]),
                         (0.7, 512, 0.9))
        self.assertEqual(body["chat_template_kwargs"], {"enable_thinking": False})
        self.assertIs(body["stream"], False)

    def test_unreachable_server_stops_the_run(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()                       # nothing listens there now
        status, _, stderr = run_generate(
            ["--input", B1, "--api_url", "http://127.0.0.1:%d/v1" % port, "--model", "m",
             "--out", self.out, "--retries", "2", "--concurrency", "2"], sleep=lambda s: None)
        self.assertEqual(status, 2)
        self.assertIn("stopped: cannot connect to http://127.0.0.1:%d/v1/chat/completions: "
                      "[Errno 111] Connection refused (3 attempts, no request of this run "
                      "answered)" % port, stderr)
        self.assertEqual(os.listdir(self.dir), [])        # no empty output, no settings file

    def test_dropped_connections_after_answers_are_row_errors(self):
        """Once the server has answered, a row that keeps failing is that row's error."""
        dropped = self.prompt(5)

        def script(user, nth):
            return ("drop",) if user == dropped else ("ok", self.answers[user])
        server = self.serve(script)
        status, _, stderr = run_generate(self.argv(server, "--retries", "1", "--concurrency",
                                                   "1"), sleep=lambda s: None)
        self.assertEqual(status, 0, stderr)
        errors = [line for line in read_lines(self.out) if "error" in line]
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0]["error"], "connection closed without an answer "
                                             "(gave up after 2 attempts)")
        self.assertIsNone(errors[0]["http_status"])

    def test_dry_run_sends_nothing(self):
        server = self.serve(lambda user, nth: ("ok", self.answers[user]))
        status, stdout, _ = run_generate(self.argv(server, "--dry_run"))
        self.assertEqual(status, 0)
        self.assertEqual(server.requests, [])
        self.assertFalse(os.path.exists(self.out))
        self.assertTrue(stdout.startswith("POST %s/chat/completions\n" % server.url))
        self.assertIn("(no Authorization header: $OPENAI_API_KEY is not set)", stdout)
        self.assertIn("first of 38 rows to ask (id %s)" % self.rows[0]["index_id"], stdout)

    def test_usage_problems_exit_2_with_one_line(self):
        server = self.serve(lambda user, nth: ("ok", ""))
        not_json = self.argv(server, "--extra_body", '{"x": NaN}')
        thinking = self.argv(server, "--no_thinking", "--extra_body",
                             '{"chat_template_kwargs": {"enable_thinking": true}}')
        empty_key = self.argv(server, "--api_key_env", "EMPTY_KEY")
        cases = [
            ["--input", B1, "--api_url", server.url, "--model", "m"],          # no --out
            self.argv(server, "--extra_body", "{bad"),
            self.argv(server, "--extra_body", "[1]"),
            self.argv(server, "--extra_body", "[" * 100000),
            self.argv(server, "--extra_body", '{"stream": true}'),
            not_json, thinking, empty_key,
            self.argv(server, "--extra_body", '{"x": [1e999]}'),         # not a float
            self.argv(server, "--concurrency", "0"),
            self.argv(server, "--api_key_env", "NOT_SET_ANYWHERE"),
            self.argv(server, "--system_prompt_file", os.path.join(self.dir, "absent")),
            self.argv(server, input=os.path.join(self.dir, "absent.csv")),
            ["--input", B1, "--api_url", "ftp://x", "--model", "m", "--out", self.out],
            ["--input", B1, "--api_url", server.url, "--model", "m", "--out", self.dir],
            ["--input", B1, "--api_url", server.url, "--model", "m", "--out", os.devnull],
            ["--input", B1, "--api_url", server.url, "--model", "m", "--out",
             os.path.join(B1, "p.jsonl")],                         # under a file
        ]
        for argv in cases:
            status, stdout, stderr = run_generate(argv, environ={"EMPTY_KEY": ""})
            self.assertEqual(status, 2, argv)
            self.assertEqual(stderr.count("\n"), 1, (argv, stderr))
            self.assertTrue(stderr.startswith("generate.py: "), stderr)
        self.assertEqual(server.requests, [])
        for argv, words in ((empty_key, "--api_key_env EMPTY_KEY: that environment variable is "
                                        "empty"),
                            (not_json, "--extra_body is not JSON (NaN is not a JSON value)"),
                            (thinking, "--extra_body asks for enable_thinking true and "
                                       "--no_thinking for false")):
            self.assertIn(words, run_generate(argv, environ={"EMPTY_KEY": ""})[2])
        status, stdout, stderr = run_generate(self.argv(server, "--dry_run"),
                                              environ={"OPENAI_API_KEY": " "})
        self.assertIn("(no Authorization header: $OPENAI_API_KEY is empty)", stdout)
        self.assertIn("note: $OPENAI_API_KEY is set but empty", stderr)

    @unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full (a full disk)")
    def test_write_failure_stops_the_run(self):
        class Instant(object):
            def post(self, url, data, headers):
                return chat.Answer(200, {}, json.dumps(
                    {"choices": [{"message": {"content": "x"}}]}).encode())
        settings = runner.Settings("http://unused", {}, "m", {}, {}, None, 0, 1.0, 1.0, None)
        writer = runner.LineWriter("/dev/full")
        run = runner.Run(settings, Instant(), writer, concurrency=2, rate_limit=None)
        run.start()
        fed = run.feed(iter([("a", "", "p"), ("b", "", "p"), ("c", "", "p")]))
        self.assertFalse(run.join() and fed)
        self.assertTrue(run.fatal.startswith("cannot write the output file: "), run.fatal)
        writer.close()

    def test_bounded_work_queue(self):
        """A huge input is read only as fast as rows are asked for."""
        release = threading.Event()
        consumed = [0]

        class Blocking(object):
            def post(self, url, data, headers):
                release.wait(10)
                return chat.Answer(200, {}, json.dumps(
                    {"choices": [{"message": {"content": "x"}}]}).encode())

        def rows():
            for number in range(100000):
                consumed[0] += 1
                yield "id%d" % number, "", "prompt"

        settings = runner.Settings("http://unused", {}, "m", {}, {}, None, 0, 1.0, 1.0, None)
        writer = runner.LineWriter(self.out)
        run = runner.Run(settings, Blocking(), writer, concurrency=3, rate_limit=None)
        run.start()
        feeder = threading.Thread(target=run.feed, args=(rows(),), daemon=True)
        feeder.start()
        deadline = time.monotonic() + 60
        while run.stats.in_flight < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        # 3 in flight + 6 queued + 1 waiting to be queued
        self.assertLessEqual(consumed[0], 10)
        run.request_stop(signal.SIGTERM)
        release.set()
        feeder.join(5)
        self.assertFalse(feeder.is_alive())
        writer.close()


if __name__ == "__main__":
    unittest.main()
