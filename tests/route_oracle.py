"""Independent judges of the router's labels: the documented cost of an
itinerary, its legality, an exhaustive search and a textbook Dijkstra.

Written from the README's statement of the model (transitlm/networks/router.py is not
consulted for how to search, only for the network it loaded):

- an itinerary is access to a stop, one or more legs, egress from the last
  leg's alighting stop; a leg rides one line direction from a position where
  riders may board to a later one where they may alight, and has a fare;
- between two legs a rider stays at the stop and boards a different line
  (not the line just left, in any direction), or walks one walking link and
  boards any line;
- cost = time_w * minutes (access, waits, rides, walks, egress) + line_w per
  leg + bike_w per cycling access + fare_w * fares + penalties.
"""

import heapq
import itertools
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from transitlm.networks import router as routing  # noqa: E402


def leg_fare(ld, i, j):
    """Fare of a ride from position i to j, from the line's own tables (None: none)."""
    if ld.zone_fares is not None:
        runs, matrix = ld.zone_fares
        return matrix[runs[i]][runs[j]]
    km = ld.cumdist[j] - ld.cumdist[i]
    for limit, fare in ld.fare_bands:
        if km <= limit:
            return fare
    last_limit, last_fare = ld.fare_bands[-1]
    return last_fare + math.ceil((km - last_limit) / ld.fare_step_km)


def leg_cost(ld, i, j, prefs):
    fare = leg_fare(ld, i, j)
    if fare is None:
        return None
    minutes = ld.wait_min + ld.cumarr[j] - ld.cumtime[i]
    return (prefs.time_w * minutes + prefs.line_w[ld.kind] + prefs.fare_w * fare
            + prefs.penalty.get(ld.line.line_id, 0.0) + prefs.stop_penalty.get(ld.stops[i], 0.0))


def access_cost(acc, prefs):
    return (prefs.time_w * acc.minutes + prefs.fare_w * acc.fare
            + (prefs.bike_w if acc.mode == routing.ACCESS_BIKE else 0.0))


def walk_minutes(net, a, b):
    for twin, _, minutes in net.links[a]:
        if twin == b:
            return minutes
    return None


def rideable(ld, prefs):
    return ld.kind not in prefs.banned and ld.line.line_id not in prefs.banned_lines


def illegal(net, legs, prefs):
    """Why a list of legs (ld_id, i, j) breaks the rules, or None."""
    if not legs:
        return "no leg"
    for k, (ld_id, i, j) in enumerate(legs):
        ld = net.linedirs[ld_id]
        if not 0 <= i < j < len(ld.stops):
            return "leg %d: positions %d..%d" % (k, i, j)
        if not ld.board[i]:
            return "leg %d boards where riders may not board" % k
        if not ld.alight[j]:
            return "leg %d alights where riders may not alight" % k
        if leg_fare(ld, i, j) is None:
            return "leg %d has no fare" % k
        if not rideable(ld, prefs):
            return "leg %d rides a banned line" % k
        if k:
            before = net.linedirs[legs[k - 1][0]]
            here, there = before.stops[legs[k - 1][2]], ld.stops[i]
            if here == there:
                if before.line.line_id == ld.line.line_id:
                    return "leg %d boards the line just left" % k
            elif walk_minutes(net, here, there) is None:
                return "leg %d starts neither where leg %d ended nor a walk away" % (k, k - 1)
    return None


def itinerary_cost(net, legs, start, end, prefs):
    """The documented cost of access `start`, legs, egress `end` (Access objects)."""
    cost = access_cost(start, prefs) + access_cost(end, prefs)
    for k, (ld_id, i, j) in enumerate(legs):
        ld = net.linedirs[ld_id]
        cost += leg_cost(ld, i, j, prefs)
        if k:
            before = net.linedirs[legs[k - 1][0]]
            here, there = before.stops[legs[k - 1][2]], ld.stops[i]
            if here != there:
                cost += prefs.time_w * walk_minutes(net, here, there)
    return cost


def route_cost(net, route, prefs):
    return itinerary_cost(net, route.legs, route.start, route.end, prefs)


def access_options(net, district, point, prefs):
    """stop -> least access cost under prefs (the offered modes of routing.PointAccess)."""
    out = {}
    for stop, accs in routing.PointAccess(net, district, point).options:
        out[stop] = min(access_cost(acc, prefs) for acc in accs)
    return out


def rides_from(net):
    """stop -> [(ld, position)] for every position of every line direction."""
    out = {}
    for ld in net.linedirs:
        for i, stop in enumerate(ld.stops):
            out.setdefault(stop, []).append((ld, i))
    return out


def exhaustive_best(net, district, origin, dest, prefs, below=None):
    """Least cost over every legal itinerary (below `below` when given), by
    enumerating leg sequences.  -> cost, or None when there is none (below
    `below`).

    An optimal itinerary never boards the same (line direction, position)
    twice (cutting out the loop between the two boardings leaves a legal,
    no dearer itinerary), so sequences without such a repeat are enough; a
    branch whose cost so far reaches the best complete one (or `below`) is cut
    (costs are not negative), and so is one at a stop from which no egress
    stop can be reached at all (can_reach).
    """
    best = [below]

    def ending(line_id, stop, total):
        if best[0] is None or total < best[0]:
            best[0] = total

    enumerate_itineraries(net, district, origin, dest, prefs, lambda: best[0], ending)
    return None if best[0] is below else best[0]


def enumerate_itineraries(net, district, origin, dest, prefs, bound, ending):
    """Every legal leg sequence from origin to dest that boards no (line
    direction, position) twice: ``ending(line id of the last ride, stop where
    it alights, complete cost)`` for each that can end there; a branch whose
    cost so far reaches ``bound()`` (None: no bound) is cut, and so is one at
    a stop from which no egress stop can be reached at all (can_reach)."""
    starts = access_options(net, district, origin, prefs)
    ends = access_options(net, district, dest, prefs)
    rides = rides_from(net)
    useful = can_reach(net, prefs, set(ends))

    def extend(stop, came_by, cost, used):
        limit = bound()
        if stop not in useful or (limit is not None and cost >= limit):
            return
        for ld, i in rides.get(stop, ()):
            if not ld.board[i] or not rideable(ld, prefs) or (ld.ld_id, i) in used:
                continue
            if came_by is not None and ld.line.line_id == came_by:
                continue
            for j in range(i + 1, len(ld.stops)):
                if not ld.alight[j]:
                    continue
                step = leg_cost(ld, i, j, prefs)
                if step is None:
                    continue
                new, there = cost + step, ld.stops[j]
                used.add((ld.ld_id, i))
                if there in ends:
                    ending(ld.line.line_id, there, new + ends[there])
                extend(there, ld.line.line_id, new, used)
                for twin, _, minutes in net.links[there]:
                    extend(twin, None, new + prefs.time_w * minutes, used)
                used.discard((ld.ld_id, i))

    for stop, cost in sorted(starts.items()):
        extend(stop, None, cost, set())


def can_reach(net, prefs, targets):
    """Stops from which some target can be reached at all, by any sequence of
    rides and walks, ignoring the rules between legs (a relaxation: a stop not
    in it starts no itinerary to a target)."""
    back = {}
    for ld in net.linedirs:
        if not rideable(ld, prefs):
            continue
        for i in range(len(ld.stops)):
            for j in range(i + 1, len(ld.stops)):
                if ld.board[i] and ld.alight[j] and leg_fare(ld, i, j) is not None:
                    back.setdefault(ld.stops[j], set()).add(ld.stops[i])
    for a, row in enumerate(net.links):
        for twin, _, _ in row:
            back.setdefault(twin, set()).add(a)
    seen, todo = set(targets), list(targets)
    while todo:
        for before in back.get(todo.pop(), ()):
            if before not in seen:
                seen.add(before)
                todo.append(before)
    return seen


def ride_table(net, prefs):
    """stop -> [(line id, kind, alighting stop, leg cost)] for every legal ride
    boarding there (board and alight allowed, a fare), under prefs' weights;
    kept on the network per weights (banned kinds and lines are left to the caller)."""
    key = (prefs.time_w, prefs.fare_w, tuple(sorted(prefs.line_w.items())),
           tuple(sorted(prefs.penalty.items())), tuple(sorted(prefs.stop_penalty.items())))
    tables = net.__dict__.setdefault("_oracle_rides", {})
    if key not in tables:
        table = {}
        for ld in net.linedirs:
            for i in range(len(ld.stops) - 1):
                if not ld.board[i]:
                    continue
                row = table.setdefault(ld.stops[i], [])
                for j in range(i + 1, len(ld.stops)):
                    if ld.alight[j]:
                        step = leg_cost(ld, i, j, prefs)
                        if step is not None:
                            row.append((ld.line.line_id, ld.kind, ld.stops[j], step))
        tables[key] = table
    return tables[key]


def dijkstra_best(net, district, origin, dest, prefs):
    """Least cost over every legal itinerary by Dijkstra's algorithm on states
    ("free to board at stop", "alighted at stop from line"), no bound, no
    pruning.  -> cost or None."""
    starts = access_options(net, district, origin, prefs)
    ends = access_options(net, district, dest, prefs)
    rides = ride_table(net, prefs)
    banned, banned_lines = prefs.banned, prefs.banned_lines
    done, tentative, heap, counter = set(), {}, [], itertools.count()

    def reach(state, cost):
        if cost < tentative.get(state, float("inf")):
            tentative[state] = cost
            heapq.heappush(heap, (cost, next(counter), state))

    for stop, cost in starts.items():
        reach((stop, None), cost)
    best = None
    while heap:
        cost, _, state = heapq.heappop(heap)
        if best is not None and cost >= best:
            break
        if state in done:
            continue
        done.add(state)
        stop, came_by = state
        if came_by is not None:                 # just alighted from line came_by
            if stop in ends and (best is None or cost + ends[stop] < best):
                best = cost + ends[stop]
            for twin, _, minutes in net.links[stop]:
                reach((twin, None), cost + prefs.time_w * minutes)
        for line_id, kind, there, step in rides.get(stop, ()):
            if line_id != came_by and kind not in banned and line_id not in banned_lines:
                reach((there, line_id), cost + step)
    return best


def exhaustive_endings(net, district, origin, dest, prefs, below):
    """{(line id of the last ride, stop where it alights): least complete cost}
    over every legal itinerary costing less than `below`, by the enumeration of
    exhaustive_best (a branch whose cost so far reaches `below` is cut)."""
    found = {}

    def ending(line_id, stop, total):
        key = (line_id, stop)
        if total < min(below, found.get(key, below)):
            found[key] = total

    enumerate_itineraries(net, district, origin, dest, prefs, lambda: below, ending)
    return found
