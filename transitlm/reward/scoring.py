"""The benchmark's own verdicts as a reward: one completion scored against one
row of the release, by the evaluators' own code.

``score(completion, row, ...)`` reads the completion as a model writes it
(transitlm.answers: reasoning left out, end-of-turn tokens dropped, the JSON
route found), judges it with the scenario script of the row's benchmark (the
same RowJudge, checks and failure codes as ``evaluate.py --predictions``) and
turns the row's record into the row's terms of every metric
(transitlm.terms: the numerator and denominator the evaluator sums), then
into one number by a documented shaping.  A ``Scorer`` holds what one
benchmark, protocol and network need; it is made once per process and file
(``scorer_for``) and is safe to share between threads.

Keys, the same on every call: ``score``, ``format``, the terms ``conn``,
``sg``, ``dp``, ``lo``, ``sso``, ``rem``, ``ea``, ``pc``, ``rd``, ``acc`` (=
``rem``) -- every one a float -- and the strings ``error_code`` ("" when the
completion was judged) and ``pred`` (the route read, canonical, for majority
voting).  A term of a round the row did not reach is 0.0; ``pc`` outside
benchmark 2 and ``rd`` outside benchmark 3 are 0.0.

Standard library only; Python 3.8+.
"""

import json
import os
import threading

from common import PROTOCOLS, StationNetwork, station_cache_folder
from transitlm.catalog import (BENCHMARK_NAMES, DATA_ENV, benchmark_info, benchmark_of_task,
                               line_file, load_benchmark, station_file)
from transitlm.engine import Context, Options, RowJudge
from transitlm.reward import binding
from transitlm.inputs import SampleRow
from transitlm.terms import metric_terms

TERMS = ("conn", "sg", "dp", "lo", "sso", "rem", "ea", "pc", "rd")
KEYS = ("score", "format") + TERMS + ("acc", "error_code", "pred")
SHAPINGS = ("dense", "gated", "sparse")
# dense and gated: each key's weight in the weighted mean (all 1 unless set).
WEIGHTED = ("format",) + TERMS
# dense and gated: a route of fewer stations earns only its format.
MIN_ROUTE_STATIONS = 2
# gated: these count only once the route is reachable and grounded.
GATED_TERMS = ("lo", "sso", "rem", "ea", "pc", "rd")
# The term each benchmark adds to the shared funnel.
SCENARIO_TERMS = {"personalized": "pc", "diversity": "rd"}
STATION_ENV = "TRANSITLM_STATION_INFO"
LINE_ENV = "TRANSITLM_LINE_INFO"
# Codes of a record whose row (the user's data), not its completion, is broken.
ROW_CODES = {"invalid_prompt": "sft_prompt", "invalid_label": "sft_label",
             "invalid_req_type": "req_type"}
NOT_TEXT = "invalid_completion"


class RowDataError(ValueError):
    """A row that cannot be scored against (the user's data, not the model's
    completion): names the field."""


# ---------------------------------------------------------------------------
# What a trainer hands over
# ---------------------------------------------------------------------------

def completion_text(completion):
    """A completion as text: text as it is, bytes as UTF-8, chat messages (a
    list of {"role", "content"}: the last assistant message's, else the last
    message's content; content parts of type "text" joined); None (nothing
    generated) as empty text.  None for a value that holds no text (a number,
    an object of another shape)."""
    if isinstance(completion, str):
        return completion
    if completion is None:                        # nothing was generated
        return ""
    if isinstance(completion, (bytes, bytearray)):
        return bytes(completion).decode("utf-8", "replace")
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, dict)]
        answers = [m for m in messages if m.get("role") == "assistant"] or messages
        return _content_text(answers[-1].get("content")) if answers else None
    return None


def _content_text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):         # [{"type": "text", "text": ...}, ...]
        parts = [part.get("text") for part in content
                 if isinstance(part, dict) and isinstance(part.get("text"), str)]
        return "".join(parts)
    return None


def row_dict(row):
    """A row of the release as a dict: a dict as it is, JSON text decoded."""
    if isinstance(row, dict):
        return row
    if isinstance(row, (str, bytes, bytearray)):
        try:
            value = json.loads(row)
        except (ValueError, RecursionError):
            raise RowDataError("the row is text that is not JSON")
        if isinstance(value, dict):
            return value
    raise RowDataError("the row is %s, expected a dict with sft_prompt and sft_label (or its "
                       "JSON text)" % type(row).__name__)


def benchmark_of(row, benchmark=None):
    """The benchmark to score against: ``benchmark`` if given, else the one
    the row's task_id names (benchmark1-train -> single_route, ...)."""
    if benchmark is not None:
        if benchmark_info(benchmark) is None:
            raise ValueError("unknown benchmark %r (known: %s)"
                             % (benchmark, ", ".join(BENCHMARK_NAMES)))
        return benchmark
    task = row.get("task_id")
    found = benchmark_of_task(task) if task is not None else None
    if found is None:
        raise RowDataError("the row's task_id %r names no benchmark: give benchmark= (%s)"
                           % (task, ", ".join(BENCHMARK_NAMES)))
    return found


# ---------------------------------------------------------------------------
# The scorer of one benchmark, protocol and network
# ---------------------------------------------------------------------------

def network_files(station_info=None, line_info=None):
    """The station file (the argument, else $TRANSITLM_STATION_INFO, else
    $TRANSITLM_DATA's, else the bundled one) and the line file (likewise, else
    the one beside the station file)."""
    station = station_file(station_info or os.environ.get(STATION_ENV) or None)
    return station, line_info or os.environ.get(LINE_ENV) or None


_NETWORKS = {}
_SCORERS = {}
_LOADING = threading.Lock()


def _network(path):
    """A station file loaded once per process (the station cache as the evaluators use it)."""
    key = os.path.realpath(path)
    if key not in _NETWORKS:
        _NETWORKS[key] = StationNetwork.load(path, station_cache_folder())
    return _NETWORKS[key]


def scorer_for(benchmark, protocol="reference", station_info=None, line_info=None):
    """The Scorer of these settings, made on first use and kept for the process.

    Found by the arguments and the environment variables that name the files
    first: resolving the files' real paths takes a system call per folder of
    the path, about half the time of scoring a row."""
    environ = os.environ
    given = (benchmark, protocol, station_info, line_info,
             None if station_info else (environ.get(STATION_ENV), environ.get(DATA_ENV)),
             None if line_info else environ.get(LINE_ENV))
    scorer = _SCORERS.get(given)
    if scorer is not None:
        return scorer
    station, line = network_files(station_info, line_info)
    key = (benchmark, protocol, os.path.realpath(station), line and os.path.realpath(line))
    scorer = _SCORERS.get(key)
    if scorer is None:
        with _LOADING:
            scorer = _SCORERS.get(key)
            if scorer is None:
                scorer = Scorer(benchmark, protocol, station, line)
                _SCORERS[key] = scorer
    _SCORERS[given] = scorer
    return scorer


class Scorer(object):
    """Scores completions against rows of one benchmark, under one protocol,
    on one network: the evaluator's RowJudge on a row at a time."""

    def __init__(self, benchmark, protocol="reference", station_info=None, line_info=None):
        if protocol not in PROTOCOLS:
            raise ValueError("unknown protocol %r (known: %s)"
                             % (protocol, ", ".join(sorted(PROTOCOLS))))
        self.name = benchmark
        self.protocol = protocol
        self.benchmark = load_benchmark(benchmark)
        station, line = network_files(station_info, line_info)
        values = {"protocol": protocol, "station_info": station, "quiet": True, "workers": 1}
        if benchmark == "general_llm":
            values["line_info"] = line_file(line, station, "line_info=")
            values["api_url"] = None
        options = Options(self.benchmark, **values)
        options.interface = "api"
        self.context = Context(options, PROTOCOLS[protocol], _network(station))
        # A completion is a model's own text (read as --predictions reads it).
        self.context.model_text = True
        self.context.route_drawings = True          # the route read, for ``pred``
        self.benchmark.prepare(self.context)
        self.judge = RowJudge(self.benchmark, self.context)
        self.scenario_term = SCENARIO_TERMS.get(benchmark)
        self._lock = threading.Lock()

    def record(self, completion, row):
        """The row's record (a details.jsonl line) for this completion."""
        text = completion_text(completion)
        sample = SampleRow(1, str(row.get("index_id", row.get("indexid", "")) or ""),
                           row.get("sft_prompt"), row.get("sft_label"),
                           "" if text is None else text,
                           row.get("req_type") if self.benchmark.needs_req_type else None)
        with self._lock:
            record = self.judge.record(sample)
            self.context.tally.clear()
        code = _error_code(record)
        if code in ROW_CODES:
            raise RowDataError("the row's %s cannot be scored against: %s"
                               % (ROW_CODES[code], record.get("error")))
        if text is None:
            record = dict(record, status="error", failure_codes=["error." + NOT_TEXT],
                          error="the completion holds no text (%s)" % type(completion).__name__)
        return record

    def terms(self, record):
        """{term: value in [0, 1]}: each metric's numerator over its denominator
        for this row (0.0 where the row did not reach its round)."""
        values = dict.fromkeys(TERMS, 0.0)
        for key, (numerator, denominator) in metric_terms(self.name, self.protocol,
                                                          record).items():
            if key in values and denominator and numerator is not None:
                values[key] = float(numerator) / denominator
        return values

    def score(self, completion, row, shaping="dense", weights=None, failure=0.0):
        record = self.record(completion, row)
        values = self.terms(record)
        readable = record.get("status") == "evaluated"
        values["format"] = 1.0 if readable else 0.0
        values["acc"] = values["rem"]
        values["score"] = (shaped(values, shaping, weights, self.scenario_term,
                                  route_stations(record) >= MIN_ROUTE_STATIONS)
                           if readable else float(failure))
        values["error_code"] = "" if readable else _error_code(record) or "no_response"
        values["pred"] = canonical_route(record) if readable else ""
        return {key: values[key] for key in KEYS}


def _error_code(record):
    for code in record.get("failure_codes") or ():
        if code.startswith("error."):
            return code[len("error."):]
        if code == "no_response":
            return code
    return None


def shaped(values, shaping="dense", weights=None, scenario_term=None, is_route=True):
    """One number from a row's terms (``values``: format and the terms).

    dense: the weighted mean of format and the terms -- partial credit down
    the funnel, in [0, 1]; gated: the same, but lo, sso, rem, ea, pc and rd
    count only when the route is reachable (conn 1) and grounded (sg 1);
    sparse: 1.0 for an exact match (rem 1) with all three estimates accurate
    (ea 1), else 0.0.  The terms a benchmark does not have (pc outside
    benchmark 2, rd outside benchmark 3) take no part.  A completion whose
    route holds fewer than two stations (``is_route`` False) earns only its
    format: the published evaluator calls such a route reachable, grounded
    and plausible (a quirk of its rules), and a reward that paid for that
    would teach a model to answer ``{}``.
    """
    if shaping == "sparse":
        return 1.0 if values["rem"] == 1.0 and values["ea"] == 1.0 else 0.0
    if shaping not in SHAPINGS:
        raise ValueError("unknown shaping %r (known: %s)" % (shaping, ", ".join(SHAPINGS)))
    weight = weights_of(weights)
    keys = _SHAPED_KEYS[scenario_term]
    gate = 1.0
    if shaping == "gated" and not (values["conn"] == 1.0 and values["sg"] == 1.0):
        gate = 0.0
    total = sum(weight[key] for key in keys)
    if not total:
        return 0.0
    if not is_route:
        return weight["format"] * values["format"] / total
    return sum(weight[key] * values[key] * (gate if key in GATED_TERMS else 1.0)
               for key in keys) / total


def route_stations(record):
    """How many stations the (first) predicted route holds."""
    route = (record.get("prediction_routes") or {}).get("first") or {}
    return len(route.get("stations") or ())


# The keys dense and gated weigh, by the benchmark's own term (pc, rd or None).
_SHAPED_KEYS = {term: [key for key in WEIGHTED
                       if key not in SCENARIO_TERMS.values() or key == term]
                for term in (None,) + tuple(SCENARIO_TERMS.values())}
_UNIT_WEIGHTS = dict.fromkeys(WEIGHTED, 1.0)     # read only: the weights when none are set


def weights_of(weights):
    """The weights of dense and gated: 1 for every key, or as given (a dict
    not to be changed)."""
    if not weights:
        return _UNIT_WEIGHTS
    weight = dict.fromkeys(WEIGHTED, 1.0)
    for key, value in (weights or {}).items():
        if key not in weight:
            raise ValueError("unknown weight %r (known: %s)" % (key, ", ".join(WEIGHTED)))
        value = float(value)
        if not value >= 0.0 or value == float("inf"):
            raise ValueError("weight %s must be a number 0 or more, not %r" % (key, value))
        weight[key] = value
    return weight


def canonical_route(record):
    """The route(s) read, as one canonical text (for majority voting): lines,
    stations and access modes of each predicted route, in a fixed layout."""
    routes = record.get("prediction_routes") or {}
    shown = {}
    for key in sorted(routes):
        route = routes[key] or {}
        shown[key] = [route.get("lines"), route.get("stations"),
                      [route.get("start_mode"), route.get("end_mode")]]
    return _CANONICAL_JSON.encode(shown)


# json.dumps with these options would make an encoder on every call.
_CANONICAL_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))



def empty_values(failure=0.0, error_code=NOT_TEXT):
    """The keys of a completion that could not be scored at all."""
    values = dict.fromkeys(KEYS, 0.0)
    values.update(score=float(failure), error_code=error_code, pred="")
    return values


def _bound_scorer(row, name, protocol, station_info, line_info):
    """The scorer of a row, on the network prepare bound it to
    (transitlm.reward.binding) when no station file is configured; a row
    bound to another network than the configured one is RowDataError."""
    if binding.STATION_SHA in row:
        configured = bool(station_info or os.environ.get(STATION_ENV)
                          or os.environ.get(DATA_ENV))
        station_info, line_info, problem = binding.bound_files(row, station_info, line_info,
                                                               configured)
        if problem:
            raise RowDataError(problem)
        scorer = scorer_for(name, protocol, station_info, line_info)
        problem = binding.mismatch(row, scorer)
        if problem:
            raise RowDataError(problem)
        return scorer
    return scorer_for(name, protocol, station_info, line_info)


def score(completion, row, benchmark=None, protocol="reference", station_info=None,
          line_info=None, shaping="dense", weights=None, failure=0.0):
    """Score one completion against one row of the release -> a flat dict (see
    the module's docstring for its keys).

    Never raises for a completion, whatever it holds: an unreadable one is
    ``failure`` (0.0 by default) with its ``error_code``.  A row that cannot
    be scored against (the user's data: no benchmark, an unreadable prompt or
    label) raises RowDataError naming the field; an unknown benchmark,
    protocol, shaping or weight raises ValueError.
    """
    row = row_dict(row)
    name = benchmark_of(row, benchmark)
    scorer = _bound_scorer(row, name, protocol, station_info, line_info)
    if shaping not in SHAPINGS:
        raise ValueError("unknown shaping %r (known: %s)" % (shaping, ", ".join(SHAPINGS)))
    weights_of(weights)
    return scorer.score(completion, row, shaping, weights, failure)
