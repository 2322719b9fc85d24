#!/usr/bin/env python3
"""Deterministic generator of the bundled TransitLM demo data.

Writes a fictional transit network (``station_info.csv``, ``line_info.csv``)
and the four benchmark sample files (single route, personalized, diversity,
general LLM).  Every label is the answer of a real shortest-path router over
that network; every ``generate_results`` cell is built from the label so that
each path of the evaluation funnel (protocol.md) is exercised.  Which path a
row exercises is fixed by its position: row i of a file uses entry
i % len(table) of that file's scenario table (B1_SCENARIOS, B2_SCENARIOS,
B3_SCENARIOS, GENERAL_SCENARIOS below); the bundled demo has one row per entry.

Usage::

    python3 data/make_demo.py                      # small bundled demo -> data/
    python3 data/make_demo.py --out DIR            # the same into DIR
    python3 data/make_demo.py --stations 150000 --samples 10000 --out DIR

Options: ``--stations N`` (approximate network size; default: two districts,
about 280 stations), ``--samples N`` (rows per sample file; default: one per
scenario), ``--seed S`` and ``--workers N`` (processes building rows; the
output is the same for any value).

Output is byte-identical across runs and Python 3.8+ versions: only seeded
``random.Random`` instances are used (one per district and one per sample row),
never the global generator, and nothing depends on hash order or the clock.
Standard library only.
"""

import argparse
import copy
import csv
import hashlib
import json
import math
import multiprocessing
import os
import re
import sys

# The generator checks its rows with the evaluator's own rules (value parsing,
# tolerances, name matching, geometry), so it imports them rather than
# restating them; the router that makes the labels lives in routing.py.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    CYCLE_LIMIT_KM, DISTANCE_TOLERANCE_KM, EXIT_USAGE, FARE_TOLERANCE_CNY, REFERENCE, SUBWAY_MARKERS,
    TAXI_LIMIT_KM, TIME_TOLERANCE_MIN, TRANSFER, TRANSFER_DISTANCE_TOLERANCE_KM, VERSION,
    WALK_LIMIT_KM, within)
from common import parse_distance_km as parse_km  # noqa: E402
from common import parse_fare_cny as parse_fare  # noqa: E402
from common import parse_time_minutes as parse_minutes  # noqa: E402
from general_llm.route_eval import MIN_STATION_SIMILARITY, bigram_jaccard  # noqa: E402
from general_llm.route_eval import strip_line_suffix as strip_suffix  # noqa: E402
import limits  # noqa: E402
from routing import (  # noqa: E402
    ACCESS_BIKE, ACCESS_TAXI, ACCESS_WALK, ABOUT, FARE_BANDS, FARE_STEP_KM, KIND_BUS,
    KIND_METRO, KM_PER_DEG_LAT, KM_PER_DEG_LNG_EQUATOR, MODE_BIKE, MODE_TAXI, MODE_WALK,
    UNIT_HOUR, UNIT_KM, UNIT_M, UNIT_MIN, UNIT_YUAN, WAIT_MIN, District, Line, LineDir,
    Network, PointAccess, Prefs, alternatives, dumps, find_route, fmt_mode, make_route,
    pick_od, prefs_for_req, route_json, same_stations, sub_rng, uniform)

# ---------------------------------------------------------------------------
# Chinese literals (the released data's; the shared ones come from routing.py)
# ---------------------------------------------------------------------------

MODE_DIDI = "滴滴"
METRO_PREFIX = "地铁"
METRO_NAME = "地铁{number}号线({first}--{last})"
BUS_NAME = "{number}路({first}--{last})"
MISSING_LINE = "磁浮快线"          # a real-looking line name absent from every city
QUERY = "从{origin}到{destination}怎么走"
QUERY_SUFFIX_BY_REQ = {
    0: "",
    2: "，尽量少换乘",
    5: "，不想坐地铁",
    7: "，优先坐地铁",
    8: "，希望时间最短",
}
QUERY_SUFFIX_DIVERSITY = "，有哪些出行方案"
NAME_CHARS = "东西南北中新龙华安平和明光金银花园山水湖海江石桥城春秋云凤兴宁林福丰盛泰康乐永德"
NAME_SUFFIXES = (
    "路口", "大道", "村", "站", "公园", "小学", "医院", "社区", "广场", "中心",
    "市场", "花园", "新村", "东", "西", "南", "北", "路", "桥", "地铁站",
    "工业区", "大厦", "科技园", "派出所", "总站", "街", "苑", "里",
)
POI_SUFFIXES = ("小区", "大厦", "公园", "医院", "广场", "商场", "学校", "酒店", "")

# ---------------------------------------------------------------------------
# Cities, districts and the physical model
# ---------------------------------------------------------------------------


class City:
    def __init__(self, name, code, center, box):
        self.name = name
        self.code = code
        self.center = center      # (lng, lat) of the first (bundled) district
        self.box = box            # (lng_min, lng_max, lat_min, lat_max) for more districts


# The default demo uses the first two; scale runs cycle through all four.
CITIES = (
    City("北京", "010", (116.362, 39.905), (116.20, 116.56, 39.80, 40.02)),
    City("深圳", "0755", (114.052, 22.566), (113.90, 114.22, 22.53, 22.66)),
    City("上海", "021", (121.468, 31.226), (121.33, 121.60, 31.12, 31.32)),
    City("成都", "028", (104.066, 30.658), (103.96, 104.17, 30.57, 30.74)),
)

ID_BASE = 100001
DISTRICT_WIDTH_KM = 20.0
DISTRICT_HEIGHT_KM = 14.0
METRO_LINES_PER_DISTRICT = 3
BUS_LINES_PER_DISTRICT = 7
STATIONS_PER_DISTRICT = 135        # measured average, used to size scale runs
METRO_SNAP_KM = 0.45               # a new stop this close to another line's stop is a transfer
BUS_SNAP_KM = 0.30
MIN_LINKED_OFFSET_KM = 0.08        # a walk-linked twin stop is never on top of its partner
MIN_STOP_SPACING_KM = 0.25
MIN_METRO_STATIONS = 8
MIN_LINE_STOPS = 4

# The demo's physical model: ride times from a fixed speed (there is no schedule).
TRACK_FACTOR = {KIND_METRO: 1.10, KIND_BUS: 1.25}   # track length / straight distance
SPEED_KMH = {KIND_METRO: 35.0, KIND_BUS: 18.0}
DWELL_MIN = {KIND_METRO: 0.5, KIND_BUS: 0.4}

# Evaluator constants (protocol.md, imported from common) used to make sure
# each sample row really exercises the path it was built for.
GROUND_KM = {ACCESS_WALK: WALK_LIMIT_KM, ACCESS_BIKE: CYCLE_LIMIT_KM, ACCESS_TAXI: TAXI_LIMIT_KM}
DP_SLACK_KM = REFERENCE.dp_slack_km
TOL_DISTANCE = DISTANCE_TOLERANCE_KM
TOL_TIME = TIME_TOLERANCE_MIN
TOL_FARE = FARE_TOLERANCE_CNY
TOL_TRANSFER_KM = TRANSFER_DISTANCE_TOLERANCE_KM
MIN_FUZZY_JACCARD = MIN_STATION_SIMILARITY

# Straight distance between the stations an origin and a destination are put
# near; scenarios that need a short or a long trip ask for it.
TRIP_KM = (2.5, 13.0)
SHORT_TRIP_KM = (0.8, 2.5)
LONG_TRIP_KM = (9.0, 16.0)

SEED_DEFAULT = 20240611
MAX_ATTEMPTS = 400

FILE_STATIONS = "station_info.csv"
FILE_LINES = "line_info.csv"
FILE_B1 = "benchmark1_single_route_example.csv"
FILE_B2 = "benchmark2_personalized_example.csv"
FILE_B3 = "benchmark3_diversity_example.csv"
FILE_GENERAL = "general_llm_example.csv"
SAMPLE_COLUMNS = ["index_id", "sft_prompt", "sft_label", "generate_results"]


def unknown_id(net, rng):
    """A stop id in the demo's style that no station has."""
    return "bus-%d" % (ID_BASE + len(net.ids) + 1000 + rng.randrange(9000))

# ---------------------------------------------------------------------------
# Network generation
# ---------------------------------------------------------------------------


class DistrictBuilder:
    """Lays out the lines of one district in a local km frame.

    Stations of a new line that fall near another line's station become
    transfers, alternately as a stop shared by both lines and as a twin stop a
    short walk away linked both ways, so both transfer styles are common.
    """

    GRID_KM = 0.5

    def __init__(self, net, rng, district, city_index, metro_numbers, bus_numbers):
        self.net = net
        self.rng = rng
        self.district = district
        self.city_index = city_index
        self.metro_numbers = metro_numbers
        self.bus_numbers = bus_numbers
        self.kx = KM_PER_DEG_LNG_EQUATOR * math.cos(math.radians(district.lat0))
        self.xy = {}
        self.grid = {}
        self.used_names = set()
        self.share_next = rng.random() < 0.5

    # -- geometry -----------------------------------------------------------

    def inside(self, x, y):
        return abs(x) <= DISTRICT_WIDTH_KM / 2 and abs(y) <= DISTRICT_HEIGHT_KM / 2

    def cell(self, x, y):
        return (int(math.floor(x / self.GRID_KM)), int(math.floor(y / self.GRID_KM)))

    def nearest(self, x, y, radius, excluded):
        cx, cy = self.cell(x, y)
        best, best_d = None, radius
        for gx in (cx - 1, cx, cx + 1):
            for gy in (cy - 1, cy, cy + 1):
                for s in self.grid.get((gx, gy), ()):
                    if s in excluded:
                        continue
                    sx, sy = self.xy[s]
                    d = math.hypot(sx - x, sy - y)
                    if d < best_d or (d == best_d and best is not None and s < best):
                        best, best_d = s, d
        return best, best_d

    # -- stops --------------------------------------------------------------

    def fresh_name(self):
        while True:
            name = (self.rng.choice(NAME_CHARS) + self.rng.choice(NAME_CHARS)
                    + self.rng.choice(NAME_SUFFIXES))
            if name not in self.used_names:
                self.used_names.add(name)
                return name

    def new_stop(self, x, y, name=None):
        d = self.district
        lng = round(d.lng0 + x / self.kx, 6)
        lat = round(d.lat0 + y / KM_PER_DEG_LAT, 6)
        s = self.net.add_stop("bus-%d" % (ID_BASE + len(self.net.ids)), name or self.fresh_name(), lng, lat,
                               self.city_index)
        self.xy[s] = (x, y)
        self.grid.setdefault(self.cell(x, y), []).append(s)
        d.stops.append(s)
        return s

    def twin_stop(self, partner, x, y):
        """A stop of the new line a short walk from `partner`, same name, linked."""
        px, py = self.xy[partner]
        if math.hypot(x - px, y - py) < MIN_LINKED_OFFSET_KM:
            angle = self.rng.random() * 2 * math.pi
            x, y = px + 0.15 * math.cos(angle), py + 0.15 * math.sin(angle)
        s = self.new_stop(x, y, self.net.names[partner])
        self.net.hops[s].add(partner)
        self.net.hops[partner].add(s)
        self.net.link_set[s].add(partner)
        self.net.link_set[partner].add(s)
        return s

    def place_stop(self, x, y, snap_km, line_stops, line_names):
        excluded = set(line_stops)
        for s in line_stops:
            excluded |= self.net.link_set[s]
        partner, _ = self.nearest(x, y, snap_km, excluded)
        if partner is not None and self.net.names[partner] not in line_names:
            share = self.share_next
            self.share_next = not share
            return partner if share else self.twin_stop(partner, x, y)
        return self.new_stop(x, y)

    def place_line(self, positions, kind):
        snap = METRO_SNAP_KM if kind == KIND_METRO else BUS_SNAP_KM
        stops, names = [], set()
        for x, y in positions:
            if stops:
                lx, ly = self.xy[stops[-1]]
                if math.hypot(x - lx, y - ly) < MIN_STOP_SPACING_KM:
                    continue
            s = self.place_stop(x, y, snap, stops, names)
            if stops and s == stops[-1]:
                continue
            stops.append(s)
            names.add(self.net.names[s])
        return stops

    # -- line layouts -------------------------------------------------------

    def metro_positions(self, anchor, angle):
        """Stations along a gently curving line through `anchor` (station at t=0)."""
        spacing = uniform(self.rng, 1.1, 1.5)
        amplitude = uniform(self.rng, 0.0, 0.35)
        ax, ay = anchor
        ca, sa = math.cos(angle), math.sin(angle)

        def point(t):
            along, off = t * spacing, amplitude * math.sin(t * 0.7)
            return ax + along * ca - off * sa, ay + along * sa + off * ca

        ahead, behind = [], []
        t = 0
        while self.inside(*point(t)):
            ahead.append(point(t))
            t += 1
        t = -1
        while self.inside(*point(t)):
            behind.append(point(t))
            t -= 1
        return behind[::-1] + ahead

    def bus_positions(self, anchor):
        """A meandering street route through `anchor`, kept inside the district."""
        spacing = uniform(self.rng, 0.5, 0.8)
        heading = self.rng.random() * 2 * math.pi

        def walk(start, heading, steps):
            points, (x, y) = [], start
            for _ in range(steps):
                heading += uniform(self.rng, -0.4, 0.4)
                nx, ny = x + spacing * math.cos(heading), y + spacing * math.sin(heading)
                if not self.inside(nx, ny):
                    heading += math.pi
                    nx, ny = x + spacing * math.cos(heading), y + spacing * math.sin(heading)
                x, y = nx, ny
                points.append((x, y))
            return points

        ahead = walk(anchor, heading, self.rng.randrange(5, 11))
        behind = walk(anchor, heading + math.pi, self.rng.randrange(4, 10))
        return behind[::-1] + [anchor] + ahead

    def add_line(self, kind, stops):
        net = self.net
        city = CITIES[self.city_index]
        if kind == KIND_METRO:
            number, template = self.next_metro_number(), METRO_NAME
        else:
            number, template = self.next_bus_number(), BUS_NAME
        line = Line(len(net.lines), city, kind, number, stops, self.district.index)
        first, last = net.names[stops[0]], net.names[stops[-1]]
        line.names = (template.format(number=number, first=first, last=last),
                      template.format(number=number, first=last, last=first))
        for a, b in zip(stops, stops[1:]):
            net.hops[a].add(b)
            net.hops[b].add(a)
        net.lines.append(line)
        self.district.lines.append(line)

    def next_metro_number(self):
        # Metro numbers run on per city so short names like 地铁2号线 stay unique.
        self.metro_numbers.append(len(self.metro_numbers) + 1)
        return self.metro_numbers[-1]

    def next_bus_number(self):
        top = 1000 if len(self.bus_numbers) < 800 else 10000
        while True:
            number = self.rng.randrange(1, top)
            if number not in self.bus_numbers:
                self.bus_numbers.add(number)
                return number

    def random_anchor(self, central):
        """An existing stop to route a new line through, so every line connects."""
        pool = [s for s in self.district.stops
                if not central or (abs(self.xy[s][0]) < DISTRICT_WIDTH_KM / 3
                                   and abs(self.xy[s][1]) < DISTRICT_HEIGHT_KM / 3)]
        return self.xy[self.rng.choice(pool or self.district.stops)]

    def build(self):
        # Metro lines cross near the centre at spread-out angles; each later
        # line runs through a station of an earlier one, and every bus line
        # through some existing stop, so the district is one connected network.
        base_angle = self.rng.random() * math.pi
        for k in range(METRO_LINES_PER_DISTRICT):
            for _ in range(20):
                if k == 0:
                    anchor = (uniform(self.rng, -2, 2), uniform(self.rng, -2, 2))
                else:
                    anchor = self.random_anchor(central=True)
                angle = base_angle + k * math.pi / METRO_LINES_PER_DISTRICT + uniform(self.rng, -0.2, 0.2)
                positions = self.metro_positions(anchor, angle)
                if len(positions) >= MIN_METRO_STATIONS:
                    break
            self.add_line_if_long(KIND_METRO, self.place_line(positions, KIND_METRO))
        for _ in range(BUS_LINES_PER_DISTRICT):
            self.add_line_if_long(KIND_BUS, self.place_line(self.bus_positions(self.random_anchor(False)), KIND_BUS))

    def add_line_if_long(self, kind, stops):
        if len(stops) >= MIN_LINE_STOPS:
            self.add_line(kind, stops)


def district_center(rng, city, first_of_city):
    if first_of_city:
        return city.center
    lng_min, lng_max, lat_min, lat_max = city.box
    return (round(uniform(rng, lng_min, lng_max), 4), round(uniform(rng, lat_min, lat_max), 4))


def build_network(seed, n_districts):
    net = Network(60.0 / SPEED_KMH[KIND_METRO])   # A* bound: nothing is faster than the metro
    metro_numbers = {c.code: [] for c in CITIES}
    bus_numbers = {c.code: set() for c in CITIES}
    for k in range(n_districts):
        rng = sub_rng(seed, "district", k)
        city_index = k % len(CITIES)
        city = CITIES[city_index]
        lng0, lat0 = district_center(rng, city, k < len(CITIES))
        district = District(k, city, lng0, lat0)
        net.districts.append(district)
        DistrictBuilder(net, rng, district, city_index,
                        metro_numbers[city.code], bus_numbers[city.code]).build()
    finish_network(net)
    return net


def finish_network(net):
    """Derive the router's tables: line directions (ride times from the fixed
    speeds and dwell times: the demo has no schedule), boardings, walk links."""
    for line in net.lines:
        for forward in (True, False):
            stops = line.stops if forward else line.stops[::-1]
            cumdist, cumtime = [0.0], [0.0]
            for a, b in zip(stops, stops[1:]):
                km = net.dist(a, b) * TRACK_FACTOR[line.kind]
                cumdist.append(cumdist[-1] + km)
                cumtime.append(cumtime[-1] + km / SPEED_KMH[line.kind] * 60 + DWELL_MIN[line.kind])
            kind = line.kind
            net.add_linedir(LineDir(len(net.linedirs), line, line.names[0 if forward else 1], stops,
                                    cumdist, cumtime, WAIT_MIN[kind], FARE_BANDS[kind], FARE_STEP_KM[kind]))
    net.finish()

# ---------------------------------------------------------------------------
# The route-eval service's station matching on the generator's tables -- used
# only to make sure a general-LLM row built to (not) match really does.
# ---------------------------------------------------------------------------

def match_station(net, ld, query):
    """The stop the route-eval service picks for `query` on a line, or None."""
    for s in ld.stops:
        if net.names[s] == query:
            return s
    best, best_score = None, -1.0
    for s in ld.stops:
        score = bigram_jaccard(query, net.names[s])
        if score > best_score:
            best, best_score = s, score
    return best if best_score >= MIN_FUZZY_JACCARD else None


# ---------------------------------------------------------------------------
# One sample row: origin/destination, label route(s) and the prediction
# ---------------------------------------------------------------------------


class Case:
    """What a scenario builder may use for one sample row."""

    def __init__(self, net, rng, district, origin, dest, routes, labels, req_type):
        self.net = net
        self.rng = rng
        self.district = district
        self.origin = origin
        self.dest = dest
        self.routes = routes
        self.labels = labels
        self.req_type = req_type
        self.start_access = PointAccess(net, district, origin)
        self.end_access = PointAccess(net, district, dest)

    @property
    def route(self):
        return self.routes[0]

    @property
    def label(self):
        return self.labels[0]

    def point(self, side):
        return self.origin if side == "start" else self.dest

    def find(self, prefs):
        return find_route(self.net, self.district, self.origin, self.dest, prefs,
                          self.start_access, self.end_access)



def place_name(net, rng, access):
    """A place name for the query: the nearest station's name plus a POI word."""
    nearest = min(access.flat, key=lambda s: (access.flat[s], s))
    return net.names[nearest] + rng.choice(POI_SUFFIXES)


def prompt_json(case, suffix):
    net, rng, district, origin, dest = case.net, case.rng, case.district, case.origin, case.dest
    query = QUERY.format(origin=place_name(net, rng, case.start_access),
                         destination=place_name(net, rng, case.end_access)) + suffix
    return dumps({"query": query,
                  "start": "%.6f,%.6f" % origin,
                  "end": "%.6f,%.6f" % dest,
                  "city": district.city.name})


# ---------------------------------------------------------------------------
# Prediction helpers shared by the scenario builders
# ---------------------------------------------------------------------------


def legs_of(sequence):
    legs = [[]]
    for item in sequence:
        if item == TRANSFER:
            legs.append([])
        else:
            legs[-1].append(item)
    return legs


def join_legs(legs):
    seq = []
    for k, leg in enumerate(legs):
        if k:
            seq.append(TRANSFER)
        seq.extend(leg)
    return seq


def stop_index(net):
    """stop id text -> stop index (built once; ids are 'bus-' + ID_BASE + index)."""
    if net.index_of is None:
        net.index_of = {sid: i for i, sid in enumerate(net.ids)}
    return net.index_of


def alt_route(case, prefs=None):
    """A different but valid route for the same trip (label lines avoided)."""
    prefs = prefs or Prefs()
    for amount in (8.0, 30.0):
        route = case.find(prefs.penalised(case.route.line_ids(case.net), amount))
        if route is not None and not same_stations(route, case.route):
            return route
    return None


def with_route(case, route, use_names=False):
    return route_json(case.net, route, case.rng, use_names=use_names)


def extended_route(case, side, min_km, max_km=float("inf")):
    """The label route with its first leg started earlier (or last leg ended
    later) on the same line, so its end station lies min_km..max_km away."""
    net, route = case.net, case.route
    legs = list(route.legs)
    point = case.point(side)
    k = 0 if side == "start" else len(legs) - 1
    ld_id, i, j = legs[k]
    stops = net.linedirs[ld_id].stops
    positions = range(i - 1, -1, -1) if side == "start" else range(j + 1, len(stops))
    for p in positions:
        if min_km < net.dist_to(stops[p], point) < max_km:
            legs[k] = (ld_id, p, j) if side == "start" else (ld_id, i, p)
            return make_route(net, case.origin, case.dest, legs, route.start.mode, route.end.mode)
    return None


def far_segment_route(case, side, min_km):
    """Any three-stop ride whose start (or end) is more than min_km away."""
    net, point = case.net, case.point(side)
    ranked = sorted(case.district.stops, key=lambda s: (-net.dist_to(s, point), s))
    for s in ranked:
        if net.dist_to(s, point) <= min_km:
            return None
        for ld_id, pos in net.boardings[s]:
            n = len(net.linedirs[ld_id].stops)
            if side == "start" and pos + 2 < n:
                legs = [(ld_id, pos, pos + 2)]
            elif side == "end" and n - 1 - pos >= 2:
                # ride the opposite direction (ld_id ^ 1) so the trip ends at s
                end = n - 1 - pos
                legs = [(ld_id ^ 1, end - 2, end)]
            else:
                continue
            return make_route(net, case.origin, case.dest, legs, ACCESS_WALK, ACCESS_WALK)
    return None


def ungrounded(case, mode):
    """A reachable prediction whose start or end station fails grounding for `mode`."""
    limit = GROUND_KM[mode]
    for side in ("start", "end"):
        route = extended_route(case, side, limit + 0.2) or far_segment_route(case, side, limit + 0.2)
        if route is None:
            continue
        pred = with_route(case, route)
        key = side + "_transfer_mode"
        pred[key] = fmt_mode(case.rng, mode) or MODE_WALK
        # keep the stated access distance plausible so only grounding fails
        station = route.leg_stops[0][0] if side == "start" else route.leg_stops[-1][-1]
        d = case.net.dist_to(station, case.point(side))
        pred[side + "_transfer_distance"] = "%.1f%s" % (d * 1.2, UNIT_KM)
        return pred
    return None


# ---------------------------------------------------------------------------
# Number perturbations (checked against the evaluator's reading)
# ---------------------------------------------------------------------------


def distance_spellings(km):
    return ["%.1f%s" % (km, UNIT_KM), "%s%.1f%s" % (ABOUT, km, UNIT_KM), "%.1fkm" % km,
            "%.2f km" % km, "%d%s" % (int(round(km * 1000)), UNIT_M), "%.2f" % km]


def time_spellings(minutes):
    m = int(round(minutes))
    out = ["%d%s" % (m, UNIT_MIN), "%s%d%s" % (ABOUT, m, UNIT_MIN), "%d" % m]
    if m >= 60:
        out.append("%d%s%d%s" % (m // 60, UNIT_HOUR, m % 60, UNIT_MIN))
    return out


def fare_spellings(fare):
    return ["%g" % fare, "%.1f" % fare, "%g%s" % (fare, UNIT_YUAN)]


def pick_spelling(rng, spellings, parse, label_text, tolerance, want_accurate):
    """A spelling that differs from the label text and is (in)accurate as wanted."""
    label_value = parse(label_text)
    options = [s for s in spellings if s != label_text
               and within(parse(s), label_value, tolerance) == want_accurate]
    return rng.choice(options) if options else None


def set_numbers(case, pred, factors, want_accurate):
    """Rewrite distance/time/fare of pred from scaled label values.

    `factors` maps field -> (multiplier, addend) applied to the label value as
    the evaluator reads it; fields not listed keep the label's text.
    """
    fields = {"total_distance": (parse_km, distance_spellings, TOL_DISTANCE),
              "total_time": (parse_minutes, time_spellings, TOL_TIME),
              "total_fare": (parse_fare, fare_spellings, TOL_FARE)}
    for field, (mul, add) in sorted(factors.items()):
        parse, spell, tol = fields[field]
        value = parse(case.label[field]) * mul + add
        if field == "total_fare":
            value = round(value * 2) / 2
        text = pick_spelling(case.rng, spell(value), parse, case.label[field], tol, want_accurate)
        if text is None:
            return None
        pred[field] = text
    return pred


# ---------------------------------------------------------------------------
# Scenario builders: (case) -> prediction dict, raw text, or None (retry)
# ---------------------------------------------------------------------------


def sc_exact(case):
    return copy.deepcopy(case.label)


def sc_exact_compact(case):
    return dumps(case.label, compact=True)


def sc_exact_walk_transfer(case):
    return copy.deepcopy(case.label) if "walk" in case.route.transfer_kinds else None


def sc_exact_shared_transfer(case):
    return copy.deepcopy(case.label) if "shared" in case.route.transfer_kinds else None


def sc_near_numbers(case):
    factors = {"total_distance": (1.0 + case.rng.choice((-0.06, -0.03, 0.04, 0.07)), 0.0),
               "total_time": (1.0, case.rng.choice((-2.0, 2.0, 3.0))),
               "total_fare": (1.0, 0.0)}
    return set_numbers(case, copy.deepcopy(case.label), factors, True)


def short_trip(builder):
    builder.trip_km = SHORT_TRIP_KM
    return builder


@short_trip
def sc_near_by_absolute(case):
    """Off by more than 10 % but inside the absolute tolerances (short trip)."""
    label = case.label
    if not (1.0 < parse_km(label["total_distance"]) < 4.0
            and 10 < parse_minutes(label["total_time"]) < 40
            and 0 < parse_fare(label["total_fare"]) < 9):
        return None
    factors = {"total_distance": (1.0, 0.45), "total_time": (1.0, 4.0), "total_fare": (1.0, 1.0)}
    pred = set_numbers(case, copy.deepcopy(label), factors, True)
    if pred is None or within(parse_km(pred["total_distance"]), parse_km(label["total_distance"]), 0.0):
        return None
    return pred


def sc_numbers_as_json_numbers(case):
    pred = copy.deepcopy(case.label)
    pred["total_distance"] = round(case.route.km, 1)
    pred["total_time"] = int(round(case.route.minutes))
    pred["total_fare"] = case.route.fare
    ok = (within(pred["total_distance"], parse_km(case.label["total_distance"]), TOL_DISTANCE)
          and within(pred["total_time"], parse_minutes(case.label["total_time"]), TOL_TIME))
    return pred if ok else None


def sc_distance_off(case):
    return set_numbers(case, copy.deepcopy(case.label), {"total_distance": (1.35, 0.6)}, False)


def sc_time_off(case):
    return set_numbers(case, copy.deepcopy(case.label), {"total_time": (1.45, 6.0)}, False)


def sc_fare_off(case):
    return set_numbers(case, copy.deepcopy(case.label), {"total_fare": (1.0, 3.0)}, False)


def long_trip(builder):
    builder.trip_km = LONG_TRIP_KM
    return builder


@long_trip
def sc_hours_quirk(case):
    """Label '1小时7分钟' is read as 60 min; the same time in minutes is then off."""
    label_time = case.label["total_time"]
    m = re.match(r"(\d+)%s(\d+)%s$" % (UNIT_HOUR, UNIT_MIN), label_time)
    if not m or int(m.group(2)) < 6:
        return None
    pred = copy.deepcopy(case.label)
    pred["total_time"] = "%d%s" % (int(m.group(1)) * 60 + int(m.group(2)), UNIT_MIN)
    if within(parse_minutes(pred["total_time"]), parse_minutes(label_time), TOL_TIME):
        return None
    return pred


def sc_meter_kilometre_quirk(case):
    """'1公里200米' reads as 0.2 km, so a right distance written so is inaccurate."""
    km = parse_km(case.label["total_distance"])
    whole, metres = int(km), int(round((km - int(km)) * 1000))
    if km < 2 or metres < 100:
        return None
    pred = copy.deepcopy(case.label)
    pred["total_distance"] = "%d%s%d%s" % (whole, UNIT_KM, metres, UNIT_M)
    return pred


def stated_access_km(case, side):
    return parse_km(case.label[side + "_transfer_distance"])


def straight_access_km(case, route, side):
    station = route.leg_stops[0][0] if side == "start" else route.leg_stops[-1][-1]
    return case.net.dist_to(station, case.point(side))


def plausible(td, d):
    return not (td > 0 and (td < d - DP_SLACK_KM or td > 3 * d + DP_SLACK_KM))


def sc_transfer_distance_off(case):
    """Access distance off by > 0.5 km while still plausible."""
    for side in ("start", "end"):
        label_td = stated_access_km(case, side)
        d = straight_access_km(case, case.route, side)
        td = label_td + TOL_TRANSFER_KM + 0.3
        if label_td > 0 and plausible(td, d):
            pred = copy.deepcopy(case.label)
            pred[side + "_transfer_distance"] = "%.1f%s" % (td, UNIT_KM)
            return pred
    return None


def sc_transfer_distance_units(case):
    """Access distances respelled (米 <-> 公里) within 0.5 km."""
    pred = copy.deepcopy(case.label)
    changed = False
    for side in ("start", "end"):
        td = stated_access_km(case, side)
        if td <= 0:
            continue
        text = "%d%s" % (int(round(td * 1000 + 60)), UNIT_M) if td >= 1 else "%.1f%s" % (td + 0.1, UNIT_KM)
        pred[side + "_transfer_distance"] = text
        changed = True
    return pred if changed else None


def sc_broken_hop(case):
    """Drop a middle stop so two consecutive stations are not linked."""
    net, ids = case.net, stop_index(case.net)
    pred = copy.deepcopy(case.label)
    legs = legs_of(pred["station_sequence"])
    for leg in sorted(legs, key=len, reverse=True):
        if len(leg) < 3:
            break
        k = len(leg) // 2
        if not net.linked(ids[leg[k - 1]], ids[leg[k + 1]]):
            del leg[k]
            pred["station_sequence"] = join_legs(legs)
            return pred
    return None


def sc_drop_transfer_stop(case):
    """Leave out the last stop before a transfer: the hop across it breaks."""
    net, ids = case.net, stop_index(case.net)
    pred = copy.deepcopy(case.label)
    legs = legs_of(pred["station_sequence"])
    if len(legs) < 2 or len(legs[0]) < 3:
        return None
    legs[0].pop()
    if net.linked(ids[legs[0][-1]], ids[legs[1][0]]):
        return None
    pred["station_sequence"] = join_legs(legs)
    return pred


def sc_no_transfer_markers(case):
    """The same stations without 【换乘】: still connected, same station set."""
    if len(case.route.legs) < 2:
        return None
    pred = copy.deepcopy(case.label)
    pred["station_sequence"] = [s for s in pred["station_sequence"] if s != TRANSFER]
    return pred


def sc_unknown_first(case):
    pred = copy.deepcopy(case.label)
    pred["station_sequence"][0] = unknown_id(case.net, case.rng)
    return pred


def sc_unknown_middle(case):
    pred = copy.deepcopy(case.label)
    seq = pred["station_sequence"]
    inner = [k for k in range(1, len(seq) - 1) if seq[k] != TRANSFER]
    if not inner:
        return None
    seq[case.rng.choice(inner)] = unknown_id(case.net, case.rng)
    return pred


def sc_empty_route(case):
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = []
    pred["station_sequence"] = []
    return pred


def sc_one_station(case):
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = pred["line_sequence"][:1]
    pred["station_sequence"] = pred["station_sequence"][:1]
    return pred


def sc_ground_walk(case):
    return ungrounded(case, ACCESS_WALK)


def sc_ground_bike(case):
    return ungrounded(case, ACCESS_BIKE)


def sc_ground_taxi(case):
    return ungrounded(case, ACCESS_TAXI)


def sc_ground_bike_ok(case):
    """Start station 3-5 km away: fails as a walk but grounds as a bike ride."""
    route = extended_route(case, "start", GROUND_KM[ACCESS_WALK] + 0.2, GROUND_KM[ACCESS_BIKE] - 0.2)
    if route is None:
        return None
    pred = with_route(case, route)
    pred["start_transfer_mode"] = MODE_BIKE
    d = straight_access_km(case, route, "start")
    pred["start_transfer_distance"] = "%.1f%s" % (d * 1.25, UNIT_KM)
    return pred


def sc_implausible_short(case):
    """Stated access distance shorter than the straight line minus 0.5 km."""
    for side in ("start", "end"):
        d = straight_access_km(case, case.route, side)
        if d >= 0.9:
            pred = copy.deepcopy(case.label)
            pred[side + "_transfer_distance"] = "%d%s" % (int((d - 0.5) * 1000 * 0.6), UNIT_M)
            return pred
    return None


def sc_implausible_long(case):
    """Stated access distance longer than three times the straight line + 0.5 km."""
    side = case.rng.choice(("start", "end"))
    d = straight_access_km(case, case.route, side)
    pred = copy.deepcopy(case.label)
    pred[side + "_transfer_distance"] = "%.1f%s" % (3 * d + 1.5, UNIT_KM)
    return pred


def other_line_names(case, count):
    taken = set(case.label["line_sequence"])
    pool = [case.net.linedirs[ld_id].name for line in case.district.lines
            for ld_id in (2 * line.line_id, 2 * line.line_id + 1)]
    pool = [name for name in pool if name not in taken]
    case.rng.shuffle(pool)
    return pool[:count]


def sc_wrong_lines(case):
    """Right stations, every line name wrong: line IoU 0, still an exact match."""
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = other_line_names(case, len(pred["line_sequence"]))
    return pred


def sc_partly_wrong_lines(case):
    if len(case.route.legs) < 2:
        return None
    pred = copy.deepcopy(case.label)
    pred["line_sequence"][-1] = other_line_names(case, 1)[0]
    return pred


def sc_short_line_names(case):
    """Names without the '(甲--乙)' suffix: raw line IoU drops to 0."""
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = [strip_suffix(n) for n in pred["line_sequence"]]
    return pred


def sc_reverse_direction_names(case):
    """The other direction's name of each line (same stations)."""
    net = case.net
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = [net.linedirs[ld ^ 1].name for ld, _, _ in case.route.legs]
    return pred


def sc_mode_mismatch(case):
    pred = copy.deepcopy(case.label)
    label_mode = pred["start_transfer_mode"] or MODE_WALK
    pred["start_transfer_mode"] = MODE_BIKE if label_mode != MODE_BIKE else MODE_WALK
    return pred


def sc_mode_empty_equals_walk(case):
    """'' and 步行 are the same mode; the row must still match exactly."""
    pred = copy.deepcopy(case.label)
    for side in ("start", "end"):
        key = side + "_transfer_mode"
        if pred[key] in ("", MODE_WALK):
            pred[key] = MODE_WALK if pred[key] == "" else ""
            return pred
    return None


def sc_alternative(case):
    route = alt_route(case)
    return with_route(case, route) if route is not None else None


def sc_better_claim(case):
    """Right stations, optimistic numbers: the expert score comes out better."""
    fare = parse_fare(case.label["total_fare"])
    if fare < 2:
        return None
    pred = set_numbers(case, copy.deepcopy(case.label), {"total_time": (0.6, -3.0)}, False)
    if pred is not None:
        pred["total_fare"] = "%g" % (fare - 1)
    return pred


def sc_unreadable_truncated(case):
    text = dumps(case.label)
    return text[: len(text) * 2 // 3]


def sc_unreadable_python_repr(case):
    # A Python dict repr (single quotes) is a common LLM slip; it is not JSON.
    return repr(case.label)


def sc_list_value(case):
    pred = copy.deepcopy(case.label)
    pred["total_time"] = [pred["total_time"]]
    return pred


def sc_null_values(case):
    """JSON nulls read as empty strings: a null walking mode still matches."""
    pred = copy.deepcopy(case.label)
    if pred["end_transfer_mode"] not in ("", MODE_WALK):
        return None
    pred["end_transfer_mode"] = None
    pred["end_transfer_distance"] = None
    pred["total_fare"] = None
    return pred


# -- benchmark 2: preference compliance ---------------------------------------


def transfers(route_dict):
    return max(0, len(route_dict["line_sequence"]) - 1)


def has_subway(route_dict):
    return any(marker in name for name in route_dict["line_sequence"] for marker in SUBWAY_MARKERS)


def extra_leg_route(case):
    """The label route plus one more ride on another line from its last stop."""
    net, route = case.net, case.route
    last = route.leg_stops[-1][-1]
    last_line = route.line_ids(net)[-1]
    for stop in [last] + sorted(net.link_set[last]):
        for ld_id, pos in net.boardings[stop]:
            ld = net.linedirs[ld_id]
            if ld.line.line_id == last_line or ld.kind in prefs_for_req(case.req_type).banned:
                continue
            legs = list(route.legs) + [(ld_id, pos, min(pos + 2, len(ld.stops) - 1))]
            return make_route(net, case.origin, case.dest, legs, route.start.mode, ACCESS_WALK)
    return None


def sc_violate_preference(case):
    pred = preference_breaking_route(case)
    if pred is None or complies(case.req_type, pred, case.label):
        return None
    return pred


def preference_breaking_route(case):
    """A prediction that ignores the row's preference: more transfers (2), a
    subway line (5), no subway (7), or a slower trip (8)."""
    req, label = case.req_type, case.label
    if req == 2:
        route = alt_route(case)
        if route is None or len(route.legs) <= len(case.route.legs):
            route = extra_leg_route(case)
        return with_route(case, route) if route is not None else None
    if req == 5:
        route = case.find(prefs_for_req(7))
        return with_route(case, route) if route is not None and KIND_METRO in route.kinds(case.net) else None
    if req == 7:
        route = case.find(prefs_for_req(5))
        return with_route(case, route) if route is not None else None
    if req == 8:
        route = alt_route(case)
        if route is not None and route.minutes > 1.2 * parse_minutes(label["total_time"]):
            return with_route(case, route)
        return set_numbers(case, copy.deepcopy(label), {"total_time": (1.5, 5.0)}, False)
    return None


def sc_alternative_compliant(case):
    route = alt_route(case, prefs_for_req(case.req_type))
    if route is None:
        return None
    pred = with_route(case, route)
    return pred if complies(case.req_type, pred, case.label) else None


def sc_bus_named_after_subway_stop(case):
    """Quirk: a bus line ending at 'X地铁站' has 地铁 in its name, so even the
    label of a no-subway request fails the evaluator's compliance check."""
    if case.req_type != 5 or complies(5, case.label, case.label):
        return None
    return copy.deepcopy(case.label)


# Scenarios whose label deliberately fails its own preference check, and
# those whose prediction does; every other benchmark-2 prediction complies.
NONCOMPLIANT_LABEL_SCENARIOS = (sc_bus_named_after_subway_stop,)
NONCOMPLIANT_PREDICTION_SCENARIOS = (sc_bus_named_after_subway_stop, sc_violate_preference)


def unintended_violation(builder, req_type, pred, label):
    """True for a readable prediction that breaks the preference by accident."""
    if builder in NONCOMPLIANT_PREDICTION_SCENARIOS or not isinstance(pred, dict):
        return False
    if not isinstance(pred.get("total_time"), (str, int, float)):
        return False      # an error row: never evaluated for compliance
    return not complies(req_type, pred, label)


def complies(req, pred, label):
    """The evaluator's preference check (protocol.md §9)."""
    if req == 2:
        return transfers(pred) <= transfers(label)
    if req == 5:
        return not has_subway(pred)
    if req == 7:
        return has_subway(pred)
    if req == 8:
        label_time = parse_minutes(label["total_time"])
        return label_time <= 0 or parse_minutes(pred["total_time"]) <= 1.1 * label_time
    return True


# -- benchmark 3: several routes ------------------------------------------------


def broken_copy(case, label):
    """A copy of `label` with one unlinked hop (or None if none can be made)."""
    sub = copy.copy(case)
    sub.labels = [label]
    return sc_broken_hop(sub) or sc_unknown_middle(sub)


def b3(*routes, keys=("first", "second", "third")):
    return {k: copy.deepcopy(r) for k, r in zip(keys, routes) if r is not None}


def sc3_exact(case):
    return b3(*case.labels)


def sc3_exact_compact(case):
    return dumps(b3(*case.labels), compact=True)


def sc3_reordered(case):
    l1, l2, l3 = case.labels
    return b3(l1, l3, l2)


def sc3_hit_second(case):
    l1, l2, l3 = case.labels
    return b3(l2, l1, l3)


def sc3_hit_third(case):
    l1, l2, l3 = case.labels
    return b3(l2, l3, l1)


def sc3_first_unreachable_second_right(case):
    l1, l2, _ = case.labels
    broken = broken_copy(case, l1)
    return b3(broken, l1, l2) if broken else None


def sc3_second_unreachable_third_right(case):
    l1, l2, _ = case.labels
    broken = broken_copy(case, l1)
    return b3(l2, broken, l1) if broken else None


def sc3_third_unreachable(case):
    l1, l2, l3 = case.labels
    broken = broken_copy(case, l3)
    return b3(l1, l2, broken) if broken else None


def sc3_only_first(case):
    return b3(case.labels[0])


def sc3_first_and_second(case):
    return b3(*case.labels[:2])


def sc3_no_first(case):
    l1, l2, _ = case.labels
    return b3(l1, l2, keys=("second", "third"))


def sc3_empty_object(case):
    return {}


def sc3_second_empty_dict(case):
    """An empty `second` object counts as no second route."""
    l1, _, l3 = case.labels
    return {"first": copy.deepcopy(l1), "second": {}, "third": copy.deepcopy(l3)}


def sc3_identical(case):
    return b3(case.labels[0], case.labels[0], case.labels[0])


def sc3_empty_signature(case):
    l1, l2, _ = case.labels
    blank = {"line_sequence": [], "station_sequence": [], "total_distance": "", "total_time": "",
             "total_fare": "", "start_transfer_mode": "", "end_transfer_mode": "",
             "start_transfer_distance": "", "end_transfer_distance": ""}
    return b3(l1, l2, blank)


def sc3_unrelated(case):
    """Three routes none of which is the label's first."""
    used = [lid for r in case.routes for lid in r.line_ids(case.net)]
    route = case.find(Prefs().penalised(used, 30.0))
    if route is None or any(same_stations(route, r) for r in case.routes):
        return None
    _, l2, l3 = case.labels
    return b3(with_route(case, route), l2, l3)


def first_variant(builder):
    """Benchmark 3 row whose `first` is a benchmark-1 variant of the label."""
    def build(case):
        first = builder(case)
        if first is None or isinstance(first, str):
            return first
        return b3(first, case.labels[1], case.labels[2])
    build.__name__ = builder.__name__
    return build


# -- general LLM: names instead of stop ids --------------------------------------


def leg_names(case, route=None):
    route = route or case.route
    return [[case.net.names[s] for s in leg] for leg in route.leg_stops]


def board_alight(legs):
    return [name for leg in legs for name in (leg[0], leg[-1])]


def short_names(case, route=None):
    route = route or case.route
    return [strip_suffix(case.net.linedirs[ld].name) for ld, _, _ in route.legs]


def sg_exact(case):
    if len(case.route.legs) < 2:
        return None
    return copy.deepcopy(case.label)


def sg_board_alight_short(case):
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = short_names(case)
    pred["station_sequence"] = board_alight(leg_names(case))
    return dumps(pred, compact=True)


def sg_station_name_field(case):
    """Boarding/alighting names in `station_name` (it wins over station_sequence)."""
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = short_names(case)
    pred["station_name"] = board_alight(leg_names(case))
    return pred


def sg_station_name_with_transfer(case):
    """Full names with 【换乘】 in `station_name`; station_sequence left empty."""
    pred = copy.deepcopy(case.label)
    pred["station_name"] = pred["station_sequence"]
    pred["station_sequence"] = []
    return pred if len(case.route.legs) > 1 else None


def sg_bus_leg(case):
    if KIND_BUS not in case.route.kinds(case.net):
        return None
    return sg_board_alight_short(case)


def sg_reverse_direction_short(case):
    """Short name of a line ridden against its listed direction: the service
    resolves the first direction in file order, whose stops are the same."""
    if not any(ld % 2 for ld, _, _ in case.route.legs):
        return None
    return sg_board_alight_short(case)


def resolve_line(net, city_code, query):
    """The line direction the route-eval service picks for a line query."""
    query = query.strip()
    exact = net.line_by_name.get((city_code, query)) or net.line_by_short.get((city_code, query))
    if exact is not None:
        return exact
    best = None
    for ld in net.city_linedirs.get(city_code, ()):
        if (query in ld.name or query in ld.short) and (best is None or len(ld.short) < len(best.short)):
            best = ld
    return best


def contained_query(net, ld):
    """A fragment of the line's name ('977' for 977路(..), '2号线' for 地铁2号线(..))
    that the service resolves by containment to the same physical line."""
    short = ld.short
    fragment = short[:-1] if ld.kind == KIND_BUS else short[len(METRO_PREFIX):]
    found = resolve_line(net, ld.line.city.code, fragment)
    if found is None or found.line is not ld.line or fragment == short:
        return None
    return fragment


def sg_contained_line_names(case):
    """Line names shortened further; matched by containment, shortest first."""
    pred = sg_station_name_field(case)
    queries = [contained_query(case.net, case.net.linedirs[ld]) for ld, _, _ in case.route.legs]
    if None in queries:
        return None
    pred["line_sequence"] = queries
    return pred


def fuzzy_variant(case, name, ld, want_match):
    """`name` with one character changed that does / does not still resolve."""
    net = case.net
    target = match_station(net, ld, name)
    positions = [len(name) - 1] if want_match else [1, 0]
    for pos in positions:
        if pos >= len(name):
            continue
        for ch in NAME_CHARS:
            if ch == name[pos]:
                continue
            query = name[:pos] + ch + name[pos + 1:]
            got = match_station(net, ld, query)
            if want_match and got == target and query not in {net.names[s] for s in ld.stops}:
                return query
            if not want_match and got is None:
                return query
    return None


def resolved_line(case, ld_id):
    """The direction the route-eval service picks for this line's short name."""
    ld = case.net.linedirs[ld_id]
    return resolve_line(case.net, ld.line.city.code, strip_suffix(ld.name))


def sg_fuzzy(case, want_match):
    names = board_alight(leg_names(case))
    ld = resolved_line(case, case.route.legs[0][0])
    query = fuzzy_variant(case, names[0], ld, want_match)
    if query is None:
        return None
    names[0] = query
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = short_names(case)
    pred["station_sequence"] = names
    return pred


def sg_fuzzy_ok(case):
    return sg_fuzzy(case, True)


def sg_fuzzy_fail(case):
    return sg_fuzzy(case, False)


def sg_count_mismatch_full_single_leg(case):
    """A full one-leg list is not trimmed (quirk): names != 2 x lines."""
    if len(case.route.legs) != 1 or len(case.route.leg_stops[0]) < 3:
        return None
    return copy.deepcopy(case.label)


def sg_count_mismatch_dropped(case):
    if len(case.route.legs) < 2:
        return None
    pred = sg_station_name_field(case)
    del pred["station_name"][1]
    return pred


def sg_unknown_line(case):
    pred = sg_station_name_field(case)
    pred["line_sequence"][0] = MISSING_LINE
    return pred


def sg_empty_lines(case):
    pred = sg_station_name_field(case)
    pred["line_sequence"] = []
    return pred


def sg_same_board_alight(case):
    pred = sg_station_name_field(case)
    pred["station_name"][1] = pred["station_name"][0]
    return pred


def sg_transfer_not_linked(case):
    """Alight one stop early before a transfer, so the legs do not connect."""
    net, route = case.net, case.route
    if len(route.legs) < 2:
        return None
    for early in route.leg_stops[0][-2:0:-1]:
        if not net.linked(early, route.leg_stops[1][0]):
            pred = sg_station_name_field(case)
            pred["station_name"][1] = net.names[early]
            return pred
    return None


def sg_ungrounded(case, mode, mode_text):
    """Board the first line at its stop farthest from the origin."""
    net, route = case.net, case.route
    ld = net.linedirs[route.legs[0][0]]
    alight = route.leg_stops[0][-1]
    far = max((s for s in ld.stops if s != alight and net.names[s] != net.names[alight]),
              key=lambda s: (net.dist_to(s, case.origin), -s))
    d = net.dist_to(far, case.origin)
    if d <= GROUND_KM[mode] + 0.2 or (mode_text == MODE_DIDI and d >= GROUND_KM[ACCESS_TAXI]):
        return None
    pred = sg_station_name_field(case)
    pred["station_name"][0] = net.names[far]
    pred["start_transfer_mode"] = mode_text
    return pred


def sg_ground_walk(case):
    return sg_ungrounded(case, ACCESS_WALK, MODE_WALK)


def sg_ground_bike(case):
    return sg_ungrounded(case, ACCESS_BIKE, MODE_BIKE)


def sg_ground_taxi(case):
    return sg_ungrounded(case, ACCESS_TAXI, MODE_TAXI)


def sg_ground_didi(case):
    """滴滴 is a taxi for the stop-id benchmarks but walks (3 km) in the service."""
    return sg_ungrounded(case, ACCESS_WALK, MODE_DIDI)


def sg_alternative(case):
    route = alt_route(case)
    if route is None:
        return None
    pred = with_route(case, route, use_names=True)
    pred["line_sequence"] = short_names(case, route)
    pred["station_sequence"] = board_alight(leg_names(case, route))
    return pred


def sg_no_response(case):
    return ""


def general_variant(builder):
    """A stop-id benchmark variant applied to a multi-leg general-LLM label."""
    def build(case):
        if len(case.route.legs) < 2:
            return None
        return builder(case)
    build.__name__ = builder.__name__
    return build


# ---------------------------------------------------------------------------
# Scenario tables: the default demo has one row per entry, scale runs cycle.
# ---------------------------------------------------------------------------

B1_SCENARIOS = (
    sc_exact, sc_exact_compact, sc_exact_walk_transfer, sc_exact_shared_transfer,
    sc_near_numbers, sc_near_by_absolute, sc_numbers_as_json_numbers,
    sc_distance_off, sc_time_off, sc_fare_off, sc_hours_quirk, sc_meter_kilometre_quirk,
    sc_transfer_distance_off, sc_transfer_distance_units,
    sc_broken_hop, sc_drop_transfer_stop, sc_no_transfer_markers,
    sc_unknown_first, sc_unknown_middle, sc_empty_route, sc_one_station,
    sc_ground_walk, sc_ground_bike, sc_ground_taxi, sc_ground_bike_ok,
    sc_implausible_short, sc_implausible_long,
    sc_wrong_lines, sc_partly_wrong_lines, sc_short_line_names, sc_reverse_direction_names,
    sc_mode_mismatch, sc_mode_empty_equals_walk, sc_alternative, sc_better_claim,
    sc_unreadable_truncated, sc_list_value, sc_null_values,
)

B2_SCENARIOS = (
    (sc_exact, 2), (sc_exact, 5), (sc_exact, 7), (sc_exact, 8),
    (sc_violate_preference, 2), (sc_violate_preference, 2),
    (sc_violate_preference, 5), (sc_violate_preference, 5),
    (sc_violate_preference, 7), (sc_violate_preference, 7),
    (sc_violate_preference, 8), (sc_violate_preference, 8),
    (sc_alternative_compliant, 2), (sc_alternative_compliant, 5),
    (sc_alternative_compliant, 7), (sc_near_numbers, 8),
    (sc_distance_off, 5), (sc_time_off, 7), (sc_fare_off, 8), (sc_transfer_distance_off, 2),
    (sc_broken_hop, 5), (sc_unknown_first, 7), (sc_unknown_middle, 8),
    (sc_empty_route, 2), (sc_one_station, 8),
    (sc_ground_walk, 5), (sc_ground_bike, 7), (sc_ground_taxi, 2),
    (sc_implausible_short, 2), (sc_implausible_long, 5),
    (sc_wrong_lines, 7), (sc_mode_mismatch, 8), (sc_alternative, 2),
    (sc_unreadable_python_repr, 5), (sc_list_value, 7), (sc_exact, 0),
    (sc_bus_named_after_subway_stop, 5),
)

B3_SCENARIOS = (
    sc3_exact, sc3_exact_compact, sc3_reordered, sc3_identical,
    sc3_hit_second, sc3_hit_second, sc3_hit_third, sc3_hit_third,
    sc3_first_unreachable_second_right, sc3_second_unreachable_third_right, sc3_third_unreachable,
    sc3_only_first, sc3_first_and_second, sc3_no_first, sc3_second_empty_dict,
    sc3_empty_signature, sc3_unrelated, sc3_empty_object, sc_unreadable_truncated,
    first_variant(sc_near_numbers), first_variant(sc_time_off), first_variant(sc_distance_off),
    first_variant(sc_transfer_distance_off), first_variant(sc_ground_walk),
    first_variant(sc_ground_bike), first_variant(sc_ground_taxi),
    first_variant(sc_implausible_short), first_variant(sc_implausible_long),
    first_variant(sc_mode_mismatch), first_variant(sc_unknown_first),
    first_variant(sc_empty_route), first_variant(sc_one_station), first_variant(sc_wrong_lines),
)

GENERAL_SCENARIOS = (
    sg_exact, sg_exact, general_variant(sg_board_alight_short),
    general_variant(sg_station_name_field), sg_station_name_with_transfer,
    general_variant(sg_bus_leg), general_variant(sg_reverse_direction_short),
    general_variant(sg_contained_line_names),
    sg_fuzzy_ok, sg_fuzzy_ok, sg_fuzzy_fail,
    sg_count_mismatch_full_single_leg, sg_count_mismatch_dropped,
    sg_unknown_line, sg_empty_lines, sg_same_board_alight, sg_transfer_not_linked,
    sg_ground_walk, sg_ground_bike, sg_ground_taxi, sg_ground_didi,
    sg_alternative, sg_no_response, sg_no_response,
    general_variant(sc_near_numbers), general_variant(sc_distance_off),
    general_variant(sc_time_off), general_variant(sc_fare_off),
    general_variant(sc_transfer_distance_off), general_variant(sc_mode_mismatch),
    general_variant(sc_mode_empty_equals_walk), general_variant(sc_implausible_long),
    general_variant(sc_unreadable_truncated), general_variant(sc_list_value),
)


class SampleFile:
    def __init__(self, key, filename, scenarios, with_req=False, routes=1, use_names=False):
        self.key = key
        self.filename = filename
        self.scenarios = scenarios
        self.with_req = with_req
        self.routes = routes
        self.use_names = use_names

    def scenario(self, row):
        entry = self.scenarios[row % len(self.scenarios)]
        return entry if self.with_req else (entry, 0)

    def columns(self):
        return SAMPLE_COLUMNS + (["req_type"] if self.with_req else [])


BENCHMARKS = (
    SampleFile("b1", FILE_B1, B1_SCENARIOS),
    SampleFile("b2", FILE_B2, B2_SCENARIOS, with_req=True),
    SampleFile("b3", FILE_B3, B3_SCENARIOS, routes=3),
    SampleFile("general", FILE_GENERAL, GENERAL_SCENARIOS, use_names=True),
)


def label_routes(case, bench):
    """The label route(s) for the case's trip, or None when the trip does not fit."""
    if bench.routes == 3:
        routes = alternatives(case, Prefs(), 3)
        return routes if len(routes) == 3 else None
    route = case.find(prefs_for_req(case.req_type))
    if route is None or (case.req_type == 7 and KIND_METRO not in route.kinds(case.net)):
        return None
    return [route]


def row_cells(net, seed, bench, row, case, pred):
    labels = case.labels
    if bench.routes == 3:
        label_text = dumps(dict(zip(("first", "second", "third"), labels)))
    else:
        label_text = dumps(labels[0])
    suffix = QUERY_SUFFIX_DIVERSITY if bench.routes == 3 else QUERY_SUFFIX_BY_REQ.get(case.req_type, "")
    cells = [hashlib.md5(("%s:%s:%d" % (seed, bench.key, row)).encode("utf-8")).hexdigest(),
             prompt_json(case, suffix),
             label_text,
             pred if isinstance(pred, str) else dumps(pred)]
    if bench.with_req:
        cells.append(str(case.req_type))
    return cells


def build_row(net, seed, bench, row):
    """One CSV row (list of cells) for sample `row` of a benchmark file.

    Trips are drawn until one suits the row's scenario (a builder returns None
    when, say, the label has no transfer to break).
    """
    rng = sub_rng(seed, bench.key, row)
    builder, req_type = bench.scenario(row)
    for _ in range(MAX_ATTEMPTS):
        district = net.districts[rng.randrange(len(net.districts))]
        origin, dest = pick_od(net, rng, district, *getattr(builder, "trip_km", TRIP_KM))
        case = Case(net, rng, district, origin, dest, [], [], req_type)
        case.routes = label_routes(case, bench)
        if case.routes is None:
            continue
        case.labels = [route_json(net, r, rng, use_names=bench.use_names, tag=bench.routes == 3)
                       for r in case.routes]
        if (bench.with_req and builder not in NONCOMPLIANT_LABEL_SCENARIOS
                and not complies(req_type, case.label, case.label)):
            continue
        pred = builder(case)
        if pred is None or (bench.with_req and unintended_violation(builder, req_type, pred, case.label)):
            continue
        return row_cells(net, seed, bench, row, case, pred)
    raise RuntimeError("no trip fits scenario %s (%s row %d)" % (builder.__name__, bench.key, row))


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def write_csv(path, header, rows):
    # csv's default dialect ends lines with \r\n, exactly like the published files.
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow(row)


def station_rows(net):
    for s, sid in enumerate(net.ids):
        yield [sid, CITIES[net.city[s]].code, "%.6f" % net.lng[s], "%.6f" % net.lat[s],
               json.dumps([net.ids[t] for t in sorted(net.hops[s])], ensure_ascii=False),
               net.names[s]]


def line_rows(net):
    # Grouped by city (file order breaks ties in the service's name matching).
    for city in CITIES:
        for ld in net.linedirs:
            if ld.line.city is not city:
                continue
            stations = [{"station_name": net.names[s], "stop_id": net.ids[s],
                         "x": net.lng[s], "y": net.lat[s],
                         "station_id": net.ids[s].split("-", 1)[1]} for s in ld.stops]
            yield [city.code, ld.name, json.dumps(stations, ensure_ascii=False)]


_WORKER_NET = None


def _init_worker(net):
    global _WORKER_NET
    _WORKER_NET = net


def _build_rows(task):
    seed, bench_index, start, stop = task
    bench = BENCHMARKS[bench_index]
    return [build_row(_WORKER_NET, seed, bench, row) for row in range(start, stop)]


def sample_rows(net, seed, bench_index, count, workers):
    """Rows in order; with workers > 1 they are built in parallel (same bytes)."""
    chunk = 200
    tasks = [(seed, bench_index, start, min(count, start + chunk)) for start in range(0, count, chunk)]
    if workers <= 1 or len(tasks) < 2:
        _init_worker(net)
        for task in tasks:
            for row in _build_rows(task):
                yield row
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_init_worker, initargs=(net,)) as pool:
        for rows in pool.imap(_build_rows, tasks):
            for row in rows:
                yield row


def default_workers():
    # Workers share the network by forking; where fork is unavailable, build serially.
    try:
        multiprocessing.get_context("fork")
    except ValueError:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def generate(out_dir, seed, stations, samples, workers):
    n_districts = 2 if stations is None else max(2, int(round(stations / STATIONS_PER_DISTRICT)))
    net = build_network(seed, n_districts)
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, FILE_STATIONS),
              ["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations", "station_name"],
              station_rows(net))
    write_csv(os.path.join(out_dir, FILE_LINES), ["citycode", "line_name", "station_list"], line_rows(net))
    for index, bench in enumerate(BENCHMARKS):
        count = len(bench.scenarios) if samples is None else samples
        write_csv(os.path.join(out_dir, bench.filename), bench.columns(),
                  sample_rows(net, seed, index, count, workers))
    return net


# Limits (README "Limits"): the scale options bound the network and rows built
# in memory; the seed's length bounds its conversion.
MAX_STATIONS = 1000000
MAX_SAMPLES = 1000000
MAX_WORKERS = 64
MAX_SEED_DIGITS = 40


def bounded(high):
    """An argparse type: a whole number from 0 to ``high``."""
    def parse(text):
        try:
            return limits.parse_int(text, 0, high)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc))
    return parse


def seed_int(text):
    try:
        return limits.parse_int(text, -10 ** MAX_SEED_DIGITS + 1, 10 ** MAX_SEED_DIGITS - 1)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of at most %d digits"
                                         % MAX_SEED_DIGITS)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("make_demo.py: %s\n" % limits.one_line(message))
        sys.exit(EXIT_USAGE)


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = _Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=VERSION,
                        help="print the project version and exit")
    parser.add_argument("--out", default=here, help="output folder (default: this script's folder)")
    parser.add_argument("--stations", type=bounded(MAX_STATIONS), default=None,
                        help="approximate station count of a large network (default: small demo)")
    parser.add_argument("--samples", type=bounded(MAX_SAMPLES), default=None,
                        help="rows per sample file (default: one per scenario)")
    parser.add_argument("--seed", type=seed_int, default=SEED_DEFAULT, help="generator seed")
    parser.add_argument("--workers", type=bounded(MAX_WORKERS), default=None,
                        help="processes building sample rows (output is identical for any value)")
    return parser.parse_args(argv)


def output_problem(out):
    """Why --out cannot take the files (a file, or a file there that is not a regular
    file), or None."""
    if os.path.exists(out) and not os.path.isdir(out):
        return "--out %s is not a folder" % out
    odd = limits.unwritable_output([os.path.join(out, name) for name in
                                    [FILE_STATIONS, FILE_LINES] + [b.filename for b in BENCHMARKS]])
    if odd:
        return "%s exists and is not a regular file" % odd
    return None


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    workers = default_workers() if args.workers is None else args.workers
    if args.samples is None and args.stations is None:
        workers = 1   # the bundled demo is tiny; a pool would only cost start-up time
    problem = output_problem(args.out)
    if problem:
        sys.stderr.write("make_demo.py: %s\n" % limits.one_line(problem))
        return EXIT_USAGE
    try:
        generate(args.out, args.seed, args.stations, args.samples, workers)
    except OSError as exc:
        sys.stderr.write("make_demo.py: %s\n" % limits.one_line(
            "cannot write to %s: %s" % (args.out, exc.strerror or exc)))
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
