"""Per-row records and their aggregation: failure codes, funnel totals, the
figures of a run (``Aggregate``), foldable across worker processes.

Standard library only; Python 3.8+.
"""

import operator

from common import InputError, PROTOCOLS, plain_sum, ratio
from transitlm.evaluation.catalog import load_benchmark
from transitlm.evaluation.row_ids import RowIds


# ---------------------------------------------------------------------------
# Per-row records
# ---------------------------------------------------------------------------
# A record is a plain dict, written as is to the details.  Keys every evaluator
# fills for an evaluated row: the verdicts of judge_route/compare_routes, plus
# ``in_funnel`` (the row enters Round 1), ``other_failures`` (scenario checks
# outside the funnel, as "topic: reason" strings) and ``failure_codes``.

# The stages of a failure code ``<stage>.<reason>``, in the order a row's codes
# are listed.  The codes themselves are listed in the README; keep them stable.
STAGES = ("error", "no_response", "reachability", "grounding", "plausibility",
          "overlap", "accuracy", "preference", "diversity")
NO_RESPONSE = "no_response"


def base_record(sample, origin=None, destination=None, city=None):
    """A row's record before its checks: ``origin``, ``destination`` and
    ``city`` from its prompt, when it was read."""
    return {"row": sample.row, "index_id": sample.index_id, "status": "evaluated",
            "error": None, "city": city, "origin": origin, "destination": destination,
            "in_funnel": True, "prediction_routes": None, "label_routes": None,
            "other_failures": []}


def error_record(sample, message, in_funnel, status="error", code=None, prompt=None):
    """A row that was not evaluated: ``status`` error (code ``error.<code>``) or
    no_response; it carries that one failure code and no other.  ``prompt``:
    (origin, destination, city) when the prompt was read."""
    record = base_record(sample, *(prompt or ()))
    record.update(status=status, error=message, in_funnel=in_funnel, reachable=False,
                  failed_round=None,
                  failure_codes=[NO_RESPONSE] if status == NO_RESPONSE else ["error." + code])
    return record


def failure_codes(record):
    """A details record's failure codes; derived coarsely for details lines
    written before they had them (schema 1)."""
    codes = record.get("failure_codes")
    if isinstance(codes, list):
        return [str(code) for code in codes]
    status = record.get("status")
    if status == "error":
        return ["error"]
    if status == NO_RESPONSE:
        return [NO_RESPONSE]
    failed = record.get("failed_round")
    return [str(failed)] if failed else []


def row_failed(record):
    """Did the row fail: does it carry a failure code (a failed check, an
    error, no response)?  The one rule behind the failed-row count of
    report.json (``counts.failed``), the text report's list and the page."""
    codes = record.get("failure_codes")
    if type(codes) is list:            # a record of this version: no list to build
        return bool(codes)
    return bool(failure_codes(record))


def failed_round(record):
    """The first funnel round the row did not pass, or None."""
    if record.get("status") != "evaluated" or not record.get("in_funnel"):
        return None
    if not record.get("reachable"):
        return "reachability"
    if not record.get("exact_match"):
        return "overlap"
    if not record.get("overall_accurate"):
        return "accuracy"
    return None


_ACCURACY_CODES = (("distance_accurate", "accuracy.distance"),
                   ("time_accurate", "accuracy.time"),
                   ("fare_accurate", "accuracy.fare"),
                   ("transfer_accurate", "accuracy.access_distance"))


def funnel_failure_codes(record, check_codes):
    """Failure codes of Rounds 1-4 for an evaluated row.

    A stage's codes go on exactly the rows that fail that round among the rows
    it takes as input: reachability on Round 1's input, grounding and
    plausibility on reachable rows, overlap on reachable rows that are not
    exact matches, accuracy (one code per estimate that is off) on exact
    matches.  ``check_codes`` holds the checks' own reasons by stage.
    """
    if not record.get("in_funnel"):
        return []
    if not record.get("reachable"):
        return ["reachability." + code
                for code in (check_codes.get("reachability") or ("unspecified",))]
    codes = []
    if not record["station_grounding"]:
        codes.extend("grounding." + code
                     for code in (check_codes.get("grounding") or ("unspecified",)))
    if not record["distance_plausibility"]:
        codes.extend("plausibility." + code
                     for code in (check_codes.get("plausibility") or ("unspecified",)))
    if not record["exact_match"]:
        overlap = []
        if record["station_iou"] != 1:
            overlap.append("overlap.station_mismatch")
        if record["line_iou"] != 1:
            overlap.append("overlap.line_mismatch")
        if not record["transfer_mode_match"]:
            overlap.append("overlap.access_mode_mismatch")
        codes.extend(overlap or ["overlap.unspecified"])
    else:
        for key, code in _ACCURACY_CODES:
            if not record[key]:
                codes.append(code)
    return codes


def finish_record(record, benchmark, protocol, scenario_codes=True):
    """Add ``failed_round`` and ``failure_codes`` to an evaluated row's record.
    ``scenario_codes`` False: the benchmark has no codes of its own (its
    scenario_codes is the default, which gives none; not called)."""
    record["failed_round"] = failed_round(record)
    codes = funnel_failure_codes(record, record.pop("_codes", None) or {})
    if scenario_codes:
        codes.extend(benchmark.scenario_codes(record, protocol))
    record["failure_codes"] = codes
    return record


# ---------------------------------------------------------------------------
# Aggregation: records -> rounds -> metrics
# ---------------------------------------------------------------------------
# Aggregation folds records one at a time into running totals, so a run holds
# no record after its row is done.  Float sums are added in input order (also
# across worker processes: see evaluate_in_workers), so every figure is the
# same bit for bit whatever the number of processes.

def _number(value):
    # A details line writes a non-finite figure as null; folding it back as
    # NaN gives the same (null) aggregate as the original value did.
    return float("nan") if value is None else value


_OVERLAP_SUM_KEYS = ("line_iou", "station_iou", "score", "label_score", "score_deviation_pct")
_ACCURACY_SUM_KEYS = ("distance_mape_pct", "time_mape_pct", "fare_mape_pct", "score",
                      "label_score")
# (what a record says, its count in FunnelTotals.accurate)
_ACCURATE_KEYS = (("distance_accurate", "distance"), ("time_accurate", "time"),
                  ("fare_accurate", "fare"), ("transfer_accurate", "transfer"),
                  ("overall_accurate", "overall"))


class Sums(list):
    """Float sums, each added to in input order (a list of them).

    ``add(values)`` adds each value to its sum.  Its deferred form
    (SumRows, in a worker process) keeps the values instead, and merging
    them adds them in the same order, so every sum is the same bit for bit.
    A record's values are taken in one step in C (operator.itemgetter) and
    added in one (map with operator.add), not one key at a time.
    """

    __slots__ = ()

    def add(self, values):
        self[:] = map(operator.add, self, values)


class SumRows(list):
    """What a deferred Sums was given: the values of each add(), in order."""

    __slots__ = ()
    add = list.append                  # no Python call per row


def _values(getter, record):
    """The numbers ``getter`` takes from a record (see _number)."""
    values = getter(record)
    return values if None not in values else tuple(map(_number, values))


class FunnelTotals(object):
    """Row counts and Rounds 1-4, folded one record at a time."""

    # add() only adds to its numbers (a worker's copy records them: see Aggregate).

    _overlap_values = operator.itemgetter(*_OVERLAP_SUM_KEYS)
    _accuracy_values = operator.itemgetter(*_ACCURACY_SUM_KEYS)

    def __init__(self, count_codes=False):
        self.status = {"evaluated": 0, "error": 0, "no_response": 0}
        self.failed = 0                 # rows with a failure code (row_failed)
        self.codes = {} if count_codes else None   # rows by failure code (a labels run)
        self.entered = 0
        self.reachable = 0
        self.grounded = 0
        self.plausible = 0
        self.station_exact = 0
        self.bands = {"worse": 0, "better": 0, "same": 0}
        self.overlap_sums = Sums([0.0] * 5)   # line IoU, station IoU, score, label, deviation
        self.exact = 0
        self.accurate = {"distance": 0, "time": 0, "fare": 0, "transfer": 0, "overall": 0}
        self.accuracy_sums = Sums([0.0] * 5)  # distance, time, fare MAPE, score, label

    def add(self, record):
        self.status[record["status"]] += 1
        if row_failed(record):
            self.failed += 1
            if self.codes is not None:
                for code in failure_codes(record):
                    self.codes[code] = self.codes.get(code, 0) + 1
        if not record.get("in_funnel"):
            return
        self.entered += 1
        if not record.get("reachable"):
            return
        self.reachable += 1
        self.grounded += bool(record["station_grounding"])
        self.plausible += bool(record["distance_plausibility"])
        self.station_exact += bool(record["station_iou_exact"])
        self.bands[record["score_band"]] += 1
        self.overlap_sums.add(_values(self._overlap_values, record))
        if not record["exact_match"]:
            return
        self.exact += 1
        accurate = self.accurate
        for key, name in _ACCURATE_KEYS:
            accurate[name] += bool(record[key])
        self.accuracy_sums.add(_values(self._accuracy_values, record))

    def counts(self):
        status = self.status
        return {"samples": sum(status.values()), "evaluated": status["evaluated"],
                "errors": status["error"], "no_response": status["no_response"],
                "failed": self.failed}

    def rounds(self):
        reached, exact = self.reachable, self.exact
        means = [total / reached if reached else None for total in self.overlap_sums]
        accuracy_means = [total / exact if exact else None for total in self.accuracy_sums]
        rounds = {
            "reachability": {"input": self.entered, "passed": reached},
            "grounding": {"input": reached, "station_grounding": self.grounded,
                          "distance_plausibility": self.plausible},
            "overlap": {"input": reached, "line_iou_mean": means[0],
                        "station_iou_mean": means[1], "station_iou_exact": self.station_exact,
                        "exact_match": exact, "expert_score_mean": means[2],
                        "label_expert_score_mean": means[3],
                        "score_deviation_pct_mean": means[4],
                        "score_worse": self.bands["worse"],
                        "score_better": self.bands["better"],
                        "score_same": self.bands["same"]},
            "accuracy": {"input": exact, "distance_mape_pct": accuracy_means[0],
                         "time_mape_pct": accuracy_means[1],
                         "fare_mape_pct": accuracy_means[2],
                         "expert_score_mean": accuracy_means[3],
                         "label_expert_score_mean": accuracy_means[4]},
        }
        rounds["accuracy"].update(self.accurate)
        return rounds


def funnel_rounds(records):
    """Rounds 1-4 from per-row records (the fold of FunnelTotals over them)."""
    totals = FunnelTotals()
    for record in records:
        totals.add(record)
    return totals.rounds()


def metrics_block(rounds, diversity=None):
    """The paper's ten metrics from the rounds (same formulas for both protocols)."""
    reach, ground = rounds["reachability"], rounds["grounding"]
    overlap, acc = rounds["overlap"], rounds["accuracy"]
    mapes = [acc["distance_mape_pct"], acc["time_mape_pct"], acc["fare_mape_pct"]]
    metrics = {
        "conn": ratio(reach["passed"], reach["input"]),
        "sg": ratio(ground["station_grounding"], ground["input"]),
        "dp": ratio(ground["distance_plausibility"], ground["input"]),
        "lo": overlap["line_iou_mean"],
        "sso": overlap["station_iou_mean"],
        "rem": ratio(overlap["exact_match"], overlap["input"]),
        "ea": ratio(acc["distance"] + acc["time"] + acc["fare"], 3 * acc["input"]),
        "mape": None if None in mapes else plain_sum(mapes) / 3.0,
    }
    if "preference" in rounds:
        pref = rounds["preference"]
        metrics["pc"] = ratio(pref["compliant"], pref["input"])
    if diversity is not None:
        metrics["rd"] = diversity["rd_mean"]
    return metrics


class _Addends(list):
    """A float sum that a worker process does not add up: it keeps what add()
    adds, in order, and the parent adds the same numbers in the same order
    (Aggregate.merge), so float sums are the same bit for bit.  (Counts are
    added up by the worker: integer sums do not depend on the order.)"""

    __slots__ = ()

    def __iadd__(self, value):
        self.append(value)
        return self


def _defer(value):
    # Every float sum of a totals object (a float: totals start their sums at
    # 0.0 and their counts at 0) becomes an _Addends, every Sums a SumRows,
    # every count 0.
    if type(value) is float:
        return _Addends()
    if type(value) is Sums:
        return SumRows()
    if type(value) is int:
        return 0
    if type(value) is dict:
        return {key: _defer(item) for key, item in value.items()}
    if type(value) is list:
        return [_defer(item) for item in value]
    return value


def _totals_state(value):
    # Picklable: containers as dicts and tuples, what was added as plain lists
    # (a SumRows as it is: a list of tuples).
    if type(value) in (_Addends, SumRows):
        return list(value) if type(value) is _Addends else value
    if type(value) is dict:
        return {key: _totals_state(item) for key, item in value.items()}
    if type(value) is list:
        return tuple(_totals_state(item) for item in value)
    return value


def _merge_totals(current, incoming):
    if type(incoming) is list:                     # what a worker added, in order
        return plain_sum(incoming, current)
    if type(incoming) is SumRows:                  # what a worker's Sums was given
        # Column by column, each in row order: the same additions as add()
        # row by row, in C (zip, functools.reduce) instead of a call per row.
        if incoming:
            current[:] = [plain_sum(column, total)
                          for total, column in zip(current, zip(*incoming))]
        return current
    if type(incoming) is dict:
        for key, value in incoming.items():
            current[key] = _merge_totals(current.get(key, 0), value)
        return current
    if type(incoming) is tuple:
        for index, value in enumerate(incoming):
            current[index] = _merge_totals(current[index], value)
        return current
    if type(incoming) is int:                      # a count the worker started itself
        return current + incoming
    raise TypeError("cannot merge %s into a total" % type(incoming).__name__)


class Aggregate(object):
    """Counts, Rounds 1-4 and the scenario's own sections, folded record by record.

    ``figures()`` gives the report's ``counts``, ``rounds``, scenario sections
    (``diversity``) and ``metrics``.  A worker process folds its chunk of rows
    into a ``deferred`` Aggregate, whose state() the parent merges in input
    order: every number is then added in the same order as by one process.
    """

    def __init__(self, benchmark, protocol, deferred=False, count_codes=False, row_ids=False):
        self.benchmark = benchmark
        self.protocol = protocol
        self.count_codes = count_codes   # rows by failure code, for the labels check
        self.funnel = FunnelTotals(count_codes)
        self.scenario = benchmark.totals(protocol)
        # The rows' ids, for the warning about repeated ids (transitlm.evaluation.row_ids).
        self.row_ids = RowIds() if row_ids else None
        if deferred:
            for totals in (self.funnel, self.scenario):
                if totals is not None:
                    for name, value in vars(totals).items():
                        setattr(totals, name, _defer(value))

    def add(self, record):
        self.funnel.add(record)
        if self.scenario is not None:
            self.scenario.add(record)
        if self.row_ids is not None:
            self.row_ids.add(record["index_id"])

    def deferred(self):
        """A new, empty deferred Aggregate of the same benchmark (for a worker's chunk)."""
        return Aggregate(self.benchmark, self.protocol, deferred=True,
                         count_codes=self.count_codes, row_ids=self.row_ids is not None)

    def state(self):
        """What a deferred Aggregate added, picklable, for merge()."""
        return [{name: _totals_state(value) for name, value in vars(totals).items()
                 if type(value) in (int, _Addends, SumRows, dict, list)}
                if totals is not None else None for totals in (self.funnel, self.scenario)] + [
            self.row_ids.state() if self.row_ids is not None else None]

    def merge(self, state):
        for totals, names in zip((self.funnel, self.scenario), state):
            for name, value in (names or {}).items():
                setattr(totals, name, _merge_totals(getattr(totals, name), value))
        if self.row_ids is not None and state[2] is not None:
            self.row_ids.merge(state[2])

    def figures(self):
        rounds = self.funnel.rounds()
        figures = {"counts": self.funnel.counts(), "rounds": rounds}
        if self.scenario is not None:
            for key, section in self.scenario.sections().items():
                if key == "rounds":
                    rounds.update(section)
                else:
                    figures[key] = section
        figures["metrics"] = metrics_block(rounds, figures.get("diversity"))
        if self.funnel.codes is not None:
            figures["failure_codes"] = dict(sorted(self.funnel.codes.items()))
        return figures


def aggregate_records(benchmark_name, protocol_name, records):
    """Fold records (dicts as in details.jsonl) into the report's figures, with the
    evaluator's own aggregation: {"counts", "rounds", "diversity"?, "metrics"}."""
    if protocol_name not in PROTOCOLS:
        raise InputError("unknown protocol %r" % (protocol_name,))
    aggregate = Aggregate(load_benchmark(benchmark_name), PROTOCOLS[protocol_name])
    for record in records:
        aggregate.add(record)
    return aggregate.figures()
