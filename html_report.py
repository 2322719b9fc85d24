"""HTML reports: one self-contained page per run or per comparison of runs.

``evaluator_page`` builds the page of one evaluator run from its report.json
dict and its details.jsonl file; ``comparison_page`` the page of compare.py's
--json result.  A page is a single file: inline CSS, inline SVG and a little
plain JavaScript for the row filters; it references no network address (no
CDN, web font or map tile), so it opens offline and can be mailed.

The details file may hold a million lines: it is read twice, streaming.  The
first pass counts failure codes and breakdowns and keeps only a bounded heap
of the rows to list; the second fetches those rows.  Everything from the data
is escaped (model text may hold markup, control characters or lone
surrogates).
"""

import heapq
import html
import json
import math
import re
import zlib

import common
import transitlm.records  # noqa: E402
import transitlm.reports  # noqa: E402
from general_llm.route_eval import BUS_STOP_PREFIX

STAGES = transitlm.records.STAGES

BENCHMARK_TITLES = {
    "single_route": "TransitLM benchmark 1: single route",
    "personalized": "TransitLM benchmark 2: personalized preferences",
    "diversity": "TransitLM benchmark 3: route diversity",
    "general_llm": "TransitLM general-purpose LLM",
}

# The paper's metrics in the summary line's order -> (label, kind).
# kind: "rate" (fraction shown as %), "frac" (0..1 shown with 3 decimals),
# "pct" (already in percent).
METRICS = (("conn", "Conn", "rate", "connectivity (Round 1 reachable)"),
           ("sg", "SG", "rate", "station grounding"),
           ("dp", "DP", "rate", "distance plausibility"),
           ("lo", "LO", "frac", "line overlap (mean line IoU)"),
           ("sso", "SSO", "frac", "station sequence overlap (mean station IoU)"),
           ("rem", "REM", "rate", "route exact match"),
           ("ea", "EA", "rate", "estimation accuracy"),
           ("mape", "MAPE", "pct", "mean absolute percentage error"),
           ("pc", "PC", "rate", "preference compliance"),
           ("rd", "RD", "frac", "route diversity"))
METRIC_INFO = {key: (label, kind, meaning) for key, label, kind, meaning in METRICS}

# Colour-blind-safe hues (Okabe-Ito), each at least 4.5:1 on white except
# where a text label always accompanies them.
LINE_COLOURS = ("#0065a8", "#b34700", "#007a5a", "#a8428f", "#8a6100", "#3d3d99")
ROUTE_COLOURS = {"first": "#0065a8", "second": "#b34700", "third": "#007a5a"}
DIVERSITY_WIDTHS = {"first": 7, "second": 4.5, "third": 2}
LABEL_GREY = "#a6a6a6"
BROKEN_RED = "#c81e1e"
TEXT_COLOUR = "#1f2328"

MAP_WIDTH = 440
MAP_HEIGHT = 300
MAP_PAD = 28
KM_PER_DEGREE = common.EARTH_RADIUS_KM * math.pi / 180.0
NICE_KM = (0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 500, 1000)


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(value):
    """Text safe to write as UTF-8 HTML: lone surrogates and control
    characters (ANSI escapes) shown as backslash escapes."""
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL_RE.sub(lambda match: "\\x%02x" % ord(match.group()), text)


def esc(value):
    """Escaped text for HTML content and quoted attributes; None -> empty."""
    if value is None:
        return ""
    return html.escape(clean_text(value), quote=True)


def fmt_count_pct(part, whole):
    """'32 (84.2%)'; '32' when there is no base."""
    if not whole:
        return "%d" % part
    return "%d (%.1f%%)" % (part, 100.0 * part / whole)


def fmt_metric(key, value):
    """A metric value the way the summary line shows it; '-' for null."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    kind = METRIC_INFO.get(key, ("", "frac", ""))[1]
    if kind == "rate":
        return "%.1f%%" % (100.0 * value)
    if kind == "pct":
        return "%.2f%%" % value
    return "%.3f" % value


def fmt_delta(key, value):
    """A metric difference: percentage points for rates."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    kind = METRIC_INFO.get(key, ("", "frac", ""))[1]
    if kind == "rate":
        return "%+.1f pp" % (100.0 * value)
    if kind == "pct":
        return "%+.2f pp" % value
    return "%+.3f" % value


def fmt_value(value):
    """A scalar of the data as short text."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "%.4g" % value if math.isfinite(value) else "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def n(value):
    """A coordinate for SVG (one decimal)."""
    return "%.1f" % value


# ---------------------------------------------------------------------------
# Reading the details file (two streaming passes)
# ---------------------------------------------------------------------------

def read_details(path):
    """Yield (line number, record dict) of a details JSONL file."""
    try:
        handle = open(path, "r", encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise common.InputError("cannot read details file %s: %s"
                                % (path, exc.strerror or exc))
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise common.InputError("details file %s line %d is not JSON"
                                            % (path, number))
                if not isinstance(record, dict):
                    raise common.InputError("details file %s line %d is not a JSON object"
                                            % (path, number))
                yield number, record
        except OSError as exc:
            raise common.InputError("cannot read details file %s: %s"
                                    % (path, exc.strerror or exc))


def failure_codes(record):
    """The row's failure codes; derived coarsely for details without them (schema 1)."""
    codes = record.get("failure_codes")
    if isinstance(codes, list):
        return [str(code) for code in codes]
    status = record.get("status")
    if status == "error":
        return ["error"]
    if status == "no_response":
        return ["no_response"]
    failed = record.get("failed_round")
    return [str(failed)] if failed else []


def code_stage(code):
    return code.split(".", 1)[0]


def first_stage(codes):
    """The first failed stage of a row ('passed' when none)."""
    return code_stage(codes[0]) if codes else "passed"


def city_of(record):
    city = record.get("city")
    return "(no city)" if city in (None, "") else clean_text(city)


def _spread(number):
    """A deterministic pseudo-random key of a line number (sampling order)."""
    return zlib.crc32(b"%d" % number)


BREAKDOWN_COLUMNS = (("samples", "rows"), ("evaluated", "evaluated"),
                     ("entered", "Round 1 input"), ("reachable", "reachable"),
                     ("grounding", "station grounding"),
                     ("plausibility", "distance plausibility"),
                     ("exact", "exact match"), ("accurate", "accurate"))


def breakdown_step(counter, record):
    """Add one row to a breakdown counter (dict of counts)."""
    def bump(key):
        counter[key] = counter.get(key, 0) + 1
    bump("samples")
    if record.get("status") == "evaluated":
        bump("evaluated")
    if record.get("in_funnel"):
        bump("entered")
        if record.get("reachable"):
            bump("reachable")
            if record.get("station_grounding"):
                bump("grounding")
            if record.get("distance_plausibility"):
                bump("plausibility")
            if record.get("exact_match"):
                bump("exact")
                if record.get("overall_accurate"):
                    bump("accurate")
    if record.get("compliant") is not None:
        bump("judged")
        if record.get("compliant"):
            bump("compliant")


class DetailsScan(object):
    """Pass 1 over the details: counts, breakdowns and the rows to list."""

    def __init__(self, html_rows):
        self.limit = max(0, int(html_rows))
        self.rows = 0
        self.failing = 0
        self.code_counts = {}
        self.by_city = {}
        self.by_req_type = {}
        self.statuses = {}
        self._code_seen = {}
        self._heap = []             # max-heap (negated keys) of the rows to list

    def add(self, number, record):
        self.rows += 1
        codes = failure_codes(record)
        status = str(record.get("status"))
        self.statuses[status] = self.statuses.get(status, 0) + 1
        breakdown_step(self.by_city.setdefault(city_of(record), {}), record)
        if "req_type" in record:
            key = "(none)" if record["req_type"] is None else str(record["req_type"])
            breakdown_step(self.by_req_type.setdefault(key, {}), record)
        if codes:
            self.failing += 1
            # Round-robin over codes: a row's rank is how often its rarest code
            # was seen before, so every code gets rows in the list.
            occurrence = None
            for code in set(codes):
                self.code_counts[code] = self.code_counts.get(code, 0) + 1
                seen = self._code_seen.get(code, 0)
                self._code_seen[code] = seen + 1
                occurrence = seen if occurrence is None else min(occurrence, seen)
            key = (0, occurrence, _spread(number), number)
        else:
            key = (1, 0, _spread(number), number)
        self._offer(key)

    def _offer(self, key):
        if not self.limit:
            return
        negated = tuple(-part for part in key)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, negated)
        elif negated > self._heap[0]:
            heapq.heapreplace(self._heap, negated)

    def selected(self):
        """Listed line numbers: failures first, then passed rows, each in file order."""
        keys = sorted(tuple(-part for part in item) for item in self._heap)
        return sorted(keys, key=lambda key: (key[0], key[3]))


def scan_details(path, html_rows):
    scan = DetailsScan(html_rows)
    for number, record in read_details(path):
        scan.add(number, record)
    return scan


def fetch_rows(path, line_numbers):
    """Pass 2: {line number: record} of the wanted lines only."""
    wanted = set(line_numbers)
    found = {}
    if not wanted:
        return found
    for number, record in read_details(path):
        if number in wanted:
            found[number] = record
            if len(found) == len(wanted):
                break
    return found


# ---------------------------------------------------------------------------
# Station lookups (a malformed stop line reads as an unknown stop)
# ---------------------------------------------------------------------------

class Stops(object):
    """Safe lookups on the station network, with the bus- prefix fallback of
    the general-LLM route-eval check when ``prefix_fallback``."""

    def __init__(self, network, prefix_fallback=False):
        self.network = network
        self.prefix_fallback = prefix_fallback

    def _ask(self, method, stop):
        if self.network is None or not isinstance(stop, str) or not stop:
            return None
        try:
            value = getattr(self.network, method)(stop)
            if value is None and self.prefix_fallback:
                value = getattr(self.network, method)(BUS_STOP_PREFIX + stop)
        except common.InputError:
            return None
        return value

    def coords(self, stop):
        point = self._ask("coords", stop)
        return point if valid_point(point) else None

    def name(self, stop):
        value = self._ask("name", stop)
        return value if value else None

    def connected(self, here, there):
        """True / False, or None when ``here`` has no next-hop information."""
        hops = self._ask("next_hops", here)
        if hops is None:
            return None
        if there in hops:
            return True
        return self.prefix_fallback and (BUS_STOP_PREFIX + there) in hops


def valid_point(point):
    """A (lng, lat) pair of finite numbers within the globe."""
    try:
        lng, lat = float(point[0]), float(point[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return False
    return math.isfinite(lng) and math.isfinite(lat) and abs(lat) <= 90 and abs(lng) <= 360


# ---------------------------------------------------------------------------
# Route maps
# ---------------------------------------------------------------------------

class Projection(object):
    """Equirectangular projection, longitude scaled by cos(mean latitude),
    north up, fitted into the map box with one scale for both axes."""

    def __init__(self, points, width=MAP_WIDTH, height=MAP_HEIGHT, pad=MAP_PAD):
        points = [(float(p[0]), float(p[1])) for p in points]
        self.width, self.height = width, height
        lat0 = sum(p[1] for p in points) / len(points) if points else 0.0
        self.cos_lat = max(math.cos(math.radians(lat0)), 0.01)
        xs = [p[0] * self.cos_lat * KM_PER_DEGREE for p in points] or [0.0]
        ys = [p[1] * KM_PER_DEGREE for p in points] or [0.0]
        span_x = max(max(xs) - min(xs), 1e-9)
        span_y = max(max(ys) - min(ys), 1e-9)
        # A single point (or none) shows 1 km across.
        span = max(span_x, span_y)
        if span < 1e-6:
            span_x = span_y = 1.0
        self.px_per_km = min((width - 2 * pad) / span_x, (height - 2 * pad - 16) / span_y)
        self.center_x = (max(xs) + min(xs)) / 2.0
        self.center_y = (max(ys) + min(ys)) / 2.0

    def __call__(self, point):
        x_km = float(point[0]) * self.cos_lat * KM_PER_DEGREE
        y_km = float(point[1]) * KM_PER_DEGREE
        x = self.width / 2.0 + (x_km - self.center_x) * self.px_per_km
        y = (self.height - 16) / 2.0 - (y_km - self.center_y) * self.px_per_km
        return x, y


def scale_bar_km(px_per_km, max_px):
    """The largest 'nice' length in km whose bar fits in max_px pixels."""
    best = NICE_KM[0]
    for km in NICE_KM:
        if km * px_per_km <= max_px:
            best = km
    return best


def split_legs(stations, sizes=None):
    """Stop ids -> legs: by the details' ``leg_sizes`` when they fit, else split
    at 【换乘】 markers, else at a repeated stop (a transfer at one shared stop)."""
    if (isinstance(sizes, list) and sizes and all(isinstance(n, int) and n > 0 for n in sizes)
            and sum(sizes) == len(stations)):
        legs, start = [], 0
        for size in sizes:
            legs.append(stations[start:start + size])
            start += size
        return legs
    if any(stop == common.TRANSFER for stop in stations):
        legs, current = [], []
        for stop in stations:
            if stop == common.TRANSFER:
                legs.append(current)
                current = []
            elif str(stop).strip():
                current.append(stop)
        legs.append(current)
        return [leg for leg in legs if leg]
    legs, current = [], []
    for stop in stations:
        if current and stop == current[-1]:
            legs.append(current)
            current = []
        current.append(stop)
    if current:
        legs.append(current)
    return legs


def route_of(routes, key):
    route = routes.get(key) if isinstance(routes, dict) else None
    return route if isinstance(route, dict) else None


def text_items(value):
    """A list of texts from a JSON value (non-lists -> empty)."""
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, str) else fmt_value(item) for item in value]


class MapBuilder(object):
    """The SVG of one row's routes, plus the notes listed under it."""

    def __init__(self, stops):
        self.stops = stops
        self.layers = {"circles": [], "label": [], "access": [], "pred": [], "broken": [],
                       "dots": [], "marks": []}
        self.points = []          # every projected point, to fit the box
        self.missing = []         # (stop, which route)
        self.broken = []          # "a -> b" texts
        self.legend = []          # (colour, style, text)
        self._pending = []        # drawing callbacks run once the projection is known

    # Phase 1: gather; phase 2 (render): project and draw.
    def locate(self, stop, which):
        point = self.stops.coords(stop)
        if point is None:
            if (stop, which) not in self.missing:
                self.missing.append((stop, which))
            return None
        self.points.append(point)
        return point

    def add_route(self, stations, lines, colour_for_leg, which, label_style=False, width=3,
                  leg_sizes=None):
        """Queue a route of stop ids: legs coloured, broken hops dashed red."""
        legs = split_legs([s for s in stations if isinstance(s, str)], leg_sizes)
        transit_lines = [name for name in lines if name.strip() and name != common.TRANSFER]
        by_line = len(legs) == len(transit_lines) and not label_style
        located = []
        for index, leg in enumerate(legs):
            colour = colour_for_leg(index if by_line else 0)
            for stop in leg:
                located.append((stop, self.locate(stop, which), colour))
        self._pending.append(("route", located, which, label_style, width))
        return located, by_line, transit_lines

    def add_segment(self, a, b, colour, dashed, title, layer="pred", width=2.5):
        if a is None or b is None:
            return
        self.points.extend((a, b))
        self._pending.append(("segment", a, b, colour, dashed, title, layer, width))

    def add_access(self, point, stop_point, mode, title, colour):
        if point is None:
            return
        self.points.append(point)
        limit = common.access_threshold_km(mode)
        self._pending.append(("circle", point, limit, mode))
        if stop_point is not None:
            self._pending.append(("segment", point, stop_point, colour, "1 4", title,
                                  "access", 2))
            straight = common.haversine_km(point[0], point[1], stop_point[0], stop_point[1])
            self._pending.append(("access_label", point, stop_point,
                                  "%s %.1f km" % (mode or common.WALK, straight)))

    def add_dot(self, point, title, colour):
        if point is not None:
            self.points.append(point)
            self._pending.append(("dot", point, title, colour))

    def add_mark(self, point, text):
        if point is not None:
            self.points.append(point)
            self._pending.append(("mark", point, text))

    def render(self, aria_label):
        if not self.points:     # still one map per row: an empty one that says why
            return ('<svg class="map" viewBox="0 0 %d 60" width="%d" height="60" role="img" '
                    'aria-label="%s"><rect class="bg" width="%d" height="60" /><text x="12" '
                    'y="34">No coordinates to draw: origin, destination and stations unknown.'
                    '</text></svg>' % (MAP_WIDTH, MAP_WIDTH, esc(aria_label), MAP_WIDTH))
        project = Projection(self.points)
        for item in self._pending:
            getattr(self, "_draw_" + item[0])(project, *item[1:])
        bar_km = scale_bar_km(project.px_per_km, MAP_WIDTH / 4.0)
        bar_px = bar_km * project.px_per_km
        y = MAP_HEIGHT - 12
        scale = ('<g class="scale"><path d="M%s %sv-5h%sv5" /><text x="%s" y="%s">%s km</text>'
                 '</g>' % (n(12), n(y), n(bar_px), n(18 + bar_px), n(y), ("%g" % bar_km)))
        north = '<text class="north" x="%s" y="16">N \u2191</text>' % n(MAP_WIDTH - 30)
        body = "".join("".join(self.layers[name]) for name in
                       ("circles", "label", "access", "pred", "broken", "dots", "marks"))
        return ('<svg class="map" viewBox="0 0 %d %d" width="%d" height="%d" role="img" '
                'aria-label="%s"><rect class="bg" width="%d" height="%d" />%s%s%s</svg>'
                % (MAP_WIDTH, MAP_HEIGHT, MAP_WIDTH, MAP_HEIGHT, esc(aria_label),
                   MAP_WIDTH, MAP_HEIGHT, body, scale, north))

    def _draw_route(self, project, located, which, label_style, leg_width):
        """Connected hops of one colour as one polyline; a broken hop as a
        dashed red line; stations as dots named on hover."""
        runs = []                 # (colour, width, [points]) drawn as polylines
        dots = []
        previous = None
        for stop, point, colour in located:
            if point is not None:
                name = self.stops.name(stop)
                dots.append((point, "%s (%s)" % (name, stop) if name else stop, colour))
            if previous is not None and previous[1] is not None and point is not None:
                here = previous[0]
                if label_style:
                    runs.append((LABEL_GREY, 7, [previous[1], point]))
                elif self.stops.connected(here, stop):
                    same_leg = previous[2] == colour
                    runs.append((colour if same_leg else TEXT_COLOUR,
                                 leg_width if same_leg else 1.5,
                                 [previous[1], point]))
                else:
                    text = "%s \u2192 %s not connected" % (here, stop)
                    self.broken.append("%s: %s" % (which, text))
                    self.layers["broken"].append(_line(project, previous[1], point,
                                                       BROKEN_RED, "6 4", 2.5, text))
            previous = (stop, point, colour)
        merged = []
        for colour, width, points in runs:
            if merged and merged[-1][0] == colour and merged[-1][1] == width \
                    and merged[-1][2][-1] == points[0]:
                merged[-1][2].append(points[1])
            else:
                merged.append((colour, width, list(points)))
        layer = self.layers["label" if label_style else "pred"]
        for colour, width, points in merged:
            layer.append('<polyline points="%s" stroke="%s" stroke-width="%s"><title>%s</title>'
                         '</polyline>' % (" ".join("%s,%s" % tuple(n(v) for v in project(p))
                                                   for p in points), colour, width,
                                          esc(which)))
        target = self.layers["label" if label_style else "dots"]
        for colour in sorted({colour for _, _, colour in dots}):
            target.append('<g class="stops" fill="%s">%s</g>' % (colour, "".join(
                '<circle cx="%s" cy="%s" r="%s"><title>%s</title></circle>'
                % (n(project(point)[0]), n(project(point)[1]), 2.6 if label_style else 3.4,
                   esc(title + " \u2014 " + which))
                for point, title, dot_colour in dots if dot_colour == colour)))

    def _draw_segment(self, project, a, b, colour, dashed, title, layer, width):
        self.layers[layer].append(_line(project, a, b, colour, dashed, width, title))

    def _draw_circle(self, project, point, limit_km, mode):
        x, y = project(point)
        self.layers["circles"].append(
            '<circle class="limit" cx="%s" cy="%s" r="%s"><title>access limit %g km (%s)'
            '</title></circle>' % (n(x), n(y), n(limit_km * project.px_per_km), limit_km,
                                   esc(mode or common.WALK)))

    def _draw_access_label(self, project, a, b, text):
        (x1, y1), (x2, y2) = project(a), project(b)
        x, y = (x1 + x2) / 2, (y1 + y2) / 2 - 6
        left = x > MAP_WIDTH - 90
        self.layers["marks"].append('<text class="acc" x="%s" y="%s"%s>%s</text>'
                                    % (n(x - 6 if left else x + 6), n(y),
                                       ' text-anchor="end"' if left else "", esc(text)))

    def _draw_dot(self, project, point, title, colour):
        self.layers["dots"].append(_dot(project, point, title, colour, 4.5))

    def _draw_mark(self, project, point, text):
        x, y = project(point)
        # Near the right edge the label goes to the left of the marker.
        left = x > MAP_WIDTH - 90
        self.layers["marks"].append(
            '<g class="mark"><rect x="%s" y="%s" width="12" height="12" /><text x="%s" y="%s"%s>'
            '%s</text><title>%s</title></g>'
            % (n(x - 6), n(y - 6), n(x - 9 if left else x + 9), n(y + 4),
               ' text-anchor="end"' if left else "", esc(text), esc(text)))


def _line(project, a, b, colour, dashed, width, title, css="seg"):
    x1, y1 = project(a)
    x2, y2 = project(b)
    dash = ' stroke-dasharray="%s"' % dashed if dashed else ""
    return ('<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s>'
            '<title>%s</title></line>' % (css, n(x1), n(y1), n(x2), n(y2), colour, width, dash,
                                          esc(title)))


def _dot(project, point, title, colour, radius):
    x, y = project(point)
    return ('<circle class="stop" cx="%s" cy="%s" r="%s" fill="%s"><title>%s</title></circle>'
            % (n(x), n(y), radius, colour, esc(title)))


def point_of(value):
    return (float(value[0]), float(value[1])) if isinstance(value, list) and valid_point(value) \
        else None


def row_map(record, benchmark, stops):
    """One row's map: (svg text, notes html)."""
    builder = MapBuilder(stops)
    origin, destination = point_of(record.get("origin")), point_of(record.get("destination"))
    preds = record.get("prediction_routes") or {}
    labels = record.get("label_routes") or {}
    legend = []
    # Label routes first (grey, underneath).
    label_keys = common.ROUTE_KEYS if benchmark == "diversity" else ("first",)
    label_drawn = False
    for key in label_keys:
        route = route_of(labels, key)
        if route is None:
            continue
        stations = text_items(route.get("stations"))
        if benchmark == "general_llm" and not any(stops.coords(s) for s in stations):
            continue            # names, not stop ids: nothing to place
        builder.add_route(stations, [], lambda i: LABEL_GREY, "label " + key, label_style=True)
        label_drawn = label_drawn or bool(stations)
    if label_drawn:
        legend.append((LABEL_GREY, "solid", "label route (grey, wide)"))
    if benchmark == "general_llm":
        first_stop, last_stop = _general_llm_legs(builder, record, legend)
        start_mode, end_mode = _modes(route_of(preds, "first"))
        pred_keys = ()
    else:
        pred_keys = common.ROUTE_KEYS if benchmark == "diversity" else ("first",)
        first_stop = last_stop = None
        start_mode = end_mode = ""
    for key in pred_keys:
        route = route_of(preds, key)
        if route is None:
            continue
        stations = text_items(route.get("stations"))
        lines = text_items(route.get("lines"))
        if benchmark == "diversity":
            colour = ROUTE_COLOURS[key]
            # Wide under narrow: overlapping routes stay visible.
            located, _, _ = builder.add_route(stations, [], lambda i, c=colour: c, key,
                                              width=DIVERSITY_WIDTHS[key])
            legend.append((colour, "solid", "%s route: %s" % (key, ", ".join(lines) or
                                                              "no lines")))
        else:
            located, by_line, transit = builder.add_route(
                stations, lines, lambda i: LINE_COLOURS[i % len(LINE_COLOURS)], "prediction",
                leg_sizes=route.get("leg_sizes"))
            if by_line:
                for index, name in enumerate(transit):
                    legend.append((LINE_COLOURS[index % len(LINE_COLOURS)], "solid", name))
            else:
                legend.append((LINE_COLOURS[0], "solid", "prediction: %s"
                               % (", ".join(lines) or "no lines")))
        if key == "first":
            start_mode, end_mode = _modes(route)
            placed = [item for item in located if item[1] is not None]
            if placed:
                first_stop, last_stop = placed[0][1], placed[-1][1]
    builder.add_access(origin, first_stop, start_mode,
                       "access from the origin (%s)" % (start_mode or common.WALK), TEXT_COLOUR)
    builder.add_access(destination, last_stop, end_mode,
                       "access to the destination (%s)" % (end_mode or common.WALK),
                       TEXT_COLOUR)
    builder.add_mark(origin, "origin")
    builder.add_mark(destination, "destination")
    svg = builder.render("route map of row %s" % record.get("row"))
    notes = []
    if legend:
        legend.append((TEXT_COLOUR, "dotted", "access legs; dashed circles: access limits "
                       "(%g / %g / %g km walk / bike / taxi)"
                       % (common.WALK_LIMIT_KM, common.CYCLE_LIMIT_KM, common.TAXI_LIMIT_KM)))
        notes.append('<ul class="legend">%s</ul>' % "".join(
            '<li><span class="swatch %s" style="border-color:%s"></span>%s</li>'
            % (style, colour, esc(text)) for colour, style, text in legend))
    if builder.broken:
        notes.append('<p class="broken">Not connected (dashed red): %s</p>'
                     % esc("; ".join(builder.broken)))
    if builder.missing:
        notes.append('<p class="missing">Not in the station file: %s</p>' % esc(
            ", ".join("%s (%s)" % (stop, which) for stop, which in builder.missing)))
    return svg, "".join(notes)


def _modes(route):
    if route is None:
        return "", ""
    start, end = route.get("start_mode"), route.get("end_mode")
    return (start if isinstance(start, str) else "", end if isinstance(end, str) else "")


def _general_llm_legs(builder, record, legend):
    """Matched legs of a general-LLM row: boarding -> alighting per line.
    -> (first stop point, last stop point)."""
    legs = record.get("match_details")
    legs = [leg for leg in legs if isinstance(leg, dict)] if isinstance(legs, list) else []
    stops = builder.stops
    first = last = None
    previous = None           # (stop id, point) of the previous alighting
    for index, leg in enumerate(legs):
        colour = LINE_COLOURS[index % len(LINE_COLOURS)]
        line = leg.get("line_name") or leg.get("line_query") or "?"
        legend.append((colour, "solid", "%s (asked: %s)" % (line, leg.get("line_query") or "?")))
        ends = []
        for side in ("boarding", "alighting"):
            stop = leg.get(side + "_stop_id")
            query = leg.get(side + "_query")
            point = stops.coords(stop) if isinstance(stop, str) else None
            if point is None:
                builder.missing.append((stop or "no match for %s" % (query or "?"),
                                        "%s of leg %d" % (side, index + 1)))
            else:
                builder.points.append(point)
                builder.add_dot(point, "%s: %s (%s), asked: %s"
                                % (side, leg.get(side + "_name") or "?", stop, query or "?"),
                                colour)
            ends.append((stop, point))
        if previous is not None and previous[1] is not None and ends[0][1] is not None \
                and previous[0] != ends[0][0]:
            ok = stops.connected(previous[0], ends[0][0])
            text = "transfer %s \u2192 %s" % (previous[0], ends[0][0])
            if not ok:
                builder.broken.append(text + " not connected")
            builder.add_segment(previous[1], ends[0][1], TEXT_COLOUR if ok else BROKEN_RED,
                                None if ok else "6 4", text + ("" if ok else " not connected"),
                                layer="pred" if ok else "broken", width=1.5 if ok else 2.5)
        builder.add_segment(ends[0][1], ends[1][1], colour, None,
                            "%s (straight line between the matched stops)" % line, width=3)
        first = first or ends[0][1]
        last = ends[1][1] or last
        previous = ends[1]
    return first, last


# ---------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------

def bar_chart(bars, width=760, label_width=250, value_width=230, aria="bar chart"):
    """Horizontal bars with text labels.

    bars: dicts {label, count, scale_max, text, css?, href?, indent?}; the
    bar length is count / scale_max of the bar area.
    """
    row_h, gap = 24, 6
    area = width - label_width - value_width
    parts = []
    for index, bar in enumerate(bars):
        y = index * (row_h + gap)
        length = area * bar["count"] / bar["scale_max"] if bar["scale_max"] else 0
        indent = 14 if bar.get("indent") else 0
        item = ('<text class="lbl" x="%d" y="%s">%s</text>'
                '<rect class="bar %s" x="%d" y="%d" width="%s" height="%d" />'
                '<text class="val" x="%s" y="%s">%s</text>'
                % (label_width - 8, n(y + row_h * 0.68), esc(bar["label"]),
                   esc(bar.get("css", "")), label_width + indent, y, n(max(length, 0)), row_h,
                   n(label_width + indent + max(length, 0) + 6), n(y + row_h * 0.68),
                   esc(bar["text"])))
        item += '<title>%s: %s</title>' % (esc(bar["label"]), esc(bar["text"]))
        if bar.get("href"):
            item = '<a href="%s" class="codelink" data-code="%s">%s</a>' % (
                esc(bar["href"]), esc(bar.get("code", "")), item)
        parts.append("<g>%s</g>" % item)
    height = max(len(bars) * (row_h + gap), row_h)
    return ('<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" '
            'aria-label="%s">%s</svg>' % (width, height, width, height, esc(aria),
                                          "".join(parts)))


def funnel_bars(report):
    """The funnel as bars: (label, count, base, base label, is a filter)."""
    counts, rounds = report.get("counts", {}), report.get("rounds", {})
    reach = rounds.get("reachability", {})
    ground = rounds.get("grounding", {})
    overlap = rounds.get("overlap", {})
    acc = rounds.get("accuracy", {})
    samples = counts.get("samples", 0)
    bars = [("samples", samples, samples, "samples", True),
            ("evaluated", counts.get("evaluated", 0), samples, "samples", True),
            ("Round 1 input", reach.get("input", 0), samples, "samples", True),
            ("reachable", reach.get("passed", 0), reach.get("input", 0), "Round 1 input", True),
            ("station grounding", ground.get("station_grounding", 0), ground.get("input", 0),
             "reachable", False),
            ("distance plausibility", ground.get("distance_plausibility", 0),
             ground.get("input", 0), "reachable", False),
            ("exact match", overlap.get("exact_match", 0), overlap.get("input", 0),
             "reachable", True),
            ("accurate (overall)", acc.get("overall", 0), acc.get("input", 0),
             "exact matches", True)]
    pref = rounds.get("preference")
    if isinstance(pref, dict):
        bars.append(("preference-compliant", pref.get("compliant", 0), pref.get("input", 0),
                     "Round 5 input", True))
    return bars


def diversity_bars(report):
    div = report.get("diversity")
    if not isinstance(div, dict):
        return []
    samples = report.get("counts", {}).get("samples", 0)
    bars = []
    hits = div.get("best_match_hits", {})
    for key in common.ROUTE_KEYS:
        if key in hits:
            bars.append(("best match in %s" % key, hits[key], samples, "samples"))
    reach = div.get("route_reachability", {})
    for key in common.ROUTE_KEYS:
        item = reach.get(key)
        if isinstance(item, dict):
            bars.append(("%s route present" % key, item.get("present", 0), samples, "samples"))
            bars.append(("%s route reachable" % key, item.get("reachable", 0),
                         item.get("present", 0), "present"))
    if "all_routes_reachable" in div:
        bars.append(("all routes reachable", div["all_routes_reachable"], samples, "samples"))
    for count, rows in sorted(div.get("route_count_distribution", {}).items()):
        bars.append(("rows with %s route(s)" % count, rows, samples, "samples"))
    return bars


def _pct_text(count, base, base_label):
    if not base:
        return "%d" % count
    return "%d \u00b7 %.1f%% of %d %s" % (count, 100.0 * count / base, base, base_label)


def funnel_section(report):
    bars = funnel_bars(report)
    top = max([bar[1] for bar in bars] + [1])
    chart = bar_chart([{"label": label, "count": count, "scale_max": top,
                        "text": _pct_text(count, base, base_label),
                        "css": "" if is_filter else "check", "indent": not is_filter}
                       for label, count, base, base_label, is_filter in bars],
                      aria="funnel: counts per round")
    rows = "".join('<tr><td>%s</td><td class="num">%d</td><td class="num">%s</td><td>%s</td></tr>'
                   % (esc(label), count, "%.1f%%" % (100.0 * count / base) if base else "-",
                      esc(base_label + ("" if is_filter else " (a check: removes no rows)")))
                   for label, count, base, base_label, is_filter in bars)
    out = ['<section id="funnel"><h2>Funnel</h2>',
           '<p class="note">Bar length is proportional to the count. Station grounding and '
           'distance plausibility (lighter, indented) are checks on the reachable rows: they '
           'do not remove rows from the later rounds.</p>', chart,
           '<table class="data" id="funnel-table"><thead><tr><th>step</th><th>rows</th>'
           '<th>%</th><th>of</th></tr></thead><tbody>', rows, '</tbody></table>']
    extra = diversity_bars(report)
    if extra:
        top = max([bar[1] for bar in extra] + [1])
        out.append('<h3>Routes (benchmark 3)</h3>')
        out.append(bar_chart([{"label": label, "count": count, "scale_max": top,
                               "text": _pct_text(count, base, base_label)}
                              for label, count, base, base_label in extra],
                             aria="routes: best matches and per-route reachability"))
        div = report["diversity"]
        out.append(_table(["figure", "value"], [
            [label, _pct_text(count, base, base_label)] for label, count, base, base_label
            in extra] + [["RD mean (prediction)", fmt_value(div.get("rd_mean"))],
                         ["RD mean (label)", fmt_value(div.get("rd_label_mean"))]]))
    out.append("</section>")
    return "".join(out)


def metrics_section(report):
    metrics = report.get("metrics", {}) or {}
    cells = []
    for key, label, _, meaning in METRICS:
        if key in metrics:
            cells.append('<div class="metric" data-metric="%s"><div class="mname">%s</div>'
                         '<div class="mval">%s</div><div class="mdesc">%s</div></div>'
                         % (key, esc(label), esc(fmt_metric(key, metrics[key])), esc(meaning)))
    try:
        summary = transitlm.reports.summary_line(metrics)
    except (KeyError, TypeError, ValueError):
        summary = ""
    return ('<section id="metrics"><h2>Metrics (the paper\'s names)</h2><div class="metrics">%s'
            '</div><p class="summary"><code>%s</code></p></section>' % ("".join(cells),
                                                                        esc(summary)))


def failures_section(scan):
    codes = sorted(scan.code_counts.items(),
                   key=lambda item: (_stage_rank(code_stage(item[0])), -item[1], item[0]))
    if not codes:
        return ('<section id="failures"><h2>Failure reasons</h2><p>No row failed a check.</p>'
                '</section>')
    top = max(count for _, count in codes)
    bars = [{"label": code, "count": count, "scale_max": top, "code": code,
             "text": "%d row%s \u00b7 %.1f%% of %d" % (count, "" if count == 1 else "s",
                                                       100.0 * count / scan.rows, scan.rows),
             "css": "stage-" + _css_word(code_stage(code)), "href": "#code=" + code}
            for code, count in codes]
    table = _table(["code", "stage", "rows"], [[code, code_stage(code), count]
                                               for code, count in codes])
    return ('<section id="failures"><h2>Failure reasons</h2><p class="note">Rows per failure '
            'code, in stage order (a row may carry several codes). Each bar is a link that '
            'filters the row list below. %d of %d rows failed at least one check.</p>%s'
            '<details><summary>as a table</summary>%s</details></section>'
            % (scan.failing, scan.rows, bar_chart(bars, width=860, label_width=330,
                                                  value_width=200, aria="failure codes"),
               table))


def _stage_rank(stage):
    return STAGES.index(stage) if stage in STAGES else len(STAGES)


def _css_word(text):
    return re.sub(r"[^a-z0-9_-]", "", text.lower()) or "x"


def _table(headers, rows, css="data"):
    head = "".join("<th>%s</th>" % esc(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join(
        '<td class="num">%s</td>' % esc(cell) if isinstance(cell, (int, float))
        and not isinstance(cell, bool) else "<td>%s</td>" % esc(fmt_value(cell))
        for cell in row) for row in rows)
    return '<table class="%s"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (
        css, head, body)


def _breakdown_table(groups, first_header, with_compliance, order=None):
    headers = [first_header] + [label for _, label in BREAKDOWN_COLUMNS]
    if with_compliance:
        headers.append("compliant")
    rows = []
    for name in sorted(groups, key=order or (lambda key: (-groups[key].get("samples", 0), key))):
        counts = groups[name]
        bases = {"samples": None, "evaluated": "samples", "entered": "samples",
                 "reachable": "entered", "grounding": "reachable",
                 "plausibility": "reachable", "exact": "reachable", "accurate": "exact"}
        row = [name]
        for key, _ in BREAKDOWN_COLUMNS:
            base = bases[key]
            row.append(fmt_count_pct(counts.get(key, 0), counts.get(base, 0) if base else 0))
        if with_compliance:
            row.append(fmt_count_pct(counts.get("compliant", 0), counts.get("judged", 0)))
        rows.append(row)
    return _table(headers, rows)


def breakdowns_section(report, scan):
    out = ['<section id="breakdowns"><h2>Breakdowns</h2><p class="note">Percentages: '
           'evaluated and Round 1 input of rows, reachable of Round 1 input, grounding, '
           'plausibility and exact match of reachable, accurate of exact matches%s.</p>'
           % (", compliant of the rows with a preference verdict" if scan.by_req_type else "")]
    out.append("<h3>Per city</h3>")
    out.append(_breakdown_table(scan.by_city, "city", bool(scan.by_req_type)))
    pref = report.get("rounds", {}).get("preference")
    if isinstance(pref, dict) or scan.by_req_type:
        out.append("<h3>Per preference type (req_type)</h3>")
        by_type = pref.get("by_req_type", {}) if isinstance(pref, dict) else {}
        if by_type:
            out.append(_table(["req_type", "preference", "rows", "compliant",
                               "label compliant"],
                              [[key, item.get("name"), item.get("samples", 0),
                                fmt_count_pct(item.get("compliant", 0), item.get("samples", 0)),
                                fmt_count_pct(item.get("label_compliant", 0),
                                              item.get("samples", 0))]
                               for key, item in sorted(by_type.items(), key=_req_key)]))
        if scan.by_req_type:
            out.append(_breakdown_table(scan.by_req_type, "req_type", True,
                                        order=lambda key: _req_key((key, None))))
    out.append("</section>")
    return "".join(out)


def _req_key(item):
    key = item[0]
    return (0, int(key), key) if key.isdigit() else (1, 0, key)


# ---------------------------------------------------------------------------
# Header
# ---------------------------------------------------------------------------

def header_section(report, scan):
    inputs = report.get("inputs", {}) or {}
    hashes = inputs.get("sha256", {}) or {}
    rows = []
    for role in ("input", "predictions", "station_info", "line_info"):
        path = inputs.get(role)
        if not path and role not in hashes:
            continue
        digest = hashes.get(role) or hashes.get(path) or ""
        rows.append([role, path or "-", digest or "-"])
    if inputs.get("api_url"):
        rows.append(["api_url", inputs["api_url"], "-"])
    options = inputs.get("options") or {}
    option_text = ", ".join("%s=%s" % (key, fmt_value(options[key])) for key in sorted(options))
    counts = report.get("counts", {})
    title = BENCHMARK_TITLES.get(report.get("benchmark"), "TransitLM %s"
                                 % report.get("benchmark"))
    out = ['<header><h1>%s</h1>' % esc(title),
           '<p class="sub">protocol <b>%s</b> \u00b7 field %s \u00b7 version %s</p>'
           % (esc(report.get("protocol")), esc(inputs.get("input_field") or "-"),
              esc(report.get("version") or "-"))]
    if report.get("signature"):
        out.append('<p class="sig">signature <code>%s</code></p>' % esc(report["signature"]))
    out.append(_table(["role", "file", "sha256"], rows, "data inputs"))
    if option_text:
        out.append('<p class="opts">options: %s</p>' % esc(option_text))
    out.append('<p class="counts">samples <b>%d</b> \u00b7 evaluated <b>%d</b> \u00b7 errors '
               '<b>%d</b> \u00b7 no response <b>%d</b> \u00b7 details lines <b>%d</b></p>'
               % (counts.get("samples", 0), counts.get("evaluated", 0),
                  counts.get("errors", 0), counts.get("no_response", 0), scan.rows))
    warnings = [w for w in report.get("warnings", []) or [] if w]
    if scan.rows != counts.get("samples", scan.rows):
        warnings.append("the details file has %d rows, the report %d samples"
                        % (scan.rows, counts.get("samples", 0)))
    if warnings:
        out.append('<div class="warnings"><b>Warnings</b><ul>%s</ul></div>'
                   % "".join("<li>%s</li>" % esc(w) for w in warnings))
    notes = report.get("input_notes") or {}
    if notes:
        out.append('<details class="notes"><summary>input notes</summary>%s</details>'
                   % _table(["note", "value"], [[key, notes[key]] for key in sorted(notes)]))
    out.append("</header>")
    return "".join(out)


# ---------------------------------------------------------------------------
# Row explorer
# ---------------------------------------------------------------------------

def verdict_rows(record, benchmark):
    """(check, verdict, detail) lines of one row."""
    if record.get("status") != "evaluated":
        detail = record.get("error") or ""
        if record.get("generator_error"):
            detail += " (generator: %s)" % fmt_value(record["generator_error"])
        return [(record.get("status"), "-", detail)]
    out = [("reachable", record.get("reachable"), record.get("reachable_reason")),
           ("station grounding", record.get("station_grounding"),
            record.get("station_grounding_reason")),
           ("distance plausibility", record.get("distance_plausibility"),
            record.get("distance_plausibility_reason")),
           ("exact match", record.get("exact_match"),
            "line IoU %s, station IoU %s, access modes %s"
            % (fmt_value(record.get("line_iou")), fmt_value(record.get("station_iou")),
               "match" if record.get("transfer_mode_match") else "differ")),
           ("expert score", record.get("score_band"),
            "%s vs label %s (%s%%)" % (fmt_value(record.get("score")),
                                       fmt_value(record.get("label_score")),
                                       fmt_value(record.get("score_deviation_pct"))))]
    if record.get("exact_match"):
        for key in ("distance", "time", "fare"):
            out.append(("%s accurate" % key, record.get(key + "_accurate"),
                        "MAPE %s%%" % fmt_value(record.get(key + "_mape_pct"))))
        out.append(("access distances accurate", record.get("transfer_accurate"), ""))
    if "compliant" in record:
        out.append(("preference compliant (req_type %s)" % fmt_value(record.get("req_type")),
                    record.get("compliant"), record.get("compliant_reason")))
    if benchmark == "diversity":
        routes = record.get("routes") or {}
        for key in common.ROUTE_KEYS:
            item = routes.get(key) if isinstance(routes, dict) else None
            if isinstance(item, dict):
                out.append(("%s route reachable" % key, item.get("reachable"),
                            "%s; score %s" % (item.get("reachable_reason") or "",
                                              fmt_value(item.get("score")))))
        out.append(("best match", record.get("best_match") or "-",
                    "RD %s (label %s), %s route(s)" % (fmt_value(record.get("rd")),
                                                       fmt_value(record.get("rd_label")),
                                                       fmt_value(record.get("route_count")))))
    return out


def explorer_row(record, benchmark, stops, open_map):
    codes = failure_codes(record)
    stage = first_stage(codes)
    status = str(record.get("status"))
    city = city_of(record)
    reasons = _reasons_text(record, codes)
    svg, notes = row_map(record, benchmark, stops)
    verdicts = "".join('<tr><td>%s</td><td class="v-%s">%s</td><td>%s</td></tr>'
                       % (esc(check), "ok" if verdict is True else "bad" if verdict is False
                          else "na", esc(fmt_value(verdict)), esc(detail or ""))
                       for check, verdict, detail in verdict_rows(record, benchmark))
    return ('<tbody class="r" data-status="%s" data-stage="%s" data-codes="%s" data-city="%s">'
            '<tr class="head"><td class="num">%s</td><td class="id">%s</td><td>%s</td>'
            '<td>%s</td><td>%s</td><td>%s</td></tr>'
            '<tr class="more"><td colspan="6"><details%s><summary>map and verdicts</summary>'
            '<div class="rowbody"><div class="mapbox">%s%s</div><table class="verdicts">'
            '<tbody>%s</tbody></table></div></details></td></tr></tbody>'
            % (esc(status), esc(stage), esc(" ".join(codes)), esc(city),
               esc(record.get("row")), esc(record.get("index_id") or "(no id)"), esc(city),
               esc(status), esc(stage), esc(reasons), " open" if open_map else "", svg, notes,
               verdicts))


def _reasons_text(record, codes):
    """The row's codes and the reasons of its failed verdicts (read from the record)."""
    if not codes:
        return "passed every check"
    texts = []
    if record.get("error"):
        texts.append(clean_text(record["error"]))
    for verdict, reason in (("reachable", "reachable_reason"),
                            ("station_grounding", "station_grounding_reason"),
                            ("distance_plausibility", "distance_plausibility_reason"),
                            ("compliant", "compliant_reason")):
        if record.get(verdict) is False and record.get(reason) \
                and record.get("status") == "evaluated":
            texts.append(clean_text(record[reason]))
    return "; ".join(codes) + (" \u2014 " + "; ".join(texts) if texts else "")


def explorer_section(scan, rows, benchmark, stops):
    options = {"status": sorted(scan.statuses),
               "stage": sorted({code_stage(code) for code in scan.code_counts},
                               key=_stage_rank) + ["passed"],
               "code": sorted(scan.code_counts, key=lambda c: (_stage_rank(code_stage(c)), c)),
               "city": sorted(scan.by_city)}
    selects = "".join(
        '<label>%s <select id="f-%s"><option value="">all</option>%s</select></label>'
        % (name, name, "".join('<option value="%s">%s</option>' % (esc(v), esc(v))
                               for v in values))
        for name, values in (("status", options["status"]), ("stage", options["stage"]),
                             ("code", options["code"]), ("city", options["city"])))
    left_out = scan.rows - len(rows)
    listed_failing = sum(1 for record in rows if failure_codes(record))
    body = "".join(explorer_row(record, benchmark, stops, index == 0)
                   for index, record in enumerate(rows))
    return ('<section id="rows"><h2>Rows</h2><p class="note">%d of %d rows listed (%d with a '
            'failure, %d passed); <b>%d rows left out</b> of this page (limit --html_rows %d: '
            'failures first, spread over every failure code, then a deterministic sample of '
            'passed rows). The full list is in details.jsonl.</p>'
            '<div class="filters">%s<label>search <input id="f-text" type="search" '
            'placeholder="id, reason, city"></label><button id="f-reset" type="button">reset'
            '</button></div><p id="shown" class="note" aria-live="polite"></p>'
            '<table class="rows"><thead><tr><th>row</th><th>id</th><th>city</th><th>status</th>'
            '<th>first failed stage</th><th>reasons</th></tr></thead>%s</table></section>'
            % (len(rows), scan.rows, listed_failing, len(rows) - listed_failing, left_out,
               scan.limit, selects, body))


# ---------------------------------------------------------------------------
# Page shell
# ---------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;
 color:#1f2328;background:#fff;margin:0 auto;max-width:1180px;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;
 border-bottom:1px solid #d0d7de;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
code{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;background:#f3f4f6;padding:1px 4px;
 border-radius:3px;word-break:break-all}
.sub,.sig,.opts,.counts,.note{margin:4px 0;color:#3d444d}.note{font-size:13px}
table.data,table.rows,table.verdicts{border-collapse:collapse;margin:8px 0;font-size:13px}
table.data th,table.data td,table.rows th,table.rows td,table.verdicts td{
 border-bottom:1px solid #e1e4e8;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
table.inputs td:nth-child(3){font:11px ui-monospace,Menlo,Consolas,monospace;color:#3d444d}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.warnings{background:#fff8e1;border:1px solid #c9a227;padding:6px 12px;margin:8px 0;
 border-radius:4px}.warnings ul{margin:4px 0;padding-left:20px}
svg.chart{display:block;max-width:100%;height:auto;margin:8px 0}
svg.chart text{font-size:12.5px;fill:#1f2328}svg.chart text.lbl{text-anchor:end}
svg .bar{fill:#2f6f9f}svg .bar.check{fill:#8fb3cf}svg .bar.stage-error{fill:#8a3b3b}
svg .bar.stage-no_response{fill:#7a5c2e}svg a.codelink:hover .bar,svg a.codelink:focus .bar{
 fill:#113f63}svg a.codelink text.lbl{text-decoration:underline;fill:#0b4f8a}
.metrics{display:flex;flex-wrap:wrap;gap:8px}.metric{border:1px solid #d0d7de;border-radius:6px;
 padding:6px 12px;min-width:92px}.mname{font-weight:600;font-size:13px}
.mval{font-size:20px;font-variant-numeric:tabular-nums}.mdesc{font-size:11px;color:#4b535c;
 max-width:130px}.summary{margin-top:10px}
.filters{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin:8px 0;
 padding:8px;background:#f6f8fa;border-radius:6px}.filters select,.filters input{
 font:inherit;padding:2px 4px}
table.rows{width:100%}table.rows tbody.r tr.head td{border-bottom:none;padding-top:6px}
table.rows td.id{font:12px ui-monospace,Menlo,Consolas,monospace}
table.rows tr.more td{padding:0 0 6px 0}table.rows tbody.r{border-bottom:1px solid #d0d7de}
details>summary{cursor:pointer;color:#0b4f8a}.rowbody{display:flex;flex-wrap:wrap;gap:16px;
 padding:6px 0}.mapbox{max-width:460px}
svg.map{border:1px solid #d0d7de;border-radius:4px;display:block}svg.map .bg{fill:#fbfbfa}
svg.map line.seg{stroke-linecap:round}svg.map polyline{fill:none;stroke-linecap:round;
 stroke-linejoin:round}
svg.map .limit{fill:none;stroke:#6e7781;stroke-dasharray:3 4;stroke-width:1}
svg.map .stop,svg.map .stops circle{stroke:#1f2328;stroke-width:1}svg.map .mark rect{fill:#1f2328}
svg.map .mark text,svg.map .scale text,svg.map .north{font-size:11px;fill:#1f2328}
svg.map text.acc{font-size:10.5px;fill:#3d444d;paint-order:stroke;stroke:#fbfbfa;
 stroke-width:3px}svg.map .mark text{paint-order:stroke;stroke:#fbfbfa;stroke-width:3px}
svg.map .scale path{fill:none;stroke:#1f2328;stroke-width:1.5}
ul.legend{list-style:none;padding:0;margin:6px 0;font-size:12px}ul.legend li{margin:2px 0}
.swatch{display:inline-block;width:22px;height:0;border-top:4px solid;margin-right:6px;
 vertical-align:middle}.swatch.dotted{border-top-style:dotted;border-top-width:3px}
.broken{color:#a31515;font-size:12px}.missing{color:#5c4400;font-size:12px}
table.verdicts td.v-ok{color:#116329}table.verdicts td.v-bad{color:#a31515;font-weight:600}
nav a{margin-right:12px}
"""

SCRIPT = """
(function(){
window.onerror=function(m){document.body.setAttribute('data-js-error',String(m));};
var rows=[].slice.call(document.querySelectorAll('tbody.r'));
var f={status:get('f-status'),stage:get('f-stage'),code:get('f-code'),city:get('f-city'),
 text:get('f-text')};
function get(id){return document.getElementById(id);}
function apply(){
 var q=(f.text&&f.text.value||'').toLowerCase(),shown=0;
 rows.forEach(function(r){
  var d=r.dataset,ok=(!f.status.value||d.status===f.status.value)&&
   (!f.stage.value||d.stage===f.stage.value)&&
   (!f.code.value||(' '+d.codes+' ').indexOf(' '+f.code.value+' ')>=0)&&
   (!f.city.value||d.city===f.city.value)&&
   (!q||r.rows[0].textContent.toLowerCase().indexOf(q)>=0);
  r.hidden=!ok;if(ok)shown++;});
 get('shown').textContent=shown+' of '+rows.length+' listed rows shown';}
function fromHash(){
 var h=decodeURIComponent(location.hash||'');
 if(h.indexOf('#code=')===0&&f.code){f.code.value=h.slice(6);apply();
  get('rows').scrollIntoView();}}
if(f.status){
 ['status','stage','code','city'].forEach(function(k){f[k].addEventListener('change',apply);});
 f.text.addEventListener('input',apply);
 get('f-reset').addEventListener('click',function(){
  ['status','stage','code','city','text'].forEach(function(k){f[k].value='';});apply();});
 window.addEventListener('hashchange',fromHash);apply();fromHash();}
document.body.setAttribute('data-ready','1');
})();
"""


def page(title, body):
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<title>%s</title><style>%s</style></head><body>%s<script>%s</script></body>'
            '</html>\n' % (esc(title), CSS, body, SCRIPT))


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def evaluator_page(report, details_path, network, html_rows=500):
    """The HTML page of one evaluator run (report.json dict + details.jsonl path)."""
    benchmark = report.get("benchmark")
    scan = scan_details(details_path, html_rows)
    wanted = [key[3] for key in scan.selected()]
    fetched = fetch_rows(details_path, wanted)
    rows = [fetched[number] for number in wanted if number in fetched]
    stops = Stops(network, prefix_fallback=(benchmark == "general_llm"))
    nav = ('<nav><a href="#funnel">funnel</a><a href="#metrics">metrics</a>'
           '<a href="#failures">failure reasons</a><a href="#breakdowns">breakdowns</a>'
           '<a href="#rows">rows</a></nav>')
    body = "".join((header_section(report, scan), nav, funnel_section(report),
                    metrics_section(report), failures_section(scan),
                    breakdowns_section(report, scan),
                    explorer_section(scan, rows, benchmark, stops)))
    title = "%s (%s)" % (BENCHMARK_TITLES.get(benchmark, str(benchmark)),
                         report.get("protocol"))
    return page(title, body)


def write_text(path, text):
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace",
                  newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise common.InputError("cannot write %s: %s" % (path, exc.strerror or exc))


def write_evaluator_page(path, report, details_path, network, html_rows=500):
    write_text(path, evaluator_page(report, details_path, network, html_rows))


# ---------------------------------------------------------------------------
# Comparison page
# ---------------------------------------------------------------------------

def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _interval(ci):
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(v) is not None
                                                               for v in ci):
        return float(ci[0]), float(ci[1])
    return None


def metric_chart(metric, runs):
    """Bars of one metric per run with CI whiskers, labelled with the values."""
    entries = []
    for run in runs:
        item = (run.get("metrics") or {}).get(metric) or {}
        entries.append((str(run.get("name")), _number(item.get("value")),
                        _interval(item.get("ci"))))
    highs = [abs(v) for _, v, _ in entries if v is not None]
    highs += [max(abs(ci[0]), abs(ci[1])) for _, _, ci in entries if ci]
    top = max(highs + [1e-12])
    kind = METRIC_INFO.get(metric, ("", "frac", ""))[1]
    if kind == "rate":
        top = max(top, 1.0) if top > 0.5 else top
    label_w, value_w, width, row_h, gap = 200, 260, 760, 22, 8
    area = width - label_w - value_w
    parts = []
    for index, (name, value, ci) in enumerate(entries):
        y = index * (row_h + gap)
        text = fmt_metric(metric, value)
        if ci:
            text += " [%s, %s]" % (fmt_metric(metric, ci[0]), fmt_metric(metric, ci[1]))
        length = area * max(value, 0) / top if value is not None else 0
        part = ('<text class="lbl" x="%d" y="%s">%s</text><rect class="bar" x="%d" y="%d" '
                'width="%s" height="%d" />' % (label_w - 8, n(y + row_h * 0.7), esc(name),
                                               label_w, y, n(length), row_h))
        end = length
        if ci:
            lo = label_w + area * max(ci[0], 0) / top
            hi = label_w + area * max(ci[1], 0) / top
            mid = y + row_h / 2.0
            part += ('<path class="whisker" d="M%s %sH%sM%s %sV%sM%s %sV%s" />'
                     % (n(lo), n(mid), n(hi), n(lo), n(mid - 6), n(mid + 6), n(hi), n(mid - 6),
                        n(mid + 6)))
            end = max(end, hi - label_w)
        part += '<text class="val" x="%s" y="%s">%s</text>' % (n(label_w + end + 8),
                                                               n(y + row_h * 0.7), esc(text))
        parts.append("<g><title>%s: %s</title>%s</g>" % (esc(name), esc(text), part))
    height = max(len(entries) * (row_h + gap), row_h)
    label = METRIC_INFO.get(metric, (metric, "", ""))[0]
    return ('<figure class="mchart"><figcaption>%s</figcaption><svg class="chart" '
            'viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s per run">%s'
            '</svg></figure>' % (esc(label), width, height, width, height, esc(label),
                                 "".join(parts)))


def _metric_order(runs):
    seen = []
    for run in runs:
        for key in (run.get("metrics") or {}):
            if key not in seen:
                seen.append(key)
    known = [key for key, _, _, _ in METRICS if key in seen]
    return known + sorted(key for key in seen if key not in known)


def breakdown_html(value, depth=0):
    """A generic rendering of the comparison's breakdowns: tables where the
    shape allows (dict of dicts of scalars, list of dicts), else nested lists."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()) \
            and all(not isinstance(x, (dict, list)) for v in value.values() for x in v.values()):
        columns = []
        for item in value.values():
            for key in item:
                if key not in columns:
                    columns.append(key)
        return _table([""] + columns, [[key] + [item.get(c) for c in columns]
                                       for key, item in value.items()])
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) \
            and all(not isinstance(x, (dict, list)) for v in value for x in v.values()):
        columns = []
        for item in value:
            for key in item:
                if key not in columns:
                    columns.append(key)
        return _table(columns, [[item.get(c) for c in columns] for item in value])
    if isinstance(value, dict):
        level = min(3 + depth, 6)
        return "".join("<h%d>%s</h%d>%s" % (level, esc(key), level,
                                            breakdown_html(item, depth + 1))
                       for key, item in value.items())
    return "<p>%s</p>" % esc(fmt_value(value))


def comparison_page(result):
    """The HTML page of compare.py's --json result: runs side by side."""
    runs = [run for run in result.get("runs") or [] if isinstance(run, dict)]
    metrics = _metric_order(runs)
    rows_info = result.get("rows") or {}
    out = ['<header><h1>TransitLM run comparison</h1>',
           '<p class="sub">baseline <b>%s</b> \u00b7 confidence %s \u00b7 bootstrap %s '
           'resamples \u00b7 seed %s \u00b7 paired rows %s \u00b7 missing rows %s</p>'
           % (esc(result.get("baseline")), esc(fmt_value(result.get("confidence"))),
              esc(fmt_value(result.get("bootstrap"))), esc(fmt_value(result.get("seed"))),
              esc(fmt_value(rows_info.get("paired"))), esc(fmt_value(rows_info.get("missing")))),
           _table(["run", "benchmark", "protocol", "rows", "signature", "path"],
                  [[run.get("name"), run.get("benchmark"), run.get("protocol"),
                    run.get("rows"), run.get("signature"), run.get("path")] for run in runs]),
           "</header>"]
    table_rows = []
    for metric in metrics:
        row = [METRIC_INFO.get(metric, (metric,))[0]]
        for run in runs:
            item = (run.get("metrics") or {}).get(metric) or {}
            text = fmt_metric(metric, _number(item.get("value")))
            ci = _interval(item.get("ci"))
            if ci:
                text += " [%s, %s]" % (fmt_metric(metric, ci[0]), fmt_metric(metric, ci[1]))
            row.append(text)
        table_rows.append(row)
    out.append('<section id="metrics"><h2>Metrics</h2><p class="note">Value with its %s '
               'bootstrap interval in brackets.</p>%s' % (
                   esc(fmt_value(result.get("confidence"))),
                   _table(["metric"] + [str(run.get("name")) for run in runs], table_rows)))
    out.append('<h3>Per metric</h3><p class="note">Bars: the value; whiskers: the interval.'
               '</p>')
    out.extend(metric_chart(metric, runs) for metric in metrics)
    out.append("</section>")
    comparisons = [c for c in result.get("comparisons") or [] if isinstance(c, dict)]
    out.append('<section id="significance"><h2>Differences from the baseline</h2>%s</section>'
               % (_table(["run", "metric", "difference", "interval", "p-value", "significant"],
                         [[c.get("run"), METRIC_INFO.get(c.get("metric"),
                                                         (c.get("metric"),))[0],
                           fmt_delta(c.get("metric"), _number(c.get("delta"))),
                           ("[%s, %s]" % tuple(fmt_delta(c.get("metric"), v)
                                               for v in _interval(c.get("ci"))))
                           if _interval(c.get("ci")) else "-",
                           "%.4f" % c["p_value"] if _number(c.get("p_value")) is not None
                           else "-",
                           "yes" if c.get("significant") else "no"] for c in comparisons])
                  if comparisons else "<p>No comparisons.</p>"))
    breakdowns = result.get("breakdowns")
    if breakdowns:
        out.append('<section id="breakdowns"><h2>Breakdowns</h2>%s</section>'
                   % breakdown_html(breakdowns))
    return page("TransitLM run comparison", "".join(out))
