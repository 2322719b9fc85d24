"""A corpus session's candidate routes: the one rule (issue 45, point 3).

Up to MAX_CANDIDATES routes of one trip, best first, ordered by cost, where
the cost is the expert score of protocol.md section 3 (``router.expert_score``:
minutes * 60 / 300 + lines + cycling segments + fare) -- the cost the labels'
router minimises, so the first candidate is the trip's label (benchmark 1's
route, ``Trip.find(Prefs())``).  No two candidates ride the same set of lines,
the lines named as the line file writes them (line_info.csv's line_name), and
every one costs at most COST_FACTOR times the first.  A candidate that ends
where it boarded (a ride out and back) is never offered.

How they are found.  Where the router has issue 44's one-to-many search
(``router.OriginSearch``), by its ``candidates_to``: one search from the
origin (shared by the sessions of an origin group, splits.Origins) labels, for
every (stop where the last ride alights, line of that ride), the cheapest
itinerary ending so; these are ordered by cost and the first of each line set
kept.  Otherwise by successive searches: the best route; then, for each line
of the best, the best route riding none of that line (any direction); then
the benchmark-3 series (``router.distinct_alternatives``: the best riding
none of the lines of the routes before it); each exact under its exclusions,
deduplicated by line set and sorted by (cost, line names).  Either way this
is not every route within the factor -- it is a deterministic selection of
distinct good ones, the first the optimal route.

Standard library only; Python 3.8+.
"""

from transitlm.networks import router
from transitlm.networks.router import (Prefs, distinct_alternatives, ends_where_it_boarded,
                                       expert_score)

# issue 44's one-to-many search, where the router has it
ORIGIN_SEARCH = getattr(router, "OriginSearch", None)

MAX_CANDIDATES = 5
COST_FACTOR = 1.5          # a candidate's expert score is at most this times the first's
SERIES = 3                 # routes of the distinct_alternatives series searched
SPARE = 2                  # candidates asked of OriginSearch beyond the limit (out-and-back ones dropped)


def line_set(net, route):
    """The lines a route rides, by the names the line file writes."""
    return frozenset(net.linedirs[ld].name for ld, _, _ in route.legs)


def origin_search(net, district, origin, start_access):
    """The search from an origin that session_candidates can reuse, or None
    when the router has no one-to-many search."""
    if ORIGIN_SEARCH is None:
        return None
    return ORIGIN_SEARCH(net, district, origin, Prefs(), start_access=start_access)


def session_candidates(trip, factor=COST_FACTOR, limit=MAX_CANDIDATES, search=None):
    """-> [Itinerary], best first (empty when the trip has no route, or its best
    route ends where it boarded).  ``trip`` is a benchmark_builder.Trip;
    ``search`` an origin_search from trip.origin, when one is at hand."""
    net = trip.net
    if ORIGIN_SEARCH is not None:
        search = search or origin_search(net, trip.district, trip.origin, trip.start_access)
        found = search.candidates_to(trip.dest, limit + SPARE, factor, trip.end_access)
        if not found or ends_where_it_boarded(net, found[0]):
            return []
        return [r for r in found if not ends_where_it_boarded(net, r)][:limit]
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
