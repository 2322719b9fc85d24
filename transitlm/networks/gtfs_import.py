"""Turn a GTFS feed into a TransitLM network (station_info.csv, line_info.csv).

    python3 data/import_gtfs.py FEED --out DIR --city NAME [--date YYYYMMDD]
                                [--adcode CODE] [--route_types 1,2,3] [--patterns main|all]
                                [--id_prefix P] [--overwrite]

FEED is a GTFS zip or folder.  The output folder gets, in the released
formats, ``station_info.csv`` (stop_id, ad_code, coord_x, coord_y,
next_hop_stations, station_name) and ``line_info.csv`` (citycode, line_name,
station_list), so the evaluators and the route-eval server run on it
unchanged, plus two side files the evaluators ignore and make_benchmark.py
reads: ``hop_times.csv`` (line_name, from_stop_id, to_stop_id, run_min,
dwell_min, trips, pickup, drop_off: per hop of each line the mean run time
from the departure at its first stop to the arrival at the next, the mean
dwell there, and whether riders may board at its first stop and alight at the
next; rows with an empty line_name are walking transfers with their time),
``line_service.csv`` (line_name, route_id, route_type, rail, direction,
trips, headway_min, fare, zone_fares, fare_note: fares per ride, see
gtfs_fares.py; first_departure, last_departure: the first and last
departure from the line's first stop on the service day, HH:MM, hours past
24 after midnight as in GTFS) and ``city.json``.

Conventions (README "Evaluate a new city"):
- one service day: ``--date``, default the feed's busiest day (most trips,
  ``frequencies.txt`` runs counted; earliest date on ties);
- one line per route and direction, from the most frequent stop pattern of
  that day (``--patterns all``: one line per pattern); the kept trips are the
  trips running that pattern; without ``direction_id`` a pattern's end stops
  stand for its direction;
- a stop pattern is a trip's stops with where riders may board and alight
  (``pickup_type`` / ``drop_off_type`` 1: not); stop times where neither is
  allowed are passed through (left out); arrival and departure times are
  both kept;
- stops are the GTFS stops trips call at (platforms), ids as in the feed
  (``--id_prefix P``: P before each, wherever an id is written, so that
  feeds whose ids overlap can be combined; names are kept);
  next hops are consecutive stops of kept trips, plus walking transfers
  between stops of one parent station (both ways) and those listed in
  ``transfers.txt`` (parent stations expanded to their stops; type 3 = no
  transfer); a transfer takes ``min_transfer_time`` when given, else the walk
  (1.2 x straight line at 5 km/h), at least 2 minutes;
- line names ``<name>(<first stop>--<last stop>)``, name = route_short_name,
  else route_long_name, else route_id; rail-bound lines (route_type 1, 2,
  100-199, 400-499) get the prefix 地铁 so the evaluator's subway rules see
  them as subway; in every other line name 地铁 and 号线 are written 地·铁 and
  号·线 so those rules never do; a repeated name gets ``/route_id``;
- ``--city`` is required (a feed does not name its city, and a time zone is
  not a place); ``--adcode`` default ``0``;
- an ``--out`` that already holds a network (any of OUTPUT_FILES) is
  refused unless ``--overwrite``.

Damaged feeds: a missing required file or column, an unreadable value in a
required column, a value outside its range, or a file over a limit (transitlm/networks/limits.py,
README "Limits: import_gtfs.py") stops with exit status 2 and one line naming
the file (and line and column); stop times of unknown trips, trips calling at unknown stops or stops
without coordinates, repeated stop_sequence values and times that run
backwards are skipped and counted in the summary.  stop_times.txt is streamed
(only the service day's trips are kept, as compact integer arrays).
Standard library only.
"""

import argparse
import array
import csv
import datetime
import itertools
import json
import math
import operator
import os
import re
import sys
import zipfile


from common import (BUS_STOP_PREFIX, LINE_COLUMNS, STATION_FILE_COLUMNS, SUBWAY_MARKERS,
                    InputError, haversine_km)
from transitlm.io.exit_status import EXIT_USAGE
from transitlm.io.files import Outputs, check_not_held, write_csv
from transitlm.io.terminal import CommandParser

from transitlm.networks import gtfs_fares
from transitlm.networks import limits
from transitlm.networks.gtfs_summary import fmt_count, summary
from transitlm.networks.limits import LimitError, parse_int, parse_number, shown

REQUIRED_FILES = ("stops.txt", "routes.txt", "trips.txt", "stop_times.txt")
REQUIRED_COLUMNS = {
    "stops.txt": ("stop_id", "stop_lat", "stop_lon"),
    "routes.txt": ("route_id", "route_type"),
    "trips.txt": ("route_id", "service_id", "trip_id"),
    "stop_times.txt": ("trip_id", "stop_id", "stop_sequence"),
    "calendar.txt": ("service_id", "monday", "tuesday", "wednesday", "thursday", "friday",
                     "saturday", "sunday", "start_date", "end_date"),
    "calendar_dates.txt": ("service_id", "date", "exception_type"),
    "frequencies.txt": ("trip_id", "start_time", "end_time", "headway_secs"),
    "transfers.txt": ("from_stop_id", "to_stop_id"),
    "fare_attributes.txt": ("fare_id", "price"),
}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

SUBWAY_PREFIX = "地铁"
# Non-rail names must never look like subway to the evaluator (SUBWAY_MARKERS).
DEFUSED = {"地铁": "地·铁", "号线": "号·线"}
TRANSFER_DETOUR = 1.2
WALK_KMH = 5.0
MIN_TRANSFER_MIN = 2.0
NO_TRANSFER = "3"
NOT_AVAILABLE = "1"        # pickup_type / drop_off_type: no pickup / no drop-off
NO_PICKUP, NO_DROP_OFF = 1, 2
PASS_THROUGH = NO_PICKUP | NO_DROP_OFF
DEFAULT_ADCODE = "0"

# Ranges of the feed's numbers (README "Limits"); a value outside stops the
# import naming file, line and column.
MAX_TIME_HOURS = 168                    # times up to 167:59:59
FIRST_DATE, LAST_DATE = datetime.date(1900, 1, 1), datetime.date(2199, 12, 31)
MAX_STOP_SEQUENCE = 2 ** 31 - 1         # stop times are kept as 32-bit integers
ROUTE_TYPES = (0, 1799)                 # GTFS route types and the extended ones
MAX_HEADWAY_SECS = MAX_TIME_HOURS * 3600
MAX_TRANSFER_SECS = 24 * 3600
MAX_PRICE = 1e6
MAX_STOPS_PER_TRIP = 10000              # a longer trip is skipped and counted
MAX_DAY_STOP_TIMES = 20000000           # stop times of the service day (kept in memory)
MAX_TRANSFER_LINKS = 2000000            # walking links between stops
MAX_LINE_STOPS = 2000000                # stops of the written lines, counted per line
PARSE_CACHE_ENTRIES = 100000            # distinct time / stop_sequence texts remembered
OUTPUT_FILES = ("station_info.csv", "line_info.csv", "hop_times.csv", "line_service.csv",
                "city.json")
# --id_prefix: put before every stop id written, so that feeds whose ids
# overlap can be combined.  ASCII letters and digits first, then those and
# _ - . : (no space: the evaluators strip ids; nothing a CSV, JSON or a
# prompt must escape), at most MAX_ID_PREFIX_CHARS characters.
MAX_ID_PREFIX_CHARS = 16
ID_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")

HOP_HEADER = ["line_name", "from_stop_id", "to_stop_id", "run_min", "dwell_min", "trips",
              "pickup", "drop_off"]
SERVICE_HEADER = ["line_name", "route_id", "route_type", "rail", "direction", "trips",
                  "headway_min", "fare", "zone_fares", "fare_note", "first_departure", "last_departure"]


class FeedError(Exception):
    """A damaged feed: the message names the file (and line)."""


# ---------------------------------------------------------------------------
# Small pure helpers
# ---------------------------------------------------------------------------

def is_rail(route_type):
    """GTFS metro (1), rail (2) and the extended rail (100-199) and metro (400-499) types."""
    return route_type in (1, 2) or 100 <= route_type <= 199 or 400 <= route_type <= 499


def parse_time(text):
    """'H:MM:SS' (hours may pass 24, up to MAX_TIME_HOURS) -> seconds; '' -> None;
    else ValueError saying why."""
    text = text.strip()
    if not text:
        return None
    parts = text.split(":")
    if len(parts) != 3 or len(text) > 20:
        raise ValueError("%s is not H:MM:SS" % shown(text))
    try:
        h, m, s = int(parts[0]), int(parts[1]), int(parts[2])
    except ValueError:
        raise ValueError("%s is not H:MM:SS" % shown(text))
    if h < 0 or not 0 <= m < 60 or not 0 <= s < 61:
        raise ValueError("%s is not H:MM:SS" % shown(text))
    if h >= MAX_TIME_HOURS:
        raise ValueError("%s is past the limit of %d:59:59" % (shown(text), MAX_TIME_HOURS - 1))
    return h * 3600 + m * 60 + s


def parse_date(text):
    """'YYYYMMDD' between FIRST_DATE and LAST_DATE -> datetime.date, or ValueError saying why."""
    text = text.strip()
    if len(text) != 8 or not text.isdigit():
        raise ValueError("%s is not YYYYMMDD" % shown(text))
    try:
        day = datetime.date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        raise ValueError("%s is not a calendar date" % shown(text))
    if not FIRST_DATE <= day <= LAST_DATE:
        raise ValueError("%s is outside %s to %s" % (shown(text), FIRST_DATE.strftime("%Y%m%d"),
                                                         LAST_DATE.strftime("%Y%m%d")))
    return day


def defuse(text):
    for marker, replacement in DEFUSED.items():
        text = text.replace(marker, replacement)
    return text


def line_base_name(short_name, long_name, route_id, rail):
    """The name part of a line name; rail lines read as subway, others never do."""
    base = (short_name or long_name or route_id).strip()
    if rail:
        return base if any(m in base for m in SUBWAY_MARKERS) else SUBWAY_PREFIX + base
    return defuse(base)


def line_name(base, first_stop, last_stop, rail):
    first, last = (first_stop, last_stop) if rail else (defuse(first_stop), defuse(last_stop))
    return "%s(%s--%s)" % (base, first, last)


def busiest_date(trips_per_service, calendar, exceptions):
    """(date, trips) of the day with the most trips; earliest on ties; (None, 0) if none.

    The days are not walked one by one (a calendar may span centuries): between
    two boundaries (a range's first day, the day after its last, an exception
    date and the day after it) the running services depend on the weekday
    only, so the first seven days of each stretch stand for all of it.  The
    work is at most 7 days per boundary, whatever the span.
    """
    changes = {}             # ordinal -> [(service, +1 starts / -1 ends)]
    for service, (start, end, _) in calendar.items():
        if start <= end:
            changes.setdefault(start.toordinal(), []).append((service, 1))
            changes.setdefault(end.toordinal() + 1, []).append((service, -1))
    by_day = {}
    for (service, day), kind in exceptions.items():
        by_day.setdefault(day.toordinal(), []).append((service, kind))
    bounds = sorted(set(changes) | set(by_day) | {o + 1 for o in by_day})
    per_weekday = [0] * 7    # trips of the services in range, by weekday
    in_range = set()
    best = (None, 0)
    for k, bound in enumerate(bounds):
        for service, step in changes.get(bound, ()):
            (in_range.add if step > 0 else in_range.discard)(service)
            trips = trips_per_service.get(service, 0) * step
            for w, runs in enumerate(calendar[service][2]):
                if runs:
                    per_weekday[w] += trips
        stop = bounds[k + 1] if k + 1 < len(bounds) else bound + 1
        for ordinal in range(bound, min(stop, bound + 7)):
            w = (ordinal - 1) % 7        # ordinal 1, date(1, 1, 1), is a Monday
            total = per_weekday[w]
            for service, kind in by_day.get(ordinal, ()):
                running = service in in_range and calendar[service][2][w]
                if kind == "1" and not running:
                    total += trips_per_service.get(service, 0)
                elif kind == "2" and running:
                    total -= trips_per_service.get(service, 0)
            if total > best[1]:
                best = (ordinal, total)
    return (datetime.date.fromordinal(best[0]), best[1]) if best[0] is not None else best


def active_services(day, calendar, exceptions):
    """Service ids running on a date: calendar.txt ranges and weekdays, then
    calendar_dates.txt additions (1) and removals (2)."""
    out = set()
    for service, (start, end, weekdays) in calendar.items():
        if start <= day <= end and weekdays[day.weekday()]:
            out.add(service)
    for (service, exc_day), kind in exceptions.items():
        if exc_day == day:
            if kind == "1":
                out.add(service)
            elif kind == "2":
                out.discard(service)
    return out


# ---------------------------------------------------------------------------
# Reading the feed
# ---------------------------------------------------------------------------

class Feed(object):
    """A GTFS zip or folder; tables are opened as csv readers (BOM-tolerant)."""

    def __init__(self, path):
        self.path = path
        self.zip = None
        self.prefix = ""
        # Every table but stop_times.txt is kept in memory: their lines are capped together.
        self.lines = limits.LineBudget(limits.GTFS_TABLE_ROWS, "the feed's files other than "
                                                              "stop_times.txt")
        if os.path.isdir(path):
            self.names = set(os.listdir(path))
        elif limits.is_regular(path) and zipfile.is_zipfile(path):
            problem = limits.zip_directory_problem(path, path)
            if problem:
                raise FeedError(problem)
            try:
                self.zip = zipfile.ZipFile(path)
            except limits.ZIP_ERRORS as exc:
                raise FeedError("%s is not a readable zip file (%s)" % (path, limits.clip(exc, 120)))
            members = [n for n in self.zip.namelist() if n.endswith(".txt")]
            # Some feeds are zipped inside one folder.
            top = {n.rsplit("/", 1)[0] + "/" if "/" in n else "" for n in members}
            if len(top) == 1:
                self.prefix = top.pop()
            self.names = {n[len(self.prefix):] for n in members if n.startswith(self.prefix)}
        elif os.path.exists(path):
            raise FeedError("%s is neither a zip file nor a folder" % path)
        else:
            raise FeedError("%s does not exist" % path)

    def has(self, name):
        return name in self.names

    def table(self, name):
        """(header dict column -> index, row iterator with line numbers) of a table."""
        if not self.has(name):
            raise FeedError("feed has no %s" % name)
        source = self.open_bytes(name)
        handle = limits.capped_text(source)
        table = Table(csv.reader(handle), handle, name, source)
        header = table.header()
        columns = {h.strip().lstrip("\ufeff"): i for i, h in enumerate(header)}
        for column in REQUIRED_COLUMNS.get(name, ()):
            if column not in columns:
                raise FeedError("%s: missing column %s" % (name, column))
        return columns, table


    def open_bytes(self, name):
        """A CappedReader on one table: a regular file or a zip entry that passes
        the checks, read at most up to the file's limit."""
        limit = limits.GTFS_FILE_BYTES_BY_NAME.get(name, limits.GTFS_FILE_BYTES)
        lines = None if name == "stop_times.txt" else self.lines
        if self.zip is None:
            raw = limits.open_regular(os.path.join(self.path, name), name, limit)
            return limits.CappedReader(raw, name, limit, limits.GTFS_ROW_BYTES, lines=lines)
        info = self.zip.getinfo(self.prefix + name)
        problem = limits.zip_entry_problem(info, name, limit)
        if problem:
            raise FeedError(problem)
        try:
            raw = self.zip.open(info)
        except limits.ZIP_ERRORS as exc:
            raise FeedError("%s: damaged zip entry (%s)" % (name, limits.clip(exc, 120)))
        return limits.CappedReader(raw, name, limit, limits.GTFS_ROW_BYTES, zip_entry=True,
                                   lines=lines)


class Table(object):
    """Rows of one table; ``line`` is the file line of the row last read, and
    csv or encoding errors and limits become FeedErrors naming the file and line."""

    def __init__(self, reader, handle, name, source):
        self.reader = reader
        self.handle = handle
        self.name = name
        self.source = source

    @property
    def line(self):
        return self.reader.line_num

    def where(self):
        return "%s line %d" % (self.name, self.line)

    def header(self):
        try:
            header = next(self.reader)
        except StopIteration:
            return []
        except (csv.Error, UnicodeDecodeError) as exc:
            raise FeedError("%s line 1: %s" % (self.name, exc))
        except LimitError as exc:
            raise FeedError(self.limit_message(exc))
        self.source.mark = self.source.total
        return header

    def limit_message(self, exc):
        if isinstance(exc, limits.RowTooLong):
            # the line being read when the limit was passed
            return "%s line %d: %s" % (self.name, self.line + 1, exc)
        return str(exc)

    def __iter__(self):
        source, reader = self.source, self.reader
        with self.handle:
            try:
                for row in reader:
                    source.mark = source.total       # the row limit counts from here
                    if row:
                        yield row
            except (csv.Error, UnicodeDecodeError) as exc:
                raise FeedError("%s: %s" % (self.where(), exc))
            except LimitError as exc:
                raise FeedError(self.limit_message(exc))


def cell(row, columns, name, default=""):
    i = columns.get(name)
    if i is None or i >= len(row):
        return default
    return row[i].strip()


def checked(parse, rows, row, columns, name, *bounds):
    """parse(cell, *bounds), or a FeedError naming file, line and column with the reason."""
    try:
        return parse(cell(row, columns, name), *bounds)
    except ValueError as exc:
        raise FeedError("%s line %d: %s %s" % (rows.name, rows.line, name, exc))


class Skips(object):
    """What was skipped and why: reason -> (count, first file line)."""

    def __init__(self):
        self.items = {}

    def add(self, reason, where, count=1):
        n, first = self.items.get(reason, (0, where))
        self.items[reason] = (n + count, first)

    def lines(self):
        return ["%s %s (first: %s)" % (fmt_count(n), reason, where)
                for reason, (n, where) in sorted(self.items.items())]


def read_stops(feed, skips):
    """-> dict stop_id -> [name, lng, lat, location_type, parent, zone_id] (lng None: no coordinates)."""
    columns, rows = feed.table("stops.txt")
    stops = {}
    for row in rows:
        stop_id = cell(row, columns, "stop_id")
        if not stop_id:
            skips.add("stops without stop_id", rows.where())
            continue
        try:
            lat = float(cell(row, columns, "stop_lat"))
            lng = float(cell(row, columns, "stop_lon"))
            if not (-90 <= lat <= 90 and -180 <= lng <= 180) or (lat == 0 and lng == 0):
                raise ValueError
        except ValueError:
            lat = lng = None
        stops[stop_id] = [cell(row, columns, "stop_name") or stop_id, lng, lat,
                          cell(row, columns, "location_type") or "0",
                          cell(row, columns, "parent_station"), cell(row, columns, "zone_id")]
    return stops


def read_routes(feed, route_types):
    columns, rows = feed.table("routes.txt")
    routes = {}
    for row in rows:
        route_id = cell(row, columns, "route_id")
        route_type = checked(parse_int, rows, row, columns, "route_type", *ROUTE_TYPES)
        if route_types is not None and route_type not in route_types:
            continue
        routes[route_id] = {
            "route_id": route_id, "route_type": route_type, "rail": is_rail(route_type),
            "short": cell(row, columns, "route_short_name"),
            "long": cell(row, columns, "route_long_name"),
            "agency": cell(row, columns, "agency_id"),
        }
    return routes


def read_calendar(feed):
    """-> (calendar {service: (start, end, weekdays)}, exceptions {(service, date): type})."""
    if not feed.has("calendar.txt") and not feed.has("calendar_dates.txt"):
        raise FeedError("feed has neither calendar.txt nor calendar_dates.txt")
    calendar, exceptions = {}, {}
    if feed.has("calendar.txt"):
        columns, rows = feed.table("calendar.txt")
        for row in rows:
            calendar[cell(row, columns, "service_id")] = (
                checked(parse_date, rows, row, columns, "start_date"),
                checked(parse_date, rows, row, columns, "end_date"),
                tuple(cell(row, columns, d) == "1" for d in WEEKDAYS))
    if feed.has("calendar_dates.txt"):
        columns, rows = feed.table("calendar_dates.txt")
        for row in rows:
            day = checked(parse_date, rows, row, columns, "date")
            exceptions[(cell(row, columns, "service_id"), day)] = cell(row, columns, "exception_type")
    return calendar, exceptions


def read_frequencies(feed):
    """-> trip_id -> [(start s, end s, headway s)]."""
    out = {}
    if not feed.has("frequencies.txt"):
        return out
    columns, rows = feed.table("frequencies.txt")
    for row in rows:
        start = checked(parse_time, rows, row, columns, "start_time")
        end = checked(parse_time, rows, row, columns, "end_time")
        headway = checked(parse_int, rows, row, columns, "headway_secs", 1, MAX_HEADWAY_SECS)
        if start is None or end is None:
            raise FeedError("frequencies.txt line %d: start_time and end_time are required"
                            % rows.line)
        out.setdefault(cell(row, columns, "trip_id"), []).append((start, end, headway))
    return out


def runs_of(windows):
    """How many departures a frequencies.txt trip makes in its windows."""
    return sum(max(1, int(math.ceil((end - start) / float(headway)))) for start, end, headway in windows)


def read_trips(feed, routes, skips):
    """-> (trips {trip_id: (route_id, service_id, direction_id)}, all trip ids)."""
    columns, rows = feed.table("trips.txt")
    trips, all_ids = {}, set()
    for row in rows:
        trip_id = cell(row, columns, "trip_id")
        all_ids.add(trip_id)
        route_id = cell(row, columns, "route_id")
        if route_id not in routes:
            continue      # a route left out by --route_types (or unknown): not counted as damage
        trips[trip_id] = (route_id, cell(row, columns, "service_id"),
                          cell(row, columns, "direction_id"))
    return trips, all_ids


def read_fares(feed):
    """-> gtfs_fares.FareTable from fare_attributes.txt and fare_rules.txt, or None without fares."""
    if not feed.has("fare_attributes.txt"):
        return None
    columns, rows = feed.table("fare_attributes.txt")
    prices, agency, transfers = {}, {}, {}
    for row in rows:
        fare_id = cell(row, columns, "fare_id")
        prices[fare_id] = checked(parse_number, rows, row, columns, "price", 0.0, MAX_PRICE)
        agency[fare_id] = cell(row, columns, "agency_id")
        transfers[fare_id] = cell(row, columns, "transfers")
    rules = []
    if feed.has("fare_rules.txt"):
        columns, rows = feed.table("fare_rules.txt")
        for row in rows:
            rules.append(tuple(cell(row, columns, c) for c in
                               ("fare_id", "route_id", "origin_id", "destination_id", "contains_id")))
    return gtfs_fares.FareTable(prices, rules, agency, transfers)


def read_transfers(feed, skips):
    """-> list of (from_stop, to_stop, kind, minutes or None); trip/route-specific rows skipped."""
    out = []
    if not feed.has("transfers.txt"):
        return out
    columns, rows = feed.table("transfers.txt")
    for row in rows:
        if any(cell(row, columns, c) for c in ("from_trip_id", "to_trip_id", "from_route_id",
                                               "to_route_id")):
            skips.add("trip- or route-specific transfers (not used)",
                      "transfers.txt line %d" % rows.line)
            continue
        text = cell(row, columns, "min_transfer_time")
        minutes = int(checked(parse_number, rows, row, columns, "min_transfer_time", 0.0,
                              MAX_TRANSFER_SECS)) / 60.0 if text else None
        out.append((cell(row, columns, "from_stop_id"), cell(row, columns, "to_stop_id"),
                    cell(row, columns, "transfer_type"), minutes))
    return out


def stream_stop_times(feed, active, known_trips, stop_code, bad_stops, skips):
    """Read stop_times.txt once -> per active trip an array of (sequence,
    stop code * 4 + rule bits, arrival s, departure s) (-1: no time; rule bits
    NO_PICKUP, NO_DROP_OFF from pickup_type / drop_off_type 1).

    ``active`` maps trip_id -> trip index; ``stop_code`` stop_id -> int.  A
    stop time of an unknown trip is skipped; a trip calling at an unknown stop
    or at a stop without coordinates is marked (its index in the returned set).
    An empty arrival time is the departure time and the other way round.
    """
    columns, rows = feed.table("stop_times.txt")
    if "arrival_time" not in columns and "departure_time" not in columns:
        raise FeedError("stop_times.txt: missing column arrival_time and departure_time")
    i_trip, i_stop, i_seq = columns["trip_id"], columns["stop_id"], columns["stop_sequence"]
    i_arr, i_dep = columns.get("arrival_time"), columns.get("departure_time")
    i_pick, i_drop = columns.get("pickup_type"), columns.get("drop_off_type")
    width = max(i_trip, i_stop, i_seq, i_arr or 0, i_dep or 0, i_pick or 0, i_drop or 0) + 1
    data = [array.array("i") for _ in range(len(active))]
    marked = {}
    time_cache = {"": -1}
    sequence_cache = {}
    unknown_trips, inactive, count, kept = 0, 0, 0, 0
    first_unknown = None
    for row in rows:
        count += 1
        if len(row) < width:
            row = row + [""] * (width - len(row))
        trip = active.get(row[i_trip])
        if trip is None:
            if row[i_trip] in known_trips:
                inactive += 1
            else:
                unknown_trips += 1
                if first_unknown is None:
                    first_unknown = rows.where()
            continue
        stop = stop_code.get(row[i_stop])
        if stop is None:
            code = "unknown stop" if row[i_stop] not in bad_stops else "stop without coordinates"
            marked.setdefault(trip, (code, "stop_times.txt line %d" % rows.line))
            continue
        dep_text = row[i_dep] if i_dep is not None else ""
        arr_text = row[i_arr] if i_arr is not None else ""
        text = dep_text or arr_text
        departure = time_cache.get(text)
        if departure is None:
            departure = cached_time(time_cache, text, rows.line,
                                    "departure_time" if dep_text else "arrival_time")
        if arr_text and arr_text != dep_text:
            arrival = time_cache.get(arr_text)
            if arrival is None:
                arrival = cached_time(time_cache, arr_text, rows.line, "arrival_time")
        else:
            arrival = departure
        rules = 0
        if i_pick is not None and row[i_pick] and row[i_pick].strip() == NOT_AVAILABLE:
            rules = NO_PICKUP
        if i_drop is not None and row[i_drop] and row[i_drop].strip() == NOT_AVAILABLE:
            rules |= NO_DROP_OFF
        sequence = sequence_cache.get(row[i_seq])
        if sequence is None:
            try:
                sequence = parse_int(row[i_seq], 0, MAX_STOP_SEQUENCE)
            except ValueError as exc:
                raise FeedError("stop_times.txt line %d: stop_sequence %s" % (rows.line, exc))
            if len(sequence_cache) < PARSE_CACHE_ENTRIES:
                sequence_cache[row[i_seq]] = sequence
        data[trip].extend((sequence, stop * 4 + rules, arrival, departure))
        kept += 1
        if kept > MAX_DAY_STOP_TIMES:
            raise FeedError("stop_times.txt: more than %s stop times on the service day (the limit)"
                            % fmt_count(MAX_DAY_STOP_TIMES))
    if unknown_trips:
        skips.add("stop times of trips not in trips.txt", first_unknown, unknown_trips)
    return data, marked, count, inactive


def cached_time(cache, text, line, column):
    """Seconds of a stop time text (remembered in cache, up to
    PARSE_CACHE_ENTRIES texts), or a FeedError naming the line and column."""
    try:
        seconds = parse_time(text)
    except ValueError as exc:
        raise FeedError("stop_times.txt line %d: time %s (column %s)" % (line, exc, column))
    if seconds is None:
        seconds = -1            # blank
    if len(cache) < PARSE_CACHE_ENTRIES:
        cache[text] = seconds
    return seconds


def plain_trip(values):
    """trip_pattern's result for the common trip (calls in stop_sequence order,
    every time given and in order, no pickup or drop-off rule, no stop twice in
    a row), computed without a Python loop per call; None for any other trip."""
    sequence, codes = values[0::4], values[1::4]
    arrivals, departures = values[2::4].tolist(), values[3::4].tolist()
    if not (all(map(operator.lt, sequence, sequence[1:])) and min(arrivals) >= 0
            and all(map(operator.le, arrivals, departures))
            and all(map(operator.le, departures, arrivals[1:]))
            and not any(map(operator.and_, codes, itertools.repeat(PASS_THROUGH)))):
        return None
    stops = tuple(code >> 2 for code in codes)
    if any(map(operator.eq, stops, stops[1:])):
        return None
    rules = (NO_DROP_OFF,) + (0,) * (len(stops) - 2) + (NO_PICKUP,)
    return stops, rules, arrivals, departures


def trip_pattern(values):
    """Flat (sequence, stop * 4 + rule bits, arrival s, departure s) quadruples
    -> (stops tuple, rules tuple, arrivals list, departures list) or a skip reason.

    Sorted by stop_sequence (any order in the file is fine); a repeated
    sequence number, a missing first/last time or times running backwards
    make the trip unusable.  Blank times are interpolated by position between
    the departure before and the arrival after.  A pass-through stop time
    (pickup_type and drop_off_type 1: no one gets on or off) is left out, the
    vehicle's time there counting as running time; a stop repeated back to
    back is one call (arrival of the first, departure of the last, boarding or
    alighting allowed if either allows it).  Rules are normalised: nobody
    alights at the first call or boards at the last.
    """
    if len(values) > 4 * MAX_STOPS_PER_TRIP:
        return "trips with more than %s stop times" % fmt_count(MAX_STOPS_PER_TRIP)
    if len(values) < 8:
        return "trips with fewer than 2 stop times"
    if not isinstance(values, array.array):
        values = array.array("i", values)
    plain = plain_trip(values)
    if plain is not None:
        return plain
    calls = sorted(zip(values[0::4], values[1::4], values[2::4], values[3::4]))
    for a, b in zip(calls, calls[1:]):
        if a[0] == b[0]:
            return "trips with a repeated stop_sequence"
    arrivals = [c[2] if c[2] >= 0 else None for c in calls]
    departures = [c[3] if c[3] >= 0 else None for c in calls]
    if departures[0] is None or arrivals[-1] is None:
        return "trips without a first or last time"
    known = [k for k in range(len(calls)) if departures[k] is not None]
    for a, b in zip(known, known[1:]):
        for k in range(a + 1, b):
            t = departures[a] + (arrivals[b] - departures[a]) * (k - a) / (b - a)
            arrivals[k] = departures[k] = t
    stops, rules, arr_out, dep_out = [], [], [], []
    last = arrivals[0]
    for (_, code, _, _), arr, dep in zip(calls, arrivals, departures):
        stop, rule = code >> 2, code & 3
        if arr < last or dep < arr:
            return "trips whose times run backwards"
        last = dep
        if rule == PASS_THROUGH:
            continue
        if stops and stops[-1] == stop:
            rules[-1] &= rule
            dep_out[-1] = dep
            continue
        stops.append(stop)
        rules.append(rule)
        arr_out.append(arr)
        dep_out.append(dep)
    if len(stops) < 2:
        return "trips with fewer than 2 distinct stops where riders get on or off"
    rules[0] |= NO_DROP_OFF
    rules[-1] |= NO_PICKUP
    return tuple(stops), tuple(rules), arr_out, dep_out


# ---------------------------------------------------------------------------
# Building the network
# ---------------------------------------------------------------------------

class Pattern(object):
    """The trips of one route and direction on the service day with one stop
    sequence and one set of boarding and alighting rules (``rules``: per stop,
    NO_PICKUP / NO_DROP_OFF bits)."""

    __slots__ = ("route_id", "direction", "stops", "rules", "trips", "hop_sums", "dwell_sums",
                 "departures", "headways", "direction_of_stops", "first_departure",
                 "last_departure")

    def __init__(self, route_id, direction, stops, rules=None, direction_of_stops=False):
        self.route_id = route_id
        self.direction = direction
        # no direction_id: ``direction`` is "<first stop id>><last stop id>"
        self.direction_of_stops = direction_of_stops
        self.stops = stops
        self.rules = rules if rules is not None else \
            (NO_DROP_OFF,) + (0,) * (len(stops) - 2) + (NO_PICKUP,)
        self.trips = 0
        self.hop_sums = [0.0] * (len(stops) - 1)      # departure -> next arrival (s)
        self.dwell_sums = [0.0] * (len(stops) - 1)    # arrival -> departure at the hop's end (s)
        self.departures = []     # first-stop departure of each plain trip (s)
        self.headways = []       # (runs, headway s) of frequency-based trips
        self.first_departure = None   # first-stop departures of the day, first and last (s)
        self.last_departure = None

    def add(self, arrivals, departures, windows):
        runs = runs_of(windows) if windows else 1
        self.trips += runs
        hops = map(operator.sub, arrivals[1:], departures)
        dwells = map(operator.sub, departures[1:], arrivals[1:])
        if runs != 1:
            hops = map(operator.mul, hops, itertools.repeat(runs))
            dwells = map(operator.mul, dwells, itertools.repeat(runs))
        self.hop_sums = list(map(operator.add, self.hop_sums, hops))
        self.dwell_sums = list(map(operator.add, self.dwell_sums, dwells))
        if windows:
            self.headways.extend((runs_of([w]), w[2]) for w in windows)
            # a window's runs leave at its start and every headway after it
            spans = [(start, start + (runs_of([(start, end, headway)]) - 1) * headway)
                     for start, end, headway in windows]
        else:
            self.departures.append(departures[0])
            spans = [(departures[0], departures[0])]
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        if self.first_departure is None or first < self.first_departure:
            self.first_departure = first
        if self.last_departure is None or last > self.last_departure:
            self.last_departure = last

    def hop_minutes(self):
        """Mean run time of each hop: departure from its first stop to arrival at the next."""
        return [total / self.trips / 60.0 for total in self.hop_sums]

    def dwell_minutes(self):
        """Mean dwell at the end stop of each hop (arrival to departure)."""
        return [total / self.trips / 60.0 for total in self.dwell_sums]

    def can_board(self, k):
        return not self.rules[k] & NO_PICKUP

    def can_alight(self, k):
        return not self.rules[k] & NO_DROP_OFF

    def headway_min(self):
        """Mean gap between departures over the day (minutes), or None for one trip."""
        gaps = []
        if len(self.departures) > 1:
            d = sorted(self.departures)
            gaps.append(((d[-1] - d[0]) / (len(d) - 1), len(d) - 1))
        for runs, headway in self.headways:
            gaps.append((headway, runs))
        weight = sum(w for _, w in gaps)
        return sum(g * w for g, w in gaps) / weight / 60.0 if weight else None


def choose_patterns(patterns, keep_all):
    """The kept patterns, in a stable order: per (route, direction) the one with
    most trips (longest, then first seen, on ties), or every pattern."""
    if keep_all:
        return list(patterns)
    best = {}
    for p in patterns:
        key = (p.route_id, p.direction)
        cur = best.get(key)
        if cur is None or (p.trips, len(p.stops)) > (cur.trips, len(cur.stops)):
            best[key] = p
    return [p for p in patterns if best[(p.route_id, p.direction)] is p]


def transfer_links(stops, kept, transfers):
    """Walking links between kept stops -> {(a, b): minutes or None}.

    Stops of one parent station are linked both ways; transfers.txt rows link
    their stops (a parent station stands for its stops), type 3 removes a link.
    """
    children = {}
    for stop_id in kept:
        parent = stops[stop_id][4]
        if parent:
            children.setdefault(parent, []).append(stop_id)
    links = {}
    for group in children.values():
        check_link_count(len(links) + len(group) * len(group))
        for a in group:
            for b in group:
                if a != b:
                    links[(a, b)] = None

    def expand(stop_id):
        if stop_id in kept:
            return [stop_id]
        return children.get(stop_id, [])

    forbidden = set()
    for from_id, to_id, kind, minutes in transfers:
        check_link_count(len(links) + len(forbidden) + len(expand(from_id)) * len(expand(to_id)))
        for a in expand(from_id):
            for b in expand(to_id):
                if a == b:
                    continue
                if kind == NO_TRANSFER:
                    forbidden.add((a, b))
                elif minutes is not None or (a, b) not in links:
                    links[(a, b)] = minutes
    for key in forbidden:
        links.pop(key, None)
    return links


def check_network_size(kept):
    """The written lines are built in memory: refuse more than MAX_LINE_STOPS stops on them."""
    total = sum(len(p.stops) for p in kept)
    if total > MAX_LINE_STOPS:
        raise FeedError("the lines of the service day call at %s stops in all, over the limit of %s"
                        % (fmt_count(total), fmt_count(MAX_LINE_STOPS)))


def check_link_count(count):
    """Walking links are pairs of stops: refuse a feed whose parent stations and
    transfers.txt would pair more of them than MAX_TRANSFER_LINKS."""
    if count > MAX_TRANSFER_LINKS:
        raise FeedError("stops.txt (parent_station) and transfers.txt link more than %s pairs of "
                        "stops (the limit)" % fmt_count(MAX_TRANSFER_LINKS))


def transfer_minutes(stated, km):
    walk = km * TRANSFER_DETOUR / WALK_KMH * 60
    return max(MIN_TRANSFER_MIN, stated if stated is not None else walk)


def unique_names(wanted):
    """Line names made unique: a repeat gets '/route_id' in its name part, then '#k'."""
    seen, out = set(), []
    next_k = {}          # wanted item -> the k to try next (keeps the loop linear)
    for item in wanted:
        base, first, last, rail, route_id = item
        name = line_name(base, first, last, rail)
        if name in seen:
            name = line_name(base + "/" + route_id, first, last, rail)
        k = next_k.get(item, 2)
        candidate = name
        while candidate in seen:
            candidate = line_name("%s/%s#%d" % (base, route_id, k), first, last, rail)
            k += 1
        next_k[item] = k
        seen.add(candidate)
        out.append(candidate)
    return out


def import_feed(path, date=None, route_types=None, keep_all=False):
    """Read a feed -> dict with everything to write and report."""
    feed = Feed(path)
    for name in REQUIRED_FILES:
        if not feed.has(name):
            raise FeedError("feed has no %s" % name)
    skips = Skips()
    stops = read_stops(feed, skips)
    routes = read_routes(feed, route_types)
    calendar, exceptions = read_calendar(feed)
    frequencies = read_frequencies(feed)
    trips, all_trip_ids = read_trips(feed, routes, skips)

    trips_per_service = {}
    for trip_id, (_, service, _) in trips.items():
        runs = runs_of(frequencies[trip_id]) if trip_id in frequencies else 1
        trips_per_service[service] = trips_per_service.get(service, 0) + runs
    if date is None:
        day, _ = busiest_date(trips_per_service, calendar, exceptions)
        if day is None:
            raise FeedError("no service day: calendar.txt and calendar_dates.txt run no trip "
                            "of the selected routes")
    else:
        day = date
    services = active_services(day, calendar, exceptions)
    active_ids = sorted(t for t, info in trips.items() if info[1] in services)
    if not active_ids:
        raise FeedError("no trip of the selected routes runs on %s" % day.strftime("%Y%m%d"))
    active = {t: i for i, t in enumerate(active_ids)}

    # Stops with coordinates get integer codes; the others are remembered.
    usable = [sid for sid, s in stops.items() if s[1] is not None and s[3] in ("0", "")]
    stop_code = {sid: i for i, sid in enumerate(usable)}
    bad_stops = {sid for sid, s in stops.items() if s[1] is None}
    data, marked, stop_time_rows, inactive_rows = stream_stop_times(feed, active, all_trip_ids,
                                                                     stop_code, bad_stops, skips)

    patterns, by_key = [], {}
    pass_through = 0
    for trip_id in active_ids:
        index = active[trip_id]
        values = data[index]
        data[index] = None            # free as we go
        if index in marked:
            reason, where = marked[index]
            skips.add("trips calling at an %s" % reason if reason == "unknown stop"
                      else "trips calling at a %s" % reason, where)
            continue
        if len(values) == 0:
            skips.add("trips without stop times", "trips.txt (trip %s)" % trip_id)
            continue
        result = trip_pattern(values)
        if isinstance(result, str):
            skips.add(result, "stop_times.txt (trip %s)" % trip_id)
            continue
        stop_seq, rules, arrivals, departures = result
        if 4 * len(stop_seq) != len(values):     # calls left out or merged
            pass_through += sum(1 for code in values[1::4] if code & PASS_THROUGH == PASS_THROUGH)
        route_id, _, direction = trips[trip_id]
        of_stops = direction == ""
        if of_stops:
            direction = "%s>%s" % (usable[stop_seq[0]], usable[stop_seq[-1]])
        key = (route_id, direction, stop_seq, rules)
        pattern = by_key.get(key)
        if pattern is None:
            pattern = by_key[key] = Pattern(route_id, direction, stop_seq, rules, of_stops)
            patterns.append(pattern)
        pattern.add(arrivals, departures, frequencies.get(trip_id))
    kept_patterns = choose_patterns(patterns, keep_all)
    if not kept_patterns:
        raise FeedError("no usable trip runs on %s (see the skipped items)" % day.strftime("%Y%m%d"))
    check_network_size(kept_patterns)
    # Deterministic order: by route as routes.txt lists them, then direction.
    route_order = {r: i for i, r in enumerate(routes)}
    kept_patterns.sort(key=lambda p: (route_order[p.route_id], p.direction, -p.trips, p.stops, p.rules))
    return {"feed": feed, "day": day, "stops": stops, "routes": routes, "usable": usable,
            "patterns": patterns, "kept": kept_patterns, "skips": skips,
            "active_trips": len(active_ids), "stop_time_rows": stop_time_rows,
            "inactive_rows": inactive_rows, "transfers": read_transfers(feed, skips),
            "fares": read_fares(feed), "pass_through": pass_through}


def build_outputs(result, adcode, id_prefix=""):
    """-> rows of the four output files and figures for the summary.

    ``id_prefix`` goes before every stop id written (--id_prefix): the
    station file's ids and next hops, the line file's station lists, the
    hops and walking transfers of hop_times.csv and a direction named by its
    end stops in line_service.csv.  Names are the feed's."""
    stops, routes, usable = result["stops"], result["routes"], result["usable"]
    written = (lambda sid: id_prefix + sid) if id_prefix else (lambda sid: sid)
    kept = result["kept"]
    stop_order, hops = [], {}
    hop_pairs = set()    # (a, b) already in hops[a]: membership without scanning the list
    for p in kept:
        for code in p.stops:
            sid = usable[code]
            if sid not in hops:
                hops[sid] = []
                stop_order.append(sid)
    for p in kept:
        for a, b in zip(p.stops, p.stops[1:]):
            sa, sb = usable[a], usable[b]
            if (sa, sb) not in hop_pairs:
                hop_pairs.add((sa, sb))
                hops[sa].append(sb)
    kept_set = set(hops)
    links = transfer_links(stops, kept_set, result["transfers"])
    link_rows = []
    position = {sid: k for k, sid in enumerate(stop_order)}
    for (a, b) in sorted(links, key=lambda ab: (position[ab[0]], position[ab[1]])):
        if (a, b) not in hop_pairs:
            hop_pairs.add((a, b))
            hops[a].append(b)
        km = haversine_km(stops[a][1], stops[a][2], stops[b][1], stops[b][2])
        link_rows.append(["", written(a), written(b), "%.2f" % transfer_minutes(links[(a, b)], km),
                          "", "", "", ""])

    wanted = []
    for p in kept:
        route = routes[p.route_id]
        base = line_base_name(route["short"], route["long"], route["route_id"], route["rail"])
        wanted.append((base, stops[usable[p.stops[0]]][0], stops[usable[p.stops[-1]]][0],
                       route["rail"], route["route_id"]))
    names = unique_names(wanted)
    table = result["fares"]
    fare_kinds = {"flat": 0, "zones": 0, "none": 0, "unpriced": 0}
    line_rows, hop_rows, service_rows = [], [], []
    for name, p in zip(names, kept):
        route = routes[p.route_id]
        station_list = [{"station_name": stops[usable[c]][0], "stop_id": written(usable[c]),
                         "x": stops[usable[c]][1], "y": stops[usable[c]][2],
                         "station_id": written(usable[c])} for c in p.stops]
        line_rows.append([adcode, name, json.dumps(station_list, ensure_ascii=False)])
        last = len(p.stops) - 2
        for k, (run, dwell) in enumerate(zip(p.hop_minutes(), p.dwell_minutes())):
            hop_rows.append([name, written(usable[p.stops[k]]), written(usable[p.stops[k + 1]]),
                             "%.2f" % run,
                             "" if k == last else "%.2f" % dwell, str(p.trips),
                             "1" if p.can_board(k) else "0", "1" if p.can_alight(k + 1) else "0"])
        headway = p.headway_min()
        kind, fare, zone_fares, note = line_fare_cells(table, route, [stops[usable[c]][5] for c in p.stops])
        fare_kinds[kind] += 1
        fare_kinds["unpriced"] += kind == "zones" and gtfs_fares.unpriced_pairs(json.loads(zone_fares)["fares"]) > 0
        direction = ("%s>%s" % (written(usable[p.stops[0]]), written(usable[p.stops[-1]]))
                     if p.direction_of_stops else p.direction)
        service_rows.append([name, p.route_id, str(route["route_type"]), "1" if route["rail"] else "0",
                             direction, str(p.trips), "" if headway is None else "%.1f" % headway,
                             fare, zone_fares, note, clock(p.first_departure),
                             clock(p.last_departure)])
    station_rows = []
    for sid in stop_order:
        name, lng, lat = stops[sid][0], stops[sid][1], stops[sid][2]
        station_rows.append([written(sid), adcode, "%.6f" % lng, "%.6f" % lat,
                             json.dumps([written(hop) for hop in hops[sid]], ensure_ascii=False),
                             name])
    parents = {stops[sid][4] or sid for sid in stop_order}
    return {"stations": station_rows, "lines": line_rows, "hops": hop_rows + link_rows,
            "service": service_rows, "links": len(link_rows), "places": len(parents),
            "rail_lines": sum(1 for p in kept if routes[p.route_id]["rail"]),
            "kept_trips": sum(p.trips for p in kept), "fare_kinds": fare_kinds,
            "no_boarding": sum(1 for p in kept for k in range(len(p.stops) - 1) if not p.can_board(k)),
            "no_alighting": sum(1 for p in kept for k in range(1, len(p.stops)) if not p.can_alight(k))}


def clock(seconds):
    """A GTFS time in seconds -> "HH:MM" (hours past 24 after midnight, as in
    GTFS), or "" for none."""
    if seconds is None:
        return ""
    minutes = int(seconds) // 60
    return "%02d:%02d" % (minutes // 60, minutes % 60)


def line_fare_cells(table, route, zones):
    """-> (kind flat|zones|none, fare, zone_fares, fare_note) cells of a line in line_service.csv."""
    if table is None:
        return "none", "", "", "the feed has no fares: make_benchmark.py's distance table"
    flat, matrix = gtfs_fares.line_fares(table, route["route_id"], zones, route["agency"])
    notes = []
    if table.transfer_fares():
        notes.append("fare transfers not applied: each ride pays its fare")
    if flat is not None:
        return "flat", "%g" % flat, "", "; ".join(notes)
    if matrix is None:
        return "none", "", "", "; ".join(["no fare of the feed applies: make_benchmark.py's distance table"]
                                         + notes)
    unpriced = gtfs_fares.unpriced_pairs(matrix)
    if unpriced:
        notes.insert(0, "%d zone pairs without a fare are not ridden" % unpriced)
    return "zones", "", json.dumps({"zones": zones, "fares": matrix}, ensure_ascii=False), "; ".join(notes)


def agency_names(path):
    """Names of the feed's agencies ([] when they cannot be read)."""
    try:
        feed = Feed(path)
        if not feed.has("agency.txt"):
            return []
        columns, rows = feed.table("agency.txt")
        return [cell(row, columns, "agency_name") for row in itertools.islice(rows, 3)]
    except (FeedError, OSError, zipfile.BadZipFile, ValueError):
        return []


def city_hint(path):
    """The one-line message when --city is missing."""
    names = [n for n in agency_names(path) if n]
    known = " (agencies in this feed: %s)" % ", ".join(json.dumps(n, ensure_ascii=False) for n in names) \
        if names else ""
    return ("--city is required: a GTFS feed does not name its city and its time zone is not a "
            "place%s; add --city NAME, the city the prompts should name" % known)


def parse_route_types(text):
    try:
        return {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated route_type numbers, e.g. 1,2,3")


def parse_date_arg(text):
    try:
        return parse_date(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected YYYYMMDD: %s" % exc)


def id_prefix_problem(text):
    """Why ``text`` cannot be an --id_prefix, or None."""
    if not text:
        return "it is empty: give the text every stop id should start with, e.g. nyc:"
    if len(text) > MAX_ID_PREFIX_CHARS:
        return "%s is %d characters long (at most %d)" % (shown(text), len(text),
                                                          MAX_ID_PREFIX_CHARS)
    if not ID_PREFIX_RE.match(text):
        return ("%s: use ASCII letters and digits, then also _ - . or : (it goes into every "
                "stop id, so no space, quote or other sign)" % shown(text))
    if text.startswith(BUS_STOP_PREFIX):
        return ("%s starts with %s, the prefix the route-eval rules add to an id they do not "
                "find: ids of two networks could then match each other" % (
                    shown(text), BUS_STOP_PREFIX))
    return None


def parse_id_prefix(text):
    problem = id_prefix_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def parse_args(argv):
    parser = CommandParser(prog="import_gtfs.py", description="Turn a GTFS feed into station_info.csv and line_info.csv.")
    parser.add_argument("feed", help="GTFS zip file or folder")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--date", type=parse_date_arg, default=None,
                        help="service day YYYYMMDD (default: the feed's busiest day)")
    parser.add_argument("--city", default=None,
                        help="city named in the prompts (required: a GTFS feed does not name its city)")
    parser.add_argument("--adcode", default=DEFAULT_ADCODE, help="ad_code/citycode column (default 0)")
    parser.add_argument("--route_types", type=parse_route_types, default=None,
                        help="comma-separated GTFS route_type values to keep (default: all)")
    parser.add_argument("--patterns", choices=("main", "all"), default="main",
                        help="main: the most frequent stop pattern per route and direction "
                             "(default); all: one line per pattern")
    parser.add_argument("--id_prefix", type=parse_id_prefix, default=None, metavar="P",
                        help="put P before every stop id written (station, line, hop and "
                             "service files), so that networks of feeds whose stop ids "
                             "overlap can be combined; ASCII letters and digits, then also "
                             "_ - . :, at most %d characters (default: the feed's ids)"
                             % MAX_ID_PREFIX_CHARS)
    parser.add_argument("--overwrite", action="store_true",
                        help="let --out replace the network a folder already holds "
                             "(without it such a folder is refused)")
    return parser.parse_args(argv)


def output_problem(feed, out):
    """Why --out cannot take the outputs (a file, or an output would overwrite
    an input: the feed, or a table of a feed folder), or None."""
    if os.path.exists(out) and not os.path.isdir(out):
        return "--out %s is not a folder" % out
    inputs = [feed]
    if os.path.isdir(feed):
        try:
            inputs.extend(os.path.join(feed, name) for name in sorted(os.listdir(feed))
                          if name.endswith(".txt"))
        except OSError:
            pass          # the import names the problem
    return limits.outputs_problem([os.path.join(out, name) for name in OUTPUT_FILES], inputs)


def fail(message):
    sys.stderr.write("import_gtfs.py: %s\n" % limits.one_line(message))
    return EXIT_USAGE


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    city = (args.city or "").strip()
    if not city:
        return fail(city_hint(args.feed))
    problem = output_problem(args.feed, args.out)
    if problem:
        return fail(problem)
    try:
        check_not_held(args.out, OUTPUT_FILES, args.overwrite, "a network")
        result = import_feed(args.feed, args.date, args.route_types, args.patterns == "all")
        outputs = build_outputs(result, args.adcode, args.id_prefix or "")
        info = {"city": city, "adcode": args.adcode, "feed": os.path.basename(args.feed),
                "date": result["day"].strftime("%Y%m%d")}
        if args.id_prefix:
            info["id_prefix"] = args.id_prefix
        write_network(args.out, outputs, info)
    except (FeedError, LimitError, InputError) as exc:
        return fail(exc)
    except (OSError, zipfile.BadZipFile) as exc:
        return fail(exc)
    print(summary(result, outputs, args, args.out, city))
    return 0


def write_network(out, outputs, city):
    """The network folder's files, written whole or not at all (with the
    folders they needed)."""
    with Outputs() as files:
        files.make_folders(out)
        for name, header, key in (("station_info.csv", STATION_FILE_COLUMNS, "stations"),
                                  ("line_info.csv", LINE_COLUMNS, "lines"),
                                  ("hop_times.csv", HOP_HEADER, "hops"),
                                  ("line_service.csv", SERVICE_HEADER, "service")):
            write_csv(files.open(os.path.join(out, name), newline=""), header, outputs[key])
        files.write(os.path.join(out, "city.json"), json.dumps(city, ensure_ascii=False) + "\n")

