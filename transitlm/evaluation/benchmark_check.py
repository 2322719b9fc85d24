"""Is a test file this evaluator's benchmark's, or plainly another's?

Each benchmark's rows have a shape of their own, and an evaluator given
another benchmark's file gives calm, wrong figures (benchmark 1's evaluator
on a benchmark-3 file: LO 0.000, REM 0.0 %) or a misleading message (on the
general-LLM file it blames the station file).  So before any row is scored,
the first rows of the file (HEAD_ROWS, read once: transitlm.evaluation.inputs.FileHead)
are looked at, by their content only (never the file's name):

- a label holding ``first``/``second``/``third`` routes is benchmark 3's;
- a label of one route whose stations are stop ids (a stop of the station
  file, or ``bus-`` and digits as in the release) is benchmark 1's or 2's,
  one whose stations are names (Han characters, or else a station_name of
  the station file) is the general LLM's;
- between benchmarks 1 and 2, a ``task_id`` naming one of them decides
  (catalog.benchmark_of_task); else ``req_type``: a preference (a whole
  number other than 0) is benchmark 2's; no req_type column, or none with a
  preference among the first rows, is benchmark 1's (a benchmark-2 file has
  a few rows of req_type 0, which fit either).

``benchmark_verdict`` turns the rows into a Verdict: when fewer than half of
the rows whose label has a shape fit the evaluator's benchmark, the file is
another's (the benchmark most of them fit, or a mix).  A label without a
shape (unreadable, empty) says nothing: its row becomes an error row as
before.  ``enforce`` refuses the run (exit 2, one line naming the evaluator
to use) unless ``--allow_other_benchmark`` (``allow_other_benchmark=True``
in the Python API) is given; the run then carries the reason among its
warnings and in report.json's and run.json's ``benchmark_check``.

Standard library only; Python 3.8+.
"""

import collections
import re

from common import (
    BUS_STOP_PREFIX, ROUTE_KEYS, InputError, RowError, decode_json, route_stations, text_list)
from transitlm.evaluation.catalog import BENCHMARK_NAMES, benchmark_info, benchmark_of_task

FLAG = "allow_other_benchmark"
# The shapes a row's label (and its req_type/task_id) can show, by benchmark.
SINGLE_ROUTE, PERSONALIZED, DIVERSITY, GENERAL = (
    "single_route", "personalized", "diversity", "general_llm")
# A stop id of the release: the prefix and digits.
_RELEASE_STOP_ID = re.compile(r"%s\d+\Z" % re.escape(BUS_STOP_PREFIX))
# A station name of the Chinese release: it holds a Han character.
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NOT_STATIONS = frozenset(("",))
_ORDER = BENCHMARK_NAMES


class Verdict(object):
    """``ok``: the file fits the evaluator (or says nothing); else
    ``looks_like`` (a benchmark name, or None for a mix) and ``reason`` (an
    English phrase: why it looks so)."""

    __slots__ = ("ok", "looks_like", "reason")

    def __init__(self, ok, looks_like=None, reason=""):
        self.ok = ok
        self.looks_like = looks_like
        self.reason = reason

    def as_json(self, allowed):
        return {"looks_like": self.looks_like, "reason": self.reason, "allowed": allowed}


FITS = Verdict(True)


class StationKinds(object):
    """Tells a label's station entries apart: stop ids or station names.

    An entry is a stop id when the station file has a stop of that id, or
    it is the release's ``bus-`` and digits; a name when it holds a Han
    character, or else (asked only for the entries neither rule settles,
    the station file read once for its names) it is a station_name of the
    station file.  ``network``: a common.StationNetwork, or None."""

    def __init__(self, network=None):
        self.network = network
        self._names = None

    def kind(self, entry):
        """"id", "name" or None (cannot tell)."""
        network = self.network
        if (network is not None and entry in network) or _RELEASE_STOP_ID.match(entry):
            return "id"
        if _HAN.search(entry):
            return "name"
        if network is not None and network.has_names():
            if self._names is None:
                self._names = frozenset(name.strip() for name in network.names())
            if entry in self._names:
                return "name"
        return None


def label_shape(cell, kinds):
    """A label cell -> DIVERSITY (first/second/third routes), "ids" or
    "names" (one route of stop ids or of station names), or None (no shape:
    not JSON, not a route, or its stations cannot be told apart)."""
    try:
        label = decode_json(cell, "sft_label")
    except RowError:
        return None
    if not isinstance(label, dict):
        return None
    if "station_sequence" not in label:
        return DIVERSITY if any(isinstance(label.get(key), dict) for key in ROUTE_KEYS) \
            else None
    try:
        entries = {entry.strip() for entry in route_stations(
            text_list(label, "station_sequence"))} - _NOT_STATIONS
    except RowError:
        return None
    counts = collections.Counter(kinds.kind(entry) for entry in entries)
    if counts["id"] > counts["name"]:
        return "ids"
    if counts["name"] > counts["id"]:
        return "names"
    return None


def preference(cell):
    """A req_type cell -> True (a preference: a whole number but 0), False
    (0 or empty) or None (not a whole number: says nothing)."""
    if cell is None:
        return False
    if isinstance(cell, bool):
        return None
    if isinstance(cell, (int, float)):
        if cell != cell:
            return False
        return bool(cell) if float(cell).is_integer() else None
    text = str(cell).strip()
    if not text:
        return False
    try:
        return int(text) != 0
    except ValueError:
        return None


def row_benchmarks(row, shape, has_req_type, any_preference):
    """The benchmarks a row of ``shape`` fits (a frozenset)."""
    if shape == DIVERSITY:
        return frozenset((DIVERSITY,))
    if shape == "names":
        return frozenset((GENERAL,))
    task = benchmark_of_task(row.get("task_id")) if row.get("task_id") else None
    if task in (SINGLE_ROUTE, PERSONALIZED):
        return frozenset((task,))
    if not has_req_type:
        return frozenset((SINGLE_ROUTE,))
    wants = preference(row.get("req_type"))
    if wants:
        return frozenset((PERSONALIZED,))
    if wants is False and not any_preference:
        return frozenset((SINGLE_ROUTE,))
    return frozenset((SINGLE_ROUTE, PERSONALIZED))


def benchmark_verdict(benchmark, header, rows, network=None):
    """The first rows of a test file (dicts of its cells; ``header``: its
    column names) against ``benchmark`` (a name) -> Verdict."""
    kinds = StationKinds(network)
    has_req_type = "req_type" in header
    shaped = [(row, shape) for row, shape in
              ((row, label_shape(row.get("sft_label"), kinds)) for row in rows) if shape]
    if not shaped:
        return FITS
    any_preference = has_req_type and any(
        preference(row.get("req_type")) for row, shape in shaped if shape == "ids")
    fits = collections.Counter()
    other = collections.Counter()
    for row, shape in shaped:
        names = row_benchmarks(row, shape, has_req_type, any_preference)
        if benchmark in names:
            fits[benchmark] += 1
        elif len(names) == 1:
            other[next(iter(names))] += 1
        else:                          # benchmark 1 or 2: the file's preferences say which
            other[PERSONALIZED if any_preference else SINGLE_ROUTE] += 1
    if fits[benchmark] * 2 >= len(shaped):
        return FITS
    # The benchmark most rows fit (ties: the catalogue's order).
    looks_like, count = max(other.items(), key=lambda item: (item[1], -_ORDER.index(item[0])))
    if count * 2 <= len(shaped):
        parts = ["%d %s" % (number, benchmark_info(name).file_kind) for name, number in
                 sorted(other.items(), key=lambda item: (-item[1], _ORDER.index(item[0])))]
        parts.append("%d %s" % (fits[benchmark], benchmark_info(benchmark).file_kind))
        return Verdict(False, None, "of its first %d rows with a label, %s"
                       % (len(shaped), ", ".join(parts)))
    return Verdict(False, looks_like, _reason(looks_like, [row for row, _ in shaped],
                                              has_req_type, len(shaped)))


def likely_benchmark(header, rows, network=None):
    """The benchmark most of a file's first rows fit, by the rule above ->
    (name, why), or (None, "") when no row's label has a shape.  For the tools
    that must choose an evaluator for a file (generate.py, harness.py)."""
    kinds = StationKinds(network)
    has_req_type = "req_type" in header
    shaped = [(row, shape) for row, shape in
              ((row, label_shape(row.get("sft_label"), kinds)) for row in rows) if shape]
    if not shaped:
        return None, ""
    any_preference = has_req_type and any(
        preference(row.get("req_type")) for row, shape in shaped if shape == "ids")
    counts = collections.Counter()
    for row, shape in shaped:
        names = row_benchmarks(row, shape, has_req_type, any_preference)
        if len(names) > 1:             # benchmark 1 or 2: the file's preferences say which
            names = (PERSONALIZED if any_preference else SINGLE_ROUTE,)
        counts[next(iter(names))] += 1
    name = max(counts.items(), key=lambda item: (item[1], -_ORDER.index(item[0])))[0]
    return name, _reason(name, [row for row, _ in shaped], has_req_type, len(shaped))


def _reason(name, rows, has_req_type, count):
    """Why the rows look like benchmark ``name``'s (an English phrase)."""
    if name == DIVERSITY:
        return "its labels hold first/second/third routes"
    if name == GENERAL:
        return "its labels name stations, not stop ids"
    tasks = [row.get("task_id") for row in rows
             if row.get("task_id") and benchmark_of_task(row.get("task_id")) == name]
    if tasks:
        return "its labels hold one route of stop ids and its task_id says %s" % tasks[0]
    if name == PERSONALIZED:
        wanting = sum(1 for row in rows if preference(row.get("req_type")))
        return ("its labels hold one route of stop ids and req_type holds a preference in "
                "%d of its first %d rows" % (wanting, count))
    if not has_req_type:
        return "its labels hold one route of stop ids and it has no req_type column"
    return ("its labels hold one route of stop ids and req_type holds no preference in its "
            "first %d rows" % count)


def refusal(verdict, subject, override, use):
    """The one line that refuses a file: ``subject`` names it ("input file
    X"), ``override`` is the override as its user writes it, ``use(name)``
    how to run benchmark ``name``."""
    if verdict.looks_like is None:
        return ("%s mixes the rows of several benchmarks (%s): check it is the file you meant, "
                "or give %s to score it with this evaluator" % (subject, verdict.reason, override))
    return ("%s looks like a %s file (%s): use %s, or give %s to score it with this evaluator"
            % (subject, benchmark_info(verdict.looks_like).file_kind, verdict.reason,
               use(verdict.looks_like), override))


def enforce(verdict, allowed, subject, override, use):
    """A Verdict -> the warnings it leaves ([] or one line); InputError (one
    line) when it refuses the file and ``allowed`` is false (the arguments
    as refusal's)."""
    if verdict.ok:
        return []
    if not allowed:
        raise InputError(refusal(verdict, subject, override, use))
    if verdict.looks_like is None:
        return ["%s given: %s mixes the rows of several benchmarks (%s)"
                % (override, subject, verdict.reason)]
    return ["%s given: %s looks like a %s file (%s)"
            % (override, subject, benchmark_info(verdict.looks_like).file_kind, verdict.reason)]
