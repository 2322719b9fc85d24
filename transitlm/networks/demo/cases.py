"""One demo sample row in the making: an origin/destination with its label
route(s) (``Case``), the route-eval service's station matching on the
generator's tables, prediction helpers shared by the scenario builders and
the number perturbations (checked against the evaluator's own reading).
"""


from common import TRANSFER, within
from common import parse_distance_km as parse_km
from common import parse_fare_cny as parse_fare
from common import parse_time_minutes as parse_minutes
from common import bigram_jaccard
from transitlm.networks.router import (
    ACCESS_WALK, ABOUT, MODE_WALK, UNIT_HOUR, UNIT_KM, UNIT_M, UNIT_MIN, UNIT_YUAN,
    PointAccess, Prefs, dumps, find_route, fmt_mode, make_route, route_json, same_stations)
from transitlm.networks.demo.network import (
    GROUND_KM, MIN_FUZZY_JACCARD, POI_SUFFIXES, QUERY, TOL_DISTANCE, TOL_FARE, TOL_TIME)

# ---------------------------------------------------------------------------
# The route-eval service's station matching on the generator's tables -- used
# only to make sure a general-LLM row built to (not) match really does.
# ---------------------------------------------------------------------------

def match_station(net, ld, query):
    """The stop the route-eval service picks for `query` on a line, or None."""
    for s in ld.stops:
        if net.names[s] == query:
            return s
    best, best_score = None, -1.0
    for s in ld.stops:
        score = bigram_jaccard(query, net.names[s])
        if score > best_score:
            best, best_score = s, score
    return best if best_score >= MIN_FUZZY_JACCARD else None


# ---------------------------------------------------------------------------
# One sample row: origin/destination, label route(s) and the prediction
# ---------------------------------------------------------------------------


class Case:
    """What a scenario builder may use for one sample row."""

    def __init__(self, net, rng, district, origin, dest, routes, labels, req_type):
        self.net = net
        self.rng = rng
        self.district = district
        self.origin = origin
        self.dest = dest
        self.routes = routes
        self.labels = labels
        self.req_type = req_type
        self.start_access = PointAccess(net, district, origin)
        self.end_access = PointAccess(net, district, dest)

    @property
    def route(self):
        return self.routes[0]

    @property
    def label(self):
        return self.labels[0]

    def point(self, side):
        return self.origin if side == "start" else self.dest

    def find(self, prefs):
        return find_route(self.net, self.district, self.origin, self.dest, prefs,
                          self.start_access, self.end_access)


def place_name(net, rng, access):
    """A place name for the query: the nearest station's name plus a POI word."""
    nearest = min(access.flat, key=lambda s: (access.flat[s], s))
    return net.names[nearest] + rng.choice(POI_SUFFIXES)


def prompt_json(case, suffix):
    net, rng, district, origin, dest = case.net, case.rng, case.district, case.origin, case.dest
    query = QUERY.format(origin=place_name(net, rng, case.start_access),
                         destination=place_name(net, rng, case.end_access)) + suffix
    return dumps({"query": query,
                  "start": "%.6f,%.6f" % origin,
                  "end": "%.6f,%.6f" % dest,
                  "city": district.city.name})


# ---------------------------------------------------------------------------
# Prediction helpers shared by the scenario builders
# ---------------------------------------------------------------------------


def legs_of(sequence):
    legs = [[]]
    for item in sequence:
        if item == TRANSFER:
            legs.append([])
        else:
            legs[-1].append(item)
    return legs


def join_legs(legs):
    seq = []
    for k, leg in enumerate(legs):
        if k:
            seq.append(TRANSFER)
        seq.extend(leg)
    return seq


def stop_index(net):
    """stop id text -> stop index (built once; ids are 'bus-' + ID_BASE + index)."""
    if net.index_of is None:
        net.index_of = {sid: i for i, sid in enumerate(net.ids)}
    return net.index_of


def alt_route(case, prefs=None):
    """A different but valid route for the same trip (label lines avoided)."""
    prefs = prefs or Prefs()
    for amount in (8.0, 30.0):
        route = case.find(prefs.penalised(case.route.line_ids(case.net), amount))
        if route is not None and not same_stations(route, case.route):
            return route
    return None


def with_route(case, route, use_names=False):
    return route_json(case.net, route, case.rng, use_names=use_names)


def extended_route(case, side, min_km, max_km=float("inf")):
    """The label route with its first leg started earlier (or last leg ended
    later) on the same line, so its end station lies min_km..max_km away."""
    net, route = case.net, case.route
    legs = list(route.legs)
    point = case.point(side)
    k = 0 if side == "start" else len(legs) - 1
    ld_id, i, j = legs[k]
    stops = net.linedirs[ld_id].stops
    positions = range(i - 1, -1, -1) if side == "start" else range(j + 1, len(stops))
    for p in positions:
        if min_km < net.dist_to(stops[p], point) < max_km:
            legs[k] = (ld_id, p, j) if side == "start" else (ld_id, i, p)
            return make_route(net, case.origin, case.dest, legs, route.start.mode, route.end.mode)
    return None


def far_segment_route(case, side, min_km):
    """Any three-stop ride whose start (or end) is more than min_km away."""
    net, point = case.net, case.point(side)
    ranked = sorted(case.district.stops, key=lambda s: (-net.dist_to(s, point), s))
    for s in ranked:
        if net.dist_to(s, point) <= min_km:
            return None
        for ld_id, pos in net.boardings[s]:
            n = len(net.linedirs[ld_id].stops)
            if side == "start" and pos + 2 < n:
                legs = [(ld_id, pos, pos + 2)]
            elif side == "end" and n - 1 - pos >= 2:
                # ride the opposite direction (ld_id ^ 1) so the trip ends at s
                end = n - 1 - pos
                legs = [(ld_id ^ 1, end - 2, end)]
            else:
                continue
            return make_route(net, case.origin, case.dest, legs, ACCESS_WALK, ACCESS_WALK)
    return None


def ungrounded(case, mode):
    """A reachable prediction whose start or end station fails grounding for `mode`."""
    limit = GROUND_KM[mode]
    for side in ("start", "end"):
        route = extended_route(case, side, limit + 0.2) or far_segment_route(case, side, limit + 0.2)
        if route is None:
            continue
        pred = with_route(case, route)
        key = side + "_transfer_mode"
        pred[key] = fmt_mode(case.rng, mode) or MODE_WALK
        # keep the stated access distance plausible so only grounding fails
        station = route.leg_stops[0][0] if side == "start" else route.leg_stops[-1][-1]
        d = case.net.dist_to(station, case.point(side))
        pred[side + "_transfer_distance"] = "%.1f%s" % (d * 1.2, UNIT_KM)
        return pred
    return None


# ---------------------------------------------------------------------------
# Number perturbations (checked against the evaluator's reading)
# ---------------------------------------------------------------------------


def distance_spellings(km):
    return ["%.1f%s" % (km, UNIT_KM), "%s%.1f%s" % (ABOUT, km, UNIT_KM), "%.1fkm" % km,
            "%.2f km" % km, "%d%s" % (int(round(km * 1000)), UNIT_M), "%.2f" % km]


def time_spellings(minutes):
    m = int(round(minutes))
    out = ["%d%s" % (m, UNIT_MIN), "%s%d%s" % (ABOUT, m, UNIT_MIN), "%d" % m]
    if m >= 60:
        out.append("%d%s%d%s" % (m // 60, UNIT_HOUR, m % 60, UNIT_MIN))
    return out


def fare_spellings(fare):
    return ["%g" % fare, "%.1f" % fare, "%g%s" % (fare, UNIT_YUAN)]


def pick_spelling(rng, spellings, parse, label_text, tolerance, want_accurate):
    """A spelling that differs from the label text and is (in)accurate as wanted."""
    label_value = parse(label_text)
    options = [s for s in spellings if s != label_text
               and within(parse(s), label_value, tolerance) == want_accurate]
    return rng.choice(options) if options else None


def set_numbers(case, pred, factors, want_accurate):
    """Rewrite distance/time/fare of pred from scaled label values.

    `factors` maps field -> (multiplier, addend) applied to the label value as
    the evaluator reads it; fields not listed keep the label's text.
    """
    fields = {"total_distance": (parse_km, distance_spellings, TOL_DISTANCE),
              "total_time": (parse_minutes, time_spellings, TOL_TIME),
              "total_fare": (parse_fare, fare_spellings, TOL_FARE)}
    for field, (mul, add) in sorted(factors.items()):
        parse, spell, tol = fields[field]
        value = parse(case.label[field]) * mul + add
        if field == "total_fare":
            value = round(value * 2) / 2
        text = pick_spelling(case.rng, spell(value), parse, case.label[field], tol, want_accurate)
        if text is None:
            return None
        pred[field] = text
    return pred
