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
import csv
import gc
import hashlib
import io
import json
import math
import os
import re
import sys
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
SERVICE_TAXI_MARKERS = ("打车", "网约车")   # the route-eval service does not know 滴滴
SUBWAY_MARKERS = ("地铁", "号线")
METRE = "米"
KILOMETRE = "公里"
KILOMETRE_LATIN = "km"
HOUR = "小时"
MINUTE = "分钟"
ACCESS_PREFIX = "接驳:"          # access mode entry in a route's full line set
BUS_STOP_PREFIX = "bus-"         # stop ids of the dataset; the service retries with it

CITY_CODES = {"北京": "010", "上海": "021", "深圳": "0755", "成都": "028"}

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
SCHEMA_VERSION = 1

EXIT_OK = 0
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
    """A row that cannot be evaluated; it becomes an error row with this reason."""


class ServiceError(Exception):
    """The route-eval service stayed unreachable: the run stops (exit status 3)."""


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
        return float(value), ""
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
        raise RowError("prompt %s is not a \"lng,lat\" string" % field)
    if len(parts) != 2:
        raise RowError("prompt %s %r is not a \"lng,lat\" pair" % (field, text))
    try:
        return (float(parts[0]), float(parts[1]))
    except (TypeError, ValueError):
        raise RowError("prompt %s %r is not a \"lng,lat\" pair of numbers" % (field, text))


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
    first, second = set(first), set(second)
    if not first or not second:
        return 0.0
    return len(first & second) / len(first | second)


def mean(values):
    """Arithmetic mean, or None for no values."""
    values = list(values)
    return sum(values) / len(values) if values else None


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
        self._decoded = {}             # stop -> (next hops, (lng, lat)) once touched

    # -- loading ----------------------------------------------------------
    @classmethod
    def load(cls, path):
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
        lookup = None
        if indexes[0] == 0:
            lookup = _IndexedLines.build(data, path)
        if lookup is None:      # ids not first, or quoted: the csv module reads it all
            lookup = _ParsedLines.build(data, body_start, path, indexes[0])
        return cls(lookup, columns, path, digest)

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
        return stop in self._lookup

    def __len__(self):
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
        decoded = self._decoded.get(stop)
        if decoded is None:
            decoded = self._decode(stop)
            if decoded is None:
                return None
        hops = decoded[0]
        if type(hops) is str:          # the cell was malformed: say so now it is used
            self._bad(stop, hops)
        return hops

    def coords(self, stop):
        """(lng, lat) of a stop, or None if unknown; an empty cell reads as 0.0."""
        decoded = self._decoded.get(stop)
        if decoded is None:
            decoded = self._decode(stop)
            if decoded is None:
                return None
        point = decoded[1]
        if type(point) is str:
            self._bad(stop, point)
        return point

    def _decode(self, stop):
        """Parse a stop's line once -> (hops or problem, point or problem)."""
        cells = self._cells(stop)
        if cells is None:
            return None
        i_x, i_y, i_hops = self._columns[1:4]
        cell = cells[i_hops].strip(JSON_WHITESPACE)
        try:
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
        except ValueError:
            point = "coord_x/coord_y"
        decoded = (hops, point)
        self._decoded[stop] = decoded
        return decoded

    def name(self, stop):
        i_name = self._columns[4]
        cells = self._cells(stop)
        return cells[i_name] if cells is not None and i_name is not None else None


class _IndexedLines(object):
    """Stop id -> its line of the file, kept as bytes and parsed on demand."""

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
        return cls(lines, dict(zip(keys, range(len(keys)))), path, line_numbers)

    def __contains__(self, stop):
        return stop in self._ordinals

    def __len__(self):
        return len(self._ordinals)

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
        rows, numbers = {}, {}
        try:
            reader = csv.reader(io.StringIO(text, newline=""))
            for cells in reader:
                if cells and len(cells) > i_stop:
                    rows[cells[i_stop]] = cells
                    numbers[cells[i_stop]] = reader.line_num + 1
        except csv.Error as exc:
            raise InputError("station file %s is not valid CSV: %s" % (path, exc))
        return cls(rows, path, numbers)

    def __contains__(self, stop):
        return stop in self._rows

    def __len__(self):
        return len(self._rows)

    def cells(self, stop):
        return self._rows.get(stop)

    def line_number(self, stop):
        return self._line_numbers.get(stop, "?")


# ---------------------------------------------------------------------------
# 3b. Sample rows and predictions
# ---------------------------------------------------------------------------

ID_COLUMNS = ("index_id", "indexid")


class SampleRow(object):
    """One input row: its number, id and the raw cells the evaluators read."""

    __slots__ = ("row", "index_id", "prompt", "label", "prediction", "req_type",
                 "has_prediction")

    def __init__(self, row, index_id, prompt, label, prediction, req_type=None,
                 has_prediction=True):
        self.row = row                    # 1-based data row number (header excluded)
        self.index_id = index_id
        self.prompt = prompt              # raw sft_prompt cell
        self.label = label                # raw sft_label cell
        self.prediction = prediction      # raw text, or an already-decoded object
        self.req_type = req_type          # raw req_type cell or None
        self.has_prediction = has_prediction


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open_text(path, what):
    try:
        return open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError("cannot read %s %s: %s" % (what, path, exc.strerror or exc))


def read_samples(path, prediction_column, need_req_type=False, sample_count=None):
    """Read the sample CSV into SampleRow objects (prediction from a column).

    ``prediction_column`` is ``generate_results`` or ``sft_label``, or None
    when predictions come from a separate file.  Accepts ``index_id`` or
    ``indexid``; other columns are ignored.
    """
    handle = _open_text(path, "input file")
    with handle:
        try:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError("input file %s is empty" % path)
            header = [cell.strip() for cell in header]
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
            i_id = header.index(id_column)
            i_prompt = header.index("sft_prompt")
            i_label = header.index("sft_label")
            i_pred = header.index(prediction_column) if prediction_column else None
            i_req = header.index("req_type") if need_req_type else None
            rows = []
            for cells in reader:
                if sample_count is not None and len(rows) >= sample_count:
                    break
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue   # a blank line is not a row
                cells = cells + [""] * (len(header) - len(cells))
                rows.append(SampleRow(
                    len(rows) + 1, cells[i_id], cells[i_prompt], cells[i_label],
                    cells[i_pred] if i_pred is not None else None,
                    cells[i_req] if i_req is not None else None,
                    has_prediction=i_pred is not None))
        except UnicodeDecodeError:
            raise InputError("input file %s is not UTF-8 text" % path)
        except csv.Error as exc:
            raise InputError("input file %s is not valid CSV: %s" % (path, exc))
    return rows


def read_predictions(path):
    """Read model outputs keyed by id from JSON Lines or CSV.

    Returns (ordered list of (id, prediction, line number), problems) where a
    prediction is the raw text or a decoded JSON object.
    """
    handle = _open_text(path, "predictions file")
    with handle:
        try:
            head = handle.read(4096)
            handle.seek(0)
            if head.lstrip().startswith("{"):
                return _read_predictions_jsonl(handle, path)
            return _read_predictions_csv(handle, path)
        except UnicodeDecodeError:
            raise InputError("predictions file %s is not UTF-8 text" % path)


def _read_predictions_jsonl(handle, path):
    entries = []
    for line_no, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError("predictions file %s line %d is not JSON: %s" % (path, line_no, exc))
        if not isinstance(obj, dict):
            raise InputError("predictions file %s line %d is not a JSON object" % (path, line_no))
        key = next((col for col in ID_COLUMNS if col in obj), None)
        if key is None:
            raise InputError("predictions file %s line %d has no index_id/indexid" % (path, line_no))
        if "generate_results" not in obj:
            raise InputError("predictions file %s line %d has no generate_results" % (path, line_no))
        entries.append((str(obj[key]), obj["generate_results"], line_no))
    return entries


def _read_predictions_csv(handle, path):
    try:
        reader = csv.reader(handle)
        header = [cell.strip() for cell in next(reader, [])]
        id_column = next((col for col in ID_COLUMNS if col in header), None)
        if id_column is None or "generate_results" not in header:
            raise InputError("predictions file %s needs columns index_id (or indexid) and "
                             "generate_results (has: %s)" % (path, ", ".join(header)))
        i_id, i_pred = header.index(id_column), header.index("generate_results")
        entries = []
        for line_no, cells in enumerate(reader, start=2):
            if not cells:
                continue
            cells = cells + [""] * (len(header) - len(cells))
            entries.append((cells[i_id], cells[i_pred], line_no))
        return entries
    except csv.Error as exc:
        raise InputError("predictions file %s is not valid CSV: %s" % (path, exc))


def join_predictions(rows, entries):
    """Attach predictions to test rows by id; report what does not join.

    Returns a dict of join statistics: ``unknown_ids`` (predictions for ids not
    in the test file), ``duplicate_ids`` (ids given more than once: the first
    is used), ``missing`` (test rows without a prediction: no-response rows).
    """
    by_id = {}
    duplicates, unknown = [], []
    test_ids = {}
    for sample in rows:
        test_ids.setdefault(sample.index_id, sample)
    for index_id, prediction, _ in entries:
        if index_id in by_id:
            duplicates.append(index_id)
            continue
        if index_id not in test_ids:
            unknown.append(index_id)
            continue
        by_id[index_id] = prediction
    missing = 0
    for sample in rows:
        if sample.index_id in by_id:
            prediction = by_id[sample.index_id]
            sample.has_prediction = True
            sample.prediction = prediction
        else:
            sample.has_prediction = False
            sample.prediction = None
            missing += 1
    return {"predictions": len(entries), "joined": len(rows) - missing, "missing": missing,
            "unknown_ids": len(unknown), "unknown_id_examples": unknown[:5],
            "duplicate_ids": len(duplicates), "duplicate_id_examples": duplicates[:5]}


_DECODER = json.JSONDecoder()
JSON_WHITESPACE = " \t\n\r"

# JSON nested deeper than this is refused before decoding: the json module
# recurses per level, and a hostile cell must become an error row, not a crash.
MAX_JSON_DEPTH = 100
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
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


def decode_json(text, what, lenient=False):
    """Decode a JSON cell.  Returns (object, extracted?).

    ``lenient`` takes the first complete JSON object inside surrounding text
    (a ```json fence, a sentence before it); otherwise the text must be JSON.
    """
    if not isinstance(text, str):
        return text, False
    try:
        return loads_stripped(text.strip(JSON_WHITESPACE)), False
    except ValueError as exc:
        error = exc
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
        raise RowError("%s is empty" % what)
    raise RowError("%s is not valid JSON (%s)" % (what, error.msg if hasattr(error, "msg") else error))


def read_prompt(text):
    """sft_prompt -> (origin (lng, lat), destination (lng, lat), city)."""
    prompt, _ = decode_json(text, "sft_prompt")
    if not isinstance(prompt, dict):
        raise RowError("sft_prompt is not a JSON object")
    for key in ("start", "end"):
        if key not in prompt:
            raise RowError("sft_prompt has no %s coordinates" % key)
    city = prompt.get("city")
    if city is not None and not isinstance(city, str):
        raise RowError("sft_prompt city is not text")
    return (parse_lnglat(prompt.get("start"), "start"),
            parse_lnglat(prompt.get("end"), "end"), city or "")


# ---------------------------------------------------------------------------
# 4. Routes and checks
# ---------------------------------------------------------------------------

class Verdict(object):
    """The outcome of one check: ``ok`` and an English ``reason``."""

    __slots__ = ("ok", "reason")

    def __init__(self, ok, reason):
        self.ok = ok
        self.reason = reason

    def __repr__(self):
        return "Verdict(%r, %r)" % (self.ok, self.reason)


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
    return sum(1 for name in lines if name.strip() not in _NOT_A_STATION)


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
            raise RowError("%s is %s, expected a JSON object" % (what, type_name(obj)))
        try:
            self._read(obj, protocol)
        except RowError as exc:        # name the side only now: messages are rare
            raise RowError("%s %s" % (what, exc))

    def _read(self, obj, protocol):
        get = obj.get
        self.sequence = text_list(obj, "station_sequence")
        self.stations = route_stations(self.sequence)
        self.lines = text_list(obj, "line_sequence")
        self.distance_km = parse_distance_km(get("total_distance"), "total_distance")
        self.time_min = parse_time_minutes(get("total_time"), protocol.full_time_parsing,
                                           "total_time")
        self.fare_cny = parse_fare_cny(get("total_fare"), "total_fare")
        self.start_mode = _text_field(obj, "start_transfer_mode")
        self.end_mode = _text_field(obj, "end_transfer_mode")
        self.start_access_km = parse_distance_km(get("start_transfer_distance"),
                                                 "start_transfer_distance")
        self.end_access_km = parse_distance_km(get("end_transfer_distance"),
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
                       % (protocol.min_connected_stations, len(stations)))
    if len(stations) < 2:
        return Verdict(True, "fewer than 2 stations: nothing to connect")
    next_hops = network.next_hops
    for here, there in zip(stations, stations[1:]):
        hops = next_hops(here)
        if hops is None:
            return Verdict(False, "%s has no next-hop information" % here)
        if there not in hops:
            return Verdict(False, "%s -> %s not connected" % (here, there))
    return Verdict(True, "all %d hops connected" % (len(stations) - 1))


def check_access(side, point, stop_point, stop, mode, access_km, protocol,
                 taxi_markers=TAXI_MARKERS):
    """Round 2 for one end of a route -> (station grounding, distance plausibility).

    ``side`` is "origin" or "destination"; ``stop_point`` the (lng, lat) of the
    first/last station or None when it has no coordinates.
    """
    station_word = "first" if side == "origin" else "last"
    if stop_point is None:
        return (Verdict(False, "%s station %s has no coordinates" % (station_word, stop)),
                Verdict(True, "not checked: %s station has no coordinates" % station_word))
    straight = haversine_km(point[0], point[1], stop_point[0], stop_point[1])
    limit = access_threshold_km(mode, taxi_markers)
    if straight > limit:
        grounding = Verdict(False, "%s station %s is %.2f km from the %s (limit %g km for %s)"
                            % (station_word, stop, straight, side, limit, mode or WALK))
    else:
        grounding = Verdict(True, "%s station within %g km" % (station_word, limit))
    return grounding, check_access_distance(side, straight, access_km, protocol)


def check_access_distance(side, straight, access_km, protocol):
    """Distance plausibility: d - slack <= predicted access distance <= 3d + slack."""
    if not access_km > 0:
        return Verdict(True, "no %s access distance given" % side)
    low = straight - protocol.dp_slack_km
    high = DP_RATIO * straight + protocol.dp_slack_km
    if access_km < low:
        return Verdict(False, "%s access distance %.2f km is shorter than the straight line "
                       "%.2f km" % (side, access_km, straight))
    if access_km > high:
        return Verdict(False, "%s access distance %.2f km exceeds %.2f km (3x straight line "
                       "%.2f km)" % (side, access_km, high, straight))
    return Verdict(True, "%s access distance plausible" % side)


def combine(verdicts, ok_reason):
    """All verdicts must pass; the reason is the first failure's."""
    failures = [v.reason for v in verdicts if not v.ok]
    if failures:
        return Verdict(False, "; ".join(failures))
    return Verdict(True, ok_reason)


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


def judge_route(pred, label, origin, destination, network, protocol):
    """All checks of one predicted route against its label -> record fields."""
    reach = check_reachability(pred.stations, network, protocol)
    grounding, plausibility = check_grounding(pred, origin, destination, network, protocol)
    record = {
        "reachable": reach.ok, "reachable_reason": reach.reason,
        "station_grounding": grounding.ok, "station_grounding_reason": grounding.reason,
        "distance_plausibility": plausibility.ok,
        "distance_plausibility_reason": plausibility.reason,
    }
    record.update(compare_routes(pred, label, protocol))
    return record


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
    for field, unit in (("distance", "%"), ("time", "%"), ("fare", "%")):
        if not record[field + "_accurate"]:
            parts.append("%s off by %.1f%%" % (field, record[field + "_mape_pct"]))
    return ", ".join(parts) or "accurate"


# ---------------------------------------------------------------------------
# 5. Per-row records
# ---------------------------------------------------------------------------
# A record is a plain dict, written as is to --details.  Keys every evaluator
# fills for an evaluated row: the verdicts of judge_route/compare_routes, plus
# ``in_funnel`` (the row enters Round 1) and ``other_failures`` (scenario
# checks outside the funnel, as "topic: reason" strings).

def base_record(sample):
    return {"row": sample.row, "index_id": sample.index_id, "status": "evaluated",
            "error": None, "in_funnel": True, "other_failures": []}


def error_record(sample, message, in_funnel, status="error"):
    record = base_record(sample)
    record.update(status=status, error=message, in_funnel=in_funnel, reachable=False,
                  failed_round=None)
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


def row_failures(record):
    """Every failed check of a row as "topic: reason" strings (text report)."""
    if record["status"] == "error":
        return ["error: " + record["error"]]
    if record["status"] == "no_response":
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


# ---------------------------------------------------------------------------
# 6. The funnel engine
# ---------------------------------------------------------------------------

def _count(records, key):
    return sum(1 for record in records if record.get(key))


def _mean_of(records, key):
    return mean(record[key] for record in records)


def funnel_rounds(records):
    """Rounds 1-4 from per-row records.

    Round 1 takes the rows with ``in_funnel``; Rounds 2 and 3 the reachable
    ones; Round 4 the exact matches.  The scenario decides ``in_funnel`` and
    ``exact_match``; the protocol decided the verdicts: this is the one
    aggregation every evaluator shares.
    """
    entered = [r for r in records if r.get("in_funnel")]
    reachable = [r for r in entered if r.get("reachable")]
    exact = [r for r in reachable if r.get("exact_match")]
    bands = [r["score_band"] for r in reachable]
    return {
        "reachability": {"input": len(entered), "passed": len(reachable)},
        "grounding": {"input": len(reachable),
                      "station_grounding": _count(reachable, "station_grounding"),
                      "distance_plausibility": _count(reachable, "distance_plausibility")},
        "overlap": {"input": len(reachable),
                    "line_iou_mean": _mean_of(reachable, "line_iou"),
                    "station_iou_mean": _mean_of(reachable, "station_iou"),
                    "station_iou_exact": _count(reachable, "station_iou_exact"),
                    "exact_match": len(exact),
                    "expert_score_mean": _mean_of(reachable, "score"),
                    "label_expert_score_mean": _mean_of(reachable, "label_score"),
                    "score_deviation_pct_mean": _mean_of(reachable, "score_deviation_pct"),
                    "score_worse": bands.count("worse"),
                    "score_better": bands.count("better"),
                    "score_same": bands.count("same")},
        "accuracy": {"input": len(exact),
                     "distance": _count(exact, "distance_accurate"),
                     "time": _count(exact, "time_accurate"),
                     "fare": _count(exact, "fare_accurate"),
                     "transfer": _count(exact, "transfer_accurate"),
                     "overall": _count(exact, "overall_accurate"),
                     "distance_mape_pct": _mean_of(exact, "distance_mape_pct"),
                     "time_mape_pct": _mean_of(exact, "time_mape_pct"),
                     "fare_mape_pct": _mean_of(exact, "fare_mape_pct"),
                     "expert_score_mean": _mean_of(exact, "score"),
                     "label_expert_score_mean": _mean_of(exact, "label_score")},
    }


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
        "mape": None if None in mapes else sum(mapes) / 3.0,
    }
    if "preference" in rounds:
        pref = rounds["preference"]
        metrics["pc"] = ratio(pref["compliant"], pref["input"])
    if diversity is not None:
        metrics["rd"] = diversity["rd_mean"]
    return metrics


# ---------------------------------------------------------------------------
# 7. Reports
# ---------------------------------------------------------------------------

def report_json(report):
    """The report as deterministic JSON text (sorted keys, no NaN)."""
    return json.dumps(_finite(report), ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def _finite(value):
    # A model may write "NaN" as a distance and float() accepts it; JSON cannot
    # hold NaN, so a non-finite figure is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def details_line(record):
    return json.dumps(_finite(record), ensure_ascii=False, sort_keys=True) + "\n"


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
    out.text("  input         %s  (field %s)" % (inputs["input"], inputs["input_field"]))
    if inputs.get("predictions"):
        out.text("  predictions   %s" % inputs["predictions"])
    out.text("  stations      %s" % inputs["station_info"])
    if inputs.get("line_info"):
        out.text("  lines         %s" % inputs["line_info"])
    out.text("  samples %d   evaluated %d   errors %d   no response %d"
             % (counts["samples"], counts["evaluated"], counts["errors"],
                counts["no_response"]))
    notes = report.get("input_notes", {})
    join = notes.get("predictions_join")
    if join:
        out.text("  predictions: %d read, %d joined, %d test rows without one"
                 % (join["predictions"], join["joined"], join["missing"]))
        if join["unknown_ids"]:
            out.text("  WARNING: %d prediction(s) with an id not in the test file, e.g. %s"
                     % (join["unknown_ids"], ", ".join(join["unknown_id_examples"])))
        if join["duplicate_ids"]:
            out.text("  WARNING: %d duplicate prediction id(s), first one used, e.g. %s"
                     % (join["duplicate_ids"], ", ".join(join["duplicate_id_examples"])))
    if notes.get("json_extracted"):
        out.text("  %d prediction(s) had text around the JSON; the first JSON object was used"
                 % notes["json_extracted"])


def render_failures(out, records):
    failing = [(r, row_failures(r)) for r in records]
    failing = [(r, f) for r, f in failing if f]
    out.title("Rows with a failed check (%d of %d)" % (len(failing), len(records)))
    for record, failures in failing:
        out.text("  row %-6d %s  %s" % (record["row"], record["index_id"] or "(no id)",
                                        "; ".join(failures)))


def render_summary(out, report):
    out.title("Summary (%s protocol)" % report["protocol"])
    out.text("  " + summary_line(report["metrics"]))


# ---------------------------------------------------------------------------
# 8. The command-line driver
# ---------------------------------------------------------------------------

PROJECT_DIR = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(PROJECT_DIR, "data")
DATA_ENV = "TRANSITLM_DATA"
STATION_FILE_NAMES = ("station_info.csv", "transit-lm-station-info.csv")
LINE_FILE_NAMES = ("line_info.csv", "transit-lm-line-info.csv")


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
    """What a scenario script provides to the driver; subclass and override."""

    name = ""                    # report "benchmark"
    title = ""
    default_input = ""           # file name in data/
    needs_req_type = False
    uses_line_info = False
    empty_prediction_is_no_response = False

    def add_arguments(self, parser):
        pass

    def prepare(self, context):
        """Load what the scenario needs (called once, after the station file)."""

    def sample_fields(self, sample):
        """Fields every record of this sample carries, error rows included."""
        return {}

    def in_funnel_default(self, protocol):
        """Do error and no-response rows enter Round 1?"""
        return True

    def evaluate(self, row, context):
        """Evaluate one decoded row -> record fields (raise RowError if it can't)."""
        raise NotImplementedError

    def evaluate_rows(self, rows, context, progress):
        """Evaluate decoded rows (an iterator) -> yield (row, fields or RowError)."""
        for row in rows:
            try:
                fields = self.evaluate(row, context)
            except RowError as exc:
                fields = exc
            progress.step()
            yield row, fields

    def aggregate(self, records, report, context):
        """Add scenario figures to the report (rounds["preference"], "diversity")."""

    def can_run_in_workers(self, context):
        """May rows be split across worker processes (--workers)?"""
        return True

    def render(self, out, report):
        render_funnel(out, report["rounds"])


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

    def __init__(self, args, protocol, network):
        self.args = args
        self.protocol = protocol
        self.network = network
        self.line_info_path = None     # set by an evaluator that reads line_info.csv
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

    def __init__(self, total, enabled, stream=None, clock=time.time):
        self.total = total
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
        eta = (self.total - self.done) / rate if rate else 0.0
        self.stream.write("\r  %d/%d rows  %.0f rows/s  ETA %.0f s " % (
            self.done, self.total, rate, eta))
        self.stream.flush()
        self.shown = True

    def finish(self):
        if self.shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


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
    parser.add_argument("--sample_count", type=_positive_int, metavar="N",
                        help="evaluate only the first N rows")
    parser.add_argument("--station_info", metavar="CSV",
                        help="station file (default: $%s/station_info.csv or "
                             "transit-lm-station-info.csv if set, else the bundled "
                             "data/station_info.csv)" % DATA_ENV)
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="reference",
                        help="reference: the published evaluator's rules, quirks included "
                             "(default); paper: the TransitLM paper's definitions")
    parser.add_argument("--json", metavar="PATH",
                        help="write the JSON report to PATH ('-' = stdout, replacing the "
                             "text report)")
    parser.add_argument("--details", metavar="PATH",
                        help="write one JSON line per input row (verdicts and reasons)")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-row failure lines and no progress line")
    parser.add_argument("--workers", type=_positive_int, default=0, metavar="N",
                        help="evaluate in up to N processes (where fork is available, at "
                             "least %d rows per worker); every output is identical to a "
                             "single-process run. 0 = one per CPU core (default); "
                             "1 = a single process" % MIN_ROWS_PER_WORKER)
    benchmark.add_arguments(parser)
    return parser


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def decode_row(sample, context, lenient):
    """Decode the cells of a sample; raise RowError for unreadable ones."""
    origin, destination, city = read_prompt(sample.prompt)
    label, _ = decode_json(sample.label, "sft_label")
    prediction, extracted = decode_json(sample.prediction, "prediction", lenient)
    if extracted:
        context.count("json_extracted")
    return DecodedRow(sample, origin, destination, city, label, prediction)


def _is_empty_prediction(sample):
    value = sample.prediction
    return value is None or (isinstance(value, str) and not value.strip())


def evaluate_samples(benchmark, samples, context, progress):
    """Samples -> records (one per sample, in order).

    Rows stream through decoding and evaluation one at a time (a scenario may
    pull a batch ahead), so memory holds the records, not every decoded row.
    """
    lenient = bool(context.args.predictions) and not context.args.strict_json
    default_in_funnel = benchmark.in_funnel_default(context.protocol)
    records = [None] * len(samples)

    def error_row(sample, message, status="error"):
        record = error_record(sample, message, default_in_funnel, status)
        record.update(benchmark.sample_fields(sample))
        return record

    def decoded_rows():
        for index, sample in enumerate(samples):
            if not sample.has_prediction:
                records[index] = error_row(sample, "no prediction for this id", "no_response")
                progress.step()
                continue
            # An empty output: the general-LLM evaluator (as published) and a
            # predictions file call it no response; inline it is unreadable JSON.
            if (benchmark.empty_prediction_is_no_response or context.args.predictions) \
                    and _is_empty_prediction(sample):
                records[index] = error_row(sample, "empty prediction", "no_response")
                progress.step()
                continue
            try:
                row = decode_row(sample, context, lenient)
            except RowError as exc:
                records[index] = error_row(sample, str(exc))
                progress.step()
                continue
            row.index = index
            yield row

    for row, fields in benchmark.evaluate_rows(decoded_rows(), context, progress):
        sample = row.sample
        if isinstance(fields, RowError):
            records[row.index] = error_row(sample, str(fields))
            continue
        record = base_record(sample)
        record.update(benchmark.sample_fields(sample))
        record.update(fields)
        record["failed_round"] = failed_round(record)
        records[row.index] = record
    return records


MIN_ROWS_PER_WORKER = 500       # below this a worker costs more than it saves
_FORKED = None                   # (benchmark, samples, context) for the workers


def _can_fork():
    import multiprocessing
    return "fork" in multiprocessing.get_all_start_methods()


def _evaluate_slice(bounds):
    """Worker: evaluate samples[start:end] of the forked state -> (records, tally)."""
    benchmark, samples, context = _FORKED
    start, end = bounds
    context.tally = {}
    records = evaluate_samples(benchmark, samples[start:end], context, Progress(0, False))
    return records, context.tally


def evaluate_in_workers(benchmark, samples, context, progress, workers):
    """evaluate_samples split over processes, in contiguous slices (None if no
    process pool can be made here).

    ``workers - 1`` forked processes inherit the loaded network and samples and
    evaluate the later slices while this process evaluates the first one; the
    records are joined in slice order, so every report is byte-identical to a
    single-process run.
    """
    import multiprocessing
    global _FORKED
    size = -(-len(samples) // workers)
    bounds = [(start, min(start + size, len(samples)))
              for start in range(0, len(samples), size)]
    _FORKED = (benchmark, samples, context)
    try:
        pool = multiprocessing.get_context("fork").Pool(len(bounds) - 1)
    except OSError:                   # no semaphores/shared memory here: one process
        _FORKED = None
        return None
    try:
        with pool:
            pending = pool.map_async(_evaluate_slice, bounds[1:], chunksize=1)
            start, end = bounds[0]
            records = evaluate_samples(benchmark, samples[start:end], context, progress)
            for part, tally in pending.get():
                records.extend(part)
                for key, amount in tally.items():
                    context.count(key, amount)
                progress.step(len(part))
    finally:
        _FORKED = None
    return records


def build_report(benchmark, records, context, inputs, notes):
    counts = {"samples": len(records),
              "evaluated": sum(1 for r in records if r["status"] == "evaluated"),
              "errors": sum(1 for r in records if r["status"] == "error"),
              "no_response": sum(1 for r in records if r["status"] == "no_response")}
    report = {"schema_version": SCHEMA_VERSION, "benchmark": benchmark.name,
              "protocol": context.protocol.name, "inputs": inputs, "counts": counts,
              "rounds": funnel_rounds(records)}
    if notes:
        report["input_notes"] = notes
    benchmark.aggregate(records, report, context)
    report["metrics"] = metrics_block(report["rounds"], report.get("diversity"))
    return report


def render_text(benchmark, report, records, quiet):
    out = TextReport()
    render_header(out, report, benchmark.title)
    benchmark.render(out, report)
    if not quiet:
        render_failures(out, records)
    render_summary(out, report)
    return out.render()


def _write(path, text):
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise InputError("cannot write %s: %s" % (path, exc.strerror or exc))


def run(benchmark, argv=None):
    """Parse arguments, evaluate, write the reports; return the exit status."""
    parser = build_parser(benchmark)
    args = parser.parse_args(argv)
    # Nothing the evaluators build holds a reference cycle: reference counting
    # frees it all, and the cyclic collector would only re-scan the growing
    # station index and record list (a tenth of the run time at scale).
    gc.disable()
    try:
        return _run(benchmark, args)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % exc)
        return EXIT_USAGE
    except ServiceError as exc:
        sys.stderr.write("error: %s\n" % exc)
        return EXIT_SERVICE
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    finally:
        gc.enable()


def _run(benchmark, args):
    protocol = PROTOCOLS[args.protocol]
    station_path = args.station_info or default_data_file(STATION_FILE_NAMES)
    prediction_column = None if args.predictions else args.input_field
    samples = read_samples(args.input, prediction_column, benchmark.needs_req_type,
                           args.sample_count)
    notes = {}
    paths = [args.input, station_path]
    if args.predictions:
        join = join_predictions(samples, read_predictions(args.predictions))
        notes["predictions_join"] = join
        paths.append(args.predictions)
    network = StationNetwork.load(station_path)
    context = Context(args, protocol, network)
    benchmark.prepare(context)
    line_path = context.line_info_path
    if line_path:
        paths.append(line_path)
    inputs = {"input": args.input, "input_field": args.input_field,
              "predictions": args.predictions, "station_info": station_path,
              "line_info": line_path,
              "sha256": {path: (network.sha256 if path == station_path else file_sha256(path))
                         for path in paths}}
    progress = Progress(len(samples), sys.stderr.isatty() and not args.quiet)
    try:
        workers = min(args.workers or os.cpu_count() or 1,
                      len(samples) // MIN_ROWS_PER_WORKER)
        records = None
        if workers > 1 and _can_fork() and benchmark.can_run_in_workers(context):
            records = evaluate_in_workers(benchmark, samples, context, progress, workers)
        if records is None:
            records = evaluate_samples(benchmark, samples, context, progress)
    finally:
        progress.finish()
    notes.update(sorted(context.tally.items()))
    report = build_report(benchmark, records, context, inputs, notes)
    if args.details:
        _write(args.details, "".join(details_line(r) for r in records))
    if args.json and args.json != "-":
        _write(args.json, report_json(report))
    if args.json == "-":
        sys.stdout.write(report_json(report))
    else:
        sys.stdout.write(render_text(benchmark, report, records, args.quiet))
    sys.stdout.flush()
    return EXIT_OK


def script_main(benchmark):
    """Entry point of a scenario script: run and exit with its status."""
    try:
        status = run(benchmark)
    except BrokenPipeError:
        # `evaluate.py | head` closed stdout: nothing more to say.
        sys.stderr.close()
        status = EXIT_OK
    sys.exit(status)
