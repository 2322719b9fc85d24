"""general_llm/server.py's HTTP handling: stalled requests time out and
release their thread, the connection limit, the log lines, RFC 9112 message
framing (every wrong way of delimiting a body refused, the connection closed),
and the budget of request bodies held at once."""

import http.client
import os
import socket
import sys
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from general_llm import server as service  # noqa: E402
from tests.support.services import (FramingChecks, ServerTestCase, fixture_lines,
                                    fixture_stations, serve_in_background, stop_serving,
                                    wait_until)

BATCH = service.BATCH_PATH


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



class KeepAliveTest(ServerTestCase):
    """An idle keep-alive connection stays open within the read timeout (a
    long one here: a busy machine may pause this test for a while)."""

    SERVER_OPTIONS = {"read_timeout": 30.0}

    def test_keep_alive_within_the_timeout(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            for _ in range(3):
                self.assertEqual(self.request("GET", "/healthz", connection=conn)[0], 200)
                time.sleep(0.15)        # idle between requests
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
        self.assertTrue(wait_until(lambda: self.server._connections == 0))  # their threads end
        self.assertEqual(self.request("GET", "/healthz")[0], 200)


class NagleTest(ServerTestCase):
    """An answer goes out as its head, then its body: with Nagle's algorithm
    on, the body waited for the client's delayed ACK, 40 ms on every request
    of a keep-alive connection after the first.  Every connection has
    TCP_NODELAY set."""

    def test_connections_do_not_wait_for_delayed_acks(self):
        accepted = []
        get_request = self.server.get_request

        def recording():
            sock, address = get_request()
            accepted.append(sock)
            return sock, address
        self.server.get_request = recording
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            self.assertEqual(self.request("GET", "/healthz", connection=conn)[0], 200)
            self.assertEqual(len(accepted), 1)
            self.assertTrue(accepted[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        finally:
            conn.close()


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
        # the server's log lines go through the terminal's one_line
        self.assertEqual(service.one_line("a\tb\n\x7f\x85é中\ud800"),
                         "a\\x09b\\x0a\\x7f\\x85é中\\ud800")
        self.assertEqual(service.one_line(""), "")


class FramingTest(FramingChecks, unittest.TestCase):
    """RFC 9112 message framing (sections 6.1, 6.3, 7.1): every way of
    delimiting a request body wrongly is refused, and the connection closed
    (one server for the class)."""

    @classmethod
    def setUpClass(cls):
        cls.log = []
        cls.server = service.make_server(fixture_lines(), fixture_stations(), "127.0.0.1", 0,
                                         log=cls.log.append, read_timeout=0.3)
        cls.thread = serve_in_background(cls.server)
        cls.port = cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        stop_serving(cls.server, cls.thread)

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
            answers = []

            def busy():                              # once the held body is counted
                answers.append(self.request("POST", BATCH, body))
                return answers[-1][0] == 503
            wait_until(busy)
            status, response, payload = answers[-1]
            self.assertEqual(status, 503)
            self.assertIn("server busy", payload["error"])
            self.assertEqual(response.getheader("Retry-After"), "1")
        finally:
            held.close()                             # its body ends short: 400, released
        self.assertTrue(wait_until(lambda: self.request("POST", BATCH, body)[0] == 200))
        self.assertEqual(self.server._bodies_bytes, 0)


if __name__ == "__main__":
    unittest.main()
