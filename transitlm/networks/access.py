"""How a point and a station are joined: the access modes (walking, cycling,
taxi), the ranges in which the router offers each, their detours, speeds
and fares (``Access``), and every station a point can reach with the offered
modes, plus the A* straight-line bounds towards the point (``PointAccess``);
router.py has their names too.  Standard library only.
"""

import math

from common import EARTH_RADIUS_KM
from transitlm.networks.stop_grid import (KM_PER_DEG, RADIANS_PER_DEGREE, flat_km, latitude_cosines,
                                         stop_grid)

ACCESS_WALK = "walk"
ACCESS_BIKE = "bike"
ACCESS_TAXI = "taxi"
# Straight-line ranges in which the router offers a mode; all are inside the
# evaluator's grounding thresholds (3 / 5 / 10 km) so labels always ground.
ACCESS_RANGE_KM = {ACCESS_WALK: (0.0, 2.0), ACCESS_BIKE: (0.8, 4.5), ACCESS_TAXI: (2.5, 9.0)}
FARTHEST_KM = max(high for _, high in ACCESS_RANGE_KM.values())
# A mode is offered only when the nearest station is at least this far away,
# the way journey planners suggest a bike or a car only when walking is long.
ACCESS_OFFER_FROM_KM = {ACCESS_WALK: 0.0, ACCESS_BIKE: 1.0, ACCESS_TAXI: 3.0}
ACCESS_DETOUR = {ACCESS_WALK: 1.25, ACCESS_BIKE: 1.25, ACCESS_TAXI: 1.30}
ACCESS_SPEED_KMH = {ACCESS_WALK: 5.0, ACCESS_BIKE: 11.0, ACCESS_TAXI: 30.0}
ACCESS_SETUP_MIN = {ACCESS_WALK: 0.0, ACCESS_BIKE: 4.0, ACCESS_TAXI: 5.0}   # find/park a bike, hail a car
BIKE_FARE = 1.5
TAXI_BASE_FARE = 13.0
TAXI_BASE_KM = 3.0
TAXI_FARE_PER_KM = 2.3


def access_terms(mode, straight_km):
    """(km, minutes, fare) of getting between a point and a station
    straight_km apart by ``mode``: the detour, the speed and setup time, the
    fare."""
    km = straight_km * ACCESS_DETOUR[mode]
    minutes = km / ACCESS_SPEED_KMH[mode] * 60 + ACCESS_SETUP_MIN[mode]
    if mode == ACCESS_BIKE:
        fare = BIKE_FARE
    elif mode == ACCESS_TAXI:
        fare = round(TAXI_BASE_FARE + TAXI_FARE_PER_KM * max(0.0, km - TAXI_BASE_KM), 1)
    else:
        fare = 0.0
    return km, minutes, fare


class Access:
    """Getting between a point and a station: mode, distance, time, fare."""

    def __init__(self, mode, straight_km):
        self.mode = mode
        self.straight_km = straight_km
        self.km, self.minutes, self.fare = access_terms(mode, straight_km)


class LazyBound(dict):
    """stop -> an A* bound, computed by ``fill(stop)`` (which returns it) when
    the search first looks the stop up (PointAccess.bound's and
    bound_tables' bounds)."""

    def __init__(self, fill):
        dict.__init__(self)
        self.fill = fill

    def __missing__(self, stop):
        value = self[stop] = self.fill(stop)
        return value


class PointAccess:
    """Every station a point can reach, with the offered modes (per trip, reused
    by every search of that trip), plus the A* bounds towards the point.

    The stations in reach are found through the district's StopGrid; the
    answers are those of a scan of every station."""

    def __init__(self, net, district, point):
        lng0, lat0 = point
        self.kx = kx = KM_PER_DEG * math.cos(math.radians(lat0))
        self.net, self.district, self.point = net, district, point
        self.coords = district.coords
        self._bounds, self._flat = {}, None
        grid = stop_grid(net, district)
        # The stations in walking reach hold the nearest one when it is in walking reach
        # (the usual case), else those in the longest reach do: modes' stations are filtered.
        radius = ACCESS_RANGE_KM[ACCESS_WALK][1] + 0.05
        around = grid.within(point, kx, radius)
        if not around:
            radius = FARTHEST_KM + 0.05
            around = grid.within(point, kx, radius)
        self.nearest_flat = min((flat, s) for _, s, flat in around) if around else grid.nearest(point, kx)
        modes = [m for m in (ACCESS_WALK, ACCESS_BIKE, ACCESS_TAXI)
                 if self.nearest_flat[0] >= ACCESS_OFFER_FROM_KM[m]]
        self.reach_km = max(ACCESS_RANGE_KM[m][1] for m in modes)
        reach = self.reach_km + 0.05
        in_reach = [e for e in around if e[2] <= reach] if reach <= radius else grid.within(point, kx, reach)
        self.in_reach = []         # (stop, straight km, the offered modes in range)
        lngs, lats, cos_lat = net.lng, net.lat, latitude_cosines(net)
        cos0 = math.cos(lat0 * RADIANS_PER_DEGREE)
        sin, asin, sqrt = math.sin, math.asin, math.sqrt
        diameter = 2 * EARTH_RADIUS_KM
        ranges = [(m,) + ACCESS_RANGE_KM[m] for m in modes]
        for _, s, _ in in_reach:
            # net.dist_to(s, point), the same operations (bit for bit)
            d = diameter * asin(sqrt(sin((lats[s] - lat0) * RADIANS_PER_DEGREE / 2) ** 2
                                     + cos0 * cos_lat[s]
                                     * sin((lngs[s] - lng0) * RADIANS_PER_DEGREE / 2) ** 2))
            offered = tuple(m for m, low, high in ranges if low <= d <= high)
            if offered:
                self.in_reach.append((s, d, offered))
        self._best = {}

    @property
    def options(self):
        """[(stop, [Access per offered mode in range])], in district order."""
        return [(s, [Access(m, d) for m in offered]) for s, d, offered in self.in_reach]

    @property
    def flat(self):
        """stop -> flat km from the point, for every stop of the district (made on first use)."""
        if self._flat is None:
            lng0, lat0 = self.point
            kx, hypot = self.kx, math.hypot
            self._flat = {s: hypot((lng - lng0) * kx, (lat - lat0) * KM_PER_DEG)
                          if -180.0 <= lng - lng0 <= 180.0 else flat_km(self.net, s, self.point, kx)
                          for s, lng, lat in self.coords}
        return self._flat

    def nearest(self):
        """The nearest stop by flat distance (the lowest index among equals)."""
        return self.nearest_flat[1]

    def bound(self, per_km, board_min):
        """Admissible A* bounds towards this point, per stop: (free to board,
        just alighted).  per_km times the straight distance left once the
        longest offered access could finish the trip, plus the least boarding
        cost wherever one more ride is unavoidable (before any ride, or beyond
        access reach).  Computed per stop when the search first needs it."""
        key = (per_km, board_min)
        if key not in self._bounds:
            reach = self.reach_km
            lng0, lat0 = self.point
            lngs, lats, cos_lat = self.net.lng, self.net.lat, latitude_cosines(self.net)
            cos0 = math.cos(lat0 * RADIANS_PER_DEGREE)
            sin, asin, sqrt = math.sin, math.asin, math.sqrt
            diameter = 2 * EARTH_RADIUS_KM

            def both(s):
                # great-circle distance: the flat one is off by the cosine of the
                # latitude across a district hundreds of km wide (coaches).
                # common.haversine_km(lng0, lat0, lng, lat), the same operations
                # (bit for bit), with the stop's cosine computed once per network.
                a = (sin((lats[s] - lat0) * RADIANS_PER_DEGREE / 2) ** 2
                     + cos0 * cos_lat[s] * sin((lngs[s] - lng0) * RADIANS_PER_DEGREE / 2) ** 2)
                rest = per_km * (diameter * asin(sqrt(a)) - reach)
                return (rest if rest > 0 else 0.0) + board_min, (rest + board_min if rest > 0 else 0.0)

            def fill_free(s):           # both tables filled at once
                free, h_off[s] = both(s)
                return free

            def fill_off(s):
                h_free[s], off = both(s)
                return off

            h_free, h_off = LazyBound(fill_free), LazyBound(fill_off)
            self._bounds[key] = (h_free, h_off)
        return self._bounds[key]

    def best(self, prefs):
        """stop -> (mode, cost) of the cheapest offered mode under prefs (the
        first offered among equals).  Kept per prefs.access_weights(): every
        search of a trip under the same access weights shares one dict (not
        to be changed)."""
        key = prefs.access_weights()
        out = self._best.get(key)
        if out is None:
            out = self._best[key] = {}
            cost_of = prefs.mode_cost
            for s, d, offered in self.in_reach:
                best = None
                for mode in offered:
                    _, minutes, fare = access_terms(mode, d)
                    cost = cost_of(mode, minutes, fare)
                    if best is None or cost < best[1]:
                        best = (mode, cost)
                out[s] = best
        return out
