"""generate.py: the pure helpers by hand, then whole runs against a local
OpenAI-compatible stand-in server (stdlib http.server on 127.0.0.1, port 0)
that answers fenced and unfenced JSON, 429 with Retry-After, 500s, slow answers
past the timeout, dropped connections and a 400 for one row."""

import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support import REPO, common

sys.path.insert(0, REPO)
from transitlm.generate import chat  # noqa: E402
from transitlm.generate import runner  # noqa: E402
from transitlm.generate import cli as runner_cli  # noqa: E402

B1 = os.path.join(REPO, "data", "benchmark1_single_route_example.csv")
B2 = os.path.join(REPO, "data", "benchmark2_personalized_example.csv")
SCRIPT = os.path.join(REPO, "generate.py")
SECRET = "sk-test-0123456789SECRETKEY"


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert text == "" or text.endswith("\n"), "file ends with a partial line"
    return [json.loads(line) for line in text.splitlines()]


def fenced(text):
    return "Here is the route:\n```json\n%s\n```\n" % text


# ---------------------------------------------------------------------------
# The stand-in server
# ---------------------------------------------------------------------------

class _QueueingServer(ThreadingHTTPServer):
    # The default listen backlog (5) drops the SYNs of a client connecting
    # with more threads at once, which then wait a second to retry.
    request_queue_size = 64


class StandIn(object):
    """An OpenAI-compatible chat-completions server for tests.

    ``script(user_text, nth)`` -> an action for the nth (1-based) request with
    that user message: ("ok", text), ("status", code, message, headers),
    ("slow", seconds, text), ("trickle", seconds per byte, text) or ("drop",).
    Requests are recorded.
    """

    def __init__(self, script, key=None, model="stand-in-model"):
        self.script = script
        self.key = key
        self.model = model
        self.lock = threading.Lock()
        self.requests = []          # (user text, Authorization header, body)
        self.seen = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                stand_in.handle(self)

        self.server = _QueueingServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d/v1" % self.server.server_address[1]
        # A short poll interval keeps shutdown() in close() quick (default 0.5 s).
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def users(self):
        with self.lock:
            return [user for user, _, _ in self.requests]

    def handle(self, handler):
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length).decode("utf-8"))
        user = body["messages"][-1]["content"]
        auth = handler.headers.get("Authorization")
        with self.lock:
            self.requests.append((user, auth, body))
            nth = self.seen[user] = self.seen.get(user, 0) + 1
        if handler.path != "/v1/chat/completions":
            return self.send(handler, 404, {"error": {"message": "no such path"}})
        if self.key is not None and auth != "Bearer " + self.key:
            # Real servers echo (part of) the key presented: ours echoes all of it.
            return self.send(handler, 401, {"error": {
                "message": "Incorrect API key provided: %s" % (auth or "")[7:]}})
        if body["model"] != self.model:
            return self.send(handler, 404, {"error": {
                "message": "The model `%s` does not exist" % body["model"]}})
        action = self.script(user, nth)
        if action[0] == "drop":
            handler.close_connection = True
            return
        if action[0] == "status":
            _, code, message, headers = action
            return self.send(handler, code, {"error": {"message": message}}, headers)
        if action[0] == "slow":
            time.sleep(action[1])
        text = action[-1]
        answer = {"id": "c1", "object": "chat.completion", "model": self.model,
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": text}}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                            "total_tokens": 15}}
        if action[0] == "trickle":
            return self.trickle(handler, answer, action[1])
        self.send(handler, 200, answer)

    @staticmethod
    def trickle(handler, obj, seconds_per_byte):
        """A 200 whose body arrives a byte at a time (each within any socket timeout)."""
        data = json.dumps(obj).encode("utf-8")
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            for index in range(len(data)):
                handler.wfile.write(data[index:index + 1])
                handler.wfile.flush()
                time.sleep(seconds_per_byte)
        except OSError:
            pass      # the client gave up

    @staticmethod
    def send(handler, code, obj, headers=None):
        data = json.dumps(obj).encode("utf-8")
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            pass      # the client gave up (timeout test)


def answers_from(path, fence_every=2):
    """user prompt -> the row's generate_results text (every other one fenced
    when it is valid JSON), checked unique so the server can answer by prompt."""
    by_prompt = {}
    for number, row in enumerate(read_csv(path)):
        text = row["generate_results"]
        try:
            json.loads(text)
            if number % fence_every == 0:
                text = fenced(text)
        except ValueError:
            pass
        assert row["sft_prompt"] not in by_prompt
        by_prompt[row["sft_prompt"]] = text
    return by_prompt


def run_generate(argv, environ=None, sleep=None):
    """runner_cli.run in-process -> (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        status = runner_cli.run(argv, environ or {}, out, err, sleep=sleep)
    except runner.UsageError as exc:
        err.write("generate.py: %s\n" % exc)
        status = 2
    return status, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------

class Helpers(unittest.TestCase):
    def test_backoff_full_jitter_capped(self):
        self.assertEqual(chat.backoff_delay(0, base=1.0, cap=60, rng=lambda: 1.0), 1.0)
        self.assertEqual(chat.backoff_delay(3, base=1.0, cap=60, rng=lambda: 1.0), 8.0)
        self.assertEqual(chat.backoff_delay(3, base=1.0, cap=60, rng=lambda: 0.5), 4.0)
        self.assertEqual(chat.backoff_delay(10, base=1.0, cap=60, rng=lambda: 1.0), 60)
        self.assertEqual(chat.backoff_delay(5000, base=1.0, cap=60, rng=lambda: 1.0), 60)
        self.assertEqual(chat.backoff_delay(2, base=0.5, cap=60, rng=lambda: 0.0), 0.0)

    def test_retry_after_seconds_and_dates(self):
        self.assertEqual(chat.parse_retry_after("2"), 2.0)
        self.assertEqual(chat.parse_retry_after(" 0.5 "), 0.5)
        self.assertEqual(chat.parse_retry_after("-3"), 0.0)
        self.assertEqual(chat.parse_retry_after("99999"), chat.RETRY_AFTER_CAP_S)
        self.assertIsNone(chat.parse_retry_after(None))
        self.assertIsNone(chat.parse_retry_after(""))
        self.assertIsNone(chat.parse_retry_after("soon"))
        self.assertIsNone(chat.parse_retry_after("nan"))
        # Wed, 21 Oct 2015 07:28:00 GMT = 1445412480
        date = "Wed, 21 Oct 2015 07:28:00 GMT"
        self.assertEqual(chat.parse_retry_after(date, now=1445412480 - 30), 30.0)
        self.assertEqual(chat.parse_retry_after(date, now=1445412480 + 30), 0.0)

    def test_classify_status(self):
        self.assertEqual(chat.classify_status(200), "ok")
        for code in (429, 408, 500, 502, 503, 504, 599):
            self.assertEqual(chat.classify_status(code), "retry", code)
        for code in (401, 403, 404):
            self.assertEqual(chat.classify_status(code), "fatal", code)
        for code in (400, 413, 422, 409):
            self.assertEqual(chat.classify_status(code), "row_error", code)

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

    def test_parse_completion(self):
        answer = {"model": "q", "usage": {"total_tokens": 3},
                  "choices": [{"finish_reason": "length", "message": {"content": "hi"}}]}
        self.assertEqual(chat.parse_completion(json.dumps(answer).encode()),
                         ("hi", "length", {"total_tokens": 3}, "q"))
        answer["choices"][0]["message"]["content"] = None
        self.assertEqual(chat.parse_completion(json.dumps(answer))[0], "")
        answer["choices"][0]["message"]["content"] = [{"type": "text", "text": "a"},
                                                      {"type": "text", "text": "b"}]
        self.assertEqual(chat.parse_completion(json.dumps(answer))[0], "ab")
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
        transport = chat.UrllibTransport(timeout=2.5, clock=lambda: 10.0)
        with self.assertRaises(chat.FatalAnswer):
            transport._failure(socket.gaierror(-2, "Name or service not known"), 10.0)
        self.assertEqual(transport._failure(socket.timeout("timed out"), 9.0).failure,
                         "no answer within 2.5 s")
        answer = transport._failure(ConnectionRefusedError(111, "Connection refused"), 9.0)
        self.assertEqual((answer.status, answer.failure, answer.latency),
                         (None, "[Errno 111] Connection refused", 1.0))

    def test_rate_limiter(self):
        now = [100.0]
        limiter = runner.RateLimiter(2.0, clock=lambda: now[0])
        self.assertEqual([limiter.reserve() for _ in range(3)], [0.0, 0.5, 1.0])
        now[0] = 105.0
        self.assertEqual(limiter.reserve(), 0.0)
        limiter.pause(3.0)
        self.assertEqual(limiter.reserve(), 3.0)
        self.assertEqual(limiter.reserve(), 3.5)
        unlimited = runner.RateLimiter(None, clock=lambda: now[0])
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


class InputFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        return path

    def test_scan_and_rows(self):
        path = self.write("t.csv", "indexid,system_prompt,sft_prompt,req_type\n"
                                   "a,S,p1,2\n\nb,S,p2,x\na,S,p3,0\n,S,p4,0\nc,S,p5\n")
        scan = runner.scan_input(path)
        self.assertEqual(scan.ids, ["a", "b", "c"])
        self.assertEqual(scan.rows, 5)
        self.assertEqual(scan.duplicates, ["a"])
        self.assertEqual(scan.empty_ids, 1)
        self.assertTrue(scan.has_system_prompt)
        self.assertEqual(scan.req_types, {0, 2})
        rows = list(runner.iter_input_rows(path, sample_count=2))
        self.assertEqual(rows, [(1, "a", "S", "p1"), (2, "b", "S", "p2")])
        self.assertEqual(runner.scan_input(path, sample_count=2).ids, ["a", "b"])
        state = runner.OutputState()
        state.results.add("b")
        self.assertEqual(list(runner.pending_rows(path, None, state, True)),
                         [("a", "S", "p1"), ("c", "S", "p5")])

    def test_bad_inputs_are_usage_errors(self):
        cases = {"empty.csv": "", "noid.csv": "x,sft_prompt\n1,2\n",
                 "noprompt.csv": "index_id,sft_label\n1,2\n"}
        for name, text in cases.items():
            with self.assertRaises(runner.UsageError, msg=name):
                runner.scan_input(self.write(name, text))
        binary = os.path.join(self.dir, "bin.csv")
        with open(binary, "wb") as handle:
            handle.write(b"index_id,sft_prompt\n\xff\xfe,\xff\n")
        with self.assertRaises(runner.UsageError):
            runner.scan_input(binary)
        with self.assertRaises(runner.UsageError):
            runner.scan_input(os.path.join(self.dir, "absent.csv"))

    def test_input_notes(self):
        scan = runner.InputScan()
        self.assertEqual(runner.input_notes(scan, True), [])
        self.assertEqual(len(runner.input_notes(scan, False)), 1)
        scan.has_system_prompt = True
        scan.duplicates = ["a", "b", "a", "c"]
        scan.empty_ids = 1
        self.assertEqual(runner.input_notes(scan, False), [
            "input repeats 3 ids in 4 more rows (each id asked once), e.g. a, b, c",
            "1 input row without an id skipped (they cannot be joined)"])

    def test_infer_benchmark(self):
        def scan(label=None, req_types=()):
            result = runner.InputScan()
            keys, names = runner.label_shape(json.dumps(label, ensure_ascii=False))
            result.label_keys, result.label_station_names = set(keys), names
            result.req_types = set(req_types)
            return result
        infer = runner.infer_benchmark
        self.assertEqual(infer("/r/transit-lm-benchmark2-test.csv", scan())[0], "personalized")
        self.assertEqual(infer("transit-lm-benchmark3-test.csv", scan())[0], "diversity")
        self.assertEqual(infer("x/general_llm_example.csv", scan())[0], "general_llm")
        self.assertEqual(infer("BENCHMARK1.csv", scan(req_types=[2]))[0], "single_route")
        self.assertEqual(infer("t.csv", scan({"first": {}, "second": {}}, [0]))[0], "diversity")
        self.assertEqual(infer("t.csv", scan({"station_name": []}))[0], "general_llm")
        self.assertEqual(infer("t.csv", scan({"station_sequence": ["秋桥路", "【换乘】"]}))[0],
                         "general_llm")
        self.assertEqual(infer("t.csv", scan({"station_sequence": ["bus-1", "【换乘】"]}))[0],
                         "single_route")
        self.assertEqual(infer("t.csv", scan({"line_sequence": []}, [0, 7]))[0], "personalized")
        self.assertEqual(infer("t.csv", scan({"line_sequence": []}, [0, 1]))[0], "single_route")
        self.assertEqual(infer("t.csv", scan())[0], "single_route")
        self.assertEqual(runner.label_shape("not json"), ((), False))
        self.assertEqual(runner.label_shape("[1]"), ((), False))
        self.assertEqual(runner.label_shape('{"station_sequence": 3}'),
                         (("station_sequence",), False))

    def test_infer_benchmark_on_bundled_data(self):
        for name, expected in (("benchmark2_personalized_example.csv", "personalized"),
                               ("benchmark3_diversity_example.csv", "diversity"),
                               ("general_llm_example.csv", "general_llm")):
            source = os.path.join(REPO, "data", name)
            renamed = os.path.join(self.dir, "t.csv")      # only the data can tell
            with open(source, encoding="utf-8") as src, open(renamed, "w",
                                                             encoding="utf-8") as dst:
                dst.write(src.read())
            self.assertEqual(runner.infer_benchmark(renamed, runner.scan_input(renamed))[0],
                             expected, name)


class OutputFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "p.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, data):
        with open(self.path, "wb") as handle:
            handle.write(data)

    def test_state_of_absent_and_empty_files(self):
        state = runner.read_output_state(self.path)
        self.assertEqual((state.lines, state.ids, state.partial_bytes), (0, 0, 0))
        self.write(b"")
        self.assertFalse(runner.read_output_state(self.path).needs_compaction)

    def test_state_results_errors_and_partial_tail(self):
        self.write(b'{"indexid": "a", "error": "HTTP 500"}\n'
                   b'{"indexid": "b", "generate_results": "x"}\n\n'
                   b'{"indexid": "a", "generate_results": "y"}\n'
                   b'{"indexid": "c", "error": "HTTP 400"}\n'
                   b'{"index_id": "d", "generate_results": ""}\n'
                   b'{"indexid": "e", "genera')
        state = runner.read_output_state(self.path)
        self.assertEqual(state.results, {"a", "b", "d"})
        self.assertEqual(state.errors, {"c"})
        self.assertEqual((state.lines, state.ids), (5, 4))
        self.assertTrue(state.needs_compaction)
        self.assertEqual(state.partial_bytes, len(b'{"indexid": "e", "genera'))
        runner.drop_partial_line(self.path, state)
        with open(self.path, "rb") as handle:
            self.assertTrue(handle.read().endswith(b'"generate_results": ""}\n'))

    def test_foreign_line_refused(self):
        for data in (b"not json\n", b'{"indexid": "a"}\n', b'{"generate_results": "x"}\n',
                     b"[1]\n", b"\xff\n"):
            self.write(data)
            with self.assertRaises(runner.UsageError, msg=data):
                runner.read_output_state(self.path)

    def test_compact_keeps_one_line_per_id(self):
        self.write(b'{"indexid": "a", "error": "1"}\n'
                   b'{"indexid": "b", "error": "1"}\n'
                   b'{"indexid": "a", "generate_results": "first"}\n'
                   b'{"indexid": "b", "error": "2"}\n'
                   b'{"indexid": "c", "generate_results": "c"}\n'
                   b'{"indexid": "a", "generate_results": "second"}\n'
                   b'{"indexid": "a", "error": "3"}\n\n'
                   b'{"indexid": "z", "gen')
        os.chmod(self.path, 0o640)
        self.assertEqual(runner.compact_output(self.path), 4)
        self.assertEqual(read_lines(self.path), [          # in file order
            {"indexid": "a", "generate_results": "first"},
            {"indexid": "b", "error": "2"},
            {"indexid": "c", "generate_results": "c"}])
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o640)
        self.assertEqual([n for n in os.listdir(self.tmp.name)], ["p.jsonl"])
        self.assertEqual(runner.compact_output(self.path), 0)

    def test_writer_whole_lines_and_closed(self):
        writer = runner.LineWriter(self.path)
        self.assertTrue(writer.write({"indexid": "a", "generate_results": "路线\n"}))
        writer.close()
        self.assertFalse(writer.write({"indexid": "b", "generate_results": "x"}))
        writer.close()
        with open(self.path, "rb") as handle:
            data = handle.read()
        self.assertEqual(data.count(b"\n"), 1)            # the text's newline is escaped
        self.assertEqual(read_lines(self.path), [{"indexid": "a", "generate_results": "路线\n"}])


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
                return ("trickle", 0.05, self.answers[user])   # several seconds in all
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
        # The trickled answer alone would take over 10 s; the timeout cut it at 0.6 s.
        self.assertLess(elapsed, 8.0)

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
        self.assertEqual(stderr.count("\n"), 2, stderr)     # the system_prompt note + the stop
        self.assertIn("stopped: HTTP 401: Incorrect API key provided: <redacted>", stderr)
        self.assertNotIn(wrong, stderr + stdout)
        self.assertLessEqual(len(server.requests), 2)
        self.assertEqual(os.listdir(self.dir), [])        # no empty output, no settings file

    def test_unknown_model_and_path_stop(self):
        server = self.serve(lambda user, nth: ("ok", self.answers[user]))
        argv = self.argv(server)
        argv[argv.index("stand-in-model")] = "no-such-model"
        status, _, stderr = run_generate(argv)
        self.assertEqual(status, 2)
        self.assertIn("HTTP 404: The model `no-such-model` does not exist", stderr)
        argv = self.argv(server)
        argv[argv.index(server.url)] = server.url[:-3] + "/v2"
        status, _, stderr = run_generate(argv)
        self.assertEqual(status, 2)
        self.assertIn("HTTP 404: no such path", stderr)

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
        self.assertIn("cannot reach http://127.0.0.1:%d/v1/chat/completions:" % port, stderr)
        self.assertIn("(3 attempts, no answer yet in this run)", stderr)
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
        cases = [
            ["--input", B1, "--api_url", server.url, "--model", "m"],          # no --out
            self.argv(server, "--extra_body", "{bad"),
            self.argv(server, "--extra_body", "[1]"),
            self.argv(server, "--extra_body", "[" * 100000),
            self.argv(server, "--extra_body", '{"stream": true}'),
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
            status, stdout, stderr = run_generate(argv)
            self.assertEqual(status, 2, argv)
            self.assertEqual(stderr.count("\n"), 1, (argv, stderr))
            self.assertTrue(stderr.startswith("generate.py: "), stderr)
        self.assertEqual(server.requests, [])

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
        deadline = time.monotonic() + 5
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


def evaluator_run(benchmark, argv, folder):
    """Run an evaluator script with --out FOLDER -> (report, details rows)."""
    command = [sys.executable, os.path.join(REPO, benchmark, "evaluate.py")] + argv + [
        "--out", folder, "--quiet"]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise AssertionError("%s exit %d: %s" % (benchmark, result.returncode,
                                                  result.stderr.decode()))
    return read_run(folder)


def read_run(folder):
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    return report, read_lines(os.path.join(folder, "details.jsonl"))


def figures(report):
    return {key: report.get(key) for key in ("counts", "rounds", "metrics", "diversity")}


BUNDLED = (("single_route", "benchmark1_single_route_example.csv"),
           ("personalized", "benchmark2_personalized_example.csv"),
           ("diversity", "benchmark3_diversity_example.csv"),
           ("general_llm", "general_llm_example.csv"))


class EvaluatorOnResults(unittest.TestCase):
    """The evaluators read generate.py's output as it is (--evaluate)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.close()
        self.tmp.cleanup()

    def generate_and_evaluate(self, source, script, *extra):
        out = os.path.join(self.dir, "preds.jsonl")
        status, stdout, stderr = run_generate(
            ["--input", source, "--api_url", self.server.url, "--model", "stand-in-model",
             "--out", out, "--evaluate"] + list(extra))
        return status, stdout, stderr, out

    def test_figures_equal_inline(self):
        for benchmark, name in BUNDLED:
            with self.subTest(benchmark=benchmark):
                source = os.path.join(REPO, "data", name)
                answers = answers_from(source)
                if self.server:
                    self.server.close()
                self.server = StandIn(lambda user, nth: ("ok", answers[user]))
                self.dir = os.path.join(self.tmp.name, benchmark)    # a run of its own
                os.mkdir(self.dir)
                status, stdout, stderr, out = self.generate_and_evaluate(source, None)
                self.assertEqual(status, 0, stderr)
                self.assertIn("evaluating with %s/evaluate.py (from the file name)"
                              % benchmark, stdout)
                self.assertIn("Summary (reference protocol)", stdout)   # its text report
                report, details = read_run(runner.run_dir_for(out))
                inline, inline_details = evaluator_run(
                    benchmark, ["--input", source], os.path.join(self.dir, "inline"))
                self.assertEqual(figures(report), figures(inline))
                self.assertEqual([row["failure_codes"] for row in details],
                                 [row["failure_codes"] for row in inline_details])

    def test_error_line_is_no_response_with_the_generators_error(self):
        source = B1
        answers = answers_from(source)
        refused = read_csv(source)[1]

        def script(user, nth):
            if user == refused["sft_prompt"]:
                return ("status", 400, "prompt is too long", None)
            return ("ok", answers[user])

        self.server = StandIn(script)
        run_dir = os.path.join(self.dir, "run")
        status, _, stderr, out = self.generate_and_evaluate(
            source, script, "--eval_out", run_dir, "--benchmark", "single_route")
        self.assertEqual(status, 0, stderr)
        report, details = read_run(run_dir)
        row = details[1]
        self.assertEqual(row["index_id"], refused["index_id"])
        self.assertEqual(row["status"], "no_response")
        self.assertEqual(row["failure_codes"], ["no_response"])
        self.assertIn("HTTP 400: prompt is too long", row["generator_error"])
        self.assertEqual(report["counts"]["no_response"], 1)

    def test_result_line_preferred_over_error_line(self):
        """A run stopped before compaction leaves an error line and a later result
        line for one id; the evaluator uses the result."""
        rows = read_csv(B1)
        out = os.path.join(self.dir, "preds.jsonl")
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"indexid": rows[0]["index_id"], "error": "HTTP 500"}) + "\n")
            for row in rows:
                handle.write(json.dumps({"indexid": row["index_id"],
                                         "generate_results": row["generate_results"]}) + "\n")
        report, _ = evaluator_run("single_route", ["--input", B1, "--predictions", out],
                                  os.path.join(self.dir, "run"))
        inline, _ = evaluator_run("single_route", ["--input", B1],
                                  os.path.join(self.dir, "inline"))
        self.assertEqual(figures(report), figures(inline))

    def test_evaluator_failure_status_passed_on(self):
        answers = answers_from(B1)
        self.server = StandIn(lambda user, nth: ("ok", answers[user]))
        status, _, stderr, _ = self.generate_and_evaluate(
            B1, None, "--station_info", os.path.join(self.dir, "absent.csv"))
        self.assertEqual(status, 2)
        self.assertIn("generate.py: the evaluator exited with status 2", stderr)


class KilledRuns(unittest.TestCase):
    """generate.py in a subprocess, killed mid-run, then resumed."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "preds.jsonl")
        self.answers = answers_from(B1)
        self.delay = [0.15]
        self.server = StandIn(lambda user, nth: ("slow", self.delay[0], self.answers[user]))

    def tearDown(self):
        self.server.close()
        self.tmp.cleanup()

    def start(self):
        env = dict(os.environ, OPENAI_API_KEY=SECRET)
        return subprocess.Popen(
            [sys.executable, SCRIPT, "--input", B1, "--api_url", self.server.url, "--model",
             "stand-in-model", "--out", self.out, "--concurrency", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def wait_for_lines(self, count):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(self.out):
                with open(self.out, "rb") as handle:
                    if handle.read().count(b"\n") >= count:
                        return
            time.sleep(0.02)
        self.fail("no progress")

    def kill_and_resume(self, signum):
        process = self.start()
        self.wait_for_lines(5)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=30)
        finished = set(line["indexid"] for line in read_lines(self.out)
                       if "generate_results" in line)
        self.assertGreaterEqual(len(finished), 5)
        self.assertLess(len(finished), 38)
        prompts = dict((row["index_id"], row["sft_prompt"]) for row in read_csv(B1))

        self.delay[0] = 0.0
        before = len(self.server.requests)
        resumed = self.start()
        out2, err2 = resumed.communicate(timeout=60)
        self.assertEqual(resumed.returncode, 0, err2)
        asked_again = set(self.server.users()[before:])
        self.assertFalse(asked_again & set(prompts[i] for i in finished))
        lines = read_lines(self.out)
        self.assertEqual(sorted(line["indexid"] for line in lines), sorted(prompts))
        self.assertTrue(all("generate_results" in line for line in lines))
        for text in (stdout, stderr, out2, err2):
            self.assertNotIn(SECRET.encode(), text)
        return process.returncode, stderr.decode()

    def test_sigterm_then_resume(self):
        status, stderr = self.kill_and_resume(signal.SIGTERM)
        self.assertEqual(status, 143)
        self.assertIn("stopped by SIGTERM after", stderr)
        self.assertIn("run the same command again to continue", stderr)
        self.assertNotIn("Traceback", stderr)

    def test_sigint_then_resume(self):
        status, stderr = self.kill_and_resume(signal.SIGINT)
        self.assertEqual(status, 130)
        self.assertIn("stopped by SIGINT", stderr)

    def test_sigkill_then_resume(self):
        status, _ = self.kill_and_resume(signal.SIGKILL)
        self.assertEqual(status, -signal.SIGKILL)


# ---------------------------------------------------------------------------
# Misbehaving servers (issue 23): redirects, the key echoed, hostile answers
# ---------------------------------------------------------------------------

def completion(text):
    return json.dumps({"model": "hostile-model", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                           "content": text}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class Hostile(object):
    """A loopback server whose answer depends on the first segment of the path
    (``/CASE/v1/chat/completions``) and on how often that case was asked:
    ``behave(handler, case, nth, body)`` writes raw bytes.  Requests are
    recorded as (method, path, Authorization, body bytes)."""

    def __init__(self, behave):
        self.behave = behave
        self.lock = threading.Lock()
        self.requests = []
        self.counts = {}
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                case = self.path.strip("/").split("/")[0]
                with hostile.lock:
                    hostile.requests.append((self.command, self.path,
                                             self.headers.get("Authorization"), body))
                    nth = hostile.counts[case] = hostile.counts.get(case, 0) + 1
                self.close_connection = True
                try:
                    hostile.behave(self, case, nth, body)
                    self.wfile.flush()
                except OSError:
                    pass            # the client gave up

            do_POST = do_GET = do_PUT = handle_any

        self.server = _QueueingServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, case):
        return "%s/%s/v1" % (self.base, case)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def seen(self, case):
        with self.lock:
            return [r for r in self.requests if r[1].strip("/").split("/")[0] == case]


def raw_answer(handler, status_line, headers=(), body=b""):
    head = [status_line] + ["%s: %s" % pair for pair in headers]
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers):
        head.append("Content-Length: %d" % len(body))
    head.append("Connection: close")
    handler.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


KEY = "sk-HOSTILE-0123456789abcdefXYZ"
DEEP = b"[" * 100000 + b"]" * 100000


def write_input(folder, rows=2, name="input.csv"):
    """A small test file of our own: ids r1..rN."""
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["indexid", "system_prompt", "sft_prompt"])
        for number in range(1, rows + 1):
            writer.writerow(["r%d" % number, "You plan routes.", "prompt %d" % number])
    return path


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
        elif case == "echo_error":
            padding = "x" * (282 - len("bad key "))    # the key straddles the cut of a message
            raw_answer(handler, "HTTP/1.1 400 Bad %s" % KEY, [],
                       json.dumps({"error": {"message": "bad key " + padding + KEY}}).encode())
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
        started = time.monotonic()
        status, _, stderr = self.generate("slow_hops", "--timeout", "0.8", "--retries", "0",
                                          "--sample_count", "1")
        elapsed = time.monotonic() - started
        self.assertEqual(status, 2, stderr)           # nothing ever answered: a fatal stop
        self.assertIn("no answer within 0.8 s", stderr)
        self.assertLess(elapsed, 1.6)                 # the hops alone take 1.8 s
        self.assertLessEqual(len(self.hostile.seen("slow_hops")), 3 + 3)

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
        self.assertTrue(all(error.startswith("HTTP 400: bad key x") for error in errors), errors)
        shutil.rmtree(os.path.join(self.dir, "new"))
        status, _, stderr = self.generate("echo_status")   # a malformed status line
        self.assertEqual(status, 2, stderr)                  # nothing ever answered in HTTP
        self.assertIn("BadStatusLine: HTTP/1.1 2x0 <redacted>", stderr)
        status, _, stderr = self.generate("echo_fatal")
        self.assertEqual(status, 2)
        self.assertIn("stopped: HTTP 401: key \\x1b[31m<redacted>\\x1b[0m refused", stderr)
        self.assert_nothing_left()

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
                     b"\xff\xfe\n", b"{" * 100000 + b"\n"):
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
        from transitlm.generate import runner
        path = os.path.join(self.dir, "big.csv")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('indexid,sft_prompt\nr1,"%s\n%s"\n' % ("x" * 600, "y" * 600))
        limit = runner.MAX_ROW_CHARS
        runner.MAX_ROW_CHARS = 1000
        try:
            with self.assertRaises(runner.UsageError) as ctx:
                runner.scan_input(path)
        finally:
            runner.MAX_ROW_CHARS = limit
        self.assertIn("holds more than 1000 characters", str(ctx.exception))


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
            "input_sha256": common.file_sha256(self.input)})
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
        deadline = time.monotonic() + 20
        while not self.server.seen("hang") and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
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
