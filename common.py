"""Shared core of the TransitLM route evaluators.

Layers, each usable on its own (as in sacreBLEU: statistics, aggregation and
formatting are separate steps):

1. constants and the two protocols (``REFERENCE`` and ``PAPER``): every rule
   on which the TransitLM paper and the published evaluator differ is a field
   of ``Protocol``, so the differences can be read in one place;
2. value parsing (distance, time, fare) and geometry;
3. input files: the station network, the sample CSV, predictions;
4. checks: small pure functions returning a ``Verdict`` (ok + English reason);
5. the per-row record of one route against its label;
6. the funnel engine: records -> rounds -> ``metrics``;
7. reports: text for people, JSON for machines, JSON Lines details per row;
8. the command-line driver every evaluator uses.

Standard library only; Python 3.8+.
"""

import argparse
import collections
import csv
import functools
import gc
import hashlib
import io
import itertools
import json
import marshal
import math
import operator
import os
import re
import stat
import sys
import tempfile
import time
from itertools import repeat
from operator import itemgetter

# ---------------------------------------------------------------------------
# 1. Constants (Chinese literals are data: they are what the dataset writes)
# ---------------------------------------------------------------------------

TRANSFER = "【换乘】"            # separates the legs of a route in station_sequence
WALK = "步行"
CYCLE = "骑行"
TAXI_MARKERS = ("打车", "网约车", "滴滴")
SUBWAY_MARKERS = ("地铁", "号线")
METRE = "米"
KILOMETRE = "公里"
KILOMETRE_LATIN = "km"
HOUR = "小时"
MINUTE = "分钟"
ACCESS_PREFIX = "接驳:"          # access mode entry in a route's full line set


EARTH_RADIUS_KM = 6371.0
WALK_LIMIT_KM = 3.0
CYCLE_LIMIT_KM = 5.0
TAXI_LIMIT_KM = 10.0
DP_RATIO = 3.0                   # predicted access distance may be at most 3x straight line

DISTANCE_TOLERANCE_KM = 0.5
TIME_TOLERANCE_MIN = 5.0
FARE_TOLERANCE_CNY = 1.0
TRANSFER_DISTANCE_TOLERANCE_KM = 0.5
RELATIVE_TOLERANCE_PCT = 10.0
SCORE_SAME_BAND_PCT = 0.1        # |deviation| <= 0.1 % counts as the same score
PREFERENCE_TIME_FACTOR = 1.1

ROUTE_KEYS = ("first", "second", "third")

# The project's version (semantic versioning): it goes into every report and
# signature, so figures can be traced to the code that computed them.
VERSION = "1.1.0"
SCHEMA_VERSION = 2               # report.json / details.jsonl layout (README changelog)

EXIT_OK = 0
EXIT_WORKER = 1                  # a worker process died (killed by a signal)
EXIT_USAGE = 2                   # usage or input-file problem
EXIT_SERVICE = 3                 # route-eval service unreachable (general LLM)


class Protocol(object):
    """The rule set a run follows.

    ``reference`` reproduces the published evaluator bit for bit, quirks
    included; ``paper`` follows the TransitLM paper's definitions.  Each
    attribute below is one difference (see ../shared/spec/paper-protocol.md);
    nothing else in the code asks which protocol is in use.
    """

    __slots__ = (
        "name",
        "full_time_parsing",        # "1小时7分钟" -> 67 (paper) instead of 60
        "min_connected_stations",   # a route needs this many stations to be connected
        "dp_slack_km",              # d - slack <= td <= 3d + slack
        "line_set_with_access",     # LO on line names + 接驳:<mode> (paper) or raw names
        "exact_match_needs_lines",  # REM = LO 1 and SSO 1 (paper) or SSO 1 and modes
        "best_match",               # benchmark 3 searches second/third for the label's first
        "transfers_from_legs",      # req 2 counts transit legs (paper) or raw list length
        "bus_first",                # req 5 means "some bus leg" (paper) or "no subway"
        "trim_single_leg_names",    # general LLM: a one-line name list -> first and last
        "general_dp_checked",       # general LLM: DP checked (paper) or always passes
        "funnel_over_all_rows",     # Round 1 input = all rows (paper) or rows evaluated
        "preference_over_known",    # PC input = known req types incl. errors (paper)
        "rd_over_all_rows",         # RD averaged over all rows (paper) or rows with >= 2
    )

    def __init__(self, **rules):
        for key in self.__slots__:
            setattr(self, key, rules[key])

    def __repr__(self):
        return "Protocol(%s)" % self.name


REFERENCE = Protocol(
    name="reference", full_time_parsing=False, min_connected_stations=0,
    dp_slack_km=0.5, line_set_with_access=False, exact_match_needs_lines=False,
    best_match=True, transfers_from_legs=False, bus_first=False,
    trim_single_leg_names=False, general_dp_checked=False,
    funnel_over_all_rows=False, preference_over_known=False, rd_over_all_rows=False)

PAPER = Protocol(
    name="paper", full_time_parsing=True, min_connected_stations=2,
    dp_slack_km=0.0, line_set_with_access=True, exact_match_needs_lines=True,
    best_match=False, transfers_from_legs=True, bus_first=True,
    trim_single_leg_names=True, general_dp_checked=True,
    funnel_over_all_rows=True, preference_over_known=True, rd_over_all_rows=True)

PROTOCOLS = {"reference": REFERENCE, "paper": PAPER}


class InputError(Exception):
    """A file-level problem: the run cannot start (exit status 2)."""


class RowError(Exception):
    """A row that cannot be evaluated; it becomes an error row with this reason.

    ``code`` is the reason part of its failure code ``error.<code>``.  One kept
    beyond its ``except`` block is kept ``detached()``: a raised exception's
    traceback (and its context's) refers to the frames that hold it, and with
    the cyclic collector paused such a cycle (holding a whole batch of rows)
    would never be freed.
    """

    def __init__(self, message, code="invalid_prediction"):
        Exception.__init__(self, message)
        self.code = code

    def detached(self):
        """The same error without traceback or context (safe to keep)."""
        return RowError(str(self), self.code)


class ServiceError(Exception):
    """The route-eval service stayed unreachable: the run stops (exit status 3)."""


class WorkerFailed(Exception):
    """A worker process of --workers died (killed by a signal, the out-of-memory
    killer): the run stops (exit status 1)."""


# ---------------------------------------------------------------------------
# 2. Value parsing and geometry
# ---------------------------------------------------------------------------

_NUMBER = r"\d+\.?\d*"
_NUMBER_RE = re.compile(_NUMBER)
_METRES_RE = re.compile("(" + _NUMBER + r")\s*" + METRE)
_KILOMETRES_RE = re.compile("(" + _NUMBER + r")\s*(?:" + KILOMETRE + "|" + KILOMETRE_LATIN + ")",
                            re.IGNORECASE)
# protocol.md §2: a number *directly* precedes 小时 (for 米 it allows spaces).
_HOURS_RE = re.compile("(" + _NUMBER + ")" + HOUR)
_MINUTES_RE = re.compile("(" + _NUMBER + r")\s*" + MINUTE)


def _scalar_text(value, field):
    """Return (number or None, text) for a JSON scalar; reject lists/objects.

    ``None`` and the empty string mean "missing"; a JSON number is used as is.
    Python ``float()`` is tried first on text, as the published code does.
    """
    if type(value) is str:             # the common case first: this runs per field
        if not value:
            return 0.0, ""
        if value[-1] in _UNIT_ENDINGS:   # "7.5公里": float() cannot succeed, skip it
            return None, value
        try:
            return float(value), ""
        except ValueError:
            return None, value
    if value is None:
        return 0.0, ""
    if isinstance(value, (int, float)):
        try:
            return float(value), ""
        except OverflowError:          # a JSON integer of hundreds of digits
            raise RowError("%s is a number too large to use" % field)
    if isinstance(value, (list, dict)):
        raise RowError("%s is a %s, expected text or a number"
                       % (field, "list" if isinstance(value, list) else "JSON object"))
    if isinstance(value, str):         # a str subclass
        return _scalar_text(str(value), field)
    raise RowError("%s has an unsupported type" % field)


# Characters a dataset value may end with that float() never accepts.
_UNIT_ENDINGS = frozenset(METRE + KILOMETRE + HOUR + MINUTE + "元")


def _first_number(text):
    match = _NUMBER_RE.search(text)
    return float(match.group()) if match else 0.0


def _memoized_text(parse_text):
    """Wrap a parser of unit text so each distinct text is parsed once.

    A dataset uses few distinct value texts ("1.4公里", "37分钟", ...), so a
    dictionary of them is small and saves the regular expressions per row.
    """
    cache = {}

    def parse(value, field):
        if type(value) is str:
            number = cache.get(value)
            if number is None:
                number, text = _scalar_text(value, field)
                if number is None:
                    number = parse_text(text)
                cache[value] = number
            return number
        number, text = _scalar_text(value, field)
        return number if number is not None else parse_text(text)

    parse.cache = cache
    return parse


def _distance_text_km(text):
    if METRE in text:
        match = _METRES_RE.search(text)
        if match:
            return float(match.group(1)) / 1000.0
    if KILOMETRE in text or KILOMETRE_LATIN in text.lower():
        match = _KILOMETRES_RE.search(text)
        if match:
            return float(match.group(1))
    return _first_number(text)


def _time_text_minutes(text):
    """reference: "1小时7分钟" -> 60, the minutes after the hours are ignored (quirk)."""
    hours = _HOURS_RE.search(text) if HOUR in text else None
    if hours:
        return float(hours.group(1)) * 60.0
    minutes = _MINUTES_RE.search(text) if MINUTE in text else None
    if minutes:
        return float(minutes.group(1))
    return _first_number(text)


def _full_time_text_minutes(text):
    """paper: hours x 60 + minutes, "1小时7分钟" -> 67."""
    hours = _HOURS_RE.search(text) if HOUR in text else None
    minutes = _MINUTES_RE.search(text) if MINUTE in text else None
    if hours or minutes:
        return ((float(hours.group(1)) * 60.0 if hours else 0.0)
                + (float(minutes.group(1)) if minutes else 0.0))
    return _first_number(text)


_parse_distance = _memoized_text(_distance_text_km)
_parse_time = _memoized_text(_time_text_minutes)
_parse_full_time = _memoized_text(_full_time_text_minutes)
_parse_fare = _memoized_text(_first_number)


def parse_distance_km(value, field="distance"):
    """Distance in km: "344米" -> 0.344, "约8.1公里" -> 8.1, "1公里200米" -> 0.2 (quirk)."""
    return _parse_distance(value, field)


def parse_time_minutes(value, full=False, field="time"):
    """Time in minutes.

    reference (``full=False``): "1小时7分钟" -> 60, the minutes after the hours
    are ignored (quirk).  paper (``full=True``): hours x 60 + minutes -> 67.
    """
    return (_parse_full_time if full else _parse_time)(value, field)


def parse_fare_cny(value, field="fare"):
    """Fare in CNY: "3元" -> 3.0."""
    return _parse_fare(value, field)


def parse_lnglat(text, field):
    """A prompt's "lng,lat" string -> (lng, lat); empty -> (0.0, 0.0)."""
    if text is None or text == "":
        return (0.0, 0.0)
    if isinstance(text, (list, tuple)) and len(text) == 2:
        parts = list(text)
    elif isinstance(text, str):
        parts = text.split(",")
    else:
        raise RowError("prompt %s is not a \"lng,lat\" string" % field, "invalid_prompt")
    if len(parts) != 2:
        raise RowError("prompt %s %r is not a \"lng,lat\" pair" % (field, text),
                       "invalid_prompt")
    try:
        point = (float(parts[0]), float(parts[1]))
    except (TypeError, ValueError, OverflowError):
        raise RowError("prompt %s %r is not a \"lng,lat\" pair of numbers" % (field, text),
                       "invalid_prompt")
    if not valid_point(point):
        raise RowError("prompt %s %r is not a longitude within +-180 and a latitude within "
                       "+-90" % (field, text), "invalid_prompt")
    return point


def valid_point(point):
    """Finite longitude within +-180 and latitude within +-90 (NaN fails too)."""
    return -180.0 <= point[0] <= 180.0 and -90.0 <= point[1] <= 90.0


def haversine_km(lng1, lat1, lng2, lat2):
    """Great-circle distance in km (earth radius 6371 km), as the published code."""
    phi1 = math.radians(lat1)
    phi2 = math.radians(lat2)
    dphi = math.radians(lat2 - lat1)
    dlmb = math.radians(lng2 - lng1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def access_threshold_km(mode, taxi_markers=TAXI_MARKERS):
    """Largest plausible straight-line access distance for an access mode."""
    mode = mode or ""
    if mode == "" or WALK in mode:
        return WALK_LIMIT_KM
    if CYCLE in mode:
        return CYCLE_LIMIT_KM
    if any(marker in mode for marker in taxi_markers):
        return TAXI_LIMIT_KM
    return WALK_LIMIT_KM


def iou(first, second):
    """Intersection over union of two collections as sets; 0 when either is empty."""
    if first == second:                # the common case of a matching route, in C
        return 1.0 if first else 0.0
    if type(first) is not set:
        first = set(first)
    if type(second) is not set:
        second = set(second)
    if not first or not second:
        return 0.0
    # |A u B| = |A| + |B| - |A n B|: the same integer, without building the union.
    shared = len(first & second)
    return shared / (len(first) + len(second) - shared)


def plain_sum(values, start=0):
    """``start`` plus the numbers, added left to right, each sum rounded: what
    sum() does up to Python 3.11.  From 3.12 sum() compensates the rounding
    of floats, so a figure summed with it could differ in its last digit with
    the Python version; with this one every version writes the same report."""
    return functools.reduce(operator.add, values, start)


def mean(values):
    """Arithmetic mean, or None for no values."""
    values = list(values)
    return plain_sum(values) / len(values) if values else None


def ratio(numerator, denominator):
    return numerator / denominator if denominator else None


# ---------------------------------------------------------------------------
# 3. Input files
# ---------------------------------------------------------------------------

def _raise_csv_field_limit():
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 10


_raise_csv_field_limit()

STATION_COLUMNS = ("stop_id", "coord_x", "coord_y", "next_hop_stations")
UTF8_BOM = b"\xef\xbb\xbf"

# The station cache: every stop of a large station file decoded once and kept
# (keyed by the file's SHA-256) in the user's cache folder, so a run, and each
# of its worker processes, does not decode the stops its rows touch again.
STATION_CACHE_MIN_STOPS = 20000  # smaller networks decode in a blink: no cache
STATION_CACHE_FORMAT = 3         # bump when what the cache holds changes
STATION_CACHE_KEEP = 8           # cache files kept (the most recently written)
_STATION_CACHE_MAGIC = b"transitlm station cache\n"


def station_cache_folder():
    """$TRANSITLM_CACHE_DIR ("off" or empty: no cache), else
    $XDG_CACHE_HOME/transitlm or ~/.cache/transitlm."""
    folder = os.environ.get("TRANSITLM_CACHE_DIR")
    if folder is not None:
        return None if folder.strip() in ("", "off") else folder
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "transitlm")


def station_cache_path(folder, sha256):
    return os.path.join(folder, "stations-%s.v%d" % (sha256, STATION_CACHE_FORMAT))


def _read_station_cache(path, sha256):
    """({stop: next hops}, {stop: (lng, lat)}, unreadable stop ids, duplicates)
    from a cache file (see StationNetwork._decode for what they hold),
    or None when there is none or it does not check out (wrong magic, payload
    hash, file hash, format or shape): never trusted blindly, a bad cache is
    made again.  ``unreadable``: the stops whose line could not be read (left
    out, reported when a route touches them); ``duplicates`` as
    _IndexedLines.duplicates."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    head = len(_STATION_CACHE_MAGIC)
    if not data.startswith(_STATION_CACHE_MAGIC) or data[head + 64:head + 65] != b"\n":
        return None
    payload = data[head + 65:]
    if hashlib.sha256(payload).hexdigest().encode() != data[head:head + 64]:
        return None
    try:
        content = marshal.loads(payload)
        version, file_sha256, stops, hops, points, unreadable, duplicates = content
    except (ValueError, TypeError, EOFError):
        return None
    if (version != STATION_CACHE_FORMAT or file_sha256 != sha256 or type(stops) is not list
            or type(hops) is not list or type(points) is not list
            or not len(stops) == len(hops) == len(points) or type(unreadable) is not list
            or not (duplicates is None or type(duplicates) is tuple)):
        return None
    return dict(zip(stops, hops)), dict(zip(stops, points)), unreadable, duplicates


def _write_station_cache(path, sha256, hops, points, unreadable=(), duplicates=None):
    """Write the cache atomically (a temporary name, then a rename) and keep
    only the newest STATION_CACHE_KEEP cache files; False if it cannot be written."""
    same = {stop: stop for stop in hops}   # hops that are stop ids: shared strings
    stops = list(hops)
    hop_values = [tuple([same.get(hop, hop) for hop in value]) if type(value) is tuple
                  else value for value in hops.values()]
    payload = marshal.dumps((STATION_CACHE_FORMAT, sha256, stops, hop_values,
                             [points[stop] for stop in stops], list(unreadable),
                             duplicates), 4)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        handle = tempfile.NamedTemporaryFile("wb", dir=folder, prefix=".tmp-", delete=False)
        try:
            with handle:
                handle.write(_STATION_CACHE_MAGIC)
                handle.write(hashlib.sha256(payload).hexdigest().encode() + b"\n")
                handle.write(payload)
            os.replace(handle.name, path)
        except BaseException:
            os.unlink(handle.name)
            raise
        caches = sorted((entry for entry in os.scandir(folder)
                         if entry.name.startswith("stations-") and entry.is_file()),
                        key=lambda entry: entry.stat().st_mtime, reverse=True)
        for entry in caches[STATION_CACHE_KEEP:]:
            os.unlink(entry.path)
    except OSError:
        return False
    return True


class StationNetwork(object):
    """The station graph of station_info.csv, read once.

    The file's bytes are kept as they are, with the offset of each stop's
    line; a line is parsed, and its coordinates and next-hop JSON decoded, only
    when a route touches that stop.  A 150,000-stop file is so indexed in a
    fraction of a second and in about the memory of the file itself.  A stop's
    own id is always one of its next hops (self-hop), so "A, 【换乘】, A" is
    connected.
    """

    def __init__(self, lookup, columns, path="<memory>", sha256=None):
        self.path = path
        self.sha256 = sha256
        self._lookup = lookup          # stop -> list of cells, or None
        self._columns = columns        # (i_stop, i_x, i_y, i_hops, i_name or None, width)
        # A stop's next hops and its (lng, lat), once touched (see _decode): two
        # dictionaries, as a route's reachability reads only the first.
        self._hops = {}
        self._points = {}
        # With the station cache every readable stop is decoded: then the ids
        # of the stops whose line cannot be read (a frozenset), else None.
        self._unreadable = None
        self.cache_state = None        # "loaded", "built" or None (see load)
        duplicates = getattr(lookup, "duplicates", None)
        # What a user should know about the file (listed in the report's warnings).
        self.warnings = [] if not duplicates else [
            "station file %s lists %d stop id(s) more than once (e.g. %s); the last line "
            "of each is used" % (path, duplicates[0], duplicates[1])]

    # -- loading ----------------------------------------------------------
    @classmethod
    def load(cls, path, cache_folder=None):
        """Read a station file.  ``cache_folder``: use the station cache there
        (see use_cache); when it holds this file's cache, the file is not even
        indexed until something needs a stop's line (its name, or the line
        number of a malformed stop)."""
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise InputError("cannot read station file %s: %s" % (path, exc.strerror or exc))
        digest = hashlib.sha256(data).hexdigest()
        if data.startswith(UTF8_BOM):
            data = data[len(UTF8_BOM):]
        header_end = data.find(b"\n")
        header_bytes = data if header_end < 0 else data[:header_end]
        try:
            header = next(csv.reader([header_bytes.decode("utf-8")]), [])
        except UnicodeDecodeError:
            raise InputError("station file %s is not UTF-8 text" % path)
        header = [cell.strip() for cell in header]
        if not any(header):
            raise InputError("station file %s is empty" % path)
        missing = [col for col in STATION_COLUMNS if col not in header]
        if missing:
            raise InputError("station file %s lacks column(s) %s (has: %s)"
                             % (path, ", ".join(missing), ", ".join(header)))
        indexes = [header.index(col) for col in STATION_COLUMNS]
        i_name = header.index("station_name") if "station_name" in header else None
        columns = tuple(indexes) + (i_name, max(indexes + [i_name or 0]) + 1)
        body_start = len(data) if header_end < 0 else header_end + 1

        def index():
            lookup = None
            if indexes[0] == 0:
                lookup = _IndexedLines.build(data, path)
            if lookup is None:  # ids not first, or quoted: the csv module reads it all
                lookup = _ParsedLines.build(data, body_start, path, indexes[0])
            return lookup
        cached = None
        if cache_folder is not None:
            cached = _read_station_cache(station_cache_path(cache_folder, digest), digest)
        if cached is not None:
            # The cache was made from these very bytes, so indexing them later
            # (_LazyLines) gives what it gave then.
            hops, points, unreadable, duplicates = cached
            network = cls(_LazyLines(index, duplicates), columns, path, digest)
            network._use_decoded(hops, points, unreadable)
            network.cache_state = "loaded"
            return network
        network = cls(index(), columns, path, digest)
        if cache_folder is not None:
            network.cache_state = network.use_cache(cache_folder)
        return network

    @classmethod
    def from_dict(cls, stations):
        """Build from {stop_id: (lng, lat, [next hops])} (tests, demos)."""
        return cls.from_cells({stop: (str(lng), str(lat), json.dumps(list(hops)))
                               for stop, (lng, lat, hops) in stations.items()})

    @classmethod
    def from_cells(cls, cells, path="<memory>"):
        """Build from raw text cells {stop_id: (coord_x, coord_y, next_hop_stations)}."""
        rows = {stop: [stop, x, y, hops] for stop, (x, y, hops) in cells.items()}
        numbers = {stop: number for number, stop in enumerate(cells, start=2)}
        return cls(_ParsedLines(rows, path, numbers), (0, 1, 2, 3, None, 4), path)

    # -- lookups ------------------------------------------------------------
    def __contains__(self, stop):
        if self._unreadable is not None:
            return stop in self._hops or stop in self._unreadable
        return stop in self._lookup

    def __len__(self):
        if self._unreadable is not None:
            return len(self._hops) + len(self._unreadable)
        return len(self._lookup)

    def _cells(self, stop):
        cells = self._lookup.cells(stop)
        if cells is not None and len(cells) < self._columns[5]:
            self._bad(stop, "the line (too few columns)")
        return cells

    def _bad(self, stop, what):
        raise InputError("station file %s line %s: %s of stop %s is malformed"
                         % (self.path, self._lookup.line_number(stop), what, stop))

    def next_hops(self, stop):
        """Stops reachable in one hop (self included, as a tuple), or None if unknown."""
        hops = self._hops.get(stop)
        if hops is None:
            decoded = self._decode(stop)
            if decoded is None:
                return None
            hops = decoded[0]
        if type(hops) is str:          # the cell was malformed: say so now it is used
            self._bad(stop, hops)
        return hops

    def broken_hop(self, stations):
        """The first consecutive pair of ``stations`` that is not one hop apart,
        as (here, there, known), ``known`` False when ``here`` has no next-hop
        information; None when every pair is connected.  (check_reachability's
        loop, kept beside the data it reads: it runs for every hop of every
        route, so it looks decoded stops up directly.)"""
        known = self._hops
        for here, there in zip(stations, stations[1:]):
            hops = known.get(here)
            if type(hops) is tuple:
                if there not in hops:
                    return here, there, True
                continue
            hops = self.next_hops(here)    # decodes it, or says it is malformed
            if hops is None:
                return here, there, False
            if there not in hops:
                return here, there, True
        return None

    def coords(self, stop):
        """(lng, lat) of a stop, or None if unknown; an empty cell reads as 0.0."""
        point = self._points.get(stop)
        if point is None:
            decoded = self._decode(stop)
            if decoded is None:
                return None
            point = decoded[1]
        if type(point) is str:
            self._bad(stop, point)
        return point

    def _decode(self, stop):
        """Parse a stop's line once -> (hops or problem, point or problem), also
        kept in _hops and _points; None for an unknown stop.  A problem is the
        text naming the malformed cell, reported when it is used."""
        if self._unreadable is not None and stop not in self._unreadable:
            return None                # every readable stop is decoded: not a stop
        cells = self._cells(stop)
        if cells is None:
            return None
        i_x, i_y, i_hops = self._columns[1:4]
        cell = cells[i_hops].strip(JSON_WHITESPACE)
        try:
            if json_too_deep(cell):
                raise ValueError
            hops = loads_stripped(cell) if cell else []
            if not isinstance(hops, list):
                raise ValueError
            # A tuple is a third of a set's size; next-hop lists are short.
            hops = tuple(hops) + (stop,)
        except ValueError:
            hops = "next_hop_stations"
        x, y = cells[i_x].strip(), cells[i_y].strip()
        try:
            point = (float(x) if x else 0.0, float(y) if y else 0.0)
            if not valid_point(point):
                raise ValueError
        except ValueError:
            point = "coord_x/coord_y (a longitude within +-180 and a latitude within +-90)"
        self._hops[stop] = hops
        self._points[stop] = point
        return hops, point

    def use_cache(self, folder):
        """Decode every stop at once, from the cache in ``folder`` (made on
        first use).  -> "loaded", "built", or None when no cache is used: a
        small network, no folder, or a folder that cannot be written."""
        if folder is None or self.sha256 is None or len(self) < STATION_CACHE_MIN_STOPS:
            return None
        path = station_cache_path(folder, self.sha256)
        cached = _read_station_cache(path, self.sha256)
        if cached is not None and len(cached[0]) + len(cached[2]) == len(self):
            self._use_decoded(*cached[:3])
            return "loaded"
        unreadable = []
        for stop in self._lookup.ids():
            if stop not in self._hops:
                try:
                    self._decode(stop)
                except InputError:     # reported only if a route touches this stop
                    unreadable.append(stop)
        written = _write_station_cache(path, self.sha256, self._hops, self._points,
                                       unreadable, getattr(self._lookup, "duplicates", None))
        self._use_decoded(self._hops, self._points, unreadable)
        return "built" if written else None

    def _use_decoded(self, hops, points, unreadable):
        """Every readable stop decoded (``hops``, ``points``), the rest ``unreadable``."""
        self._hops = hops
        self._points = points
        self._unreadable = frozenset(unreadable)

    def name(self, stop):
        i_name = self._columns[4]
        cells = self._cells(stop)
        return cells[i_name] if cells is not None and i_name is not None else None


class _LazyLines(object):
    """A station file's index (_IndexedLines or _ParsedLines), made on first
    use: with the station cache loaded only a stop's name or a malformed
    stop's line number needs it."""

    def __init__(self, index, duplicates):
        self._index = index
        self._lookup = None
        self.duplicates = duplicates

    def _get(self):
        if self._lookup is None:
            self._lookup = self._index()
        return self._lookup

    # (Membership and size come from the cache: see StationNetwork.__contains__.)
    def ids(self):
        return self._get().ids()

    def cells(self, stop):
        return self._get().cells(stop)

    def line_number(self, stop):
        return self._get().line_number(stop)


class _IndexedLines(object):
    """Stop id -> its line of the file, kept as bytes and parsed on demand."""

    duplicates = None                # (how many repeated ids, an example) or None

    def __init__(self, lines, ordinals, path, line_numbers=None):
        self._lines = lines              # data lines as bytes, blank lines removed
        self._ordinals = ordinals        # stop id -> index into _lines
        self._path = path
        self._line_numbers = line_numbers

    @classmethod
    def build(cls, data, path):
        """Index the lines after the header, or None if the file needs the csv module
        (quoted stop ids, or a quoted cell running over several lines)."""
        lines = data.split(b"\n")
        del lines[0]                   # the header
        if lines and not lines[-1].strip():
            lines.pop()                # the file's final newline
        line_numbers = None
        if b"" in lines or b"\r" in lines:
            kept = [(number, line) for number, line in enumerate(lines, start=2)
                    if line.strip()]
            line_numbers = [number for number, _ in kept]
            lines = [line for _, line in kept]
        # A line with an odd number of quotes opens a cell that ends on a later
        # line: the csv module must read such a file.  (map and set run in C.)
        if any(count & 1 for count in set(map(bytes.count, lines, repeat(b'"')))):
            return None
        ids = b"\n".join(map(itemgetter(0), map(bytes.partition, lines, repeat(b","))))
        if b'"' in ids:                # a quoted stop id: the csv module reads it
            return None
        try:
            keys = ids.decode("utf-8").split("\n") if lines else []
        except UnicodeDecodeError:
            raise InputError("station file %s is not UTF-8 text" % path)
        indexed = cls(lines, dict(zip(keys, range(len(keys)))), path, line_numbers)
        if len(indexed._ordinals) != len(keys):     # the last line of a repeated id wins
            seen = set()
            repeated = [key for key in keys if key in seen or seen.add(key)]
            indexed.duplicates = (len(repeated), repeated[0])
        return indexed

    def __contains__(self, stop):
        return stop in self._ordinals

    def __len__(self):
        return len(self._ordinals)

    def ids(self):
        return iter(self._ordinals)

    def cells(self, stop):
        ordinal = self._ordinals.get(stop)
        if ordinal is None:
            return None
        try:
            return next(csv.reader((self._lines[ordinal].decode("utf-8"),)), [])
        except UnicodeDecodeError:
            raise InputError("station file %s line %d is not UTF-8 text"
                             % (self._path, self.line_number(stop)))
        except csv.Error as exc:
            raise InputError("station file %s line %d is not valid CSV: %s"
                             % (self._path, self.line_number(stop), exc))

    def line_number(self, stop):
        ordinal = self._ordinals[stop]
        return self._line_numbers[ordinal] if self._line_numbers else ordinal + 2


class _ParsedLines(object):
    """Stop id -> cells, read with the csv module (the general, slower path)."""

    duplicates = None

    def __init__(self, rows, path, line_numbers=None):
        self._rows = rows
        self._path = path
        self._line_numbers = line_numbers or {}

    @classmethod
    def build(cls, data, start, path, i_stop):
        try:
            text = data[start:].decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("station file %s is not UTF-8 text" % path)
        rows, numbers, repeated = {}, {}, []
        try:
            reader = csv.reader(io.StringIO(text, newline=""))
            for cells in reader:
                if cells and len(cells) > i_stop:
                    if cells[i_stop] in rows:
                        repeated.append(cells[i_stop])
                    rows[cells[i_stop]] = cells
                    numbers[cells[i_stop]] = reader.line_num + 1
        except csv.Error as exc:
            raise InputError("station file %s line %d is not valid CSV: %s"
                             % (path, reader.line_num + 1, exc))
        parsed = cls(rows, path, numbers)
        if repeated:
            parsed.duplicates = (len(repeated), repeated[0])
        return parsed

    def __contains__(self, stop):
        return stop in self._rows

    def __len__(self):
        return len(self._rows)

    def ids(self):
        return iter(self._rows)

    def cells(self, stop):
        return self._rows.get(stop)

    def line_number(self, stop):
        return self._line_numbers.get(stop, "?")


# ---------------------------------------------------------------------------
# 3b. Sample rows and predictions
# ---------------------------------------------------------------------------

ID_COLUMNS = ("index_id", "indexid")
CHUNK_BYTES = 1 << 19          # bytes of the sample file a worker reads per task


class SampleRow(object):
    """One input row: its number, id and the raw cells the evaluators read."""

    __slots__ = ("row", "index_id", "prompt", "label", "prediction", "req_type",
                 "has_prediction", "problem", "generator_error")

    def __init__(self, row, index_id, prompt, label, prediction, req_type=None,
                 has_prediction=True, problem=None):
        self.row = row                    # 1-based data row number (header excluded)
        self.index_id = index_id
        self.prompt = prompt              # raw sft_prompt cell
        self.label = label                # raw sft_label cell
        self.prediction = prediction      # raw text, or an already-decoded object
        self.req_type = req_type          # raw req_type cell or None
        self.has_prediction = has_prediction
        self.problem = problem            # (code, message) when the row itself is malformed
        self.generator_error = None       # a predictions file's "error" for this id

    def state(self):
        """The row as a plain tuple (what is sent to a worker process: cheap to pickle)."""
        return (self.row, self.index_id, self.prompt, self.label, self.prediction,
                self.req_type, self.has_prediction, self.problem, self.generator_error)

    @classmethod
    def from_state(cls, state):
        sample = cls(*state[:8])
        sample.generator_error = state[8]
        return sample


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _HashingReader(io.RawIOBase):
    """A binary file whose bytes are hashed as they are read: an input is read
    once (a pipe or a FIFO works) and its hash is that of what was read."""

    def __init__(self, raw):
        io.RawIOBase.__init__(self)
        self.raw = raw
        self.digest = hashlib.sha256()

    def readable(self):
        return True

    def readinto(self, buffer):
        count = self.raw.readinto(buffer)
        if count:
            self.digest.update(memoryview(buffer)[:count])
        return count

    def close(self):
        self.raw.close()
        io.RawIOBase.close(self)


def _regular_file_identity(raw):
    """(device, inode, size, modification time) of an open regular file, or
    None for anything else (a pipe, a FIFO, a terminal)."""
    try:
        status = os.fstat(raw.fileno())
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def read_span(fd, offset, length):
    """``length`` bytes of an open file from ``offset`` (os.pread: the file's
    position is not touched), fewer only when the file ends before."""
    parts = []
    while length > 0:
        data = os.pread(fd, length, offset)
        if not data:
            break
        parts.append(data)
        offset += len(data)
        length -= len(data)
    return b"".join(parts)


def _open_hashed(path, what):
    """(buffered binary handle, hashing reader) for an input file."""
    try:
        raw = open(path, "rb", buffering=0)
    except OSError as exc:
        raise InputError("cannot read %s %s: %s" % (what, path, exc.strerror or exc))
    if os.path.isdir(path):
        raw.close()
        raise InputError("cannot read %s %s: it is a folder" % (what, path))
    hashed = _HashingReader(raw)
    return io.BufferedReader(hashed, 1 << 16), hashed


def _text_handle(binary):
    # Bytes that are not UTF-8 are kept as surrogate escapes: a row holding
    # them becomes an error row instead of stopping the run.
    return io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape",
                            newline="")


def _open_hashed_text(path, what):
    """(text handle, hashing reader) for a UTF-8 CSV/JSONL input, BOM skipped."""
    binary, hashed = _open_hashed(path, what)
    return _text_handle(binary), hashed


class _Replay(io.RawIOBase):
    """Bytes already read, then the rest of a binary handle: what the csv module
    reads when a file is taken up row by row after part of it was read in bytes."""

    def __init__(self, head, rest):
        io.RawIOBase.__init__(self)
        self.head = memoryview(head)
        self.rest = rest

    def readable(self):
        return True

    def readinto(self, buffer):
        if len(self.head):
            count = min(len(buffer), len(self.head))
            buffer[:count] = self.head[:count]
            self.head = self.head[count:]
            return count
        data = self.rest.read1(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _drain(handle):
    """Read the rest of a text handle (so its hash covers the whole file)."""
    buffer = handle.buffer
    while buffer.read(1 << 20):
        pass


def count_sparse(data, byte, steps=512):
    """data.count(byte), in steps of data.find (memchr, in C) while the byte is
    sparse: a 512 KB chunk of long CSV rows holds a few hundred line breaks,
    and stepping over them costs a tenth of counting every byte.  After
    ``steps`` hits the rest is counted."""
    count, position = 0, data.find(byte)
    while position >= 0:
        count += 1
        if count == steps:
            return count + data.count(byte, position + 1)
        position = data.find(byte, position + 1)
    return count


def lone_returns(data, steps=512):
    """How many \r in ``data`` are not followed by \n (as count_sparse)."""
    lone, hits, position = 0, 0, data.find(b"\r")
    while position >= 0:
        hits += 1
        if hits == steps:
            return lone + data.count(b"\r", position) - data.count(b"\r\n", position)
        if data[position + 1:position + 2] != b"\n":
            lone += 1
        position = data.find(b"\r", position + 1)
    return lone


def csv_lines(data):
    """How many lines the csv module counts in bytes that end with a line break
    (\n, \r\n or a lone \r each end one)."""
    lines = count_sparse(data, b"\n")
    if b"\r" in data:
        lines += lone_returns(data)
    return lines


def record_end(data, start=0):
    """Offset just past the last line break in ``data[start:]`` that an even
    number of quotes precede (counted from ``start``), or -1.

    On CSV written by a CSV writer such a line break ends a record; anything
    else (a quote inside an unquoted cell) is caught by the reader of the
    chunk (see parse_chunk), so this is only ever a guess that is checked.
    """
    position = data.rfind(b"\n", start)
    if position < 0:
        return -1
    parity = data.count(b'"', start, position + 1) & 1
    while parity:
        previous = data.rfind(b"\n", start, position)
        if previous < 0:
            return -1
        parity ^= data.count(b'"', previous + 1, position + 1) & 1
        position = previous
    return position + 1


class SplitRecord(Exception):
    """A chunk of bytes did not end at the end of a CSV record."""


class SampleReader(object):
    """Streams the sample CSV as SampleRows, hashing it while reading.

    ``prediction_column`` is ``generate_results`` or ``sft_label``, or None
    when predictions come from a separate file.  Accepts ``index_id`` or
    ``indexid``; other columns are ignored.  A row whose cell count differs
    from the header's (a stray quote that swallowed a line break, a cut row)
    is kept as a row with a ``problem``: it becomes an error row.

    ``chunked``: the rows after the header may be handed out as chunks of
    bytes (chunks()) that worker processes parse themselves (parse_chunk), so
    this process only reads and hashes.  A record split between two chunks
    (a line break inside a cell) has the file cut again, by the quote count,
    from the chunk where it was found (recut()); anything more unusual (a
    header over several lines, a quote count that is wrong too) goes back to
    reading row by row from there (rows_from()).
    """

    def __init__(self, path, prediction_column, need_req_type=False, sample_count=None,
                 chunked=False):
        self.path = path
        self.sample_count = sample_count
        self.warnings = []
        self.binary, self.hashed = _open_hashed(path, "input file")
        self._identity = _regular_file_identity(self.hashed.raw)
        self._spans = False             # workers read chunks from the file (span_file)
        self.chunked = False
        self.handle = None
        self._unread = b""              # bytes read but not yet parsed (chunked reading)
        header = None
        try:
            if chunked and sample_count is None:
                header = self._header_bytes()
            if header is None:
                self._read_rows_from(self._unread, 1)
                self._unread = b""
                header = self._next()
            if header is None:
                raise InputError("input file %s is empty" % path)
            header = [cell.strip() for cell in header]
            if not _encodable("".join(header)):
                raise InputError("input file %s line 1 is not UTF-8 text" % path)
            id_column = next((col for col in ID_COLUMNS if col in header), None)
            required = ["sft_prompt", "sft_label"]
            if prediction_column:
                required.append(prediction_column)
            if need_req_type:
                required.append("req_type")
            missing = [col for col in required if col not in header]
            if id_column is None:
                missing.insert(0, "index_id (or indexid)")
            if missing:
                raise InputError("input file %s lacks column(s) %s (has: %s)"
                                 % (path, ", ".join(missing), ", ".join(header)))
        except InputError:
            self.close()
            raise
        repeated = sorted({col for col in header if col and header.count(col) > 1})
        if repeated:
            self.warnings.append("input file %s repeats column(s) %s; the first of each is used"
                                 % (path, ", ".join(repeated)))
        self.width = len(header)
        self.columns = (header.index(id_column), header.index("sft_prompt"),
                        header.index("sft_label"),
                        header.index(prediction_column) if prediction_column else None,
                        header.index("req_type") if need_req_type else None)

    def _header_bytes(self):
        """The header's cells when it is one plain line (chunked reading), else None.
        The bytes read after it wait in ``_unread``."""
        data = self._unread = self.binary.read(CHUNK_BYTES)
        start = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
        end = data.find(b"\n", start) + 1
        if end <= 0 or b'"' in data[start:end] or b"\r" in data[start:end - 2]:
            return None                # quoted or unusual: read it with the csv module
        try:
            records = list(csv.reader(io.StringIO(
                data[start:end].decode("utf-8", "surrogateescape"), newline="")))
        except csv.Error:
            return None
        if len(records) != 1:
            return None
        self.chunked = True
        self._unread = data[end:]
        self._next_line = 2
        self._offset = end             # of _unread's first byte in the file
        self._eof = False
        self._count_quotes = False     # see recut
        return records[0]

    def _read_rows_from(self, head, first_line):
        """Read row by row with the csv module from here (``head``: bytes already read)."""
        self.handle = _text_handle(io.BufferedReader(_Replay(head, self.binary), 1 << 16)) \
            if head else _text_handle(self.binary)
        self.reader = csv.reader(self.handle)
        self._line_base = first_line - 1

    def _next(self):
        try:
            return next(self.reader, None)
        except UnicodeDecodeError:
            raise InputError("input file %s line %d is not UTF-8 text"
                             % (self.path, self._line_base + self.reader.line_num + 1))
        except csv.Error as exc:
            raise InputError("input file %s line %d is not valid CSV: %s"
                             % (self.path, self._line_base + self.reader.line_num, exc))

    def close(self):
        if self.handle is not None:
            self.handle.close()
        self.binary.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        # A generator: nothing is read until rows are asked for, so a chunked
        # reader can still hand out chunks after iter().
        yield from self.rows_from([], 1) if self.chunked else self._rows(1)

    def _rows(self, first_row):
        return sample_rows(self._next, lambda: self._line_base + self.reader.line_num,
                           self.columns, self.width, first_row, self.sample_count)

    # -- chunked reading ----------------------------------------------------
    def chunks(self):
        """(bytes, first line number, final?, offset in the file) chunks of
        about CHUNK_BYTES, each ending at a line break that is guessed to end
        a record (see recut)."""
        data = self._unread
        while True:
            while not self._eof and len(data) < CHUNK_BYTES:
                more = self.binary.read(CHUNK_BYTES)
                self._eof = not more
                data += more
            if not data:
                break
            if self._eof and len(data) <= CHUNK_BYTES:
                end = len(data)            # the file's last chunk
            else:
                end = record_end(data) if self._count_quotes else data.rfind(b"\n") + 1
                if end <= 0:               # a record longer than what was read
                    if not self._eof:
                        more = self.binary.read(len(data))
                        self._eof = not more
                        data += more
                        continue
                    end = len(data)
            chunk, data = data[:end], data[end:]
            self._unread = data
            first, offset = self._next_line, self._offset
            self._next_line += csv_lines(chunk)
            self._offset += end
            yield chunk, first, self._eof and not data, offset

    def recut(self, chunks):
        """Chunks again from the first of ``chunks`` (handed out by chunks() but
        not evaluated), now cut where the quotes before a line break are even
        (record_end), or None when they already were.

        Cells rarely hold a line break, so chunks are first cut at any line
        break; a worker that finds its chunk ending inside a record (see
        parse_chunk) sends the reading here.  A quote count can still be
        wrong (a quote inside an unquoted cell): then rows_from() it is.
        """
        if self._count_quotes:
            return None
        self._count_quotes = True
        self._next_line, self._offset = chunks[0][1], chunks[0][3]
        self._unread = b"".join([chunk[0] for chunk in chunks] + [self._unread])
        return self.chunks()

    def rows_from(self, chunks, first_row):
        """Go back to reading row by row: ``chunks`` (handed out by chunks() but
        not evaluated; may be empty), what chunks() has read past them, then
        the rest of the file -> SampleRows numbered from ``first_row``."""
        self.chunked = False
        first_line = chunks[0][1] if chunks else self._next_line
        head = b"".join([chunk[0] for chunk in chunks] + [self._unread])
        self._unread = b""
        self._read_rows_from(head, first_line)
        return self._rows(first_row)

    def fraction_read(self):
        """Share of the file read so far (None for a pipe), for the progress line."""
        try:
            size = os.fstat(self.hashed.raw.fileno()).st_size
            return min(1.0, self.hashed.raw.tell() / size) if size else None
        except (OSError, ValueError):
            return None

    def span_file(self):
        """The input's file descriptor, when workers may read their chunks from
        the file themselves instead of being sent them (a regular file), else
        None.  Reading it twice is then checked: finish() refuses a file that
        changed since it was opened."""
        if self._identity is None:
            return None
        self._spans = True
        return self.hashed.raw.fileno()

    def finish(self):
        """Read what is left (--sample_count stops early) and return the file's hash."""
        try:
            while self.binary.read(1 << 20):
                pass
            changed = self._spans and _regular_file_identity(self.hashed.raw) != self._identity
        except OSError as exc:
            raise InputError("cannot read input file %s: %s" % (self.path, exc.strerror or exc))
        if changed:
            raise InputError("input file %s changed while it was evaluated; run again on a "
                             "file that is not being written" % self.path)
        return self.hashed.digest.hexdigest()


def sample_rows(next_cells, line_number, columns, width, first_row=1, limit=None,
                utf8=False):
    """CSV records -> SampleRows numbered from ``first_row``.

    ``next_cells()`` gives the next record (None at the end), ``line_number()``
    the physical line the last one ended on.  A blank line is not a row.
    ``utf8``: the text is known to be valid UTF-8 (no row to check).
    """
    i_id, i_prompt, i_label, i_pred, i_req = columns
    count = first_row - 1
    while limit is None or count < limit:
        start = line_number() + 1
        cells = next_cells()
        if cells is None:
            break
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue   # a blank line is not a row
        count += 1
        problem = None
        if not utf8 and not _encodable("".join(cells)):
            problem = ("invalid_encoding", "the row holds bytes that are not UTF-8 text")
        elif len(cells) != width:
            message = "the row has %d cell(s) where the header has %d" % (len(cells), width)
            end = line_number()
            if end > start:
                message += (" (it runs over lines %d-%d: a stray quote may have joined "
                            "rows)" % (start, end))
            problem = ("malformed_row", message)
        if len(cells) < width:
            cells = cells + [""] * (width - len(cells))
        yield SampleRow(count, cells[i_id], cells[i_prompt], cells[i_label],
                        cells[i_pred] if i_pred is not None else None,
                        cells[i_req] if i_req is not None else None,
                        has_prediction=i_pred is not None, problem=problem)


def text_lines(text, any_lone_return=True):
    """The lines of ``text``, each with its line break, as the csv module reads
    them from io.StringIO(text, newline="").  When no line ends with a lone \r
    (``any_lone_return`` False) one split at \n gives the same lines, and the
    csv module reads a list of them faster."""
    if any_lone_return:
        return io.StringIO(text, newline="")
    pieces = text.split("\n")
    last = pieces.pop()
    lines = [piece + "\n" for piece in pieces]
    if last:
        lines.append(last)
    return lines


def parse_chunk(data, first_line, path, columns, width, final):
    """A chunk of the sample file (whole records) -> SampleRows numbered from 1.

    Raises SplitRecord when the chunk does not end at the end of a record
    (unless it is the file's last) and InputError (with the file's line
    numbers) when the csv module rejects it.  Worker processes call this.
    """
    ended = []

    def end_of_chunk():
        ended.append(True)
        return
        yield

    try:
        text, utf8 = data.decode("utf-8"), True
    except UnicodeDecodeError:         # kept as surrogate escapes: those rows are errors
        text, utf8 = data.decode("utf-8", "surrogateescape"), False
    lines = text_lines(text, b"\r" in data and lone_returns(data) > 0)
    reader = csv.reader(itertools.chain(lines, end_of_chunk()))
    base = first_line - 1

    def next_cells():
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise InputError("input file %s line %d is not valid CSV: %s"
                             % (path, base + reader.line_num, exc))
        if ended and cells is not None and not final:
            raise SplitRecord()        # the csv module asked for more: a record runs on
        return cells

    return sample_rows(next_cells, lambda: base + reader.line_num, columns, width, utf8=utf8)


class RowsSource(object):
    """Sample rows given as dicts (the Python API) instead of a file."""

    def __init__(self, rows, prediction_column, need_req_type=False, sample_count=None):
        self.rows = rows
        self.prediction_column = prediction_column
        self.need_req_type = need_req_type
        self.sample_count = sample_count
        self.warnings = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def fraction_read(self):
        return None

    def __iter__(self):
        for number, row in enumerate(self.rows, start=1):
            if self.sample_count is not None and number > self.sample_count:
                break
            if not isinstance(row, dict):
                raise InputError("row %d is %s, expected a dict" % (number, type_name(row)))
            index_id = row.get("index_id", row.get("indexid", ""))
            column = self.prediction_column
            yield SampleRow(number, "" if index_id is None else str(index_id),
                            row.get("sft_prompt"), row.get("sft_label"),
                            row.get(column) if column else None,
                            row.get("req_type") if self.need_req_type else None,
                            has_prediction=column is not None)

    def finish(self):
        return None


class PredictionsFile(object):
    """Model outputs keyed by id, from JSON Lines or CSV, read once (hashed while
    read), then joined to the test rows as they stream by.

    Each id's entries are used in file order, results before error lines (a
    generator's failed attempt), so the n-th test row with an id gets that id's
    n-th prediction; what is left over, or missing, is reported.
    """

    def __init__(self, path, entries, sha256):
        self.path = path
        self.sha256 = sha256
        self.read_count = len(entries)
        self.by_id = {}
        for index_id, prediction, line_no, error in entries:
            self.by_id.setdefault(index_id, []).append((error is not None, line_no,
                                                        prediction, error))
        for items in self.by_id.values():
            if len(items) > 1:
                items.sort(key=lambda item: (item[0], item[1]))   # results first, in order
        self.joined = 0
        self.missing = 0
        self.repeated_test_ids = []
        self._seen_test_ids = set()

    @classmethod
    def read(cls, path):
        handle, hashed = _open_hashed_text(path, "predictions file")
        with handle:
            try:
                first = handle.readline()
                while first and not first.strip():
                    first = handle.readline()
                lines = itertools.chain([first], handle)
                if first.lstrip().startswith("{"):
                    entries = _read_predictions_jsonl(lines, path)
                else:
                    entries = _read_predictions_csv(lines, path)
                _drain(handle)
            except UnicodeDecodeError:
                raise InputError("predictions file %s is not UTF-8 text" % path)
            except OSError as exc:
                raise InputError("cannot read predictions file %s: %s"
                                 % (path, exc.strerror or exc))
        return cls(path, entries, hashed.digest.hexdigest())

    def join(self, samples):
        """Attach each test row's prediction (or its absence) as the rows stream by."""
        by_id = self.by_id
        for sample in samples:
            if sample.index_id in self._seen_test_ids:
                if len(self.repeated_test_ids) < 5:
                    self.repeated_test_ids.append(sample.index_id)
                else:
                    self.repeated_test_ids.append(None)
            else:
                self._seen_test_ids.add(sample.index_id)
            items = by_id.get(sample.index_id)
            if items:
                is_error, _, prediction, error = items.pop(0)
                if not items:
                    del by_id[sample.index_id]
                if is_error:
                    sample.has_prediction = False
                    sample.prediction = None
                    sample.generator_error = error
                    self.missing += 1
                else:
                    sample.has_prediction = True
                    sample.prediction = prediction
                    self.joined += 1
            else:
                sample.has_prediction = False
                sample.prediction = None
                self.missing += 1
            yield sample

    def statistics(self):
        """Join statistics: predictions for ids not in the test file, ids given
        more often than the test file has them, test rows without a result."""
        unknown = [i for i in self.by_id if i not in self._seen_test_ids]
        extra = [i for i in self.by_id if i in self._seen_test_ids]
        return {"predictions": self.read_count, "joined": self.joined,
                "missing": self.missing,
                "unknown_ids": sum(len(self.by_id[i]) for i in unknown),
                "unknown_id_examples": unknown[:5],
                "duplicate_ids": sum(len(self.by_id[i]) for i in extra),
                "duplicate_id_examples": extra[:5],
                "repeated_test_ids": len(self.repeated_test_ids),
                "repeated_test_id_examples": [i for i in self.repeated_test_ids if i][:5]}

    def warnings(self):
        stats = self.statistics()
        out = []
        if stats["unknown_ids"]:
            out.append("%d prediction(s) with an id not in the test file, e.g. %s"
                       % (stats["unknown_ids"], ", ".join(stats["unknown_id_examples"])))
        if stats["duplicate_ids"]:
            out.append("%d duplicate prediction(s) left over (an id given more often than the "
                       "test file has it; the first result is used), e.g. %s"
                       % (stats["duplicate_ids"], ", ".join(stats["duplicate_id_examples"])))
        if stats["repeated_test_ids"]:
            out.append("%d test row(s) repeat an earlier row's id; each gets the next "
                       "prediction for that id, e.g. %s"
                       % (stats["repeated_test_ids"],
                          ", ".join(stats["repeated_test_id_examples"])))
        return out


def _read_predictions_jsonl(lines, path):
    entries = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if json_too_deep(line):
            raise InputError("predictions file %s line %d is nested more than %d levels deep"
                             % (path, line_no, MAX_JSON_DEPTH))
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError("predictions file %s line %d is not JSON: %s" % (path, line_no, exc))
        if not isinstance(obj, dict):
            raise InputError("predictions file %s line %d is not a JSON object" % (path, line_no))
        key = next((col for col in ID_COLUMNS if col in obj), None)
        if key is None:
            raise InputError("predictions file %s line %d has no index_id/indexid" % (path, line_no))
        if "generate_results" in obj:
            entries.append((str(obj[key]), obj["generate_results"], line_no, None))
        elif "error" in obj:           # generate.py's line for a row that failed for good
            error = obj["error"]
            entries.append((str(obj[key]), None, line_no,
                            error if isinstance(error, str) else json.dumps(error)))
        else:
            raise InputError("predictions file %s line %d has neither generate_results nor "
                             "error" % (path, line_no))
    return entries


def _read_predictions_csv(lines, path):
    reader = csv.reader(lines)
    try:
        header = [cell.strip() for cell in next(reader, [])]
        id_column = next((col for col in ID_COLUMNS if col in header), None)
        if id_column is None or "generate_results" not in header:
            raise InputError("predictions file %s needs columns index_id (or indexid) and "
                             "generate_results (has: %s)" % (path, ", ".join(header)))
        i_id, i_pred = header.index(id_column), header.index("generate_results")
        entries = []
        for cells in reader:
            if not cells:
                continue
            cells = cells + [""] * (len(header) - len(cells))
            entries.append((cells[i_id], cells[i_pred], reader.line_num, None))
        return entries
    except csv.Error as exc:
        raise InputError("predictions file %s line %d is not valid CSV: %s"
                         % (path, reader.line_num, exc))


_DECODER = json.JSONDecoder()
JSON_WHITESPACE = " \t\n\r"

# JSON nested deeper than this is refused before decoding: the json module
# recurses per level, and a hostile cell must become an error row, not a crash.
MAX_JSON_DEPTH = 100
# The unrolled form of "(?:[^"\\]|\\.)*": linear, without a step per character.
_JSON_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET_RE = re.compile(r"[^\[\]{}]+")


def json_too_deep(text, limit=MAX_JSON_DEPTH):
    """Does JSON text nest arrays/objects more than ``limit`` levels deep?

    Scans without recursion; text with few brackets (every real row) is
    answered by two counts.  Brackets inside strings do not count.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_A_BRACKET_RE.sub("", _JSON_STRING_RE.sub("", text))
    depth = 0
    for char in brackets:
        if char == "[" or char == "{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def loads_stripped(text):
    """json.loads for text without surrounding whitespace, minus two Python layers.

    json.loads(s) is raw_decode after skipping whitespace, then a check that
    only whitespace follows; on stripped text that check is end == len(text).
    """
    value, end = _DECODER.raw_decode(text)
    if end != len(text):
        raise ValueError("Extra data")
    return value


def decode_json(text, what, lenient=False, code="invalid_json"):
    """Decode a JSON cell.  Returns (object, extracted?).

    ``lenient`` takes the first complete JSON object inside surrounding text
    (a ```json fence, a sentence before it); otherwise the text must be JSON.
    A RowError carries ``code`` (``too_deep`` for nesting over MAX_JSON_DEPTH).
    """
    if not isinstance(text, str):
        return text, False
    if json_too_deep(text):
        raise RowError("%s is nested more than %d levels deep" % (what, MAX_JSON_DEPTH),
                       "too_deep")
    try:
        return loads_stripped(text.strip(JSON_WHITESPACE)), False
    except ValueError as exc:
        # Keep the message, not the exception: its traceback's frames would
        # hold it in a reference cycle (see RowError).
        error = getattr(exc, "msg", None) or str(exc)
    if lenient:
        start = text.find("{")
        while start != -1:
            try:
                obj, _ = _DECODER.raw_decode(text, start)
                if isinstance(obj, dict):
                    return obj, True
            except ValueError:
                pass
            start = text.find("{", start + 1)
    if not text.strip():
        raise RowError("%s is empty" % what, code)
    raise RowError("%s is not valid JSON (%s)" % (what, error), code)


def read_prompt(text):
    """sft_prompt -> (origin (lng, lat), destination (lng, lat), city)."""
    prompt, _ = decode_json(text, "sft_prompt", code="invalid_prompt")
    if not isinstance(prompt, dict):
        raise RowError("sft_prompt is not a JSON object", "invalid_prompt")
    for key in ("start", "end"):
        if key not in prompt:
            raise RowError("sft_prompt has no %s coordinates" % key, "invalid_prompt")
    city = prompt.get("city")
    if city is not None and not isinstance(city, str):
        raise RowError("sft_prompt city is not text", "invalid_prompt")
    return (parse_lnglat(prompt.get("start"), "start"),
            parse_lnglat(prompt.get("end"), "end"), city or "")


# ---------------------------------------------------------------------------
# 4. Routes and checks
# ---------------------------------------------------------------------------

class Verdict(object):
    """The outcome of one check: ``ok``, an English ``reason`` and, when it
    failed, the snake_case ``codes`` of why (the reason part of the row's
    failure codes, e.g. ``broken_hop``)."""

    __slots__ = ("ok", "reason", "codes")

    def __init__(self, ok, reason, codes=()):
        self.ok = ok
        self.reason = reason
        self.codes = tuple(codes)

    def __repr__(self):
        return "Verdict(%r, %r, %r)" % (self.ok, self.reason, self.codes)


_PASSED = {}


def passed(template, *values):
    """A passing Verdict with the reason ``template % values`` (or the template
    itself).  One shared object per reason, looked up by template and values
    so the text is formatted once: a handful of reasons pass on almost every
    row, and verdicts are never changed."""
    key = (template, values)
    verdict = _PASSED.get(key)
    if verdict is None:
        if len(_PASSED) > 10000:       # reasons with numbers in them: keep it small
            _PASSED.clear()
        verdict = _PASSED[key] = Verdict(True, template % values if values else template)
    return verdict


def _text_field(route, key):
    value = route.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RowError("%s is not text" % key)
    return value


def text_list(route, key):
    """A list of text (null entries read as ""); anything else is a RowError."""
    value = route.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RowError("%s is %s, expected a list" % (key, type_name(value)))
    try:
        "".join(value)                 # C-speed check that every entry is text
        return value
    except TypeError:
        pass
    out = []
    for entry in value:
        if entry is None:
            out.append("")
        elif isinstance(entry, str):
            out.append(entry)
        else:
            raise RowError("%s holds %s, expected text" % (key, type_name(entry)))
    return out


def type_name(value):
    """How a JSON value is named in messages: "null", "a list", "text", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, str):
        return "text"
    return type(value).__name__


def route_stations(sequence):
    """Stations of a station_sequence: non-empty entries that are not 【换乘】."""
    return [entry for entry in sequence if entry.strip() not in _NOT_A_STATION]


_NOT_A_STATION = frozenset(("", TRANSFER))


def transit_line_count(lines):
    return len([name for name in lines if name.strip() not in _NOT_A_STATION])


def is_subway_line(name):
    return any(marker in name for marker in SUBWAY_MARKERS)


def full_line_set(lines, start_mode, end_mode, empty_mode_as_walk):
    """A route's line signature: stripped line names + 接驳:<mode> per access mode.

    ``empty_mode_as_walk``: the paper counts an empty mode as 步行; the
    reference RD skips empty modes.
    """
    signature = {name.strip() for name in lines if name.strip()}
    for mode in (start_mode, end_mode):
        if not mode and empty_mode_as_walk:
            mode = WALK
        if mode:
            signature.add(ACCESS_PREFIX + mode)
    return signature


class Route(object):
    """A route JSON object with its values parsed (distances in km, time in min)."""

    __slots__ = ("sequence", "stations", "lines", "distance_km", "time_min", "fare_cny",
                 "start_mode", "end_mode", "start_access_km", "end_access_km",
                 "transit_lines", "cycling_legs", "score")

    def __init__(self, obj, protocol, what="prediction"):
        code = "invalid_label" if what.startswith("label") else "invalid_prediction"
        if not isinstance(obj, dict):
            raise RowError("%s is %s, expected a JSON object" % (what, type_name(obj)), code)
        try:
            self._read(obj, protocol)
        except RowError as exc:        # name the side only now: messages are rare
            raise RowError("%s %s" % (what, exc), code)

    def _read(self, obj, protocol):
        # The memoized parsers behind parse_distance_km, parse_time_minutes and
        # parse_fare_cny, called directly: this runs for every route of every row.
        get = obj.get
        self.sequence = text_list(obj, "station_sequence")
        self.stations = route_stations(self.sequence)
        self.lines = text_list(obj, "line_sequence")
        self.distance_km = _parse_distance(get("total_distance"), "total_distance")
        self.time_min = (_parse_full_time if protocol.full_time_parsing else _parse_time)(
            get("total_time"), "total_time")
        self.fare_cny = _parse_fare(get("total_fare"), "total_fare")
        self.start_mode = _text_field(obj, "start_transfer_mode")
        self.end_mode = _text_field(obj, "end_transfer_mode")
        self.start_access_km = _parse_distance(get("start_transfer_distance"),
                                               "start_transfer_distance")
        self.end_access_km = _parse_distance(get("end_transfer_distance"),
                                             "end_transfer_distance")
        self.transit_lines = transit_line_count(self.lines)
        self.cycling_legs = (CYCLE in self.start_mode) + (CYCLE in self.end_mode)
        self.score = expert_score(self.time_min, self.transit_lines + self.cycling_legs,
                                  self.fare_cny)

    def line_signature(self, empty_mode_as_walk):
        return full_line_set(self.lines, self.start_mode, self.end_mode, empty_mode_as_walk)


def expert_score(time_min, legs, fare_cny):
    """S = T_sec / 300 + (transit lines + cycling legs) + fare."""
    return time_min * 60.0 / 300.0 + legs + fare_cny


def score_deviation_pct(score, label_score):
    return (score - label_score) / label_score * 100.0 if label_score > 0 else 0.0


def score_band(deviation_pct):
    if deviation_pct > SCORE_SAME_BAND_PCT:
        return "worse"
    if deviation_pct < -SCORE_SAME_BAND_PCT:
        return "better"
    return "same"


def check_reachability(stations, network, protocol):
    """Round 1: every consecutive pair of stations is one hop apart."""
    if len(stations) < protocol.min_connected_stations:
        return Verdict(False, "fewer than %d stations (%d)"
                       % (protocol.min_connected_stations, len(stations)), ("too_short",))
    if len(stations) < 2:
        return passed("fewer than 2 stations: nothing to connect")
    broken = network.broken_hop(stations)
    if broken is None:
        return passed("all %d hops connected", len(stations) - 1)
    here, there, known = broken
    if not known:
        return Verdict(False, "%s has no next-hop information" % here, ("unknown_station",))
    return Verdict(False, "%s -> %s not connected" % (here, there), ("broken_hop",))


def check_access(side, point, stop_point, stop, mode, access_km, protocol,
                 taxi_markers=TAXI_MARKERS):
    """Round 2 for one end of a route -> (station grounding, distance plausibility).

    ``side`` is "origin" or "destination"; ``stop_point`` the (lng, lat) of the
    first/last station or None when it has no coordinates.
    """
    station_word = "first" if side == "origin" else "last"
    if stop_point is None:
        return (Verdict(False, "%s station %s has no coordinates" % (station_word, stop),
                        (side + "_no_coordinates",)),
                Verdict(True, "not checked: %s station has no coordinates" % station_word))
    straight = haversine_km(point[0], point[1], stop_point[0], stop_point[1])
    limit = access_threshold_km(mode, taxi_markers)
    if straight > limit:
        grounding = Verdict(False, "%s station %s is %.2f km from the %s (limit %g km for %s)"
                            % (station_word, stop, straight, side, limit, mode or WALK),
                            (side + "_too_far",))
    else:
        grounding = passed("%s station within %g km", station_word, limit)
    return grounding, check_access_distance(side, straight, access_km, protocol)


def check_access_distance(side, straight, access_km, protocol):
    """Distance plausibility: d - slack <= predicted access distance <= 3d + slack."""
    if not access_km > 0:
        return passed("no %s access distance given", side)
    low = straight - protocol.dp_slack_km
    high = DP_RATIO * straight + protocol.dp_slack_km
    if access_km < low:
        return Verdict(False, "%s access distance %.2f km is shorter than the straight line "
                       "%.2f km" % (side, access_km, straight), (side + "_too_short",))
    if access_km > high:
        return Verdict(False, "%s access distance %.2f km exceeds %.2f km (3x straight line "
                       "%.2f km)" % (side, access_km, high, straight), (side + "_too_long",))
    return passed("%s access distance plausible", side)


def combine(verdicts, ok_reason):
    """All verdicts must pass; the reason is the first failure's."""
    failed = [v for v in verdicts if not v.ok]
    if failed:
        return Verdict(False, "; ".join(v.reason for v in failed),
                       [code for v in failed for code in v.codes])
    return passed(ok_reason)


def check_grounding(route, origin, destination, network, protocol):
    """Round 2 on both ends -> (station grounding, distance plausibility)."""
    if not route.stations:
        return (Verdict(True, "not checked: no stations"),
                Verdict(True, "not checked: no stations"))
    first, last = route.stations[0], route.stations[-1]
    start = check_access("origin", origin, network.coords(first), first,
                         route.start_mode, route.start_access_km, protocol)
    end = check_access("destination", destination, network.coords(last), last,
                       route.end_mode, route.end_access_km, protocol)
    return (combine([start[0], end[0]], "both ends within their access limits"),
            combine([start[1], end[1]], "access distances plausible"))


def transfer_modes_match(pred, label):
    return ((pred.start_mode or WALK) == (label.start_mode or WALK)
            and (pred.end_mode or WALK) == (label.end_mode or WALK))


def line_overlap(pred, label, protocol, names=None):
    """LO: raw line-name IoU (reference) or full-line-set IoU (paper).

    ``names`` maps a line name list to the names compared (the general LLM
    compares suffix-stripped names); default: as given.
    """
    pred_lines = names(pred.lines) if names else pred.lines
    label_lines = names(label.lines) if names else label.lines
    if protocol.line_set_with_access:
        return iou(full_line_set(pred_lines, pred.start_mode, pred.end_mode, True),
                   full_line_set(label_lines, label.start_mode, label.end_mode, True))
    return iou(pred_lines, label_lines)


def mape_pct(value, label_value):
    return abs(value - label_value) / label_value * 100.0 if label_value > 0 else 0.0


def within(value, label_value, absolute):
    """Accurate: within 10 % of the label or within the absolute tolerance."""
    return (mape_pct(value, label_value) <= RELATIVE_TOLERANCE_PCT
            or abs(value - label_value) <= absolute)


def access_distance_accurate(value, label_value):
    return not label_value > 0 or abs(value - label_value) <= TRANSFER_DISTANCE_TOLERANCE_KM


def compare_routes(pred, label, protocol, names=None, station_sets=None):
    """Rounds 3 and 4 of one route against its label -> dict of figures.

    ``station_sets`` overrides the station lists compared (the general LLM
    compares normalised names).
    """
    pred_stations, label_stations = station_sets or (pred.stations, label.stations)
    line_iou = line_overlap(pred, label, protocol, names)
    station_iou = iou(pred_stations, label_stations)
    modes_match = transfer_modes_match(pred, label)
    if protocol.exact_match_needs_lines:
        exact = line_iou == 1 and station_iou == 1
    else:
        exact = station_iou == 1 and modes_match
    deviation = score_deviation_pct(pred.score, label.score)
    start_ok = access_distance_accurate(pred.start_access_km, label.start_access_km)
    end_ok = access_distance_accurate(pred.end_access_km, label.end_access_km)
    record = {
        "line_iou": line_iou,
        "station_iou": station_iou,
        "station_iou_exact": station_iou == 1,
        "transfer_mode_match": modes_match,
        "exact_match": exact,
        "score": pred.score,
        "label_score": label.score,
        "score_deviation_pct": deviation,
        "score_band": score_band(deviation),
        "distance_mape_pct": mape_pct(pred.distance_km, label.distance_km),
        "time_mape_pct": mape_pct(pred.time_min, label.time_min),
        "fare_mape_pct": mape_pct(pred.fare_cny, label.fare_cny),
        "distance_accurate": within(pred.distance_km, label.distance_km, DISTANCE_TOLERANCE_KM),
        "time_accurate": within(pred.time_min, label.time_min, TIME_TOLERANCE_MIN),
        "fare_accurate": within(pred.fare_cny, label.fare_cny, FARE_TOLERANCE_CNY),
        "transfer_accurate": start_ok and end_ok,
    }
    record["overall_accurate"] = (record["distance_accurate"] and record["time_accurate"]
                                  and record["fare_accurate"])
    return record


def judge_route(pred, label, origin, destination, network, protocol, reach=None):
    """All checks of one predicted route against its label -> record fields.

    ``_codes`` holds the failure codes of Rounds 1-2 by stage; ``finish_record``
    turns it into the row's ``failure_codes``.  ``reach``: the route's
    check_reachability verdict when the caller has it already.
    """
    if reach is None:
        reach = check_reachability(pred.stations, network, protocol)
    grounding, plausibility = check_grounding(pred, origin, destination, network, protocol)
    record = {
        "reachable": reach.ok, "reachable_reason": reach.reason,
        "station_grounding": grounding.ok, "station_grounding_reason": grounding.reason,
        "distance_plausibility": plausibility.ok,
        "distance_plausibility_reason": plausibility.reason,
        "_codes": {"reachability": reach.codes, "grounding": grounding.codes,
                   "plausibility": plausibility.codes},
    }
    record.update(compare_routes(pred, label, protocol))
    return record


def judge_single_route(row, protocol, network, drawings=True):
    """Checks of one single-route row (benchmarks 1 and 2) -> (record fields,
    predicted Route, label Route).  ``drawings``: add both routes as judged
    (see Context.route_drawings)."""
    label = Route(row.label, protocol, "label")
    pred = Route(row.prediction, protocol, "prediction")
    fields = judge_route(pred, label, row.origin, row.destination, network, protocol)
    if drawings:
        fields["prediction_routes"] = {"first": route_json(pred)}
        fields["label_routes"] = {"first": route_json(label)}
    return fields, pred, label


def route_json(route, stations=None):
    """A route as judged, for the details (enough to draw it without the input).

    ``leg_sizes``: how many of ``stations`` each leg between 【换乘】 markers
    holds, so a drawing can colour each leg by its line.  ``stations``
    overrides the station list (the general LLM's matched names; no legs).
    """
    if stations is not None:
        return {"stations": stations, "lines": route.lines,
                "start_mode": route.start_mode, "end_mode": route.end_mode}
    return {"stations": route.stations,
            "leg_sizes": leg_sizes(route.sequence, len(route.stations)),
            "lines": route.lines, "start_mode": route.start_mode,
            "end_mode": route.end_mode}


def leg_sizes(sequence, station_count=None):
    """Stations per leg of a station_sequence split at 【换乘】: ["A", "B", "【换乘】",
    "B", "C"] -> [2, 2]; legs without a station are left out.  ``station_count``:
    len(route_stations(sequence)) when the caller has it."""
    if TRANSFER not in sequence:        # the common single-line case, in C
        count = len(route_stations(sequence)) if station_count is None else station_count
        return [count] if count else []
    sizes, count = [], 0
    for entry in sequence:
        entry = entry.strip()
        if entry == TRANSFER:
            if count:
                sizes.append(count)
            count = 0
        elif entry:
            count += 1
    if count:
        sizes.append(count)
    return sizes


# ---------------------------------------------------------------------------
# 5. Per-row records
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


def base_record(sample):
    return {"row": sample.row, "index_id": sample.index_id, "status": "evaluated",
            "error": None, "city": None, "origin": None, "destination": None,
            "in_funnel": True, "prediction_routes": None, "label_routes": None,
            "other_failures": []}


def error_record(sample, message, in_funnel, status="error", code=None):
    """A row that was not evaluated: ``status`` error (code ``error.<code>``) or
    no_response; it carries that one failure code and no other."""
    record = base_record(sample)
    record.update(status=status, error=message, in_funnel=in_funnel, reachable=False,
                  failed_round=None,
                  failure_codes=[NO_RESPONSE] if status == NO_RESPONSE else ["error." + code])
    return record


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
        codes.extend(code for key, code in _ACCURACY_CODES if not record[key])
    return codes


def finish_record(record, benchmark, protocol):
    """Add ``failed_round`` and ``failure_codes`` to an evaluated row's record."""
    record["failed_round"] = failed_round(record)
    codes = funnel_failure_codes(record, record.pop("_codes", None) or {})
    codes.extend(benchmark.scenario_codes(record, protocol))
    record["failure_codes"] = codes
    return record


# ---------------------------------------------------------------------------
# 6. The funnel engine
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


class FunnelTotals(object):
    """Row counts and Rounds 1-4, folded one record at a time."""

    # add() only adds to its numbers (a worker's copy records them: see Aggregate).

    def __init__(self):
        self.status = {"evaluated": 0, "error": 0, "no_response": 0}
        self.entered = 0
        self.reachable = 0
        self.grounded = 0
        self.plausible = 0
        self.station_exact = 0
        self.bands = {"worse": 0, "better": 0, "same": 0}
        self.overlap_sums = [0.0] * 5   # line IoU, station IoU, score, label, deviation
        self.exact = 0
        self.accurate = {"distance": 0, "time": 0, "fare": 0, "transfer": 0, "overall": 0}
        self.accuracy_sums = [0.0] * 5  # distance, time, fare MAPE, score, label

    def add(self, record):
        self.status[record["status"]] += 1
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
        sums = self.overlap_sums
        for index, key in enumerate(_OVERLAP_SUM_KEYS):
            sums[index] += _number(record[key])
        if not record["exact_match"]:
            return
        self.exact += 1
        accurate = self.accurate
        for key in ("distance", "time", "fare", "transfer", "overall"):
            accurate[key] += bool(record[key + "_accurate"])
        sums = self.accuracy_sums
        for index, key in enumerate(_ACCURACY_SUM_KEYS):
            sums[index] += _number(record[key])

    def counts(self):
        status = self.status
        return {"samples": sum(status.values()), "evaluated": status["evaluated"],
                "errors": status["error"], "no_response": status["no_response"]}

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
    # 0.0 and their counts at 0) becomes an _Addends, every count 0.
    if type(value) is float:
        return _Addends()
    if type(value) is int:
        return 0
    if type(value) is dict:
        return {key: _defer(item) for key, item in value.items()}
    if type(value) is list:
        return [_defer(item) for item in value]
    return value


def _totals_state(value):
    # Picklable: containers as dicts and tuples, what was added as plain lists.
    if type(value) is _Addends:
        return list(value)
    if type(value) is dict:
        return {key: _totals_state(item) for key, item in value.items()}
    if type(value) is list:
        return tuple(_totals_state(item) for item in value)
    return value


def _merge_totals(current, incoming):
    if type(incoming) is list:                     # what a worker added, in order
        return plain_sum(incoming, current)
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

    def __init__(self, benchmark, protocol, deferred=False):
        self.benchmark = benchmark
        self.protocol = protocol
        self.funnel = FunnelTotals()
        self.scenario = benchmark.totals(protocol)
        if deferred:
            for totals in (self.funnel, self.scenario):
                if totals is not None:
                    for name, value in vars(totals).items():
                        setattr(totals, name, _defer(value))

    def add(self, record):
        self.funnel.add(record)
        if self.scenario is not None:
            self.scenario.add(record)

    def deferred(self):
        """A new, empty deferred Aggregate of the same benchmark (for a worker's chunk)."""
        return Aggregate(self.benchmark, self.protocol, deferred=True)

    def state(self):
        """What a deferred Aggregate added, picklable, for merge()."""
        return [{name: _totals_state(value) for name, value in vars(totals).items()
                 if type(value) in (int, _Addends, dict, list)}
                if totals is not None else None for totals in (self.funnel, self.scenario)]

    def merge(self, state):
        for totals, names in zip((self.funnel, self.scenario), state):
            for name, value in (names or {}).items():
                setattr(totals, name, _merge_totals(getattr(totals, name), value))

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
        return figures


# Scenario scripts by report name (the workflow tools fold details with them).
BENCHMARKS = {"single_route": ("single_route.evaluate", "SingleRoute"),
              "personalized": ("personalized.evaluate", "Personalized"),
              "diversity": ("diversity.evaluate", "Diversity"),
              "general_llm": ("general_llm.evaluate", "GeneralLLM")}


def load_benchmark(name):
    """The Benchmark of a report's ``benchmark`` name (InputError if unknown)."""
    import importlib
    if name not in BENCHMARKS:
        raise InputError("unknown benchmark %r (known: %s)" % (name, ", ".join(BENCHMARKS)))
    if PROJECT_DIR not in sys.path:
        sys.path.insert(0, PROJECT_DIR)
    module_name, class_name = BENCHMARKS[name]
    return getattr(importlib.import_module(module_name), class_name)()


def aggregate_records(benchmark_name, protocol_name, records):
    """Fold records (dicts as in details.jsonl) into the report's figures, with the
    evaluator's own aggregation: {"counts", "rounds", "diversity"?, "metrics"}."""
    if protocol_name not in PROTOCOLS:
        raise InputError("unknown protocol %r" % (protocol_name,))
    aggregate = Aggregate(load_benchmark(benchmark_name), PROTOCOLS[protocol_name])
    for record in records:
        aggregate.add(record)
    return aggregate.figures()


# ---------------------------------------------------------------------------
# 7. Reports
# ---------------------------------------------------------------------------

def report_json(report):
    """The report as deterministic JSON text (sorted keys, no NaN)."""
    text = json.dumps(_finite(report), ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    return text if _encodable(text) else \
        json.dumps(_finite(report), ensure_ascii=True, indent=1, sort_keys=True) + "\n"


def _encodable(text):
    # A lone surrogate ("\ud800" from a JSON escape in model output) cannot be
    # written as UTF-8; such text is written with \u escapes instead.
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _finite(value):
    # A model may write "NaN" as a distance and float() accepts it; JSON cannot
    # hold NaN, so a non-finite figure is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


# A value no input can hold (a random nonce between NUL characters): the row
# number's place in a details line rendered in one go (details_parts).
_ROW_MARK = "\x00row-%s\x00" % os.urandom(16).hex()
_ROW_MARK_BYTES = json.dumps(_ROW_MARK).encode()


def _details_text(record, ensure_ascii=False):
    try:
        return json.dumps(record, ensure_ascii=ensure_ascii, sort_keys=True, allow_nan=False)
    except ValueError:                  # a non-finite figure: written as null
        return json.dumps(_finite(record), ensure_ascii=ensure_ascii, sort_keys=True)


def details_parts(record):
    """A details line in two parts around the row number, as UTF-8 bytes.

    A worker process that reads its own rows numbers them from 1; the parent,
    which knows how many rows came before, writes ``head + N + tail``
    (details_line): the same bytes as json.dumps of the whole record with
    sorted keys, \\u escapes where UTF-8 cannot go, non-finite figures as null.
    """
    marked = dict(record, row=_ROW_MARK)
    try:
        data = _details_text(marked).encode("utf-8")
    except UnicodeEncodeError:
        data = _details_text(marked, ensure_ascii=True).encode()
    if data.count(_ROW_MARK_BYTES) == 1:          # always, unless the nonce is guessed
        head, _, tail = data.partition(_ROW_MARK_BYTES)
        return head, tail + b"\n"
    return _details_parts_by_keys(record)


def _details_parts_by_keys(record):
    """details_parts without the mark: the keys before and after "row" rendered apart."""
    before = {key: value for key, value in record.items() if key < "row"}
    after = {key: value for key, value in record.items() if key > "row"}
    texts = [_details_text(part) for part in (before, after)]
    try:
        head, tail = (text.encode("utf-8") for text in texts)
    except UnicodeEncodeError:
        head, tail = (_details_text(part, ensure_ascii=True).encode() for part in (before, after))
    # '{"a": 1}' and '{"z": 2}' -> '{"a": 1, "row": ' and ', "z": 2}\n'
    head = head[:-1] + (b", " if len(head) > 2 else b"") + b'"row": '
    tail = (b", " if len(tail) > 2 else b"") + tail[1:] + b"\n"
    return head, tail


def details_line(head, row, tail):
    return b"%s%d%s" % (head, row, tail)


def details_bytes(record):
    """One details line as UTF-8 bytes (sorted keys; \\u escapes where UTF-8 cannot go)."""
    head, tail = details_parts(record)
    return details_line(head, record["row"], tail)


# Control characters (C0, DEL, C1) in model text would reach the terminal raw
# (ANSI escape sequences): everything printed goes through printable().
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text):
    """Text safe to print: control characters as \\x.. escapes, lone surrogates as \\u...."""
    text = _CONTROL_RE.sub(lambda match: "\\x%02x" % ord(match.group()), str(text))
    if not _encodable(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def fmt_pct(part, whole):
    return "%5.1f%%" % (100.0 * part / whole) if whole else "    - "


def fmt_num(value, decimals):
    return "-" if value is None else "%.*f" % (decimals, value)


class TextReport(object):
    """Aligned plain-text lines: sections, counted rows and value rows."""

    LABEL_WIDTH = 38

    def __init__(self):
        self.lines = []

    def title(self, text):
        if self.lines:
            self.lines.append("")
        self.lines.append(text)

    def count(self, label, value, whole=None):
        pct = "  " + fmt_pct(value, whole) if whole is not None else ""
        self.lines.append("  %-*s %8d%s" % (self.LABEL_WIDTH, label, value, pct))

    def value(self, label, text):
        self.lines.append("  %-*s %8s" % (self.LABEL_WIDTH, label, text))

    def text(self, line):
        self.lines.append(line)

    def render(self):
        return "\n".join(self.lines) + "\n"


def render_funnel(out, rounds, labels=None):
    """Rounds 1-4 as text; ``labels`` renames a round's title."""
    labels = labels or {}
    reach, ground = rounds["reachability"], rounds["grounding"]
    overlap, acc = rounds["overlap"], rounds["accuracy"]
    out.title(labels.get("reachability", "Round 1  Reachability"))
    out.count("input", reach["input"])
    out.count("reachable", reach["passed"], reach["input"])
    out.title(labels.get("grounding", "Round 2  Station grounding and distance plausibility"))
    out.count("input (reachable)", ground["input"])
    out.count("station grounding", ground["station_grounding"], ground["input"])
    out.count("distance plausibility", ground["distance_plausibility"], ground["input"])
    out.title(labels.get("overlap", "Round 3  Line and station overlap"))
    out.count("input (reachable)", overlap["input"])
    out.value("line IoU mean", fmt_num(overlap["line_iou_mean"], 4))
    out.value("station IoU mean", fmt_num(overlap["station_iou_mean"], 4))
    out.count("station IoU = 1", overlap["station_iou_exact"], overlap["input"])
    out.count("exact match", overlap["exact_match"], overlap["input"])
    out.value("expert score mean (prediction)", fmt_num(overlap["expert_score_mean"], 2))
    out.value("expert score mean (label)", fmt_num(overlap["label_expert_score_mean"], 2))
    out.value("score deviation mean (%)", fmt_num(overlap["score_deviation_pct_mean"], 2))
    out.count("score worse than label", overlap["score_worse"], overlap["input"])
    out.count("score better than label", overlap["score_better"], overlap["input"])
    out.count("score same as label (within 0.1%)", overlap["score_same"], overlap["input"])
    out.title(labels.get("accuracy", "Round 4  Estimation accuracy"))
    out.count("input (exact matches)", acc["input"])
    for key, label in (("distance", "distance (10% or 0.5 km)"),
                       ("time", "time (10% or 5 min)"),
                       ("fare", "fare (10% or 1 CNY)"),
                       ("transfer", "access distances (0.5 km)"),
                       ("overall", "overall (distance, time and fare)")):
        out.count(label, acc[key], acc["input"])
    out.value("distance MAPE (%)", fmt_num(acc["distance_mape_pct"], 2))
    out.value("time MAPE (%)", fmt_num(acc["time_mape_pct"], 2))
    out.value("fare MAPE (%)", fmt_num(acc["fare_mape_pct"], 2))
    out.value("expert score mean (prediction)", fmt_num(acc["expert_score_mean"], 2))
    out.value("expert score mean (label)", fmt_num(acc["label_expert_score_mean"], 2))


def summary_line(metrics):
    """The paper's layout: Conn 97.0% | SG 98.5% | ... | MAPE 1.33%."""
    def pct(key):
        value = metrics.get(key)
        return "-" if value is None else "%.1f%%" % (100.0 * value)

    def frac(key):
        value = metrics.get(key)
        return "-" if value is None else "%.3f" % value

    parts = ["Conn " + pct("conn"), "SG " + pct("sg"), "DP " + pct("dp"),
             "LO " + frac("lo"), "SSO " + frac("sso"), "REM " + pct("rem"),
             "EA " + pct("ea"),
             "MAPE " + ("-" if metrics.get("mape") is None else "%.2f%%" % metrics["mape"])]
    if "pc" in metrics:
        parts.append("PC " + pct("pc"))
    if "rd" in metrics:
        parts.append("RD " + frac("rd"))
    return " | ".join(parts)


def render_header(out, report, title):
    counts = report["counts"]
    inputs = report["inputs"]
    out.text("%s   (protocol: %s)" % (title, report["protocol"]))
    out.text("  input         %s  (field %s)" % (printable(inputs["input"]),
                                                 inputs["input_field"]))
    if inputs.get("predictions"):
        out.text("  predictions   %s" % printable(inputs["predictions"]))
    out.text("  stations      %s" % printable(inputs["station_info"]))
    if inputs.get("line_info"):
        out.text("  lines         %s" % printable(inputs["line_info"]))
    if inputs.get("api_url"):
        out.text("  route-eval    %s" % printable(inputs["api_url"]))
    out.text("  samples %d   evaluated %d   errors %d   no response %d"
             % (counts["samples"], counts["evaluated"], counts["errors"],
                counts["no_response"]))
    notes = report.get("input_notes", {})
    join = notes.get("predictions_join")
    if join:
        out.text("  predictions: %d read, %d joined, %d test rows without one"
                 % (join["predictions"], join["joined"], join["missing"]))
    for warning in report.get("warnings", ()):
        out.text("  WARNING: " + printable(warning))
    if notes.get("json_extracted"):
        out.text("  %d prediction(s) had text around the JSON; the first JSON object was used"
                 % notes["json_extracted"])


def overlap_reason(record):
    """Why a reachable route is not an exact match, in words."""
    parts = []
    if record["station_iou"] != 1:
        parts.append("station IoU %.3f" % record["station_iou"])
    if record["line_iou"] != 1:
        parts.append("line IoU %.3f" % record["line_iou"])
    if not record["transfer_mode_match"]:
        parts.append("access modes differ from the label")
    return ", ".join(parts) or "not an exact match"


def accuracy_reason(record):
    parts = []
    for field in ("distance", "time", "fare"):
        if not record[field + "_accurate"]:
            parts.append("%s off by %.1f%%" % (field, record[field + "_mape_pct"]))
    return ", ".join(parts) or "accurate"


def row_failures(record):
    """Every failed check of a row as "topic: reason" strings (text report)."""
    if record["status"] == "error":
        return ["error: " + record["error"]]
    if record["status"] == NO_RESPONSE:
        return ["no response: " + record["error"]]
    out = []
    if record.get("in_funnel"):
        if not record.get("reachable"):
            out.append("reachability: " + record["reachable_reason"])
        else:
            if not record["station_grounding"]:
                out.append("grounding: " + record["station_grounding_reason"])
            if not record["distance_plausibility"]:
                out.append("plausibility: " + record["distance_plausibility_reason"])
            if not record["exact_match"]:
                out.append("overlap: " + overlap_reason(record))
            elif not record["overall_accurate"]:
                out.append("accuracy: " + accuracy_reason(record))
    out.extend(record.get("other_failures", ()))
    return out


def failure_text(record):
    """The text report's line for a row with a failed check, without its row
    number (failure_line_for adds it), or None."""
    failures = row_failures(record)
    if not failures:
        return None
    return printable("%s  %s" % (record["index_id"] or "(no id)", "; ".join(failures))) + "\n"


def failure_line_for(row, text):
    return "  row %-6d %s" % (row, text)


def failure_line(record):
    """The text report's line for a row with a failed check, or None."""
    text = failure_text(record)
    return None if text is None else failure_line_for(record["row"], text)


def failures_title(failing, samples):
    return "\nRows with a failed check (%d of %d)\n" % (failing, samples)


def render_summary(out, report):
    out.title("Summary (%s protocol)" % report["protocol"])
    out.text("  " + summary_line(report["metrics"]))
    out.text("  signature: " + printable(report["signature"]))


# ---------------------------------------------------------------------------
# 8. The engine's driver: options, the evaluation stream, the Python API, the CLI
# ---------------------------------------------------------------------------

PROJECT_DIR = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(PROJECT_DIR, "data")
DATA_ENV = "TRANSITLM_DATA"
STATION_FILE_NAMES = ("station_info.csv", "transit-lm-station-info.csv")
LINE_FILE_NAMES = ("line_info.csv", "transit-lm-line-info.csv")
BATCH_ROWS = 256                 # rows decoded and judged together


def default_data_file(names):
    """A data file from $TRANSITLM_DATA if it holds one, else the bundled one."""
    folder = os.environ.get(DATA_ENV)
    if folder:
        for name in names:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
    return os.path.join(DATA_DIR, names[0])


class Benchmark(object):
    """What a scenario script provides to the engine; subclass and override.

    Every hook returns values; none edits the report.
    """

    name = ""                    # report "benchmark"
    title = ""
    default_input = ""           # file name in data/
    needs_req_type = False
    empty_prediction_is_no_response = False
    station_names = False        # routes name stations (general LLM) instead of ids

    def option_defaults(self):
        """The scenario's own options and their defaults (beside Options.DEFAULTS)."""
        return {}

    def figure_options(self):
        """Scenario options that can change a figure (recorded in the report)."""
        return ()

    def add_arguments(self, parser):
        pass

    def prepare(self, context):
        """Load what the scenario needs (called once, after the station file)."""

    def inputs(self, context):
        """Scenario input files and services -> dict for the report's ``inputs``."""
        return {}

    def input_hashes(self, context):
        """SHA-256 of the scenario's input files by role (``inputs.sha256``)."""
        return {}

    def sample_fields(self, sample):
        """Fields every record of this sample carries, error rows included."""
        return {}

    def in_funnel_default(self, protocol):
        """Do error and no-response rows enter Round 1?"""
        return True

    def evaluate(self, row, context):
        """Evaluate one decoded row -> record fields (raise RowError if it can't)."""
        raise NotImplementedError

    def evaluate_batch(self, rows, context):
        """Evaluate decoded rows -> a list of record fields or RowError, in order."""
        out = []
        for row in rows:
            try:
                out.append(self.evaluate(row, context))
            except RowError as exc:
                out.append(exc.detached())      # see RowError
        return out

    def scenario_codes(self, record, protocol):
        """Failure codes of the scenario's own stages (preference, diversity)."""
        return []

    def totals(self, protocol):
        """Running totals of the scenario's sections (an object with add(record)
        and sections() -> {"rounds": {...}} and/or other report keys), or None."""
        return None

    def can_run_in_workers(self, context):
        """May rows be split across worker processes (--workers)?"""
        return True

    def render(self, out, report):
        render_funnel(out, report["rounds"])

    def warnings(self, context):
        """Lines for the report's warnings (after the run)."""
        return []


class Options(object):
    """What a run depends on besides its rows: the CLI's flags or the API's keywords.

    The engine reads only this (never an argparse namespace).
    """

    DEFAULTS = {"input": None, "input_field": "generate_results", "predictions": None,
                "strict_json": False, "sample_count": None, "station_info": None,
                "protocol": "reference", "workers": 1, "quiet": True}
    # Options that can change a figure or the row set: recorded in the report.
    FIGURE_OPTIONS = ("protocol", "input_field", "sample_count", "strict_json")

    def __init__(self, benchmark, **values):
        defaults = dict(self.DEFAULTS)
        defaults.update(benchmark.option_defaults())
        unknown = sorted(set(values) - set(defaults))
        if unknown:
            raise InputError("unknown option(s) %s (known: %s)"
                             % (", ".join(unknown), ", ".join(sorted(defaults))))
        defaults.update(values)
        self.__dict__.update(defaults)
        if self.protocol not in PROTOCOLS:
            raise InputError("unknown protocol %r (known: %s)"
                             % (self.protocol, ", ".join(sorted(PROTOCOLS))))
        self.figure_options = self.FIGURE_OPTIONS + tuple(benchmark.figure_options())

    def recorded(self):
        return {key: getattr(self, key) for key in self.figure_options}


class DecodedRow(object):
    """A sample whose cells are decoded: origin, destination, city, label, prediction."""

    __slots__ = ("sample", "origin", "destination", "city", "label", "prediction", "index")

    def __init__(self, sample, origin, destination, city, label, prediction):
        self.index = None
        self.sample = sample
        self.origin = origin
        self.destination = destination
        self.city = city
        self.label = label
        self.prediction = prediction


class Context(object):
    """What evaluation needs besides the row: network, protocol, options."""

    def __init__(self, options, protocol, network):
        self.options = options
        self.protocol = protocol
        self.network = network
        # Records carry the routes as judged (prediction_routes, label_routes:
        # see route_json) only for an output that shows them: the details, the
        # HTML page (drawn from the details) and the Python API's records.
        self.route_drawings = True
        # Counts reported under input_notes (e.g. json_extracted: predictions
        # whose JSON was cut out of surrounding text); summed across workers.
        self.tally = {}

    def count(self, key, amount=1):
        self.tally[key] = self.tally.get(key, 0) + amount


class Progress(object):
    """One updating progress line (rows done, rows/s, ETA) for long runs.

    Shown only when enabled (stderr is a terminal and not --quiet), and only
    after DELAY seconds, so short runs print nothing.
    """

    DELAY = 2.0
    INTERVAL = 0.25

    def __init__(self, total, enabled, stream=None, clock=time.time, fraction=None):
        self.total = total              # None when the row count is not known yet
        self.fraction = fraction        # () -> share of the input read, for the ETA
        self.done = 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.clock = clock
        self.start = clock()
        self.last = self.start
        self.shown = False

    def step(self, count=1):
        self.done += count
        if not self.enabled:
            return
        now = self.clock()
        if now - self.start < self.DELAY or now - self.last < self.INTERVAL:
            return
        self.last = now
        rate = self.done / (now - self.start)
        share = self.fraction() if self.fraction else None
        if self.total:
            eta = (self.total - self.done) / rate if rate else 0.0
            line = "\r  %d/%d rows  %.0f rows/s  ETA %.0f s " % (self.done, self.total, rate, eta)
        elif share:
            eta = (now - self.start) * (1.0 - share) / share
            line = "\r  %d rows  %.0f%%  %.0f rows/s  ETA %.0f s " % (
                self.done, 100.0 * share, rate, eta)
        else:
            line = "\r  %d rows  %.0f rows/s " % (self.done, rate)
        self.stream.write(line)
        self.stream.flush()
        self.shown = True

    def finish(self):
        if self.shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


# -- the row stream -----------------------------------------------------------

def _is_empty_prediction(sample):
    value = sample.prediction
    return value is None or (isinstance(value, str) and not value.strip())


class RowJudge(object):
    """Turns samples into finished records: decoding, the scenario's checks,
    failure codes.  One per run (and per worker process)."""

    def __init__(self, benchmark, context):
        self.benchmark = benchmark
        self.context = context
        self.protocol = context.protocol
        options = context.options
        self.lenient = bool(options.predictions) and not options.strict_json
        self.empty_is_no_response = (benchmark.empty_prediction_is_no_response
                                     or bool(options.predictions))
        self.in_funnel = benchmark.in_funnel_default(context.protocol)

    def _not_evaluated(self, sample, message, status="error", code=None, prompt=None):
        record = error_record(sample, message, self.in_funnel, status, code)
        if prompt is not None:
            record["origin"], record["destination"], record["city"] = prompt
        record.update(self.benchmark.sample_fields(sample))
        if sample.generator_error is not None:
            record["generator_error"] = sample.generator_error
        return record

    def decode(self, sample):
        """A sample -> DecodedRow, or the finished record of a row not evaluated."""
        if sample.problem:
            code, message = sample.problem
            return self._not_evaluated(sample, message, code=code)
        try:
            prompt = read_prompt(sample.prompt)
        except RowError as exc:
            return self._not_evaluated(sample, str(exc), code=exc.code)
        origin, destination, city = prompt
        if not sample.has_prediction:
            message = ("generator error: %s" % sample.generator_error
                       if sample.generator_error is not None else "no prediction for this id")
            return self._not_evaluated(sample, message, NO_RESPONSE, prompt=prompt)
        # An empty output: the general-LLM evaluator (as published) and a
        # predictions file call it no response; inline it is unreadable JSON.
        if self.empty_is_no_response and _is_empty_prediction(sample):
            return self._not_evaluated(sample, "empty prediction", NO_RESPONSE, prompt=prompt)
        try:
            label, _ = decode_json(sample.label, "sft_label", code="invalid_label")
            prediction, extracted = decode_json(sample.prediction, "prediction", self.lenient)
        except RowError as exc:
            return self._not_evaluated(sample, str(exc), code=exc.code, prompt=prompt)
        if extracted:
            self.context.count("json_extracted")
        return DecodedRow(sample, origin, destination, city, label, prediction)

    def records(self, samples):
        """Samples (an iterator) -> finished records, one per sample, in order.

        Rows go through in batches of BATCH_ROWS (the general LLM judges a
        batch with one request), so memory holds one batch, never the run.
        """
        batch = []
        for sample in samples:
            batch.append(self.decode(sample))
            if len(batch) >= BATCH_ROWS:
                for record in self._judge(batch):
                    yield record
                batch = []
        if batch:
            for record in self._judge(batch):
                yield record

    def _judge(self, batch):
        rows = [item for item in batch if isinstance(item, DecodedRow)]
        results = iter(self.benchmark.evaluate_batch(rows, self.context) if rows else ())
        for item in batch:
            if not isinstance(item, DecodedRow):
                yield item
                continue
            fields = next(results)
            sample = item.sample
            prompt = (item.origin, item.destination, item.city)
            if isinstance(fields, RowError):
                yield self._not_evaluated(sample, str(fields), code=fields.code, prompt=prompt)
                continue
            record = base_record(sample)
            record["origin"], record["destination"], record["city"] = prompt
            record.update(self.benchmark.sample_fields(sample))
            record.update(fields)
            yield finish_record(record, self.benchmark, self.protocol)


class RowSinks(object):
    """Where each finished row goes: the details file, the failure listing
    (spooled to a temporary file, printed after the rounds), the running
    aggregate and, for the Python API, a list."""

    def __init__(self, aggregate, details=None, failures=None, collect=None):
        self.aggregate = aggregate
        self.details = details          # binary file or None
        self.failures = failures        # text spool or None
        self.failing = 0
        self.collect = collect          # list or None

    def add(self, record):
        if self.details is not None:
            self.details.write(details_bytes(record))
        if self.failures is not None:
            line = failure_line(record)
            if line is not None:
                self.failures.write(line)
                self.failing += 1
        if self.collect is not None:
            self.collect.append(record)
        self.aggregate.add(record)

    def render_chunk(self, records):
        """A worker's side of add() for a chunk of records (an iterator, taken
        one at a time): their row numbers, details lines (in two parts around
        the row number: see details_parts), failure lines (without the row
        number) and the state of a deferred Aggregate of them.  add_chunk in
        the parent writes them, the row numbers shifted by ``offset``."""
        rows = []
        details = [] if self.details is not None else None
        failures = [] if self.failures is not None else None
        aggregate = self.aggregate.deferred()
        fold = aggregate.add
        for index, record in enumerate(records):
            rows.append(record["row"])
            fold(record)
            if details is not None:
                details.append(details_parts(record))
            if failures is not None:
                text = failure_text(record)
                if text is not None:
                    failures.append((index, text))
        return rows, details, failures, aggregate.state()

    def add_chunk(self, rows, details, failures, totals, offset=0):
        if self.details is not None:
            self.details.write(b"".join([details_line(head, row + offset, tail)
                                         for row, (head, tail) in zip(rows, details)]))
        if self.failures is not None:
            self.failures.write("".join([failure_line_for(rows[index] + offset, text)
                                         for index, text in failures]))
            self.failing += len(failures)
        self.aggregate.merge(totals)


MIN_ROWS_PER_WORKER = 500        # below this a worker costs more than it saves
CHUNK_ROWS = 1000                # rows a worker evaluates per task (read row by row)
_FORKED = None                   # (judge, sinks, sample file layout) inherited by workers
# The layout is (path, columns, width, file descriptor or None): see _evaluate_task.


def _can_fork():
    """Can --workers fork worker processes here (worker_pool needs fork and poll)?"""
    import select
    return hasattr(os, "fork") and hasattr(select, "poll")


def _evaluate_task(task):
    """Worker: evaluate one task -> the chunk's outputs (RowSinks.render_chunk
    plus the context's tally), None when a chunk ("bytes" or "span") did not
    end at the end of a record, or the message of an input-file error.

    A task is ("rows", SampleRow states), ("bytes", data, first line, final)
    (a chunk of the sample file that the worker parses itself: parse_chunk)
    or ("span", offset, length, first line, final): such a chunk, which the
    worker reads from the file itself (the descriptor it inherited).
    """
    judge, sinks, layout = _FORKED
    judge.context.tally = {}
    try:
        if task[0] == "span":
            path, columns, width, fd = layout
            data = read_span(fd, task[1], task[2])
            if len(data) != task[2]:
                return ("input file %s changed while it was evaluated (it is shorter "
                        "now); run again on a file that is not being written" % path)
            samples = parse_chunk(data, task[3], path, columns, width, final=task[4])
        elif task[0] == "bytes":
            samples = parse_chunk(task[1], task[2], *layout[:3], final=task[3])
        else:
            samples = map(SampleRow.from_state, task[1])
        outputs = sinks.render_chunk(judge.records(samples))
    except SplitRecord:
        return None
    except InputError as exc:
        return str(exc)
    return outputs + (judge.context.tally,)


def _row_tasks(samples):
    """SampleRows -> (task, None) pairs of CHUNK_ROWS rows each."""
    chunk = []
    for sample in samples:
        chunk.append(sample.state())
        if len(chunk) == CHUNK_ROWS:
            yield ("rows", chunk), None
            chunk = []
    if chunk:
        yield ("rows", chunk), None


def _byte_tasks(chunks, spans=False):
    """SampleReader.chunks() -> (task, chunk) pairs: the chunk's bytes sent to
    the worker, or only where they lie in the file (``spans``: see span_file)."""
    for chunk in chunks:
        data, first_line, final, offset = chunk
        if spans:
            yield ("span", offset, len(data), first_line, final), chunk
        else:
            yield ("bytes", data, first_line, final), chunk


def evaluate_in_workers(judge, tasks, sinks, progress, workers, reader=None):
    """Stream tasks (see _evaluate_task) through ``workers`` forked processes.

    This process hands out the tasks (at most two per worker in flight, so
    memory stays bounded) and adds every chunk's outputs in input order, so
    every output is byte-identical to a single-process run.  With "bytes"
    and "span" tasks it only reads and hashes the file: the workers parse
    it (and, for "span" tasks, read their chunk from the file themselves, so
    it is not sent through a pipe).  ``tasks`` yields (task, chunk) pairs
    (_byte_tasks, _row_tasks).  When a
    chunk turns out not to end at a record's end, the file is cut again from
    that chunk's first byte (``reader``'s recut) or, if that was done
    already, read row by row from there (rows_from).  The workers
    inherit the loaded network.  Returns False (nothing consumed) when no
    process pool can be made here.
    """
    import worker_pool
    global _FORKED
    layout = None
    if reader is not None:
        layout = (reader.path, reader.columns, reader.width, reader.span_file())
    _FORKED = (judge, sinks, layout)
    chunks_sent = collections.deque()   # the chunk of every task in flight, in order
    rows_done = 0
    try:
        pool = worker_pool.ForkedWorkers(workers, _evaluate_task)
    except OSError:                   # no more processes here: one process
        _FORKED = None
        return False
    try:
        with pool:
            while True:
                while pool.busy < 2 * workers:
                    task, chunk = next(tasks, (None, None))
                    if task is None:
                        break
                    pool.submit(task)
                    chunks_sent.append(chunk)
                if not pool.busy:
                    break
                outputs = pool.result()
                chunk = chunks_sent.popleft()
                if outputs is None:
                    # A record runs past this chunk (a line break inside a
                    # cell): from its first byte on, cut where the quotes are
                    # even or, if they already were, read row by row.
                    unread = [chunk] + list(chunks_sent)
                    chunks_sent.clear()
                    pool.discard()
                    chunks = reader.recut(unread)
                    tasks = (_byte_tasks(chunks, layout[3] is not None) if chunks is not None
                             else _row_tasks(reader.rows_from(unread, rows_done + 1)))
                    continue
                if isinstance(outputs, str):
                    raise InputError(outputs)
                rows, details, failures, totals, tally = outputs
                sinks.add_chunk(rows, details, failures, totals,
                                rows_done if chunk is not None else 0)
                rows_done += len(rows)
                for key, amount in tally.items():
                    judge.context.count(key, amount)
                progress.step(len(rows))
    except worker_pool.WorkerFailure as exc:
        raise WorkerFailed("%s while evaluating (out of memory?); nothing was written: run "
                           "again, or with --workers 1" % exc)
    finally:
        _FORKED = None
    return True


# -- inputs and the report ------------------------------------------------------

def short_hash(hex_digest):
    return (hex_digest or "none")[:8]


def signature_line(report):
    """One line naming everything the figures depend on (as sacreBLEU's signature):
    transitlm:1.1.0|single_route|protocol:reference|field:generate_results|rows:38|
    stations:889a5dbf|input:da737ae5, plus predictions, lines, service and any
    figure option that is not at its default."""
    inputs = report["inputs"]
    sha = inputs["sha256"]
    options = inputs["options"]
    parts = ["transitlm:" + report["version"], report["benchmark"],
             "protocol:" + report["protocol"], "field:" + options["input_field"],
             "rows:%d" % report["counts"]["samples"],
             "stations:" + short_hash(sha.get("station_info")),
             "input:" + short_hash(sha.get("input"))]
    if sha.get("predictions"):
        parts.append("predictions:" + short_hash(sha["predictions"]))
    if sha.get("line_info"):
        parts.append("lines:" + short_hash(sha["line_info"]))
    if inputs.get("api_url"):
        parts.append("service:" + inputs["api_url"])
    for key in sorted(options):
        value = options[key]
        if key in ("protocol", "input_field") or value in (None, False):
            continue
        parts.append(key if value is True else "%s:%s" % (key, value))
    return "|".join(parts)


def build_report(benchmark, aggregate, context, inputs, notes, warnings):
    report = {"schema_version": SCHEMA_VERSION, "version": VERSION,
              "benchmark": benchmark.name, "protocol": context.protocol.name,
              "inputs": inputs, "warnings": warnings}
    report.update(aggregate.figures())
    if notes:
        report["input_notes"] = notes
    report["signature"] = signature_line(report)
    return report


def render_text_head(benchmark, report):
    out = TextReport()
    render_header(out, report, benchmark.title)
    benchmark.render(out, report)
    return out.render()


def render_text_tail(report):
    out = TextReport()
    render_summary(out, report)
    return "\n" + out.render()


def evaluate_stream(benchmark, options, sinks_for, rows=None):
    """The engine: stream the rows through the checks into the sinks.

    ``sinks_for(aggregate)`` makes the RowSinks once the aggregate exists;
    ``rows`` (dicts) replaces the input file.  Returns (report, sinks, network).
    """
    protocol = PROTOCOLS[options.protocol]
    station_path = options.station_info or default_data_file(STATION_FILE_NAMES)
    prediction_column = None if options.predictions else options.input_field
    warnings = []
    workers = options.workers or os.cpu_count() or 1
    if rows is not None:
        source = RowsSource(rows, prediction_column, benchmark.needs_req_type,
                            options.sample_count)
    else:
        # With worker processes, they may parse the file themselves (chunked).
        source = SampleReader(options.input, prediction_column, benchmark.needs_req_type,
                              options.sample_count,
                              chunked=workers > 1 and not options.predictions)
    with source:
        predictions = None
        if options.predictions:
            predictions = PredictionsFile.read(options.predictions)
        network = StationNetwork.load(station_path, station_cache_folder())
        context = Context(options, protocol, network)
        benchmark.prepare(context)
        aggregate = Aggregate(benchmark, protocol)
        sinks = sinks_for(aggregate)
        context.route_drawings = sinks.details is not None or sinks.collect is not None
        samples = iter(source)
        if predictions is not None:
            samples = predictions.join(samples)
        progress = Progress(None, sys.stderr.isatty() and not options.quiet,
                            fraction=source.fraction_read)
        try:
            done = False
            if (workers > 1 and rows is None and sinks.collect is None and _can_fork()
                    and benchmark.can_run_in_workers(context)):
                judge = RowJudge(benchmark, context)
                if source.chunked:
                    # Read ahead a chunk per worker, to know how many the file can feed.
                    chunks = source.chunks()
                    head = list(itertools.islice(chunks, workers))
                    if len(head) > 1:
                        spans = source.span_file() is not None
                        done = evaluate_in_workers(
                            judge, _byte_tasks(itertools.chain(head, chunks), spans), sinks,
                            progress, len(head), source)
                    if not done:
                        samples = source.rows_from(head, 1)
                else:
                    # Read ahead enough rows to know how many workers the file can feed.
                    samples = _MinimumRows(samples, MIN_ROWS_PER_WORKER * workers)
                    workers = samples.known // MIN_ROWS_PER_WORKER
                    if workers > 1:
                        done = evaluate_in_workers(judge, _row_tasks(samples), sinks,
                                                   progress, workers)
            if not done:
                for record in RowJudge(benchmark, context).records(samples):
                    sinks.add(record)
                    progress.step()
        finally:
            progress.finish()
        input_hash = source.finish()
    sha = {"input": input_hash, "station_info": network.sha256}
    inputs = {"input": options.input if rows is None else "<rows>",
              "input_field": options.input_field, "predictions": options.predictions,
              "station_info": station_path, "line_info": None,
              "options": options.recorded(), "sha256": sha}
    inputs.update(benchmark.inputs(context))
    sha.update(benchmark.input_hashes(context))
    notes = {}
    warnings.extend(source.warnings)
    warnings.extend(network.warnings)
    if predictions is not None:
        sha["predictions"] = predictions.sha256
        notes["predictions_join"] = predictions.statistics()
        warnings.extend(predictions.warnings())
    notes.update(sorted(context.tally.items()))
    warnings.extend(benchmark.warnings(context))
    report = build_report(benchmark, aggregate, context, inputs, notes, warnings)
    return report, sinks, network


class _MinimumRows(object):
    """An iterator that first reads ahead up to ``limit`` items (``known`` of
    them were there), to tell how many worker processes a stream can feed."""

    def __init__(self, items, limit):
        self._items = iter(items)
        self._head = []
        for item in self._items:
            self._head.append(item)
            if len(self._head) >= limit:
                break
        self.known = len(self._head)

    def __iter__(self):
        head, self._head = self._head, []
        for item in head:
            yield item
        for item in self._items:
            yield item


def evaluate(benchmark_name, rows=None, **options):
    """Score rows from Python -> (report, records).

    ``rows``: dicts with ``index_id`` (or ``indexid``), ``sft_prompt``,
    ``sft_label``, the prediction under ``generate_results`` (text or an
    already-decoded object) and ``req_type`` for benchmark 2; or None to read
    ``input=PATH``.  Other keywords are the CLI's options (``protocol``,
    ``station_info``, ``predictions``, ...).  Raises InputError for a
    problem with the inputs; bad rows become error records, as in the CLI.
    """
    benchmark = load_benchmark(benchmark_name)
    if rows is None and not options.get("input"):
        options["input"] = os.path.join(DATA_DIR, benchmark.default_input)
    opts = Options(benchmark, **options)
    records = []
    report, _, _ = evaluate_stream(benchmark, opts,
                                   lambda aggregate: RowSinks(aggregate, collect=records),
                                   rows=rows)
    return report, records


# -- the command line -------------------------------------------------------------

def build_parser(benchmark):
    parser = argparse.ArgumentParser(
        prog=os.path.join(os.path.basename(os.path.dirname(sys.argv[0]) or "."),
                          os.path.basename(sys.argv[0])),
        description="%s: score model routes against the station graph (TransitLM)."
        % benchmark.title)
    parser.add_argument("--input", default=os.path.join(DATA_DIR, benchmark.default_input),
                        help="sample CSV (default: the bundled example data/%s)"
                        % benchmark.default_input)
    parser.add_argument("--input_field", choices=("generate_results", "sft_label"),
                        default="generate_results",
                        help="column holding the prediction; sft_label scores the label "
                             "against itself (a sanity check)")
    parser.add_argument("--predictions", metavar="PATH",
                        help="model outputs in a separate file (JSON Lines or CSV with "
                             "index_id/indexid and generate_results), joined to the test "
                             "rows by id")
    parser.add_argument("--strict_json", action="store_true",
                        help="refuse predictions with text around the JSON (error rows), "
                             "as the published evaluator does")
    parser.add_argument("--sample_count", type=_non_negative_int, metavar="N",
                        help="evaluate only the first N rows")
    parser.add_argument("--station_info", metavar="CSV",
                        help="station file (default: $%s/station_info.csv or "
                             "transit-lm-station-info.csv if set, else the bundled "
                             "data/station_info.csv)" % DATA_ENV)
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="reference",
                        help="reference: the published evaluator's rules, quirks included "
                             "(default); paper: the TransitLM paper's definitions")
    parser.add_argument("--out", metavar="DIR",
                        help="write a run folder: DIR/report.json, DIR/details.jsonl, "
                             "DIR/report.txt and DIR/report.html (DIR is created)")
    parser.add_argument("--json", metavar="PATH",
                        help="write the JSON report to PATH ('-' = stdout, replacing the "
                             "text report)")
    parser.add_argument("--details", metavar="PATH",
                        help="write one JSON line per input row (verdicts, reasons, failure "
                             "codes); '-' = stdout, replacing the text report")
    parser.add_argument("--html", metavar="PATH",
                        help="write a self-contained HTML report (funnel, failure reasons, "
                             "row explorer with route maps)")
    parser.add_argument("--html_rows", type=_non_negative_int, default=500, metavar="N",
                        help="rows listed (with a map each) in the HTML report: failures "
                             "first, then a sample of passed rows (default 500)")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-row failure lines and no progress line")
    parser.add_argument("--workers", type=_non_negative_int, default=0, metavar="N",
                        help="evaluate in up to N forked worker processes (where fork is "
                             "available; each takes chunks of about %d KB of the file, or "
                             "with --predictions or --sample_count at least %d rows); every "
                             "output is identical to a single-process run. 0 = one per CPU "
                             "core (default); 1 = a single process"
                             % (CHUNK_BYTES // 1024, MIN_ROWS_PER_WORKER))
    benchmark.add_arguments(parser)
    return parser


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


# Flags of the command line that are not evaluation options (where outputs go).
OUTPUT_FLAGS = ("out", "json", "details", "html", "html_rows")


def options_from_args(benchmark, args):
    values = {key: value for key, value in vars(args).items() if key not in OUTPUT_FLAGS}
    return Options(benchmark, **values)


class OutputFile(object):
    """A file written through a temporary name and renamed when the run succeeds,
    so a failed run leaves no half-written output."""

    def __init__(self, path, binary=False):
        self.path = path
        folder = os.path.dirname(os.path.abspath(path))
        try:
            handle, self.temp = tempfile.mkstemp(prefix=".transitlm-", dir=folder)
        except OSError as exc:
            raise InputError("cannot write %s: %s" % (path, exc.strerror or exc))
        self.handle = os.fdopen(handle, "wb" if binary else "w",
                                **({} if binary else {"encoding": "utf-8", "newline": "\n"}))

    def write(self, data):
        try:
            self.handle.write(data)
        except OSError as exc:
            raise InputError("cannot write %s: %s" % (self.path, exc.strerror or exc))

    def commit(self):
        try:
            self.handle.close()
            os.chmod(self.temp, 0o644)
            os.replace(self.temp, self.path)
        except OSError as exc:
            self.discard()
            raise InputError("cannot write %s: %s" % (self.path, exc.strerror or exc))

    def discard(self):
        try:
            self.handle.close()
        except OSError:
            pass
        if os.path.exists(self.temp):
            os.remove(self.temp)


def _output_plan(args):
    """Where each output goes -> dict of role -> path ('-' = stdout); exit 2 on
    clashes (two outputs to one file, two to stdout)."""
    plan = {"json": args.json, "details": args.details, "html": args.html}
    if args.out:
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as exc:
            raise InputError("cannot create run folder %s: %s" % (args.out, exc.strerror or exc))
        plan["out_json"] = os.path.join(args.out, "report.json")
        plan["out_details"] = os.path.join(args.out, "details.jsonl")
        plan["out_text"] = os.path.join(args.out, "report.txt")
        plan["out_html"] = os.path.join(args.out, "report.html")
    to_stdout = [role for role, path in plan.items() if path == "-"]
    if len(to_stdout) > 1:
        raise InputError("only one output can go to stdout ('-'), not --%s"
                         % " and --".join(to_stdout))
    if plan["html"] == "-":
        raise InputError("--html needs a file name")
    seen = {}
    inputs = {os.path.realpath(path) for path in (args.input, args.predictions,
                                                  args.station_info) if path}
    for role, path in plan.items():
        if not path or path == "-":
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise InputError("%s and %s would both be written to %s"
                             % (_role_name(seen[real]), _role_name(role), path))
        if real in inputs:
            raise InputError("%s would overwrite the input file %s" % (_role_name(role), path))
        seen[real] = role
    return plan


def _role_name(role):
    return {"json": "--json", "details": "--details", "html": "--html",
            "out_json": "--out's report.json", "out_details": "--out's details.jsonl",
            "out_text": "--out's report.txt", "out_html": "--out's report.html"}[role]


def run(benchmark, argv=None):
    """Parse arguments, evaluate, write the reports; return the exit status."""
    parser = build_parser(benchmark)
    args = parser.parse_args(argv)
    # Nothing the evaluators build holds a reference cycle: reference counting
    # frees it all, and the cyclic collector would only re-scan the station index.
    gc.disable()
    try:
        return _run(benchmark, args)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % printable(exc))
        return EXIT_USAGE
    except ServiceError as exc:
        sys.stderr.write("error: %s\n" % printable(exc))
        return EXIT_SERVICE
    except WorkerFailed as exc:
        sys.stderr.write("error: %s\n" % printable(exc))
        return EXIT_WORKER
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    finally:
        gc.enable()


def _run(benchmark, args):
    options = options_from_args(benchmark, args)
    plan = _output_plan(args)
    files = []                         # OutputFiles, committed only when all went well

    def output(path, binary=False):
        handle = OutputFile(path, binary)
        files.append(handle)
        return handle

    spools = []

    def spool(binary=False):
        handle = _Spool(binary)
        spools.append(handle)
        return handle

    try:
        details_path = plan.get("out_details") or (
            plan["details"] if plan["details"] not in (None, "-") else None)
        details = None
        if details_path:
            details = output(details_path, binary=True)
        elif plan["details"] == "-" or plan["html"]:
            details = spool(binary=True)
        text_wanted = not any(plan[role] == "-" for role in ("json", "details")) \
            or plan.get("out_text")
        failures = None
        if text_wanted and not options.quiet:
            failures = spool()

        report, sinks, network = evaluate_stream(
            benchmark, options, lambda aggregate: RowSinks(aggregate, details, failures))

        json_text = report_json(report)
        for role in ("json", "out_json"):
            if plan.get(role) and plan[role] != "-":
                output(plan[role]).write(json_text)
        if details is not None and plan["details"] not in (None, "-") \
                and plan["details"] != details_path:
            _copy_spool(details, output(plan["details"], binary=True))
        text_parts = None
        if text_wanted:
            head = render_text_head(benchmark, report)
            tail = render_text_tail(report)
            text_parts = (head, failures, sinks.failing, report["counts"]["samples"], tail)
            if plan.get("out_text"):
                _write_text_report(output(plan["out_text"]), text_parts)
        for role in ("html", "out_html"):
            if plan.get(role):
                _write_html(output(plan[role]), report, details, network, args.html_rows)
        for handle in files:
            handle.commit()
        files = []
        if plan["json"] == "-":
            _stdout_write(json_text)
        elif plan["details"] == "-":
            _stdout_copy(details)
        else:
            _write_text_report(_StdoutWriter(), text_parts)
        _stdout_flush()
    finally:
        for handle in files:
            handle.discard()
        for handle in spools:
            handle.handle.close()
    return EXIT_OK


class _Spool(object):
    """A temporary file for an output assembled after the rounds (failure lines,
    details for stdout or the HTML page)."""

    def __init__(self, binary=False):
        self.handle = tempfile.NamedTemporaryFile(
            mode="w+b" if binary else "w+", prefix="transitlm-",
            **({} if binary else {"encoding": "utf-8", "newline": "\n"}))
        self.path = self.handle.name

    def write(self, data):
        self.handle.write(data)

    def chunks(self):
        self.handle.flush()
        self.handle.seek(0)
        return iter(lambda: self.handle.read(1 << 20), self.handle.read(0))


def _copy_spool(source, target):
    if isinstance(source, OutputFile):
        source.handle.flush()
        with open(source.temp, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                target.write(block)
    else:
        for block in source.chunks():
            target.write(block)


def _write_text_report(target, parts):
    head, failures, failing, samples, tail = parts
    target.write(head)
    if failures is not None:
        target.write(failures_title(failing, samples))
        for block in failures.chunks():
            target.write(block)
    target.write(tail)


def _write_html(target, report, details, network, html_rows):
    try:
        import html_report
    except ImportError:
        raise InputError("the HTML report needs html_report.py beside common.py")
    if isinstance(details, OutputFile):
        details.handle.flush()
        path = details.temp
    else:
        details.handle.flush()
        path = details.path
    target.write(html_report.evaluator_page(report, path, network, html_rows))


class _StdoutWriter(object):
    def write(self, text):
        _stdout_write(text)


def _stdout_write(text):
    try:
        sys.stdout.write(text)
    except OSError as exc:
        raise InputError("cannot write to standard output: %s" % (exc.strerror or exc))


def _stdout_copy(spool):
    try:
        sys.stdout.flush()
        out = sys.stdout.buffer
        for block in spool.chunks():
            out.write(block)
    except OSError as exc:
        raise InputError("cannot write to standard output: %s" % (exc.strerror or exc))


def _stdout_flush():
    try:
        sys.stdout.flush()
    except OSError as exc:
        raise InputError("cannot write to standard output: %s" % (exc.strerror or exc))


def script_main(benchmark):
    """Entry point of a scenario script: run and exit with its status."""
    # Text the output encoding cannot hold (PYTHONIOENCODING=ascii, a lone
    # surrogate) is printed as escapes instead of failing.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    try:
        status = run(benchmark)
    except BrokenPipeError:
        # `evaluate.py | head` closed stdout: nothing more to say.
        status = EXIT_OK
    try:
        sys.stdout.flush()
    except OSError:
        status = status or EXIT_USAGE
    # The interpreter's own final flush must not print a traceback (full disk,
    # closed pipe): stdout is done with.
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(status)
