"""The reward over HTTP (``reward.py serve``): OpenRLHF's remote reward
(``--reward.remote_url http://HOST:PORT/get_reward``) or any client's.

    POST /get_reward  {"query": [...], "prompts": [...], "labels": [...]}
                      -> {"rewards": [...], "scores": [...], "extra_logs": {key: [...]}}
    GET  /healthz     -> {"status": "ok", "version", "benchmark", "protocol", "shaping",
                          "failure", "weights"}   (protocol null: each row's own)

A POST is answered exactly as transitlm.reward.openrlhf.reward_func answers
the same three lists in process (it is called), with the settings the
service was started with: without --protocol (or
$TRANSITLM_REWARD_PROTOCOL) each row under the protocol prepare recorded in
it, else reference; with one, that protocol, a row prepared for another said
once in the log (transitlm.reward.row_protocol).  Empty lists are answered with empty lists
(OpenRLHF 0.11.0 and earlier sent them to every URL but the first; 0.11.2
sends each one-sample request to the next of its URLs in turn).  A request of the wrong
shape is a 400 naming what is wrong (the body not JSON, a list missing, not
a list, lists of different lengths, a query or prompt that is not text); a
row that cannot be scored against (transitlm.reward.scoring.RowDataError:
the user's data) is a 422 naming the row and its field; a completion never
fails a request (it scores low, with its error_code).

The service is stateless -- every answer depends on the request and the
settings alone -- so any number of replicas may serve behind a load
balancer.  Its HTTP side is the route-eval service's (transitlm.io.json_service:
RFC 9112 framing, body and head limits, time-outs, a cap on connections and
on the bytes of bodies held, at most two bodies scored at a time, one log
line per request, never a traceback to a client), with its own limits on a
body: ``MAX_BODY_BYTES`` and ``MAX_ROWS``.

Standard library only; Python 3.8+.
"""

import math
import os
import sys

from common import PROTOCOLS, VERSION, InputError, type_name
from transitlm.evaluation.catalog import BENCHMARK_NAMES, benchmark_info
from transitlm.io.exit_status import EXIT_USAGE
from transitlm.io.json_service import (
    DEFAULT_HOST, DEFAULT_READ_TIMEOUT, HEALTH_PATH, MAX_BODIES_BYTES, MAX_CONNECTIONS,
    JsonServer, RequestProblem, Route, decode_body, listen_problem, read_timeout_problem,
    serve_until_stopped)
from transitlm.reward import row_protocol
from transitlm.reward.openrlhf import reward_func
from transitlm.reward.scoring import (SHAPINGS, RowDataError, checked_weights, network_files,
                                      scorer_for, weights_of)
from transitlm.reward.settings import ENV, settings
from transitlm.io.terminal import one_line

REWARD_PATH = "/get_reward"
LISTS = ("query", "prompts", "labels")
# Rows per request.  OpenRLHF posts one; a client batching its own posts a
# few hundred (a row is about 5-10 KB of JSON: the templated prompt, the
# response and the release row).  Checked on the raw text before decoding,
# like any list in the body.
MAX_ROWS = 2048
MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_PORT = 8766
SOFTWARE = "TransitLMReward/1.0"


class RewardServer(JsonServer):
    """The reward service: a JsonServer holding the reward's settings
    (score()'s keywords: benchmark, protocol, shaping, failure, weights,
    station_info, line_info).  The scorers it uses are made once per process
    and shared between threads (transitlm.reward.scoring.scorer_for)."""

    def __init__(self, address, options, log=None, read_timeout=DEFAULT_READ_TIMEOUT,
                 max_connections=MAX_CONNECTIONS, max_bodies_bytes=MAX_BODIES_BYTES,
                 max_body_bytes=MAX_BODY_BYTES):
        self.options = dict(options)
        JsonServer.__init__(self, address, ROUTES, SOFTWARE, log, read_timeout,
                            max_connections, max_bodies_bytes, max_body_bytes)


def _health(handler):
    options = handler.server.options
    return {"status": "ok", "version": VERSION, "benchmark": options["benchmark"],
            "protocol": options["protocol"], "shaping": options["shaping"],
            "failure": options["failure"], "weights": options["weights"]}


def _reward(handler, body):
    queries, prompts, labels = parse_request(body)
    handler.note = "%d rows" % len(queries)
    options = handler.server.options
    try:
        return finite_answer(reward_func(queries, prompts, labels, **options))
    except RowDataError:
        raise RequestProblem(422, broken_row(queries, prompts, labels, options))
    except InputError as exc:        # a network file the service could not load
        raise RequestProblem(500, "the service cannot score these rows: %s" % one_line(exc))


def finite_answer(answer):
    """The answer, when every number in it is finite (strict JSON has no NaN
    or Infinity; the scores are finite by construction: this guards that)."""
    for key, values in [("rewards", answer["rewards"]), ("scores", answer["scores"])] + [
            ("extra_logs." + name, logged) for name, logged in answer["extra_logs"].items()]:
        for index, value in enumerate(values):
            if not math.isfinite(value):
                raise RequestProblem(500, "the reward cannot be answered: %s[%d] is %r, not "
                                          "a finite number" % (key, index, value))
    return answer


ROUTES = {REWARD_PATH: Route("POST", _reward), HEALTH_PATH: Route("GET", _health)}


def parse_request(body):
    """Request body bytes -> (queries, prompts, labels); RequestProblem (4xx)
    naming what is wrong otherwise."""
    payload = decode_body(body, MAX_ROWS, "rows")
    if not isinstance(payload, dict):
        raise RequestProblem(400, "body must be a JSON object {\"query\": [...], "
                                  "\"prompts\": [...], \"labels\": [...]}")
    lists = []
    for key in LISTS:
        if key not in payload:
            raise RequestProblem(400, "body has no \"%s\" list" % key)
        if not isinstance(payload[key], list):
            raise RequestProblem(400, "\"%s\" must be a list, not %s"
                                 % (key, type_name(payload[key])))
        lists.append(payload[key])
    if len(set(len(values) for values in lists)) > 1:
        raise RequestProblem(400, "\"query\", \"prompts\" and \"labels\" differ in length "
                                  "(%d, %d, %d); one of each per row" % tuple(map(len, lists)))
    for key, values in zip(LISTS[:2], lists):
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise RequestProblem(400, "%s[%d] is %s; it must be text"
                                     % (key, index, type_name(value)))
    return lists


def broken_row(queries, prompts, labels, options):
    """The message of a 422: the first row whose label cannot be scored
    against, by its index, and why (each row scored alone)."""
    for index, row in enumerate(zip(queries, prompts, labels)):
        try:
            reward_func(*([value] for value in row), **options)
        except RowDataError as exc:
            return "labels[%d]: %s" % (index, one_line(exc, 300))
    return "a row cannot be scored against"       # not reached: the batch raised for one


# ---------------------------------------------------------------------------
# The settings, checked before serving
# ---------------------------------------------------------------------------

def parse_weights(text):
    """``conn=2,rem=3`` -> {"conn": 2.0, "rem": 3.0}; ValueError naming the problem."""
    weights = {}
    for item in text.split(","):
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError("--weights takes KEY=NUMBER pairs separated by commas, "
                             "not %r" % item)
        try:
            weights[key.strip()] = float(value)
        except ValueError:
            raise ValueError("--weights %s: %r is not a number" % (key.strip(), value))
    weights_of(weights)        # unknown keys, weights outside 0 or MIN_WEIGHT..MAX_WEIGHT
    return weights


def checked_settings(**given):
    """The service's settings: the flags given, else the environment's
    (transitlm.reward.settings), else the defaults; ValueError naming the
    flag or variable whose value cannot be used."""
    try:
        checked_weights(given.get("weights"))
    except ValueError as exc:
        raise ValueError("--weights: %s" % exc)
    sources = {key: "--" + key if given.get(key) is not None else "$" + ENV[key]
               for key in ENV}
    protocol = given.get("protocol") or os.environ.get(ENV["protocol"]) or None
    if protocol is not None and protocol not in PROTOCOLS:
        raise ValueError("%s: unknown protocol %r (known: %s)" % (
            sources["protocol"], protocol, ", ".join(sorted(PROTOCOLS))))
    try:
        options = settings(**given)
    except ValueError as exc:       # then only the failure score can fail
        raise ValueError("%s: %s" % (sources["failure"], exc))
    if options["benchmark"] is not None and benchmark_info(options["benchmark"]) is None:
        raise ValueError("%s: unknown benchmark %r (known: %s)" % (
            sources["benchmark"], options["benchmark"], ", ".join(BENCHMARK_NAMES)))
    if options["shaping"] not in SHAPINGS:
        raise ValueError("%s: unknown shaping %r (known: %s)" % (
            sources["shaping"], options["shaping"], ", ".join(SHAPINGS)))
    if not math.isfinite(options["failure"]):
        raise ValueError("%s: the failure score must be a finite number, not %r"
                         % (sources["failure"], options["failure"]))
    return options


def load_scorers(options):
    """Make the scorers the service will use before it serves (the network
    loaded, the scenario scripts ready): the benchmark's, or every
    benchmark's when rows name theirs -> log lines.  InputError when the
    station file (or the benchmark's line file) cannot be loaded.  Without
    --benchmark, a general-LLM scorer that lacks its line file is left out
    (a general-LLM row then gets a 500 saying so)."""
    names = [options["benchmark"]] if options["benchmark"] else list(BENCHMARK_NAMES)
    # Without --protocol, rows name theirs: the scorers of both are made.
    protocols = [options["protocol"]] if options["protocol"] else sorted(PROTOCOLS)
    station, _ = network_files(options["station_info"], options["line_info"])
    lines = []
    for name in names:
        try:
            for protocol in protocols:
                scorer_for(name, protocol, options["station_info"], options["line_info"])
        except InputError as exc:
            if name != "general_llm" or len(names) == 1:
                raise
            lines.append("general_llm rows cannot be scored: %s" % one_line(exc))
    lines.insert(0, "reward: %s; protocol %s, shaping %s, failure %g%s; stations from %s" % (
        options["benchmark"] or "each row's benchmark (its task_id)",
        options["protocol"] or "each row's own (%s for a row without one)"
        % row_protocol.DEFAULT,
        options["shaping"], options["failure"],
        "; weights %s" % ",".join("%s=%g" % item for item in sorted(options["weights"].items()))
        if options["weights"] else "", station))
    return lines


def make_server(options, host=DEFAULT_HOST, port=DEFAULT_PORT, log=None,
                read_timeout=DEFAULT_READ_TIMEOUT, max_connections=MAX_CONNECTIONS,
                max_bodies_bytes=MAX_BODIES_BYTES, max_body_bytes=MAX_BODY_BYTES):
    """A bound, not yet serving RewardServer (port 0 = a free port); see
    general_llm/server.py's make_server."""
    return RewardServer((host, port), options, log, read_timeout, max_connections,
                        max_bodies_bytes, max_body_bytes)


def serve(args):
    """``reward.py serve``: check the settings, load the scorers, serve until
    SIGINT/SIGTERM -> the exit status."""
    problem = read_timeout_problem(args.read_timeout)
    try:
        if problem:
            raise ValueError(problem)
        weights = parse_weights(args.weights) if args.weights else None
        options = checked_settings(benchmark=args.benchmark, protocol=args.protocol,
                                   shaping=args.shaping, failure=args.failure, weights=weights,
                                   station_info=args.station_info, line_info=args.line_info)
        lines = load_scorers(options)
    except (ValueError, InputError) as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_USAGE
    try:
        server = make_server(options, args.host, args.port, read_timeout=args.read_timeout)
    except (OSError, OverflowError) as exc:     # OverflowError: port outside 0-65535
        sys.stderr.write("error: %s\n" % listen_problem(args.host, args.port, exc))
        return EXIT_USAGE
    return serve_until_stopped(server, lines)
