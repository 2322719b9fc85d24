"""Tests of general_llm/service_client.py against scripted local HTTP services."""

import json
import os
import socket
import struct
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from common import StationNetwork  # noqa: E402
from general_llm import server as service  # noqa: E402
from general_llm.route_eval import LineTable, evaluate_cases  # noqa: E402
from general_llm.service_client import (  # noqa: E402
    BATCH_PATH, RouteEvalClient, ServiceUnavailable, batch_url)
from tests.support.services import send_json, serve_in_background, stop_serving  # noqa: E402

SHENZHEN = "深圳"
WALK = "步行"


def fixture():
    lines = LineTable.from_rows([("0755", "地铁1号线(罗湖--机场东)", [
        {"station_name": "罗湖", "stop_id": "bus-1"},
        {"station_name": "国贸", "stop_id": "bus-2"},
        {"station_name": "老街", "stop_id": "bus-3"}])])
    stations = StationNetwork.from_dict({
        "bus-1": (114.01, 22.5, ["bus-2"]),
        "bus-2": (114.02, 22.5, ["bus-1", "bus-3"]),
        "bus-3": (114.03, 22.5, ["bus-2"]),
    })
    return lines, stations


def numbered_cases(count):
    """Distinct cases: the origin moves west, so SG flips after a few of them."""
    names = [["罗湖", "国贸"], ["罗湖", "老街"], ["国贸", "国贸"], ["罗湖", "西丽"]]
    return [{"city": SHENZHEN, "start": [114.0 - 0.01 * i, 22.5], "end": [114.03, 22.5],
             "pred": {"line_sequence": ["地铁1号线"], "station_name": names[i % len(names)],
                      "start_transfer_mode": WALK, "end_transfer_mode": WALK}}
            for i in range(count)]


def free_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Sleeps(list):
    """An injected ``sleep`` that records the waits instead of waiting."""

    def __call__(self, seconds):
        self.append(seconds)


class ScriptedHandler(BaseHTTPRequestHandler):
    """Answers each request with the next action of the server's script.

    Actions: "ok" (real results), "500", "400", "drop" (close without an
    answer), "reset" (TCP reset), "short" (one result too few), "garbage"
    (200 with a non-JSON body), "slow" (answer after the client gave up),
    bytes (200 with exactly that body), a function (called with the real
    results; 200 with what it returns, as JSON), ("redirect", status,
    location, seconds before answering), ("raw", bytes written as they are).
    A GET is only recorded (in ``gets``) and answered 405.
    """

    def do_GET(self):
        self.server.gets.append(self.path)
        self.answer(405, {"error": "GET"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.bodies.append(body)
        cases = json.loads(body.decode("ascii"))["cases"]
        action = self.server.next_action(self.path, len(cases))
        if isinstance(action, tuple) and action[0] == "redirect":
            _, status, location, seconds = action
            time.sleep(seconds)
            self.send_response(status)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif isinstance(action, tuple) and action[0] == "raw":
            self.wfile.write(action[1])
            self.close_connection = True
        elif isinstance(action, bytes):
            self.answer(200, action)
        elif callable(action):
            self.answer(200, action(evaluate_cases(cases, *self.server.network)))
        elif action == "ok":
            self.answer(200, {"results": evaluate_cases(cases, *self.server.network)})
        elif action == "500":
            self.answer(500, {"error": "database on fire"})
        elif action == "400":
            self.answer(400, {"error": "body is not valid JSON"})
        elif action == "short":
            self.answer(200, {"results": evaluate_cases(cases, *self.server.network)[1:]})
        elif action == "garbage":
            self.answer(200, "<html>gateway</html>")
        elif action == "drop":
            self.close_connection = True
        elif action == "reset":
            # SO_LINGER 0: closing sends RST instead of FIN.  The socket is
            # closed here, before socketserver's shutdown(SHUT_WR) could send a FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif action == "slow":
            time.sleep(self.server.slow_seconds)
            self.answer(200, {"results": evaluate_cases(cases, *self.server.network)})

    def answer(self, status, payload):
        send_json(self, status, payload)

    def log_message(self, format, *args):
        pass


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True
    slow_seconds = 1.0

    def __init__(self, script, default="ok"):
        ThreadingHTTPServer.__init__(self, ("127.0.0.1", 0), ScriptedHandler)
        self.network = fixture()
        self.script = list(script)
        self.default = default
        self.seen = []                     # (path, batch size) per request
        self.bodies = []                   # request bodies as received
        self.gets = []                     # paths of GET requests
        self.lock = threading.Lock()

    def next_action(self, path, size):
        with self.lock:
            self.seen.append((path, size))
            return self.script.pop(0) if self.script else self.default

    def handle_error(self, request, client_address):
        pass                               # "reset"/"slow" break connections on purpose


class ClientTestCase(unittest.TestCase):

    def serve(self, script=(), default="ok"):
        server = ScriptedServer(script, default)
        thread = serve_in_background(server)
        self.addCleanup(stop_serving, server, thread)
        host, port = server.server_address[:2]
        return server, "http://%s:%d" % (host, port)

    def client(self, url, **kw):
        sleeps = Sleeps()
        kw.setdefault("timeout", 10)
        return RouteEvalClient(url, sleep=sleeps, **kw), sleeps

    def expected(self, cases):
        return evaluate_cases(cases, *fixture())


class UrlTest(unittest.TestCase):

    def test_base_url_gets_the_batch_path(self):
        self.assertEqual(batch_url("http://127.0.0.1:8765"), "http://127.0.0.1:8765" + BATCH_PATH)
        self.assertEqual(batch_url("http://127.0.0.1:8765/"), "http://127.0.0.1:8765" + BATCH_PATH)
        self.assertEqual(batch_url("http://transit-lm.amap.com"),
                         "http://transit-lm.amap.com" + BATCH_PATH)

    def test_full_url_is_kept(self):
        url = "https://example.org/prefix" + BATCH_PATH
        self.assertEqual(batch_url(url), url)
        self.assertEqual(batch_url(url + "/"), url)
        self.assertEqual(batch_url("http://h/prefix"), "http://h/prefix" + BATCH_PATH)

    def test_not_an_http_url(self):
        for bad in ("localhost:8765", "ftp://h", "", None, "http://"):
            with self.assertRaises(ValueError):
                batch_url(bad)

    def test_bad_settings(self):
        with self.assertRaises(ValueError):
            RouteEvalClient("http://h", batch_size=0)
        with self.assertRaises(ValueError):
            RouteEvalClient("http://h", batch_size=True)
        with self.assertRaises(ValueError):
            RouteEvalClient("http://h", retries=-1)
        with self.assertRaises(ValueError):
            RouteEvalClient("http://h").evaluate([], on_batch_failure="ignore")

    def test_bad_timeouts(self):
        for bad in (0, 0.0, -1, float("nan"), float("inf"), "10", None, True):
            with self.subTest(timeout=bad):
                with self.assertRaises(ValueError) as ctx:
                    RouteEvalClient("http://h", timeout=bad)
                self.assertIn("timeout", str(ctx.exception))
        for bad in (-0.5, float("nan"), "1"):
            with self.subTest(backoff=bad):
                with self.assertRaises(ValueError):
                    RouteEvalClient("http://h", backoff=bad)
        self.assertEqual(RouteEvalClient("http://h", timeout=1).timeout, 1.0)
        self.assertEqual(RouteEvalClient("http://h", timeout=0.001, backoff=0).backoff, 0)


class ServiceDownTest(ClientTestCase):

    def test_raises_with_a_clear_message(self):
        url = "http://127.0.0.1:%d" % free_port()
        client, sleeps = self.client(url, retries=2, backoff=0.5)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(3))
        message = str(ctx.exception)
        self.assertIn(url + BATCH_PATH, message)
        self.assertIn("after 3 tries", message)
        self.assertIn("cannot connect", message)
        self.assertIn("batch 1/1 (cases 1-3)", message)
        self.assertEqual(sleeps, [0.5, 1.0])          # exponential backoff, not waited

    def test_mark_returns_error_results(self):
        client, sleeps = self.client("http://127.0.0.1:%d" % free_port(), retries=1,
                                     batch_size=2)
        results = client.evaluate(numbered_cases(3), on_batch_failure="mark")
        self.assertEqual(len(results), 3)
        self.assertEqual(client.marked_cases, 3)
        self.assertEqual(len(client.failures), 2)
        for result in results:
            self.assertTrue(result["error"].startswith("service unavailable: "), result)
            self.assertIs(result["service_failure"], True)
            self.assertEqual(result["reachable_code"], "case_error")
            self.assertFalse(result["reachable"])
            self.assertEqual(result["reachable_reason"], result["error"])
            self.assertFalse(result["station_grounding"])
            self.assertEqual(result["match_details"], [])

    def test_no_cases_no_request(self):
        client, _ = self.client("http://127.0.0.1:%d" % free_port())
        self.assertEqual(client.evaluate([]), [])


class RetryTest(ClientTestCase):

    def test_recovers_after_500_reset_and_drop(self):
        server, url = self.serve(["500", "reset", "drop", "ok"])
        client, sleeps = self.client(url, retries=3, backoff=0.25)
        cases = numbered_cases(5)
        self.assertEqual(client.evaluate(cases), self.expected(cases))
        self.assertEqual(len(server.seen), 4)
        self.assertEqual(sleeps, [0.25, 0.5, 1.0])
        self.assertEqual(client.marked_cases, 0)

    def test_always_500_raises(self):
        server, url = self.serve(default="500")
        client, sleeps = self.client(url, retries=3)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(2))
        message = str(ctx.exception)
        self.assertIn("HTTP 500", message)
        self.assertIn("database on fire", message)
        self.assertIn("after 4 tries", message)
        self.assertEqual(len(server.seen), 4)

    def test_always_500_marks_that_batch_only(self):
        # Batch 1 gets four 500s (first try + 3 retries), batch 2 succeeds.
        server, url = self.serve(["500"] * 4)
        client, _ = self.client(url, retries=3, batch_size=3)
        cases = numbered_cases(5)
        results = client.evaluate(cases, on_batch_failure="mark")
        self.assertEqual(client.marked_cases, 3)
        self.assertTrue(all("HTTP 500" in r["error"] for r in results[:3]))
        self.assertEqual(results[3:], self.expected(cases)[3:])

    def test_4xx_is_not_retried(self):
        server, url = self.serve(["400"])
        client, sleeps = self.client(url, retries=3)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(2))
        self.assertIn("HTTP 400", str(ctx.exception))
        self.assertIn("not retryable", str(ctx.exception))
        self.assertEqual(len(server.seen), 1)
        self.assertEqual(sleeps, [])

    def test_wrong_number_of_results_is_retried(self):
        server, url = self.serve(default="short")
        client, sleeps = self.client(url, retries=2)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(3))
        self.assertIn("invalid answer: 2 result(s) for a batch of 3 case(s)",
                      str(ctx.exception))
        self.assertIn("after 3 tries", str(ctx.exception))
        self.assertEqual(len(server.seen), 3)
        self.assertEqual(len(sleeps), 2)

    def test_invalid_answer_then_a_good_one(self):
        server, url = self.serve(["short", "garbage"])
        client, _ = self.client(url, retries=2)
        cases = numbered_cases(3)
        self.assertEqual(client.evaluate(cases), self.expected(cases))
        self.assertEqual(len(server.seen), 3)

    def test_non_json_answer(self):
        server, url = self.serve(default="garbage")
        client, _ = self.client(url, retries=1)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(1))
        self.assertIn("not JSON", str(ctx.exception))
        self.assertEqual(len(server.seen), 2)

    def test_timeout_is_retried(self):
        server, url = self.serve(default="slow")
        server.slow_seconds = 1.0
        client, sleeps = self.client(url, retries=1, timeout=0.2)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(1))
        self.assertIn("timed out", str(ctx.exception))
        self.assertEqual(len(sleeps), 1)


def changed(**fields):
    """An action: the real results with ``fields`` set on the first one
    (a value of DROP removes the key)."""
    def edit(results):
        for key, value in fields.items():
            if value is DROP:
                del results[0][key]
            else:
                results[0][key] = value
        return {"results": results}
    return edit


DROP = object()


class AnswerValidationTest(ClientTestCase):
    """Every field of an answer is checked; an invalid answer is a service error."""

    INVALID = [
        ("reachable is the text \"false\"", changed(reachable="false"),
         "result 1 \"reachable\" is text, expected true or false"),
        ("reachable is 1", changed(reachable=1), "\"reachable\" is a number"),
        ("reachable missing", changed(reachable=DROP), "result 1 has no \"reachable\""),
        ("grounding null", changed(station_grounding=None),
         "\"station_grounding\" is null, expected true or false"),
        ("reason is a list", changed(reachable_reason=["x"]),
         "\"reachable_reason\" is a list, expected text"),
        ("details not a list", changed(match_details={"a": 1}),
         "\"match_details\" is a JSON object, expected a list"),
        ("leg not an object", changed(match_details=["leg"]),
         "match_details leg 1 is text, expected an object"),
        ("leg stop id a list", changed(match_details=[{"boarding_stop_id": ["bus-1"]}]),
         "match_details leg 1 \"boarding_stop_id\" is a list"),
        ("error a number", changed(error=5), "\"error\" is a number, expected text"),
        ("code a number", changed(reachable_code=3), "\"reachable_code\" is a number"),
        ("codes text", changed(station_grounding_codes="origin_too_far"),
         "\"station_grounding_codes\" is not a list of text"),
        ("result not an object", lambda results: {"results": ["ok"] + results[1:]},
         "result 1 is text, expected an object"),
        ("results not a list", lambda results: {"results": {"0": results[0]}},
         "no \"results\" list"),
        ("answer a list", lambda results: results, "no \"results\" list"),
        ("deep answer", b'{"results": ' + b"[" * 3000 + b"]" * 3000 + b"}",
         "JSON nested more than 100 levels deep"),
        ("not UTF-8", b'{"results": ["\xff"]}', "not UTF-8"),
    ]

    def test_each_invalid_answer_is_retried_then_unavailable(self):
        for name, action, words in self.INVALID:
            with self.subTest(name):
                server, url = self.serve(default=action)
                client, _ = self.client(url, retries=1)
                with self.assertRaises(ServiceUnavailable) as ctx:
                    client.evaluate(numbered_cases(2))
                self.assertIn("invalid answer", str(ctx.exception))
                self.assertIn(words, str(ctx.exception))
                self.assertEqual(len(server.seen), 2)         # retried like a 5xx

    def test_invalid_answer_under_mark_marks_the_batch(self):
        server, url = self.serve(default=changed(reachable="true"))
        client, _ = self.client(url, retries=0)
        results = client.evaluate(numbered_cases(2), on_batch_failure="mark")
        self.assertEqual(client.marked_cases, 2)
        self.assertTrue(all(r["service_failure"] is True for r in results))
        self.assertTrue(all(r["reachable"] is False for r in results))

    def test_result_with_its_own_error_is_returned_as_is(self):
        own = {"error": "case is text, expected a JSON object"}
        server, url = self.serve([lambda results: {"results": [own] + results[1:]}])
        client, _ = self.client(url)
        cases = numbered_cases(3)
        results = client.evaluate(cases)
        self.assertEqual(results[0], own)
        self.assertNotIn("service_failure", results[0])
        self.assertEqual(results[1:], self.expected(cases)[1:])
        self.assertEqual(len(server.seen), 1)

    def test_optional_fields_may_be_absent_and_extra_keys_are_ignored(self):
        def minimal(results):
            return {"results": [{"reachable": r["reachable"],
                                 "station_grounding": r["station_grounding"], "extra": [1]}
                                for r in results], "note": "x"}
        server, url = self.serve([minimal])
        client, _ = self.client(url)
        results = client.evaluate(numbered_cases(2))
        self.assertEqual([set(r) for r in results],
                         [{"reachable", "station_grounding", "extra"}] * 2)

    def test_null_error_and_null_leg_fields_are_valid(self):
        server, url = self.serve([changed(error=None, match_details=[
            {"line_query": "x", "line_name": None}])])
        client, _ = self.client(url)
        self.assertIsNone(client.evaluate(numbered_cases(1))[0]["error"])

    def test_result_problem_hand_checked(self):
        from general_llm.service_client import result_problem
        self.assertIsNone(result_problem({"reachable": False, "station_grounding": False}))
        self.assertIsNone(result_problem({"error": "x"}))
        self.assertEqual(result_problem({}), "has no \"reachable\"")
        self.assertEqual(result_problem(None), "is null, expected an object")
        self.assertEqual(result_problem({"error": "x", "reachable": "no"}),
                         "\"reachable\" is text, expected true or false")


class Trickler(object):
    """A loopback server that answers one request per connection very slowly.

    It reads the request, then sends ``answer`` (status line, headers and
    body) ``step`` bytes at a time with ``pause`` seconds between: a valid
    answer that takes about len(answer) / step * pause seconds in all.
    """

    def __init__(self, answer, step=1, pause=0.05):
        self.answer, self.step, self.pause = answer, step, pause
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]

    def serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    received = b""
                    while b"\r\n\r\n" not in received:
                        received += conn.recv(65536)
                    for start in range(0, len(self.answer), self.step):
                        if self.stop.is_set():
                            break
                        conn.sendall(self.answer[start:start + self.step])
                        time.sleep(self.pause)
                except OSError:
                    pass                       # the client gave up: expected

    def close(self):
        self.stop.set()
        self.thread.join(10)
        self.listener.close()


def http_answer(payload):
    body = json.dumps(payload).encode("ascii")
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % len(body)) + body


class WholeRequestTimeoutTest(ClientTestCase):
    """``timeout`` bounds the whole request, not each socket read."""

    def trickler(self, answer):
        server = Trickler(answer)
        self.addCleanup(server.close)
        return server

    def test_trickled_body_times_out(self):
        cases = numbered_cases(1)
        # About 300 bytes at 20 bytes/s: 15 s in all, each byte well within 0.3 s.
        server = self.trickler(http_answer({"results": self.expected(cases)}))
        client, sleeps = self.client(server.url, timeout=0.3, retries=1)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(cases)
        self.assertIn("timed out after 0.3 s", str(ctx.exception))
        self.assertIn("after 2 tries", str(ctx.exception))

    def test_trickled_status_line_times_out(self):
        server = self.trickler(b"HTTP/1.1 200 OK" + b" " * 400 + b"\r\n\r\n")
        client, _ = self.client(server.url, timeout=0.3, retries=0)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(1))
        self.assertIn("timed out after 0.3 s", str(ctx.exception))

    def test_a_quick_trickle_within_the_timeout_is_read(self):
        cases = numbered_cases(1)
        answer = http_answer({"results": self.expected(cases)})
        server = Trickler(answer, step=64, pause=0.01)
        self.addCleanup(server.close)
        client, _ = self.client(server.url, timeout=10)
        self.assertEqual(client.evaluate(cases), self.expected(cases))


class BatchingTest(ClientTestCase):

    def test_batch_size_and_order(self):
        server, url = self.serve()
        client, _ = self.client(url, batch_size=3)
        cases = numbered_cases(7)
        progress = []
        results = client.evaluate(cases, progress=progress.append)
        self.assertEqual(results, self.expected(cases))
        self.assertEqual([size for _, size in server.seen], [3, 3, 1])
        self.assertEqual({path for path, _ in server.seen}, {BATCH_PATH})
        self.assertEqual(progress, [3, 3, 1])

    def test_full_url_accepted(self):
        server, url = self.serve()
        client, _ = self.client(url + BATCH_PATH, batch_size=50)
        cases = numbered_cases(4)
        self.assertEqual(client.evaluate(cases), self.expected(cases))
        self.assertEqual(len(server.seen), 1)


class RealServerTest(ClientTestCase):
    """The client against general_llm/server.py: same answers as in process."""

    def test_round_trip(self):
        lines, stations = fixture()
        server = service.make_server(lines, stations, "127.0.0.1", 0, log=lambda line: None)
        thread = serve_in_background(server)
        try:
            client, _ = self.client(server.url, batch_size=4)
            cases = numbered_cases(10) + ["not a case"]
            self.assertEqual(client.evaluate(cases), self.expected(cases))
            # A lone surrogate fails its own case only, on both sides of the wire.
            odd = numbered_cases(3)
            odd[1]["pred"]["station_name"] = ["罗湖", "\ud800"]
            results = client.evaluate(odd)
            self.assertEqual(results, self.expected(odd))
            self.assertIn("lone surrogate", results[1]["error"])
            self.assertNotIn("error", results[0])
        finally:
            stop_serving(server, thread)


class HostileServiceTest(ClientTestCase):
    """Redirects, error answers and status lines a service should not send
    (issue 23): never followed off the origin, never a GET, bounded, escaped."""

    def test_redirect_to_another_origin_is_not_followed(self):
        other, other_url = self.serve()
        for status in (301, 302, 303, 307, 308):
            with self.subTest(status):
                server, url = self.serve([("redirect", status, other_url + BATCH_PATH, 0)])
                client, sleeps = self.client(url, retries=2)
                with self.assertRaises(ServiceUnavailable) as ctx:
                    client.evaluate(numbered_cases(1))
                message = str(ctx.exception)
                self.assertIn("HTTP %d: a redirect to %s" % (status, other_url), message)
                self.assertIn("not followed", message)
                self.assertIn("not retryable", message)
                self.assertEqual(len(server.seen), 1)
        self.assertEqual((other.seen, other.gets), ([], []))

    def test_same_origin_307_is_followed_and_302_is_not_replayed_as_a_get(self):
        server, url = self.serve([("redirect", 307, "/moved" + BATCH_PATH, 0)])
        client, _ = self.client(url)
        cases = numbered_cases(2)
        self.assertEqual(client.evaluate(cases), self.expected(cases))
        self.assertEqual([path for path, _ in server.seen], [BATCH_PATH, "/moved" + BATCH_PATH])
        self.assertEqual(server.bodies[0], server.bodies[1])
        for status in (301, 302, 303):
            with self.subTest(status):
                server, url = self.serve([("redirect", status, "/moved" + BATCH_PATH, 0)])
                client, _ = self.client(url)
                with self.assertRaises(ServiceUnavailable) as ctx:
                    client.evaluate(cases)
                self.assertIn("a POST is never sent again as a GET", str(ctx.exception))
                self.assertEqual((len(server.seen), server.gets), (1, []))

    def test_timeout_bounds_the_redirects_too(self):
        hop = ("redirect", 307, BATCH_PATH, 0.35)     # each hop within the timeout
        server, url = self.serve([hop, hop, hop, "ok"])
        client, _ = self.client(url, retries=0, timeout=0.6)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(1))
        self.assertIn("timed out after 0.6 s", str(ctx.exception))
        # Each hop takes the server 0.35 s: within 0.6 s a client sends at most
        # two requests (fewer on a slow machine, never more), where one that
        # timed each hop apart would follow all three to the answer.
        self.assertLessEqual(len(server.seen), 2)

    def test_error_answers_are_bounded_and_escaped(self):
        huge = {"error": "x" * (5 * 1024 * 1024)}        # only its first 64 KiB are read
        long = {"error": "\x1b[2J" + "x" * 5000}
        deep = b'{"error": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        for name, raw, words in (
                ("huge", json.dumps(huge).encode(), "(Internal)"),
                ("escaped and cut", json.dumps(long).encode(), "(\\x1b[2Jxxx"),
                ("deep", deep, "(Internal"),
                ("status line", b"HTTP/1.1 2x0 \x1b[31mred\r\n\r\n", "\\x1b[31mred")):
            with self.subTest(name):
                if name != "status line":
                    raw = (b"HTTP/1.1 500 Internal\r\nContent-Length: %d\r\n\r\n"
                           % len(raw)) + raw
                server, url = self.serve([("raw", raw)], default=("raw", raw))
                client, _ = self.client(url, retries=1)
                with self.assertRaises(ServiceUnavailable) as ctx:
                    client.evaluate(numbered_cases(1))
                message = str(ctx.exception)
                self.assertIn(words, message)
                self.assertNotIn("\x1b", message)
                self.assertLess(len(message), 1000)
                self.assertEqual(len(server.seen), 2)          # retried like any 5xx


if __name__ == "__main__":
    unittest.main()
