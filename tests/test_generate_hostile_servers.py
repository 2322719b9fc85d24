"""generate.py against misbehaving servers (issue 23): redirects to another
origin or scheme not followed, a POST never replayed as a GET, redirect loops
and slow hops bounded, the key redacted wherever a server echoes it,
Retry-After in any form, answers that are not answers retried, hostile lines
in an output to resume, keys that cannot be a header, an input row too
large."""

import json
import os
import shutil
import tempfile
import time
import unittest

from tests.support.services import (HOSTILE_KEY as KEY, HostileServer as Hostile, completion,
                                    raw_answer, read_lines, run_generate, write_input)

DEEP = b"[" * 100000 + b"]" * 100000


class HostileServers(unittest.TestCase):
    """generate.py against servers that redirect, echo the key, or answer
    with something that is not an answer (servers started once)."""

    @classmethod
    def setUpClass(cls):
        cls.other = Hostile(cls.behave_other)        # another origin: must see nothing
        cls.hostile = Hostile(cls.behave)

    @classmethod
    def tearDownClass(cls):
        cls.hostile.close()
        cls.other.close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.input = write_input(self.dir)
        self.out = os.path.join(self.dir, "new", "folder", "preds.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    @staticmethod
    def behave_other(handler, case, nth, body):
        raw_answer(handler, "HTTP/1.1 200 OK", [("Content-Type", "application/json")],
                   completion("answer from another origin"))

    @classmethod
    def behave(cls, handler, case, nth, body):
        port, other = cls.hostile.port, cls.other.port
        if case.startswith("to_other_"):                       # to_other_302 ...
            code = int(case.split("_")[-1])
            raw_answer(handler, "HTTP/1.1 %d Moved" % code,
                       [("Location", "http://127.0.0.1:%d/v1/chat/completions" % other)])
        elif case == "to_https":
            raw_answer(handler, "HTTP/1.1 307 Temporary Redirect",
                       [("Location", "https://127.0.0.1:%d/ok/v1/chat/completions" % port)])
        elif case == "to_localhost":                         # another host, same port
            raw_answer(handler, "HTTP/1.1 308 Permanent Redirect",
                       [("Location", "http://localhost:%d/ok/v1/chat/completions" % port)])
        elif case.startswith("same_"):                         # same_302 ...
            raw_answer(handler, "HTTP/1.1 %s Moved" % case.split("_")[1],
                       [("Location", "/ok/v1/chat/completions")])
        elif case == "loop":
            raw_answer(handler, "HTTP/1.1 307 Again", [("location", "/loop/v1/x")])
        elif case == "slow_hops":          # each hop within --timeout, the chain not
            time.sleep(0.3)
            raw_answer(handler, "HTTP/1.1 307 Again", [("Location", "/slow_hops/v1/x")])
        elif case == "key_location":
            raw_answer(handler, "HTTP/1.1 302 Found",
                       [("Location", "http://127.0.0.1:%d/%s" % (other, KEY))])
        elif case == "ok":
            raw_answer(handler, "HTTP/1.1 200 OK", [], completion("the route"))
        elif case == "echo":                    # the key everywhere a server can put it
            raw_answer(handler, "HTTP/1.1 200 OK %s" % KEY, [("X-Echo", KEY)], json.dumps({
                "model": "m-" + KEY, "choices": [{"finish_reason": {KEY: KEY}, "message": {
                    "content": "your key is %s, really %s" % (KEY, KEY)}}],
                "usage": {"note": [KEY]}}).encode())
        elif case == "nan":                     # not JSON, as Python's json writes it
            raw_answer(handler, "HTTP/1.1 200 OK", [], (
                b'{"model": "m", "choices": [{"finish_reason": "stop", "message": {"content": '
                b'"the route"}, "logprobs": {"content": [{"logprob": -Infinity}]}}], '
                b'"usage": {"prompt_tokens": NaN, "completion_tokens": 1e999}}'))
        elif case == "echo_error":             # a refusal of its own for each row
            prefix = "bad key %d " % nth
            padding = "x" * (282 - len(prefix))   # the key straddles the cut of a message
            raw_answer(handler, "HTTP/1.1 400 Bad %s" % KEY, [],
                       json.dumps({"error": {"message": prefix + padding + KEY}}).encode())
        elif case == "echo_status":
            handler.wfile.write(("HTTP/1.1 2x0 %s\r\n\r\n" % KEY).encode())
        elif case == "echo_fatal":
            raw_answer(handler, "HTTP/1.1 401 %s" % KEY, [],
                       json.dumps({"error": {"message": "key \x1b[31m%s\x1b[0m refused" % KEY}}
                                  ).encode())
        elif case.startswith("retry_after_"):
            forms = {"overflow": "Wed, 21 Oct 9999999999999999999999 07:28:00 GMT",
                     "year": "Wed, 21 Oct 99999 07:28:00 GMT", "huge": "9" * 400,
                     "negative": "-5", "garbage": "\x7fsoon",
                     "past": "Wed, 21 Oct 2015 07:28:00 GMT",
                     "offset": "Wed, 21 Oct 2015 07:28:00 +9999", "inf": "1e999"}
            if nth % 2:
                raw_answer(handler, "HTTP/1.1 429 Slow Down",
                           [("Retry-After", forms[case[len("retry_after_"):]])], b"{}")
            else:
                raw_answer(handler, "HTTP/1.1 200 OK", [], completion("after the wait"))
        elif case in ("deep", "deep_error", "wide", "huge_declared", "huge_chunked",
                      "many_headers", "long_header", "drip"):
            if nth % 2 == 0:
                return raw_answer(handler, "HTTP/1.1 200 OK", [], completion("good"))
            if case == "deep":
                raw_answer(handler, "HTTP/1.1 200 OK", [], DEEP)
            elif case == "deep_error":
                raw_answer(handler, "HTTP/1.1 500 Oops", [], DEEP)
            elif case == "wide":
                raw_answer(handler, "HTTP/1.1 200 OK", [], b"[" + b"[]," * 1100000 + b"[]]")
            elif case == "huge_declared":
                raw_answer(handler, "HTTP/1.1 200 OK", [("Content-Length", "10" * 9)])
            elif case == "huge_chunked":
                raw_answer(handler, "HTTP/1.1 200 OK", [("Transfer-Encoding", "chunked")])
                chunk = b"x" * (1 << 20)
                for _ in range(40):
                    handler.wfile.write(b"100000\r\n" + chunk + b"\r\n")
            elif case == "many_headers":
                raw_answer(handler, "HTTP/1.1 200 OK", [("X-%d" % n, "v") for n in range(200)],
                           completion("never read"))
            elif case == "long_header":
                raw_answer(handler, "HTTP/1.1 200 OK", [("X-Long", "v" * 70000)],
                           completion("never read"))
            elif case == "drip":
                for byte in b"HTTP/1.1 200 OK\r\n":
                    handler.wfile.write(bytes([byte]))
                    handler.wfile.flush()
                    time.sleep(0.1)
        else:
            raw_answer(handler, "HTTP/1.1 404 Not Found", [], b'{"error": "no such case"}')

    def generate(self, case, *extra, **kwargs):
        argv = ["--input", self.input, "--api_url", self.hostile.url(case), "--model", "m",
                "--out", self.out, "--retries", "1", "--timeout", "2"] + list(extra)
        status, stdout, stderr = run_generate(argv, environ={"OPENAI_API_KEY": KEY},
                                              sleep=kwargs.get("sleep", lambda s: None))
        written = ""
        for path in (self.out, self.out + ".settings.json"):
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as handle:
                    written += handle.read()
        for text in (stdout, stderr, written):
            self.assertNotIn(KEY[:12], text)           # not even the start of the key
            self.assertNotIn("Traceback", text)
        return status, stdout, stderr

    def assert_nothing_left(self):
        self.assertEqual(os.listdir(self.dir), ["input.csv"])

    def test_redirect_to_another_origin_is_not_followed(self):
        for case in ("to_other_301", "to_other_302", "to_other_303", "to_other_307",
                     "to_other_308", "to_https", "to_localhost"):
            with self.subTest(case):
                status, _, stderr = self.generate(case)
                self.assertEqual(status, 2, stderr)
                self.assertEqual(stderr.count("\n"), 1, stderr)
                self.assertIn("not followed", stderr)
                self.assertIn("only to http://127.0.0.1:%d" % self.hostile.port, stderr)
                self.assert_nothing_left()
        self.assertEqual(self.other.requests, [])
        self.assertFalse([r for r in self.hostile.requests if r[1].startswith("/ok/")])

    def test_same_origin_307_308_keep_the_post(self):
        for code in ("307", "308"):
            with self.subTest(code):
                before = len(self.hostile.seen("ok"))
                status, _, stderr = self.generate("same_" + code)
                self.assertEqual(status, 0, stderr)
                self.assertEqual([line["generate_results"] for line in read_lines(self.out)],
                                 ["the route", "the route"])
                redirected = self.hostile.seen("ok")[before:]
                self.assertEqual(len(redirected), 2)
                for method, _, auth, body in redirected:
                    self.assertEqual((method, auth), ("POST", "Bearer " + KEY))
                    self.assertIn(json.loads(body.decode())["messages"][-1]["content"],
                                  ("prompt 1", "prompt 2"))
                os.unlink(self.out)

    def test_a_post_is_never_replayed_as_a_get(self):
        for code in ("301", "302", "303"):
            with self.subTest(code):
                status, _, stderr = self.generate("same_" + code)
                self.assertEqual(status, 2, stderr)
                self.assertIn("a POST is never sent again as a GET", stderr)
                self.assert_nothing_left()
        self.assertFalse([r for r in self.hostile.requests if r[0] != "POST"])
        self.assertFalse([r for r in self.hostile.requests if r[1].startswith("/ok/")])

    def test_redirect_loop_stops(self):
        status, _, stderr = self.generate("loop")
        self.assertEqual(status, 2, stderr)
        self.assertIn("more than 5 redirects", stderr)
        self.assertLessEqual(len(self.hostile.seen("loop")), 6 * 2)

    def test_timeout_bounds_the_whole_redirected_request(self):
        status, _, stderr = self.generate("slow_hops", "--timeout", "0.8", "--retries", "0",
                                          "--sample_count", "1")
        self.assertEqual(status, 2, stderr)           # nothing ever answered: a fatal stop
        self.assertIn("no answer within 0.8 s", stderr)
        # Each hop takes the server 0.3 s: within 0.8 s a client can send at
        # most 3 (at 0, 0.3 and 0.6 s; fewer on a slow machine, never more),
        # where one that timed each hop apart would follow all six.
        self.assertLessEqual(len(self.hostile.seen("slow_hops")), 3)

    def test_key_in_a_redirect_location_is_redacted(self):
        status, _, stderr = self.generate("key_location")
        self.assertEqual(status, 2)
        self.assertIn("<redacted>", stderr)

    def test_key_echoed_in_an_answer_is_redacted(self):
        status, _, stderr = self.generate("echo")
        self.assertEqual(status, 0, stderr)
        line = read_lines(self.out)[0]
        self.assertEqual(line["generate_results"], "your key is <redacted>, really <redacted>")
        self.assertEqual(line["model"], "m-<redacted>")
        self.assertEqual(line["finish_reason"], {"<redacted>": "<redacted>"})
        self.assertEqual(line["usage"], {"note": ["<redacted>"]})

    def test_key_echoed_in_errors_is_redacted(self):
        status, _, stderr = self.generate("echo_error")
        self.assertEqual(status, 0, stderr)
        errors = [line["error"] for line in read_lines(self.out)]
        self.assertTrue(all(error.startswith("HTTP 400: bad key ") for error in errors), errors)
        shutil.rmtree(os.path.join(self.dir, "new"))
        status, _, stderr = self.generate("echo_status")   # a malformed status line
        self.assertEqual(status, 2, stderr)                  # nothing ever answered in HTTP
        self.assertIn("BadStatusLine: HTTP/1.1 2x0 <redacted>", stderr)
        status, _, stderr = self.generate("echo_fatal")
        self.assertEqual(status, 2)
        self.assertIn("answered HTTP 401: key \\x1b[31m<redacted>\\x1b[0m refused", stderr)
        self.assert_nothing_left()

    def test_what_is_written_is_strict_json(self):
        status, _, stderr = self.generate("nan")
        self.assertEqual(status, 0, stderr)
        for path in (self.out, self.out + ".settings.json"):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            for line in ([text] if path.endswith(".json") else text.splitlines()):
                json.loads(line, parse_constant=lambda name: self.fail("%s in %s" % (name, path)))
        line = read_lines(self.out)[0]
        self.assertEqual((line["generate_results"], line["usage"]),
                         ("the route", {"prompt_tokens": None, "completion_tokens": None}))

    def test_retry_after_in_any_form_is_retried(self):
        expected = {"overflow": None, "year": None, "huge": 600.0, "negative": 0.0,
                    "garbage": None, "past": 0.0, "offset": None, "inf": 600.0}
        for form, wait in expected.items():
            with self.subTest(form):
                self.out = os.path.join(self.dir, form, "preds.jsonl")
                sleeps = []
                status, _, stderr = self.generate("retry_after_" + form, "--sample_count", "1",
                                                  "--backoff", "0.25", sleep=sleeps.append)
                self.assertEqual(status, 0, stderr)
                line = read_lines(self.out)[0]
                self.assertEqual((line["generate_results"], line["attempts"]),
                                 ("after the wait", 2))
                if wait is None:                       # unreadable: the backoff instead
                    self.assertTrue(0 <= sleeps[-1] <= 0.25, sleeps)
                elif wait:
                    self.assertIn(wait, sleeps)
                else:                                  # retried at once
                    self.assertFalse([seconds for seconds in sleeps if seconds > 0], sleeps)

    def test_answers_that_are_not_answers_are_retried(self):
        for case in ("deep", "deep_error", "wide", "huge_declared", "huge_chunked",
                     "many_headers", "long_header", "drip"):
            with self.subTest(case):
                self.out = os.path.join(self.dir, case, "preds.jsonl")
                # The drip sends a byte every 0.1 s: 0.5 s cuts it short.
                status, _, stderr = self.generate(case, "--sample_count", "1",
                                                  "--timeout", "0.5" if case == "drip" else "1")
                self.assertEqual(status, 0, stderr)
                line = read_lines(self.out)[0]
                self.assertEqual((line.get("generate_results"), line["attempts"]), ("good", 2),
                                 line)

    def test_resuming_onto_hostile_lines(self):
        os.makedirs(os.path.dirname(self.out))
        for data in (b'{"indexid": "r1", "generate_results": ' + DEEP + b"}\n",
                     b'{"indexid": "r1", "usage": ' + b"[0," * 1100000 + b"0]}\n",
                     b"\xff\xfe\n", b"{" * 100000 + b"\n",
                     b'{"indexid": "r1", "generate_results": "x", "usage": NaN}\n'):
            with self.subTest(data[:30]):
                with open(self.out, "wb") as handle:
                    handle.write(data)
                status, _, stderr = self.generate("ok", "--adopt")
                self.assertEqual(status, 2)
                self.assertEqual(stderr.count("\n"), 1, stderr)
                self.assertIn("line 1 is not a result or error line of generate.py", stderr)
                with open(self.out, "rb") as handle:
                    self.assertEqual(handle.read(), data)
                self.assertFalse(os.path.exists(self.out + ".settings.json"))

    def test_a_key_that_cannot_be_a_header_is_refused(self):
        for key in ("sk-abc\ndef-SECRETPART", "sk abc SECRETPART", "sk-\x85SECRETPART"):
            with self.subTest(repr(key)):
                status, _, stderr = run_generate(
                    ["--input", self.input, "--api_url", self.hostile.url("ok"), "--model",
                     "m", "--out", self.out], environ={"OPENAI_API_KEY": key})
                self.assertEqual(status, 2)
                self.assertEqual(stderr.count("\n"), 1, stderr)
                self.assertIn("cannot be sent in an HTTP header", stderr)
                self.assertNotIn("SECRETPART", stderr)
                self.assert_nothing_left()

    def test_an_input_row_too_large_is_a_file_problem(self):
        from transitlm.io import csv_rows
        from transitlm.generate import runner
        path = os.path.join(self.dir, "big.csv")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('indexid,sft_prompt\nr1,"%s\n%s"\n' % ("x" * 600, "y" * 600))
        limit = csv_rows.MAX_ROW_CHARS
        csv_rows.MAX_ROW_CHARS = 1000
        try:
            with self.assertRaises(runner.UsageError) as ctx:
                runner.scan_input(path)
        finally:
            csv_rows.MAX_ROW_CHARS = limit
        self.assertIn("holds more than 1000 characters", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
