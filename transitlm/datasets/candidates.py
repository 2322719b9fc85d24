"""A corpus session's candidate routes: the one rule (issue 45, point 3).

Up to MAX_CANDIDATES routes of one trip, best first, ordered by cost, where
the cost is the expert score of protocol.md section 3 (``router.expert_score``:
minutes * 60 / 300 + lines + cycling segments + fare) -- the cost the labels'
router minimises, so the first candidate is the trip's label (benchmark 1's
route, ``Trip.find(Prefs())``).  No two candidates ride the same set of lines,
the lines named as the line file writes them (line_info.csv's line_name), and
every one costs at most COST_FACTOR times the first.  A candidate that ends
where it boarded (a ride out and back) is never offered.

How they are found: the best route; then, for each line of the best, the best
route riding none of that line (any direction); then the benchmark-3 series
(``router.distinct_alternatives``: the best riding none of the lines of the
routes before it).  Each search is exact under its exclusions.  The routes
found are deduplicated by line set and sorted by (cost, line names).  This is
not every route within the factor -- it is a documented, deterministic
selection of distinct good ones.

Standard library only; Python 3.8+.
"""

from transitlm.networks.router import (Prefs, distinct_alternatives, ends_where_it_boarded,
                                       expert_score)

MAX_CANDIDATES = 5
COST_FACTOR = 1.5          # a candidate's expert score is at most this times the first's
SERIES = 3                 # routes of the distinct_alternatives series searched


def line_set(net, route):
    """The lines a route rides, by the names the line file writes."""
    return frozenset(net.linedirs[ld].name for ld, _, _ in route.legs)


def session_candidates(trip, factor=COST_FACTOR, limit=MAX_CANDIDATES):
    """-> [Itinerary], best first (empty when the trip has no route, or its best
    route ends where it boarded).  ``trip`` is a benchmark_builder.Trip."""
    net = trip.net
    prefs = Prefs()
    best = trip.find(prefs)
    if best is None or ends_where_it_boarded(net, best):
        return []
    found = [best]
    for line_id in sorted(set(best.line_ids(net))):
        route = trip.find(prefs.without_lines([line_id]))
        if route is not None:
            found.append(route)
    found.extend(distinct_alternatives(trip, prefs, SERIES, float("inf"))[1:])
    bound = factor * expert_score(best)
    seen = {line_set(net, best)}
    others = []
    for route in found[1:]:
        lines = line_set(net, route)
        if lines in seen or ends_where_it_boarded(net, route) or expert_score(route) > bound:
            continue
        seen.add(lines)
        others.append(route)
    others.sort(key=lambda r: (expert_score(r), sorted(line_set(net, r))))
    return [best] + others[:limit - 1]
