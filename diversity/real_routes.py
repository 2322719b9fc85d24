"""Benchmark 3's real routes: what the reward asks of each predicted route
before it credits the route's diversity (transitlm/reward/diversity.py),
beside the reachability the record holds.  Judged only when the reward asks
(``Context.real_routes``); the evaluator's reports do not read them.

- grounded and plausible: Round 2 (common.check_grounding), as the first
  route is judged;
- its lines: a line named for each leg and, where the network has a line
  file, each the name of a line of it (the line
  ``general_llm.route_eval.LineTable.match_line`` designates: the route-eval
  check's rule) that calls at the leg's stations in their order
  (common.calls_in_order).

Standard library only; Python 3.8+.
"""

import common


def line_table(context):
    """The line file the reward asks the routes to be judged on, loaded
    (general_llm.route_eval.LineTable), or None: not asked, or no line file."""
    asked = context.real_routes
    if not asked or not asked.get("line_info"):
        return None
    from general_llm import route_eval
    return route_eval.LineTable.load(asked["line_info"])


def route_legs(route):
    """The stations ridden on each leg of a route: its station list split at
    【换乘】 (common.leg_sizes), legs without a station left out."""
    legs, start = [], 0
    for size in common.leg_sizes(route.sequence, len(route.stations)):
        legs.append(route.stations[start:start + size])
        start += size
    return legs


def check_lines(route, lines, city_code):
    """Does the route name a line for each leg, and, with a line file
    (``lines``, a LineTable; None without one), is each a line of it that
    calls at the leg's stations in their order?  -> (Verdict, the names in
    the line file of the lines designated, or None without a line file)."""
    names = common.route_stations(route.lines)      # the names transit_line_count counts
    legs = route_legs(route)
    if len(names) != len(legs):
        return common.Verdict(False, "%d line name(s) for %d leg(s)" % (len(names), len(legs)),
                              ("line_count",)), None
    if lines is None:
        return common.passed("a line named for each leg (no line file to check them)"), None
    found = []
    for name, leg in zip(names, legs):
        line = lines.match_line(name, city_code)
        if line is None:
            return common.Verdict(False, "line %s is not in the line file" % name,
                                  ("unknown_line",)), None
        if not common.calls_in_order(line.calls, leg):
            return common.Verdict(False, "line %s does not call at the %d station(s) of its "
                                         "leg in their order" % (line.name, len(leg)),
                                  ("line_order",)), None
        found.append(line.name)
    return common.passed("every line calls at the stations of its leg in their order"), found


def route_checks(routes, row, context, lines):
    """{key: record fields} of each predicted route (``routes``: {key:
    Route}): station_grounding, distance_plausibility, lines_real,
    lines_reason, line_names (check_lines)."""
    city_code = common.city_code_of(row.city)
    out = {}
    for key, route in routes.items():
        grounding, plausibility = common.check_grounding(route, row.origin, row.destination,
                                                         context.network, context.protocol)
        verdict, names = check_lines(route, lines, city_code)
        out[key] = {"station_grounding": grounding.ok, "distance_plausibility": plausibility.ok,
                    "lines_real": verdict.ok, "lines_reason": verdict.reason, "line_names": names}
    return out
