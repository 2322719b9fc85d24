"""The rules every TransitLM evaluator shares.

1. constants and the two protocols (``REFERENCE`` and ``PAPER``): every rule
   on which the TransitLM paper and the published evaluator differ is a field
   of ``Protocol``, so the differences can be read in one place;
2. value parsing (distance, time, fare) and geometry;
3. the station network (``StationNetwork``), its loader and its cache, and
   the JSON and prompt cells of a row;
4. routes and checks: small pure functions returning a ``Verdict`` (ok +
   English reason), judging one route against its label, the expert score
   and IoU.

Nothing here reads a sample file, writes a report or knows about processes:
that machinery is the ``transitlm`` package beside this file (reading,
records, reports, engine, cli, api), which depends on this module and never
the other way round.

Standard library only; Python 3.8+.
"""

import csv
import functools
import hashlib
import io
import itertools
import json
import marshal
import math
import operator
import os
import re
import sys
import tempfile
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
# The access modes an English benchmark's prompt asks for (make_benchmark.py
# --lang en), read as the modes they name: walk 步行, bike 骑行, taxi 打车.
ENGLISH_ACCESS_MODES = {"walk": WALK, "bike": CYCLE, "taxi": TAXI_MARKERS[0]}
_ACCESS_MODE_ALIASES = dict((spelling, mode) for word, mode in ENGLISH_ACCESS_MODES.items()
                            for spelling in (word, word.capitalize(), word.upper()))


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
VERSION = "1.6.1"


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


class _ValueTexts(dict):
    """The number of each distinct value text, parsed once.

    A dataset uses few distinct value texts ("1.4公里", "37分钟", ...), so a
    dictionary of them is small and saves the regular expressions per row.
    Being that dictionary, it answers ``texts[value]`` for a text seen before
    in C, without a Python call (Route._read looks up five values per
    route); a text not seen yet is parsed by __missing__ and kept.  A value
    that is not text raises TypeError instead (a list or an object as it is
    looked up, since it cannot be hashed; a number in __missing__), except
    null, kept as 0.0: parse() reads such a value, naming its field in any
    message.
    """

    __slots__ = ("parse_text",)

    def __init__(self, parse_text):
        dict.__init__(self)
        self.parse_text = parse_text
        self[None] = 0.0               # a missing value, as _scalar_text reads it

    def __missing__(self, value):
        if type(value) is not str:
            raise TypeError("not text")
        number, text = _scalar_text(value, "")
        if number is None:
            number = self.parse_text(text)
        self[value] = number
        return number

    def parse(self, value, field):
        """A JSON value -> number; RowError naming ``field`` when it has none."""
        if type(value) is str:
            return self[value]
        number, text = _scalar_text(value, field)
        return number if number is not None else self.parse_text(text)


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


_DISTANCE_TEXTS = _ValueTexts(_distance_text_km)
_TIME_TEXTS = _ValueTexts(_time_text_minutes)
_FULL_TIME_TEXTS = _ValueTexts(_full_time_text_minutes)
_FARE_TEXTS = _ValueTexts(_first_number)


def parse_distance_km(value, field="distance"):
    """Distance in km: "344米" -> 0.344, "约8.1公里" -> 8.1, "1公里200米" -> 0.2 (quirk)."""
    return _DISTANCE_TEXTS.parse(value, field)


def parse_time_minutes(value, full=False, field="time"):
    """Time in minutes.

    reference (``full=False``): "1小时7分钟" -> 60, the minutes after the hours
    are ignored (quirk).  paper (``full=True``): hours x 60 + minutes -> 67.
    """
    return (_FULL_TIME_TEXTS if full else _TIME_TEXTS).parse(value, field)


def parse_fare_cny(value, field="fare"):
    """Fare in CNY: "3元" -> 3.0."""
    return _FARE_TEXTS.parse(value, field)


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
    # x * _RADIANS_PER_DEGREE is math.radians(x) bit for bit (CPython's
    # radians multiplies by pi / 180 computed the same way), four calls fewer.
    phi1 = lat1 * _RADIANS_PER_DEGREE
    phi2 = lat2 * _RADIANS_PER_DEGREE
    dphi = (lat2 - lat1) * _RADIANS_PER_DEGREE
    dlmb = (lng2 - lng1) * _RADIANS_PER_DEGREE
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


_RADIANS_PER_DEGREE = math.pi / 180.0


def access_mode(text):
    """An access mode as the rules read it: an English one (``walk``, ``bike``,
    ``taxi``; or Walk, WALK ...) is the Chinese mode it names, any other text
    is itself."""
    return _ACCESS_MODE_ALIASES.get(text, text)


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
# 3. The station network, and the cells of a row
# ---------------------------------------------------------------------------

def raise_csv_field_limit():
    """Let the csv module read cells of any length (release cells exceed its
    128 kB default); done once at import, harmless to repeat."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 10


raise_csv_field_limit()

# The network files' columns (protocol.md section 1), as the release writes them;
# the evaluators need STATION_COLUMNS of station_info.csv.
STATION_FILE_COLUMNS = ("stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations",
                        "station_name")
STATION_COLUMNS = ("stop_id", "coord_x", "coord_y", "next_hop_stations")
LINE_COLUMNS = ("citycode", "line_name", "station_list")
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
        # Every stop's next hops looked up in one loop in C, then every hop
        # checked in one (tuple.__contains__: a stop not decoded yet, None,
        # or a malformed one, text, stops it with TypeError).  The lookups
        # wait on memory (a 150,000-stop network is far larger than the
        # CPU's caches), and in one C loop they wait together.
        looked_up = list(map(self._hops.get, stations[:-1]))
        following = stations[1:]
        try:
            if all(map(tuple.__contains__, looked_up, following)):
                return None
        except TypeError:
            pass
        for here, there, hops in zip(stations, following, looked_up):
            if type(hops) is not tuple:
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

    def end_coords(self, stations):
        """coords() of a route's first and last stations, looked up together
        in C (the lookups wait on memory together, as in broken_hop)."""
        first, last = map(self._points.get, (stations[0], stations[-1]))
        if type(first) is tuple and type(last) is tuple:
            return first, last
        return self.coords(stations[0]), self.coords(stations[-1])

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

    def has_names(self):
        """Does the file have a station_name column?"""
        return self._columns[4] is not None

    def names(self):
        """Every stop's station_name (nothing when the file has no such
        column): the file read once with the csv module, where there is one."""
        if not self.has_names():
            return
        i_name = self._columns[4]
        if os.path.isfile(self.path):
            with open(self.path, encoding="utf-8-sig", newline="") as handle:
                rows = csv.reader(handle)
                next(rows, None)
                for row in rows:
                    if len(row) > i_name and row[i_name]:
                        yield row[i_name]
            return
        for stop in self._lookup.ids():
            name = self.name(stop)
            if name:
                yield name


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


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_DECODER = json.JSONDecoder()
JSON_WHITESPACE = " \t\n\r"

# JSON nested deeper than this is refused before decoding: the json module
# recurses per level, and a hostile cell must become an error row, not a crash.
MAX_JSON_DEPTH = 100
# A JSON string's body after its opening quote (the unrolled form of
# (?:[^"\\]|\\.)*, linear, without a step per character): it stops before the
# closing quote, or at the end, or before a backslash that ends the text.
_STRING_BODY = r'[^"\\]*(?:\\.[^"\\]*)*'
_STRING_BODY_RE = re.compile(_STRING_BODY, re.DOTALL)
# A closed string, or (group 1) one still open where the text ends.
_STRING_OR_OPEN_RE = re.compile('"%s"|("%s\\\\?\\Z)' % (_STRING_BODY, _STRING_BODY), re.DOTALL)
_NOT_A_BRACKET_RE = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# Characters one regular expression reads at a time: a service's other
# threads get the interpreter lock between two (a call in C never yields it).
SCAN_CHUNK = 1 << 16


def json_outside_strings(text, chunk=SCAN_CHUNK, spans=None):
    """The text of JSON ``text`` outside its strings, yielded in pieces (in
    order) of at most ``chunk`` characters each.  A list ``spans`` receives
    (start, end) of each closed string that runs past the end of a chunk
    (with its quotes; every string of more than ``chunk`` characters is one),
    and (start, None) of a string left open where the text ends.

    A quote opens a string that ends at the next quote not escaped by a
    backslash; a string opened and never closed is kept, with everything
    after it (no later quote can close a string: each lies inside the open
    one, escaped, and a string opened there reads the same characters).
    Time linear in the text, each step a regular expression over one chunk,
    whatever the text holds (unclosed strings, runs of escaped quotes or of
    backslashes).
    """
    opened = None            # the pieces of a string not closed yet
    escaped = False          # the first character of the next chunk is escaped
    start, length = 0, len(text)
    while start < length:
        end = min(length, start + chunk)
        if opened is not None:
            stop = _STRING_BODY_RE.match(text, start + escaped, end).end()
            if stop < end and text[stop] == '"':
                opened = None                         # closed: the string is left out
                start = stop + 1
                if spans is not None:
                    spans.append((opened_at, start))
                continue
            opened.append(text[start:end])
            escaped = stop < end                      # a backslash ends the chunk
            start = end
            continue
        # [outside, None (a closed string), outside, ..., the open string or None, ""]
        parts = _STRING_OR_OPEN_RE.split(text[start:end])
        tail = parts[-2] if len(parts) > 1 else None
        if tail is not None:
            del parts[-2:]
            opened, opened_at = [tail], end - len(tail)
            escaped = _STRING_BODY_RE.match(tail, 1).end() < len(tail)
        yield "".join(filter(None, parts))
        start = end
    if opened is not None and spans is not None:
        spans.append((opened_at, None))
    for piece in opened or ():
        yield piece


def count_of(text, characters, chunk=SCAN_CHUNK):
    """How many of ``characters`` (each one character) ``text`` holds,
    counted at most ``chunk`` characters at a time (see SCAN_CHUNK)."""
    return sum(text.count(character, start, start + chunk)
               for start in range(0, len(text), chunk) for character in characters)


def json_too_deep(text, limit=MAX_JSON_DEPTH):
    """Does JSON text nest arrays/objects more than ``limit`` levels deep?

    Scans without recursion, in time linear in the text; text with few
    brackets (every real row) is answered by two counts.  Brackets inside
    strings do not count (see json_outside_strings); any closing bracket
    closes a level.
    """
    if (text.count("[") + text.count("{") if len(text) <= SCAN_CHUNK
            else count_of(text, "[{")) <= limit:
        return False
    depth = 0
    for piece in json_outside_strings(text):
        brackets = _NOT_A_BRACKET_RE.sub("", piece)
        if not brackets:
            continue
        if max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets),
                                    initial=depth)) > limit:
            return True
        opens = brackets.count("[") + brackets.count("{")
        depth += 2 * opens - len(brackets)
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


def decode_json(text, what, code="invalid_json"):
    """Decode a JSON cell: the text must be JSON (a value already decoded is
    returned as it is).  A RowError carries ``code`` (``too_deep`` for nesting
    over MAX_JSON_DEPTH).  A model's answer, which may hold reasoning or text
    around its JSON, is read by transitlm.evaluation.answers.read_answer."""
    if not isinstance(text, str):
        return text
    if json_too_deep(text):
        raise RowError("%s is nested more than %d levels deep" % (what, MAX_JSON_DEPTH),
                       "too_deep")
    try:
        return loads_stripped(text.strip(JSON_WHITESPACE))
    except ValueError as exc:
        # Keep the message, not the exception: its traceback's frames would
        # hold it in a reference cycle (see RowError).
        error = getattr(exc, "msg", None) or str(exc)
    if not text.strip():
        raise RowError("%s is empty" % what, code)
    raise RowError("%s is not valid JSON (%s)" % (what, error), code)


def read_prompt(text):
    """sft_prompt -> (origin (lng, lat), destination (lng, lat), city)."""
    prompt = decode_json(text, "sft_prompt", code="invalid_prompt")
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
_VERDICT_OK = operator.attrgetter("ok")


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
        if not isinstance(obj, dict):
            raise RowError("%s is %s, expected a JSON object" % (what, type_name(obj)),
                           _route_error_code(what))
        try:
            self._read(obj, protocol)
        except RowError as exc:        # name the side only now: messages are rare
            raise RowError("%s %s" % (what, exc), _route_error_code(what))

    def _read(self, obj, protocol):
        # This runs for every route of every row: the values take a C-speed
        # shortcut (see _ValueTexts).
        get = obj.get
        self.sequence = text_list(obj, "station_sequence")
        self.stations = route_stations(self.sequence)
        self.lines = text_list(obj, "line_sequence")
        times = _FULL_TIME_TEXTS if protocol.full_time_parsing else _TIME_TEXTS
        try:
            # Value texts seen before: one dictionary lookup each, no call.
            self.distance_km = _DISTANCE_TEXTS[get("total_distance")]
            self.time_min = times[get("total_time")]
            self.fare_cny = _FARE_TEXTS[get("total_fare")]
            self.start_access_km = _DISTANCE_TEXTS[get("start_transfer_distance")]
            self.end_access_km = _DISTANCE_TEXTS[get("end_transfer_distance")]
            start_mode, end_mode = get("start_transfer_mode"), get("end_transfer_mode")
            if type(start_mode) is not str or type(end_mode) is not str:
                raise TypeError("not text")
        except TypeError:
            # A value that is not text (a number, null, a list): read field by
            # field, in this order, so that a message names the first bad field.
            self._read_fields(obj, protocol)
        else:
            self.start_mode = _ACCESS_MODE_ALIASES.get(start_mode, start_mode)
            self.end_mode = _ACCESS_MODE_ALIASES.get(end_mode, end_mode)
        self.transit_lines = transit_line_count(self.lines)
        self.cycling_legs = (CYCLE in self.start_mode) + (CYCLE in self.end_mode)
        self.score = expert_score(self.time_min, self.transit_lines + self.cycling_legs,
                                  self.fare_cny)

    def _read_fields(self, obj, protocol):
        get = obj.get
        self.distance_km = parse_distance_km(get("total_distance"), "total_distance")
        self.time_min = parse_time_minutes(get("total_time"), protocol.full_time_parsing,
                                           "total_time")
        self.fare_cny = parse_fare_cny(get("total_fare"), "total_fare")
        self.start_mode = access_mode(_text_field(obj, "start_transfer_mode"))
        self.end_mode = access_mode(_text_field(obj, "end_transfer_mode"))
        self.start_access_km = parse_distance_km(get("start_transfer_distance"),
                                                 "start_transfer_distance")
        self.end_access_km = parse_distance_km(get("end_transfer_distance"),
                                               "end_transfer_distance")

    def line_signature(self, empty_mode_as_walk):
        return full_line_set(self.lines, self.start_mode, self.end_mode, empty_mode_as_walk)


def _route_error_code(what):
    return "invalid_label" if what.startswith("label") else "invalid_prediction"


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
    if all(map(_VERDICT_OK, verdicts)):   # the common case, in C
        return passed(ok_reason)
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
    first_point, last_point = network.end_coords(route.stations)
    start = check_access("origin", origin, first_point, first,
                         route.start_mode, route.start_access_km, protocol)
    end = check_access("destination", destination, last_point, last,
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


def within(value, label_value, absolute, mape=None):
    """Accurate: within 10 % of the label or within the absolute tolerance.
    ``mape``: mape_pct(value, label_value) when the caller has it."""
    if mape is None:
        mape = mape_pct(value, label_value)
    return mape <= RELATIVE_TOLERANCE_PCT or abs(value - label_value) <= absolute


def access_distance_accurate(value, label_value):
    return not label_value > 0 or abs(value - label_value) <= TRANSFER_DISTANCE_TOLERANCE_KM


def compare_routes(pred, label, protocol, names=None, station_sets=None, record=None):
    """Rounds 3 and 4 of one route against its label -> dict of figures
    (added to ``record`` when given, which is returned).

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
    distance_mape = mape_pct(pred.distance_km, label.distance_km)
    time_mape = mape_pct(pred.time_min, label.time_min)
    fare_mape = mape_pct(pred.fare_cny, label.fare_cny)
    distance_ok = within(pred.distance_km, label.distance_km, DISTANCE_TOLERANCE_KM,
                         distance_mape)
    time_ok = within(pred.time_min, label.time_min, TIME_TOLERANCE_MIN, time_mape)
    fare_ok = within(pred.fare_cny, label.fare_cny, FARE_TOLERANCE_CNY, fare_mape)
    if record is None:
        record = {}
    record["line_iou"] = line_iou
    record["station_iou"] = station_iou
    record["station_iou_exact"] = station_iou == 1
    record["transfer_mode_match"] = modes_match
    record["exact_match"] = exact
    record["score"] = pred.score
    record["label_score"] = label.score
    record["score_deviation_pct"] = deviation
    record["score_band"] = score_band(deviation)
    record["distance_mape_pct"] = distance_mape
    record["time_mape_pct"] = time_mape
    record["fare_mape_pct"] = fare_mape
    record["distance_accurate"] = distance_ok
    record["time_accurate"] = time_ok
    record["fare_accurate"] = fare_ok
    record["transfer_accurate"] = start_ok and end_ok
    record["overall_accurate"] = distance_ok and time_ok and fare_ok
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
    return compare_routes(pred, label, protocol, record=record)


def judge_single_route(row, protocol, network, drawings=True):
    """Checks of one single-route row (benchmarks 1 and 2) -> (record fields,
    predicted Route, label Route).  ``drawings``: add both routes as judged
    (see Context.route_drawings)."""
    label = Route(row.label, protocol, "label")
    # A prediction decoded as the label's very object (RowJudge.decode): the
    # same Route (parsing is deterministic, and Routes are never changed).
    pred = label if row.prediction is row.label else Route(row.prediction, protocol,
                                                           "prediction")
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
# Station and line names (protocol.md section 11): how a name a model wrote
# is matched to a line or station of the network
# ---------------------------------------------------------------------------

# Data of the general-LLM setting (the published route-eval service's rules).
CITY_CODES = {"北京": "010", "上海": "021", "深圳": "0755", "成都": "028"}
BUS_STOP_PREFIX = "bus-"         # stop ids of the dataset; the service retries with it
MIN_STATION_SIMILARITY = 0.4     # lowest bigram Jaccard that still matches a station

# Innermost ASCII parenthesised group: no parenthesis inside it.
_INNER_GROUP_RE = re.compile(r"\([^()]*\)")


def strip_line_suffix(name):
    """Remove every ASCII ``(...)`` group, innermost first, then strip.

    ``"地铁2号线(国家会展中心(2号线)--浦东1号2号航站楼)"`` -> ``"地铁2号线"``.
    Full-width parentheses and unbalanced ones are kept: the service only
    knows ASCII pairs.
    """
    previous = None
    while previous != name:
        previous = name
        name = _INNER_GROUP_RE.sub("", name)
    return name.strip()


def calls_in_order(calls, stops):
    """Does a line calling at ``calls`` (stop ids, in its order) serve ``stops``
    (a leg ridden on it) in their order, each at a call after the previous one's?"""
    remaining = iter(calls)
    return all(stop in remaining for stop in stops)


def bigrams(text):
    """The set of a string's two-character substrings."""
    return {text[i:i + 2] for i in range(len(text) - 1)}


def bigram_jaccard(first, second):
    """Jaccard similarity of the character bigram sets of two strings.

    When either string is shorter than 2 characters (it has no bigram), the
    character sets are compared instead.  Two empty sets score 0.
    """
    if len(first) < 2 or len(second) < 2:
        left, right = set(first), set(second)
    else:
        left, right = bigrams(first), bigrams(second)
    return jaccard(left, right)


def jaccard(left, right):
    """|A n B| / |A u B| of two sets; 0 when both are empty."""
    union = len(left) + len(right) - len(left & right)
    if not union:
        return 0.0
    return len(left & right) / union


_KNOWN_CODES = frozenset(CITY_CODES.values())


def city_code_of(city):
    """City name -> code (``深圳`` -> ``0755``); a known code is kept; else None.

    None means "unknown city": the line search then covers every line.
    """
    if not city:
        return None
    if city in CITY_CODES:
        return CITY_CODES[city]
    if city in _KNOWN_CODES:
        return city
    return None
