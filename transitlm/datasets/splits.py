"""Drawing the trips of the release, the test hold-out and the leakage checks
(issue 45, points 2 and 4).

Cities.  Every area of every network (a benchmark_builder district: one per
ad_code) with lines to route on is a *unit*; rows of each file and corpus
sessions are split across units in proportion to their stations (largest
remainder, ties to the earlier unit: ``shares``).  A row is drawn in its
unit by benchmark_builder.build_row under its own stream ("b1-test:<adcode>",
"b1-train:<adcode>" ...), so its text, label and indexid come from the one
row builder.

The hold-out.  The four test files are drawn first.  ``HoldOut`` keeps, of
every test row, the pair (first boarding stop, last alighting stop) of its
label's first route, unordered, and its (origin, destination) points.  A
train row or corpus session is refused when

- the pair of its first route (a train row) or of any of its routes (a
  session) is a held-out pair, or
- it starts within NEAR_KM of a test trip's start and ends within NEAR_KM of
  its end, in either direction.

The points sit in a grid of cells at least NEAR_KM wide (keyed by the cell
of a start), so a check looks at the test trips of nine cells, not at all of
them: the checks cost time linear in the rows.  (Cells do not wrap at the
antimeridian: a city astride longitude 180 would need it.)  A refused draw is drawn
again (up to benchmark_builder.MAX_ATTEMPTS for a row, SESSION_ATTEMPTS for
a session); the refusals are counted.

Corpus sessions are drawn grouped by origin: the sessions of a unit come in
groups (origin_group) that share one origin point (its access table and its
one search), each with a destination of its own; a session that finds no
route from its group's origin in ORIGIN_TRIES draws draws whole trips of its
own.  How many share an origin follows the corpus's density: MIN_ORIGIN_GROUP
while an area has up to ORIGINS_PER_STATION x MIN_ORIGIN_GROUP sessions a
station, then as many as keep ORIGINS_PER_STATION origin points a station on
average, up to MAX_ORIGIN_GROUP -- so the origins cover the area's stations
as well at any corpus size, and a dense corpus (a million sessions over a
thousand stations) makes one search for a hundred sessions, not twenty.

Standard library only; Python 3.8+.
"""

import math

from common import haversine_km
from transitlm.networks.benchmark_builder import TRIP_KM, Trip, usable_districts
from transitlm.networks.router import KM_PER_DEG_LAT, PointAccess, access_point, draw_od, sub_rng
from transitlm.datasets.candidates import origin_search, session_candidates

NEAR_KM = 0.5                # the spatial hold-out radius
MIN_ORIGIN_GROUP = 20         # corpus sessions sharing one origin, at least (origin_group) ...
MAX_ORIGIN_GROUP = 100        # ... and at most, by the corpus's density
ORIGINS_PER_STATION = 5       # origin points per station of an area kept, on average
ORIGIN_TRIES = 10            # draws of a destination from the group's origin
SESSION_ATTEMPTS = 60        # draws of a session in all
DESTINATION_TRIES = 50       # stations drawn for a destination in range (router.draw_od's)
MAX_ACCESS_KM = 10.0         # a trip's point lies at most this far from a station (taxi range)
CELL_KM_PER_DEG = 105.0      # under the km a degree spans (111.19 on the sphere): cells to spare


class Unit(object):
    """One area of one network: where a share of the rows is drawn."""

    def __init__(self, index, net_index, net, district):
        self.index = index
        self.net_index = net_index
        self.net = net
        self.district = district
        self.code = district.city.code
        self.weight = len(district.stops)


def origin_group(sessions, stations):
    """How many of an area's ``sessions`` share one origin, for an area of
    ``stations`` stations (the rule in the module's docstring)."""
    dense = sessions // max(1, ORIGINS_PER_STATION * stations)
    return min(MAX_ORIGIN_GROUP, max(MIN_ORIGIN_GROUP, dense))


def units_of(nets):
    """The units of the networks, in network order then district order."""
    units = []
    for net_index, net in enumerate(nets):
        for district in usable_districts(net):
            units.append(Unit(len(units), net_index, net, district))
    return units


def shares(total, weights):
    """``total`` split in proportion to ``weights``: largest remainder, ties to
    the earlier weight; every count is a whole number and they sum to total."""
    whole = sum(weights)
    if not whole:
        return [0] * len(weights)
    exact = [total * w for w in weights]
    counts = [e // whole for e in exact]
    left = total - sum(counts)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] % whole), i))
    for i in order[:left]:
        counts[i] += 1
    return counts


def route_pair(net, route):
    """A route's (first boarding stop id, last alighting stop id), unordered."""
    a, b = net.ids[route.leg_stops[0][0]], net.ids[route.leg_stops[-1][-1]]
    return (a, b) if a <= b else (b, a)


def label_pair(label):
    """The same pair read from a label's station_sequence (stop ids; for the
    general benchmark's names use route_pair)."""
    stops = [s for s in label["station_sequence"] if s != "【换乘】"]
    a, b = stops[0], stops[-1]
    return (a, b) if a <= b else (b, a)


class HoldOut(object):
    """What the test files hold out of training: route pairs and trip ends."""

    def __init__(self, nets):
        top = max([abs(lat) for net in nets for lat in net.lat] or [0.0])
        top = min(89.0, top + MAX_ACCESS_KM / KM_PER_DEG_LAT + 0.01)
        # Cells at least NEAR_KM wide everywhere the networks' trips can be (a
        # degree is at most CELL_KM_PER_DEG km of latitude, or of longitude
        # times the cosine, on the haversine's sphere; a margin to spare).
        self.cell_lat = NEAR_KM / CELL_KM_PER_DEG
        # A whole number of cells around the globe, so that the cells either
        # side of the 180th meridian are neighbours.
        self.lng_cells = max(3, int(360.0 / (NEAR_KM / (CELL_KM_PER_DEG * math.cos(math.radians(top))))))
        self.cell_lng = 360.0 / self.lng_cells
        self.pairs = set()
        self.cells = {}
        self.trips = 0
        self.entries = []       # (pair, origin, dest) of every add, in order

    def _cell(self, point):
        column = int(math.floor((point[0] + 180.0) / self.cell_lng)) % self.lng_cells
        return (column, int(math.floor(point[1] / self.cell_lat)))

    def add(self, pair, origin, dest):
        """Hold out a test trip: its first route's pair and its two ends."""
        self.trips += 1
        self.entries.append((pair, origin, dest))
        self.pairs.add(pair)
        self.cells.setdefault(self._cell(origin), []).append((origin, dest))
        self.cells.setdefault(self._cell(dest), []).append((dest, origin))

    def held_pair(self, pair):
        return pair in self.pairs

    def near(self, origin, dest):
        """Does a trip start within NEAR_KM of a test trip's start and end within
        NEAR_KM of its end (either direction)?"""
        cx, cy = self._cell(origin)
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for start, end in self.cells.get(((cx + dx) % self.lng_cells, cy + dy), ()):
                    if haversine_km(origin[0], origin[1], start[0], start[1]) <= NEAR_KM and \
                            haversine_km(dest[0], dest[1], end[0], end[1]) <= NEAR_KM:
                        return True
        return False

    def figures(self):
        return {"test_trips": self.trips, "held_out_pairs": len(self.pairs),
                "near_km": NEAR_KM}


class TrainCheck(object):
    """build_row's ``accept`` for a train row: refuses a trip near a test trip
    or whose first route's pair is held out, counting why."""

    def __init__(self, holdout):
        self.holdout = holdout
        self.counts = {"near": 0, "pair": 0}

    def __call__(self, trip, routes):
        if self.holdout.near(trip.origin, trip.dest):
            self.counts["near"] += 1
            return False
        if self.holdout.held_pair(route_pair(trip.net, routes[0])):
            self.counts["pair"] += 1
            return False
        return True


def draw_destination(net, rng, district, a, origin, allow_far):
    """A destination for a trip from ``origin`` (near station ``a``): drawn as
    router.draw_od draws one (a station TRIP_KM from a's, a point near it, the
    two points TRIP_KM apart), or None."""
    stops = district.stops
    for _ in range(DESTINATION_TRIES):
        b = rng.choice(stops)
        if TRIP_KM[0] <= net.dist(a, b) <= TRIP_KM[1]:
            break
    else:
        return None
    dest = access_point(net, rng, district, b, allow_far)
    if not TRIP_KM[0] <= haversine_km(origin[0], origin[1], dest[0], dest[1]) <= TRIP_KM[1]:
        return None
    return dest


class Origins(object):
    """The origin of each session group of a unit, with its access table and
    (where the router has one) its one-to-many search, made once per group and
    kept while the group's sessions are drawn (sessions come in order, so one
    group at a time is kept: the search's labels can be large)."""

    def __init__(self, seed):
        self.seed = seed
        self.key, self.value = None, None

    def get(self, unit, group):
        key = (unit.index, group)
        if key != self.key:
            net, district = unit.net, unit.district
            rng = sub_rng(self.seed, "cpt-origin", unit.code, group)
            a = rng.choice(district.stops)
            far = rng.randrange(2) == 0
            origin = access_point(net, rng, district, a, far)
            access = PointAccess(net, district, origin)
            self.key = key
            self.value = (a, origin, far, access, origin_search(net, district, origin, access))
        return self.value


def draw_session(unit, seed, local, holdout, origins, counts, group):
    """Session ``local`` of a unit, whose sessions share origins in groups of
    ``group`` -> (trip, routes, rng) or None when none fits in
    SESSION_ATTEMPTS draws; ``counts`` adds the draws refused ("range",
    "route", "near", "pair") and the candidates dropped ("candidate_pair").
    The rng continues to format the routes."""
    net, district = unit.net, unit.district
    rng = sub_rng(seed, "cpt", unit.code, local)
    for attempt in range(SESSION_ATTEMPTS):
        search = None
        if attempt < ORIGIN_TRIES:
            a, origin, far, access, search = origins.get(unit, local // group)
            dest = draw_destination(net, rng, district, a, origin, not far)
            trip = None if dest is None else Trip(net, district, origin, dest, access)
        else:
            od = draw_od(net, rng, district, *TRIP_KM)
            trip = None if od is None else Trip(net, district, od[0], od[1])
        if trip is None:
            counts["range"] = counts.get("range", 0) + 1
            continue
        if holdout.near(trip.origin, trip.dest):
            counts["near"] = counts.get("near", 0) + 1
            continue
        routes = session_candidates(trip, search=search)
        if not routes:
            counts["route"] = counts.get("route", 0) + 1
            continue
        if holdout.held_pair(route_pair(net, routes[0])):
            counts["pair"] = counts.get("pair", 0) + 1
            continue
        kept = [r for r in routes if not holdout.held_pair(route_pair(net, r))]
        counts["candidate_pair"] = counts.get("candidate_pair", 0) + len(routes) - len(kept)
        return trip, kept, rng
    return None
