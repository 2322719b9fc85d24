"""Lower bounds for find_route's A*, per network and cost weights: a table of
the least cost from every stop to arriving at some stop of each grid cell,
over a relaxed network, so that one search per cell serves every trip.

The relaxed network asks less than find_route's rules in every way: a
boarding costs time_w x the line's wait + the weights' least line_w + fare_w
x the least fare any ride of the line pays; a ride costs time_w x its run
times from stop to stop without the dwells it sits through (ca[k+1] -
ct[k] summed, never more than ca[j] - ct[i]); riders may alight wherever
the line lets them, walk any walking link at its time from any stop, and
board any line again.  So the least relaxed cost from a stop to a stop is at
most what any itinerary's rides and walks between them cost under weights
at least these, whatever the penalties, banned kinds or banned lines; and the
least over a cell's stops is at most that.  A trip's bound at a stop is the
least, over the cells its egress stations lie in, of the table's cost plus
the cell's cheapest egress: admissible, so find_route stays exact (its
labels are those of any admissible bound but where two routes cost exactly
the same).

A table is made only where it is cheap (cells x relaxed nodes within
MAX_WORK: about a second of CPU; the 977 stops of New York's subway take
0.2 s) and where the network's times allow the relaxation (no ride or dwell
of negative time).  Standard library only; deterministic.
"""

import array
import heapq
import math
import operator

from transitlm.networks.access import LazyBound

CELL_DEG = 0.02          # a cell's side, degrees of longitude and of latitude (about 2 km)
MAX_WORK = 2000000       # cells x nodes of the relaxed network: a table's bound on effort
# The table's costs are kept this much under its sums, so that rounding (the
# table adds a route's costs in another order than the search) never lifts a
# bound above a real cost.
SHRINK = 1.0 - 1e-9


class BoundTable(object):
    """rows[stop][cell]: the least relaxed cost from ``stop`` (free to board,
    or to walk) to alighting at some stop of ``cell``, taken SHRINK under;
    cell_of[stop]."""

    def __init__(self, rows, cell_of, weights):
        self.rows = rows
        self.cell_of = cell_of
        self.weights = weights          # (time_w, least line_w, fare_w)
        self._last = (None, None)       # (the egress asked last, its bounds)
        self._last_ends = None          # that egress's dict

    def bounds(self, ends):
        """(free, alighted): find_route's A* bounds per stop towards a trip
        whose egress is ``ends`` (stop -> (mode, cost)), filled per stop on
        first use.  The last trip's are kept, with what they have filled:
        benchmark 3 searches one trip three times."""
        if ends is self._last_ends:             # PointAccess.best's shared dict
            return self._last[1]
        key = tuple(sorted((stop, cost) for stop, (_, cost) in ends.items()))
        if key == self._last[0]:
            self._last_ends = ends
            return self._last[1]
        cheapest = {}
        for stop, cost in key:
            cell = self.cell_of[stop]
            if cell not in cheapest or cost < cheapest[cell]:
                cheapest[cell] = cost
        cells = sorted(cheapest)
        egress = [cheapest[c] for c in cells]
        rows = self.rows
        if len(cells) == 1:
            only, cost = cells[0], egress[0]

            def free(stop):
                return rows[stop][only] + cost
        else:
            pick, add = operator.itemgetter(*cells), operator.add

            def free(stop):
                return min(map(add, pick(rows[stop]), egress))
        h_free = LazyBound(free)
        h_off = LazyBound(h_free.__getitem__)   # the same, where egress there does not undercut
        for stop, there in key:                 # egress there, without riding on
            if there < h_free[stop]:
                h_off[stop] = there
        self._last, self._last_ends = (key, (h_free, h_off)), ends
        return h_free, h_off


def weights_of(prefs):
    return (prefs.time_w, min(prefs.line_w.values()), prefs.fare_w)


def table_for(net, prefs):
    """The network's BoundTable for prefs' weights (made on first use and kept
    on the network), or None where the network has none (too large for
    MAX_WORK, or times the relaxation cannot bound) or prefs pay a penalty
    below zero somewhere."""
    if any(v < 0 for v in prefs.penalty.values()) or any(v < 0 for v in prefs.stop_penalty.values()):
        return None
    tables = getattr(net, "bound_tables", None)
    if tables is None:
        tables = net.bound_tables = {}
    key = weights_of(prefs)
    if key not in tables:
        tables[key] = build(net, *key) if relaxable(net) else None
    return tables[key]


def relaxable(net):
    """Every ride runs forward in time and every dwell, wait, walk and fare
    is not negative: the relaxed costs are then at most the real ones."""
    for ld in net.linedirs:
        ct, ca = ld.cumtime, ld.cumarr
        if ld.wait_min < 0 or any(ca[k + 1] < ct[k] or ct[k] < ca[k] for k in range(len(ct) - 1)):
            return False
        if (ld.least_fare() or 0.0) < 0:
            return False
    return all(walk_min >= 0 for row in net.links for _, _, walk_min in row)


def cells_of(net, cell_deg):
    """(cell of each stop, number of cells): cells of cell_deg degrees, numbered
    in the order of their (column, row)."""
    keys = [(int(math.floor(lng / cell_deg)), int(math.floor(lat / cell_deg)))
            for lng, lat in zip(net.lng, net.lat)]
    number = {key: k for k, key in enumerate(sorted(set(keys)))}
    return [number[key] for key in keys], len(number)


def build(net, time_w, line_w, fare_w, cell_deg=CELL_DEG, max_work=MAX_WORK):
    """The BoundTable of these weights, or None when it would take more than
    max_work (cells x relaxed nodes)."""
    stops = len(net.ids)
    first = []                         # per line direction: its first onboard node
    nodes = stops
    for ld in net.linedirs:
        first.append(nodes)
        nodes += len(ld.stops)
    cell_of, cells = cells_of(net, cell_deg)
    if cells * nodes > max_work:
        return None
    # The relaxed network backwards: node -> [(node before it, cost)].
    before = [[] for _ in range(nodes)]
    arrivals = [[] for _ in range(cells)]      # per cell: the onboard nodes alighting in it
    for ld_id, ld in enumerate(net.linedirs):
        base = first[ld_id]
        # the line's least fare, as the straight-line bound takes it (none priced: 0)
        board = time_w * ld.wait_min + line_w + fare_w * (ld.least_fare() or 0.0)
        last = len(ld.stops) - 1
        for k, stop in enumerate(ld.stops):
            if ld.board[k]:
                before[base + k].append((stop, board))
            if k < last:
                before[base + k + 1].append((base + k, time_w * (ld.cumarr[k + 1] - ld.cumtime[k])))
            if ld.alight[k]:
                before[stop].append((base + k, 0.0))
                arrivals[cell_of[stop]].append(base + k)
    for stop, row in enumerate(net.links):
        for twin, _, walk_min in row:
            before[twin].append((stop, time_w * walk_min))
    inf = float("inf")
    columns = []
    for cell in range(cells):
        cost = [inf] * nodes
        heap = [(0.0, node) for node in arrivals[cell]]
        for _, node in heap:
            cost[node] = 0.0
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            c, node = pop(heap)
            if c > cost[node]:
                continue
            for prior, step in before[node]:
                new = c + step
                if new < cost[prior]:
                    cost[prior] = new
                    push(heap, (new, prior))
        columns.append(cost)
    rows = [array.array("d", [column[stop] * SHRINK for column in columns]) for stop in range(stops)]
    return BoundTable(rows, cell_of, (time_w, line_w, fare_w))
