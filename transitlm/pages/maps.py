"""Route maps: inline SVG of a row's predicted and label routes on the stations'
coordinates (projection, scale bar, legs, legend).
"""

import math
import unicodedata
import common
from common import BUS_STOP_PREFIX
from transitlm.pages.layout import (
    TEXT_COLOUR, bdi, clean_text, cut_text, esc, fmt_value, isolated, n)


# Colour-blind-safe hues (Okabe-Ito), each at least 4.5:1 on white except
# where a text label always accompanies them.
LINE_COLOURS = ("#0065a8", "#b34700", "#007a5a", "#a8428f", "#8a6100", "#3d3d99")
ROUTE_COLOURS = {"first": "#0065a8", "second": "#b34700", "third": "#007a5a"}
DIVERSITY_WIDTHS = {"first": 7, "second": 4.5, "third": 2}
LABEL_GREY = "#a6a6a6"
BROKEN_RED = "#c81e1e"

MAP_WIDTH = 440
MAP_HEIGHT = 300
MAP_PAD = 28
KM_PER_DEGREE = common.EARTH_RADIUS_KM * math.pi / 180.0
NICE_KM = (0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 500, 1000)


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
# Label placement
# ---------------------------------------------------------------------------

MARK_FONT_PX = 11.0           # svg.map .mark text (static.CSS)
ACCESS_FONT_PX = 10.5         # svg.map text.acc
LEADER_MIN_PX = 12.0          # a label farther than this from its point gets a leader line
MODE_LABEL_COLUMNS = 24       # an access leg's mode in its label (a model wrote it)


def text_box_size(text, font_px):
    """Estimated (width, height) in px of one line of ``text``: a wide (CJK)
    character is 1 em, any other 0.62 em (wider than the average Latin glyph
    of a sans-serif, so the estimate errs on the side of more room)."""
    ems = sum(1.0 if unicodedata.east_asian_width(char) in "WF" else 0.62 for char in text)
    return ems * font_px, font_px * 1.25


def boxes_overlap(a, b, gap=0.0):
    """Do boxes (left, top, width, height) overlap, or come closer than ``gap``?"""
    return (a[0] < b[0] + b[2] + gap and b[0] < a[0] + a[2] + gap
            and a[1] < b[1] + b[3] + gap and b[1] < a[1] + a[3] + gap)


# Directions tried around a point, in order of preference: right, left,
# above, below, then the four diagonals.
_DIRECTIONS = ((1, 0), (-1, 0), (0, -1), (0, 1), (1, -1), (1, 1), (-1, -1), (-1, 1))


def label_candidates(x, y, width, height, offset, rings=12):
    """Boxes (left, top, width, height) for a label of a point, nearest first:
    the eight directions at ``offset`` px from the point, then again at
    growing distances (rings of 1.5 x the label height further out)."""
    out = []
    for ring in range(rings):
        distance = offset + ring * height * 1.5
        for dx, dy in _DIRECTIONS:
            left = x + distance if dx > 0 else x - distance - width if dx < 0 \
                else x - width / 2.0
            top = y + distance if dy > 0 else y - distance - height if dy < 0 \
                else y - height / 2.0
            out.append((left, top, width, height))
    return out


def place_labels(labels, obstacles=(), bounds=None, gap=2.0):
    """Greedy label placement: each label, in the given order (most important
    first), takes its first candidate position (``label_candidates``) that
    lies inside ``bounds`` (left, top, width, height) and overlaps neither an
    obstacle nor a label placed before it (boxes ``gap`` px apart).  When no
    candidate is free the one overlapping the least area is taken.

    labels: (x, y, width, height, offset) per label; obstacles: boxes.
    -> a box (left, top, width, height) per label, in order.
    """
    taken = [tuple(box) for box in obstacles]
    placed = []
    for x, y, width, height, offset in labels:
        best, best_cost = None, None
        for box in label_candidates(x, y, width, height, offset):
            if bounds is not None and not _inside(box, bounds):
                continue
            cost = sum(_overlap_area(box, other, gap) for other in taken)
            if best is None or cost < best_cost:
                best, best_cost = box, cost
            if cost == 0:
                break
        if best is None:            # nothing inside the bounds: the nearest, clamped
            best = _clamp(label_candidates(x, y, width, height, offset, 1)[0], bounds)
        placed.append(best)
        taken.append(best)
    return placed


def _inside(box, bounds):
    return (box[0] >= bounds[0] and box[1] >= bounds[1]
            and box[0] + box[2] <= bounds[0] + bounds[2]
            and box[1] + box[3] <= bounds[1] + bounds[3])


def _clamp(box, bounds):
    if bounds is None:
        return box
    left = min(max(box[0], bounds[0]), bounds[0] + bounds[2] - box[2])
    top = min(max(box[1], bounds[1]), bounds[1] + bounds[3] - box[3])
    return (left, top, box[2], box[3])


def _overlap_area(a, b, gap):
    width = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]) + gap
    height = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]) + gap
    return width * height if width > 0 and height > 0 else 0.0


def box_distance(box, x, y):
    """Distance in px from a point to the nearest point of a box."""
    dx = max(box[0] - x, 0.0, x - box[0] - box[2])
    dy = max(box[1] - y, 0.0, y - box[1] - box[3])
    return math.hypot(dx, dy)


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


def swatch(colour, style="solid"):
    """A legend's sample of a line: solid, dotted (access legs) or dashed."""
    dash = {"dotted": ' stroke-dasharray="2 3"',
            "dashed": ' stroke-dasharray="6 4"'}.get(style, "")
    return ('<svg class="swatch" width="22" height="6" aria-hidden="true"><line x1="1" y1="3" '
            'x2="21" y2="3" stroke="%s" stroke-width="%s"%s /></svg>'
            % (colour, 3 if style == "dotted" else 4, dash))


def iso_join(values, separator=", "):
    """Texts from outside, each isolated (layout.isolated), joined."""
    return esc(separator).join(isolated(value) for value in values)


def bdi_join(values, separator=", "):
    """Texts from outside, each in its <bdi>, joined."""
    return esc(separator).join(bdi(value) for value in values)


# Direction arrows along every route: one every ARROW_SPACING_PX of its drawn
# length, the label's starting a quarter of that in, a prediction's half, so
# that the two show apart where they share a hop, in either direction.
ARROW_LENGTH_PX = 11.0
ARROW_HALF_WIDTH_PX = 5.0
ARROW_SPACING_PX = 60.0
LABEL_ARROW_START = 0.25 * ARROW_SPACING_PX
PREDICTION_ARROW_START = 0.5 * ARROW_SPACING_PX


def arrow_head(a, b, label_style=False, at=0.5):
    """Path data of an arrowhead on the projected hop a -> b, pointing to b,
    its middle at fraction ``at`` of the hop (the tip, then two relative
    steps to the corners of its base); "" when the hop is too short."""
    (x1, y1), (x2, y2) = a, b
    length = math.hypot(x2 - x1, y2 - y1)
    if length < 1.2 * ARROW_LENGTH_PX:
        return ""
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    mx, my = x1 + (x2 - x1) * at, y1 + (y2 - y1) * at
    half, width = ARROW_LENGTH_PX / 2.0, ARROW_HALF_WIDTH_PX
    if label_style:
        half, width = half * 0.85, width * 0.85
    tip_x, tip_y = mx + ux * half, my + uy * half
    return "M%s %sl%s %sl%s %sz" % (n(tip_x), n(tip_y), n(-2 * half * ux - width * uy),
                                     n(-2 * half * uy + width * ux), n(2 * width * uy),
                                     n(-2 * width * ux))


def arrow_paths(heads, label_style=False):
    """Arrowheads [(colour, path data)] as one <path> per colour (class
    ``dir``; ``dir lbl`` and the stylesheet's grey for a label route's)."""
    by_colour = {}
    for colour, head in heads:
        if head:
            by_colour.setdefault(colour, []).append(head)
    if label_style:
        return ['<path class="dir lbl" d="%s" />' % "".join(
            head for heads_ in by_colour.values() for head in heads_)] if by_colour else []
    return ['<path class="dir" d="%s" fill="%s" />' % ("".join(heads_), colour)
            for colour, heads_ in by_colour.items()]


def route_arrows(hops, label_style=False):
    """Arrowheads along a route of projected hops [(colour, a, b)], in its
    order: one every ARROW_SPACING_PX of drawn length, each whole on the hop
    it falls on (moved along it, or onto the next hop when the hop is too
    short to hold one), and at least one -- on the longest hop -- when the
    route has a hop long enough; -> [(colour, path data)]."""
    out = []
    walked = 0.0
    next_at = LABEL_ARROW_START if label_style else PREDICTION_ARROW_START
    half = ARROW_LENGTH_PX / 2.0
    for colour, a, b in hops:
        length = math.hypot(b[0] - a[0], b[1] - a[1])
        if length < 1.2 * ARROW_LENGTH_PX:          # too short: the next hop takes it
            next_at = max(next_at, walked + length)
        while next_at <= walked + length:
            offset = min(max(next_at - walked, half), length - half)   # whole on the hop
            out.append((colour, arrow_head(a, b, label_style, offset / length)))
            next_at = walked + offset + ARROW_SPACING_PX
        walked += length
    if not out and hops:
        colour, a, b = max(hops, key=lambda hop: math.hypot(hop[2][0] - hop[1][0],
                                                             hop[2][1] - hop[1][1]))
        head = arrow_head(a, b, label_style, 0.5)
        if head:
            out.append((colour, head))
    return out


class MapBuilder(object):
    """The SVG of one row's routes, plus the notes listed under it.

    Titles and label texts are queued as HTML already escaped (text from
    outside isolated: ``isolated``)."""

    def __init__(self, stops):
        self.stops = stops
        self.layers = {"circles": [], "label": [], "access": [], "pred": [], "broken": [],
                       "arrows": [], "dots": [], "marks": []}
        self.points = []          # every projected point, to fit the box
        self.missing = []         # (stop, which route)
        self.broken = []          # (what, stop, stop) of each hop not connected
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
        """Queue a route of stop ids: legs coloured, broken hops dashed red,
        an arrow on each hop."""
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

    def add_segment(self, a, b, colour, dashed, title, layer="pred", width=2.5, arrow=False):
        """A straight line a -> b (``title``: HTML); ``arrow``: its direction."""
        if a is None or b is None:
            return
        self.points.extend((a, b))
        self._pending.append(("segment", a, b, colour, dashed, title, layer, width, arrow))

    def add_access(self, point, stop_point, mode, title, colour):
        if point is None:
            return
        self.points.append(point)
        limit = common.access_threshold_km(mode)
        self._pending.append(("circle", point, limit, mode))
        if stop_point is not None:
            self._pending.append(("segment", point, stop_point, colour, "1 4", title,
                                  "access", 2, False))
            straight = common.haversine_km(point[0], point[1], stop_point[0], stop_point[1])
            mode = cut_text(mode or common.WALK, MODE_LABEL_COLUMNS)   # whole in the title
            self._pending.append(("access_label", point, stop_point,
                                  "%s %.1f km" % (mode, straight),
                                  "%s %.1f km" % (isolated(mode), straight)))

    def add_dot(self, point, title, colour):
        """A station dot (``title``: HTML)."""
        if point is not None:
            self.points.append(point)
            self._pending.append(("dot", point, title, colour))

    def begin_group(self, key):
        """What is queued until end_group is drawn in groups of class
        ``rk rk-<key>`` (one per layer), which the page's route switch shows
        or hides; labels queued meanwhile carry those classes too."""
        self._pending.append(("begin", key))

    def end_group(self):
        self._pending.append(("end",))

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
        # (x, y, text, font px, css, offset, markup), most important first;
        # ``text`` estimates the size, ``markup`` is what is written.
        self._labels = []
        self._obstacles = []    # boxes labels keep clear of
        self._group = None      # (key, layer lengths at its start) while drawing a group
        for item in self._pending:
            getattr(self, "_draw_" + item[0])(project, *item[1:])
        bar_km = scale_bar_km(project.px_per_km, MAP_WIDTH / 4.0)
        bar_px = bar_km * project.px_per_km
        y = MAP_HEIGHT - 12
        bar_text = "%g km" % bar_km
        scale = ('<g class="scale"><path d="M%s %sv-5h%sv5" /><text x="%s" y="%s">%s</text>'
                 '</g>' % (n(12), n(y), n(bar_px), n(18 + bar_px), n(y), bar_text))
        north = '<text class="north" x="%s" y="16">N \u2191</text>' % n(MAP_WIDTH - 30)
        self._obstacles.append((10, y - 12, 8 + bar_px + text_box_size(bar_text, 11)[0], 15))
        self._obstacles.append((MAP_WIDTH - 32, 4, 30, 15))
        self._place_labels()
        body = "".join("".join(self.layers[name]) for name in
                       ("circles", "label", "access", "pred", "broken", "arrows", "dots",
                        "marks"))
        return ('<svg class="map" viewBox="0 0 %d %d" width="%d" height="%d" role="img" '
                'aria-label="%s"><rect class="bg" width="%d" height="%d" />%s%s%s</svg>'
                % (MAP_WIDTH, MAP_HEIGHT, MAP_WIDTH, MAP_HEIGHT, esc(aria_label),
                   MAP_WIDTH, MAP_HEIGHT, body, scale, north))

    def _place_labels(self):
        """The map's text labels, placed clear of each other and of the
        markers, the scale bar and the north arrow (``place_labels``); a label
        moved away from its point is tied to it by a thin leader line."""
        requests = []
        for x, y, text, font_px, _, offset, _ in self._labels:
            width, height = text_box_size(text, font_px)
            requests.append((x, y, width, height, offset))
        boxes = place_labels(requests, self._obstacles,
                             (2, 2, MAP_WIDTH - 4, MAP_HEIGHT - 4))
        self.label_boxes = boxes
        for (x, y, text, font_px, css, offset, markup), box in zip(self._labels, boxes):
            if box_distance(box, x, y) > max(offset, LEADER_MIN_PX):
                near_x = min(max(x, box[0]), box[0] + box[2])
                near_y = min(max(y, box[1]), box[1] + box[3])
                self.layers["marks"].append(
                    '<line class="leader%s" x1="%s" y1="%s" x2="%s" y2="%s" />'
                    % (css[css.find(" "):] if " " in css else "", n(x), n(y), n(near_x),
                       n(near_y)))
            self.layers["marks"].append(
                '<text class="%s" x="%s" y="%s">%s</text>'
                % (css, n(box[0]), n(box[1] + 0.9 * font_px), markup))

    def _draw_route(self, project, located, which, label_style, leg_width):
        """Connected hops of one colour as one polyline; a broken hop as a
        dashed red line; an arrow on each hop (its direction); stations as
        dots named on hover."""
        runs = []                 # (colour, width, [points]) drawn as polylines
        arrows = []               # (colour, a, b) of each hop drawn
        dots = []
        previous = None
        for stop, point, colour in located:
            if point is not None:
                name = self.stops.name(stop)
                dots.append((point, "%s (%s)" % (isolated(name), isolated(stop)) if name
                             else isolated(stop), colour))
            if previous is not None and previous[1] is not None and point is not None:
                here = previous[0]
                if label_style:
                    runs.append((LABEL_GREY, 7, [previous[1], point]))
                    arrows.append((LABEL_GREY, previous[1], point))
                elif self.stops.connected(here, stop):
                    same_leg = previous[2] == colour
                    runs.append((colour if same_leg else TEXT_COLOUR,
                                 leg_width if same_leg else 1.5,
                                 [previous[1], point]))
                    arrows.append((colour if same_leg else TEXT_COLOUR, previous[1], point))
                else:
                    self.broken.append((which + ": ", here, stop))
                    self.layers["broken"].append(_line(
                        project, previous[1], point, BROKEN_RED, "6 4", 2.5,
                        "%s \u2192 %s not connected" % (isolated(here), isolated(stop))))
                    arrows.append((BROKEN_RED, previous[1], point))
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
        # Arrows over every line (route_arrows).
        self.layers["arrows"].extend(arrow_paths(route_arrows(
            [(colour, project(a), project(b)) for colour, a, b in arrows], label_style),
            label_style))
        target = self.layers["label" if label_style else "dots"]
        for colour in sorted({colour for _, _, colour in dots}):
            target.append('<g class="stops" fill="%s">%s</g>' % (colour, "".join(
                '<circle cx="%s" cy="%s" r="%s"><title>%s</title></circle>'
                % (n(project(point)[0]), n(project(point)[1]), 2.6 if label_style else 3.4,
                   title + " \u2014 " + esc(which))
                for point, title, dot_colour in dots if dot_colour == colour)))

    def _draw_begin(self, project, key):
        self._group = (key, {name: len(items) for name, items in self.layers.items()})

    def _draw_end(self, project):
        key, lengths = self._group
        self._group = None
        for name, items in self.layers.items():
            start = lengths[name]
            if len(items) > start:
                items[start:] = ['<g class="rk rk-%s">%s</g>' % (esc(key), "".join(items[start:]))]

    def _group_css(self):
        return " rk rk-%s" % esc(self._group[0]) if self._group else ""

    def _draw_segment(self, project, a, b, colour, dashed, title, layer, width, arrow):
        self.layers[layer].append(_line(project, a, b, colour, dashed, width, title))
        if arrow:
            self.layers["arrows"].extend(arrow_paths([(colour,
                                                      arrow_head(project(a), project(b)))]))

    def _draw_circle(self, project, point, limit_km, mode):
        x, y = project(point)
        self.layers["circles"].append(
            '<circle class="limit" cx="%s" cy="%s" r="%s"><title>access limit %g km (%s)'
            '</title></circle>' % (n(x), n(y), n(limit_km * project.px_per_km), limit_km,
                                   isolated(mode or common.WALK)))

    def _draw_access_label(self, project, a, b, text, markup):
        (x1, y1), (x2, y2) = project(a), project(b)
        self._labels.append(((x1 + x2) / 2, (y1 + y2) / 2, text, ACCESS_FONT_PX,
                             "acc" + self._group_css(), 4.0, markup))

    def _draw_dot(self, project, point, title, colour):
        self.layers["dots"].append(_dot(project, point, title, colour, 4.5))

    def _draw_mark(self, project, point, text):
        x, y = project(point)
        self.layers["marks"].append('<rect class="mark" x="%s" y="%s" width="12" height="12">'
                                    '<title>%s</title></rect>' % (n(x - 6), n(y - 6), esc(text)))
        self._obstacles.append((x - 6, y - 6, 12, 12))
        # Marks are queued after the access legs; their labels are placed first.
        self._labels.insert(sum(1 for item in self._labels if item[4] == "mk"),
                            (x, y, text, MARK_FONT_PX, "mk", 9.0, esc(text)))


def _line(project, a, b, colour, dashed, width, title, css="seg"):
    """A line a -> b; ``title`` is HTML."""
    x1, y1 = project(a)
    x2, y2 = project(b)
    dash = ' stroke-dasharray="%s"' % dashed if dashed else ""
    return ('<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s>'
            '<title>%s</title></line>' % (css, n(x1), n(y1), n(x2), n(y2), colour, width, dash,
                                          title))


def _dot(project, point, title, colour, radius):
    """A station dot; ``title`` is HTML."""
    x, y = project(point)
    return ('<circle class="stop" cx="%s" cy="%s" r="%s" fill="%s"><title>%s</title></circle>'
            % (n(x), n(y), radius, colour, title))


def point_of(value):
    return (float(value[0]), float(value[1])) if isinstance(value, list) and valid_point(value) \
        else None


def route_switch(name, keys):
    """Radio buttons (no script: CSS shows the chosen route, static.CSS) that
    show every route of a benchmark-3 map, or one: 'all' and one per key.
    They precede the map's svg in the same box."""
    out = ['<span class="swl">show</span>']
    for key in ("all",) + tuple(keys):
        ident = "%s-%s" % (name, key)
        sample = swatch(ROUTE_COLOURS[key]) if key in ROUTE_COLOURS else ""
        out.append('<input type="radio" name="%s" id="%s" class="o-%s"%s><label for="%s">'
                   '%s%s</label>' % (name, ident, key, " checked" if key == "all" else "",
                                     ident, sample, key))
    return "".join(out)


def row_map(record, benchmark, stops, switch_id="rs"):
    """One row's map: (svg text, notes html).  A benchmark-3 map with more
    than one predicted route comes after a route switch (radio buttons named
    ``switch_id``, unique on the page)."""
    builder = MapBuilder(stops)
    origin, destination = point_of(record.get("origin")), point_of(record.get("destination"))
    preds = record.get("prediction_routes") or {}
    labels = record.get("label_routes") or {}
    legend = []             # (colour, style, HTML)
    notes = []
    # Label routes first (grey, underneath).
    label_keys = common.ROUTE_KEYS if benchmark == "diversity" else ("first",)
    label_drawn = False
    unplaced = []           # label routes of station names (general LLM), listed instead
    for key in label_keys:
        route = route_of(labels, key)
        if route is None:
            continue
        stations = text_items(route.get("stations"))
        if benchmark == "general_llm" and not any(stops.coords(s) for s in stations):
            if stations:    # names, not stop ids: nothing to place
                unplaced.append((text_items(route.get("lines")), stations))
            continue
        builder.add_route(stations, [], lambda i: LABEL_GREY, "label " + key, label_style=True)
        label_drawn = label_drawn or bool(stations)
    if label_drawn:
        legend.append((LABEL_GREY, "solid", "label route (grey, wide; small arrows: its "
                                            "direction)"))
    if benchmark == "general_llm":
        first_stop, last_stop = _general_llm_legs(builder, record, legend, notes)
        start_mode, end_mode = _modes(route_of(preds, "first"))
        pred_keys = ()
    else:
        pred_keys = common.ROUTE_KEYS if benchmark == "diversity" else ("first",)
        first_stop = last_stop = None
        start_mode = end_mode = ""
    switch_keys = []
    for key in pred_keys:
        route = route_of(preds, key)
        if route is None:
            continue
        stations = text_items(route.get("stations"))
        lines = text_items(route.get("lines"))
        if benchmark == "diversity":
            colour = ROUTE_COLOURS[key]
            # Wide under narrow: overlapping routes stay visible; the switch
            # shows one alone.
            builder.begin_group(key)
            located, _, _ = builder.add_route(stations, [], lambda i, c=colour: c, key,
                                              width=DIVERSITY_WIDTHS[key])
            builder.end_group()
            switch_keys.append(key)
            legend.append((colour, "solid", "%s route: %s" % (key, bdi_join(lines) or
                                                              "no lines")))
        else:
            located, by_line, transit = builder.add_route(
                stations, lines, lambda i: LINE_COLOURS[i % len(LINE_COLOURS)], "prediction",
                leg_sizes=route.get("leg_sizes"))
            if by_line:
                for index, name in enumerate(transit):
                    legend.append((LINE_COLOURS[index % len(LINE_COLOURS)], "solid", bdi(name)))
            else:
                legend.append((LINE_COLOURS[0], "solid", "prediction: %s"
                               % (bdi_join(lines) or "no lines")))
        if key == "first":
            start_mode, end_mode = _modes(route)
            placed = [item for item in located if item[1] is not None]
            if placed:
                first_stop, last_stop = placed[0][1], placed[-1][1]
    switched = len(switch_keys) > 1
    if switched and "first" in switch_keys:
        builder.begin_group("first")        # the access legs are the first route's
    builder.add_access(origin, first_stop, start_mode,
                       "access from the origin (%s)" % isolated(start_mode or common.WALK),
                       TEXT_COLOUR)
    builder.add_access(destination, last_stop, end_mode,
                       "access to the destination (%s)" % isolated(end_mode or common.WALK),
                       TEXT_COLOUR)
    if switched and "first" in switch_keys:
        builder.end_group()
    builder.add_mark(origin, "origin")
    builder.add_mark(destination, "destination")
    svg = builder.render("route map of row %s" % record.get("row"))
    if switched and builder.points:
        svg = route_switch(switch_id, switch_keys) + svg
    out = []
    if legend:
        legend.append((TEXT_COLOUR, "dotted", "access legs%s; dashed circles: access limits "
                       "(%g / %g / %g km walk / bike / taxi); arrows: the direction of travel"
                       % (" of the first route" if switched else "", common.WALK_LIMIT_KM,
                          common.CYCLE_LIMIT_KM, common.TAXI_LIMIT_KM)))
        out.append('<ul class="legend">%s</ul>' % "".join(
            '<li>%s%s</li>' % (swatch(colour, style), markup)
            for colour, style, markup in legend))
    for lines, stations in unplaced:
        out.append('<p class="note">Label route (station names, not placed on the map): '
                   '%s; stations %s</p>' % (bdi_join(lines) or "no lines",
                                            bdi_join(stations, " \u2192 ")))
    out.extend(notes)
    if builder.broken:
        out.append('<p class="broken">Not connected (dashed red): %s</p>' % "; ".join(
            "%s%s \u2192 %s not connected" % (esc(what), bdi(here), bdi(there))
            for what, here, there in builder.broken))
    if builder.missing:
        out.append('<p class="missing">Not in the station file: %s</p>' % ", ".join(
            "%s (%s)" % (bdi(stop), esc(which)) for stop, which in builder.missing))
    return svg, "".join(out)


def _modes(route):
    if route is None:
        return "", ""
    start, end = route.get("start_mode"), route.get("end_mode")
    return (start if isinstance(start, str) else "", end if isinstance(end, str) else "")


def _general_llm_legs(builder, record, legend, notes):
    """A general-LLM row's prediction: the matched boarding -> alighting stops
    of each leg (match_details); for a route the check could not follow,
    every predicted name found on the predicted lines (names_on_lines), in
    the predicted order.  -> (first stop point, last stop point)."""
    located = record.get("names_on_lines")
    if not record.get("reachable") and isinstance(located, list):
        return _general_llm_names(builder, record, located, legend, notes)
    legs = record.get("match_details")
    legs = [leg for leg in legs if isinstance(leg, dict)] if isinstance(legs, list) else []
    stops = builder.stops
    first = last = None
    previous = None           # (stop id, point) of the previous alighting
    for index, leg in enumerate(legs):
        colour = LINE_COLOURS[index % len(LINE_COLOURS)]
        line = leg.get("line_name") or leg.get("line_query") or "?"
        legend.append((colour, "solid", "%s (asked: %s)"
                       % (bdi(line), bdi(leg.get("line_query") or "?"))))
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
                                % (side, isolated(leg.get(side + "_name") or "?"),
                                   isolated(stop), isolated(query or "?")), colour)
            ends.append((stop, point))
        if previous is not None and previous[1] is not None and ends[0][1] is not None \
                and previous[0] != ends[0][0]:
            ok = stops.connected(previous[0], ends[0][0])
            text = "transfer %s \u2192 %s" % (isolated(previous[0]), isolated(ends[0][0]))
            if not ok:
                builder.broken.append(("transfer ", previous[0], ends[0][0]))
            builder.add_segment(previous[1], ends[0][1], TEXT_COLOUR if ok else BROKEN_RED,
                                None if ok else "6 4", text + ("" if ok else " not connected"),
                                layer="pred" if ok else "broken", width=1.5 if ok else 2.5,
                                arrow=True)
        builder.add_segment(ends[0][1], ends[1][1], colour, None,
                            "%s (straight line between the matched stops)" % isolated(line),
                            width=3, arrow=True)
        first = first or ends[0][1]
        last = ends[1][1] or last
        previous = ends[1]
    return first, last


def _general_llm_names(builder, record, located, legend, notes):
    """The predicted names found on the predicted lines, in the predicted
    order: a dot each, consecutive ones on one line joined in its colour,
    a change of line by a thin black link (dashed red when the stops are not
    connected), arrows for the direction.  -> (first point, last point)."""
    stops = builder.stops
    colours = {}
    first = last = None
    previous = None                     # (stop id, point, line)
    for item in located:
        if not isinstance(item, dict) or not isinstance(item.get("stop_id"), str):
            continue
        line, stop = item.get("line_name") or "?", item["stop_id"]
        if line not in colours:
            colours[line] = LINE_COLOURS[len(colours) % len(LINE_COLOURS)]
            legend.append((colours[line], "solid", "%s: predicted stations found on it"
                           % bdi(line)))
        point = stops.coords(stop)
        if point is None:
            builder.missing.append((stop, "found on %s" % clean_text(line)))
            continue
        builder.add_dot(point, "%s (%s) on %s, asked: %s"
                        % (isolated(item.get("name") or "?"), isolated(stop), isolated(line),
                           isolated(item.get("query") or "?")), colours[line])
        if previous is not None and previous[0] != stop:
            if previous[2] == line:
                builder.add_segment(previous[1], point, colours[line], None,
                                    "%s (straight line)" % isolated(line), width=3, arrow=True)
            else:
                ok = stops.connected(previous[0], stop)
                text = "transfer %s \u2192 %s" % (isolated(previous[0]), isolated(stop))
                if not ok:
                    builder.broken.append(("transfer ", previous[0], stop))
                builder.add_segment(previous[1], point, TEXT_COLOUR if ok else BROKEN_RED,
                                    None if ok else "6 4",
                                    text + ("" if ok else " not connected"),
                                    layer="pred" if ok else "broken",
                                    width=1.5 if ok else 2.5, arrow=True)
        first = first or point
        last = point
        previous = (stop, point, line)
    found = {item.get("query") for item in located if isinstance(item, dict)}
    predicted = route_of(record.get("prediction_routes") or {}, "first") or {}
    lost = [name for name in text_items(predicted.get("stations")) if name not in found]
    notes.append('<p class="note">The route-eval check stopped on this route: drawn are the '
                 'predicted stations found on the predicted lines, in the predicted order%s.'
                 '</p>' % ("; not found on them: %s" % bdi_join(lost) if lost else ""))
    return first, last
