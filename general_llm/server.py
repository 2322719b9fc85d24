"""A local route-eval service for the general-LLM benchmark (standard library only).

It answers what the published remote service answers (protocol.md section
11), from local station_info.csv and line_info.csv files:

    POST /api/eval/route/batch   {"cases": [...]} -> {"results": [...]}
    GET  /healthz                -> {"status": "ok", "stations": N, "lines": N}

Usage:

    python3 general_llm/server.py [--station_info PATH] [--line_info PATH]
                                  [--host 127.0.0.1] [--port 8765]

``--port 0`` picks a free port; the actual address is printed on stderr as
``listening on http://HOST:PORT``.  SIGINT/SIGTERM stop it cleanly (exit 0).
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from common import EXIT_OK, EXIT_USAGE, InputError, StationNetwork  # noqa: E402
from general_llm.route_eval import LineTable, evaluate_cases  # noqa: E402

BATCH_PATH = "/api/eval/route/batch"
HEALTH_PATH = "/healthz"
MAX_BODY_BYTES = 10 * 1024 * 1024
JSON_CONTENT_TYPE = "application/json; charset=utf-8"

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_STATION_INFO = os.path.join(_REPO, "data", "station_info.csv")
DEFAULT_LINE_INFO = os.path.join(_REPO, "data", "line_info.csv")

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
    # socketserver's default backlog of 5 makes bursts of clients see resets.
    request_queue_size = 128

    def __init__(self, address, lines, stations, log=None):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.lines = lines
        self.stations = stations
        self.log = log if log is not None else _log_to_stderr
        ThreadingHTTPServer.__init__(self, address, RouteEvalHandler)

    def handle_error(self, request, client_address):
        """A connection-level failure (reset, timeout): one log line, no traceback."""
        exc = sys.exc_info()[1]
        self.log("%s connection error: %s: %s" % (client_address[0], type(exc).__name__, exc))

    @property
    def url(self):
        host, port = self.server_address[:2]
        if ":" in host:
            host = "[%s]" % host
        return "http://%s:%d" % (host, port)


def _log_to_stderr(line):
    # One write per line so concurrent handlers do not interleave inside a line.
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class RouteEvalHandler(BaseHTTPRequestHandler):
    """Routes requests; every response (errors included) is JSON."""

    server_version = "TransitLMRouteEval/1.0"
    protocol_version = "HTTP/1.1"

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
        except ConnectionError:
            # The client went away mid-request or mid-response: nobody to answer.
            self.close_connection = True
        except Exception as exc:  # a bug: answer 500 rather than drop the connection
            self.close_connection = True
            self._send_json(500, {"error": "internal error: %s: %s"
                                  % (type(exc).__name__, exc)})

    def _handle_batch(self):
        cases = _parse_batch(self._read_body())
        self._cases = len(cases)
        results = evaluate_cases(cases, self.server.lines, self.server.stations)
        self._send_json(200, {"results": results})

    # -- request body -----------------------------------------------------------
    def _read_body(self):
        """The request body, after checking its declared length."""
        if self.headers.get("Transfer-Encoding"):
            raise RequestProblem(411, "chunked bodies are not supported; send Content-Length")
        declared = self.headers.get("Content-Length")
        if declared is None:
            raise RequestProblem(411, "Content-Length header is required")
        try:
            length = int(declared)
        except ValueError:
            length = -1
        if length < 0:
            raise RequestProblem(400, "Content-Length %r is not a byte count" % declared)
        if length > MAX_BODY_BYTES:
            raise RequestProblem(413, "body of %d bytes exceeds the %d-byte limit; "
                                 "send smaller batches" % (length, MAX_BODY_BYTES))
        body = self.rfile.read(length)
        if len(body) != length:
            raise RequestProblem(400, "body ended after %d of %d bytes" % (len(body), length))
        return body

    # -- responses --------------------------------------------------------------
    def _send_problem(self, problem):
        # The request's body may be unread (404, 405, 411, 413) and would then
        # be taken for the next request: an error answer ends the connection.
        self.close_connection = True
        headers = {"Allow": _ROUTES[self.path.split("?", 1)[0]]} if problem.status == 405 else {}
        self._send_json(problem.status, {"error": problem.message}, headers)

    def _send_json(self, status, payload, headers=None):
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response_only(status)
        self.send_header("Server", self.version_string())
        self.send_header("Date", self.date_time_string())
        self.send_header("Content-Type", JSON_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        # Logged before the body goes out: once a client has its answer, the
        # log line of its request exists.
        self._log_request_line(status)
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
        self.server.log("%s %s %s %d %s %.1f ms"
                        % (self.client_address[0], self.command or "-",
                           getattr(self, "path", "-"), status, cases, elapsed_ms))

    def log_message(self, format, *args):
        """Silence http.server's own access log: ``_log_request_line`` replaces it."""


def _parse_batch(body):
    """Request body bytes -> the list of cases; RequestProblem(400) otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestProblem(400, "body is not UTF-8 text")
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise RequestProblem(400, "body is not valid JSON: %s" % exc)
    if not isinstance(payload, dict):
        raise RequestProblem(400, "body must be a JSON object {\"cases\": [...]}")
    if "cases" not in payload:
        raise RequestProblem(400, "body has no \"cases\" list")
    cases = payload["cases"]
    if not isinstance(cases, list):
        raise RequestProblem(400, "\"cases\" must be a list")
    return cases


def make_server(lines, stations, host=DEFAULT_HOST, port=DEFAULT_PORT, log=None):
    """A bound, not yet serving RouteEvalServer (port 0 = a free port).

    Call ``serve_forever()`` (e.g. in a thread), then ``shutdown()`` and
    ``server_close()``.  ``log`` receives one line per request (default stderr).
    """
    return RouteEvalServer((host, port), lines, stations, log)


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Local TransitLM route-eval service (general-LLM benchmark).")
    parser.add_argument("--station_info", default=DEFAULT_STATION_INFO,
                        help="station_info.csv (default: %(default)s)")
    parser.add_argument("--line_info", default=DEFAULT_LINE_INFO,
                        help="line_info.csv (default: %(default)s)")
    parser.add_argument("--host", default=DEFAULT_HOST, help="default: %(default)s")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="default: %(default)s; 0 picks a free port")
    return parser.parse_args(argv)


def main(argv=None):
    """Load the files, serve until SIGINT/SIGTERM; return the exit status."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    try:
        stations = StationNetwork.load(args.station_info)
        lines = LineTable.load(args.line_info)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % exc)
        return EXIT_USAGE
    try:
        server = make_server(lines, stations, args.host, args.port)
    except (OSError, OverflowError) as exc:     # OverflowError: port outside 0-65535
        sys.stderr.write("error: cannot listen on %s:%d: %s\n"
                         % (args.host, args.port, getattr(exc, "strerror", None) or exc))
        return EXIT_USAGE
    _stop_on_signals(server)
    _log_to_stderr("loaded %d stations from %s and %d lines from %s"
                   % (len(stations), args.station_info, len(lines), args.line_info))
    _log_to_stderr("listening on %s" % server.url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    _log_to_stderr("shutting down")
    return EXIT_OK


def _stop_on_signals(server):
    """SIGINT/SIGTERM end ``serve_forever``.

    ``shutdown()`` waits for the serving loop, which runs in this (main)
    thread, so the handler must call it from another thread.
    """
    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


if __name__ == "__main__":
    sys.exit(main())
