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
    (200 with a non-JSON body), "slow" (answer after the client gave up).
    """

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        cases = json.loads(body.decode("utf-8"))["cases"]
        action = self.server.next_action(self.path, len(cases))
        if action == "ok":
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
        body = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

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
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  daemon=True)
        thread.start()

        def stop():
            server.shutdown()
            server.server_close()
            thread.join(10)
        self.addCleanup(stop)
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
            RouteEvalClient("http://h", retries=-1)
        with self.assertRaises(ValueError):
            RouteEvalClient("http://h").evaluate([], on_batch_failure="ignore")


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

    def test_wrong_number_of_results(self):
        server, url = self.serve(["short"])
        client, _ = self.client(url)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(3))
        self.assertIn("2 result(s) for a batch of 3 case(s)", str(ctx.exception))
        self.assertEqual(len(server.seen), 1)

    def test_non_json_answer(self):
        server, url = self.serve(["garbage"])
        client, _ = self.client(url)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(1))
        self.assertIn("not JSON", str(ctx.exception))

    def test_timeout_is_retried(self):
        server, url = self.serve(default="slow")
        server.slow_seconds = 1.0
        client, sleeps = self.client(url, retries=1, timeout=0.2)
        with self.assertRaises(ServiceUnavailable) as ctx:
            client.evaluate(numbered_cases(1))
        self.assertIn("timed out", str(ctx.exception))
        self.assertEqual(len(sleeps), 1)


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
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  daemon=True)
        thread.start()
        try:
            client, _ = self.client(server.url, batch_size=4)
            cases = numbered_cases(10) + ["not a case"]
            self.assertEqual(client.evaluate(cases), self.expected(cases))
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)


if __name__ == "__main__":
    unittest.main()
