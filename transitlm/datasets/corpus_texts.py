"""The pre-training corpus's texts (issue 45): a trip session, a line direction,
a station -- each a text and the JSON record of the facts the text states.

- ``session_entry``: a query header (city, origin and destination coordinates,
  the nearest station's name on each side) and up to five candidate routes,
  the best first.  Each route: its access leg (mode, distance, time), each
  ride (line, boarding and alighting stations by name, id and coordinates,
  stops, distance, ride time, wait), its transfers, the egress leg, the
  totals (distance, time, fare, transfers), the route tag and the full
  station-id list.  The record's ``routes`` are the routes in the label
  schema (``router.route_json(..., tag=True)``, access distances made
  plausible as the builder's labels are), so a session's first route is the
  label the builder writes for that trip; ``itineraries`` holds what the text
  states beyond the label (per route: access, rides, transfers, egress).
- ``line_entries``: one per line direction (``LineDir``), in the network's
  order: name, city, kind, length, number of stops, service (first and last
  departure, mean headway, trips a day: what line_service.csv gives), fare,
  the stops in order (name and id).
- ``station_entries``: one per station, in the network's order: name, id,
  city, coordinates, the line directions serving it and the next stop on each
  (or that it is the terminus).

Numbers are formatted once, into the record; the text is written from the
record's values with ``quantity`` (the label's own strings, e.g. "约5.3公里",
"1小时5分钟", "4", written with their unit in the text's language), so text and
record agree by construction, and ``text_states_record`` checks that they do,
fact by fact (issue 45 point 3): every stop id and line name of each route, the
name and the station file's coordinates of each boarding and alighting stop,
the start and end strings, the access modes and distances, the totals.

Coordinates are written "%.6f,%.6f", as import_gtfs.py writes the station file
and as the SFT prompts write start and end.  Chinese literals are data, kept
as named constants; ``lang`` is "zh" (the default, like the release) or "en".
Standard library only; nothing here draws a random number but route_json.
"""

import math
import os
import re

from common import CYCLE, TRANSFER, WALK
from transitlm.networks import benchmark_builder as builder
from transitlm.networks import router
from transitlm.networks.router import KIND_BUS, KIND_METRO

LANGS = ("zh", "en")
DEFAULT_LANG = "zh"
MAX_CANDIDATES = 5
KINDS = ("session", "line", "station")

# ---------------------------------------------------------------------------
# Texts (data).  Each template is one fact, so the check can name what is missing.
# ---------------------------------------------------------------------------

ZH_KM, ZH_M, ZH_HOUR, ZH_MIN, ZH_YUAN, ZH_ABOUT = (router.UNIT_KM, router.UNIT_M, router.UNIT_HOUR,
                                                  router.UNIT_MIN, router.UNIT_YUAN, router.ABOUT)
TEXT = {
    "zh": {
        # session
        "city": "城市：{city}",
        "start": "起点：{point}（{place}附近）",
        "end": "终点：{point}（{place}附近）",
        "count": "候选方案：{n}个，最优在前",
        "route": "方案{k}（{tag}）：",
        "access": "- 起点{mode}{distance}，约{minutes}分钟",
        "ride": "- 乘{line}：{board}上车，{alight}下车",
        "ride_figures": "，{stops}站，{distance}，乘车{minutes}分钟，候车约{wait}分钟",
        "same_stop": "- 在{stop}同站换乘",
        "walk": "- 换乘：从{a}步行{distance}到{b}，约{minutes}分钟",
        "egress": "- 下车后{mode}{distance}到终点，约{minutes}分钟",
        "total_distance": "- 合计：全程{value}",
        "total_time": "，用时{value}",
        "total_fare": "，票价{value}",
        "transfers": "，换乘{n}次",
        "sequence": "- 站点ID：{ids}",
        "sep": "、",
        "stop": "{name}（{id}，{coord}）",
        # line
        "line": "线路：{name}",
        "kind": "类型：{kind}",
        "length": "全长：{km}公里，共{n}站",
        "service": "运营：",
        "first": "首班{time}",
        "last": "末班{time}",
        "headway": "平均每{minutes}分钟一班",
        "trips": "全天{n}班",
        "fare": "票价：{fare}",
        "stops": "站点：{stops}",
        "line_stop": "{name}（{id}）",
        # station
        "station": "站点：{name}（{id}）",
        "coord": "坐标：{coord}",
        "lines": "线路：",
        "next": "{line}，下一站{stops}",
        "terminus": "{line}，终点站",
        "no_line": "无线路经过",
        "line_sep": "；",
        "part_sep": "，",
    },
    "en": {
        "city": "City: {city}",
        "start": "Origin: {point} (near {place})",
        "end": "Destination: {point} (near {place})",
        "count": "Candidate routes: {n}, best first",
        "route": "Route {k} ({tag}):",
        "access": "- From the origin, {mode} {distance}, about {minutes} min",
        "ride": "- Take {line}: board at {board}, alight at {alight}",
        "ride_figures": ", {stops} stops, {distance}, {minutes} min on board, about {wait} min wait",
        "same_stop": "- Change lines at {stop}",
        "walk": "- Transfer: walk {distance} from {a} to {b}, about {minutes} min",
        "egress": "- To the destination, {mode} {distance}, about {minutes} min",
        "total_distance": "- Total: {value}",
        "total_time": ", {value}",
        "total_fare": ", fare {value}",
        "transfers": ", transfers: {n}",
        "sequence": "- Stop ids: {ids}",
        "sep": ", ",
        "stop": "{name} ({id}, {coord})",
        "line": "Line: {name}",
        "kind": "Kind: {kind}",
        "length": "Length: {km} km, {n} stops",
        "service": "Service: ",
        "first": "first departure {time}",
        "last": "last departure {time}",
        "headway": "every {minutes} min on average",
        "trips": "{n} trips a day",
        "fare": "Fare: {fare}",
        "stops": "Stops: {stops}",
        "line_stop": "{name} ({id})",
        "station": "Station: {name} ({id})",
        "coord": "Coordinates: {coord}",
        "lines": "Lines: ",
        "next": "{line}, next stop {stops}",
        "terminus": "{line}, terminus",
        "no_line": "no line stops here",
        "line_sep": "; ",
        "part_sep": ", ",
    },
}
KIND_TEXT = {"zh": {KIND_METRO: router.TAG_METRO, KIND_BUS: router.TAG_BUS},
             "en": {KIND_METRO: "subway", KIND_BUS: "bus"}}
MODE_TAXI, MODE_RIDE_HAILING = router.MODE_TAXI, router.MODE_RIDE_HAILING
MODE_EN = {WALK: "walk", CYCLE: "bike", MODE_TAXI: "taxi", MODE_RIDE_HAILING: "ride-hailing car"}
# The route tags route_json writes, in English.
TAG_EN = {router.TAG_METRO: "subway", router.TAG_BUS: "bus", router.TAG_MIXED: "bus and subway"}
for _base, _word in ((router.TAG_METRO, "subway"), (router.TAG_BUS, "bus")):
    TAG_EN[router.TAG_BIKE_MIX.format(base=_base)] = _word + " with a bike ride"
    TAG_EN[router.TAG_TAXI_MIX.format(base=_base)] = _word + " with a taxi ride"
FARE_TEXT = {
    "zh": {"flat": "每次乘车{fare}元", "band": "{km}公里内{fare}元", "step": "其后每{km}公里加1元",
           "zones": "分区计价，{low}至{high}元", "unknown": "未知", "by_distance": "按里程计价："},
    "en": {"flat": "{fare} per ride", "band": "{fare} up to {km} km", "step": "then 1 more per {km} km",
           "zones": "by zone, {low} to {high}", "unknown": "unknown", "by_distance": "by distance: "},
}

# The label's strings (router.fmt_km, fmt_minutes, fmt_fare): what ``quantity`` reads.
DISTANCE_RE = re.compile(r"^(%s)?(\d+(?:\.\d+)?)(%s|%s)?$" % (ZH_ABOUT, ZH_KM, ZH_M))
TIME_RE = re.compile(r"^(\d+)(?:%s(?:(\d+)%s)?|(%s))?$" % (ZH_HOUR, ZH_MIN, ZH_MIN))
FARE_RE = re.compile(r"^(\d+(?:\.\d+)?)(%s)?$" % ZH_YUAN)
CLOCK_RE = re.compile(r"^\d{1,3}:\d\d(?::\d\d)?$")
NUMBER_RE = re.compile(r"^\d+(?:\.\d+)?$")
SERVICE_KEYS = ("first_departure", "last_departure", "headway_min", "trips")


def quantity(what, value, lang):
    """A label value ("5.3", "约5.3公里", "850米"; "45", "1小时5分钟"; "4", "4.0元")
    written with its unit in ``lang``; its digits are the label's, unchanged.  A
    value in no label format is written as it is."""
    if what == "distance":
        match = DISTANCE_RE.match(value)
        if match:
            about, number, unit = match.groups()
            if lang == "zh":
                return (about or "") + number + (unit or ZH_KM)
            return ("about " if about else "") + number + (" m" if unit == ZH_M else " km")
    elif what == "time":
        match = TIME_RE.match(value)
        if match:
            first, minutes, unit_min = match.groups()
            hours = ZH_HOUR in value
            if lang == "zh":
                return value if hours else first + ZH_MIN
            if hours:
                return "%s h" % first + (" %s min" % minutes if minutes else "")
            return "%s min" % first
    elif what == "fare":
        match = FARE_RE.match(value)
        if match:
            return match.group(1) + (ZH_YUAN if lang == "zh" else "")
    return value


def mode_text(mode, lang):
    return mode if lang == "zh" else MODE_EN.get(mode, mode)


def tag_text(tag, lang):
    return tag if lang == "zh" else TAG_EN.get(tag, tag)


def coord_text(lng, lat):
    return "%.6f,%.6f" % (lng, lat)


def whole(x):
    """Round half up (Python's round() rounds half to even)."""
    return int(math.floor(x + 0.5))


def distance_value(km):
    """A distance in the label's format, without the label's random spelling:
    whole metres under 1 km, else km with one decimal."""
    metres = whole(km * 1000)
    if metres < 1000:
        return "%d%s" % (max(1, metres), ZH_M)
    return "%.1f%s" % (metres / 1000.0, ZH_KM)


def money(x):
    """3.0 -> "3", 2.75 -> "2.75", 4.5 -> "4.5"."""
    return ("%.2f" % x).rstrip("0").rstrip(".")


def check_lang(lang):
    if lang not in LANGS:
        raise ValueError("lang must be one of %s, not %r" % (", ".join(LANGS), lang))
    return TEXT[lang]


# ---------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------

def district_of(net, stop):
    code = net.city[stop]
    for district in net.districts:
        if district.city.code == code:
            return district
    return None


def nearest_station_name(net, district, point):
    """The station the SFT prompt names for a point (benchmark_builder.place_label:
    the nearest of its district by flat distance, the lowest index on ties)."""
    lng0, lat0 = point
    kx = router.KM_PER_DEG * math.cos(math.radians(lat0))
    hypot, per_lat = math.hypot, router.KM_PER_DEG
    stops = district.stops if district is not None else range(len(net.ids))
    best = min(stops, key=lambda s: (hypot((net.lng[s] - lng0) * kx, (net.lat[s] - lat0) * per_lat), s))
    return net.names[best]


def stop_fact(net, s):
    return {"stop_id": net.ids[s], "station_name": net.names[s], "coord": coord_text(net.lng[s], net.lat[s])}


def route_record(net, route, rng):
    """(label dict, itinerary facts) of one route.  The label is route_json's with
    the access distances the builder's labels carry (with_plausible_access)."""
    label = router.route_json(net, route, rng, tag=True)
    first, last = route.leg_stops[0][0], route.leg_stops[-1][-1]
    for key, stop, point in (("start_transfer_distance", first, route.origin),
                             ("end_transfer_distance", last, route.dest)):
        label[key] = builder.plausible_access_text(label[key], net.dist_to(stop, point))
    facts = {"access": access_fact(label["start_transfer_mode"], label["start_transfer_distance"],
                                   route.start),
             "rides": [], "transfers": [],
             "egress": access_fact(label["end_transfer_mode"], label["end_transfer_distance"], route.end),
             "transfer_count": len(route.legs) - 1}
    for k, (ld_id, i, j) in enumerate(route.legs):
        ld = net.linedirs[ld_id]
        facts["rides"].append({
            "line_name": ld.name, "board": stop_fact(net, ld.stops[i]), "alight": stop_fact(net, ld.stops[j]),
            "stops": j - i, "distance": distance_value(ld.cumdist[j] - ld.cumdist[i]),
            "minutes": max(1, whole(ld.ride_minutes(i, j))), "wait_minutes": whole(ld.wait_min)})
        if k:
            a, b = route.leg_stops[k - 1][-1], route.leg_stops[k][0]
            if a == b:
                facts["transfers"].append({"kind": "same_stop", "from": net.ids[a], "to": net.ids[b]})
            else:
                walk_km = net.dist(a, b) * router.TRANSFER_WALK_DETOUR
                facts["transfers"].append({
                    "kind": "walk", "from": net.ids[a], "to": net.ids[b],
                    "distance": distance_value(walk_km),
                    "minutes": whole(net.transfer_minutes(a, b, walk_km))})
    return label, facts


def access_fact(label_mode, label_distance, access):
    """The access leg as the text states it: the label's mode (an empty one is a
    walk, the only mode the release leaves empty) and distance (an empty one,
    the station at the door, in whole metres), and the minutes."""
    return {"mode": label_mode or WALK,
            "distance": label_distance or distance_value(access.km),
            "minutes": max(1, whole(access.minutes))}


def session_entry(net, city, origin, dest, routes, rng, lang=DEFAULT_LANG, places=None):
    """(text, record) of one trip session: routes (router Itineraries, best first,
    at most MAX_CANDIDATES) from origin to dest ((lng, lat) tuples) in city (its
    name).  rng is used only through router.route_json, route by route, so the
    first route's label is the one a label built with the same rng state has.
    places: the (origin, destination) station names the SFT prompt gives the
    trip (benchmark_builder.place_label of its accesses), when the caller has
    them; else found the same way (a pass over the district's stations)."""
    words = check_lang(lang)
    if not 1 <= len(routes) <= MAX_CANDIDATES:
        raise ValueError("a session has 1 to %d routes, not %d" % (MAX_CANDIDATES, len(routes)))
    if places is None:
        district = district_of(net, routes[0].leg_stops[0][0])
        places = (nearest_station_name(net, district, origin), nearest_station_name(net, district, dest))
    record = {"city": city, "start": "%.6f,%.6f" % tuple(origin), "end": "%.6f,%.6f" % tuple(dest),
              "place": {"start": places[0], "end": places[1]},
              "routes": [], "itineraries": []}
    for route in routes:
        label, facts = route_record(net, route, rng)
        record["routes"].append(label)
        record["itineraries"].append(facts)
    return session_text(record, words, lang), record


def session_text(record, words, lang):
    lines = [words["city"].format(city=record["city"]),
             words["start"].format(point=record["start"], place=record["place"]["start"]),
             words["end"].format(point=record["end"], place=record["place"]["end"]),
             words["count"].format(n=len(record["routes"]))]
    for k, (label, facts) in enumerate(zip(record["routes"], record["itineraries"])):
        lines.extend(route_lines(k + 1, label, facts, words, lang))
    return "\n".join(lines)


def stop_text(stop, words):
    return words["stop"].format(name=stop["station_name"], id=stop["stop_id"], coord=stop["coord"])


def access_text(template, access, words, lang):
    return words[template].format(mode=mode_text(access["mode"], lang),
                                  distance=quantity("distance", access["distance"], lang),
                                  minutes=access["minutes"])


def ride_text(ride, words, lang):
    return (words["ride"].format(line=ride["line_name"], board=stop_text(ride["board"], words),
                                 alight=stop_text(ride["alight"], words))
            + words["ride_figures"].format(stops=ride["stops"],
                                           distance=quantity("distance", ride["distance"], lang),
                                           minutes=ride["minutes"], wait=ride["wait_minutes"]))


def transfer_text(transfer, ride_before, ride_after, words, lang):
    if transfer["kind"] == "same_stop":
        return words["same_stop"].format(stop=stop_text(ride_after["board"], words))
    return words["walk"].format(a=stop_text(ride_before["alight"], words),
                                b=stop_text(ride_after["board"], words),
                                distance=quantity("distance", transfer["distance"], lang),
                                minutes=transfer["minutes"])


def totals_text(label, facts, words, lang):
    return (words["total_distance"].format(value=quantity("distance", label["total_distance"], lang))
            + words["total_time"].format(value=quantity("time", label["total_time"], lang))
            + words["total_fare"].format(value=quantity("fare", label["total_fare"], lang))
            + words["transfers"].format(n=facts["transfer_count"]))


def sequence_text(label, words):
    return words["sequence"].format(ids=words["sep"].join(label["station_sequence"]))


def route_lines(k, label, facts, words, lang):
    lines = [words["route"].format(k=k, tag=tag_text(label["route_tag"], lang)),
             access_text("access", facts["access"], words, lang)]
    rides = facts["rides"]
    for n, ride in enumerate(rides):
        if n:
            lines.append(transfer_text(facts["transfers"][n - 1], rides[n - 1], ride, words, lang))
        lines.append(ride_text(ride, words, lang))
    lines.append(access_text("egress", facts["egress"], words, lang))
    lines.append(totals_text(label, facts, words, lang))
    lines.append(sequence_text(label, words))
    return lines


# ---------------------------------------------------------------------------
# Lines and stations
# ---------------------------------------------------------------------------

def city_names(net):
    """ad_code -> city name, from the network's districts."""
    return {d.city.code: d.city.name for d in net.districts}


def fare_fact(ld):
    """A line direction's fares as the text states them."""
    if ld.zone_fares is not None:
        priced = [f for row in ld.zone_fares[1] for f in row if f is not None]
        if not priced:
            return {"kind": "unknown"}
        return {"kind": "zones", "low": money(min(priced)), "high": money(max(priced))}
    bands = ld.fare_bands
    if len(bands) == 1 and bands[0][0] == float("inf"):
        return {"kind": "flat", "fare": money(bands[0][1])}
    return {"kind": "distance", "bands": [[money(limit), money(fare)] for limit, fare in bands],
            "step_km": money(ld.fare_step_km)}


def fare_text(fare, lang):
    words = FARE_TEXT[lang]
    kind = fare["kind"]
    if kind == "flat":
        return words["flat"].format(fare=fare["fare"])
    if kind == "zones":
        return words["zones"].format(low=fare["low"], high=fare["high"])
    if kind == "distance":
        parts = [words["band"].format(km=km, fare=value) for km, value in fare["bands"]]
        parts.append(words["step"].format(km=fare["step_km"]))
        return words["by_distance"] + TEXT[lang]["part_sep"].join(parts)
    return words["unknown"]


def service_facts(row):
    """What line_service.csv says of a line's service, kept only where it is
    well-formed: first_departure / last_departure ("HH:MM" or "HH:MM:SS", when
    the file has those columns), headway_min (minutes), trips (a day)."""
    out = {}
    for key in SERVICE_KEYS:
        value = (row.get(key) or "").strip()
        if not value:
            continue
        if key in ("first_departure", "last_departure") and CLOCK_RE.match(value):
            out[key] = value
        elif key == "headway_min" and NUMBER_RE.match(value):
            out[key] = value
        elif key == "trips" and value.isdigit() and value.isascii():
            out[key] = value
    return out


def read_line_service(folder):
    """line_name -> service_facts of a network folder's line_service.csv ({} when
    the folder has none, as make_demo.py's networks do).  Read within the
    builder's limits; a bad file is a benchmark_builder.NetworkError."""
    rows = builder.read_table(os.path.join(folder, "line_service.csv"), ("line_name",), optional=True)
    out = {}
    for row in rows or ():
        facts = service_facts(row)
        if facts:
            out.setdefault(row["line_name"], facts)
    return out


def service_text(service, words):
    parts = []
    if "first_departure" in service:
        parts.append(words["first"].format(time=service["first_departure"]))
    if "last_departure" in service:
        parts.append(words["last"].format(time=service["last_departure"]))
    if "headway_min" in service:
        parts.append(words["headway"].format(minutes=service["headway_min"]))
    if "trips" in service:
        parts.append(words["trips"].format(n=service["trips"]))
    return words["service"] + words["part_sep"].join(parts)


def line_entries(net, lang=DEFAULT_LANG, service=None):
    """(text, record) per line direction, in net.linedirs order.  service: line
    name -> service_facts (read_line_service), where the feed gives them."""
    words = check_lang(lang)
    cities = city_names(net)
    service = service or {}
    for ld in net.linedirs:
        record = {"line_name": ld.name, "city": cities.get(ld.line.city.code, ld.line.city.name),
                  "kind": ld.kind, "length_km": "%.1f" % ld.cumdist[-1], "stop_count": len(ld.stops),
                  "service": dict(service.get(ld.name) or {}), "fare": fare_fact(ld),
                  "station_ids": [net.ids[s] for s in ld.stops],
                  "station_names": [net.names[s] for s in ld.stops]}
        yield line_text(record, words, lang), record


def line_text(record, words, lang):
    lines = [words["line"].format(name=record["line_name"]),
             words["city"].format(city=record["city"]),
             words["kind"].format(kind=KIND_TEXT[lang].get(record["kind"], record["kind"])),
             words["length"].format(km=record["length_km"], n=record["stop_count"])]
    if record["service"]:
        lines.append(service_text(record["service"], words))
    lines.append(words["fare"].format(fare=fare_text(record["fare"], lang)))
    lines.append(line_stops_text(record, words))
    return "\n".join(lines)


def line_stops_text(record, words):
    return words["stops"].format(stops=words["sep"].join(
        words["line_stop"].format(name=n, id=i)
        for i, n in zip(record["station_ids"], record["station_names"])))


def serving_lines(net):
    """stop -> [(LineDir, [next stops])], each line direction once, in net.linedirs order."""
    serving = [[] for _ in net.ids]
    for ld in net.linedirs:
        nexts = {}
        for pos, s in enumerate(ld.stops):
            following = nexts.setdefault(s, [])
            if pos + 1 < len(ld.stops) and ld.stops[pos + 1] not in following:
                following.append(ld.stops[pos + 1])
        for s, following in nexts.items():
            serving[s].append((ld, following))
    return serving


def station_entries(net, lang=DEFAULT_LANG):
    """(text, record) per station, in net.ids order."""
    words = check_lang(lang)
    cities = city_names(net)
    serving = serving_lines(net)
    for s in range(len(net.ids)):
        record = {"stop_id": net.ids[s], "station_name": net.names[s],
                  "city": cities.get(net.city[s], net.city[s]),
                  "coord": coord_text(net.lng[s], net.lat[s]),
                  "lines": [ld.name for ld, _ in serving[s]],
                  "next_stops": [[{"stop_id": net.ids[t], "station_name": net.names[t]} for t in following]
                                 for _, following in serving[s]]}
        yield station_text(record, words), record


def station_line_text(line, following, words):
    if not following:
        return words["terminus"].format(line=line)
    return words["next"].format(line=line, stops=words["sep"].join(
        words["line_stop"].format(name=t["station_name"], id=t["stop_id"]) for t in following))


def station_text(record, words):
    parts = [station_line_text(line, following, words)
             for line, following in zip(record["lines"], record["next_stops"])]
    return "\n".join([words["station"].format(name=record["station_name"], id=record["stop_id"]),
                      words["city"].format(city=record["city"]),
                      words["coord"].format(coord=record["coord"]),
                      words["lines"] + (words["line_sep"].join(parts) if parts else words["no_line"])])


# ---------------------------------------------------------------------------
# The check: the text states its record (issue 45 point 3)
# ---------------------------------------------------------------------------

FIRST_LINE = {"session": "city", "line": "line", "station": "station"}
# The characters of a run a phrase must not be cut out of: ASCII letters and
# digits, '.', '_' and '-'.
_EDGE = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._-")


def stated(text, phrase):
    """phrase occurs in text, and where it begins or ends with a letter, digit,
    '.', '_' or '-', not as part of a longer such run ("5分钟" is not stated by "15分钟")."""
    if not phrase:
        return True
    start = text.find(phrase)
    if start < 0:
        return False
    head, tail = phrase[0] in _EDGE, phrase[-1] in _EDGE
    size, last = len(phrase), len(text)
    while start >= 0:
        end = start + size
        if not (head and start > 0 and text[start - 1] in _EDGE) \
                and not (tail and end < last and text[end] in _EDGE):
            return True
        start = text.find(phrase, start + 1)
    return False


def text_lang(kind, text):
    """The language whose first-line word the text begins with, or None."""
    for lang in LANGS:
        head = TEXT[lang][FIRST_LINE[kind]].split("{")[0]
        if text.startswith(head):
            return lang
    return None


def text_states_record(kind, text, record):
    """(ok, reason): does the corpus text state every fact of its record?  An
    English reason names the first fact missing (or a record that is not one)."""
    if kind not in KINDS:
        return False, "unknown record kind %r" % (kind,)
    if not isinstance(text, str) or not isinstance(record, dict):
        return False, "the text is not text or the record is not a JSON object"
    lang = text_lang(kind, text)
    if lang is None:
        return False, "the text does not begin like a %s text in any language (%s)" % (kind, ", ".join(LANGS))
    try:
        missing = {"session": session_missing, "line": line_missing,
                   "station": station_missing}[kind](text, record, TEXT[lang], lang)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        return False, "the record is not a %s record (%s: %s)" % (kind, type(exc).__name__, exc)
    if missing:
        return False, missing
    return True, "the text states every fact of its record"


def first_missing(text, facts):
    """The description of the first (description, phrase) not stated, or None."""
    for what, phrase in facts:
        if not stated(text, phrase):
            return "the text does not state %s: %r" % (what, phrase)
    return None


def route_sections(text, count, words):
    """[section text of route 1..count], or a reason why the text has no such sections."""
    heads = []
    for k in range(1, count + 2):
        head = "\n" + words["route"].split("{k}")[0] + str(k) + words["route"].split("{k}")[1].split("{tag}")[0]
        heads.append(head)
    starts, at = [], 0
    for k, head in enumerate(heads[:count]):
        found = text.find(head, at)
        if found < 0:
            return None, "the text has no route %d" % (k + 1)
        starts.append(found)
        at = found + len(head)
    if heads[count] in text:
        return None, "the text has more routes than its record's %d" % count
    ends = starts[1:] + [len(text)]
    return [text[a:b] + "\n" for a, b in zip(starts, ends)], None


def session_missing(text, record, words, lang):
    routes, itineraries = record["routes"], record["itineraries"]
    if not isinstance(routes, list) or not 1 <= len(routes) <= MAX_CANDIDATES \
            or len(itineraries) != len(routes):
        return "the record needs 1 to %d routes, each with its itinerary" % MAX_CANDIDATES
    head = [("the city", words["city"].format(city=record["city"]) + "\n"),
            ("the start", words["start"].format(point=record["start"], place=record["place"]["start"])),
            ("the end", words["end"].format(point=record["end"], place=record["place"]["end"])),
            ("the number of routes", words["count"].format(n=len(routes)))]
    missing = first_missing(text, head)
    if missing:
        return missing
    sections, problem = route_sections(text, len(routes), words)
    if problem:
        return problem
    for k, (label, facts, section) in enumerate(zip(routes, itineraries, sections)):
        problem = route_missing(section, label, facts, words, lang)
        if problem:
            return "route %d: %s" % (k + 1, problem)
    return None


def label_agrees(label, facts):
    """The itinerary restates the label: the same lines, stops at the ends of each
    ride, access modes and distances (where the label has them)."""
    rides = facts["rides"]
    if [r["line_name"] for r in rides] != list(label["line_sequence"]):
        return "its rides are not the label's line_sequence"
    legs, leg = [], []
    for stop in label["station_sequence"]:
        if stop == TRANSFER:
            legs.append(leg)
            leg = []
        else:
            leg.append(stop)
    legs.append(leg)
    if len(legs) != len(rides) or any(
            not leg or leg[0] != r["board"]["stop_id"] or leg[-1] != r["alight"]["stop_id"]
            for leg, r in zip(legs, rides)):
        return "its rides do not board and alight where the label's station_sequence does"
    if len(facts["transfers"]) != len(rides) - 1 or facts["transfer_count"] != len(rides) - 1:
        return "its transfers are not one fewer than its rides"
    for side, prefix in (("access", "start"), ("egress", "end")):
        mode, distance = label[prefix + "_transfer_mode"], label[prefix + "_transfer_distance"]
        if mode and facts[side]["mode"] != mode:
            return "its %s mode is not the label's %r" % (side, mode)
        if distance and facts[side]["distance"] != distance:
            return "its %s distance is not the label's %r" % (side, distance)
    return None


def route_missing(section, label, facts, words, lang):
    problem = label_agrees(label, facts)
    if problem:
        return problem
    rides = facts["rides"]
    checks = [("the route tag", words["route"].split("{k}")[1].format(tag=tag_text(label["route_tag"], lang))),
              ("the access leg", access_text("access", facts["access"], words, lang) + "\n")]
    for n, ride in enumerate(rides):
        if n:
            checks.append(("transfer %d" % n,
                           transfer_text(facts["transfers"][n - 1], rides[n - 1], ride, words, lang) + "\n"))
        checks.append(("the line of ride %d" % (n + 1),
                       words["ride"].split("{board}")[0].format(line=ride["line_name"])))
        checks.append(("the boarding stop of ride %d (name, id, coordinates)" % (n + 1),
                       stop_text(ride["board"], words)))
        checks.append(("the alighting stop of ride %d (name, id, coordinates)" % (n + 1),
                       stop_text(ride["alight"], words)))
        checks.append(("ride %d" % (n + 1), ride_text(ride, words, lang) + "\n"))
    checks.append(("the egress leg", access_text("egress", facts["egress"], words, lang) + "\n"))
    checks.append(("the total distance", words["total_distance"].format(
        value=quantity("distance", label["total_distance"], lang))))
    checks.append(("the total time", words["total_time"].format(value=quantity("time", label["total_time"], lang))))
    checks.append(("the total fare", words["total_fare"].format(value=quantity("fare", label["total_fare"], lang))))
    checks.append(("the number of transfers", words["transfers"].format(n=facts["transfer_count"]) + "\n"))
    checks.append(("the totals", totals_text(label, facts, words, lang) + "\n"))
    checks.append(("the station-id list", sequence_text(label, words) + "\n"))
    return first_missing(section, checks)


def line_missing(text, record, words, lang):
    text = text + "\n"
    ids, names = record["station_ids"], record["station_names"]
    if len(ids) != len(names) or len(ids) != record["stop_count"]:
        return "the record's stop count, ids and names disagree"
    checks = [("the line name", words["line"].format(name=record["line_name"]) + "\n"),
              ("the city", words["city"].format(city=record["city"]) + "\n"),
              ("the kind", words["kind"].format(kind=KIND_TEXT[lang].get(record["kind"], record["kind"])) + "\n"),
              ("the length and stop count",
               words["length"].format(km=record["length_km"], n=record["stop_count"]) + "\n"),
              ("the fare", words["fare"].format(fare=fare_text(record["fare"], lang)) + "\n"),
              ("the stops in order", line_stops_text(record, words) + "\n")]
    if record["service"]:
        checks.append(("the service", service_text(record["service"], words) + "\n"))
    return first_missing(text, checks)


def station_missing(text, record, words, lang):
    text = text + "\n"
    if len(record["lines"]) != len(record["next_stops"]):
        return "the record's lines and next stops disagree"
    checks = [("the station", words["station"].format(name=record["station_name"], id=record["stop_id"]) + "\n"),
              ("the city", words["city"].format(city=record["city"]) + "\n"),
              ("the coordinates", words["coord"].format(coord=record["coord"]) + "\n")]
    parts = []
    for line, following in zip(record["lines"], record["next_stops"]):
        part = station_line_text(line, following, words)
        parts.append(part)
        checks.append(("line %s and its next stop" % line, part))
    checks.append(("the lines", words["lines"] + (words["line_sep"].join(parts) if parts else words["no_line"])
                   + "\n"))
    return first_missing(text, checks)


# ---------------------------------------------------------------------------
# The record against the network: what the record says is the network's
# ---------------------------------------------------------------------------

def record_matches_network(kind, record, net):
    """(ok, reason): every stop of the record is a station of ``net`` with the
    record's name and the station file's coordinates, and every line is one of
    its line directions with the stops the record gives it.  (The routes'
    reachability and plausibility are the evaluators' to judge.)"""
    try:
        problem = {"session": session_off_network, "line": line_off_network,
                   "station": station_off_network}[kind](record, net)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        return False, "the record is not a %s record (%s: %s)" % (kind, type(exc).__name__, exc)
    if problem:
        return False, problem
    return True, "the record agrees with the network"


def stop_off_network(stop, net):
    s = net.stop_index().get(stop["stop_id"])
    if s is None:
        return "stop %r is not in the network" % stop["stop_id"]
    if stop["station_name"] != net.names[s]:
        return "stop %r is named %r, not %r" % (stop["stop_id"], net.names[s], stop["station_name"])
    if stop["coord"] != coord_text(net.lng[s], net.lat[s]):
        return "stop %r lies at %s, not %s" % (stop["stop_id"], coord_text(net.lng[s], net.lat[s]),
                                               stop["coord"])
    return None


_SERVING = []       # [(net, serving_lines(net))]: the last network's, for station checks


def serving_lines_of(net):
    if not _SERVING or _SERVING[0][0] is not net:
        _SERVING[:] = [(net, serving_lines(net))]
    return _SERVING[0][1]


def linedirs_named(net, name):
    return [ld for ld in net.linedirs if ld.name == name]


def session_off_network(record, net):
    index = net.stop_index()
    for k, (label, facts) in enumerate(zip(record["routes"], record["itineraries"])):
        for stop_id in label["station_sequence"]:
            if stop_id != TRANSFER and stop_id not in index:
                return "route %d: stop %r is not in the network" % (k + 1, stop_id)
        for n, ride in enumerate(facts["rides"]):
            for end in ("board", "alight"):
                problem = stop_off_network(ride[end], net)
                if problem:
                    return "route %d ride %d: %s" % (k + 1, n + 1, problem)
            board, alight = index[ride["board"]["stop_id"]], index[ride["alight"]["stop_id"]]
            if not any(board in ld.stops and alight in ld.stops[ld.stops.index(board) + 1:]
                       for ld in linedirs_named(net, ride["line_name"])):
                return "route %d ride %d: no line %r runs from %r to %r" % (
                    k + 1, n + 1, ride["line_name"], ride["board"]["stop_id"], ride["alight"]["stop_id"])
    return None


def line_off_network(record, net):
    if not any([net.ids[s] for s in ld.stops] == record["station_ids"]
               for ld in linedirs_named(net, record["line_name"])):
        return "no line direction %r has the record's stops" % record["line_name"]
    index = net.stop_index()
    for stop_id, name in zip(record["station_ids"], record["station_names"]):
        if net.names[index[stop_id]] != name:
            return "stop %r is named %r, not %r" % (stop_id, net.names[index[stop_id]], name)
    return None


def station_off_network(record, net):
    problem = stop_off_network(record, net)
    if problem:
        return problem
    s = net.stop_index()[record["stop_id"]]
    serving = [ld.name for ld, _ in serving_lines_of(net)[s]]
    if serving != record["lines"]:
        return "stop %r is served by %s, not %s" % (record["stop_id"], serving, record["lines"])
    return None
