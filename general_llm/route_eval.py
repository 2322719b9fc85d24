"""The route-eval check of the general-LLM benchmark (protocol.md section 11).

The published evaluator sends each general-LLM prediction (line names and the
boarding/alighting station *names*) to a remote route-eval service, which
matches the names against ``line_info.csv`` and judges the route on the
station graph of ``station_info.csv``.  This module reproduces that service's
answer as small pure functions, so the service (``server.py``) and tests can
share them:

- ``LineTable``: line_info.csv, merged and indexed once per city code;
- ``match_station`` and ``LineTable.match_line``: the name matching (its
  rules, ``strip_line_suffix`` and ``bigram_jaccard``, are in ``common``);
- ``normalise_transfer_names``: the client-side reduction of a predicted name
  list to boarding/alighting names (it lives here because the service's
  count rule, names == 2 x lines, depends on it);
- ``evaluate_case`` / ``evaluate_cases``: reachability and station grounding
  of one case / a batch, never raising on a malformed case.

Standard library only; Python 3.8+.
"""

import csv
import json
import math
import os
import re
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from common import (  # noqa: E402  (the path set-up above must come first)
    BUS_STOP_PREFIX, LINE_COLUMNS, MAX_JSON_DEPTH, MIN_STATION_SIMILARITY, TRANSFER, WALK,
    InputError, access_mode, access_threshold_km, bigram_jaccard, bigrams, city_code_of, haversine_km,
    jaccard, json_too_deep, strip_line_suffix, type_name)

# Data of the general-LLM setting (the published route-eval service's rules).
SERVICE_TAXI_MARKERS = ("打车", "网约车")   # the route-eval service does not know 滴滴


ARROW = "\u2192"                  # "→" in "a → b not connected"

NOT_CHECKED = "not checked"
NOT_CHECKED_UNREACHABLE = "not checked: route unreachable"

RESULT_KEYS = ("reachable", "reachable_reason", "reachable_code", "station_grounding",
               "station_grounding_reason", "station_grounding_codes", "match_details")

# Structural codes of a result, so callers need not classify reason text.
# ``reachable_code`` is None when reachable, else one of these:
REACHABLE_CODES = (
    "no_lines",          # no line predicted
    "no_stations",       # no station name predicted
    "count_mismatch",    # names != 2 x lines
    "empty_line_name",   # a line entry is empty
    "unknown_line",      # a line name matches no line
    "unknown_station",   # a station name matches no station of its line
    "same_stop",         # boarding and alighting are the same stop
    "unknown_hop",       # the previous alighting stop has no next-hop information
    "broken_hop",        # the next boarding stop is not a next hop of the previous alighting
    "case_error",        # the case could not be judged (``error_result``)
)
# ``station_grounding_codes`` lists the failed ends ([] when grounded or not checked).
GROUNDING_CODES = ("origin_too_far", "destination_too_far")

# A lone UTF-16 surrogate (JSON "\ud800") is not a character: it cannot be
# encoded as UTF-8, so a name holding one is refused with its case.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class CaseError(Exception):
    """A case the check cannot judge; it becomes a per-case error result."""


# ---------------------------------------------------------------------------
# line_info.csv
# ---------------------------------------------------------------------------

class Station(object):
    """One station of a line as line_info.csv lists it.

    Only the name and stop id are kept: the check takes coordinates from
    station_info.csv, and a large line file lists hundreds of thousands of
    stations.
    """

    __slots__ = ("name", "stop_id")

    def __init__(self, name, stop_id):
        self.name = name
        self.stop_id = stop_id

    def __repr__(self):
        return "Station(%r, %r)" % (self.name, self.stop_id)


class Line(object):
    """A line of line_info.csv with its stations (duplicate rows merged).

    ``index`` is the file position of the line's first row: ties between
    lines are broken by it.  ``calls``: the stop ids of its rows in their
    order, a stop repeated as listed (a loop line ends where it starts);
    ``stations`` holds each stop once.
    """

    __slots__ = ("citycode", "name", "stripped", "stations", "calls", "index",
                 "_stop_ids", "_by_name")

    def __init__(self, citycode, name, index):
        self.citycode = citycode
        self.name = name
        self.stripped = strip_line_suffix(name)
        self.stations = []
        self.calls = []
        self.index = index
        self._stop_ids = set()
        self._by_name = None

    def __repr__(self):
        return "Line(%r, %r, %d stations)" % (self.citycode, self.name, len(self.stations))

    def add_stations(self, stations):
        """Append the stations whose stop_id this line does not have yet
        (and every one to its calls)."""
        for station in stations:
            self.calls.append(station.stop_id)
            if station.stop_id not in self._stop_ids:
                self._stop_ids.add(station.stop_id)
                self.stations.append(station)
        self._by_name = None

    def station_named(self, name):
        """The first station with exactly this name, or None.

        The name index is built on first use.  Concurrent first uses may both
        build it; the result is the same, and the dict is complete before it
        is published, so readers never see a partial index.
        """
        index = self._by_name
        if index is None:
            index = {}
            for station in self.stations:
                index.setdefault(station.name, station)
            self._by_name = index
        return index.get(name)


class _CityLines(object):
    """The lines of one city (or of all cities) with the exact-match lookup.

    ``by_key`` maps a name to the first line, in file order, whose name *or*
    suffix-stripped name equals it: exactly the line the sequential rule
    "first line whose name or stripped form equals the query" picks.
    ``text``: every name and stripped name, one a line: a query found in no
    line's name is not in it (one search in C instead of a scan of the
    lines; a query holding a line break may be found across two names, and
    is then looked for line by line).
    """

    __slots__ = ("lines", "by_key", "text")

    def __init__(self, lines):
        self.lines = lines
        self.by_key = {}
        for line in lines:
            self.by_key.setdefault(line.name, line)
            self.by_key.setdefault(line.stripped, line)
        self.text = "\n".join(name for line in lines for name in (line.name, line.stripped))


class LineTable(object):
    """line_info.csv: lines per city code, ready for ``match_line``."""

    def __init__(self, lines, path="<memory>"):
        self.path = path
        self.lines = list(lines)
        self._all = _CityLines(self.lines)
        grouped = {}
        for line in self.lines:
            grouped.setdefault(line.citycode, []).append(line)
        self._cities = {code: _CityLines(group) for code, group in grouped.items()}
        self._empty = _CityLines([])

    def __len__(self):
        return len(self.lines)

    # -- building -----------------------------------------------------------
    @classmethod
    def from_rows(cls, rows, path="<memory>"):
        """Build from (citycode, line_name, [Station or station dict]) rows.

        Rows with the same (citycode, line_name) merge into the first one.
        """
        merged = {}
        order = []
        for citycode, name, stations in rows:
            key = (citycode, name)
            line = merged.get(key)
            if line is None:
                line = merged[key] = Line(citycode, name, len(order))
                order.append(line)
            line.add_stations(s if isinstance(s, Station) else _station_from_dict(s, path, 0)
                              for s in stations)
        return cls(order, path)

    @classmethod
    def load(cls, path):
        """Read line_info.csv; file-level problems raise ``InputError``."""
        return cls.from_rows(_read_line_rows(path), path)

    # -- lookups --------------------------------------------------------------
    def lines_of(self, city_code):
        """Lines searched for a city code, in file order (None -> all lines)."""
        return self._city(city_code).lines

    def _city(self, city_code):
        if city_code is None:
            return self._all
        return self._cities.get(city_code, self._empty)

    def match_line(self, query, city_code):
        """The line a line-name query designates in a city, or None.

        1. the query (whitespace-stripped) equals a line's name or its
           suffix-stripped name -> the first such line in file order;
        2. else the lines whose name or stripped name contains the query ->
           the one with the shortest stripped name, file order on ties.
        An empty query designates no line.
        """
        query = query.strip()
        if not query:
            return None
        city = self._city(city_code)
        line = city.by_key.get(query)
        if line is not None:
            return line
        if query not in city.text:          # in no line's name
            return None
        best = None
        for line in city.lines:
            if query in line.name or query in line.stripped:
                # Strictly shorter only: the earlier line wins a tie.
                if best is None or len(line.stripped) < len(best.stripped):
                    best = line
        return best


def match_station(query, line):
    """The station of ``line`` a station-name query designates, or None.

    Exact name (whitespace-stripped query) -> the first such station; else
    the station with the highest bigram Jaccard (first on ties) if it is at
    least ``MIN_STATION_SIMILARITY``.
    """
    query = query.strip()
    station = line.station_named(query)
    if station is not None:
        return station
    best, best_score = None, -1.0
    # The query's bigrams are built once, not once per candidate: a long
    # query must not cost its length times the line's station count.
    query_grams = bigrams(query) if len(query) >= 2 else None
    for candidate in line.stations:
        if query_grams is None or len(candidate.name) < 2:
            score = bigram_jaccard(query, candidate.name)
        else:
            score = jaccard(query_grams, bigrams(candidate.name))
        if score > best_score:
            best, best_score = candidate, score
    if best is not None and best_score >= MIN_STATION_SIMILARITY:
        return best
    return None


def _read_line_rows(path):
    """Yield (citycode, line_name, [Station]) for each row of line_info.csv."""
    try:
        handle = open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError("cannot read line file %s: %s" % (path, exc.strerror or exc))
    rows = []
    with handle:
        try:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError("line file %s is empty" % path)
            header = [cell.strip() for cell in header]
            missing = [col for col in LINE_COLUMNS if col not in header]
            if missing:
                raise InputError("line file %s lacks column(s) %s (has: %s)"
                                 % (path, ", ".join(missing), ", ".join(header)))
            i_city, i_name, i_list = (header.index(col) for col in LINE_COLUMNS)
            width = max(i_city, i_name, i_list) + 1
            for cells in reader:
                if not cells:
                    continue
                line_no = reader.line_num
                if len(cells) < width:
                    raise InputError("line file %s line %d has %d column(s), expected %d"
                                     % (path, line_no, len(cells), len(header)))
                stations = _parse_station_list(cells[i_list], path, line_no)
                rows.append((cells[i_city].strip(), cells[i_name], stations))
        except UnicodeDecodeError:
            raise InputError("line file %s is not UTF-8 text" % path)
        except csv.Error as exc:
            raise InputError("line file %s is not valid CSV: %s" % (path, exc))
    return rows


def _parse_station_list(cell, path, line_no):
    """The station_list JSON cell -> [Station]; an empty cell is no station."""
    if not cell.strip():
        return []
    # The json module recurses per nesting level: refuse deep cells first.
    if json_too_deep(cell, MAX_JSON_DEPTH):
        raise InputError("line file %s line %d: station_list is nested more than %d levels "
                         "deep" % (path, line_no, MAX_JSON_DEPTH))
    try:
        decoded = json.loads(cell)
    except (ValueError, RecursionError) as exc:
        raise InputError("line file %s line %d: station_list is not valid JSON (%s)"
                         % (path, line_no, getattr(exc, "msg", exc)))
    if not isinstance(decoded, list):
        raise InputError("line file %s line %d: station_list is not a JSON array"
                         % (path, line_no))
    return [_station_from_dict(entry, path, line_no) for entry in decoded]


def _station_from_dict(entry, path, line_no):
    if not isinstance(entry, dict):
        raise InputError("line file %s line %d: a station_list entry is not a JSON object"
                         % (path, line_no))
    stop_id = entry.get("stop_id")
    if stop_id is None or isinstance(stop_id, (list, dict)):
        raise InputError("line file %s line %d: a station_list entry has no stop_id"
                         % (path, line_no))
    name = entry.get("station_name")
    if isinstance(name, (list, dict)):
        raise InputError("line file %s line %d: a station_name is not text" % (path, line_no))
    return Station("" if name is None else str(name), str(stop_id))


# ---------------------------------------------------------------------------
# Transfer-station normalisation (what the client sends)
# ---------------------------------------------------------------------------

def _is_empty(entry):
    """None and whitespace-only text are empty entries."""
    return entry is None or (isinstance(entry, str) and not entry.strip())


def _is_transfer(entry):
    return isinstance(entry, str) and entry.strip() == TRANSFER


def normalise_transfer_names(names, n_lines, trim_single_leg=False):
    """Reduce a predicted station-name list to boarding/alighting names.

    Empty entries are dropped.  ``n_lines <= 0``: only 【换乘】 is dropped.
    With 【换乘】 in the list: each segment between markers keeps its first
    name and, if it has more than one, its last.  Without it the list is kept
    as is (reference quirk), unless ``trim_single_leg`` (paper protocol) and
    the route has one line: then only its first and last names remain.
    """
    kept = [entry for entry in names if not _is_empty(entry)]
    if n_lines <= 0:
        return [entry for entry in kept if not _is_transfer(entry)]
    if any(_is_transfer(entry) for entry in kept):
        out = []
        for segment in _split_at_transfers(kept):
            if segment:
                out.append(segment[0])
                if len(segment) > 1:
                    out.append(segment[-1])
        return out
    if trim_single_leg and n_lines == 1 and len(kept) > 2:
        return [kept[0], kept[-1]]
    return kept


def _split_at_transfers(entries):
    segments = [[]]
    for entry in entries:
        if _is_transfer(entry):
            segments.append([])
        else:
            segments[-1].append(entry)
    return segments


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------

class _Case(object):
    """A validated case: the fields the check reads, with their types checked."""

    __slots__ = ("city_code", "origin", "destination", "lines", "names",
                 "start_mode", "end_mode")


def _parse_case(case):
    """Validate a case object -> ``_Case``; raise ``CaseError`` naming the problem."""
    if not isinstance(case, dict):
        raise CaseError("case is %s, expected a JSON object" % type_name(case))
    for key in ("city", "start", "end", "pred"):
        if key not in case:
            raise CaseError("case has no \"%s\"" % key)
    pred = case["pred"]
    if not isinstance(pred, dict):
        raise CaseError("pred is %s, expected a JSON object" % type_name(pred))
    for key in ("line_sequence", "station_name"):
        if key not in pred:
            raise CaseError("pred has no \"%s\"" % key)
    parsed = _Case()
    parsed.city_code = city_code_of(_text(case["city"], "city"))
    parsed.origin = _point(case["start"], "start")
    parsed.destination = _point(case["end"], "end")
    parsed.lines = _text_list(pred["line_sequence"], "pred line_sequence")
    parsed.names = _text_list(pred["station_name"], "pred station_name")
    # A missing transfer mode reads like an empty one: walking.
    parsed.start_mode = access_mode(_text(pred.get("start_transfer_mode"),
                                          "pred start_transfer_mode"))
    parsed.end_mode = access_mode(_text(pred.get("end_transfer_mode"), "pred end_transfer_mode"))
    return parsed


def _text(value, field):
    """Text field; JSON null reads as the empty string."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CaseError("%s is %s, expected text" % (field, type_name(value)))
    if _SURROGATE_RE.search(value):
        raise CaseError("%s holds a lone surrogate (\\ud800-\\udfff), not Unicode text"
                        % field)
    return value


def _text_list(value, field):
    """List of text; null (the list or an entry) reads as empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise CaseError("%s is %s, expected a list of text" % (field, type_name(value)))
    out = []
    for position, entry in enumerate(value, start=1):
        if entry is not None and not isinstance(entry, str):
            raise CaseError("%s entry %d is %s, expected text"
                            % (field, position, type_name(entry)))
        out.append(_text(entry, "%s entry %d" % (field, position)))
    return out


def _point(value, field):
    """[lng, lat] -> (lng, lat) floats on the globe; anything else is a CaseError."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise CaseError("%s is %s, expected [lng, lat]" % (field, _describe_point(value)))
    coords = []
    for number in value:
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise CaseError("%s is not two finite numbers [lng, lat]" % field)
        try:
            number = float(number)      # an int too large for a float: OverflowError
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise CaseError("%s is not two finite numbers [lng, lat]" % field)
        coords.append(number)
    lng, lat = coords
    if not -180.0 <= lng <= 180.0:
        raise CaseError("%s longitude %g is outside -180..180" % (field, lng))
    if not -90.0 <= lat <= 90.0:
        raise CaseError("%s latitude %g is outside -90..90" % (field, lat))
    return lng, lat


def _describe_point(value):
    if isinstance(value, list):
        return "a list of %d item(s)" % len(value)
    return type_name(value)


def _leg_detail(line_query, line, boarding_query, boarding, alighting_query, alighting):
    return {
        "line_query": line_query,
        "line_name": line.name if line else None,
        "boarding_query": boarding_query,
        "boarding_name": boarding.name if boarding else None,
        "boarding_stop_id": boarding.stop_id if boarding else None,
        "alighting_query": alighting_query,
        "alighting_name": alighting.name if alighting else None,
        "alighting_stop_id": alighting.stop_id if alighting else None,
    }


def _with_prefix_fallback(lookup, stop):
    """``lookup(stop)``, else ``lookup("bus-" + stop)`` (ids with and without prefix)."""
    value = lookup(stop)
    if value is None:
        value = lookup(BUS_STOP_PREFIX + stop)
    return value


def _connection_problem(here, there, stations):
    """None when stop ``there`` is a next hop of stop ``here``, else (code, reason)."""
    hops = _with_prefix_fallback(stations.next_hops, here)
    if hops is None:
        return "unknown_hop", "%s has no next-hop information" % here
    if there in hops or (BUS_STOP_PREFIX + there) in hops:
        return None
    return "broken_hop", "%s %s %s not connected" % (here, ARROW, there)


def _check_reachability(case, lines, stations, details):
    """Round 1 of the service -> (ok, code, reason); appends one detail per leg tried.

    ``code`` is None when reachable, else one of ``REACHABLE_CODES``.
    """
    if not case.lines:
        return False, "no_lines", "no lines predicted"
    if not case.names:
        return False, "no_stations", "no station names predicted"
    if len(case.names) != 2 * len(case.lines):
        return False, "count_mismatch", (
            "count mismatch: %d station name(s) for %d line(s), expected %d"
            % (len(case.names), len(case.lines), 2 * len(case.lines)))
    previous_alighting = None
    for leg, line_query in enumerate(case.lines):
        boarding_query = case.names[2 * leg]
        alighting_query = case.names[2 * leg + 1]
        problem, found = _match_leg(line_query, boarding_query, alighting_query,
                                    case.city_code, lines)
        details.append(_leg_detail(line_query, found[0], boarding_query, found[1],
                                   alighting_query, found[2]))
        if problem:
            return (False,) + problem
        line, boarding, alighting = found
        if boarding.stop_id == alighting.stop_id:
            return False, "same_stop", ("boarding and alighting are the same stop %s on %s"
                                        % (boarding.stop_id, line.name))
        if previous_alighting is not None:
            problem = _connection_problem(previous_alighting.stop_id, boarding.stop_id,
                                          stations)
            if problem:
                return (False,) + problem
        previous_alighting = alighting
    return True, None, "%d leg(s) matched and connected" % len(case.lines)


def _match_leg(line_query, boarding_query, alighting_query, city_code, lines):
    """Match one leg -> ((code, reason) or None, (line, boarding, alighting))."""
    if not line_query.strip():
        return ("empty_line_name", "line name is empty"), (None, None, None)
    line = lines.match_line(line_query, city_code)
    if line is None:
        return (("unknown_line", "line \"%s\" not found in %s"
                 % (line_query, "city %s" % city_code if city_code else "any city")),
                (None, None, None))
    boarding = match_station(boarding_query, line)
    if boarding is None:
        return (("unknown_station", "station \"%s\" not found on line %s"
                 % (boarding_query, line.name)),
                (line, None, None))
    alighting = match_station(alighting_query, line)
    if alighting is None:
        return (("unknown_station", "station \"%s\" not found on line %s"
                 % (alighting_query, line.name)),
                (line, boarding, None))
    return None, (line, boarding, alighting)


def _check_side(side, point, stop, mode, stations):
    """SG for one end -> (ok, reason); a stop without coordinates passes."""
    word = "first" if side == "origin" else "last"
    stop_point = _with_prefix_fallback(stations.coords, stop)
    if stop_point is None:
        return True, "%s station %s has no coordinates (not checked)" % (word, stop)
    distance = haversine_km(point[0], point[1], stop_point[0], stop_point[1])
    limit = access_threshold_km(mode, SERVICE_TAXI_MARKERS)
    if distance > limit:
        return False, ("%s station %s is %.2f km from the %s (limit %g km for %s)"
                       % (word, stop, distance, side, limit, mode or WALK))
    return True, ("%s station %s is %.2f km from the %s (within %g km for %s)"
                  % (word, stop, distance, side, limit, mode or WALK))


def _check_grounding(case, details, stations):
    """SG of the service: first boarding and last alighting stop -> (ok, codes, reason).

    ``codes`` lists the failed ends: "origin_too_far", "destination_too_far".
    """
    first = details[0]["boarding_stop_id"]
    last = details[-1]["alighting_stop_id"]
    start = _check_side("origin", case.origin, first, case.start_mode, stations)
    end = _check_side("destination", case.destination, last, case.end_mode, stations)
    codes = [code for (ok, _), code in ((start, "origin_too_far"),
                                        (end, "destination_too_far")) if not ok]
    failures = [reason for ok, reason in (start, end) if not ok]
    if failures:
        return False, codes, "; ".join(failures)
    return True, codes, "%s; %s" % (start[1], end[1])


def evaluate_case(case, lines, stations):
    """Judge one case like the route-eval service.

    ``case`` = {"city", "start": [lng, lat], "end": [lng, lat], "pred":
    {"line_sequence", "station_name", "start_transfer_mode",
    "end_transfer_mode"}} with ``station_name`` already normalised.  Returns
    {"reachable", "reachable_reason", "reachable_code", "station_grounding",
    "station_grounding_reason", "station_grounding_codes", "match_details"}
    (the codes: see ``REACHABLE_CODES`` and ``GROUNDING_CODES``).  Raises
    ``CaseError`` for a case it cannot judge (``evaluate_cases`` turns it
    into a result).
    """
    parsed = _parse_case(case)
    details = []
    reachable, code, reason = _check_reachability(parsed, lines, stations, details)
    if reachable:
        grounded, grounding_codes, grounding_reason = _check_grounding(parsed, details,
                                                                       stations)
    else:
        grounded, grounding_codes, grounding_reason = False, [], NOT_CHECKED_UNREACHABLE
    return {
        "reachable": reachable,
        "reachable_reason": reason,
        "reachable_code": code,
        "station_grounding": grounded,
        "station_grounding_reason": grounding_reason,
        "station_grounding_codes": grounding_codes,
        "match_details": details,
    }


def error_result(reason):
    """The result of a case that could not be judged."""
    return {
        "error": reason,
        "reachable": False,
        "reachable_reason": reason,
        "reachable_code": "case_error",
        "station_grounding": False,
        "station_grounding_reason": NOT_CHECKED,
        "station_grounding_codes": [],
        "match_details": [],
    }


# names_on_lines looks at no more than this (a station name is short; a
# model may send thousands of names, or one of a megabyte).
MAX_MAP_NAMES = 100
MAX_MAP_NAME_CHARS = 100


def names_on_lines(case, lines):
    """Where each predicted station name lies on the predicted lines, for the
    map of a route the check could not follow (the page draws them): a list
    of {"query", "line_name", "name", "stop_id"} in the order of the names,
    for each name that ``match_station`` finds on one of the predicted lines
    (the first line, in the predicted order, that holds it); names found on
    none are left out.  The first MAX_MAP_NAMES names are looked at, none
    longer than MAX_MAP_NAME_CHARS; a case that cannot be read gives []."""
    try:
        parsed = _parse_case(case)
    except CaseError:
        return []
    found = []
    for query in parsed.lines[:MAX_MAP_NAMES]:
        line = lines.match_line(query, parsed.city_code) if query.strip() else None
        if line is not None and line not in found:
            found.append(line)
    out = []
    for query in parsed.names[:MAX_MAP_NAMES]:
        if not query.strip() or len(query) > MAX_MAP_NAME_CHARS:
            continue
        for line in found:
            station = match_station(query, line)
            if station is not None:
                out.append({"query": query, "line_name": line.name, "name": station.name,
                            "stop_id": station.stop_id})
                break
    return out


def evaluate_cases(cases, lines, stations):
    """Judge every case, in order; a case that cannot be judged gets ``error_result``.

    A malformed cell of station_info.csv (decoded lazily) only affects the
    cases that touch that stop, so it is reported per case too.  Nothing a
    case holds raises out of here: an unexpected failure (a bug) becomes that
    case's error result too, naming the exception, so one case cannot sink
    the batch of a service.
    """
    results = []
    for case in cases:
        try:
            results.append(evaluate_case(case, lines, stations))
        except (CaseError, InputError) as exc:
            results.append(error_result(str(exc)))
        except Exception as exc:  # noqa: BLE001 - see the docstring
            results.append(error_result("case could not be judged (internal error: %s: %s)"
                                        % (type(exc).__name__, exc)))
    return results
