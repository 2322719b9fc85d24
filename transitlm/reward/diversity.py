"""The route diversity the reward credits on benchmark 3: real alternatives
only (issue 46).

The published RD compares the routes' line names whatever the routes are, so
the first route copied twice under invented line names has RD near 1.  The
reward credits a pair of routes only when both are real, and no more than
their stations (or, with a line file, their real lines) show:

- a route is **real** when it is reachable (the record's verdict), visits
  at least ``min_stations`` distinct stations, is grounded and plausible at
  both ends (Round 2, as the first route is judged), names a line for each
  leg and -- where the network has a line file -- each of those names is a
  line of it that calls at the leg's stations in their order
  (diversity/real_routes.py, the evaluator's code), and it differs from
  every earlier route (first, second, third) in its station set or, where
  the line file shows it, in the lines it rides (two lines calling at the
  same stations, such as a local and an express train, are two routes; the
  two directions of a line, names equal but for their suffix, are one);
- a **pair** of real routes is credited ``min(L, max(S, T))``: L the pair's
  published diversity (1 - IoU of the line signatures, as RD compares them
  under the protocol), S 1 - IoU of their station sets, T 1 - IoU of the
  lines they ride, by their names in the line file (0 without a line
  file): the line names and access modes count only as far as the
  stations or the real lines differ;
- the credit is the sum over the three pairs of first, second and third,
  over 3: a pair with a route that is missing or not real counts as no
  diversity, so dropping, copying or faking an alternative never raises it.

Never above the published RD: each pair at most its published diversity,
over at least as many pairs.  Standard library only; Python 3.8+.
"""

import itertools

from common import ROUTE_KEYS, full_line_set, iou, strip_line_suffix

PAIRS = tuple(itertools.combinations(ROUTE_KEYS, 2))
# The record's field of the checks the reward asks of each route.
CHECKS_FIELD = "route_checks"


def not_real(record, min_stations):
    """{key: why the predicted route is not real (an English reason), or None}
    for each route the completion holds."""
    routes = record.get("prediction_routes") or {}
    reach = record.get("routes") or {}
    checks = record.get(CHECKS_FIELD) or {}
    reasons, earlier = {}, []
    for key in ROUTE_KEYS:
        route = routes.get(key)
        if route is None:
            continue
        checked = checks.get(key) or {}
        # What tells it from an earlier route: its stations, and the lines the
        # line file says it rides (None without one), a line's directions
        # one line (its name without its suffix, strip_line_suffix).
        stations = frozenset(route.get("stations") or ())
        names = checked.get("line_names")
        seen = (stations, None if names is None else frozenset(map(strip_line_suffix, names)))
        copied = [other for other, shown in earlier if shown == seen]
        earlier.append((key, seen))
        if not (reach.get(key) or {}).get("reachable"):
            reasons[key] = "not reachable"
        elif len(stations) < min_stations:
            reasons[key] = "fewer than %d distinct stations" % min_stations
        elif not checked.get("station_grounding"):
            reasons[key] = "not grounded"
        elif not checked.get("distance_plausibility"):
            reasons[key] = "access distances not plausible"
        elif not checked.get("lines_real"):
            reasons[key] = checked.get("lines_reason") or "its lines are not real"
        elif copied:
            reasons[key] = ("the stations of the %s route" if names is None else
                            "the stations and lines of the %s route") % copied[0]
        else:
            reasons[key] = None
    return reasons


def pair_credit(first, second, walk, first_lines=None, second_lines=None):
    """The credited diversity of two real routes (prediction_routes entries):
    min(L, max(S, T)) -- see the module's docstring; ``walk``: the protocol's
    line_set_with_access; ``*_lines``: the names in the line file of the
    lines each rides (None without a line file)."""
    published = 1.0 - iou(full_line_set(first.get("lines") or (), first.get("start_mode"),
                                        first.get("end_mode"), walk),
                          full_line_set(second.get("lines") or (), second.get("start_mode"),
                                        second.get("end_mode"), walk))
    shown = 1.0 - iou(first.get("stations") or (), second.get("stations") or ())
    if first_lines is not None and second_lines is not None:
        shown = max(shown, 1.0 - iou(first_lines, second_lines))
    return min(published, shown)


def real_diversity(record, walk, min_stations):
    """The RD the reward credits for a record (of a completion judged with
    Context.real_routes set), in [0, 1], never above the record's ``rd``."""
    routes = record.get("prediction_routes") or {}
    checks = record.get(CHECKS_FIELD) or {}
    reasons = not_real(record, min_stations)
    total = 0.0
    for one, other in PAIRS:
        if reasons.get(one, "missing") is None and reasons.get(other, "missing") is None:
            total += pair_credit(routes[one], routes[other], walk,
                                 checks[one].get("line_names"), checks[other].get("line_names"))
    return total / len(PAIRS)
