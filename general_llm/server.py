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
``MAX_JSON_DEPTH`` or holds a list of more than ``MAX_CASES`` items; the
time-outs, the limits on bodies and connections, RFC 9112 message framing and
the log lines are those of every JSON service of the project
(transitlm/io/json_service.py, which this module's routes plug into).
"""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from common import MAX_JSON_DEPTH, InputError, StationNetwork  # noqa: E402
from transitlm.evaluation.catalog import DATA_ENV, line_file, station_file  # noqa: E402
from transitlm.io.exit_status import EXIT_USAGE, run_command  # noqa: E402
from transitlm.io.json_service import (  # noqa: E402,F401  (the limits, named here too)
    DEFAULT_HOST, DEFAULT_READ_TIMEOUT, HEALTH_PATH, MAX_BODIES_BYTES, MAX_BODY_BYTES,
    MAX_CONNECTIONS, JsonServer, RequestProblem, Route, add_listen_arguments, decode_body,
    listen_problem, read_timeout_problem, serve_until_stopped)
from transitlm.io.json_service import body_shape_problem as _body_shape_problem  # noqa: E402
from transitlm.io.terminal import CommandParser, one_line  # noqa: E402
from transitlm.evaluation.network_check import enforce, line_file_verdict  # noqa: E402
from general_llm.route_eval import LineTable, evaluate_cases  # noqa: E402

BATCH_PATH = "/api/eval/route/batch"
# Cases per request.  The client sends 50 by default; a batch of 1,000 real
# cases is about 0.5 MB.  Checked on the raw text before decoding, so a body
# of millions of tiny cases costs a scan, not gigabytes of decoded objects.
MAX_CASES = 1000
DEFAULT_PORT = 8765
SOFTWARE = "TransitLMRouteEval/1.0"


class RouteEvalServer(JsonServer):
    """The route-eval service: a JsonServer holding the read-only network the
    handlers share.

    The LineTable indexes are built before serving and never change.  The
    lazy caches (StationNetwork's decoded hops/coordinates, a line's station
    name index) are plain dicts filled with deterministic values that are
    complete before being stored, so concurrent handlers can at worst decode
    the same value twice; no lock is needed.
    """

    def __init__(self, address, lines, stations, log=None,
                 read_timeout=DEFAULT_READ_TIMEOUT, max_connections=MAX_CONNECTIONS,
                 max_bodies_bytes=MAX_BODIES_BYTES):
        self.lines = lines
        self.stations = stations
        JsonServer.__init__(self, address, ROUTES, SOFTWARE, log, read_timeout,
                            max_connections, max_bodies_bytes)


def _health(handler):
    server = handler.server
    return {"status": "ok", "stations": len(server.stations), "lines": len(server.lines)}


def _batch(handler, body):
    cases = _parse_batch(body)
    handler.note = "%d cases" % len(cases)
    return {"results": evaluate_cases(cases, handler.server.lines, handler.server.stations)}


ROUTES = {BATCH_PATH: Route("POST", _batch), HEALTH_PATH: Route("GET", _health)}


def body_shape_problem(text, max_items=MAX_CASES, max_depth=MAX_JSON_DEPTH):
    """(status, message) when a body would be costly to decode, else None.

    413 when some array holds more than ``max_items`` items ("cases" is one,
    and no list inside a case is that long), 400 when the nesting is deeper
    than ``max_depth``; see ``json_service.body_shape_problem``.
    """
    return _body_shape_problem(text, max_items, max_depth, "cases")


def _parse_batch(body):
    """Request body bytes -> the list of cases; RequestProblem(4xx) otherwise."""
    payload = decode_body(body, MAX_CASES, "cases")
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
    parser.add_argument("--allow_foreign_network", action="store_true",
                        help="serve even when most of the line file's stop ids are not in "
                             "the station file (two networks' files)")
    add_listen_arguments(parser, DEFAULT_PORT)
    return parser.parse_args(argv)


def main(argv=None):
    """Load the files, serve until SIGINT/SIGTERM; return the exit status."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    problem = read_timeout_problem(args.read_timeout)
    if problem:
        sys.stderr.write("error: %s\n" % problem)
        return EXIT_USAGE
    try:
        args.station_info = station_file(args.station_info)
        args.line_info = line_file(args.line_info, args.station_info)
        stations = StationNetwork.load(args.station_info)
        lines = LineTable.load(args.line_info)
        # A line file and a station file of two networks: every case unreachable.
        notes = enforce(line_file_verdict(
            (station.stop_id for line in lines.lines for station in line.stations),
            stations, args.line_info), args.allow_foreign_network)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_USAGE
    try:
        server = make_server(lines, stations, args.host, args.port,
                             read_timeout=args.read_timeout)
    except (OSError, OverflowError) as exc:     # OverflowError: port outside 0-65535
        sys.stderr.write("error: %s\n" % listen_problem(args.host, args.port, exc))
        return EXIT_USAGE
    return serve_until_stopped(server, ["loaded %d stations from %s and %d lines from %s"
                                        % (len(stations), args.station_info, len(lines),
                                           args.line_info)]
                               + ["WARNING: " + note for note in notes])


if __name__ == "__main__":
    sys.exit(run_command(main))
