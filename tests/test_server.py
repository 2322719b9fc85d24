"""Tests of general_llm/server.py: the local route-eval HTTP service."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from general_llm import server as service  # noqa: E402
from general_llm.route_eval import LineTable, evaluate_cases  # noqa: E402
from tests.support import (  # noqa: E402
    SHENZHEN, fixture_lines, fixture_stations, sample_cases, service_case as make_case,
    write_fixture_files)

SERVER_SCRIPT = os.path.join(REPO, "general_llm", "server.py")
BATCH = service.BATCH_PATH
JSON_TYPE = "application/json; charset=utf-8"


class ServerTestCase(unittest.TestCase):
    """Runs the service on a free loopback port in a thread."""

    SERVER_OPTIONS = {}

    def setUp(self):
        self.lines = fixture_lines()
        self.stations = fixture_stations()
        self.log = []
        self.server = service.make_server(self.lines, self.stations, "127.0.0.1", 0,
                                          log=self.log.append, **self.SERVER_OPTIONS)
        # A short poll interval keeps shutdown() in tearDown quick.
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.host, self.port = self.server.server_address[:2]

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

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


class EndpointTest(ServerTestCase):

    def test_healthz(self):
        status, response, payload = self.request("GET", "/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(response.getheader("Content-Type"), JSON_TYPE)
        self.assertEqual(payload, {"status": "ok", "stations": 5, "lines": 2})

    def test_head_healthz_has_no_body(self):
        status, response, payload = self.request("HEAD", "/healthz")
        self.assertEqual(status, 200)
        self.assertIsNone(payload)

    def test_batch_matches_in_process_results_in_order(self):
        cases = sample_cases()
        status, response, payload = self.request("POST", BATCH, {"cases": cases})
        self.assertEqual(status, 200)
        self.assertEqual(response.getheader("Content-Type"), JSON_TYPE)
        self.assertEqual(payload, {"results": evaluate_cases(cases, self.lines, self.stations)})
        results = payload["results"]
        self.assertEqual([r["reachable"] for r in results],
                         [True, True, False, False, False, False, True])
        self.assertFalse(results[0]["station_grounding"] is None)

    def test_per_case_errors(self):
        cases = [make_case(["地铁1号线"], ["罗湖", "国贸"]), 7, {"city": SHENZHEN}]
        status, _, payload = self.request("POST", BATCH, {"cases": cases})
        self.assertEqual(status, 200)
        ok, number, incomplete = payload["results"]
        self.assertNotIn("error", ok)
        for result in (number, incomplete):
            self.assertFalse(result["reachable"])
            self.assertEqual(result["reachable_reason"], result["error"])
            self.assertEqual(result["match_details"], [])
        self.assertIn("number", number["error"])
        self.assertIn("start", incomplete["error"])

    def test_empty_batch(self):
        self.assertEqual(self.request("POST", BATCH, {"cases": []})[2], {"results": []})

    def test_query_string_is_ignored(self):
        self.assertEqual(self.request("GET", "/healthz?verbose=1")[0], 200)

    def test_keep_alive(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            for _ in range(3):
                status, _, payload = self.request("POST", BATCH, {"cases": sample_cases()},
                                                  connection=conn)
                self.assertEqual(status, 200)
                self.assertEqual(len(payload["results"]), 7)
        finally:
            conn.close()

    def test_one_log_line_per_request(self):
        self.request("POST", BATCH, {"cases": sample_cases()})
        self.request("GET", "/nowhere")
        self.assertEqual(len(self.log), 2)
        self.assertIn("POST %s 200 7 cases" % BATCH, self.log[0])
        self.assertTrue(self.log[0].endswith(" ms"))
        self.assertIn("GET /nowhere 404", self.log[1])


class BadRequestTest(ServerTestCase):

    def assertError(self, result, status, words):
        self.assertEqual(result[0], status, result[2])
        self.assertEqual(result[1].getheader("Content-Type"), JSON_TYPE)
        self.assertEqual(set(result[2]), {"error"})
        for word in words:
            self.assertIn(word, result[2]["error"])

    def test_malformed_json(self):
        self.assertError(self.request("POST", BATCH, b'{"cases": ['), 400, ["not valid JSON"])

    def test_not_utf8(self):
        self.assertError(self.request("POST", BATCH, b'\xff\xfe{}'), 400, ["UTF-8"])

    def test_not_an_object(self):
        self.assertError(self.request("POST", BATCH, [1, 2]), 400, ["JSON object"])

    def test_no_cases(self):
        self.assertError(self.request("POST", BATCH, {"case": []}), 400, ["\"cases\""])

    def test_cases_not_a_list(self):
        self.assertError(self.request("POST", BATCH, {"cases": {"a": 1}}), 400,
                         ["\"cases\" must be a list"])

    def test_unknown_path(self):
        self.assertError(self.request("GET", "/api/eval/route"), 404, ["/api/eval/route"])
        self.assertError(self.request("POST", "/", {"cases": []}), 404, ["no such path"])

    def test_wrong_method(self):
        result = self.request("GET", BATCH)
        self.assertError(result, 405, ["GET", "POST"])
        self.assertEqual(result[1].getheader("Allow"), "POST")
        result = self.request("POST", "/healthz", {"cases": []})
        self.assertError(result, 405, ["POST"])
        self.assertEqual(result[1].getheader("Allow"), "GET")
        self.assertError(self.request("DELETE", BATCH), 405, ["DELETE"])

    def test_unsupported_method_is_json_too(self):
        self.assertError(self.request("BREW", BATCH), 501, ["BREW"])

    def test_body_over_the_limit(self):
        result = self.raw_request("POST", BATCH, {
            "Content-Type": "application/json",
            "Content-Length": str(service.MAX_BODY_BYTES + 1)})
        self.assertError(result, 413, [str(service.MAX_BODY_BYTES + 1), "limit"])

    def test_missing_content_length(self):
        self.assertError(self.raw_request("POST", BATCH, {"Content-Type": "application/json"}),
                         411, ["Content-Length"])

    def test_bad_content_length(self):
        self.assertError(self.raw_request("POST", BATCH, {"Content-Length": "ten"}), 400,
                         ["Content-Length"])

    def test_server_keeps_serving_after_errors(self):
        self.request("POST", BATCH, b"nope")
        self.assertEqual(self.request("GET", "/healthz")[0], 200)


class ConcurrencyTest(ServerTestCase):

    CLIENTS = 20
    REQUESTS = 20

    def test_concurrent_clients(self):
        # Expected answers computed in process on a separate network, so the
        # server's lazily filled caches start cold and are raced.
        lines, stations = fixture_lines(), fixture_stations()
        expected = {seed: evaluate_cases(sample_cases(seed), lines, stations)
                    for seed in range(self.CLIENTS * self.REQUESTS)}
        failures = []
        barrier = threading.Barrier(self.CLIENTS)

        def client(number):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                barrier.wait()
                for i in range(self.REQUESTS):
                    seed = number * self.REQUESTS + i
                    status, _, payload = self.request("POST", BATCH,
                                                      {"cases": sample_cases(seed)},
                                                      connection=conn)
                    if status != 200 or payload != {"results": expected[seed]}:
                        failures.append((number, i, status))
            except Exception as exc:  # report, the assertion below fails
                failures.append((number, repr(exc)))
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(self.CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(failures, [])
        self.assertEqual(len(self.log), self.CLIENTS * self.REQUESTS)


class BadCaseTest(ServerTestCase):
    """One bad case gets its own error result; the rest of the batch is judged."""

    def assertOnlyCaseFails(self, bad_case, words, raw=None):
        good = sample_cases()
        if raw is None:
            body = json.dumps({"cases": good[:3] + [bad_case] + good[3:]}).encode("ascii")
        else:                               # JSON text json.dumps cannot write
            body = ('{"cases": [%s, %s, %s]}' % (json.dumps(good[0]), raw,
                                                 json.dumps(good[1]))).encode("ascii")
            good = good[:2]
        status, response, payload = self.request("POST", BATCH, body)
        self.assertEqual(status, 200, payload)
        results = payload["results"]
        bad_at = 3 if raw is None else 1
        bad = results.pop(bad_at)
        self.assertEqual(results, evaluate_cases(good, self.lines, self.stations))
        self.assertEqual(bad["reachable_code"], "case_error")
        self.assertFalse(bad["reachable"])
        for word in words:
            self.assertIn(word, bad["error"])

    def test_lone_surrogate_in_a_station_name(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线"], ["罗湖", "\ud800"]),
                                 ["station_name entry 2", "lone surrogate"])

    def test_lone_surrogate_in_a_line_name(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线\udc00"], ["罗湖", "国贸"]),
                                 ["line_sequence entry 1", "lone surrogate"])

    def test_latitude_140(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线"], ["罗湖", "国贸"], start=(114.0, 140)),
                                 ["start latitude 140 is outside -90..90"])

    def test_longitude_200(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线"], ["罗湖", "国贸"], end=(200, 22.5)),
                                 ["end longitude 200 is outside -180..180"])

    def test_infinite_and_nan_coordinates(self):
        for raw in ("Infinity", "-Infinity", "NaN", "1e400"):
            with self.subTest(raw=raw):
                case = json.dumps(make_case(["地铁1号线"], ["罗湖", "国贸"]))
                case = case.replace('"start": [114.0, 22.5]', '"start": [%s, 22.5]' % raw)
                self.assertIn(raw, case)
                self.assertOnlyCaseFails(None, ["start is not two finite numbers"], raw=case)

    def test_wrong_types(self):
        self.assertOnlyCaseFails({"city": ["深圳"], "start": [114, 22], "end": [114, 22],
                                  "pred": {"line_sequence": [], "station_name": []}},
                                 ["city is a list"])
        self.assertOnlyCaseFails(None, ["case is null"], raw="null")

    def test_answer_is_ascii_even_for_surrogates_in_the_data(self):
        # A data file may hold a lone surrogate (JSON "\ud800" in line_info):
        # the answer echoes it escaped instead of failing to encode.
        self.server.lines = LineTable.from_rows([("0755", "地铁1号线", [
            {"station_name": "罗湖\ud800", "stop_id": "bus-1"},
            {"station_name": "国贸", "stop_id": "bus-2"}])])
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            body = json.dumps({"cases": [make_case(["地铁1号线"], ["罗湖", "国贸"])]})
            conn.request("POST", BATCH, body=body.encode("ascii"))
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        self.assertEqual(response.status, 200)
        raw.decode("ascii")                     # no UnicodeDecodeError: pure ASCII
        self.assertIn(b"\\ud800", raw)
        result = json.loads(raw.decode("ascii"))["results"][0]
        self.assertTrue(result["reachable"], result)
        self.assertEqual(result["match_details"][0]["boarding_name"], "罗湖\ud800")


class BodyShapeTest(unittest.TestCase):
    """body_shape_problem: the scan before decoding (hand-made texts)."""

    def test_small_bodies_pass(self):
        for text in ("", "{}", '{"cases": []}', '{"cases": [1, 2, 3]}', "[[[]]]", "not json"):
            self.assertIsNone(service.body_shape_problem(text, max_items=3, max_depth=3), text)

    def test_too_many_items_in_any_list(self):
        self.assertEqual(service.body_shape_problem('{"cases": [1, 2, 3, 4]}', 3, 10)[0], 413)
        self.assertIsNone(service.body_shape_problem('{"cases": [1, 2, 3]}', 3, 10))
        # A list inside a case counts too; an object's members do not.
        self.assertEqual(service.body_shape_problem('{"cases": [[1, 2, 3, 4]]}', 3, 10)[0],
                         413)
        self.assertIsNone(service.body_shape_problem('{"a": 1, "b": 2, "c": 3, "d": [1, 2]}',
                                                     3, 10))
        self.assertIsNone(service.body_shape_problem('{"cases": [[1, 2, 3], [4, 5, 6], 7]}',
                                                     3, 10))

    def test_too_deep(self):
        status, message = service.body_shape_problem("[" * 4 + "]" * 4, 3, 3)
        self.assertEqual(status, 400)
        self.assertIn("nested more than 3 levels", message)
        self.assertIsNone(service.body_shape_problem("[" * 3 + "]" * 3, 3, 3))
        self.assertIsNone(service.body_shape_problem('{"a": [{"b": 1}], "c": [{}]}', 3, 3))
        self.assertEqual(service.body_shape_problem('{"a": [{"b": []}]}', 3, 3)[0], 400)

    def test_brackets_and_commas_inside_strings_do_not_count(self):
        text = '{"cases": ["[[[[,,,,", "\\"[{,", "{{{{"]}'
        self.assertIsNone(service.body_shape_problem(text, max_items=3, max_depth=2))
        self.assertEqual(json.loads(text)["cases"][1], '"[{,')

    def test_defaults(self):
        cases = "[%s]" % ",".join(["0"] * service.MAX_CASES)
        self.assertIsNone(service.body_shape_problem('{"cases": %s}' % cases))
        one_more = '{"cases": %s}' % (cases[:-1] + ",0]")
        self.assertEqual(service.body_shape_problem(one_more)[0], 413)


class LimitsTest(ServerTestCase):

    def assertError(self, result, status, words):
        self.assertEqual(result[0], status, result[2])
        self.assertEqual(set(result[2]), {"error"})
        for word in words:
            self.assertIn(word, result[2]["error"])

    def test_body_nested_3000_deep(self):
        body = b'{"cases": ' + b"[" * 3000 + b"]" * 3000 + b"}"
        self.assertError(self.request("POST", BATCH, body), 400,
                         ["nested more than %d levels" % service.MAX_JSON_DEPTH])
        self.assertEqual(self.request("GET", "/healthz")[0], 200)

    def test_nesting_just_over_and_at_the_limit(self):
        depth = service.MAX_JSON_DEPTH
        # {"cases": [ is two levels; the case holds the rest.
        inner = depth - 2
        at_limit = '{"cases": [%s%s]}' % ("[" * inner, "]" * inner)
        status, _, payload = self.request("POST", BATCH, at_limit.encode("ascii"))
        self.assertEqual(status, 200, payload)
        self.assertIn("expected a JSON object", payload["results"][0]["error"])
        over = '{"cases": [{"city": %s%s}]}' % ("[" * inner, "]" * inner)
        self.assertError(self.request("POST", BATCH, over.encode("ascii")), 400,
                         ["nested more than"])

    def test_case_limit(self):
        cases = [make_case(["地铁1号线"], ["罗湖", "国贸"])] * service.MAX_CASES
        status, _, payload = self.request("POST", BATCH, {"cases": cases})
        self.assertEqual(status, 200)
        self.assertEqual(len(payload["results"]), service.MAX_CASES)
        self.assertError(self.request("POST", BATCH, {"cases": cases + [cases[0]]}), 413,
                         ["more than %d" % service.MAX_CASES, "smaller batches"])

    def test_ten_megabytes_of_tiny_cases_are_refused(self):
        count = 5 * 1000 * 1000
        body = b'{"cases": [' + b",".join([b"0"] * count) + b"]}"
        self.assertLessEqual(len(body), service.MAX_BODY_BYTES)
        self.assertError(self.request("POST", BATCH, body), 413, ["at most 1000 cases"])
        self.assertIn("413 - ", self.log[-1])      # refused before decoding: no case count

    def test_huge_integer_fails_its_case_only(self):
        body = ('{"cases": [%s, {"city": "%s", "start": [%s, 22], "end": [114, 22], '
                '"pred": {"line_sequence": [], "station_name": []}}]}'
                % (json.dumps(make_case(["地铁1号线"], ["罗湖", "国贸"])), SHENZHEN,
                   "9" * 5000)).encode("utf-8")
        status, _, payload = self.request("POST", BATCH, body)
        # Python 3.11+ refuses int() of over 4,300 digits: read as a float (inf),
        # it fails its own case only.
        self.assertEqual(status, 200, payload)
        self.assertNotIn("error", payload["results"][0])
        self.assertIn("start is not two finite numbers", payload["results"][1]["error"])


class TimeoutTest(ServerTestCase):
    """Stalled requests release their thread (read_timeout 0.3 s here)."""

    SERVER_OPTIONS = {"read_timeout": 0.3}

    def connect(self):
        sock = socket.create_connection((self.host, self.port), timeout=10)
        self.addCleanup(sock.close)
        return sock

    def read_all(self, sock):
        """Everything the server sends until it closes (or 10 s pass)."""
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    def test_lying_content_length_gets_408(self):
        sock = self.connect()
        sock.sendall(b"POST " + BATCH.encode("ascii") + b" HTTP/1.1\r\nHost: t\r\n"
                     b"Content-Length: 100\r\n\r\n" + b'{"cases": []')
        answer = self.read_all(sock)
        self.assertTrue(answer.startswith(b"HTTP/1.1 408 "), answer[:80])
        self.assertIn(b"request not complete within 0.3 s", answer)
        self.assertIn("408", self.log[-1])

    def test_trickled_headers_are_cut_off(self):
        sock = self.connect()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        closed = False
        for _ in range(50):                 # a header byte every 0.1 s, for at most 5 s
            try:
                sock.sendall(b"X")
            except OSError:                 # reset by the server
                closed = True
                break
            time.sleep(0.1)
            sock.settimeout(0.001)
            try:
                if sock.recv(1) == b"":     # the server closed the connection
                    closed = True
                    break
            except socket.timeout:
                pass
            except OSError:
                closed = True
                break
        self.assertTrue(closed, "the server kept a trickling client for 5 s")
        self.assertTrue(any("closed: request not complete within 0.3 s" in line
                            for line in self.log), self.log)

    def test_trickled_body_is_cut_off(self):
        sock = self.connect()
        sock.sendall(b"POST " + BATCH.encode("ascii") + b" HTTP/1.1\r\nHost: t\r\n"
                     b"Content-Length: 1000\r\n\r\n")
        answer = b""
        for _ in range(50):
            try:
                sock.sendall(b" ")
            except OSError:
                break
            time.sleep(0.1)
            sock.settimeout(0.001)
            try:
                answer = sock.recv(65536)
                if answer:
                    break
            except socket.timeout:
                pass
            except OSError:
                break
        self.assertTrue(answer.startswith(b"HTTP/1.1 408 "), answer[:80])

    def test_idle_connection_is_closed_without_a_log_line(self):
        sock = self.connect()
        self.assertEqual(self.read_all(sock), b"")
        self.assertEqual(self.log, [])

    def test_keep_alive_within_the_timeout(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            for _ in range(3):
                self.assertEqual(self.request("GET", "/healthz", connection=conn)[0], 200)
                time.sleep(0.15)        # idle for half the read timeout
        finally:
            conn.close()


class ConnectionLimitTest(ServerTestCase):

    SERVER_OPTIONS = {"max_connections": 2}

    def test_connections_over_the_limit_get_503(self):
        held = [socket.create_connection((self.host, self.port), timeout=10)
                for _ in range(2)]
        try:
            # Both are served (one thread each) once they answer a request.
            for sock in held:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                self.assertTrue(sock.recv(65536).startswith(b"HTTP/1.1 200 "))
            status, response, payload = self.request("GET", "/healthz")
            self.assertEqual(status, 503)
            self.assertIn("server busy", payload["error"])
        finally:
            for sock in held:
                sock.close()
        for _ in range(100):               # the held connections' threads end
            time.sleep(0.05)
            if self.server._connections == 0:
                break
        self.assertEqual(self.request("GET", "/healthz")[0], 200)


class LogTest(ServerTestCase):

    def raw(self, request_bytes):
        sock = socket.create_connection((self.host, self.port), timeout=10)
        try:
            sock.sendall(request_bytes)
            return sock.recv(65536)
        finally:
            sock.close()

    def test_control_characters_in_the_path_are_escaped(self):
        answer = self.raw(b"GET /\x1b[31mred\x9b2J\x07 HTTP/1.1\r\nHost: t\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 404 "), answer[:80])
        self.assertNotIn(b"\x1b", answer)           # the JSON message escapes it too
        self.assertEqual(len(self.log), 1)
        line = self.log[0]
        self.assertIn("GET /\\x1b[31mred\\x9b2J\\x07 404", line)
        self.assertFalse([c for c in line if ord(c) < 32 or 127 <= ord(c) < 160], line)

    def test_control_characters_in_the_method_are_escaped(self):
        answer = self.raw(b"\x1b[2JGET / HTTP/1.1\r\nHost: t\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 501 "), answer[:80])
        self.assertIn("\\x1b[2JGET", self.log[0])
        self.assertNotIn("\x1b", self.log[0])

    def test_printable(self):
        self.assertEqual(service.printable("a\tb\n\x7f\x85é中\ud800"),
                         "a\\x09b\\x0a\\x7f\\x85é中\\ud800")
        self.assertEqual(service.printable(""), "")


class FramingTest(unittest.TestCase):
    """RFC 9112 message framing (sections 6.1, 6.3, 7.1): every way of
    delimiting a request body wrongly is refused, and the connection closed
    (one server for the class)."""

    @classmethod
    def setUpClass(cls):
        cls.log = []
        cls.server = service.make_server(fixture_lines(), fixture_stations(), "127.0.0.1", 0,
                                         log=cls.log.append, read_timeout=0.3)
        cls.thread = threading.Thread(target=cls.server.serve_forever,
                                      kwargs={"poll_interval": 0.05}, daemon=True)
        cls.thread.start()
        cls.port = cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        cls.thread.join(10)

    BODY = b'{"cases": []}'

    def exchange(self, head, body=BODY, version=b"HTTP/1.1", path=BATCH.encode("ascii"),
                 method=b"POST"):
        """Send one request; -> (status, everything the server sent until it closed)."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            sock.sendall(method + b" " + path + b" " + version + b"\r\nHost: t\r\n" + head
                         + b"\r\n" + body)
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

    def test_content_length_must_be_one_run_of_digits(self):
        for value in (b"+13", b"-1", b"13, 13", b"13,14", b" 1 3", b"0x0d", b"1e1", b"13.0",
                      b"\xef\xbc\x91\xef\xbc\x93", b"", b"13;x"):
            with self.subTest(value):
                self.assertRefused(b"Content-Length: " + value + b"\r\n", 400,
                                   "is not a byte count")

    def test_two_content_length_fields(self):
        for second in (b"14", b"13"):
            with self.subTest(second):
                self.assertRefused(b"Content-Length: 13\r\nContent-Length: " + second
                                   + b"\r\n", 400, "2 Content-Length fields")

    def test_huge_content_length(self):
        for value in (b"10485761", b"9" * 30, b"9" * 5000):
            with self.subTest(value[:20]):
                self.assertRefused(b"Content-Length: " + value + b"\r\n", 413,
                                   "exceeds the 10485760-byte limit")

    def test_transfer_encoding_with_content_length_or_not_chunked(self):
        cases = ((b"Transfer-Encoding: chunked\r\nContent-Length: 13\r\n", 400,
                  "both Transfer-Encoding and Content-Length"),
                 (b"Content-Length: 13\r\nTransfer-Encoding: identity\r\n", 400,
                  "both Transfer-Encoding and Content-Length"),
                 (b"Transfer-Encoding: gzip\r\n", 400, "chunked is not the final coding"),
                 (b"Transfer-Encoding: chunked, gzip\r\n", 400, "not the final coding"),
                 (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", 400,
                  "not the final coding"),
                 (b"Transfer-Encoding: chunked, chunked\r\n", 400, "more than once"),
                 (b"Transfer-Encoding: gzip, chunked\r\n", 501,
                  "transfer coding 'gzip' is not supported"),
                 (b"Transfer-Encoding: x-custom;q=1, chunked\r\n", 501, "'x-custom'"),
                 (b"Transfer-Encoding: \r\n", 400, "not the final coding"))
        for head, status, words in cases:
            with self.subTest(head):
                self.assertRefused(head, status, words)
        self.assertRefused(b"Transfer-Encoding: chunked\r\n", 400, "HTTP/1.0",
                           version=b"HTTP/1.0")

    def test_a_chunked_body_is_read(self):
        body = b"6;ext=1\r\n" + self.BODY[:6] + b"\r\n7\r\n" + self.BODY[6:] + \
            b"\r\n0\r\nX-Trailer: 1\r\n\r\n"
        status, answer = self.exchange(b"Transfer-Encoding: Chunked\r\nConnection: close\r\n",
                                       body)
        self.assertEqual(status, 200, answer)
        self.assertTrue(answer.endswith(b'{"results": []}'), answer)

    def test_bad_chunked_bodies(self):
        cases = ((b"zz\r\n", 400, "not a hexadecimal number"),
                 (b"-1\r\n", 400, "not a hexadecimal number"),
                 (b"1" * 5000 + b"\r\n", 400, "longer than 4096 bytes"),
                 (b"F" * 17 + b"\r\n", 400, "not a hexadecimal number"),
                 (b"2\r\nabc\r\n0\r\n\r\n", 400, "does not end as its size says"),
                 (b"A00001\r\n", 413, "chunked body exceeds"),
                 (b"0\r\n" + b"X: 1\r\n" * 101 + b"\r\n", 400, "trailer lines"),
                 (b"5\r\nab", 408, "not complete within 0.3 s"))
        for body, status, words in cases:
            with self.subTest(body[:20]):
                self.assertRefused(b"Transfer-Encoding: chunked\r\n", status, words, body=body)

    def test_head_too_large_and_malformed_fields(self):
        self.assertRefused(b"X-Big: " + b"a" * (70 * 1024) + b"\r\n", 431, "exceed 65536 bytes")
        self.assertRefused(b"".join(b"X-%d: %s\r\n" % (n, b"a" * 900) for n in range(80)), 431,
                           "exceed 65536 bytes")
        self.assertRefused(b"Content-Length : 13\r\n", 400, "malformed header section")

    def test_framing_is_checked_on_every_path(self):
        self.assertRefused(b"Content-Length: +0\r\n", 400, "not a byte count",
                           path=b"/healthz", method=b"GET", body=b"")
        # A GET with a body is answered, then the connection is closed (the body unread).
        status, answer = self.exchange(b"Content-Length: 5\r\n", body=b"GET /",
                                       path=b"/healthz", method=b"GET")
        self.assertEqual(status, 200)
        self.assertEqual(answer.count(b"HTTP/1.1 "), 1)


class BodyBudgetTest(ServerTestCase):
    """Request bodies held at once are bounded across connections (503 past it)."""

    SERVER_OPTIONS = {"max_bodies_bytes": 100}

    def test_bodies_over_the_budget_get_503_until_one_is_done(self):
        held = socket.create_connection((self.host, self.port), timeout=10)
        try:
            held.sendall(b"POST " + BATCH.encode("ascii") + b" HTTP/1.1\r\nHost: t\r\n"
                         b"Content-Length: 80\r\n\r\n" + b'{"cases": ')
            body = b'{"cases": []}' + b" " * 37                 # 50 bytes
            for _ in range(100):                     # until the held body is counted
                status, response, payload = self.request("POST", BATCH, body)
                if status == 503:
                    break
                time.sleep(0.02)
            self.assertEqual(status, 503)
            self.assertIn("server busy", payload["error"])
            self.assertEqual(response.getheader("Retry-After"), "1")
        finally:
            held.close()                             # its body ends short: 400, released
        for _ in range(100):
            status = self.request("POST", BATCH, body)[0]
            if status == 200:
                break
            time.sleep(0.02)
        self.assertEqual(status, 200)
        self.assertEqual(self.server._bodies_bytes, 0)


class ScriptTest(unittest.TestCase):
    """server.py run as a program, from another directory."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.station_path, self.line_path = write_fixture_files(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def start(self, *args):
        proc = subprocess.Popen([sys.executable, SERVER_SCRIPT] + list(args),
                                cwd=self.tmp.name, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True,
                                encoding="utf-8")
        # Never hang the test run if the server misbehaves.
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        self.addCleanup(watchdog.cancel)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def test_serve_then_sigterm(self):
        proc = self.start("--station_info", self.station_path, "--line_info", self.line_path,
                          "--port", "0")
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("listening on http://"):
                break
        self.assertTrue(seen and seen[-1].startswith("listening on http://"), seen)
        host_port = seen[-1].strip()[len("listening on http://"):]
        host, port = host_port.rsplit(":", 1)
        self.assertEqual(host, "127.0.0.1")

        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        cases = sample_cases()
        conn.request("POST", BATCH, body=json.dumps({"cases": cases}).encode("utf-8"),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read().decode("utf-8"))
        conn.close()
        self.assertEqual(response.status, 200)
        self.assertEqual(payload["results"],
                         evaluate_cases(cases, fixture_lines(), fixture_stations()))

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 143, err)      # stopped by SIGTERM, as every tool
        self.assertIn("shutting down", err)
        self.assertIn("POST %s 200 7 cases" % BATCH, err)
        self.assertNotIn("Traceback", err)

    def test_missing_file_exits_2_with_one_line(self):
        proc = self.start("--station_info", os.path.join(self.tmp.name, "missing.csv"),
                          "--line_info", self.line_path, "--port", "0")
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("missing.csv", err)

    def test_bad_read_timeout_exits_2_with_one_line(self):
        for value in ("0", "-1", "nan", "inf", "3601"):
            with self.subTest(value=value):
                proc = self.start("--station_info", self.station_path, "--line_info",
                                  self.line_path, "--port", "0", "--read_timeout", value)
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, 2)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn("--read_timeout", err)

    def test_malformed_line_file_exits_2(self):
        bad = os.path.join(self.tmp.name, "bad_lines.csv")
        with open(bad, "w", encoding="utf-8") as handle:
            handle.write("citycode,line_name,station_list\n0755,1路,\"[{\"\"a\"\"\"\n")
        proc = self.start("--station_info", self.station_path, "--line_info", bad,
                          "--port", "0")
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("bad_lines.csv line 2", err)


if __name__ == "__main__":
    unittest.main()
