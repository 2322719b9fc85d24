"""A JSON-over-HTTP service that no client can crash or hold: the machinery the
route-eval service (general_llm/server.py) and the reward service
(transitlm/reward/service.py) share.  A service is a table of routes (path ->
method and the function that answers); everything else is here.

No request can crash it or hold it: every answer, errors included, is JSON
(``{"error": "..."}`` for an error, never a traceback); a body is refused
(4xx) before decoding when it nests deeper than ``MAX_JSON_DEPTH``, holds a
list longer than the service's limit or more than ``MAX_JSON_VALUES`` values;
a body is read and decoded without a long call in C (transitlm.io.json_steps),
so a large one never holds the other requests; a request must arrive in
full within ``read_timeout`` seconds of its first byte (else 408 or the
connection is closed), an idle connection is closed after that long, at most ``MAX_BUSY``
bodies are decoded and answered at a time, and at most ``MAX_CONNECTIONS``
connections are served at once (more get a canned 503), holding at most
``MAX_BODIES_BYTES`` of request bodies together (more get 503 and
Retry-After).

Message framing follows RFC 9112 (sections 6 and 7.1): a request's
Content-Length must be one field holding ASCII digits only (``+5``, ``-1``,
``5, 5``, two fields, ``0x10`` are 400); Transfer-Encoding together with
Content-Length, in an HTTP/1.0 request, or without ``chunked`` as its final
coding (once) is 400; another transfer coding before ``chunked`` is 501; a
chunked body is decoded within the same limits (the server's
``max_body_bytes``, chunk lines of at most ``MAX_CHUNK_LINE`` bytes, at most
``MAX_TRAILER_LINES`` trailer lines).  The request line and headers must
arrive within the first ``MAX_HEAD_BYTES`` (else 431).  Every error answer
closes the connection.  One log line per request, escaped
(transitlm.io.terminal.one_line).  SIGINT/SIGTERM stop ``serve_until_stopped``
cleanly (requests under way are answered) with exit status 130/143.

Standard library only; Python 3.8+.
"""

import codecs
import io
import json
import math
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import MAX_JSON_DEPTH, json_outside_strings
from transitlm.io.bounded_json import MAX_JSON_VALUES, json_shape_problem, parse_int, value_count_over
from transitlm.io.json_steps import AT_ONCE, loads_in_steps
from transitlm.io.exit_status import EXIT_OK, SIGNAL_STATUS
from transitlm.io.terminal import one_line

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
DEFAULT_READ_TIMEOUT = 10.0      # seconds; see JsonHandler
MAX_READ_TIMEOUT = 3600.0
# Bodies decoded and answered at once.  The work is pure Python (one core
# under the GIL), so more would not be faster; fewer runnable threads keep
# /healthz and small requests answered promptly under load.
MAX_BUSY = 2
# Connections served at once (one thread each); more are answered 503.
MAX_CONNECTIONS = 512
# GIL switch interval of a service program (Python's default: 5 ms); see serve_until_stopped.
SWITCH_INTERVAL_S = 0.0005
# A signal's shutdown() is noticed between polls of the serving loop (Python's
# default: every 0.5 s): a service program stops within this after SIGINT/SIGTERM.
STOP_POLL_S = 0.05
JSON_CONTENT_TYPE = "application/json; charset=utf-8"
DEFAULT_HOST = "127.0.0.1"


class RequestProblem(Exception):
    """A request the service refuses: HTTP status and an English message."""

    def __init__(self, status, message):
        Exception.__init__(self, message)
        self.status = status
        self.message = message


class Route(object):
    """What a path accepts: its ``method`` ("GET" or "POST") and ``answer``,
    a function of the handler (and, for POST, the request body's bytes) that
    returns the JSON payload of a 200 answer or raises RequestProblem.  An
    answer may set ``handler.note`` (what the log line says of the request,
    such as "7 cases")."""

    def __init__(self, method, answer):
        self.method = method
        self.answer = answer

    @property
    def reads_body(self):
        return self.method == "POST"


class JsonServer(ThreadingHTTPServer):
    """ThreadingHTTPServer answering ``routes`` ({path: Route}, in the order a
    404 lists them) with JsonHandler, within the limits above.  A service
    subclasses it to hold what its answers read; what they read must be
    read-only or safe to share between threads."""

    daemon_threads = True
    # socketserver's default backlog of 5 makes bursts of clients see resets,
    # and a full backlog delays a new client's connect by a 1 s SYN retry.
    request_queue_size = 1024

    def __init__(self, address, routes, software, log=None,
                 read_timeout=DEFAULT_READ_TIMEOUT, max_connections=MAX_CONNECTIONS,
                 max_bodies_bytes=MAX_BODIES_BYTES, max_body_bytes=MAX_BODY_BYTES):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.routes = routes
        self.software = software           # the Server header: "TransitLMRouteEval/1.0"
        self.log = log if log is not None else log_to_stderr
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.max_body_bytes = max_body_bytes
        self.busy = threading.BoundedSemaphore(MAX_BUSY)
        self._connections = 0
        self._connections_lock = threading.Lock()
        self.max_bodies_bytes = max_bodies_bytes
        self._bodies_bytes = 0
        self._bodies_lock = threading.Lock()
        ThreadingHTTPServer.__init__(self, address, JsonHandler)

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
        """Serve the connection in a thread, unless max_connections are being served."""
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


def log_to_stderr(line):
    # One write per line so concurrent handlers do not interleave inside a
    # line; escaped, as paths, methods and messages come from outside.
    sys.stderr.write(one_line(line) + "\n")
    sys.stderr.flush()


class HeadTooLarge(Exception):
    """The request line and headers did not end within MAX_HEAD_BYTES."""


class DeadlineReader(io.RawIOBase):
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


class JsonHandler(BaseHTTPRequestHandler):
    """Routes requests by the server's table; every response (errors
    included) is JSON.

    Reads go through ``DeadlineReader`` (``read_timeout`` of the server);
    writes of an answer get ``read_timeout`` too, so a client that stops
    reading cannot hold the thread either.
    """

    protocol_version = "HTTP/1.1"
    # An answer is written as its head, then its body: with Nagle's algorithm
    # on, the body waits for the client's delayed ACK of the head (40 ms on
    # Linux) on every request of a keep-alive connection but the first.
    disable_nagle_algorithm = True

    def setup(self):
        BaseHTTPRequestHandler.setup(self)
        self._reader = DeadlineReader(self.connection, self.server.read_timeout)
        self.rfile = io.BufferedReader(self._reader)

    def version_string(self):
        return self.server.software + " " + self.sys_version

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
        self.note = None
        path = self.path.split("?", 1)[0]
        routes = self.server.routes
        route = routes.get(path)
        try:
            self._framing = body_framing(self.headers, self.request_version,
                                         self.server.max_body_bytes)
            if self._framing not in (("none",), ("length", 0)) and not (
                    route is not None and route.reads_body and self.command == route.method):
                self.close_connection = True     # a body nobody reads ends the connection
            if route is None:
                raise RequestProblem(404, "no such path: %s (try %s)" % (path, " or ".join(
                    "%s %s" % (known.method, known_path) for known_path, known in routes.items())))
            # HEAD is GET without a body (``_send_json`` leaves it out).
            method = "GET" if self.command == "HEAD" else self.command
            if method != route.method:
                raise RequestProblem(405, "%s does not accept %s; use %s"
                                     % (path, self.command, route.method))
            if route.reads_body:
                self._answer_body(route)
            else:
                self._send_json(200, route.answer(self))
        except RequestProblem as problem:
            self._send_problem(problem)
        except (ConnectionError, socket.timeout):
            # The client went away, or stopped reading our answer: nobody to answer.
            self.close_connection = True
        except Exception as exc:  # a bug: answer 500 rather than drop the connection
            self.close_connection = True
            self._send_json(500, {"error": "internal error: %s: %s"
                                  % (type(exc).__name__, exc)})

    def _answer_body(self, route):
        self._reserved = 0
        try:
            body = self._read_body()
            # Decoding and answering hold the GIL: a few bodies at a time (see
            # MAX_BUSY); the others wait here without competing for it.
            with self.server.busy:
                answer = encode_json(route.answer(self, body))
            body = None                                  # not held while answering
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
        """A chunked body (RFC 9112 section 7.1), at most max_body_bytes of data."""
        parts, total, limit = [], 0, self.server.max_body_bytes
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
                if total > limit:
                    raise RequestProblem(413, "chunked body exceeds the %d-byte limit; send "
                                         "smaller batches" % limit)
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
        headers = {}
        if problem.status == 405:
            headers["Allow"] = self.server.routes[self.path.split("?", 1)[0]].method
        if problem.status == 503:
            headers["Retry-After"] = "1"
        self._send_json(problem.status, {"error": problem.message}, headers)

    def _send_json(self, status, payload, headers=None):
        self._send_body(status, encode_json(payload), headers)

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
        self.note = None
        if not hasattr(self, "command") or self.command is None:
            self.command = ""
        self._send_json(code, {"error": message or self.responses.get(code, ("error",))[0]})

    def _log_request_line(self, status):
        elapsed_ms = (time.monotonic() - self._started) * 1000.0
        self.server.log(one_line("%s %s %s %d %s %.1f ms"
                                  % (self.client_address[0], self.command or "-",
                                     getattr(self, "path", "-"), status, self.note or "-",
                                     elapsed_ms)))

    def log_message(self, format, *args):
        """Silence http.server's own access log: ``_log_request_line`` replaces it."""


def encode_json(payload):
    """JSON bytes of an answer.  ASCII escapes: a lone surrogate echoed from a
    request or a data file is written as ``\\ud800``, never a UTF-8 error.
    Strict JSON: a NaN or infinite number raises ValueError (a route's answer
    then becomes a 500 naming it) rather than going out as ``NaN``, which no
    JSON parser but Python's reads."""
    return json.dumps(payload, ensure_ascii=True, allow_nan=False).encode("ascii")


def body_framing(headers, version="HTTP/1.1", max_body_bytes=MAX_BODY_BYTES):
    """How a request's body is delimited (RFC 9112 section 6.3) -> ("none",),
    ("length", N) or ("chunked",); RequestProblem for framing that is invalid
    (400), a transfer coding not supported (501) or a body over
    ``max_body_bytes`` (413)."""
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
    if len(declared) > 15 or int(declared) > max_body_bytes:
        raise RequestProblem(413, "body of %s bytes exceeds the %d-byte limit; send smaller "
                             "batches" % (declared if len(declared) <= 40
                                          else declared[:37] + "...", max_body_bytes))
    return ("length", int(declared))


def body_shape_problem(text, max_items, max_depth=MAX_JSON_DEPTH, items="items", outside=None):
    """(status, message) when a body would be costly to decode, else None.

    413 when some array holds more than ``max_items`` items (the request's
    list of ``items``, such as "cases", is one), 400 when the nesting is
    deeper than ``max_depth``; see ``bounded_json.json_shape_problem``.
    """
    problem = json_shape_problem(text, max_items, max_depth, outside)
    if problem is None:
        return None
    kind, message = problem
    if kind == "too_long":
        return 413, ("body holds a list of more than %d items; at most %d %s per request: "
                     "send smaller batches" % (max_items, max_items, items))
    return 400, "body is %s" % message


def _utf8_text(body):
    """body.decode("utf-8"), a megabyte at a time (each a call in C)."""
    if len(body) <= AT_ONCE:
        return body.decode("utf-8")
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts = [decoder.decode(body[start:start + AT_ONCE])
             for start in range(0, len(body), AT_ONCE)]
    parts.append(decoder.decode(b"", True))
    return "".join(parts)


def decode_body(body, max_items, items):
    """Request body bytes -> the decoded JSON value; RequestProblem (4xx) when
    it is not UTF-8, too costly to decode (body_shape_problem, or more than
    MAX_JSON_VALUES values: 413) or not JSON.
    A number of more than 4,000 digits becomes a float (inf): only the value
    that holds it is wrong, not the whole body."""
    try:
        text = _utf8_text(body)
    except UnicodeDecodeError:
        raise RequestProblem(400, "body is not UTF-8 text")
    outside = spans = None
    if len(text) > AT_ONCE:          # read outside its strings once, for the three steps
        spans = []
        outside = list(json_outside_strings(text, spans=spans))
    problem = body_shape_problem(text, max_items, MAX_JSON_DEPTH, items, outside)
    if problem:
        raise RequestProblem(*problem)
    if value_count_over(text, MAX_JSON_VALUES, outside):
        # json.loads runs in C without letting other threads run: a body of
        # millions of values would hold every other request (/healthz too).
        raise RequestProblem(413, "body holds more than %d JSON values: send smaller batches"
                             % MAX_JSON_VALUES)
    try:
        # json.loads, never long in C (transitlm.io.json_steps)
        return loads_in_steps(text, parse_int=parse_int, spans=spans)
    except (ValueError, RecursionError) as exc:
        raise RequestProblem(400, "body is not valid JSON: %s" % exc)


# ---------------------------------------------------------------------------
# A service program: its listening flags, and serving until a signal
# ---------------------------------------------------------------------------

def add_listen_arguments(parser, default_port):
    """--host, --port and --read_timeout of a service program (its --version:
    transitlm.io.terminal.CommandParser)."""
    parser.add_argument("--host", default=DEFAULT_HOST, help="default: %(default)s")
    parser.add_argument("--port", type=int, default=default_port,
                        help="default: %(default)s; 0 picks a free port")
    parser.add_argument("--read_timeout", type=float, default=DEFAULT_READ_TIMEOUT,
                        metavar="SECONDS",
                        help="a request must arrive in full within this long of its first "
                             "byte (else 408 or the connection is closed), and an idle "
                             "connection is closed after this long (default: %(default)g)")


def read_timeout_problem(value):
    """The message for a --read_timeout out of range, or None."""
    if math.isfinite(value) and 0 < value <= MAX_READ_TIMEOUT:
        return None
    return ("--read_timeout must be more than 0 and at most %g seconds, got %g"
            % (MAX_READ_TIMEOUT, value))


def listen_problem(host, port, exc):
    """The message for a server that cannot be made (an OSError, or an
    OverflowError for a port outside 0-65535)."""
    return one_line("cannot listen on %s:%d: %s"
                    % (host, port, getattr(exc, "strerror", None) or exc))


def serve_until_stopped(server, lines=()):
    """Log ``lines``, then "listening on URL", serve until SIGINT/SIGTERM
    (requests under way are answered), log "shutting down" -> the exit status
    (130/143 after a signal)."""
    stopped = _stop_on_signals(server)
    # Handlers are short CPU bursts between socket calls.  A thread back from
    # a socket call (the accept loop, a /healthz request) waits for the GIL up
    # to the switch interval each time; at Python's 5 ms, hundreds of busy
    # connections made /healthz take seconds (tests/test_general_llm_server_load.py).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    for line in lines:
        log_to_stderr(line)
    log_to_stderr("listening on %s" % server.url)
    try:
        server.serve_forever(poll_interval=STOP_POLL_S)
    finally:
        server.server_close()
    log_to_stderr("shutting down")
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
