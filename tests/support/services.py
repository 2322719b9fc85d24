"""Shared fixtures of the services' tests (see tests/support/__init__.py, which
imports everything here): route_eval's line table from hand-written rows;
the route-eval service (a five-stop Shenzhen network, its cases,
ServerTestCase, the framing checks every JSON service gets); the reward's
rows and chat template; generate.py's stand-in and hostile chat servers.
"""

import csv
import http.client
import io
import json
import os
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support import REPO, common
from tests.support.evaluator_rows import run_in_process

# ---------------------------------------------------------------------------
# general_llm/route_eval.py: a line table from hand-written rows
# ---------------------------------------------------------------------------

def line_table(*rows):
    """LineTable from (citycode, line name, [(station name, stop id), ...]) rows."""
    from general_llm.route_eval import LineTable
    return LineTable.from_rows(
        [(city, name, [{"station_name": s, "stop_id": i} for s, i in stations])
         for city, name, stations in rows])


# ---------------------------------------------------------------------------
# The route-eval service (general_llm/server.py): a five-stop Shenzhen network
# with two lines, and a varied batch of cases
# ---------------------------------------------------------------------------

SHENZHEN = "深圳"
WALK = "步行"
SERVICE_LINE_1 = "地铁1号线(罗湖--机场东)"
SERVICE_LINE_2 = "地铁2号线(赤湾--新秀)"
SERVICE_STATIONS_1 = [("罗湖", "bus-1"), ("国贸", "bus-2"), ("老街", "bus-3")]
SERVICE_STATIONS_2 = [("老街", "bus-3"), ("大剧院", "bus-4"), ("湖贝", "bus-5")]
SERVICE_STOPS = {  # stop id -> (lng, lat, next hops), about 1 km apart
    "bus-1": (114.01, 22.5, ["bus-2"]),
    "bus-2": (114.02, 22.5, ["bus-1", "bus-3"]),
    "bus-3": (114.03, 22.5, ["bus-2", "bus-4"]),
    "bus-4": (114.04, 22.5, ["bus-3", "bus-5"]),
    "bus-5": (114.05, 22.5, ["bus-4"]),
}
SERVICE_LINE_ROWS = [("0755", SERVICE_LINE_1, SERVICE_STATIONS_1),
                     ("0755", SERVICE_LINE_2, SERVICE_STATIONS_2)]


def fixture_lines():
    from general_llm.route_eval import LineTable
    return LineTable.from_rows([(city, name, [{"station_name": n, "stop_id": i}
                                              for n, i in stations])
                                for city, name, stations in SERVICE_LINE_ROWS])


def fixture_stations():
    return common.StationNetwork.from_dict(SERVICE_STOPS)


def service_case(lines, names, start=(114.0, 22.5), end=(114.05, 22.49)):
    return {"city": SHENZHEN, "start": list(start), "end": list(end),
            "pred": {"line_sequence": lines, "station_name": names,
                     "start_transfer_mode": WALK, "end_transfer_mode": WALK}}


def sample_cases(seed=0):
    """A varied batch: reachable, unreachable, far from the origin, malformed."""
    far = 114.0 - 0.05 * (seed % 3)     # 0, ~5 or ~10 km west of the first stop
    return [
        service_case(["地铁1号线"], ["罗湖", "老街"], start=(far, 22.5)),
        service_case(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "老街", "湖贝"]),
        service_case(["地铁1号线", "地铁2号线"], ["罗湖", "国贸", "大剧院", "湖贝"]),
        service_case(["977路"], ["罗湖", "国贸"]),
        {"city": SHENZHEN, "start": "114,22", "end": [114.0, 22.5], "pred": {}},
        "not a case",
        service_case(["地铁2号线"], ["老街", "湖贝站"], end=(114.05, 22.5 - 0.001 * seed)),
    ]


class ServerTestCase(unittest.TestCase):
    """Runs a JSON service (transitlm/io/json_service.py) on a free loopback port
    in a thread: the route-eval service, unless ``make_server`` says otherwise."""

    SERVER_OPTIONS = {}

    def make_server(self):
        """The service, bound to 127.0.0.1 on a free port, logging to self.log."""
        from general_llm import server as service
        self.lines = fixture_lines()
        self.stations = fixture_stations()
        return service.make_server(self.lines, self.stations, "127.0.0.1", 0,
                                   log=self.log.append, **self.SERVER_OPTIONS)

    def setUp(self):
        self.log = []
        self.server = self.make_server()
        self.thread = serve_in_background(self.server)
        self.host, self.port = self.server.server_address[:2]

    def tearDown(self):
        stop_serving(self.server, self.thread)

    def request(self, method, path, body=None, headers=None, connection=None):
        """-> (status, headers, decoded JSON body or None)."""
        conn = connection or http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body, ensure_ascii=False).encode("utf-8")
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            raw = response.read()
            payload = json.loads(raw.decode("utf-8")) if raw else None
            return response.status, response, payload
        finally:
            if connection is None:
                conn.close()

    def concurrent_posts(self, path, clients, requests, body, expected, timeout=60):
        """``clients`` threads start together, each posting ``requests`` bodies
        on its own keep-alive connection: ``body(number, index)`` and the
        answer ``expected(number, index)`` -> the (client, request, status)
        of every wrong answer and the client of every exception."""
        failures = []
        barrier = threading.Barrier(clients)

        def client(number):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                barrier.wait(timeout)
                for index in range(requests):
                    status, _, payload = self.request("POST", path, body(number, index),
                                                      connection=conn)
                    if status != 200 or payload != expected(number, index):
                        failures.append((number, index, status))
            except Exception as exc:  # reported: the caller's assertion fails
                failures.append((number, repr(exc)))
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(2 * timeout)
        return failures

    def raw_request(self, method, path, headers):
        """A request with exactly these headers (no automatic Content-Length)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.endheaders()
            response = conn.getresponse()
            return response.status, response, json.loads(response.read().decode("utf-8"))
        finally:
            conn.close()


class FramingChecks(object):
    """Raw exchanges with a JSON service on ``self.port`` (127.0.0.1), for the
    RFC 9112 framing attacks: a request with a head and a body of one's own,
    read until the server closes.  ``PATH`` and ``BODY``: a POST route of the
    service and a valid body for it."""

    PATH = b"/api/eval/route/batch"
    BODY = b'{"cases": []}'

    def exchange(self, head, body=None, version=b"HTTP/1.1", path=None, method=b"POST"):
        """Send one request; -> (status, everything the server sent until it closed)."""
        body = self.BODY if body is None else body
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            sock.sendall(method + b" " + (path or self.PATH) + b" " + version
                         + b"\r\nHost: t\r\n" + head + b"\r\n" + body)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            sock.close()
        answer = b"".join(chunks)
        return int(answer.split(b" ", 2)[1]), answer

    def assertRefused(self, head, status, words, **kwargs):
        got, answer = self.exchange(head, **kwargs)
        self.assertEqual(got, status, (head, answer[:300]))
        self.assertIn(b"Connection: close", answer)      # read to the end: it was closed
        self.assertIn(words.encode(), answer)
        self.assertEqual(answer.count(b"HTTP/1.1 "), 1)  # no second request smuggled in


def write_fixture_files(folder):
    """station_info.csv and line_info.csv of the fixture network -> their paths."""
    station_path = os.path.join(folder, "station_info.csv")
    with open(station_path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations"])
        for stop, (lng, lat, hops) in SERVICE_STOPS.items():
            writer.writerow([stop, "440300", lng, lat, json.dumps(hops)])
    line_path = os.path.join(folder, "line_info.csv")
    with open(line_path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["citycode", "line_name", "station_list"])
        for city, name, stations in SERVICE_LINE_ROWS:
            writer.writerow([city, name, json.dumps(
                [{"station_name": n, "stop_id": i, "x": 0, "y": 0, "station_id": i}
                 for n, i in stations], ensure_ascii=False)])
    return station_path, line_path


# ---------------------------------------------------------------------------
# The reward (transitlm/reward/): the bundled example rows, and a prompt as a
# trainer's chat template writes it
# ---------------------------------------------------------------------------

EXAMPLE_FILES = {"single_route": "benchmark1_single_route_example.csv",
                 "personalized": "benchmark2_personalized_example.csv",
                 "diversity": "benchmark3_diversity_example.csv",
                 "general_llm": "general_llm_example.csv"}


def example_rows(benchmark):
    """The rows (dicts) of a benchmark's bundled example file."""
    return read_csv(os.path.join(REPO, "data", EXAMPLE_FILES[benchmark]))


def run_reward(argv, environ=None):
    """reward.py's command line in-process, with ``environ`` added to the
    environment -> (exit status, stdout, stderr)."""
    from transitlm.reward import cli as reward_cli
    saved = {name: os.environ.get(name) for name in environ or {}}
    os.environ.update(environ or {})
    try:
        return run_in_process(reward_cli.main, list(argv))
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def chatml(messages):
    """Chat messages as a ChatML template renders them for generation (what
    OpenRLHF's prompt holds, the assistant's turn begun)."""
    return "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"])
                   for m in messages) + "<|im_start|>assistant\n"


# ---------------------------------------------------------------------------
# generate.py: a stand-in OpenAI-compatible chat server, and a loopback server that
# misbehaves on purpose (its answer chosen by the path's first segment)
# ---------------------------------------------------------------------------

B1 = os.path.join(REPO, "data", "benchmark1_single_route_example.csv")   # a bundled example
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

def send_json(handler, status, payload, headers=None):
    """Answer a request of a BaseHTTPRequestHandler with ``payload``: an
    object (sent as JSON), or text or bytes sent as they are."""
    if isinstance(payload, bytes):
        data = payload
    else:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


# serve_forever() notices shutdown() only between polls (0.5 s by default);
# at 5 ms the suite's 150-odd servers stop without a wait worth counting.
POLL_INTERVAL_S = 0.005


WAIT_S = 60.0                    # the bound of a wait for an event: never reached when all is well


def wait_until(condition, timeout=WAIT_S, step=0.01):
    """Wait until ``condition()`` holds -> True, or False after ``timeout``
    seconds: a test waits for what it needs, however slow the machine."""
    event = threading.Event()         # never set: its wait is the pause
    waited = 0.0
    while not condition():
        if waited >= timeout:
            return False
        event.wait(step)
        waited += step
    return True


def serve_in_background(server):
    """Serve ``server`` (a socketserver) from a daemon thread -> the thread."""
    thread = threading.Thread(target=server.serve_forever,
                              kwargs={"poll_interval": POLL_INTERVAL_S}, daemon=True)
    thread.start()
    return thread


def stop_serving(server, thread=None):
    """Stop a server started by serve_in_background and close its socket."""
    server.shutdown()
    server.server_close()
    if thread is not None:
        thread.join(10)


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
        self.thread = serve_in_background(self.server)

    def close(self):
        stop_serving(self.server)

    def users(self):
        with self.lock:
            return [user for user, _, _ in self.requests]

    def handle(self, handler):
        length = int(handler.headers.get("Content-Length", 0))
        try:
            body = json.loads(handler.rfile.read(length).decode("utf-8"))
        except ValueError:
            return              # a client stopped while it sent its request
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
        try:
            send_json(handler, code, obj, headers)
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


def run_generate(argv, environ=None, sleep=None, clock=None):
    """runner_cli.run in-process -> (status, stdout, stderr); ``sleep`` and
    ``clock`` stand in for the waits (see VirtualTime)."""
    from transitlm.generate import runner
    from transitlm.generate import cli as runner_cli
    out, err = io.StringIO(), io.StringIO()
    try:
        status = runner_cli.run(argv, environ or {}, out, err, sleep=sleep, clock=clock)
    except runner.UsageError as exc:
        err.write("generate.py: %s\n" % exc)
        status = 2
    return status, out.getvalue(), err.getvalue()


def completion(text):
    return json.dumps({"model": "hostile-model", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                           "content": text}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class HostileServer(object):
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
        self.thread = serve_in_background(self.server)

    def url(self, case):
        return "%s/%s/v1" % (self.base, case)

    def close(self):
        stop_serving(self.server)

    def seen(self, case):
        with self.lock:
            return [r for r in self.requests if r[1].strip("/").split("/")[0] == case]


def raw_answer(handler, status_line, headers=(), body=b""):
    head = [status_line] + ["%s: %s" % pair for pair in headers]
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers):
        head.append("Content-Length: %d" % len(body))
    head.append("Connection: close")
    handler.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


HOSTILE_KEY = "sk-HOSTILE-0123456789abcdefXYZ"


def write_input(folder, rows=2, name="input.csv"):
    """A small test file of our own: ids r1..rN."""
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["indexid", "system_prompt", "sft_prompt"])
        for number in range(1, rows + 1):
            writer.writerow(["r%d" % number, "You plan routes.", "prompt %d" % number])
    return path
