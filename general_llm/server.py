"""A local route-eval service for the general-LLM benchmark (standard library only).

It answers what the published remote service answers (protocol.md section
11), from local station_info.csv and line_info.csv files:

    POST /api/eval/route/batch   {"cases": [...]} -> {"results": [...]}
    GET  /healthz                -> {"status": "ok", "stations": N, "lines": N}

Usage:

    python3 general_llm/server.py [--station_info PATH] [--line_info PATH]
                                  [--host 127.0.0.1] [--port 8765]
                                  [--read_timeout 10] [--version]

``--port 0`` picks a free port; the actual address is printed on stderr as
``listening on http://HOST:PORT``.  SIGINT/SIGTERM stop it cleanly (requests under
way are answered), with exit status 130/143 like every tool.

No request can crash it or hold it: a bad case gets its own error result, a
body is refused (4xx) before decoding when it nests deeper than
``MAX_JSON_DEPTH`` or holds a list of more than ``MAX_CASES`` items, a request
must arrive in full within ``read_timeout`` seconds of its first byte (else
408 or the connection is closed), an idle connection is closed after that
long, at most ``MAX_BUSY_BATCHES`` batches are decoded and judged at a time
and at most ``MAX_CONNECTIONS`` connections are served at once (more get 503),
holding at most ``MAX_BODIES_BYTES`` of request bodies together (more get 503).

Message framing follows RFC 9112 (sections 6 and 7.1): a request's
Content-Length must be one field holding ASCII digits only (``+5``, ``-1``,
``5, 5``, two fields, ``0x10`` are 400); Transfer-Encoding together with
Content-Length, in an HTTP/1.0 request, or without ``chunked`` as its final
coding (once) is 400; another transfer coding before ``chunked`` is 501; a
chunked body is decoded within the same limits (``MAX_BODY_BYTES``, chunk
lines of at most ``MAX_CHUNK_LINE`` bytes, at most ``MAX_TRAILER_LINES``
trailer lines).  The request line and headers must arrive within the first
``MAX_HEAD_BYTES`` (else 431).  Every error answer closes the connection.
"""

import io
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.exit_status import quiet_start
    quiet_start()

from common import MAX_JSON_DEPTH, VERSION, InputError, StationNetwork  # noqa: E402
from transitlm.catalog import DATA_ENV, line_file, station_file  # noqa: E402
from transitlm.exit_status import EXIT_OK, EXIT_USAGE, SIGNAL_STATUS, run_command  # noqa: E402
from transitlm.terminal import CommandParser, one_line  # noqa: E402
from general_llm.route_eval import (  # noqa: E402
    LineTable, evaluate_cases, json_shape_problem)

BATCH_PATH = "/api/eval/route/batch"
HEALTH_PATH = "/healthz"
MAX_BODY_BYTES = 10 * 1024 * 1024
# Request bodies held at once, all connections together (a body is held from
# its first byte until its answer is sent): past this, 503 and Retry-After.
MAX_BODIES_BYTES = 64 * 1024 * 1024
# The request line and headers together (a real request's are a few hundred
# bytes): counted on the bytes read from the socket before the body.
MAX_HEAD_BYTES = 64 * 1024
MAX_CHUNK_LINE = 4096            # bytes of a chunk-size line (with extensions)
MAX_TRAILER_LINES = 100          # trailer fields after a chunked body
_DIGITS_RE = re.compile(r"[0-9]+\Z")
_HEX_RE = re.compile(rb"[0-9A-Fa-f]{1,16}\Z")
# Cases per request.  The client sends 50 by default; a batch of 1,000 real
# cases is about 0.5 MB.  Checked on the raw text before decoding, so a body
# of millions of tiny cases costs a scan, not gigabytes of decoded objects.
MAX_CASES = 1000
DEFAULT_READ_TIMEOUT = 10.0      # seconds; see RouteEvalHandler
MAX_READ_TIMEOUT = 3600.0
# Batches decoded and judged at once.  The work is pure Python (one core
# under the GIL), so more would not be faster; fewer runnable threads keep
# /healthz and small requests answered promptly under load.
MAX_BUSY_BATCHES = 2
# Connections served at once (one thread each); more are answered 503.
MAX_CONNECTIONS = 512
# GIL switch interval of the server program (Python's default: 5 ms); see main().
SWITCH_INTERVAL_S = 0.0005
JSON_CONTENT_TYPE = "application/json; charset=utf-8"

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

# Which method each known path accepts; any other method there is a 405.
_ROUTES = {BATCH_PATH: "POST", HEALTH_PATH: "GET"}


class RequestProblem(Exception):
    """A request the service refuses: HTTP status and an English message."""

    def __init__(self, status, message):
        Exception.__init__(self, message)
        self.status = status
        self.message = message


class RouteEvalServer(ThreadingHTTPServer):
    """ThreadingHTTPServer holding the read-only network the handlers share.

    The LineTable indexes are built before serving and never change.  The
    lazy caches (StationNetwork's decoded hops/coordinates, a line's station
    name index) are plain dicts filled with deterministic values that are
    complete before being stored, so concurrent handlers can at worst decode
    the same value twice; no lock is needed.
    """

    daemon_threads = True
    # socketserver's default backlog of 5 makes bursts of clients see resets,
    # and a full backlog delays a new client's connect by a 1 s SYN retry.
    request_queue_size = 1024

    def __init__(self, address, lines, stations, log=None,
                 read_timeout=DEFAULT_READ_TIMEOUT, max_connections=MAX_CONNECTIONS,
                 max_bodies_bytes=MAX_BODIES_BYTES):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.lines = lines
        self.stations = stations
        self.log = log if log is not None else _log_to_stderr
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.busy_batches = threading.BoundedSemaphore(MAX_BUSY_BATCHES)
        self._connections = 0
        self._connections_lock = threading.Lock()
        self.max_bodies_bytes = max_bodies_bytes
        self._bodies_bytes = 0
        self._bodies_lock = threading.Lock()
        ThreadingHTTPServer.__init__(self, address, RouteEvalHandler)

    def reserve_body(self, count):
        """Count ``count`` more bytes of request bodies as held -> False (nothing
        counted) when that would pass ``max_bodies_bytes``."""
        with self._bodies_lock:
            if self._bodies_bytes + count > self.max_bodies_bytes:
                return False
            self._bodies_bytes += count
            return True

    def release_body(self, count):
        with self._bodies_lock:
            self._bodies_bytes -= count

    def process_request(self, request, client_address):
        """Serve the connection in a thread, unless MAX_CONNECTIONS are being served."""
        with self._connections_lock:
            full = self._connections >= self.max_connections
            if not full:
                self._connections += 1
        if full:
            self._refuse(request, client_address)
            return
        ThreadingHTTPServer.process_request(self, request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            ThreadingHTTPServer.process_request_thread(self, request, client_address)
        finally:
            with self._connections_lock:
                self._connections -= 1

    def _refuse(self, request, client_address):
        """A canned 503 without reading the request, then close (never blocks long)."""
        body = json.dumps({"error": "server busy: %d connections open; retry later"
                           % self.max_connections}).encode("ascii")
        head = ("HTTP/1.1 503 Service Unavailable\r\nContent-Type: %s\r\n"
                "Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
                % (JSON_CONTENT_TYPE, len(body))).encode("ascii")
        try:
            request.settimeout(1.0)
            request.sendall(head + body)
        except OSError:
            pass
        self.log("%s - - 503 - server busy (%d connections)"
                 % (client_address[0], self.max_connections))
        self.shutdown_request(request)

    def handle_error(self, request, client_address):
        """A connection-level failure (reset, timeout): one log line, no traceback."""
        exc = sys.exc_info()[1]
        self.log(one_line("%s connection error: %s: %s"
                           % (client_address[0], type(exc).__name__, exc)))

    @property
    def url(self):
        host, port = self.server_address[:2]
        if ":" in host:
            host = "[%s]" % host
        return "http://%s:%d" % (host, port)


def _log_to_stderr(line):
    # One write per line so concurrent handlers do not interleave inside a
    # line; escaped, as paths, methods and messages come from outside.
    sys.stderr.write(one_line(line) + "\n")
    sys.stderr.flush()


class HeadTooLarge(Exception):
    """The request line and headers did not end within MAX_HEAD_BYTES."""


class _DeadlineReader(io.RawIOBase):
    """The connection's read side, bounded in time and, for a request's head,
    in size.

    Before the first byte of a request, a read waits up to ``timeout`` (an
    idle keep-alive connection is then closed).  From the first byte on, the
    whole request must arrive within ``timeout``: each read waits only for
    what is left, so a client trickling a byte at a time cannot hold a
    thread longer.  Until ``head_done()``, more than ``head_limit`` bytes
    raise HeadTooLarge.  ``start_request()`` re-arms it for the next request.
    """

    def __init__(self, sock, timeout, head_limit=MAX_HEAD_BYTES):
        io.RawIOBase.__init__(self)
        self._sock = sock
        self.timeout = timeout
        self.deadline = None           # set by the first byte of a request
        self.head_limit = head_limit
        self.head_bytes = 0            # None once the head is read

    def start_request(self):
        self.deadline = None
        self.head_bytes = 0

    def head_done(self):
        self.head_bytes = None

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.deadline is None:
            wait = self.timeout
        else:
            wait = self.deadline - time.monotonic()
            if wait <= 0:
                raise socket.timeout("request not complete within %g s" % self.timeout)
        if self.head_bytes is not None and self.head_bytes >= self.head_limit:
            raise HeadTooLarge("request line and headers exceed %d bytes" % self.head_limit)
        self._sock.settimeout(wait)
        count = self._sock.recv_into(buffer)
        if count and self.deadline is None:
            self.deadline = time.monotonic() + self.timeout
        if self.head_bytes is not None:
            self.head_bytes += count
        return count


class RouteEvalHandler(BaseHTTPRequestHandler):
    """Routes requests; every response (errors included) is JSON.

    Reads go through ``_DeadlineReader`` (``read_timeout`` of the server);
    writes of an answer get ``read_timeout`` too, so a client that stops
    reading cannot hold the thread either.
    """

    server_version = "TransitLMRouteEval/1.0"
    protocol_version = "HTTP/1.1"

    def setup(self):
        BaseHTTPRequestHandler.setup(self)
        self._reader = _DeadlineReader(self.connection, self.server.read_timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self):
        self._reader.start_request()
        # Nothing of the previous request on this connection may describe this one.
        self.command, self.requestline, self.request_version = None, "", ""
        try:
            BaseHTTPRequestHandler.handle_one_request(self)
        except HeadTooLarge as exc:
            for name in ("requestline", "request_version", "command"):
                if getattr(self, name, None) is None:
                    setattr(self, name, "")
            self.send_error(431, str(exc))

    def parse_request(self):
        """http.server's parsing, then: a header section it could not read
        whole (a line that is not a field) is a 400."""
        if not BaseHTTPRequestHandler.parse_request(self):
            return False
        self._reader.head_done()
        if self.headers.defects or self.headers.get_payload():
            self.send_error(400, "malformed header section")
            return False
        return True

    def log_error(self, format, *args):
        """http.server's own error lines: only its "Request timed out" arrives here
        (``send_error`` is overridden).  A connection that idles out after a
        complete request is normal and not logged; one that stalled inside a
        request is."""
        if self._reader.deadline is not None:
            self.server.log(one_line("%s - - closed: request not complete within %g s"
                                      % (self.client_address[0], self.server.read_timeout)))

    # -- dispatch ---------------------------------------------------------------
    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()

    def do_PATCH(self):
        self._dispatch()

    def do_OPTIONS(self):
        self._dispatch()

    def do_HEAD(self):
        self._dispatch()

    def _dispatch(self):
        self._started = time.monotonic()
        self._cases = None
        path = self.path.split("?", 1)[0]
        try:
            self._framing = body_framing(self.headers, self.request_version)
            if self._framing not in (("none",), ("length", 0)) and not (
                    path == BATCH_PATH and self.command == "POST"):
                self.close_connection = True     # a body nobody reads ends the connection
            allowed = _ROUTES.get(path)
            if allowed is None:
                raise RequestProblem(404, "no such path: %s (try POST %s or GET %s)"
                                     % (path, BATCH_PATH, HEALTH_PATH))
            # HEAD is GET without a body (``_send_json`` leaves it out).
            method = "GET" if self.command == "HEAD" else self.command
            if method != allowed:
                raise RequestProblem(405, "%s does not accept %s; use %s"
                                     % (path, self.command, allowed))
            if path == HEALTH_PATH:
                self._send_json(200, {"status": "ok", "stations": len(self.server.stations),
                                      "lines": len(self.server.lines)})
            else:
                self._handle_batch()
        except RequestProblem as problem:
            self._send_problem(problem)
        except (ConnectionError, socket.timeout):
            # The client went away, or stopped reading our answer: nobody to answer.
            self.close_connection = True
        except Exception as exc:  # a bug: answer 500 rather than drop the connection
            self.close_connection = True
            self._send_json(500, {"error": "internal error: %s: %s"
                                  % (type(exc).__name__, exc)})

    def _handle_batch(self):
        self._reserved = 0
        try:
            body = self._read_body()
            # Decoding and judging hold the GIL: a few batches at a time (see
            # MAX_BUSY_BATCHES); the others wait here without competing for it.
            with self.server.busy_batches:
                cases = _parse_batch(body)
                self._cases = len(cases)
                results = evaluate_cases(cases, self.server.lines, self.server.stations)
                answer = _encode_json({"results": results})
            body = cases = results = None                # not held while answering
        finally:
            self.server.release_body(self._reserved)     # the body is no longer held
            self._reserved = 0
        self._send_body(200, answer)

    def _reserve(self, count):
        """Hold ``count`` more body bytes, or 503 when the server holds too many."""
        if not self.server.reserve_body(count):
            raise RequestProblem(503, "server busy: %d bytes of request bodies held; retry "
                                 "later" % self.server.max_bodies_bytes)
        self._reserved += count

    # -- request body -----------------------------------------------------------
    def _read_body(self):
        """The request body, framed as ``body_framing`` found (Content-Length
        or chunked)."""
        kind = self._framing[0]
        if kind == "none":
            raise RequestProblem(411, "Content-Length header is required (or a chunked body)")
        if kind == "chunked":
            return self._read_chunked()
        length = self._framing[1]
        self._reserve(length)
        try:
            body = self.rfile.read(length)
        except socket.timeout:
            raise RequestProblem(408, "request not complete within %g s (body announced as "
                                 "%d bytes)" % (self.server.read_timeout, length))
        if len(body) != length:
            raise RequestProblem(400, "body ended after %d of %d bytes" % (len(body), length))
        return body

    def _read_chunked(self):
        """A chunked body (RFC 9112 section 7.1), at most MAX_BODY_BYTES of data."""
        parts, total = [], 0
        try:
            while True:
                line = self.rfile.readline(MAX_CHUNK_LINE + 1)
                if not line.endswith(b"\n"):
                    if len(line) > MAX_CHUNK_LINE:
                        raise RequestProblem(400, "chunk-size line longer than %d bytes"
                                             % MAX_CHUNK_LINE)
                    raise RequestProblem(400, "body ended inside the chunked framing")
                size_text = line.split(b";", 1)[0].strip(b" \t\r\n")
                if not _HEX_RE.match(size_text):
                    raise RequestProblem(400, "chunk size %s is not a hexadecimal number"
                                         % one_line(repr(size_text.decode("latin-1"))))
                size = int(size_text, 16)
                if size == 0:
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    raise RequestProblem(413, "chunked body exceeds the %d-byte limit; send "
                                         "smaller batches" % MAX_BODY_BYTES)
                self._reserve(size)
                data = self.rfile.read(size)
                if len(data) != size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    raise RequestProblem(400, "a chunk does not end as its size says")
                parts.append(data)
            for _ in range(MAX_TRAILER_LINES + 1):
                line = self.rfile.readline(MAX_CHUNK_LINE + 1)
                if line in (b"\r\n", b"\n"):
                    return b"".join(parts)
                if not line.endswith(b"\n"):
                    raise RequestProblem(400, "body ended inside the chunked trailer")
            raise RequestProblem(400, "more than %d trailer lines" % MAX_TRAILER_LINES)
        except socket.timeout:
            raise RequestProblem(408, "request not complete within %g s (chunked body)"
                                 % self.server.read_timeout)

    # -- responses --------------------------------------------------------------
    def _send_problem(self, problem):
        # The request's body may be unread (404, 405, 411, 413) and would then
        # be taken for the next request: an error answer ends the connection.
        self.close_connection = True
        headers = {"Allow": _ROUTES[self.path.split("?", 1)[0]]} if problem.status == 405 else {}
        if problem.status == 503:
            headers["Retry-After"] = "1"
        self._send_json(problem.status, {"error": problem.message}, headers)

    def _send_json(self, status, payload, headers=None):
        self._send_body(status, _encode_json(payload), headers)

    def _send_body(self, status, body, headers=None):
        self.send_response_only(status)
        self.send_header("Server", self.version_string())
        self.send_header("Date", self.date_time_string())
        self.send_header("Content-Type", JSON_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        # Logged before anything goes out: once a client sees its answer, the
        # log line of its request exists.
        self._log_request_line(status)
        # Reads may have left a shorter timeout on the socket.
        self.connection.settimeout(self.server.read_timeout)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code, message=None, explain=None):
        """Protocol-level errors of http.server (bad request line, 501, ...) as JSON."""
        self.close_connection = True
        self._started = getattr(self, "_started", time.monotonic())
        self._cases = None
        if not hasattr(self, "command") or self.command is None:
            self.command = ""
        self._send_json(code, {"error": message or self.responses.get(code, ("error",))[0]})

    def _log_request_line(self, status):
        elapsed_ms = (time.monotonic() - self._started) * 1000.0
        cases = "-" if self._cases is None else "%d cases" % self._cases
        self.server.log(one_line("%s %s %s %d %s %.1f ms"
                                  % (self.client_address[0], self.command or "-",
                                     getattr(self, "path", "-"), status, cases, elapsed_ms)))

    def log_message(self, format, *args):
        """Silence http.server's own access log: ``_log_request_line`` replaces it."""


def _encode_json(payload):
    """JSON bytes of an answer.  ASCII escapes: a lone surrogate echoed from a
    request or a data file is written as ``\\ud800``, never a UTF-8 error."""
    return json.dumps(payload, ensure_ascii=True).encode("ascii")


def body_framing(headers, version="HTTP/1.1"):
    """How a request's body is delimited (RFC 9112 section 6.3) -> ("none",),
    ("length", N) or ("chunked",); RequestProblem for framing that is invalid
    (400), a transfer coding not supported (501) or a body over
    MAX_BODY_BYTES (413)."""
    codings_fields = headers.get_all("Transfer-Encoding") or []
    lengths = headers.get_all("Content-Length") or []
    if codings_fields:
        if version == "HTTP/1.0":
            raise RequestProblem(400, "Transfer-Encoding in an HTTP/1.0 request")
        if lengths:
            raise RequestProblem(400, "both Transfer-Encoding and Content-Length; send one")
        codings = [item.split(";", 1)[0].strip(" \t").lower()
                   for field in codings_fields for item in field.split(",")]
        codings = [coding for coding in codings if coding]
        if not codings or codings[-1] != "chunked":
            raise RequestProblem(400, "Transfer-Encoding %s: chunked is not the final coding"
                                 % one_line(repr(", ".join(codings_fields))))
        if codings.count("chunked") > 1:
            raise RequestProblem(400, "Transfer-Encoding applies chunked more than once")
        if len(codings) > 1:
            raise RequestProblem(501, "transfer coding %s is not supported (only chunked)"
                                 % one_line(repr(codings[0])))
        return ("chunked",)
    if not lengths:
        return ("none",)
    if len(lengths) > 1:
        raise RequestProblem(400, "%d Content-Length fields; send one" % len(lengths))
    declared = lengths[0].strip(" \t")
    if not _DIGITS_RE.match(declared):
        raise RequestProblem(400, "Content-Length %s is not a byte count (digits only)"
                             % one_line(repr(declared[:40])))
    if len(declared) > 15 or int(declared) > MAX_BODY_BYTES:
        raise RequestProblem(413, "body of %s bytes exceeds the %d-byte limit; send smaller "
                             "batches" % (declared if len(declared) <= 40
                                          else declared[:37] + "...", MAX_BODY_BYTES))
    return ("length", int(declared))


def body_shape_problem(text, max_items=MAX_CASES, max_depth=MAX_JSON_DEPTH):
    """(status, message) when a body would be costly to decode, else None.

    413 when some array holds more than ``max_items`` items ("cases" is one,
    and no list inside a case is that long), 400 when the nesting is deeper
    than ``max_depth``; see ``route_eval.json_shape_problem``.
    """
    problem = json_shape_problem(text, max_items, max_depth)
    if problem is None:
        return None
    kind, message = problem
    if kind == "too_long":
        return 413, ("body holds a list of more than %d items; at most %d cases per request: "
                     "send smaller batches" % (max_items, max_items))
    return 400, "body is %s" % message


def _parse_int(digits):
    """JSON integers as Python does, except that one too long for ``int()``
    (Python 3.11+ refuses over 4,300 digits) becomes a float (inf), so only
    its case fails (a coordinate must be finite) instead of the whole body."""
    if len(digits) <= 4000:
        return int(digits)
    return float(digits)


def _parse_batch(body):
    """Request body bytes -> the list of cases; RequestProblem(4xx) otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestProblem(400, "body is not UTF-8 text")
    problem = body_shape_problem(text)
    if problem:
        raise RequestProblem(*problem)
    try:
        payload = json.loads(text, parse_int=_parse_int)
    except (ValueError, RecursionError) as exc:
        raise RequestProblem(400, "body is not valid JSON: %s" % exc)
    if not isinstance(payload, dict):
        raise RequestProblem(400, "body must be a JSON object {\"cases\": [...]}")
    if "cases" not in payload:
        raise RequestProblem(400, "body has no \"cases\" list")
    cases = payload["cases"]
    if not isinstance(cases, list):
        raise RequestProblem(400, "\"cases\" must be a list")
    if len(cases) > MAX_CASES:           # the scan bounds this already; kept as the rule
        raise RequestProblem(413, "batch of %d cases exceeds the %d-case limit"
                             % (len(cases), MAX_CASES))
    return cases


def make_server(lines, stations, host=DEFAULT_HOST, port=DEFAULT_PORT, log=None,
                read_timeout=DEFAULT_READ_TIMEOUT, max_connections=MAX_CONNECTIONS,
                max_bodies_bytes=MAX_BODIES_BYTES):
    """A bound, not yet serving RouteEvalServer (port 0 = a free port).

    Call ``serve_forever()`` (e.g. in a thread), then ``shutdown()`` and
    ``server_close()``.  ``log`` receives one line per request (default stderr).
    """
    return RouteEvalServer((host, port), lines, stations, log, read_timeout,
                           max_connections, max_bodies_bytes)


def _parse_args(argv):
    parser = CommandParser(
        prog="server.py",
        description="Local TransitLM route-eval service (general-LLM benchmark).")
    parser.add_argument("--station_info", metavar="CSV",
                        help="station_info.csv (default: $%s's if set, else the bundled "
                             "data/station_info.csv)" % DATA_ENV)
    parser.add_argument("--line_info", metavar="CSV",
                        help="line_info.csv (default: the one beside the station file; a "
                             "line file belongs to its station file's network)")
    parser.add_argument("--host", default=DEFAULT_HOST, help="default: %(default)s")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="default: %(default)s; 0 picks a free port")
    parser.add_argument("--version", action="version", version="transitlm " + VERSION,
                        help="print the project's version and exit")
    parser.add_argument("--read_timeout", type=float, default=DEFAULT_READ_TIMEOUT,
                        metavar="SECONDS",
                        help="a request must arrive in full within this long of its first "
                             "byte (else 408 or the connection is closed), and an idle "
                             "connection is closed after this long (default: %(default)g)")
    return parser.parse_args(argv)


def main(argv=None):
    """Load the files, serve until SIGINT/SIGTERM; return the exit status."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if not (math.isfinite(args.read_timeout) and 0 < args.read_timeout <= MAX_READ_TIMEOUT):
        sys.stderr.write("error: --read_timeout must be more than 0 and at most %g seconds, "
                         "got %g\n" % (MAX_READ_TIMEOUT, args.read_timeout))
        return EXIT_USAGE
    try:
        args.station_info = station_file(args.station_info)
        args.line_info = line_file(args.line_info, args.station_info)
        stations = StationNetwork.load(args.station_info)
        lines = LineTable.load(args.line_info)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_USAGE
    try:
        server = make_server(lines, stations, args.host, args.port,
                             read_timeout=args.read_timeout)
    except (OSError, OverflowError) as exc:     # OverflowError: port outside 0-65535
        sys.stderr.write("error: %s\n" % one_line("cannot listen on %s:%d: %s" % (
            args.host, args.port, getattr(exc, "strerror", None) or exc)))
        return EXIT_USAGE
    stopped = _stop_on_signals(server)
    # Handlers are short CPU bursts between socket calls.  A thread back from
    # a socket call (the accept loop, a /healthz request) waits for the GIL up
    # to the switch interval each time; at Python's 5 ms, hundreds of busy
    # connections made /healthz take seconds (tests/test_general_llm_server_load.py).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    _log_to_stderr("loaded %d stations from %s and %d lines from %s"
                   % (len(stations), args.station_info, len(lines), args.line_info))
    _log_to_stderr("listening on %s" % server.url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    _log_to_stderr("shutting down")
    return SIGNAL_STATUS.get(stopped[0], EXIT_OK) if stopped else EXIT_OK


def _stop_on_signals(server):
    """SIGINT/SIGTERM end ``serve_forever`` (requests under way are answered);
    -> a list that receives the signal's number, for the exit status.

    ``shutdown()`` waits for the serving loop, which runs in this (main)
    thread, so the handler must call it from another thread.
    """
    stopped = []

    def stop(signum, frame):
        stopped.append(signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return stopped


if __name__ == "__main__":
    sys.exit(run_command(main))
