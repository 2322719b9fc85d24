"""The benchmark's own verdicts as a reward: one completion scored against one
row of the release, by the evaluators' own code.

``score(completion, row, ...)`` reads the completion as a model writes it
(transitlm.evaluation.answers: reasoning left out, end-of-turn tokens dropped, the JSON
route found), judges it with the scenario script of the row's benchmark (the
same RowJudge, checks and failure codes as ``evaluate.py --predictions``) and
turns the row's record into the row's terms of every metric
(transitlm.evaluation.terms: the numerator and denominator the evaluator sums), then
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
from transitlm.evaluation.catalog import (BENCHMARK_NAMES, DATA_ENV, benchmark_info,
                                          benchmark_of_task, line_file, line_file_beside,
                                          load_benchmark, station_file)
from transitlm.evaluation.engine import Context, Options, RowJudge
from transitlm.reward import binding, diversity, row_protocol
from transitlm.evaluation.inputs import SampleRow
from transitlm.reward.rows import RowDataError, row_dict, trainer_row  # noqa: F401 (API)
from transitlm.evaluation.terms import metric_terms

TERMS = ("conn", "sg", "dp", "lo", "sso", "rem", "ea", "pc", "rd")
KEYS = ("score", "format") + TERMS + ("acc", "error_code", "pred")
SHAPINGS = ("dense", "gated", "sparse")
# dense and gated: each key's weight in the weighted mean (all 1 unless set).
WEIGHTED = ("format",) + TERMS
# A route visiting fewer distinct stations earns only its format.
MIN_ROUTE_STATIONS = 2
# gated: these count only once the route is reachable and grounded.
GATED_TERMS = ("dp", "lo", "sso", "rem", "ea", "pc", "rd")
# The verdicts the shaping reads besides the terms (Scorer.checks): the route
# visits MIN_ROUTE_STATIONS distinct stations; it is the label's, station for
# station, with the same access mode at each end; the paper protocol's exact
# match and accuracy (its rem and ea terms); the RD of the real routes
# (benchmark 3: transitlm/reward/diversity.py; 0.0 elsewhere).
CHECKS = ("route", "in_order", "paper_rem", "paper_ea", "real_rd")
# The term each benchmark adds to the shared funnel.
SCENARIO_TERMS = {"personalized": "pc", "diversity": "rd"}
STATION_ENV = "TRANSITLM_STATION_INFO"
LINE_ENV = "TRANSITLM_LINE_INFO"
# Codes of a record whose row (the user's data), not its completion, is broken.
ROW_CODES = {"invalid_prompt": "sft_prompt", "invalid_label": "sft_label",
             "invalid_req_type": "req_type"}
NOT_TEXT = "invalid_completion"
# Rows a Scorer remembers as sound (judged with their own label) at most.
SOUND_ROWS = 1024


# ---------------------------------------------------------------------------
# What a trainer hands over
# ---------------------------------------------------------------------------

def completion_text(completion):
    """A completion as text: text as it is, bytes as UTF-8, chat messages (a
    list of {"role", "content"}: the last assistant message's, else the last
    message's content; content parts of type "text" joined); None (nothing
    generated) as empty text.  None for a value that holds no text (a number,
    an object of another shape -- a dict with neither "role" nor "content" is
    not a message --, or one that fails when read)."""
    try:
        return _completion_text(completion)
    except Exception:           # an object whose methods raise, nesting past the stack
        return None


def _completion_text(completion):
    if isinstance(completion, str):
        return completion
    if completion is None:                        # nothing was generated
        return ""
    if isinstance(completion, (bytes, bytearray)):
        return bytes(completion).decode("utf-8", "replace")
    if isinstance(completion, dict):
        return _content_text(completion.get("content")) if _is_message(completion) else None
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, dict) and _is_message(m)]
        answers = [m for m in messages if m.get("role") == "assistant"] or messages
        return _content_text(answers[-1].get("content")) if answers else None
    return None


def _is_message(value):
    return "content" in value or "role" in value


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
        self.files = (station, line)                # the paper protocol's scorer: checks()
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
        # The line file the scorer's rules read (None: none), which a row
        # bound to its network must have been prepared on (binding.mismatch):
        # the general LLM's route-eval check; benchmark 3's real routes
        # (transitlm/reward/diversity.py), where a network without one is
        # judged without it.
        self.line_info = values.get("line_info")
        if benchmark == "diversity":
            self.line_info = line or line_file_beside(station)
            self.context.real_routes = {"line_info": self.line_info}
        self.benchmark.prepare(self.context)
        self.judge = RowJudge(self.benchmark, self.context)
        self.scenario_term = SCENARIO_TERMS.get(benchmark)
        self._lock = threading.Lock()
        self._sound_rows = set()

    def record(self, completion, row):
        """The row's record (a details.jsonl line) for this completion.

        RowDataError when the row cannot be scored against, whatever the
        completion: a completion the evaluator stopped at before it judged
        the whole row (empty, not JSON) has the row judged with its own label
        as the answer, so a broken row never passes for a completion's
        failure."""
        record = self.judged_record(completion, row)
        if diversity.CHECKS_FIELD in record:
            record = dict(record)
            del record[diversity.CHECKS_FIELD]
        return record

    def judged_record(self, completion, row):
        """The record as the shaping reads it: the row's record (``record``)
        with, on benchmark 3, the checks of each predicted route the RD of
        real routes reads (transitlm/reward/diversity.py), which are not the
        evaluator's."""
        row = trainer_row(row)
        text = completion_text(completion)
        record = self._judged(row, "" if text is None else text)
        if record.get("status") != "evaluated" and row.get("sft_label") != text:
            self._check_row(row)
        if text is None:
            record = dict(record, status="error", failure_codes=["error." + NOT_TEXT],
                          error="the completion holds no text (%s)" % type(completion).__name__)
        return record

    def _check_row(self, row):
        """RowDataError when the row judged with its own label as the answer
        is refused; rows found sound are remembered (a few: a GRPO batch
        holds each row once per generation)."""
        key = (row.get("sft_prompt"), row.get("sft_label"),
               row.get("req_type") if self.benchmark.needs_req_type else None)
        if key in self._sound_rows:
            return
        self._judged(row, row.get("sft_label"))
        if len(self._sound_rows) >= SOUND_ROWS:
            self._sound_rows.clear()
        self._sound_rows.add(key)

    def _judged(self, row, text):
        """The record of ``text`` as the answer to ``row`` (a row as the CSV
        gives it); RowDataError naming the field the evaluator refused."""
        sample = SampleRow(1, str(row.get("index_id", row.get("indexid", "")) or ""),
                           row.get("sft_prompt"), row.get("sft_label"), text,
                           row.get("req_type") if self.benchmark.needs_req_type else None)
        with self._lock:
            record = self.judge.record(sample)
            self.context.tally.clear()
        code = _error_code(record)
        if code in ROW_CODES:
            raise RowDataError("the row's %s cannot be scored against: %s"
                               % (ROW_CODES[code], record.get("error")))
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

    def checks(self, completion, row, record, values):
        """{check: value in [0, 1]} (CHECKS) of this completion, beside its terms
        ``values``: what the shaping reads beyond the published aggregation.
        The RD of the real routes (real_rd) is read from the record
        (transitlm/reward/diversity.py).  The paper protocol's verdicts
        (paper_rem, paper_ea) are this
        Scorer's terms under ``paper``; under ``reference`` they come from
        the paper protocol's own Scorer (the evaluator's code, on the same
        network), asked only for a route that is an exact match in the
        label's order (both 0.0 otherwise: the shaping credits neither
        without that)."""
        in_order = values["rem"] == 1.0 and in_label_order(record)
        if self.protocol == "paper":
            paper_rem, paper_ea = values["rem"], values["ea"]
        elif not in_order:
            paper_rem, paper_ea = 0.0, 0.0
        else:
            paper = scorer_for(self.name, "paper", *self.files)
            try:
                paper_values = paper.terms(paper.record(completion, row))
            except RowDataError:        # a label only the paper's rules cannot read
                paper_values = dict.fromkeys(TERMS, 0.0)
            paper_rem, paper_ea = paper_values["rem"], paper_values["ea"]
        real_rd = 0.0
        if self.scenario_term == "rd":
            real_rd = diversity.real_diversity(record, self.context.protocol.line_set_with_access,
                                               MIN_ROUTE_STATIONS)
        return {"route": float(distinct_stations(record) >= MIN_ROUTE_STATIONS),
                "in_order": float(in_order), "paper_rem": paper_rem, "paper_ea": paper_ea,
                "real_rd": real_rd}

    def verdicts(self, completion, row):
        """-> (record, values, checks): the row's record (``judged_record``),
        its terms with ``format`` and ``acc``, and the shaping's checks (None
        for a completion that could not be read)."""
        record = self.judged_record(completion, row)
        values = self.terms(record)
        readable = record.get("status") == "evaluated"
        values["format"] = 1.0 if readable else 0.0
        values["acc"] = values["rem"]
        checks = self.checks(completion, row, record, values) if readable else None
        return record, values, checks

    def score(self, completion, row, shaping="dense", weights=None, failure=0.0):
        record, values, checks = self.verdicts(completion, row)
        readable = checks is not None
        values["score"] = (shaped(values, checks, shaping, weights, self.scenario_term)
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


def shaped(values, checks, shaping="dense", weights=None, scenario_term=None):
    """One number from a row's terms (``values``: format and the terms) and
    its ``checks`` (Scorer.checks) -- docs/reward.md#shaping gives the
    formulas and why each departs from the published metric.

    dense: the weighted mean of the credited terms (``credited``) -- partial
    credit down the funnel, in [0, 1]; gated: the same, with dp, lo, sso,
    rem, ea, pc and rd counting only when the route is reachable (conn 1)
    and grounded (sg 1); sparse: 1.0 for a route the benchmark accepts in
    full (``accepted``), else 0.0.  The terms a benchmark does not have (pc
    outside benchmark 2, rd outside benchmark 3) take no part.

    Every credited term is a non-decreasing function of the verdicts (the
    terms and the checks) and the weights are not negative, so a completion
    whose every verdict is at least another's never earns less; the top
    score needs ``accepted`` (with every weight above 0).
    """
    credit, accepted = credited(values, checks)
    if shaping == "sparse":
        return 1.0 if accepted else 0.0
    if shaping not in SHAPINGS:
        raise ValueError("unknown shaping %r (known: %s)" % (shaping, ", ".join(SHAPINGS)))
    weight = weights_of(weights)
    keys = _SHAPED_KEYS[scenario_term]
    total = sum(weight[key] for key in keys)
    if not total:
        return 0.0
    gate = 1.0
    if shaping == "gated":
        gate = values["conn"] * values["sg"]
    return sum(weight[key] * credit[key] * (gate if key in GATED_TERMS else 1.0)
               for key in keys) / total


def credited(values, checks):
    """-> ({key: credit in [0, 1]}, accepted): what dense and gated count of
    each key, and whether the route is accepted in full.

    A route of fewer than MIN_ROUTE_STATIONS distinct stations is credited
    its format only.  Otherwise each term as the evaluator gives it, except:
    rem counts only for the label's route in the label's order that the
    paper protocol also calls an exact match; ea is the lower of the two
    protocols' accuracy, for such a route only; pc and rd count only for a
    first route accepted in full, rd as the RD of the real routes
    (checks["real_rd"], transitlm/reward/diversity.py) and never above the
    published RD.
    Accepted in full: every verdict of the funnel at its best -- reachable,
    grounded, plausible, both IoUs 1, that exact match, all three estimates
    accurate under both protocols.
    """
    route = checks["route"]
    exact = values["rem"] * checks["in_order"] * checks["paper_rem"]
    accurate = min(values["ea"], checks["paper_ea"]) * exact
    accepted = bool(route and exact == 1.0 and accurate == 1.0
                    and all(values[key] == 1.0 for key in _FUNNEL_BEST))
    whole = 1.0 if accepted else 0.0
    credit = {"format": values["format"], "conn": values["conn"], "sg": values["sg"],
              "dp": values["dp"], "lo": values["lo"], "sso": values["sso"], "rem": exact,
              "ea": accurate, "pc": values["pc"] * whole,
              "rd": min(values["rd"], checks["real_rd"]) * whole}
    if not route:
        credit = dict.fromkeys(credit, 0.0)
        credit["format"] = values["format"]
    return credit, accepted


# What a route accepted in full has at 1.0 besides the exact match and the accuracy.
_FUNNEL_BEST = ("format", "conn", "sg", "dp", "lo", "sso")


def _first_route(record, key):
    return (record.get(key) or {}).get("first") or {}


def distinct_stations(record):
    """How many distinct stations the (first) predicted route visits, as the
    evaluator read them (its station list: 【换乘】 markers and empty entries
    already left out; the general LLM's matched boarding/alighting names)."""
    return len(set(_first_route(record, "prediction_routes").get("stations") or ()))


def in_label_order(record):
    """Is the (first) predicted route the label's, station for station: the
    station list the evaluator read equals the label's (order and repeats
    included), with the same access mode at each end (its
    transfer_mode_match verdict)?  The published exact match compares sets."""
    stations = _first_route(record, "prediction_routes").get("stations")
    return (bool(stations) and stations == _first_route(record, "label_routes").get("stations")
            and bool(record.get("transfer_mode_match")))


# The keys dense and gated weigh, by the benchmark's own term (pc, rd or None).
_SHAPED_KEYS = {term: [key for key in WEIGHTED
                       if key not in SCENARIO_TERMS.values() or key == term]
                for term in (None,) + tuple(SCENARIO_TERMS.values())}
_UNIT_WEIGHTS = dict.fromkeys(WEIGHTED, 1.0)     # read only: the weights when none are set


# A weight is 0 or between these: any sum of weighted terms stays finite (no
# overflow to inf, which makes the score NaN) and every term still counts (no
# underflow to 0).  Only the ratios between weights matter.
MIN_WEIGHT = 1e-6
MAX_WEIGHT = 1e6


def weights_of(weights):
    """The weights of dense and gated: 1 for every key, or as given (a dict
    not to be changed).  ValueError for an unknown key or a weight that is
    not 0 or a number between MIN_WEIGHT and MAX_WEIGHT."""
    if not weights:
        return _UNIT_WEIGHTS
    weight = dict.fromkeys(WEIGHTED, 1.0)
    weight.update(checked_weights(weights))
    return weight


def checked_weights(weights):
    """The weights given (a mapping: a dict, verl's DictConfig) as a plain dict
    {key: float}, or None when none are given; ValueError naming the one that
    cannot be used."""
    if not weights:
        return None
    try:
        items = list(weights.items())
    except Exception:
        raise ValueError("weights must be a mapping {key: number}, not %s"
                         % type(weights).__name__)
    checked = {}
    for key, value in items:
        if key not in _UNIT_WEIGHTS:
            raise ValueError("unknown weight %r (known: %s)" % (key, ", ".join(WEIGHTED)))
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is None or isinstance(value, bool) or not (
                number == 0.0 or MIN_WEIGHT <= number <= MAX_WEIGHT):
            raise ValueError("weight %s must be 0 or a number from %g to %g, not %r"
                             % (key, MIN_WEIGHT, MAX_WEIGHT, value))
        checked[key] = number
    return checked


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


def score(completion, row, benchmark=None, protocol=None, station_info=None,
          line_info=None, shaping="dense", weights=None, failure=0.0):
    """Score one completion against one row of the release -> a flat dict (see
    the module's docstring for its keys).

    The protocol: ``protocol`` when given (a row prepared for another is
    said once in the log), else the row's own ``protocol`` (as ``reward.py
    prepare`` records it), else reference (transitlm.reward.row_protocol).

    Never raises for a completion, whatever it holds: an unreadable one is
    ``failure`` (0.0 by default) with its ``error_code``.  A row that cannot
    be scored against (the user's data: no benchmark, an unreadable prompt or
    label) raises RowDataError naming the field; an unknown benchmark,
    protocol, shaping or weight raises ValueError.
    """
    row = trainer_row(row)
    name = benchmark_of(row, benchmark)
    protocol = row_protocol.chosen(row, protocol)
    scorer = _bound_scorer(row, name, protocol, station_info, line_info)
    if shaping not in SHAPINGS:
        raise ValueError("unknown shaping %r (known: %s)" % (shaping, ", ".join(SHAPINGS)))
    weights_of(weights)
    return scorer.score(completion, row, shaping, weights, failure)
