"""The scenario builders of the demo rows: (case) -> prediction dict, raw text
or None (retry), one function per path of the evaluation funnel, and the
tables that fix which row exercises which path (row i of a file uses entry
i % len(table)).
"""

import copy
import re

from common import SUBWAY_MARKERS, TRANSFER, within
from common import parse_distance_km as parse_km
from common import parse_fare_cny as parse_fare
from common import parse_time_minutes as parse_minutes
from common import strip_line_suffix as strip_suffix
from transitlm.networks.router import (
    ACCESS_BIKE, ACCESS_TAXI, ACCESS_WALK, KIND_BUS, KIND_METRO, MODE_BIKE, MODE_TAXI,
    MODE_WALK, UNIT_HOUR, UNIT_KM, UNIT_M, UNIT_MIN, Prefs, dumps, make_route, prefs_for_req,
    same_stations)
from transitlm.networks.demo.cases import (
    alt_route, extended_route, join_legs, legs_of, match_station, set_numbers, stop_index,
    ungrounded, with_route)
from transitlm.networks.demo.network import (
    DP_SLACK_KM, GROUND_KM, LONG_TRIP_KM, METRO_PREFIX, MISSING_LINE, MODE_DIDI, NAME_CHARS,
    SHORT_TRIP_KM, TOL_DISTANCE, TOL_TIME, TOL_TRANSFER_KM, unknown_id)

# ---------------------------------------------------------------------------
# Scenario builders: (case) -> prediction dict, raw text, or None (retry)
# ---------------------------------------------------------------------------


def sc_exact(case):
    return copy.deepcopy(case.label)


def sc_exact_compact(case):
    return dumps(case.label, compact=True)


def sc_exact_walk_transfer(case):
    return copy.deepcopy(case.label) if "walk" in case.route.transfer_kinds else None


def sc_exact_shared_transfer(case):
    return copy.deepcopy(case.label) if "shared" in case.route.transfer_kinds else None


def sc_near_numbers(case):
    factors = {"total_distance": (1.0 + case.rng.choice((-0.06, -0.03, 0.04, 0.07)), 0.0),
               "total_time": (1.0, case.rng.choice((-2.0, 2.0, 3.0))),
               "total_fare": (1.0, 0.0)}
    return set_numbers(case, copy.deepcopy(case.label), factors, True)


def short_trip(builder):
    builder.trip_km = SHORT_TRIP_KM
    return builder


@short_trip
def sc_near_by_absolute(case):
    """Off by more than 10 % but inside the absolute tolerances (short trip)."""
    label = case.label
    if not (1.0 < parse_km(label["total_distance"]) < 4.0
            and 10 < parse_minutes(label["total_time"]) < 40
            and 0 < parse_fare(label["total_fare"]) < 9):
        return None
    factors = {"total_distance": (1.0, 0.45), "total_time": (1.0, 4.0), "total_fare": (1.0, 1.0)}
    pred = set_numbers(case, copy.deepcopy(label), factors, True)
    if pred is None or within(parse_km(pred["total_distance"]), parse_km(label["total_distance"]), 0.0):
        return None
    return pred


def sc_numbers_as_json_numbers(case):
    pred = copy.deepcopy(case.label)
    pred["total_distance"] = round(case.route.km, 1)
    pred["total_time"] = int(round(case.route.minutes))
    pred["total_fare"] = case.route.fare
    ok = (within(pred["total_distance"], parse_km(case.label["total_distance"]), TOL_DISTANCE)
          and within(pred["total_time"], parse_minutes(case.label["total_time"]), TOL_TIME))
    return pred if ok else None


def sc_distance_off(case):
    return set_numbers(case, copy.deepcopy(case.label), {"total_distance": (1.35, 0.6)}, False)


def sc_time_off(case):
    return set_numbers(case, copy.deepcopy(case.label), {"total_time": (1.45, 6.0)}, False)


def sc_fare_off(case):
    return set_numbers(case, copy.deepcopy(case.label), {"total_fare": (1.0, 3.0)}, False)


def long_trip(builder):
    builder.trip_km = LONG_TRIP_KM
    return builder


@long_trip
def sc_hours_quirk(case):
    """Label '1小时7分钟' is read as 60 min; the same time in minutes is then off."""
    label_time = case.label["total_time"]
    m = re.match(r"(\d+)%s(\d+)%s$" % (UNIT_HOUR, UNIT_MIN), label_time)
    if not m or int(m.group(2)) < 6:
        return None
    pred = copy.deepcopy(case.label)
    pred["total_time"] = "%d%s" % (int(m.group(1)) * 60 + int(m.group(2)), UNIT_MIN)
    if within(parse_minutes(pred["total_time"]), parse_minutes(label_time), TOL_TIME):
        return None
    return pred


def sc_meter_kilometre_quirk(case):
    """'1公里200米' reads as 0.2 km, so a right distance written so is inaccurate."""
    km = parse_km(case.label["total_distance"])
    whole, metres = int(km), int(round((km - int(km)) * 1000))
    if km < 2 or metres < 100:
        return None
    pred = copy.deepcopy(case.label)
    pred["total_distance"] = "%d%s%d%s" % (whole, UNIT_KM, metres, UNIT_M)
    return pred


def stated_access_km(case, side):
    return parse_km(case.label[side + "_transfer_distance"])


def straight_access_km(case, route, side):
    station = route.leg_stops[0][0] if side == "start" else route.leg_stops[-1][-1]
    return case.net.dist_to(station, case.point(side))


def plausible(td, d):
    return not (td > 0 and (td < d - DP_SLACK_KM or td > 3 * d + DP_SLACK_KM))


def sc_transfer_distance_off(case):
    """Access distance off by > 0.5 km while still plausible."""
    for side in ("start", "end"):
        label_td = stated_access_km(case, side)
        d = straight_access_km(case, case.route, side)
        td = label_td + TOL_TRANSFER_KM + 0.3
        if label_td > 0 and plausible(td, d):
            pred = copy.deepcopy(case.label)
            pred[side + "_transfer_distance"] = "%.1f%s" % (td, UNIT_KM)
            return pred
    return None


def sc_transfer_distance_units(case):
    """Access distances respelled (米 <-> 公里) within 0.5 km."""
    pred = copy.deepcopy(case.label)
    changed = False
    for side in ("start", "end"):
        td = stated_access_km(case, side)
        if td <= 0:
            continue
        text = "%d%s" % (int(round(td * 1000 + 60)), UNIT_M) if td >= 1 else "%.1f%s" % (td + 0.1, UNIT_KM)
        pred[side + "_transfer_distance"] = text
        changed = True
    return pred if changed else None


def sc_broken_hop(case):
    """Drop a middle stop so two consecutive stations are not linked."""
    net, ids = case.net, stop_index(case.net)
    pred = copy.deepcopy(case.label)
    legs = legs_of(pred["station_sequence"])
    for leg in sorted(legs, key=len, reverse=True):
        if len(leg) < 3:
            break
        k = len(leg) // 2
        if not net.linked(ids[leg[k - 1]], ids[leg[k + 1]]):
            del leg[k]
            pred["station_sequence"] = join_legs(legs)
            return pred
    return None


def sc_drop_transfer_stop(case):
    """Leave out the last stop before a transfer: the hop across it breaks."""
    net, ids = case.net, stop_index(case.net)
    pred = copy.deepcopy(case.label)
    legs = legs_of(pred["station_sequence"])
    if len(legs) < 2 or len(legs[0]) < 3:
        return None
    legs[0].pop()
    if net.linked(ids[legs[0][-1]], ids[legs[1][0]]):
        return None
    pred["station_sequence"] = join_legs(legs)
    return pred


def sc_no_transfer_markers(case):
    """The same stations without 【换乘】: still connected, same station set."""
    if len(case.route.legs) < 2:
        return None
    pred = copy.deepcopy(case.label)
    pred["station_sequence"] = [s for s in pred["station_sequence"] if s != TRANSFER]
    return pred


def sc_unknown_first(case):
    pred = copy.deepcopy(case.label)
    pred["station_sequence"][0] = unknown_id(case.net, case.rng)
    return pred


def sc_unknown_middle(case):
    pred = copy.deepcopy(case.label)
    seq = pred["station_sequence"]
    inner = [k for k in range(1, len(seq) - 1) if seq[k] != TRANSFER]
    if not inner:
        return None
    seq[case.rng.choice(inner)] = unknown_id(case.net, case.rng)
    return pred


def sc_empty_route(case):
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = []
    pred["station_sequence"] = []
    return pred


def sc_one_station(case):
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = pred["line_sequence"][:1]
    pred["station_sequence"] = pred["station_sequence"][:1]
    return pred


def sc_ground_walk(case):
    return ungrounded(case, ACCESS_WALK)


def sc_ground_bike(case):
    return ungrounded(case, ACCESS_BIKE)


def sc_ground_taxi(case):
    return ungrounded(case, ACCESS_TAXI)


def sc_ground_bike_ok(case):
    """Start station 3-5 km away: fails as a walk but grounds as a bike ride."""
    route = extended_route(case, "start", GROUND_KM[ACCESS_WALK] + 0.2, GROUND_KM[ACCESS_BIKE] - 0.2)
    if route is None:
        return None
    pred = with_route(case, route)
    pred["start_transfer_mode"] = MODE_BIKE
    d = straight_access_km(case, route, "start")
    pred["start_transfer_distance"] = "%.1f%s" % (d * 1.25, UNIT_KM)
    return pred


def sc_implausible_short(case):
    """Stated access distance shorter than the straight line minus 0.5 km."""
    for side in ("start", "end"):
        d = straight_access_km(case, case.route, side)
        if d >= 0.9:
            pred = copy.deepcopy(case.label)
            pred[side + "_transfer_distance"] = "%d%s" % (int((d - 0.5) * 1000 * 0.6), UNIT_M)
            return pred
    return None


def sc_implausible_long(case):
    """Stated access distance longer than three times the straight line + 0.5 km."""
    side = case.rng.choice(("start", "end"))
    d = straight_access_km(case, case.route, side)
    pred = copy.deepcopy(case.label)
    pred[side + "_transfer_distance"] = "%.1f%s" % (3 * d + 1.5, UNIT_KM)
    return pred


def other_line_names(case, count):
    taken = set(case.label["line_sequence"])
    pool = [case.net.linedirs[ld_id].name for line in case.district.lines
            for ld_id in (2 * line.line_id, 2 * line.line_id + 1)]
    pool = [name for name in pool if name not in taken]
    case.rng.shuffle(pool)
    return pool[:count]


def sc_wrong_lines(case):
    """Right stations, every line name wrong: line IoU 0, still an exact match."""
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = other_line_names(case, len(pred["line_sequence"]))
    return pred


def sc_partly_wrong_lines(case):
    if len(case.route.legs) < 2:
        return None
    pred = copy.deepcopy(case.label)
    pred["line_sequence"][-1] = other_line_names(case, 1)[0]
    return pred


def sc_short_line_names(case):
    """Names without the '(甲--乙)' suffix: raw line IoU drops to 0."""
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = [strip_suffix(n) for n in pred["line_sequence"]]
    return pred


def sc_reverse_direction_names(case):
    """The other direction's name of each line (same stations)."""
    net = case.net
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = [net.linedirs[ld ^ 1].name for ld, _, _ in case.route.legs]
    return pred


def sc_mode_mismatch(case):
    pred = copy.deepcopy(case.label)
    label_mode = pred["start_transfer_mode"] or MODE_WALK
    pred["start_transfer_mode"] = MODE_BIKE if label_mode != MODE_BIKE else MODE_WALK
    return pred


def sc_mode_empty_equals_walk(case):
    """'' and 步行 are the same mode; the row must still match exactly."""
    pred = copy.deepcopy(case.label)
    for side in ("start", "end"):
        key = side + "_transfer_mode"
        if pred[key] in ("", MODE_WALK):
            pred[key] = MODE_WALK if pred[key] == "" else ""
            return pred
    return None


def sc_alternative(case):
    route = alt_route(case)
    return with_route(case, route) if route is not None else None


def sc_better_claim(case):
    """Right stations, optimistic numbers: the expert score comes out better."""
    fare = parse_fare(case.label["total_fare"])
    if fare < 2:
        return None
    pred = set_numbers(case, copy.deepcopy(case.label), {"total_time": (0.6, -3.0)}, False)
    if pred is not None:
        pred["total_fare"] = "%g" % (fare - 1)
    return pred


def sc_unreadable_truncated(case):
    text = dumps(case.label)
    return text[: len(text) * 2 // 3]


def sc_unreadable_python_repr(case):
    # A Python dict repr (single quotes) is a common LLM slip; it is not JSON.
    return repr(case.label)


def sc_list_value(case):
    pred = copy.deepcopy(case.label)
    pred["total_time"] = [pred["total_time"]]
    return pred


def sc_null_values(case):
    """JSON nulls read as empty strings: a null walking mode still matches."""
    pred = copy.deepcopy(case.label)
    if pred["end_transfer_mode"] not in ("", MODE_WALK):
        return None
    pred["end_transfer_mode"] = None
    pred["end_transfer_distance"] = None
    pred["total_fare"] = None
    return pred


# -- benchmark 2: preference compliance ---------------------------------------


def transfers(route_dict):
    return max(0, len(route_dict["line_sequence"]) - 1)


def has_subway(route_dict):
    return any(marker in name for name in route_dict["line_sequence"] for marker in SUBWAY_MARKERS)


def extra_leg_route(case):
    """The label route plus one more ride on another line from its last stop."""
    net, route = case.net, case.route
    last = route.leg_stops[-1][-1]
    last_line = route.line_ids(net)[-1]
    for stop in [last] + sorted(net.link_set[last]):
        for ld_id, pos in net.boardings[stop]:
            ld = net.linedirs[ld_id]
            if ld.line.line_id == last_line or ld.kind in prefs_for_req(case.req_type).banned:
                continue
            legs = list(route.legs) + [(ld_id, pos, min(pos + 2, len(ld.stops) - 1))]
            return make_route(net, case.origin, case.dest, legs, route.start.mode, ACCESS_WALK)
    return None


def sc_violate_preference(case):
    pred = preference_breaking_route(case)
    if pred is None or complies(case.req_type, pred, case.label):
        return None
    return pred


def preference_breaking_route(case):
    """A prediction that ignores the row's preference: more transfers (2), a
    subway line (5), no subway (7), or a slower trip (8)."""
    req, label = case.req_type, case.label
    if req == 2:
        route = alt_route(case)
        if route is None or len(route.legs) <= len(case.route.legs):
            route = extra_leg_route(case)
        return with_route(case, route) if route is not None else None
    if req == 5:
        route = case.find(prefs_for_req(7))
        return with_route(case, route) if route is not None and KIND_METRO in route.kinds(case.net) else None
    if req == 7:
        route = case.find(prefs_for_req(5))
        return with_route(case, route) if route is not None else None
    if req == 8:
        route = alt_route(case)
        if route is not None and route.minutes > 1.2 * parse_minutes(label["total_time"]):
            return with_route(case, route)
        return set_numbers(case, copy.deepcopy(label), {"total_time": (1.5, 5.0)}, False)
    return None


def sc_alternative_compliant(case):
    route = alt_route(case, prefs_for_req(case.req_type))
    if route is None:
        return None
    pred = with_route(case, route)
    return pred if complies(case.req_type, pred, case.label) else None


def sc_bus_named_after_subway_stop(case):
    """Quirk: a bus line ending at 'X地铁站' has 地铁 in its name, so even the
    label of a no-subway request fails the evaluator's compliance check."""
    if case.req_type != 5 or complies(5, case.label, case.label):
        return None
    return copy.deepcopy(case.label)


# Scenarios whose label deliberately fails its own preference check, and
# those whose prediction does; every other benchmark-2 prediction complies.
NONCOMPLIANT_LABEL_SCENARIOS = (sc_bus_named_after_subway_stop,)
NONCOMPLIANT_PREDICTION_SCENARIOS = (sc_bus_named_after_subway_stop, sc_violate_preference)


def unintended_violation(builder, req_type, pred, label):
    """True for a readable prediction that breaks the preference by accident."""
    if builder in NONCOMPLIANT_PREDICTION_SCENARIOS or not isinstance(pred, dict):
        return False
    if not isinstance(pred.get("total_time"), (str, int, float)):
        return False      # an error row: never evaluated for compliance
    return not complies(req_type, pred, label)


def complies(req, pred, label):
    """The evaluator's preference check (protocol.md §9)."""
    if req == 2:
        return transfers(pred) <= transfers(label)
    if req == 5:
        return not has_subway(pred)
    if req == 7:
        return has_subway(pred)
    if req == 8:
        label_time = parse_minutes(label["total_time"])
        return label_time <= 0 or parse_minutes(pred["total_time"]) <= 1.1 * label_time
    return True


# -- benchmark 3: several routes ------------------------------------------------


def broken_copy(case, label):
    """A copy of `label` with one unlinked hop (or None if none can be made)."""
    sub = copy.copy(case)
    sub.labels = [label]
    return sc_broken_hop(sub) or sc_unknown_middle(sub)


def b3(*routes, keys=("first", "second", "third")):
    return {k: copy.deepcopy(r) for k, r in zip(keys, routes) if r is not None}


def sc3_exact(case):
    return b3(*case.labels)


def sc3_exact_compact(case):
    return dumps(b3(*case.labels), compact=True)


def sc3_reordered(case):
    l1, l2, l3 = case.labels
    return b3(l1, l3, l2)


def sc3_hit_second(case):
    l1, l2, l3 = case.labels
    return b3(l2, l1, l3)


def sc3_hit_third(case):
    l1, l2, l3 = case.labels
    return b3(l2, l3, l1)


def sc3_first_unreachable_second_right(case):
    l1, l2, _ = case.labels
    broken = broken_copy(case, l1)
    return b3(broken, l1, l2) if broken else None


def sc3_second_unreachable_third_right(case):
    l1, l2, _ = case.labels
    broken = broken_copy(case, l1)
    return b3(l2, broken, l1) if broken else None


def sc3_third_unreachable(case):
    l1, l2, l3 = case.labels
    broken = broken_copy(case, l3)
    return b3(l1, l2, broken) if broken else None


def sc3_only_first(case):
    return b3(case.labels[0])


def sc3_first_and_second(case):
    return b3(*case.labels[:2])


def sc3_no_first(case):
    l1, l2, _ = case.labels
    return b3(l1, l2, keys=("second", "third"))


def sc3_empty_object(case):
    return {}


def sc3_second_empty_dict(case):
    """An empty `second` object counts as no second route."""
    l1, _, l3 = case.labels
    return {"first": copy.deepcopy(l1), "second": {}, "third": copy.deepcopy(l3)}


def sc3_identical(case):
    return b3(case.labels[0], case.labels[0], case.labels[0])


def sc3_empty_signature(case):
    l1, l2, _ = case.labels
    blank = {"line_sequence": [], "station_sequence": [], "total_distance": "", "total_time": "",
             "total_fare": "", "start_transfer_mode": "", "end_transfer_mode": "",
             "start_transfer_distance": "", "end_transfer_distance": ""}
    return b3(l1, l2, blank)


def sc3_unrelated(case):
    """Three routes none of which is the label's first."""
    used = [lid for r in case.routes for lid in r.line_ids(case.net)]
    route = case.find(Prefs().penalised(used, 30.0))
    if route is None or any(same_stations(route, r) for r in case.routes):
        return None
    _, l2, l3 = case.labels
    return b3(with_route(case, route), l2, l3)


def first_variant(builder):
    """Benchmark 3 row whose `first` is a benchmark-1 variant of the label."""
    def build(case):
        first = builder(case)
        if first is None or isinstance(first, str):
            return first
        return b3(first, case.labels[1], case.labels[2])
    build.__name__ = builder.__name__
    return build


# -- general LLM: names instead of stop ids --------------------------------------


def leg_names(case, route=None):
    route = route or case.route
    return [[case.net.names[s] for s in leg] for leg in route.leg_stops]


def board_alight(legs):
    return [name for leg in legs for name in (leg[0], leg[-1])]


def short_names(case, route=None):
    route = route or case.route
    return [strip_suffix(case.net.linedirs[ld].name) for ld, _, _ in route.legs]


def sg_exact(case):
    if len(case.route.legs) < 2:
        return None
    return copy.deepcopy(case.label)


def sg_board_alight_short(case):
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = short_names(case)
    pred["station_sequence"] = board_alight(leg_names(case))
    return dumps(pred, compact=True)


def sg_station_name_field(case):
    """Boarding/alighting names in `station_name` (it wins over station_sequence)."""
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = short_names(case)
    pred["station_name"] = board_alight(leg_names(case))
    return pred


def sg_station_name_with_transfer(case):
    """Full names with 【换乘】 in `station_name`; station_sequence left empty."""
    pred = copy.deepcopy(case.label)
    pred["station_name"] = pred["station_sequence"]
    pred["station_sequence"] = []
    return pred if len(case.route.legs) > 1 else None


def sg_bus_leg(case):
    if KIND_BUS not in case.route.kinds(case.net):
        return None
    return sg_board_alight_short(case)


def sg_reverse_direction_short(case):
    """Short name of a line ridden against its listed direction: the service
    resolves the first direction in file order, whose stops are the same."""
    if not any(ld % 2 for ld, _, _ in case.route.legs):
        return None
    return sg_board_alight_short(case)


def resolve_line(net, city_code, query):
    """The line direction the route-eval service picks for a line query."""
    query = query.strip()
    exact = net.line_by_name.get((city_code, query)) or net.line_by_short.get((city_code, query))
    if exact is not None:
        return exact
    best = None
    for ld in net.city_linedirs.get(city_code, ()):
        if (query in ld.name or query in ld.short) and (best is None or len(ld.short) < len(best.short)):
            best = ld
    return best


def contained_query(net, ld):
    """A fragment of the line's name ('977' for 977路(..), '2号线' for 地铁2号线(..))
    that the service resolves by containment to the same physical line."""
    short = ld.short
    fragment = short[:-1] if ld.kind == KIND_BUS else short[len(METRO_PREFIX):]
    found = resolve_line(net, ld.line.city.code, fragment)
    if found is None or found.line is not ld.line or fragment == short:
        return None
    return fragment


def sg_contained_line_names(case):
    """Line names shortened further; matched by containment, shortest first."""
    pred = sg_station_name_field(case)
    queries = [contained_query(case.net, case.net.linedirs[ld]) for ld, _, _ in case.route.legs]
    if None in queries:
        return None
    pred["line_sequence"] = queries
    return pred


def fuzzy_variant(case, name, ld, want_match):
    """`name` with one character changed that does / does not still resolve."""
    net = case.net
    target = match_station(net, ld, name)
    positions = [len(name) - 1] if want_match else [1, 0]
    for pos in positions:
        if pos >= len(name):
            continue
        for ch in NAME_CHARS:
            if ch == name[pos]:
                continue
            query = name[:pos] + ch + name[pos + 1:]
            got = match_station(net, ld, query)
            if want_match and got == target and query not in {net.names[s] for s in ld.stops}:
                return query
            if not want_match and got is None:
                return query
    return None


def resolved_line(case, ld_id):
    """The direction the route-eval service picks for this line's short name."""
    ld = case.net.linedirs[ld_id]
    return resolve_line(case.net, ld.line.city.code, strip_suffix(ld.name))


def sg_fuzzy(case, want_match):
    names = board_alight(leg_names(case))
    ld = resolved_line(case, case.route.legs[0][0])
    query = fuzzy_variant(case, names[0], ld, want_match)
    if query is None:
        return None
    names[0] = query
    pred = copy.deepcopy(case.label)
    pred["line_sequence"] = short_names(case)
    pred["station_sequence"] = names
    return pred


def sg_fuzzy_ok(case):
    return sg_fuzzy(case, True)


def sg_fuzzy_fail(case):
    return sg_fuzzy(case, False)


def sg_count_mismatch_full_single_leg(case):
    """A full one-leg list is not trimmed (quirk): names != 2 x lines."""
    if len(case.route.legs) != 1 or len(case.route.leg_stops[0]) < 3:
        return None
    return copy.deepcopy(case.label)


def sg_count_mismatch_dropped(case):
    if len(case.route.legs) < 2:
        return None
    pred = sg_station_name_field(case)
    del pred["station_name"][1]
    return pred


def sg_unknown_line(case):
    pred = sg_station_name_field(case)
    pred["line_sequence"][0] = MISSING_LINE
    return pred


def sg_empty_lines(case):
    pred = sg_station_name_field(case)
    pred["line_sequence"] = []
    return pred


def sg_same_board_alight(case):
    pred = sg_station_name_field(case)
    pred["station_name"][1] = pred["station_name"][0]
    return pred


def sg_transfer_not_linked(case):
    """Alight one stop early before a transfer, so the legs do not connect."""
    net, route = case.net, case.route
    if len(route.legs) < 2:
        return None
    for early in route.leg_stops[0][-2:0:-1]:
        if not net.linked(early, route.leg_stops[1][0]):
            pred = sg_station_name_field(case)
            pred["station_name"][1] = net.names[early]
            return pred
    return None


def sg_ungrounded(case, mode, mode_text):
    """Board the first line at its stop farthest from the origin."""
    net, route = case.net, case.route
    ld = net.linedirs[route.legs[0][0]]
    alight = route.leg_stops[0][-1]
    far = max((s for s in ld.stops if s != alight and net.names[s] != net.names[alight]),
              key=lambda s: (net.dist_to(s, case.origin), -s))
    d = net.dist_to(far, case.origin)
    if d <= GROUND_KM[mode] + 0.2 or (mode_text == MODE_DIDI and d >= GROUND_KM[ACCESS_TAXI]):
        return None
    pred = sg_station_name_field(case)
    pred["station_name"][0] = net.names[far]
    pred["start_transfer_mode"] = mode_text
    return pred


def sg_ground_walk(case):
    return sg_ungrounded(case, ACCESS_WALK, MODE_WALK)


def sg_ground_bike(case):
    return sg_ungrounded(case, ACCESS_BIKE, MODE_BIKE)


def sg_ground_taxi(case):
    return sg_ungrounded(case, ACCESS_TAXI, MODE_TAXI)


def sg_ground_didi(case):
    """滴滴 is a taxi for the stop-id benchmarks but walks (3 km) in the service."""
    return sg_ungrounded(case, ACCESS_WALK, MODE_DIDI)


def sg_alternative(case):
    route = alt_route(case)
    if route is None:
        return None
    pred = with_route(case, route, use_names=True)
    pred["line_sequence"] = short_names(case, route)
    pred["station_sequence"] = board_alight(leg_names(case, route))
    return pred


def sg_no_response(case):
    return ""


def general_variant(builder):
    """A stop-id benchmark variant applied to a multi-leg general-LLM label."""
    def build(case):
        if len(case.route.legs) < 2:
            return None
        return builder(case)
    build.__name__ = builder.__name__
    return build


# ---------------------------------------------------------------------------
# Scenario tables: the default demo has one row per entry, scale runs cycle.
# ---------------------------------------------------------------------------

B1_SCENARIOS = (
    sc_exact, sc_exact_compact, sc_exact_walk_transfer, sc_exact_shared_transfer,
    sc_near_numbers, sc_near_by_absolute, sc_numbers_as_json_numbers,
    sc_distance_off, sc_time_off, sc_fare_off, sc_hours_quirk, sc_meter_kilometre_quirk,
    sc_transfer_distance_off, sc_transfer_distance_units,
    sc_broken_hop, sc_drop_transfer_stop, sc_no_transfer_markers,
    sc_unknown_first, sc_unknown_middle, sc_empty_route, sc_one_station,
    sc_ground_walk, sc_ground_bike, sc_ground_taxi, sc_ground_bike_ok,
    sc_implausible_short, sc_implausible_long,
    sc_wrong_lines, sc_partly_wrong_lines, sc_short_line_names, sc_reverse_direction_names,
    sc_mode_mismatch, sc_mode_empty_equals_walk, sc_alternative, sc_better_claim,
    sc_unreadable_truncated, sc_list_value, sc_null_values,
)

B2_SCENARIOS = (
    (sc_exact, 2), (sc_exact, 5), (sc_exact, 7), (sc_exact, 8),
    (sc_violate_preference, 2), (sc_violate_preference, 2),
    (sc_violate_preference, 5), (sc_violate_preference, 5),
    (sc_violate_preference, 7), (sc_violate_preference, 7),
    (sc_violate_preference, 8), (sc_violate_preference, 8),
    (sc_alternative_compliant, 2), (sc_alternative_compliant, 5),
    (sc_alternative_compliant, 7), (sc_near_numbers, 8),
    (sc_distance_off, 5), (sc_time_off, 7), (sc_fare_off, 8), (sc_transfer_distance_off, 2),
    (sc_broken_hop, 5), (sc_unknown_first, 7), (sc_unknown_middle, 8),
    (sc_empty_route, 2), (sc_one_station, 8),
    (sc_ground_walk, 5), (sc_ground_bike, 7), (sc_ground_taxi, 2),
    (sc_implausible_short, 2), (sc_implausible_long, 5),
    (sc_wrong_lines, 7), (sc_mode_mismatch, 8), (sc_alternative, 2),
    (sc_unreadable_python_repr, 5), (sc_list_value, 7), (sc_exact, 0),
    (sc_bus_named_after_subway_stop, 5),
)

B3_SCENARIOS = (
    sc3_exact, sc3_exact_compact, sc3_reordered, sc3_identical,
    sc3_hit_second, sc3_hit_second, sc3_hit_third, sc3_hit_third,
    sc3_first_unreachable_second_right, sc3_second_unreachable_third_right, sc3_third_unreachable,
    sc3_only_first, sc3_first_and_second, sc3_no_first, sc3_second_empty_dict,
    sc3_empty_signature, sc3_unrelated, sc3_empty_object, sc_unreadable_truncated,
    first_variant(sc_near_numbers), first_variant(sc_time_off), first_variant(sc_distance_off),
    first_variant(sc_transfer_distance_off), first_variant(sc_ground_walk),
    first_variant(sc_ground_bike), first_variant(sc_ground_taxi),
    first_variant(sc_implausible_short), first_variant(sc_implausible_long),
    first_variant(sc_mode_mismatch), first_variant(sc_unknown_first),
    first_variant(sc_empty_route), first_variant(sc_one_station), first_variant(sc_wrong_lines),
)

GENERAL_SCENARIOS = (
    sg_exact, sg_exact, general_variant(sg_board_alight_short),
    general_variant(sg_station_name_field), sg_station_name_with_transfer,
    general_variant(sg_bus_leg), general_variant(sg_reverse_direction_short),
    general_variant(sg_contained_line_names),
    sg_fuzzy_ok, sg_fuzzy_ok, sg_fuzzy_fail,
    sg_count_mismatch_full_single_leg, sg_count_mismatch_dropped,
    sg_unknown_line, sg_empty_lines, sg_same_board_alight, sg_transfer_not_linked,
    sg_ground_walk, sg_ground_bike, sg_ground_taxi, sg_ground_didi,
    sg_alternative, sg_no_response, sg_no_response,
    general_variant(sc_near_numbers), general_variant(sc_distance_off),
    general_variant(sc_time_off), general_variant(sc_fare_off),
    general_variant(sc_transfer_distance_off), general_variant(sc_mode_mismatch),
    general_variant(sc_mode_empty_equals_walk), general_variant(sc_implausible_long),
    general_variant(sc_unreadable_truncated), general_variant(sc_list_value),
)
