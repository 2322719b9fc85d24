"""Build the four TransitLM benchmark files for any network folder.

    python3 data/make_benchmark.py --network DIR --out DIR --samples N [--seed S] [--lang zh|en]
                                   [--workers N] [--overwrite]

DIR is a folder written by import_gtfs.py or make_demo.py (station_info.csv
and line_info.csv; hop_times.csv, line_service.csv and city.json when
present).  Writes benchmark1_single_route.csv, benchmark2_personalized.csv,
benchmark3_diversity.csv and general_llm.csv in the released test-file
layout (task_id, req_type, adcode, indexid, system_prompt, sft_prompt,
sft_label) plus an empty generate_results column, N rows each, and
network.json; an --out that already holds any of them is refused unless
--overwrite.

Labels come from the router of router.py (the one behind the demo data),
exact under its documented cost and rules (README "Evaluate a new city"):
cost = the expert score; walking, cycling or taxi access by distance; ride
times from hop_times.csv (run times and the dwells a rider sits through,
boarding and alighting only where the timetable allows) or, for a network
without one, from the demo's fixed speeds; a wait of half the line's mean
headway (line_service.csv, 1-15 min) or the demo's 3 min (subway) / 5 min;
walking transfers at their stated time (hop_times.csv rows without a line)
or at 5 km/h; fares per ride from line_service.csv (a flat fare, or zone
fares) or else the demo's distance table (subway 3 up to 6 km, 4 up to 12
km, 5 up to 22 km, 6 up to 32 km, +1 per further 20 km; bus 2 up to 10 km,
+1 per further 5 km).  Lines are subway when their name has 地铁 or 号线 (the
evaluator's rule); track length is 1.10 (subway) or 1.25 (bus) times the
straight line between stops.

Origin and destination lie TRIP_KM apart (so never within walking range);
a row with no such trip after MAX_ATTEMPTS draws is not written and the
shortfall is reported.  Benchmark 2 cycles through preferences 2, 5, 7 and
8, each routed with the preference applied; a preference the network cannot
satisfy (no bus line for 5, no subway line for 7) is left out and reported.
Benchmark 3 labels are the best route, the best riding none of its lines,
and the best riding none of either's, each within ALTERNATIVE_FACTOR of the
first.  General-LLM labels name stations and are kept only when the
route-eval name matching finds exactly the label's stops.  Deterministic for
a given seed, whatever --workers (rows are built in forked workers, one per
core by default: RowMaker); row ids come from the network's files' hash, the
seed, the benchmark and the row.  Every file is read within limits and every value
checked (docs/gtfs-and-benchmarks.md, "Limits: make_benchmark.py"); a bad
one stops the run with exit status 2 and one line.  Standard library only.
"""

import argparse
import collections
import csv
import hashlib
import json
import math
import os
import sys


from common import (DP_RATIO, LINE_COLUMNS, STATION_FILE_COLUMNS, InputError,
                    is_subway_line, parse_distance_km)
from common import MAX_JSON_DEPTH, json_too_deep
from transitlm.io.exit_status import EXIT_USAGE, EXIT_WORKER
from transitlm.io.files import Outputs, check_not_held, write_csv
from transitlm.evaluation.network_check import NETWORK_RECORD, network_record
from transitlm.io.terminal import CommandParser, Progress
from common import CITY_CODES
from common import MIN_STATION_SIMILARITY, bigram_jaccard
from transitlm.networks import bound_tables, gtfs_fares
from transitlm.evaluation.prompt_texts import system_prompt
from transitlm.evaluation.workers import (DEFAULT_BUILD_WORKERS, ForkedWorkers, WorkerFailure,
                                          build_worker_count, can_fork)
from transitlm.networks import limits
from transitlm.networks.limits import LimitError, parse_number, shown
from transitlm.networks import router
from transitlm.networks.router import (
    FARE_BANDS, FARE_STEP_KM, KIND_BUS, KIND_METRO, WAIT_MIN, District, Line, LineDir,
    Network, PointAccess, Prefs, distinct_alternatives, draw_od, dumps, ends_where_it_boarded,
    find_route, prefs_for_req, route_json, sub_rng)

csv.field_size_limit(2 ** 31 - 1)

TRACK_FACTOR = {KIND_METRO: 1.10, KIND_BUS: 1.25}   # track length / straight line (no shapes)
SPEED_KMH = {KIND_METRO: 35.0, KIND_BUS: 18.0}      # only for networks without hop_times.csv
DWELL_MIN = {KIND_METRO: 0.5, KIND_BUS: 0.4}
WAIT_RANGE_MIN = (1.0, 15.0)
FLAT_FARE_STEP_KM = float("inf")
TRIP_KM = (2.5, 13.0)             # origin to destination, straight line (and their stations)
ALTERNATIVE_FACTOR = 1.5          # benchmark 3: expert score and minutes at most this times the first's
MAX_ATTEMPTS = 200
SEED_DEFAULT = 20240611
REQ_TYPES = (2, 5, 7, 8)
# Limits (README "Limits"): rows per file; the network's numbers; every
# network file's lines together (the tables and the router's network are in memory).
MAX_SAMPLES = 100000
MAX_WORKERS = 64                  # --workers
MAX_SEED_DIGITS = 40
MAX_MINUTES = 7 * 24 * 60            # a ride hop or a walking transfer
MAX_HEADWAY_MIN = 7 * 24 * 60
MAX_FARE = 1e6
NETWORK_FILES = ("station_info.csv", "line_info.csv", "hop_times.csv", "line_service.csv",
                 "city.json")
LINE = object()      # read_table's rows: the key of the row's file line

COLUMNS = ["task_id", "req_type", "adcode", "indexid", "system_prompt", "sft_prompt",
           "sft_label", "generate_results"]
FILES = (("b1", "benchmark1_single_route.csv", "1"),
         ("b2", "benchmark2_personalized.csv", "2"),
         ("b3", "benchmark3_diversity.csv", "3"),
         ("general", "general_llm.csv", "general"))

QUERY = {"zh": "从{origin}附近到{destination}附近怎么走",
         "en": "How do I get from near {origin} to near {destination}?"}
REQ_SUFFIX = {
    "zh": {0: "", 2: "，尽量少换乘", 5: "，不想坐地铁", 7: "，优先坐地铁", 8: "，希望时间最短"},
    "en": {0: "", 2: " As few transfers as possible, please.", 5: " I don't want to take the subway.",
           7: " I prefer the subway.", 8: " The fastest way, please."},
}
DIVERSITY_SUFFIX = {"zh": "，有哪些出行方案", "en": " What are my options?"}

class NetworkError(Exception):
    """A network folder that cannot be read (exit 2, one line)."""


class City(object):
    def __init__(self, name, code):
        self.name = name
        self.code = code


# ---------------------------------------------------------------------------
# Reading a network folder
# ---------------------------------------------------------------------------

def read_table(path, required, optional=False, lines=None):
    """-> list of dict rows (missing cells '', the file line under the key LINE),
    or None for an absent optional file.  Read within the limits: a regular
    file of at most NETWORK_FILE_BYTES, rows of at most NETWORK_ROW_BYTES, and
    ``lines`` (a limits.LineBudget) shared by the network's files."""
    if not os.path.exists(path):
        if optional:
            return None
        raise NetworkError("%s does not exist" % path)
    name = os.path.basename(path)
    reader = None
    try:
        source = limits.CappedReader(limits.open_regular(path, path, limits.NETWORK_FILE_BYTES),
                                     path, limits.NETWORK_FILE_BYTES, limits.NETWORK_ROW_BYTES,
                                     lines=lines)
        with limits.capped_text(source) as handle:
            reader = csv.DictReader(handle, restval="")
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise NetworkError("%s: missing column %s" % (path, ", ".join(missing)))
            rows = []
            source.mark = source.total
            for row in reader:
                source.mark = source.total
                row[LINE] = reader.line_num
                rows.append(row)
            return rows
    except limits.RowTooLong as exc:
        raise NetworkError("%s line %d: %s" % (name, (reader.line_num if reader else 0) + 1, exc))
    except LimitError as exc:
        raise NetworkError(str(exc))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise NetworkError("cannot read %s: %s" % (path, exc))


def city_names(folder):
    """ad_code -> city name: city.json (import_gtfs.py), else the release's codes, else the code."""
    names = {code: name for name, code in CITY_CODES.items()}
    path = os.path.join(folder, "city.json")
    if os.path.exists(path):
        adcode, city = read_city_json(path)
        names[adcode] = city
    return names


def read_city_json(path):
    """(adcode, city) of a city.json: a small JSON object with a text or whole-number
    "adcode" and a text "city"; anything else is a NetworkError naming the file."""
    try:
        with limits.open_regular(path, path, limits.CITY_JSON_BYTES) as handle:
            data = handle.read(limits.CITY_JSON_BYTES + 1)
        text = data.decode("utf-8-sig")
    except LimitError as exc:
        raise NetworkError(str(exc))
    except (OSError, UnicodeDecodeError) as exc:
        raise NetworkError("cannot read %s: %s" % (path, exc))
    if json_too_deep(text):
        raise NetworkError("%s is nested more than %d levels deep" % (path, MAX_JSON_DEPTH))
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise NetworkError("%s is not JSON: %s" % (path, exc))
    if not isinstance(info, dict) or "adcode" not in info or "city" not in info:
        raise NetworkError('%s needs a JSON object with "adcode" and "city"' % path)
    adcode, city = info["adcode"], info["city"]
    if isinstance(adcode, bool) or not isinstance(adcode, (str, int)) or not isinstance(city, str):
        raise NetworkError('%s: "adcode" must be text or a whole number and "city" text' % path)
    return str(adcode), city


def hop_minutes_table(rows):
    """hop_times.csv rows -> ({line name: [Hop per hop]}, {(a, b): transfer minutes})."""
    lines, transfers = {}, {}
    for row in rows or ():
        minutes = checked_number(row, "hop_times.csv", "run_min", 0.0, MAX_MINUTES)
        dwell = (checked_number(row, "hop_times.csv", "dwell_min", 0.0, MAX_MINUTES)
                 if row["line_name"] and row["dwell_min"].strip() else 0.0)
        if row["line_name"]:
            if row["pickup"] not in ("0", "1") or row["drop_off"] not in ("0", "1"):
                raise NetworkError("hop_times.csv: pickup %r or drop_off %r of %s is not 0 or 1"
                                   % (row["pickup"], row["drop_off"], row["line_name"]))
            lines.setdefault(row["line_name"], []).append(
                Hop(row["from_stop_id"], row["to_stop_id"], minutes, dwell,
                    row["pickup"] == "1", row["drop_off"] == "1"))
        else:
            transfers[(row["from_stop_id"], row["to_stop_id"])] = minutes
    return lines, transfers


class Hop(object):
    """One hop_times.csv row of a line: run time, dwell at its end, and whether
    riders may board at its first stop (pickup) and alight at its end (drop_off)."""

    __slots__ = ("from_id", "to_id", "run", "dwell", "pickup", "drop_off")

    def __init__(self, from_id, to_id, run, dwell, pickup, drop_off):
        self.from_id, self.to_id = from_id, to_id
        self.run, self.dwell = run, dwell
        self.pickup, self.drop_off = pickup, drop_off


def scheduled_times(hops):
    """-> (departure, arrival, board, alight) per line position, minutes from the
    first departure: a hop runs from a departure to the next arrival; the dwell
    at its end lies between that arrival and the next departure."""
    departure, arrival = [0.0], [0.0]
    board, alight = [], [False]
    for hop in hops:
        arrival.append(departure[-1] + hop.run)
        departure.append(arrival[-1] + hop.dwell)
        board.append(hop.pickup)
        alight.append(hop.drop_off)
    board.append(False)
    return departure, arrival, board, alight


def checked_number(row, filename, column, low, high):
    """A finite number within [low, high] from a row, or a NetworkError naming file,
    line and column (a negative time or fare could make the router's search endless)."""
    try:
        return parse_number(row[column], low, high)
    except ValueError as exc:
        raise NetworkError("%s line %s: %s %s" % (filename, row.get(LINE, "?"), column, exc))


def check_service_rows(rows):
    """line_service.csv: headway_min and fare empty, or finite and in range."""
    for row in rows or ():
        for column, high in (("headway_min", MAX_HEADWAY_MIN), ("fare", MAX_FARE)):
            if row[column].strip():
                checked_number(row, "line_service.csv", column, 0.0, high)


def station_point(row):
    """(lng, lat) of a station_info.csv row: finite, within -180..180 and -90..90."""
    lng = checked_number(row, "station_info.csv", "coord_x", -180.0, 180.0)
    lat = checked_number(row, "station_info.csv", "coord_y", -90.0, 90.0)
    return lng, lat


def check_same_area(net, row, stops, what, filename):
    """A search covers one ad_code: a line or a next hop joining two is refused."""
    codes = {net.city[s] for s in stops}
    if len(codes) > 1:
        raise NetworkError("%s line %s: %s joins stops of ad_code %s" % (
            filename, row.get(LINE, "?"), what, " and ".join(shown(c) for c in sorted(codes))))


def json_cell(row, filename, column):
    """A JSON cell, depth-checked before it is decoded."""
    text = row[column]
    if json_too_deep(text):
        raise NetworkError("%s line %s: %s is nested more than %d levels deep"
                           % (filename, row.get(LINE, "?"), column, MAX_JSON_DEPTH))
    try:
        return json.loads(text)
    except ValueError:
        raise NetworkError("%s line %s: %s %s is not JSON" % (filename, row.get(LINE, "?"), column,
                                                             shown(text)))


def next_hop_ids(row):
    """next_hop_stations of a station_info.csv row: a JSON list of stop ids (text)."""
    hops = json_cell(row, "station_info.csv", "next_hop_stations")
    if not isinstance(hops, list) or not all(isinstance(h, str) for h in hops):
        raise NetworkError("station_info.csv line %s: next_hop_stations of stop %s is not a list "
                           "of stop ids" % (row.get(LINE, "?"), shown(row["stop_id"])))
    return hops


def station_list_ids(row):
    """station_list of a line_info.csv row: stop ids of a JSON list of objects with "stop_id"."""
    stations = json_cell(row, "line_info.csv", "station_list")
    if not isinstance(stations, list) or not all(
            isinstance(s, dict) and isinstance(s.get("stop_id"), str) for s in stations):
        raise NetworkError('line_info.csv line %s: station_list of %s is not a list of objects '
                           'with a "stop_id"' % (row.get(LINE, "?"), shown(row["line_name"])))
    return [s["stop_id"] for s in stations]


def wait_from_headway(headway_text, kind):
    """Half the mean headway, kept within WAIT_RANGE_MIN; the demo's wait without one."""
    try:
        headway = float(headway_text)
    except (TypeError, ValueError):
        return WAIT_MIN[kind]
    low, high = WAIT_RANGE_MIN
    return min(high, max(low, headway / 2.0))


def fare_table(fare_text, kind):
    """(bands, step km): one flat fare per boarding when the feed gives one, else the table."""
    try:
        fare = float(fare_text)
    except (TypeError, ValueError):
        return FARE_BANDS[kind], FARE_STEP_KM[kind]
    return ((float("inf"), fare),), FLAT_FARE_STEP_KM


def zone_fare_table(text, name, stop_count):
    """line_service.csv zone_fares -> (zone run of each position, fares[run][run]) or None.

    ``{"zones": [zone of each stop], "fares": [[...]]}``: consecutive stops with
    one zone form a run; fares[a][b] is the fare of a ride boarding in run a
    and alighting in run b (null: no fare, the ride is not taken).
    """
    if not text:
        return None
    try:
        value = json.loads(text)
        zones, matrix = value["zones"], value["fares"]
        runs = gtfs_fares.zone_runs([str(z) for z in zones])
        size = runs[-1] + 1
        ok = len(zones) == stop_count and len(matrix) == size and all(
            len(row) == size and all(f is None or (isinstance(f, (int, float)) and f >= 0)
                                     for f in row) for row in matrix)
    except (ValueError, KeyError, TypeError, IndexError):
        ok = False
    if not ok:
        raise NetworkError("line_service.csv: zone_fares of %s is not {\"zones\": [one per stop], "
                           "\"fares\": [[one per zone run] per zone run]}" % name)
    return runs, [[None if f is None else float(f) for f in row] for row in matrix]


def load_network(folder):
    """A router.Network from a network folder; one district per ad_code."""
    lines = limits.LineBudget(limits.NETWORK_ROWS, "the network's files")
    stations = read_table(os.path.join(folder, "station_info.csv"), STATION_FILE_COLUMNS,
                          lines=lines)
    line_rows = read_table(os.path.join(folder, "line_info.csv"), LINE_COLUMNS, lines=lines)
    hop_rows = read_table(os.path.join(folder, "hop_times.csv"),
                          ("line_name", "from_stop_id", "to_stop_id", "run_min", "dwell_min",
                           "pickup", "drop_off"), optional=True, lines=lines)
    service_rows = read_table(os.path.join(folder, "line_service.csv"),
                              ("line_name", "route_id", "headway_min", "fare"), optional=True,
                              lines=lines)
    names = city_names(folder)
    hop_minutes, transfer_minutes = hop_minutes_table(hop_rows)
    check_service_rows(service_rows)
    service = {row["line_name"]: row for row in service_rows or ()}

    cities, districts = {}, {}
    net = Network(0.0)
    for row in stations:
        code = row["ad_code"]
        if code not in cities:
            cities[code] = City(names.get(code, code), code)
            district = District(len(net.districts), cities[code], 0.0, 0.0)
            districts[code] = district
            net.districts.append(district)
        lng, lat = station_point(row)
        s = net.add_stop(row["stop_id"], row["station_name"], lng, lat, code)
        districts[code].stops.append(s)
    index = net.stop_index()
    for row in stations:
        hops = next_hop_ids(row)
        a = index[row["stop_id"]]
        for other in hops:
            if other in index and other != row["stop_id"]:
                check_same_area(net, row, [a, index[other]], "next hop %s of stop %s" % (
                    shown(other), shown(row["stop_id"])), "station_info.csv")
                net.hops[a].add(index[other])

    line_hops = set()
    physical = {}
    for row in line_rows:
        name, code = row["line_name"], row["citycode"]
        try:
            stops = [index[s] for s in station_list_ids(row)]
        except KeyError:
            raise NetworkError("line_info.csv line %s: station_list of %s names unknown stops"
                               % (row[LINE], shown(name)))
        if len(stops) < 2:
            continue
        check_same_area(net, row, stops, "line %s" % shown(name), "line_info.csv")
        kind = KIND_METRO if is_subway_line(name) else KIND_BUS
        info = service.get(name, {})
        # Both directions of one route are one line (re-boarding it is no transfer).
        key = (code, info.get("route_id") or router.strip_suffix(name))
        line = physical.get(key)
        if line is None:
            city = cities.get(code) or City(names.get(code, code), code)
            line = physical[key] = Line(len(net.lines), city, kind, key[1], stops, None)
            net.lines.append(line)
        cumdist, cumtime = [0.0], [0.0]
        scheduled = hop_minutes.get(name)
        if scheduled is not None and len(scheduled) != len(stops) - 1:
            raise NetworkError("hop_times.csv: %s has %d hops, line_info.csv %d"
                               % (shown(name), len(scheduled), len(stops) - 1))
        for k, (a, b) in enumerate(zip(stops, stops[1:])):
            km = net.dist(a, b) * TRACK_FACTOR[kind]
            cumdist.append(cumdist[-1] + km)
            if scheduled and (scheduled[k].from_id, scheduled[k].to_id) != (net.ids[a], net.ids[b]):
                raise NetworkError("hop_times.csv: hop %d of %s is %s -> %s, line_info.csv has %s -> %s"
                                   % (k + 1, name, scheduled[k].from_id, scheduled[k].to_id,
                                      net.ids[a], net.ids[b]))
            cumtime.append(cumtime[-1] + km / SPEED_KMH[kind] * 60 + DWELL_MIN[kind])
            line_hops.add((a, b))
        cumarr = board = alight = None
        if scheduled:
            cumtime, cumarr, board, alight = scheduled_times(scheduled)
        bands, step = fare_table(info.get("fare"), kind)
        zones = zone_fare_table(info.get("zone_fares"), name, len(stops))
        net.add_linedir(LineDir(len(net.linedirs), line, name, stops, cumdist, cumtime,
                                wait_from_headway(info.get("headway_min"), kind), bands, step,
                                cumarr=cumarr, board=board, alight=alight, zone_fares=zones))
    if not net.linedirs:
        raise NetworkError("%s: no line with two or more stations" % folder)

    # Next hops that no line rides are walking transfers.
    for a, hops in enumerate(net.hops):
        for b in hops:
            if (a, b) not in line_hops:
                net.link_set[a].add(b)
                stated = transfer_minutes.get((net.ids[a], net.ids[b]))
                if stated is not None:
                    net.transfer_min[(a, b)] = stated
    net.min_minutes_per_km = fastest_minutes_per_km(net)
    for district in net.districts:
        members = set(district.stops)           # once per district, not per line
        district.lines = [ld.line for ld in net.linedirs if ld.stops[0] in members]
    net.finish()
    net.identity = network_identity(folder)
    return net


def network_identity(folder):
    """SHA-256 of the network's files (name, size and SHA-256 of each, in a fixed
    order; an absent file says so): the identity that row ids are made from."""
    whole = hashlib.sha256()
    for name in NETWORK_FILES:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            whole.update(("%s absent\n" % name).encode("utf-8"))
            continue
        limit = limits.CITY_JSON_BYTES if name == "city.json" else limits.NETWORK_FILE_BYTES
        digest = hashlib.sha256()
        try:
            with limits.open_regular(path, path, limit) as handle:
                size = 0
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    size += len(chunk)
                    if size > limit:
                        raise NetworkError("%s is longer than %s (the limit)"
                                           % (path, limits.fmt_bytes(limit)))
                    digest.update(chunk)
        except LimitError as exc:
            raise NetworkError(str(exc))
        except OSError as exc:
            raise NetworkError("cannot read %s: %s" % (path, exc))
        whole.update(("%s %d %s\n" % (name, size, digest.hexdigest())).encode("utf-8"))
    return whole.hexdigest()


def fastest_minutes_per_km(net):
    """The A* bound: the fewest minutes any ride or walk spends per straight km."""
    best = float("inf")
    for ld in net.linedirs:
        for k in range(len(ld.stops) - 1):
            km = net.dist(ld.stops[k], ld.stops[k + 1])
            if km > 0:
                best = min(best, ld.ride_minutes(k, k + 1) / km)
    for a, twins in enumerate(net.link_set):
        for b in twins:
            km = net.dist(a, b)
            if km > 0:
                best = min(best, net.transfer_minutes(a, b, km * router.TRANSFER_WALK_DETOUR) / km)
    return max(0.0, best) if best != float("inf") else 0.0


# ---------------------------------------------------------------------------
# Trips and labels
# ---------------------------------------------------------------------------

class Trip(object):
    """An origin-destination pair with the router's access tables (alternatives() uses it)."""

    def __init__(self, net, district, origin, dest, start_access=None):
        self.net = net
        self.district = district
        self.origin = origin
        self.dest = dest
        # make_dataset.py's corpus sessions share one origin's table
        self.start_access = start_access or PointAccess(net, district, origin)
        self.end_access = PointAccess(net, district, dest)

    def find(self, prefs, ceiling=None):
        """find_route's itinerary under prefs (costing less than ``ceiling``,
        if given), A* bounded by the network's table of lower bounds where it
        has one (bound_tables)."""
        return find_route(self.net, self.district, self.origin, self.dest, prefs,
                          self.start_access, self.end_access, bound_tables.table_for(self.net, prefs),
                          ceiling)


def warm_bound_tables(net):
    """Make the network's bound tables for every weighting the builders route
    with (the expert score, benchmark 2's preferences), before workers fork,
    so that they share them instead of each making its own."""
    for prefs in [Prefs()] + [prefs_for_req(r) for r in REQ_TYPES]:
        bound_tables.table_for(net, prefs)


def satisfiable_req_types(net):
    """Preferences the network can honour: 5 needs a bus line, 7 a subway line."""
    kinds = {ld.kind for ld in net.linedirs}
    out = [2, 8]
    if KIND_BUS in kinds:
        out.append(5)
    if KIND_METRO in kinds:
        out.append(7)
    return sorted(out), sorted(set(REQ_TYPES) - set(out))


def honours(req_type, route, net):
    """The label honours its preference under both protocols' rules."""
    kinds = route.kinds(net)
    if req_type == 5:
        return KIND_METRO not in kinds and KIND_BUS in kinds
    if req_type == 7:
        return KIND_METRO in kinds
    return True


def names_resolve(net, route):
    """General LLM: the route-eval service, given each leg's line and its first and
    last station names, must find exactly the label's stops."""
    for (ld_id, i, j) in route.legs:
        ld = net.linedirs[ld_id]
        if net.line_by_name.get((ld.line.city.code, ld.name)) is not ld:
            return False
        for position in (i, j):
            if resolve_station(net, ld, net.names[ld.stops[position]]) != position:
                return False
    return True


def resolve_station(net, ld, query):
    """The position the service picks for a name on a line: first exact, else best bigram."""
    for k, s in enumerate(ld.stops):
        if net.names[s] == query:
            return k
    best, best_score = None, -1.0
    for k, s in enumerate(ld.stops):
        score = bigram_jaccard(query, net.names[s])
        if score > best_score:
            best, best_score = k, score
    return best if best_score >= MIN_STATION_SIMILARITY else None


def label_routes(kind, trip, req_type):
    """The label route(s) of a trip for a benchmark, or None when the trip does not fit."""
    net = trip.net
    if kind == "b3":
        routes = distinct_alternatives(trip, Prefs(), 3, ALTERNATIVE_FACTOR)
        return routes if len(routes) == 3 and not ends_where_it_boarded(net, routes[0]) else None
    route = trip.find(prefs_for_req(req_type) if kind == "b2" else Prefs())
    if route is None or ends_where_it_boarded(net, route):
        return None
    if kind == "b2" and not honours(req_type, route, net):
        return None
    if kind == "general" and not names_resolve(net, route):
        return None
    return [route]


def plausible_access_text(text, straight_km):
    """The label's access distance, rewritten in whole metres (rounded up) when
    its rounding would put it below the straight line (the paper's DP has no
    slack) or above three times it."""
    stated = parse_distance_km(text)
    if not stated > 0 or straight_km <= stated <= DP_RATIO * straight_km:
        return text
    return "%d%s" % (int(math.ceil(straight_km * 1000 * 1.1)), router.UNIT_M)


def with_plausible_access(net, trip, route, label):
    first, last = route.leg_stops[0][0], route.leg_stops[-1][-1]
    for key, stop, point in (("start_transfer_distance", first, trip.origin),
                             ("end_transfer_distance", last, trip.dest)):
        label[key] = plausible_access_text(label[key], net.dist_to(stop, point))
    return label


def place_label(net, access):
    return net.names[access.nearest()]


def prompt_json(trip, lang, suffix):
    net = trip.net
    query = QUERY[lang].format(origin=place_label(net, trip.start_access),
                               destination=place_label(net, trip.end_access)) + suffix
    return dumps({"query": query, "start": "%.6f,%.6f" % trip.origin,
                  "end": "%.6f,%.6f" % trip.dest, "city": trip.district.city.name})


def build_row(net, seed, kind, task_id, row, lang, req_type, districts, draws=None,
              stream=None, accept=None):
    """One CSV row, or None when no trip fits after MAX_ATTEMPTS draws.

    ``draws`` (a dict) counts the draws rejected: "range" (no origin and
    destination TRIP_KM apart), "route" (no fitting label), "refused" (the
    trip and its routes refused by ``accept``).  ``stream`` names the row's
    generator and id (default: ``kind``; make_dataset.py's splits use
    "b1-test", "b1-train" ...); ``accept(trip, routes)`` -> bool may refuse a
    trip (make_dataset.py's hold-out of test trips)."""
    stream = kind if stream is None else stream
    rng = sub_rng(seed, stream, row)
    draws = {} if draws is None else draws
    for _ in range(MAX_ATTEMPTS):
        district = districts[rng.randrange(len(districts))]
        od = draw_od(net, rng, district, *TRIP_KM)
        if od is None:
            draws["range"] = draws.get("range", 0) + 1
            continue
        origin, dest = od
        trip = Trip(net, district, origin, dest)
        routes = label_routes(kind, trip, req_type)
        if routes is None:
            draws["route"] = draws.get("route", 0) + 1
            continue
        if accept is not None and not accept(trip, routes):
            draws["refused"] = draws.get("refused", 0) + 1
            continue
        labels = [with_plausible_access(net, trip, r, route_json(
            net, r, rng, use_names=kind == "general", tag=kind == "b3")) for r in routes]
        label = dict(zip(("first", "second", "third"), labels)) if kind == "b3" else labels[0]
        suffix = DIVERSITY_SUFFIX[lang] if kind == "b3" else REQ_SUFFIX[lang].get(req_type, "")
        indexid = row_id(net, seed, stream, row)
        cells = [task_id, str(req_type), district.city.code, indexid, system_prompt(kind, lang),
                 prompt_json(trip, lang, suffix), dumps(label), ""]
        return cells, routes
    return None


def row_id(net, seed, kind, row):
    """A row's indexid: from the network's identity (its files' hash), the seed, the
    benchmark and the row, so two networks never share an id and one network and
    seed always give the same ids."""
    text = "%s:%s:%s:%d" % (getattr(net, "identity", ""), seed, kind, row)
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def usable_districts(net):
    """Districts with at least two stops on lines (a trip needs somewhere to go)."""
    return [d for d in net.districts if len(d.stops) >= 2 and d.lines]


# ---------------------------------------------------------------------------
# Rows, in this process or in forked workers
# ---------------------------------------------------------------------------

_FORKED = None      # (net, seed, lang, districts): what RowMaker's forked workers read


def _made_row(job, task):
    """(kind, task_id, row, req_type) -> (cells or None, whether the label changes
    lines, the draws rejected)."""
    net, seed, lang, districts = job
    kind, task_id, row, req_type = task
    draws = {}
    built = build_row(net, seed, kind, task_id, row, lang, req_type, districts, draws)
    if built is None:
        return None, False, draws
    cells, routes = built
    return cells, len(routes[0].legs) > 1, draws


def _row_in_worker(task):
    return _made_row(_FORKED, task)


class RowMaker(object):
    """build_row for one run's rows: here (workers 1, or no fork on this
    platform) or in forked workers, which inherit the network and send back
    only a row's cells.  A row depends only on the seed, the benchmark, its
    number and its preference, so the files are the same bytes for any
    number of workers.  Use it as a context manager (the workers end with it)."""

    def __init__(self, net, seed, lang, workers=1):
        global _FORKED
        self.job = (net, seed, lang, usable_districts(net))
        self.pool = None
        if workers > 1 and can_fork():
            warm_bound_tables(net)
            _FORKED = self.job
            self.pool = ForkedWorkers(workers, _row_in_worker)
        self.window = 4 * workers      # rows asked ahead of the one being written

    def here(self, task):
        return _made_row(self.job, task)

    def close(self, kill=False):
        if self.pool is not None:
            self.pool.close(kill=kill)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        self.close(kill=kind is not None)


def build_file(net, seed, kind, task_id, samples, lang, req_types, maker=None, progress=None):
    """-> (rows, figures) of one benchmark file.

    Rows are drawn in order, row 0, 1, 2 ..., until ``samples`` are written
    (or samples x 3 drawn); benchmark 2's preferences take turns over the rows
    written.  Workers are asked for the next rows ahead of time, each with
    the preference it gets if every row before it is written; a row that
    finds its preference moved (an earlier row found no trip: rare) is built
    again here with the right one, so the rows are those of one process.
    ``progress`` (transitlm.io.terminal.Progress) is stepped for each row written."""
    maker = maker or RowMaker(net, seed, lang)
    rows, failures, line_changes = [], 0, 0
    draws = {"range": 0, "route": 0}

    def preference(written):
        return req_types[written % len(req_types)] if kind == "b2" else 0

    pending, row, limit = collections.deque(), 0, samples * 3
    while len(rows) < samples:
        if maker.pool is None:
            if row >= limit:
                break
            made = maker.here((kind, task_id, row, preference(len(rows))))
            row += 1
        else:
            while (len(pending) < maker.window and row < limit
                   and len(rows) + len(pending) < samples):
                task = (kind, task_id, row, preference(len(rows) + len(pending)))
                maker.pool.submit(task)
                pending.append(task)
                row += 1
            if not pending:
                break
            task, made = pending.popleft(), maker.pool.result()
            if task[3] != preference(len(rows)):
                made = maker.here(task[:3] + (preference(len(rows)),))
        cells, changes, rejected = made
        for reason, count in rejected.items():
            draws[reason] = draws.get(reason, 0) + count
        if cells is None:
            failures += 1
            continue
        rows.append(cells)
        line_changes += changes
        if progress is not None:
            progress.step()
    return rows, {"rows": len(rows), "no_trip": failures, "changes": line_changes,
                  "short": samples - len(rows), "out_of_range": draws["range"],
                  "no_label": draws["route"]}


def shortfall_note(figures):
    """Why a file has fewer rows than asked for, in one parenthesis."""
    return ("  (%d short: %d rows found no trip in %d draws each; draws rejected: %d without an "
            "origin and destination %g-%g km apart, %d without a fitting label)"
            % (figures["short"], figures["no_trip"], MAX_ATTEMPTS, figures["out_of_range"],
               TRIP_KM[0], TRIP_KM[1], figures["no_label"]))


def positive_int(text):
    """Rows per file: 1 to MAX_SAMPLES."""
    try:
        return limits.parse_int(text, 1, MAX_SAMPLES)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def seed_int(text):
    """Any whole number of at most MAX_SEED_DIGITS digits."""
    return limits.seed_int(text, MAX_SEED_DIGITS)


def parse_args(argv):
    parser = CommandParser(prog="make_benchmark.py", description="Build the four TransitLM benchmark files for a network folder.")
    parser.add_argument("--network", required=True, help="folder with station_info.csv and line_info.csv")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--samples", type=positive_int, required=True, help="rows per file")
    parser.add_argument("--seed", type=seed_int, default=SEED_DEFAULT, help="generator seed")
    parser.add_argument("--lang", choices=("zh", "en"), default="zh", help="prompt language (default zh)")
    parser.add_argument("--overwrite", action="store_true",
                        help="let --out replace the benchmark a folder already holds "
                             "(without it such a folder is refused)")
    parser.add_argument("--workers", type=limits.int_arg(0, MAX_WORKERS), default=0, metavar="N",
                        help="build rows in N forked worker processes (where fork is available); "
                             "the files are the same bytes for any N. 0 = one per available CPU core, at "
                             "most %d (default); 1 = a single process" % DEFAULT_BUILD_WORKERS)
    return parser.parse_args(argv)


def output_names():
    """The files make_benchmark.py writes into --out."""
    return tuple(filename for _, filename, _ in FILES) + (NETWORK_RECORD,)


def output_problem(network, out):
    """Why --out cannot take the benchmark files (a file, or an output would
    overwrite one of the network's files), or None."""
    if os.path.exists(out) and not os.path.isdir(out):
        return "--out %s is not a folder" % out
    return limits.outputs_problem([os.path.join(out, name) for name in output_names()],
                                  [os.path.join(network, name) for name in NETWORK_FILES])


def fail(message):
    sys.stderr.write("make_benchmark.py: %s\n" % limits.one_line(message))
    return EXIT_USAGE


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    problem = output_problem(args.network, args.out)
    if problem:
        return fail(problem)
    try:
        check_not_held(args.out, output_names(), args.overwrite, "a benchmark")
        net = load_network(args.network)
    except (NetworkError, InputError) as exc:
        return fail(exc)
    if not usable_districts(net):
        return fail("%s: no area with lines to route on" % args.network)
    req_types, left_out = satisfiable_req_types(net)
    try:
        with Outputs() as files:
            files.make_folders(args.out)
            written = build_files(net, args, req_types, left_out, files)
            if not written:
                raise InputError("%s: no trip %g-%g km long with a label: no row written"
                                 % (args.network, TRIP_KM[0], TRIP_KM[1]))
    except InputError as exc:
        return fail(exc)
    except WorkerFailure as exc:        # the out-of-memory killer, say
        sys.stderr.write("make_benchmark.py: %s while building rows (out of memory?); nothing "
                         "was written: run again, or with --workers 1\n" % limits.one_line(str(exc)))
        return EXIT_WORKER
    return 0


def build_files(net, args, req_types, left_out, files):
    """The four benchmark files into ``files`` (transitlm.io.files.Outputs), a
    line on stdout each -> how many rows were written."""
    print("network        %s  (%d stops, %d lines, %d walking links)" % (
        limits.terminal_text(args.network), len(net.ids), len(net.linedirs),
        sum(len(l) for l in net.links)))
    if left_out:
        print("left out        req_type %s: the network has no %s line" % (
            ", ".join(str(r) for r in left_out),
            " and no ".join("bus" if r == 5 else "subway" for r in left_out)))
    written = 0
    # no more workers than rows a file asks for
    workers = min(build_worker_count(args.workers), args.samples)
    with RowMaker(net, args.seed, args.lang, workers) as maker:
        for kind, filename, task_id in FILES:
            progress = Progress(args.samples, sys.stderr.isatty())     # only on a terminal
            rows, figures = build_file(net, args.seed, kind, task_id, args.samples, args.lang,
                                       req_types, maker, progress)
            progress.finish()
            write_csv(files.open(os.path.join(args.out, filename), newline=""), COLUMNS, rows)
            written += len(rows)
            note = "" if not figures["short"] else shortfall_note(figures)
            print("%-28s %5d rows, %3.0f%% change lines%s" % (
                filename, figures["rows"], 100.0 * figures["changes"] / max(1, figures["rows"]),
                note))
    # The network the files belong to: every tool that finds this record
    # beside a test file refuses another network (transitlm.evaluation.network_check).
    files.write(os.path.join(args.out, NETWORK_RECORD), network_record(
        os.path.join(args.network, "station_info.csv"), os.path.join(args.network, "line_info.csv"),
        os.path.abspath(args.network)))
    print("%-28s the station and line files' SHA-256" % NETWORK_RECORD)
    return written

