"""Seeded random small networks for tests/test_networks_router.py, and its
router-against-exhaustive-search cases: pure computation, which
tests.support.Offloaded runs in a process of its own while the suite goes
on."""

import random

from transitlm.networks import benchmark_builder as mb
from transitlm.networks import bound_tables
from transitlm.networks import gtfs_fares as fares
from transitlm.networks import router as routing
from tests import route_oracle as oracle

LNG0, LAT0 = 116.40, 39.90
CASES = 600
SPAN = 0.2          # degrees of longitude


def random_network(rng):
    """A few stops in a ~16 km square (so most trips need more than one ride),
    a few lines (some both ways, some loops, many shared stops), dwells, stops
    without boarding or alighting, walking links, and distance, flat or zone
    fares."""
    net = routing.Network(0.0)
    city = mb.City("X", "0")
    district = routing.District(0, city, LNG0, LAT0)
    net.districts.append(district)
    n = rng.randint(5, 9)
    for k in range(n):
        s = net.add_stop("s%d" % k, "S%d" % k, LNG0 + rng.uniform(0, SPAN), LAT0 + rng.uniform(0, SPAN * 0.75), "0")
        district.stops.append(s)
    for k in range(rng.randint(2, 5)):
        kind = rng.choice((routing.KIND_METRO, routing.KIND_BUS))
        path = rng.sample(range(n), rng.randint(2, min(n, 6)))
        if rng.random() < 0.15:
            path.append(path[0])                      # a loop: back to its first stop
        line = routing.Line(len(net.lines), city, kind, str(k), path, district)
        net.lines.append(line)
        directions = [path] + ([path[::-1]] if rng.random() < 0.6 else [])
        for d, stops in enumerate(directions):
            add_direction(net, rng, line, "L%d-%d" % (k, d), stops)
    for _ in range(rng.randint(0, 4)):
        a, b = rng.sample(range(n), 2)
        net.link(a, b)
        if rng.random() < 0.5:
            net.transfer_min[(a, b)] = rng.uniform(2.0, 8.0)
    net.min_minutes_per_km = mb.fastest_minutes_per_km(net)
    district.lines = list(net.lines)
    net.finish()
    return net, district


def add_direction(net, rng, line, name, stops):
    count = len(stops)
    cumdist, dep, arr = [0.0], [0.0], [0.0]
    for a, b in zip(stops, stops[1:]):
        cumdist.append(cumdist[-1] + net.dist(a, b) * 1.2)
        arr.append(dep[-1] + rng.choice((0.0, rng.uniform(1.0, 12.0))))
        dep.append(arr[-1] + (rng.uniform(0.0, 4.0) if rng.random() < 0.3 else 0.0))
    board = [rng.random() > 0.2 for _ in range(count)]
    alight = [rng.random() > 0.2 for _ in range(count)]
    roll = rng.random()
    zone_fares = None
    bands, step = routing.FARE_BANDS[line.kind], routing.FARE_STEP_KM[line.kind]
    if roll < 0.3:
        bands, step = ((float("inf"), rng.choice((1.0, 2.5))),), float("inf")
    elif roll < 0.6:
        runs = fares.zone_runs([str(rng.randint(1, 3)) for _ in range(count)])
        size = runs[-1] + 1
        matrix = [[None if b < a or rng.random() < 0.15 else float(rng.randint(1, 6))
                   for b in range(size)] for a in range(size)]
        zone_fares = (runs, matrix)
    ld = routing.LineDir(len(net.linedirs), line, name, list(stops), cumdist, dep,
                         rng.uniform(1.0, 8.0), bands, step, cumarr=arr, board=board,
                         alight=alight, zone_fares=zone_fares)
    net.add_linedir(ld)


def random_prefs(rng, net):
    prefs = routing.prefs_for_req(rng.choice((0, 0, 2, 5, 7, 8)))
    if rng.random() < 0.3:
        prefs = prefs.penalised([rng.randrange(len(net.lines))], rng.uniform(0.5, 6.0),
                                [rng.randrange(len(net.ids))])
    if rng.random() < 0.3:
        prefs = prefs.without_lines([rng.randrange(len(net.lines))])
    return prefs


def random_point(rng, net):
    """Mostly a walk from a stop; sometimes anywhere (bike or taxi access)."""
    if rng.random() < 0.8:
        s = rng.randrange(len(net.ids))
        return (net.lng[s] + rng.uniform(-0.012, 0.012), net.lat[s] + rng.uniform(-0.009, 0.009))
    return (LNG0 + rng.uniform(0, SPAN), LAT0 + rng.uniform(0, SPAN * 0.75))


def random_case(case):
    """(network, district, prefs, origin, destination) of a seeded random case."""
    rng = random.Random(case)
    net, district = random_network(rng)
    prefs = random_prefs(rng, net)
    return net, district, prefs, random_point(rng, net), random_point(rng, net)


def router_against_exhaustive(cases):
    """Cases 0 .. cases-1, each routed by the router and checked by the
    oracle -> [{case, found, exhaustive (its cost when the router found
    none), illegal (the oracle's reason, when the itinerary breaks a rule),
    cost, cheaper (an exhaustive cost below the router's), legs}]."""
    out = []
    for case in range(cases):
        net, district, prefs, origin, dest = random_case(case)
        route = routing.find_route(net, district, origin, dest, prefs)
        if route is None:
            out.append({"case": case, "found": False,
                        "exhaustive": oracle.exhaustive_best(net, district, origin, dest,
                                                             prefs)})
            continue
        cost = oracle.route_cost(net, route, prefs)
        out.append({"case": case, "found": True,
                    "illegal": oracle.illegal(net, route.legs, prefs), "cost": cost,
                    "cheaper": oracle.exhaustive_best(net, district, origin, dest, prefs,
                                                      below=cost - 1e-9),
                    "legs": len(route.legs), "stops": len(net.ids), "tables": with_tables(case)})
    return out


def with_tables(case):
    """The case routed with bound tables (bound_tables) of a stop per cell and
    of several stops per cell -> [(cells, found, illegal, cost)]."""
    net, district, prefs, origin, dest = random_case(case)
    out = []
    for cell_deg in (bound_tables.CELL_DEG / 8, bound_tables.CELL_DEG * 4):
        table = bound_tables.build(net, *bound_tables.weights_of(prefs), cell_deg=cell_deg)
        route = routing.find_route(net, district, origin, dest, prefs, table=table)
        out.append((len(set(table.cell_of)), route is not None,
                    route and oracle.illegal(net, route.legs, prefs),
                    route and oracle.route_cost(net, route, prefs)))
    return out


SEARCH_CASES = 150
DESTINATIONS = 3
CANDIDATES, FACTOR = 4, 1.6


def origin_search_case(case):
    """(network, district, prefs, origin, [destinations]) of a seeded random case
    for OriginSearch: random_case's, plus more destinations."""
    net, district, prefs, origin, dest = random_case(case)
    rng = random.Random("more destinations %d" % case)
    return net, district, prefs, origin, [dest] + [random_point(rng, net) for _ in range(DESTINATIONS - 1)]


def origin_search_against_exhaustive(cases):
    """One routing.OriginSearch per case, asked for route_to and candidates_to
    of several destinations in turn (so later ones reuse and resume the
    search), each checked by the oracle -> [{case, dest, found, exhaustive
    (its cost when none was found), illegal, cost, cheaper, candidates:
    [{cost, ending (its last ride's exhaustive cost), lines, line_ids, illegal}],
    endings: [(line id, stop, cost)] within the factor}]."""
    out = []
    for case in range(cases):
        net, district, prefs, origin, dests = origin_search_case(case)
        search = routing.OriginSearch(net, district, origin, prefs)
        for k, dest in enumerate(dests):
            if case % 2:
                picks = search.candidates_to(dest, CANDIDATES, FACTOR)
                route = search.route_to(dest)
            else:
                route = search.route_to(dest)
                picks = search.candidates_to(dest, CANDIDATES, FACTOR)
            row = {"case": case, "dest": k, "found": route is not None}
            if route is None:
                row["exhaustive"] = oracle.exhaustive_best(net, district, origin, dest, prefs)
                row["candidates"] = len(picks)
                out.append(row)
                continue
            cost = oracle.route_cost(net, route, prefs)
            endings = oracle.exhaustive_endings(net, district, origin, dest, prefs,
                                                FACTOR * cost + 1e-9)
            row.update({"illegal": oracle.illegal(net, route.legs, prefs), "cost": cost,
                        "cheaper": oracle.exhaustive_best(net, district, origin, dest, prefs,
                                                          below=cost - 1e-9),
                        "endings": sorted((line, stop, c) for (line, stop), c in endings.items()),
                        "candidates": []})
            for pick in picks:
                last_ld, _, last_j = pick.legs[-1]
                ld = net.linedirs[last_ld]
                row["candidates"].append({
                    "cost": oracle.route_cost(net, pick, prefs),
                    "ending": endings.get((ld.line.line_id, ld.stops[last_j])),
                    "lines": sorted(net.linedirs[l].name for l, _, _ in pick.legs),
                    "line_ids": sorted({net.linedirs[l].line.line_id for l, _, _ in pick.legs}),
                    "illegal": oracle.illegal(net, pick.legs, prefs)})
            out.append(row)
    return out
