"""generate.py's pure helpers, by hand: transitlm.generate.chat (server
messages, redaction, the request body, thinking off, the URL, reading an
answer and its reasoning, token counts, transport failures),
transitlm.generate.waits (backoff, Retry-After and the rate-limit headers,
the shared limiter), transitlm.generate.failures (status classes, context
overflows, the first answers held) and transitlm.generate.runner
(durations, the progress line, the run folder's name, the summary)."""

import io
import json
import socket
import unittest

from transitlm.io import http_client
from transitlm.generate import chat, failures, runner, waits


class Helpers(unittest.TestCase):
    def test_backoff_full_jitter_capped(self):
        self.assertEqual(waits.backoff_delay(0, base=1.0, cap=60, rng=lambda: 1.0), 1.0)
        self.assertEqual(waits.backoff_delay(3, base=1.0, cap=60, rng=lambda: 1.0), 8.0)
        self.assertEqual(waits.backoff_delay(3, base=1.0, cap=60, rng=lambda: 0.5), 4.0)
        self.assertEqual(waits.backoff_delay(10, base=1.0, cap=60, rng=lambda: 1.0), 60)
        self.assertEqual(waits.backoff_delay(5000, base=1.0, cap=60, rng=lambda: 1.0), 60)
        self.assertEqual(waits.backoff_delay(2, base=0.5, cap=60, rng=lambda: 0.0), 0.0)

    def test_retry_after_seconds_and_dates(self):
        self.assertEqual(waits.parse_retry_after("2"), 2.0)
        self.assertEqual(waits.parse_retry_after(" 0.5 "), 0.5)
        self.assertEqual(waits.parse_retry_after("-3"), 0.0)
        self.assertEqual(waits.parse_retry_after("99999"), waits.MAX_SERVER_WAIT_S)
        self.assertIsNone(waits.parse_retry_after(None))
        self.assertIsNone(waits.parse_retry_after(""))
        self.assertIsNone(waits.parse_retry_after("soon"))
        self.assertIsNone(waits.parse_retry_after("nan"))
        # Wed, 21 Oct 2015 07:28:00 GMT = 1445412480
        date = "Wed, 21 Oct 2015 07:28:00 GMT"
        self.assertEqual(waits.parse_retry_after(date, now=1445412480 - 30), 30.0)
        self.assertEqual(waits.parse_retry_after(date, now=1445412480 + 30), 0.0)

    def test_server_wait_reads_every_header_that_says_when(self):
        wait = waits.server_wait
        self.assertEqual(wait({"llm_provider-retry-after": "60"}), 60.0)       # LiteLLM rpm
        self.assertEqual(wait({"retry-after": "60", "rate_limit_type": "requests",
                               "reset_at": "2026-11-26 08:02:46 UTC"}), 60.0)
        self.assertEqual(wait({"llm_provider-retry-after": "7",
                               "llm_provider-retry-after-ms": "7000"}), 7.0)
        self.assertEqual(wait({"Retry-After-Ms": "250", "Retry-After": "9"}), 0.25)
        self.assertEqual(wait({"x-ratelimit-reset-requests": "1m30.5s",
                               "x-ratelimit-reset-tokens": "20ms"}), 90.5)
        self.assertEqual(wait({"llm_provider-x-ratelimit-reset-requests": "7s"}), 7.0)
        self.assertEqual(wait({"X-RateLimit-Reset": "1445412510"}, now=1445412480), 30.0)
        self.assertEqual(wait({"x-ratelimit-reset": "2h"}), waits.MAX_SERVER_WAIT_S)
        self.assertEqual(wait({"Retry-After": "soon", "x-ratelimit-reset-requests": "3s"}),
                         3.0)
        for headers in ({}, {"x-ratelimit-reset-requests": "7 s"},
                        {"x-ratelimit-reset-tokens": "1m1x"}, {"retry-after-ms": "Wed"},
                        {"x-ratelimit-limit-requests": "5"}):
            self.assertIsNone(wait(headers), headers)

    def test_a_429_pauses_every_thread(self):
        now, draws = [100.0], iter([0.0, 1.0, 0.0])
        limiter = waits.RateLimiter(None, clock=lambda: now[0], base=1.0, cap=60.0,
                                    rng=lambda: next(draws))
        self.assertEqual(limiter.throttled(60.0), 60.0)
        self.assertEqual(limiter.reserve(), 60.0)           # any thread's next start
        self.assertEqual(limiter.throttled(None), 60.0)      # already pausing: not doubled
        now[0] += 60.0
        self.assertEqual(limiter.throttled(None), 0.5)      # half the backoff at least
        now[0] += 1.0
        self.assertEqual(limiter.throttled(None), 2.0)      # doubled: 2 x 1.0
        limiter.answered()
        now[0] += 5.0
        self.assertEqual(limiter.throttled(None), 0.5)      # an answer came: afresh

    def test_failures_row_refusals_and_first_answers(self):
        row = failures.refuses_the_row
        for body in (b'{"error":{"message":"This model\'s maximum context length is 2048 '
                     b'tokens.","code":"context_length_exceeded"}}',
                     b'{"error":{"code":400,"message":"request (3031 tokens) exceeds the '
                     b'available context size (2048 tokens)","type":"exceed_context_size_error"}}',
                     b'{"error":{"message":"litellm.ContextWindowExceededError: x","code":"400"}}',
                     b'{"error":{"message":"filtered","code":"content_filter"}}',
                     b'{"error":{"message":"too long","code":"string_above_max_length"}}',
                     b"The input (5000 tokens) is longer than the model's context length"):
            self.assertTrue(row(body), body)
        for body in (b'{"error":{"message":"No connected db.","code":"400"}}', b"", b"\xff"):
            self.assertFalse(row(body), body)
        self.assertTrue(failures.fixed_answer(500))
        self.assertFalse(failures.fixed_answer(503))
        gate = failures.FirstAnswers(10)
        self.assertEqual(gate.offer("a", (400, "x")), [])
        self.assertEqual(gate.offer("b", (400, "x")), [])
        self.assertEqual(gate.offer("c", (400, "x")), [])
        self.assertEqual(gate.stopped, (400, "x", 3))
        self.assertEqual(gate.offer("d", None), [])           # stopped: nothing more
        gate = failures.FirstAnswers(10)
        self.assertEqual(gate.offer("a", (400, "x")), [])
        self.assertEqual(gate.offer("b", (400, "y")), ["a", "b"])   # not alike: let through
        self.assertEqual(gate.offer("c", (400, "y")), ["c"])
        gate = failures.FirstAnswers(1)
        self.assertEqual(gate.offer("a", (422, "x")), [])
        self.assertEqual(gate.stopped, (422, "x", 1))
        self.assertEqual(failures.FirstAnswers(0).offer("a", (400, "x")), ["a"])

    def test_thinking_off_merges_into_extra_body(self):
        self.assertEqual(chat.thinking_off({}), chat.THINKING_OFF)
        extra = {"top_k": 1, "chat_template_kwargs": {"add_generation_prompt": True}}
        self.assertEqual(chat.thinking_off(extra), {"top_k": 1, "chat_template_kwargs": {
            "add_generation_prompt": True, "enable_thinking": False}})
        self.assertEqual(extra["chat_template_kwargs"], {"add_generation_prompt": True})
        for bad in ({"chat_template_kwargs": {"enable_thinking": True}},
                    {"chat_template_kwargs": "x"}):
            with self.assertRaises(ValueError):
                chat.thinking_off(bad)

    def test_strict_json(self):
        from transitlm.io import bounded_json
        for text in ('{"x": NaN}', "[Infinity]", "[-Infinity]", "[1e999]",
                     "[%s]" % ("9" * 5000)):
            with self.assertRaises(ValueError, msg=text):
                bounded_json.loads_bounded(text, strict=True)
            bounded_json.loads_bounded(text)                 # read leniently otherwise
        self.assertEqual(bounded_json.finite({"a": [float("nan"), 1.5, float("-inf")]}),
                         {"a": [None, 1.5, None]})
        value = {"a": [1.0, "x"]}
        self.assertIs(bounded_json.finite(value), value)

    def test_classify_status(self):
        self.assertEqual(failures.classify_status(200), "ok")
        for code in (429, 408, 409, 500, 502, 503, 504, 599):
            self.assertEqual(failures.classify_status(code), "retry", code)
        for code in (401, 403, 404):
            self.assertEqual(failures.classify_status(code), "fatal", code)
        for code in (400, 413, 422):
            self.assertEqual(failures.classify_status(code), "row_error", code)
        for code in (301, 307):
            self.assertEqual(failures.classify_status(code), "redirect", code)

    def test_server_message(self):
        self.assertEqual(chat.server_message(b'{"error": {"message": "too  long\\n x"}}'),
                         "too long x")
        self.assertEqual(chat.server_message(b'{"error": "bad"}'), "bad")
        self.assertEqual(chat.server_message(b'{"detail": "nope"}'), "nope")
        self.assertEqual(chat.server_message(b'{"detail": [{"loc": 1}]}'), '[{"loc": 1}]')
        self.assertEqual(chat.server_message(b"<html>Bad Gateway</html>"),
                         "<html>Bad Gateway</html>")
        self.assertEqual(chat.server_message(b""), "(empty answer)")
        self.assertEqual(len(chat.server_message(b"x" * 5000)), chat.MESSAGE_LIMIT)
        self.assertEqual(chat.server_message(b"\xff\xfe"), "\ufffd\ufffd")

    def test_redact(self):
        self.assertEqual(chat.redact("key sk-1 and sk-1", "sk-1"),
                         "key <redacted> and <redacted>")
        self.assertEqual(chat.redact("text", None), "text")
        self.assertEqual(chat.redact("", "k"), "")

    def test_build_body(self):
        body = chat.build_body("m", "sys", "user", {"temperature": 0.0, "max_tokens": None,
                                                        "top_p": 0.9}, {"top_k": 5, "top_p": 1})
        self.assertEqual(body, {"model": "m", "stream": False, "temperature": 0.0,
                                "top_p": 1, "top_k": 5,
                                "messages": [{"role": "system", "content": "sys"},
                                             {"role": "user", "content": "user"}]})
        body = chat.build_body("m", "", "u", {}, None)
        self.assertEqual(body["messages"], [{"role": "user", "content": "u"}])
        self.assertNotIn("temperature", body)

    def test_chat_url(self):
        self.assertEqual(chat.chat_url("http://h:8000/v1"), "http://h:8000/v1/chat/completions")
        self.assertEqual(chat.chat_url("http://h:8000/v1/ "), "http://h:8000/v1/chat/completions")
        self.assertEqual(chat.chat_url("https://a/v1/chat/completions"),
                         "https://a/v1/chat/completions")

    def test_a_bad_api_url_is_named_for_what_is_wrong(self):
        # Issue 46.6: a port out of range is said to be one, with no remark
        # about credentials; that remark only where the URL holds some.
        from tests.support.services import B1, run_generate
        for url, words in (
                ("http://127.0.0.1:99999/v1", "its port 99999 is out of range (a port is 1 to "
                                              "65535)"),
                ("http://127.0.0.1:0/v1", "its port 0 is out of range"),
                ("http://[::1]:70000/v1", "its port 70000 is out of range"),
                ("http://127.0.0.1:8k/v1", "its port '8k' is not a number"),
                ("http:///v1", "it names no host"),
                ("http://[::1/v1", "it cannot be read as a URL"),
                ("http://user:secret@127.0.0.1:8000/v1",
                 "it holds a user name or password (user:password@): the key goes in "
                 "$OPENAI_API_KEY, not in the URL")):
            with self.subTest(url=url):
                self.assertIsNone(http_client.origin(chat.chat_url(url)))
                status, stdout, stderr = run_generate(["--input", B1, "--api_url", url,
                                                       "--model", "m", "--dry_run"])
                self.assertEqual((status, stdout), (2, ""))
                self.assertEqual(stderr.count("\n"), 1, stderr)
                self.assertTrue(stderr.startswith("generate.py: --api_url "), stderr)
                self.assertIn("is not the URL of a host generate.py can ask: " + words, stderr)
                self.assertNotIn("secret", stderr)
                if "@" not in url:
                    self.assertNotIn("password", stderr)
                    self.assertNotIn("key", stderr)
        for url in ("http://127.0.0.1:65535/v1", "https://h/v1", "http://[::1]:8000/v1"):
            self.assertIsNone(http_client.url_problem(url), url)
            self.assertIsNotNone(http_client.origin(url), url)
        self.assertEqual(http_client.origin("http://h/v1"), ("http", "h", 80))

    def test_parse_completion(self):
        answer = {"model": "q", "usage": {"total_tokens": 3},
                  "choices": [{"finish_reason": "length", "message": {"content": "hi"}}]}
        found = chat.parse_completion(json.dumps(answer).encode())
        self.assertEqual((found.text, found.reasoning, found.finish_reason, found.usage,
                          found.model), ("hi", None, "length", {"total_tokens": 3}, "q"))
        answer["choices"][0]["message"]["content"] = None
        self.assertEqual(chat.parse_completion(json.dumps(answer)).text, "")
        answer["choices"][0]["message"]["content"] = [{"type": "text", "text": "a"},
                                                      {"type": "text", "text": "b"}]
        self.assertEqual(chat.parse_completion(json.dumps(answer)).text, "ab")
        message = answer["choices"][0]["message"]
        message.update(content="x", reasoning_content="", reasoning="thought")
        self.assertEqual(chat.parse_completion(json.dumps(answer)).reasoning, "thought")
        message["reasoning_content"] = "first"
        self.assertEqual(chat.parse_completion(json.dumps(answer)).reasoning, "first")
        message.update(reasoning_content=None, reasoning={"summary": "not text"})
        self.assertIsNone(chat.parse_completion(json.dumps(answer)).reasoning)
        for bad in (b"not json", b"[]", b"{}", b'{"choices": []}', b'{"choices": [1]}',
                    b'{"choices": [{"message": 3}]}',
                    b'{"choices": [{"message": {"content": 5}}]}', b"\xff"):
            with self.assertRaises(ValueError, msg=bad):
                chat.parse_completion(bad)

    def test_token_count(self):
        self.assertEqual(chat.token_count({"total_tokens": 7}, "total_tokens"), 7)
        self.assertEqual(chat.token_count(None, "total_tokens"), 0)
        self.assertEqual(chat.token_count({"total_tokens": "7"}, "total_tokens"), 0)
        self.assertEqual(chat.token_count({"total_tokens": True}, "total_tokens"), 0)

    def test_format_duration_and_progress(self):
        self.assertEqual(runner.format_duration(42.4), "42 s")
        self.assertEqual(runner.format_duration(185), "3 min 05 s")
        self.assertEqual(runner.format_duration(7620), "2 h 07 min")
        self.assertEqual(runner.format_duration(-1), "0 s")
        self.assertEqual(runner.progress_text(120, 1000, 3, 450, 10.0),
                         "  120/1000 rows  12.0 rows/s  ETA 1 min 13 s  retries 3  45 tokens/s")
        self.assertEqual(runner.progress_text(0, 10, 0, 0, 0.0),
                         "  0/10 rows  0.0 rows/s  ETA ?  retries 0  0 tokens/s")

    def test_progress_line_rate_limited(self):
        stream, now = io.StringIO(), [0.0]
        stats = runner.Stats()
        line = runner.ProgressLine(10, stats, stream, clock=lambda: now[0])
        line.tick()
        now[0] = 1.9          # the first 2 s: nothing
        line.tick()
        self.assertEqual(stream.getvalue(), "")
        now[0] = 2.0
        stats.add(answered=2)
        line.tick()
        now[0] = 2.2          # within the interval: no new line
        line.tick()
        self.assertEqual(stream.getvalue().count("\r"), 1)
        self.assertIn("2/10 rows", stream.getvalue())
        line.finish()
        self.assertTrue(stream.getvalue().endswith("\r"))

    def test_run_dir_for(self):
        self.assertEqual(runner.run_dir_for("out/p.jsonl"), "out/p.run")
        self.assertEqual(runner.run_dir_for("p.txt"), "p.txt.run")

    def test_transport_failures(self):
        transport = chat.ChatTransport(timeout=2.5, clock=lambda: 10.0)
        with self.assertRaises(chat.FatalAnswer):
            transport._failure(socket.gaierror(-2, "Name or service not known"), 10.0)
        self.assertEqual(transport._failure(socket.timeout("timed out"), 9.0).failure,
                         "no answer within 2.5 s")
        self.assertEqual(transport._failure(socket.timeout("timed out"), 9.0, True).failure,
                         "cannot connect within 2.5 s")
        answer = transport._failure(ConnectionRefusedError(111, "Connection refused"), 9.0,
                                    connecting=True)
        self.assertEqual((answer.status, answer.failure, answer.latency, answer.no_connection),
                         (None, "cannot connect: [Errno 111] Connection refused", 1.0, True))

    def test_rate_limiter(self):
        now = [100.0]
        limiter = waits.RateLimiter(2.0, clock=lambda: now[0])
        self.assertEqual([limiter.reserve() for _ in range(3)], [0.0, 0.5, 1.0])
        now[0] = 105.0
        self.assertEqual(limiter.reserve(), 0.0)
        limiter.pause(3.0)
        self.assertEqual(limiter.reserve(), 3.0)
        self.assertEqual(limiter.reserve(), 3.5)
        unlimited = waits.RateLimiter(None, clock=lambda: now[0])
        self.assertEqual([unlimited.reserve() for _ in range(3)], [0.0, 0.0, 0.0])
        unlimited.pause(2.0)
        self.assertEqual(unlimited.reserve(), 2.0)

    def test_summary_lines(self):
        stats = runner.Stats()
        stats.add(answered=3, failed=1, retries=2, prompt_tokens=30, completion_tokens=12,
                  total_tokens=42)
        lines = runner.summary_lines("p.jsonl", "m", 6, 2, 0, stats, 2.0, 1)
        text = "\n".join(lines)
        self.assertEqual(lines[0], "generate.py: m -> p.jsonl")
        self.assertIn("  asked this run                  4\n", text)
        self.assertIn("  failed                          1   (\"error\" lines", text)
        self.assertIn("(prompt 30, completion 12)", text)
        self.assertIn("(2.0 rows/s)", text)
        self.assertIn("1 superseded line dropped", text)
        self.assertNotIn("earlier errors kept", text)
        empty = "\n".join(runner.summary_lines("p", "m", 0, 0, 0, runner.Stats(), 0.0, 0))
        self.assertIn("(0.0 rows/s)", empty)


if __name__ == "__main__":
    unittest.main()


class StoppedWorkersTest(unittest.TestCase):
    def test_idle_workers_end_when_the_run_stops(self):
        # Issue 39.6: a worker waiting for a row when the run is stopped (Ctrl-C
        # in-process, a fatal answer) ends, and closes its connection, instead
        # of waiting for ever on an empty queue.
        import signal
        import threading
        import types
        released = []
        transport = types.SimpleNamespace(release=lambda: released.append(1))
        settings = types.SimpleNamespace(backoff_base=0.5, backoff_cap=8.0)
        run = runner.Run(settings, transport, writer=None, concurrency=3, rate_limit=None)
        run.start()
        run.request_stop(signal.SIGINT)
        for thread in run.threads:
            thread.join(10)               # they end within runner.WORK_POLL_S
        self.assertEqual([thread.is_alive() for thread in run.threads], [False] * 3)
        self.assertEqual(len(released), 3)
        self.assertFalse([thread for thread in threading.enumerate()
                          if thread in run.threads])
