"""The shortest-path router behind the labels of make_demo.py and make_benchmark.py.

A network is a set of stops with coordinates and names, line directions
(``LineDir``: ordered stops with cumulative track distance, departure and
arrival times, where riders may board and alight, a wait time and fares) and
walking links between stops.  ``find_route`` is an exact A* search over
(stop, free to board / alighted from line L) whose cost is the expert score
of protocol.md §3 (time in 5-minute units + one per line ridden + fare), or a
variant of it for a benchmark-2 preference (``prefs_for_req``); its docstring
states the rules.  ``OriginSearch`` is the same model searched once from an
origin for many destinations (Dijkstra's algorithm, resumed per destination):
its ``route_to`` costs what find_route's route costs, and its
``candidates_to`` gives up to N distinct routes, best first, within a cost
factor (the training corpus's sessions).  Both are exact under the cost model
(tests/test_networks_router.py holds them to an exhaustive enumeration on
seeded random networks).  ``distinct_alternatives`` gives benchmark 3's routes
(``alternatives``: the demo's older penalty-based ones), ``draw_od`` a trip
within a distance range (``pick_od``: the demo's draw) and ``route_json``
writes a route the way the released data does.

How a point reaches stations (``Access``, ``PointAccess``) is access.py's;
the tables of lower bounds find_route may take are bound_tables.py's.

Nothing here knows where the network came from: make_demo.py lays out a
fictional one (ride times from a fixed speed), make_benchmark.py reads one
written by import_gtfs.py (ride times from the schedule) or by make_demo.py.
Standard library only; deterministic (seeded ``random.Random`` only).
"""

import copy
import hashlib
import heapq
import json
import math
import random

from common import CYCLE, TRANSFER, WALK, haversine_km
from common import strip_line_suffix as strip_suffix
from transitlm.networks.access import (  # noqa: F401 (the router's names too)
    ACCESS_BIKE, ACCESS_DETOUR, ACCESS_OFFER_FROM_KM, ACCESS_RANGE_KM, ACCESS_SETUP_MIN,
    ACCESS_SPEED_KMH, ACCESS_TAXI, ACCESS_WALK, BIKE_FARE, FARTHEST_KM, TAXI_BASE_FARE,
    TAXI_BASE_KM, TAXI_FARE_PER_KM, Access, LazyBound, PointAccess)
from transitlm.networks.stop_grid import (  # noqa: F401 (GRID_DEG, StopGrid: router's names too)
    GRID_DEG, KM_PER_DEG, RADIANS_PER_DEGREE, StopGrid, flat_km, latitude_cosines, stop_grid)

# Texts of the released data (the evaluator's own constants where it has them).
MODE_WALK = WALK
MODE_BIKE = CYCLE
MODE_TAXI = "打车"
MODE_RIDE_HAILING = "网约车"
UNIT_KM = "公里"
UNIT_M = "米"
UNIT_HOUR = "小时"
UNIT_MIN = "分钟"
UNIT_YUAN = "元"
ABOUT = "约"
TAG_METRO = "地铁"
TAG_BUS = "公交"
TAG_MIXED = "公交+地铁"
TAG_BIKE_MIX = "{base}-骑行混拼"
TAG_TAXI_MIX = "{base}-打车混拼"

KM_PER_DEG_LAT = 110.574
KM_PER_DEG_LNG_EQUATOR = 111.320

KIND_METRO = "metro"     # rail-bound: the evaluator's subway rules see 地铁/号线 in its name
KIND_BUS = "bus"

# The demo network's service model (make_demo.py); a GTFS network brings its
# own waits and, when the feed has fares, its own flat fare per line.
WAIT_MIN = {KIND_METRO: 3.0, KIND_BUS: 5.0}
# Per-leg fare tables: (upper distance limit in km, fare); beyond the last
# band a metro leg costs 1 more per started 20 km, a bus leg per started 5 km.
FARE_BANDS = {KIND_METRO: ((6.0, 3.0), (12.0, 4.0), (22.0, 5.0), (32.0, 6.0)),
              KIND_BUS: ((10.0, 2.0),)}
FARE_STEP_KM = {KIND_METRO: 20.0, KIND_BUS: 5.0}

TRANSFER_WALK_DETOUR = 1.2
WALK_SPEED_KMH = 5.0


def sub_rng(seed, *parts):
    """A private generator for one named piece of work (district, sample row).

    Hashing the name keeps pieces independent, so a row comes out the same
    whichever worker process builds it and whatever was generated before it.
    """
    text = ":".join(str(p) for p in (seed,) + parts)
    return random.Random(int(hashlib.md5(text.encode("utf-8")).hexdigest(), 16))


def uniform(rng, low, high):
    # random.uniform's formula, spelled out so it can never change under us.
    return low + (high - low) * rng.random()


# ---------------------------------------------------------------------------
# Network model
# ---------------------------------------------------------------------------


class Line:
    """A physical line (a GTFS route); ridden in one or more LineDirs.

    Re-boarding the same line is never a transfer, and the alternatives of
    benchmark 3 avoid a line in all its directions.
    """

    def __init__(self, line_id, city, kind, number, stops, district):
        self.line_id = line_id
        self.city = city          # an object with .name and .code
        self.kind = kind
        self.number = number
        self.stops = stops
        self.district = district
        self.names = ("", "")    # forward, reverse display names (demo lines)


class LineDir:
    """One riding direction: its stops, cumulative track distance (km), the
    minutes from the first stop's departure to each stop's departure
    (``cumtime``) and arrival (``cumarr``, the same without dwells), the wait at
    boarding, where riders may board (``board``) and alight (``alight``), and
    its fares: a distance table, or a zone matrix (``zone_fares``).

    A ride from position i to j takes ``cumarr[j] - cumtime[i]`` minutes: run
    times plus the dwells at the stops it sits through, not the dwell where it
    gets off.
    """

    def __init__(self, ld_id, line, name, stops, cumdist, cumtime, wait_min, fare_bands, fare_step_km,
                 cumarr=None, board=None, alight=None, zone_fares=None):
        self.ld_id = ld_id
        self.line = line
        self.kind = line.kind
        self.name = name
        self.short = strip_suffix(self.name)
        self.stops = stops
        self.cumdist = cumdist
        self.cumtime = cumtime
        self.cumarr = cumtime if cumarr is None else cumarr
        self.wait_min = wait_min
        self.fare_bands = fare_bands
        self.fare_step_km = fare_step_km
        n = len(stops)
        self.board = [k < n - 1 for k in range(n)] if board is None else list(board)
        self.alight = [k > 0 for k in range(n)] if alight is None else list(alight)
        self.board[-1] = False
        self.alight[0] = False
        # (zone run of each position, fares[run][run] or None): see ZoneFares.
        self.zone_fares = zone_fares

    def ride_minutes(self, i, j):
        return self.cumarr[j] - self.cumtime[i]

    def fare(self, i, j):
        """The fare of a ride from position i to j (None: the feed prices no such ride)."""
        if self.zone_fares is not None:
            runs, fares = self.zone_fares
            return fares[runs[i]][runs[j]]
        return fare_band(self.fare_bands, self.fare_step_km, self.cumdist[j] - self.cumdist[i])[0]

    def least_fare(self):
        if self.zone_fares is not None:
            priced = [f for row in self.zone_fares[1] for f in row if f is not None]
            return min(priced) if priced else None
        return self.fare_bands[0][1]


class District:
    """The area one search covers (the demo's districts; one per GTFS network)."""

    def __init__(self, index, city, lng0, lat0):
        self.index = index
        self.city = city
        self.lng0 = lng0
        self.lat0 = lat0
        self.stops = []
        self.lines = []
        self.coords = []        # [(stop, lng, lat)], filled once the network is built
        self.grid = None        # its StopGrid, made on first use (stop_grid)


class Network:
    """Stops (by index), line directions and walking links, with the router's tables.

    ``min_minutes_per_km`` bounds the A* search: no ride covers straight-line
    distance faster.  ``transfer_min`` gives a walking link its own time (GTFS
    ``min_transfer_time``); other links take the walk at WALK_SPEED_KMH.
    """

    def __init__(self, min_minutes_per_km):
        self.min_minutes_per_km = min_minutes_per_km
        self.ids = []
        self.names = []
        self.lng = []
        self.lat = []
        self.city = []
        self.hops = []          # per stop: set of neighbouring stops (line order + walk links)
        self.link_set = []      # per stop: walk-linked twin stops
        self.links = []         # per stop: [(twin, walk_km, walk_min)]
        self.boardings = []     # per stop: [(ld_id, position)]
        self.transfer_min = {}  # (stop, twin) -> minutes, where the network states it
        self.lines = []
        self.linedirs = []
        self.districts = []
        self.line_by_short = {}  # (city code, suffix-stripped name) -> first LineDir in file order
        self.line_by_name = {}   # (city code, full name) -> LineDir
        self.city_linedirs = {}  # city code -> LineDirs in line_info.csv order
        self.index_of = None     # stop id -> index, built on first use
        self.min_wait_min = None
        self.least_fare = None
        self.ride_tables = {}    # (time_w, fare_w) -> {ld_id: [rides per boarding position]}: see ride_costs
        self.board_info = None   # per stop: ((ld_id, position, line id, kind, wait), ...): see boarding_table
        self.cos_lat = None      # per stop: cos(latitude) (stop_grid.latitude_cosines)
        self.fare_spreads = {}   # ld_id -> most minus least fare of its rides (fare_spread)

    def add_stop(self, stop_id, name, lng, lat, city):
        idx = len(self.ids)
        self.ids.append(stop_id)
        self.names.append(name)
        self.lng.append(lng)
        self.lat.append(lat)
        self.city.append(city)
        self.hops.append(set())
        self.link_set.append(set())
        self.boardings.append([])
        return idx

    def add_linedir(self, ld):
        """Register a LineDir (ld.ld_id must be its position) for boarding and lookup."""
        self.linedirs.append(ld)
        self.board_info = None
        for pos, s in enumerate(ld.stops[:-1]):
            if ld.board[pos]:
                self.boardings[s].append((ld.ld_id, pos))
        code = ld.line.city.code
        self.line_by_short.setdefault((code, ld.short), ld)
        self.line_by_name.setdefault((code, ld.name), ld)
        self.city_linedirs.setdefault(code, []).append(ld)
        wait, fare = ld.wait_min, ld.least_fare()
        self.min_wait_min = wait if self.min_wait_min is None else min(self.min_wait_min, wait)
        if fare is not None:
            self.least_fare = fare if self.least_fare is None else min(self.least_fare, fare)

    def link(self, a, b):
        """A walking transfer a -> b (one way); the evaluator sees it as a next hop."""
        self.hops[a].add(b)
        self.link_set[a].add(b)

    def finish(self):
        """Derive the walking links' lengths and times and the districts' coordinates."""
        for district in self.districts:
            district.coords = [(s, self.lng[s], self.lat[s]) for s in district.stops]
        self.links = []
        for s, twins in enumerate(self.link_set):
            row = []
            for t in sorted(twins):
                km = self.dist(s, t) * TRANSFER_WALK_DETOUR
                row.append((t, km, self.transfer_minutes(s, t, km)))
            self.links.append(row)

    def transfer_minutes(self, a, b, walk_km):
        stated = self.transfer_min.get((a, b))
        return walk_km / WALK_SPEED_KMH * 60 if stated is None else stated

    def dist(self, a, b):
        return haversine_km(self.lng[a], self.lat[a], self.lng[b], self.lat[b])

    def dist_to(self, stop, point):
        return haversine_km(point[0], point[1], self.lng[stop], self.lat[stop])

    def linked(self, a, b):
        """True when the evaluator would accept a -> b (self-hops included)."""
        return a == b or b in self.hops[a]

    def stop_index(self):
        """stop id text -> stop index (built once)."""
        if self.index_of is None:
            self.index_of = {sid: i for i, sid in enumerate(self.ids)}
        return self.index_of


# ---------------------------------------------------------------------------
# Router
# ---------------------------------------------------------------------------


def fare_band(bands, step_km, km):
    """(fare, upper km limit of the band containing km) from a fare table."""
    for limit, fare in bands:
        if km <= limit:
            return fare, limit
    last_limit, last_fare = bands[-1]
    steps = math.ceil((km - last_limit) / step_km)
    return last_fare + steps, last_limit + steps * step_km


def leg_fare(ld, km):
    return fare_band(ld.fare_bands, ld.fare_step_km, km)[0]


class Prefs:
    """Cost weights; the default is the expert score of protocol.md §3."""

    def __init__(self):
        self.time_w = 0.2                        # minutes * 60 / 300
        self.line_w = {KIND_METRO: 1.0, KIND_BUS: 1.0}
        self.bike_w = 1.0
        self.fare_w = 1.0
        self.banned = frozenset()                # kinds of line not ridden
        self.banned_lines = frozenset()          # line ids not ridden (benchmark 3)
        self.penalty = {}                        # line_id -> extra cost per use
        self.stop_penalty = {}                   # stop -> extra cost per boarding there

    def least_boarding_cost(self, net):
        """No ride costs less than this (shortest wait, cheapest line, fare)."""
        return (self.time_w * net.min_wait_min + min(self.line_w.values())
                + self.fare_w * (net.least_fare or 0.0))

    def mode_cost(self, mode, minutes, fare):
        """The cost of an access or egress by ``mode`` taking these minutes and fare."""
        return self.time_w * minutes + self.fare_w * fare + (self.bike_w if mode == ACCESS_BIKE else 0.0)

    def access_weights(self):
        """What mode_cost reads: prefs equal in these cost every access the same."""
        return (self.time_w, self.fare_w, self.bike_w)

    def penalised(self, lines, amount, stops=()):
        prefs = copy.copy(self)
        prefs.penalty = dict(self.penalty)
        prefs.stop_penalty = dict(self.stop_penalty)
        for line_id in lines:
            prefs.penalty[line_id] = prefs.penalty.get(line_id, 0.0) + amount
        for stop in stops:
            prefs.stop_penalty[stop] = prefs.stop_penalty.get(stop, 0.0) + amount
        return prefs

    def scores_as_expert(self):
        """A route's cost under these prefs is its expert score (bans aside)."""
        return (self.time_w, self.bike_w, self.fare_w) == (0.2, 1.0, 1.0) and \
            set(self.line_w.values()) == {1.0} and not self.penalty and not self.stop_penalty

    def without_lines(self, lines):
        """These prefs, never riding the given lines (any direction)."""
        prefs = copy.copy(self)
        prefs.banned_lines = self.banned_lines | frozenset(lines)
        return prefs


def prefs_for_req(req_type):
    prefs = Prefs()
    if req_type == 2:        # fewer transfers: every extra line is expensive
        prefs.line_w = {KIND_METRO: 10.0, KIND_BUS: 10.0}
    elif req_type == 5:      # no subway
        prefs.banned = frozenset([KIND_METRO])
    elif req_type == 7:      # subway first: buses only where unavoidable
        prefs.line_w = {KIND_METRO: 1.0, KIND_BUS: 10.0}
    elif req_type == 8:      # shorter time: time dominates, money barely counts
        prefs.line_w = {KIND_METRO: 0.0, KIND_BUS: 0.0}
        prefs.bike_w = 0.0
        prefs.fare_w = 0.05
    return prefs


class Itinerary:
    """A concrete itinerary: access, legs (ld_id, board_pos, alight_pos), egress."""

    def __init__(self, net, origin, dest, legs, start, end):
        self.origin = origin
        self.dest = dest
        self.legs = legs
        self.start = start
        self.end = end
        self.leg_stops = [net.linedirs[ld].stops[i:j + 1] for ld, i, j in legs]
        self.km = start.km + end.km
        self.minutes = start.minutes + end.minutes
        self.fare = start.fare + end.fare
        for ld_id, i, j in legs:
            ld = net.linedirs[ld_id]
            self.km += ld.cumdist[j] - ld.cumdist[i]
            self.minutes += ld.wait_min + ld.ride_minutes(i, j)
            self.fare += ld.fare(i, j)
        self.transfer_kinds = []
        for a, b in zip(self.leg_stops, self.leg_stops[1:]):
            if a[-1] == b[0]:
                self.transfer_kinds.append("shared")
                continue
            self.transfer_kinds.append("walk" if b[0] in net.link_set[a[-1]] else "none")
            walk_km = net.dist(a[-1], b[0]) * TRANSFER_WALK_DETOUR
            self.km += walk_km
            self.minutes += net.transfer_minutes(a[-1], b[0], walk_km)

    def stops(self):
        return [s for leg in self.leg_stops for s in leg]

    def line_ids(self, net):
        return [net.linedirs[ld].line.line_id for ld, _, _ in self.legs]

    def kinds(self, net):
        return [net.linedirs[ld].kind for ld, _, _ in self.legs]

    def boarding_stops(self):
        return [leg[0] for leg in self.leg_stops]


def make_route(net, origin, dest, legs, start_mode, end_mode):
    first = net.linedirs[legs[0][0]].stops[legs[0][1]]
    last = net.linedirs[legs[-1][0]].stops[legs[-1][2]]
    return Itinerary(net, origin, dest, legs,
                 Access(start_mode, net.dist_to(first, origin)),
                 Access(end_mode, net.dist_to(last, dest)))


def ride_costs(net, ld, pos, time_w, fare_w):
    """The rides boarding line direction ld at position pos: [(alighting
    position j, its stop, time_w * ride minutes, fare_w * fare)] for every
    later position where riders may alight and the ride has a fare.  Kept on
    the network per (time_w, fare_w): a network's rides are computed once,
    whatever number of searches use them."""
    table = ride_table(net, time_w, fare_w)
    rows = table.get(ld.ld_id)
    if rows is None:
        rows = table[ld.ld_id] = [None] * len(ld.stops)
    rides = rows[pos]
    if rides is not None:
        return rides
    cd, ca, stops, alight = ld.cumdist, ld.cumarr, ld.stops, ld.alight
    t0 = ld.cumtime[pos]
    zone = ld.zone_fares
    if zone is None:
        d0 = cd[pos]
        bands, step_km = ld.fare_bands, ld.fare_step_km
        fare, limit = fare_band(bands, step_km, 0.0)
    else:
        runs, row = zone[0], zone[1][zone[0][pos]]
    out = []
    for j in range(pos + 1, len(stops)):
        if zone is None:
            km = cd[j] - d0
            if km > limit:
                fare, limit = fare_band(bands, step_km, km)
        if not alight[j]:
            continue
        if zone is not None:
            fare = row[runs[j]]
            if fare is None:
                continue
        out.append((j, stops[j], time_w * (ca[j] - t0), fare_w * fare))
    rides = rows[pos] = tuple(out)
    return rides


def boarding_table(net):
    """Per stop, the boardings there with what a search asks of each:
    ((ld_id, position, line id, kind, wait minutes), ...) (kept on the network)."""
    if net.board_info is None:
        linedirs = net.linedirs
        net.board_info = [tuple((ld_id, pos, linedirs[ld_id].line.line_id, linedirs[ld_id].kind,
                                 linedirs[ld_id].wait_min, linedirs[ld_id].cumtime[pos])
                                for ld_id, pos in row)
                          for row in net.boardings]
    return net.board_info


def fare_spread(net, ld_id):
    """The most any ride of a line direction pays minus the least (kept on the
    network): what boarding later can save in fare at most.  Infinite where
    a zone table prices some rides and not others (boarding later may then
    reach a stop that riding on from an earlier boarding cannot)."""
    spread = net.fare_spreads.get(ld_id)
    if spread is None:
        ld = net.linedirs[ld_id]
        if ld.zone_fares is not None:
            fares = [f for row in ld.zone_fares[1] for f in row]
            if None in fares:
                fares = [0.0, float("inf")]
        else:
            fares = []
            cd, bands, step_km = ld.cumdist, ld.fare_bands, ld.fare_step_km
            for pos in range(len(ld.stops) - 1):
                if not ld.board[pos]:
                    continue
                # ride_costs' fares, computed the same way
                fare, limit = fare_band(bands, step_km, 0.0)
                for j in range(pos + 1, len(ld.stops)):
                    km = cd[j] - cd[pos]
                    if km > limit:
                        fare, limit = fare_band(bands, step_km, km)
                    if ld.alight[j]:
                        fares.append(fare)
        spread = net.fare_spreads[ld_id] = (max(fares) - min(fares)) if fares else 0.0
    return spread


def stays_on_cheaper(onboard, net, ld_id, pos, board_cost, time_w, fare_w, departure):
    """True when riding on from an earlier boarding of this line direction (in
    this search) reaches every later stop for less than boarding here, whatever
    the fares: then no ride from here can improve a label.  Otherwise records
    this boarding.  ``onboard``: ld_id -> per position, the least of
    (board cost - time_w x departure) over the positions boarded up to it."""
    value = board_cost - time_w * departure
    least = onboard.get(ld_id)
    if least is None:
        least = onboard[ld_id] = [float("inf")] * len(net.linedirs[ld_id].stops)
    elif pos and value > least[pos - 1] + fare_w * fare_spread(net, ld_id) + 1e-9 * (1.0 + abs(value)):
        return True
    k, size = pos, len(least)
    while k < size and least[k] > value:
        least[k] = value
        k += 1
    return False


def ride_table(net, time_w, fare_w):
    """{ld_id: [rides per boarding position, None until first asked]} for these weights (ride_costs)."""
    table = net.ride_tables.get((time_w, fare_w))
    if table is None:
        table = net.ride_tables[(time_w, fare_w)] = {}
    return table


def find_route(net, district, origin, dest, prefs, start_access=None, end_access=None, table=None,
               ceiling=None):
    """The itinerary of least cost under prefs (None when there is none).

    Itineraries: access to a stop, one or more legs, egress from the last
    leg's alighting stop.  A leg boards a line direction where riders may
    board and alights at a later position where they may alight.  Between
    legs a rider either stays at the stop and boards another line (never the
    line just left, in either direction) or walks one walking link and boards
    any line there.  Cost: Prefs.mode_cost of access and egress, per leg
    time_w * (wait + ride minutes) + line_w + fare_w * fare + the penalties,
    per walk time_w * walk minutes.

    Search space: per stop, "free to board" (after access or a walk) and "just
    alighted from line L" for every line L, since what may be boarded next
    depends on L.  A* over it, a ride edge covering a whole leg (so fares per
    leg are exact), with an admissible straight-line bound; states are
    re-opened when found cheaper, so the result is exact.  Of the alighted
    states of one stop only the two cheapest expanded ones with different
    lines matter (any later one boards nothing either does not), so the rest
    are skipped, and a line direction is not scanned again from a position
    where it was boarded at no greater cost (its rides could improve nothing).
    The search is confined to one district and stops once no open state can
    beat the best complete itinerary.  Rides' costs come from ride_costs,
    computed once per network; the labels are those of a search computing
    them afresh, bit for bit.  ``table``: a bound_tables.BoundTable for
    prefs' weights, whose bounds (tighter, as admissible) replace the
    straight-line ones.  ``ceiling``: only an itinerary costing less is
    wanted; None when there is none (the search stops where every open
    state's bound reaches it).
    """
    start_access = start_access or PointAccess(net, district, origin)
    end_access = end_access or PointAccess(net, district, dest)
    starts, ends = start_access.best(prefs), end_access.best(prefs)
    if not starts or not ends:
        return None
    time_w, fare_w = prefs.time_w, prefs.fare_w
    if table is not None:
        h_free, h_off = table.bounds(ends)
    else:
        h_free, h_off = end_access.bound(0.98 * time_w * net.min_minutes_per_km,
                                         prefs.least_boarding_cost(net))
    n_stops = len(net.ids)
    # State keys: stop for "free to board at stop"; (line_id + 1) * n_stops + stop
    # for "just alighted at stop from line line_id".
    best, prev, heap = {}, {}, []
    for s, (_, cost) in starts.items():
        best[s] = cost
        prev[s] = None
        heap.append((cost + h_free[s], s))
    heapq.heapify(heap)
    best_dest, dest_state = float("inf") if ceiling is None else ceiling, None
    expanded = {}       # stop -> [(cost, line_id)]: the two cheapest alighted expansions, distinct lines
    boarded = {}        # ld_id * n_stops + position -> least cost at which it was boarded
    linedirs, boardings, links = net.linedirs, boarding_table(net), net.links
    rides_of = ride_table(net, time_w, fare_w)
    banned, banned_lines = prefs.banned, prefs.banned_lines
    penalty, stop_penalty, line_w = prefs.penalty, prefs.stop_penalty, prefs.line_w
    heappush = heapq.heappush
    while heap:
        f, state = heapq.heappop(heap)
        if f >= best_dest:
            break
        cost = best[state]
        came_by = state // n_stops - 1          # -1: free to board
        stop = state - (came_by + 1) * n_stops
        if came_by < 0:
            if f > cost + h_free[stop]:
                continue        # stale heap entry
            only = None
        else:
            if f > cost + h_off[stop]:
                continue
            # Dominance: an earlier expansion here at no greater cost has
            # already boarded every line but its own and walked every link.
            done = expanded.get(stop)
            only = None
            if done is not None:
                c1, l1 = done[0]
                if c1 <= cost:
                    if l1 == came_by or (len(done) > 1 and done[1][0] <= cost):
                        continue
                    only = l1       # only the line the cheaper label could not board
            remember_expansion(expanded, stop, cost, came_by)
            if only is None:
                for twin, _, walk_min in links[stop]:
                    new = cost + time_w * walk_min
                    old = best.get(twin)
                    if (old is None or new < old) and new + h_free[twin] < best_dest:
                        best[twin] = new
                        prev[twin] = (state, None, 0, 0)
                        heappush(heap, (new + h_free[twin], twin))
        board_cost = cost + stop_penalty.get(stop, 0.0)
        for ld_id, pos, line_id, kind, wait_min, departure in boardings[stop]:
            if line_id == came_by or kind in banned or line_id in banned_lines:
                continue
            if only is not None and line_id != only:
                continue
            # A boarding of this line direction here at no greater cost has
            # already made every ride this one could.
            key = ld_id * n_stops + pos
            before = boarded.get(key)
            if before is not None and before <= board_cost:
                continue
            boarded[key] = board_cost
            base = board_cost + time_w * wait_min + line_w[kind] + penalty.get(line_id, 0.0)
            offset = (line_id + 1) * n_stops
            rows = rides_of.get(ld_id)
            rides = None if rows is None else rows[pos]
            if rides is None:
                rides = ride_costs(net, linedirs[ld_id], pos, time_w, fare_w)
            for j, nxt, ride_time, ride_fare in rides:
                new = base + ride_time + ride_fare
                if new >= best_dest:        # out whatever its bound (never below 0)
                    continue
                f_new = new + h_off[nxt]
                if f_new >= best_dest:
                    continue
                t = offset + nxt
                old = best.get(t)
                if old is None or new < old:
                    best[t] = new
                    prev[t] = (state, ld_id, pos, j)
                    heappush(heap, (f_new, t))
                    egress = ends.get(nxt)
                    if egress is not None and new + egress[1] < best_dest:
                        best_dest, dest_state = new + egress[1], t
    if dest_state is None:
        return None
    return rebuild_route(net, origin, dest, prev, dest_state, starts, ends, n_stops)


def remember_expansion(expanded, stop, cost, line_id):
    """Keep per stop the cheapest alighted expansion and the cheapest one of
    another line (what find_route's dominance test needs)."""
    done = expanded.get(stop)
    if done is None:
        expanded[stop] = [(cost, line_id)]
        return
    first_cost, first_line = done[0]
    if cost < first_cost:
        if line_id != first_line:
            expanded[stop] = [(cost, line_id), (first_cost, first_line)]
        else:
            done[0] = (cost, line_id)
    elif line_id != first_line and (len(done) == 1 or cost < done[1][0]):
        expanded[stop] = [done[0], (cost, line_id)]


def rebuild_route(net, origin, dest, prev, state, starts, ends, n_stops):
    legs = []
    end_mode = ends[state % n_stops][0]
    while prev[state] is not None:
        back_state, ld_id, i, j = prev[state]
        if ld_id is not None:
            legs.append((ld_id, i, j))
        state = back_state
    legs.reverse()
    return make_route(net, origin, dest, legs, starts[state % n_stops][0], end_mode)


class OriginSearch:
    """One search from an origin point that labels every stop of its district:
    the routes from that origin to any number of destinations, and their
    distinct alternatives, all exact under find_route's cost model.

        search = OriginSearch(net, district, origin, prefs)
        route = search.route_to(dest)                    # find_route's cost
        routes = search.candidates_to(dest, 5, 1.5)      # best first, distinct lines

    The search is Dijkstra's over find_route's states (free to board at a
    stop; just alighted at a stop from line L), started from every station the
    origin reaches (PointAccess) at its access cost, with find_route's rides,
    walks and rules between legs.  It runs only as far as the destinations
    asked for need, and resumes for the next one: a state taken from the heap
    has its final cost, so labels found for one destination serve every later
    one, and a destination whose best complete cost is at most the smallest
    open label is answered without searching further.  Besides find_route's
    dominance rules, a boarding is skipped when riding on from an earlier
    boarding of the same line direction reaches every later stop for less,
    however the fares differ (stays_on_cheaper).  Memory: the labels of
    the states reached (at most stops x (1 + lines at the stop)).
    """

    def __init__(self, net, district, origin, prefs, start_access=None):
        self.net = net
        self.district = district
        self.origin = origin
        self.prefs = prefs
        self.start_access = start_access or PointAccess(net, district, origin)
        self.starts = self.start_access.best(prefs)
        self.n_stops = len(net.ids)
        self.best, self.prev, self.heap = {}, {}, []
        self.arrivals = {}      # stop -> [alighted state keys with a label there]
        self.expanded = {}      # remember_expansion's table (find_route's dominance rule)
        self.boarded = {}       # ld_id * stops + position: line directions boarded (each once)
        self.onboard = {}       # stays_on_cheaper's table
        self.popped = 0         # states expanded so far (for the benchmarks)
        for s, (_, cost) in self.starts.items():
            self.best[s] = cost
            self.prev[s] = None
            self.heap.append((cost, s))
        heapq.heapify(self.heap)

    def _ends(self, dest, end_access):
        end_access = end_access or PointAccess(self.net, self.district, dest)
        return end_access.best(self.prefs)

    def _arrival_cost(self, ends):
        """(least complete cost, its state) over the labels found so far at ends."""
        best, arrivals = self.best, self.arrivals
        least, where = float("inf"), None
        for stop, (acc, egress) in ends.items():
            for state in arrivals.get(stop, ()):
                cost = best[state] + egress
                if cost < least or (cost == least and state < where):
                    least, where = cost, state
        return least, where

    def _settle(self, ends, factor):
        """Expand states until every alighted state at an end stop whose complete
        cost is at most factor x the least complete cost has its final label."""
        least = self._arrival_cost(ends)[0]
        heap, best, prev, arrivals, expanded = self.heap, self.best, self.prev, self.arrivals, self.expanded
        boarded, onboard = self.boarded, self.onboard
        net, prefs, n_stops = self.net, self.prefs, self.n_stops
        time_w, fare_w = prefs.time_w, prefs.fare_w
        linedirs, boardings, links = net.linedirs, boarding_table(net), net.links
        rides_of = ride_table(net, time_w, fare_w)
        banned, banned_lines = prefs.banned, prefs.banned_lines
        penalty, stop_penalty, line_w = prefs.penalty, prefs.stop_penalty, prefs.line_w
        heappush, heappop = heapq.heappush, heapq.heappop
        popped = 0
        while heap and heap[0][0] < factor * least:
            cost, state = heappop(heap)
            if cost > best[state]:
                continue        # stale heap entry
            popped += 1
            came_by = state // n_stops - 1          # -1: free to board
            stop = state - (came_by + 1) * n_stops
            only = None
            if came_by >= 0:
                done = expanded.get(stop)
                if done is not None:
                    c1, l1 = done[0]
                    if c1 <= cost:
                        if l1 == came_by or (len(done) > 1 and done[1][0] <= cost):
                            continue
                        only = l1
                remember_expansion(expanded, stop, cost, came_by)
                if only is None:
                    for twin, _, walk_min in links[stop]:
                        new = cost + time_w * walk_min
                        old = best.get(twin)
                        if old is None or new < old:
                            best[twin] = new
                            prev[twin] = (state, None, 0, 0)
                            heappush(heap, (new, twin))
            board_cost = cost + stop_penalty.get(stop, 0.0)
            for ld_id, pos, line_id, kind, wait_min, departure in boardings[stop]:
                if line_id == came_by or kind in banned or line_id in banned_lines:
                    continue
                if only is not None and line_id != only:
                    continue
                key = ld_id * n_stops + pos
                if key in boarded:
                    continue    # boarded already at no greater cost (Dijkstra's order)
                if stays_on_cheaper(onboard, net, ld_id, pos, board_cost, time_w, fare_w, departure):
                    continue
                boarded[key] = board_cost
                base = board_cost + time_w * wait_min + line_w[kind] + penalty.get(line_id, 0.0)
                offset = (line_id + 1) * n_stops
                rows = rides_of.get(ld_id)
                rides = None if rows is None else rows[pos]
                if rides is None:
                    rides = ride_costs(net, linedirs[ld_id], pos, time_w, fare_w)
                for j, nxt, ride_time, ride_fare in rides:
                    new = base + ride_time + ride_fare
                    t = offset + nxt
                    old = best.get(t)
                    if old is None or new < old:
                        if old is None:
                            row = arrivals.get(nxt)
                            if row is None:
                                arrivals[nxt] = [t]
                            else:
                                row.append(t)
                        best[t] = new
                        prev[t] = (state, ld_id, pos, j)
                        heappush(heap, (new, t))
                        egress = ends.get(nxt)
                        if egress is not None and new + egress[1] < least:
                            least = new + egress[1]
        self.popped += popped

    def run(self):
        """Label every state the origin reaches (the whole one-to-many search)."""
        self._settle({}, float("inf"))
        return self

    def _legs(self, state):
        legs, prev = [], self.prev
        while prev[state] is not None:
            back, ld_id, i, j = prev[state]
            if ld_id is not None:
                legs.append((ld_id, i, j))
            state = back
        legs.reverse()
        return legs, state

    def _route(self, dest, ends, state):
        legs, first = self._legs(state)
        return make_route(self.net, self.origin, dest, legs, self.starts[first][0],
                          ends[state % self.n_stops][0])

    def route_to(self, dest, end_access=None):
        """The itinerary of least cost from the origin to dest (None when there
        is none): find_route's answer (its cost; among routes of equal cost the
        one whose last state has the lowest key)."""
        ends = self._ends(dest, end_access)
        if not self.starts or not ends:
            return None
        self._settle(ends, 1.0)
        least, state = self._arrival_cost(ends)
        return None if state is None else self._route(dest, ends, state)

    def candidates_to(self, dest, count, factor, end_access=None, keep=None):
        """Up to `count` itineraries to dest, best first, ordered by cost, no two
        riding the same set of lines (line directions' names, as the line file
        writes them), each costing at most `factor` (>= 1) times the best.

        Candidate k is exact under the cost model in this sense: for every
        (stop where the last ride alights, line of that ride) the search finds
        the cheapest itinerary ending so, with egress; these are ordered by
        cost (ties: lowest state key) and the first of each line set is kept.
        The first candidate costs what route_to's route costs (it is that
        route unless two cost exactly the same).  Not the k best itineraries
        of all: one that differs from a cheaper one only before its last ride
        is not offered.  ``keep`` (optional): a test an itinerary must pass
        to be a candidate (say, not ending where it boarded), applied before
        line sets are compared and candidates counted; the factor still
        applies to the best itinerary of all."""
        ends = self._ends(dest, end_access)
        if not self.starts or not ends or count < 1:
            return []
        self._settle(ends, factor)
        best, arrivals = self.best, self.arrivals
        ranked = []
        for stop, (acc, egress) in ends.items():
            for state in arrivals.get(stop, ()):
                ranked.append((best[state] + egress, state))
        if not ranked:
            return []
        ranked.sort()
        limit = factor * ranked[0][0]
        linedirs = self.net.linedirs
        routes, seen = [], set()
        for cost, state in ranked:
            if cost > limit or len(routes) >= count:
                break
            legs, _ = self._legs(state)
            lines = frozenset(linedirs[ld_id].name for ld_id, _, _ in legs)
            if lines in seen:
                continue
            route = self._route(dest, ends, state)
            if keep is not None and not keep(route):
                continue
            seen.add(lines)
            routes.append(route)
        return routes


# ---------------------------------------------------------------------------
# Formatting values the way the dataset writes them
# ---------------------------------------------------------------------------


def fmt_km(rng, km):
    if km < 1.0 and rng.random() < 0.8:
        return "%d%s" % (max(1, int(round(km * 1000))), UNIT_M)
    roll = rng.random()
    if roll < 0.12:
        return "%s%.1f%s" % (ABOUT, km, UNIT_KM)
    if roll < 0.18:
        return "%.1f" % km
    return "%.1f%s" % (km, UNIT_KM)


def fmt_minutes(rng, minutes):
    m = max(1, int(round(minutes)))
    roll = rng.random()
    if roll < 0.06:
        return "%d" % m
    if m >= 60 and roll < 0.92:
        return "%d%s%d%s" % (m // 60, UNIT_HOUR, m % 60, UNIT_MIN) if m % 60 else "%d%s" % (m // 60, UNIT_HOUR)
    return "%d%s" % (m, UNIT_MIN)


def fmt_fare(rng, fare):
    roll = rng.random()
    if fare == int(fare):
        if roll < 0.45:
            return "%d" % fare
        if roll < 0.85:
            return "%.1f" % fare
        return "%d%s" % (fare, UNIT_YUAN)
    return "%.1f%s" % (fare, UNIT_YUAN) if roll < 0.2 else "%.1f" % fare


def fmt_mode(rng, mode):
    if mode == ACCESS_WALK:
        return "" if rng.random() < 0.15 else MODE_WALK
    if mode == ACCESS_BIKE:
        return MODE_BIKE
    return MODE_TAXI if rng.random() < 0.5 else MODE_RIDE_HAILING


def fmt_access_km(rng, acc):
    # The dataset leaves the distance empty when the station is at the door.
    if acc.mode == ACCESS_WALK and acc.km < 0.2 and rng.random() < 0.5:
        return ""
    return fmt_km(rng, acc.km)


def route_tag(net, route):
    kinds = set(route.kinds(net))
    base = TAG_MIXED if len(kinds) > 1 else (TAG_METRO if KIND_METRO in kinds else TAG_BUS)
    modes = (route.start.mode, route.end.mode)
    mix_base = TAG_METRO if KIND_METRO in kinds else TAG_BUS
    if ACCESS_TAXI in modes:
        return TAG_TAXI_MIX.format(base=mix_base)
    if ACCESS_BIKE in modes:
        return TAG_BIKE_MIX.format(base=mix_base)
    return base


def station_sequence(net, legs_stops, use_names):
    seq = []
    for k, leg in enumerate(legs_stops):
        if k:
            seq.append(TRANSFER)
        seq.extend(net.names[s] if use_names else net.ids[s] for s in leg)
    return seq


def route_json(net, route, rng, use_names=False, tag=False):
    """The label dictionary of a route, formatted like the published data."""
    out = {}
    if tag:
        out["route_tag"] = route_tag(net, route)
    out["line_sequence"] = [net.linedirs[ld].name for ld, _, _ in route.legs]
    out["station_sequence"] = station_sequence(net, route.leg_stops, use_names)
    out["total_distance"] = fmt_km(rng, route.km)
    out["total_time"] = fmt_minutes(rng, route.minutes)
    out["total_fare"] = fmt_fare(rng, route.fare)
    out["start_transfer_mode"] = fmt_mode(rng, route.start.mode)
    out["end_transfer_mode"] = fmt_mode(rng, route.end.mode)
    out["start_transfer_distance"] = fmt_access_km(rng, route.start)
    out["end_transfer_distance"] = fmt_access_km(rng, route.end)
    return out


def dumps(value, compact=False):
    if compact:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False)


# ---------------------------------------------------------------------------
# The evaluator's reading of values (protocol.md §2, §7) -- used only to make
# sure a row built to be "inside" or "outside" a tolerance really is.
def random_point_near(net, rng, stop, low_km, high_km):
    angle = rng.random() * 2 * math.pi
    r = uniform(rng, low_km, high_km)
    lat = net.lat[stop] + r * math.sin(angle) / KM_PER_DEG_LAT
    lng = net.lng[stop] + r * math.cos(angle) / (KM_PER_DEG_LNG_EQUATOR * math.cos(math.radians(lat)))
    if lng > 180.0:         # across the 180th meridian: the longitude a map gives there
        lng -= 360.0
    elif lng < -180.0:
        lng += 360.0
    return (round(lng, 6), round(lat, 6))


def access_point(net, rng, district, stop, allow_far):
    """Mostly a short walk from a station; sometimes bike or taxi distance away."""
    roll = rng.random()
    if roll < 0.84 or (roll >= 0.95 and not allow_far):
        return random_point_near(net, rng, stop, 0.05, 1.3)
    if roll < 0.95:
        return random_point_near(net, rng, stop, 1.8, 3.6)
    for _ in range(20):
        point = random_point_near(net, rng, stop, 5.0, 7.5)
        kx = KM_PER_DEG * math.cos(math.radians(point[1]))
        if not stop_grid(net, district).within(point, kx, ACCESS_RANGE_KM[ACCESS_BIKE][1]):
            return point      # no station within cycling range
    return random_point_near(net, rng, stop, 0.05, 1.3)


def pick_od(net, rng, district, min_km, max_km):
    """make_demo.py's draw (its bundled files depend on it): the destination
    station is the first of 50 draws in range, else the 50th; draw_od keeps
    the range."""
    stops = district.stops
    a = rng.choice(stops)
    for _ in range(50):
        b = rng.choice(stops)
        if min_km <= net.dist(a, b) <= max_km:
            break
    # at most one end of a trip lies beyond cycling range of every station
    far_end = rng.randrange(2)
    return (access_point(net, rng, district, a, far_end == 0),
            access_point(net, rng, district, b, far_end == 1))


def draw_od(net, rng, district, min_km, max_km, tries=50):
    """(origin, destination) min_km..max_km apart in a straight line, each near a
    station (access_point), the two stations also min_km..max_km apart; None
    when none of `tries` stations drawn for the destination lies in range of the
    origin's station, or when the points themselves fall out of range."""
    stops = district.stops
    a = rng.choice(stops)
    for _ in range(tries):
        b = rng.choice(stops)
        if min_km <= net.dist(a, b) <= max_km:
            break
    else:
        return None
    # at most one end of a trip lies beyond cycling range of every station
    far_end = rng.randrange(2)
    origin = access_point(net, rng, district, a, far_end == 0)
    dest = access_point(net, rng, district, b, far_end == 1)
    if not min_km <= haversine_km(origin[0], origin[1], dest[0], dest[1]) <= max_km:
        return None
    return origin, dest


def expert_score(route):
    """The expert score of protocol.md section 3 over the unrounded figures:
    minutes * 60 / 300 + (lines + cycling segments) + fare."""
    cycling = (route.start.mode == ACCESS_BIKE) + (route.end.mode == ACCESS_BIKE)
    return route.minutes * 60.0 / 300.0 + len(route.legs) + cycling + route.fare


def ends_where_it_boarded(net, route):
    """True for a ride out and back: the last stop is the first boarding stop or
    a walking link away from it."""
    first, last = route.leg_stops[0][0], route.leg_stops[-1][-1]
    return first == last or last in net.link_set[first] or first in net.link_set[last]


def distinct_alternatives(case, prefs, count, factor):
    """Benchmark 3: the best route under prefs, then the best route riding none
    of the lines (any direction) of the routes before it, and so on; each is
    exact under its exclusions.  The list stops short when the next route does
    not exist, ends where it boarded, or takes more than `factor` times the
    first route's expert score or minutes."""
    first = case.find(prefs)
    if first is None:
        return []
    routes, used = [first], set(first.line_ids(case.net))
    score, minutes = expert_score(first), first.minutes
    # Under the expert score a search's cost is the route's score: no route
    # dearer than the factor allows is searched to its end (a margin for the
    # two sums' rounding).
    ceiling = factor * score * (1 + 1e-9) + 1e-9 if math.isfinite(factor) and \
        prefs.scores_as_expert() else None
    while len(routes) < count:
        route = case.find(prefs.without_lines(used), ceiling=ceiling)
        if route is None or ends_where_it_boarded(case.net, route) or \
                expert_score(route) > factor * score or route.minutes > factor * minutes:
            break
        routes.append(route)
        used.update(route.line_ids(case.net))
    return routes


def alternatives(case, base_prefs, count):
    """make_demo.py's benchmark 3 (its bundled files depend on it): up to
    `count` routes, each avoiding the lines and boarding stops of the ones
    before it by a growing penalty (make_benchmark.py uses
    distinct_alternatives)."""
    routes = [case.find(base_prefs)]
    if routes[0] is None:
        return []
    for amount in (6.0, 25.0):
        while len(routes) < count:
            lines = [lid for r in routes for lid in r.line_ids(case.net)]
            stops = [s for r in routes for s in r.boarding_stops()]
            route = case.find(base_prefs.penalised(lines, amount, stops))
            if route is None or any(same_stations(route, r) or same_lines(case.net, route, r)
                                    for r in routes):
                break
            routes.append(route)
    return routes


def same_stations(a, b):
    return set(a.stops()) == set(b.stops())


def same_lines(net, a, b):
    # Alternatives must differ in lines too, or route diversity would be 0.
    return set(a.line_ids(net)) == set(b.line_ids(net))
