"""The demo's fictional network: its names (Chinese literals of the released
data), cities and districts, the physical model (ride times from a fixed
speed) and the seeded generation of stations and lines (``build_network``).
"""

import math

from common import (
    CYCLE_LIMIT_KM, DISTANCE_TOLERANCE_KM, FARE_TOLERANCE_CNY, REFERENCE, TAXI_LIMIT_KM,
    TIME_TOLERANCE_MIN, TRANSFER_DISTANCE_TOLERANCE_KM, WALK_LIMIT_KM)
from common import MIN_STATION_SIMILARITY
from transitlm.networks.router import (
    ACCESS_BIKE, ACCESS_TAXI, ACCESS_WALK, FARE_BANDS, FARE_STEP_KM, KIND_BUS, KIND_METRO,
    KM_PER_DEG_LAT, KM_PER_DEG_LNG_EQUATOR, WAIT_MIN, District, Line, LineDir, Network,
    sub_rng, uniform)

# ---------------------------------------------------------------------------
# Chinese literals (the released data's; the shared ones come from router.py)
# ---------------------------------------------------------------------------

MODE_DIDI = "滴滴"
METRO_PREFIX = "地铁"
METRO_NAME = "地铁{number}号线({first}--{last})"
BUS_NAME = "{number}路({first}--{last})"
MISSING_LINE = "磁浮快线"          # a real-looking line name absent from every city
QUERY = "从{origin}到{destination}怎么走"
QUERY_SUFFIX_BY_REQ = {
    0: "",
    2: "，尽量少换乘",
    5: "，不想坐地铁",
    7: "，优先坐地铁",
    8: "，希望时间最短",
}
QUERY_SUFFIX_DIVERSITY = "，有哪些出行方案"
NAME_CHARS = "东西南北中新龙华安平和明光金银花园山水湖海江石桥城春秋云凤兴宁林福丰盛泰康乐永德"
NAME_SUFFIXES = (
    "路口", "大道", "村", "站", "公园", "小学", "医院", "社区", "广场", "中心",
    "市场", "花园", "新村", "东", "西", "南", "北", "路", "桥", "地铁站",
    "工业区", "大厦", "科技园", "派出所", "总站", "街", "苑", "里",
)
POI_SUFFIXES = ("小区", "大厦", "公园", "医院", "广场", "商场", "学校", "酒店", "")

# ---------------------------------------------------------------------------
# Cities, districts and the physical model
# ---------------------------------------------------------------------------


class City:
    def __init__(self, name, code, center, box):
        self.name = name
        self.code = code
        self.center = center      # (lng, lat) of the first (bundled) district
        self.box = box            # (lng_min, lng_max, lat_min, lat_max) for more districts


# The default demo uses the first two; scale runs cycle through all four.
CITIES = (
    City("北京", "010", (116.362, 39.905), (116.20, 116.56, 39.80, 40.02)),
    City("深圳", "0755", (114.052, 22.566), (113.90, 114.22, 22.53, 22.66)),
    City("上海", "021", (121.468, 31.226), (121.33, 121.60, 31.12, 31.32)),
    City("成都", "028", (104.066, 30.658), (103.96, 104.17, 30.57, 30.74)),
)

ID_BASE = 100001
DISTRICT_WIDTH_KM = 20.0
DISTRICT_HEIGHT_KM = 14.0
METRO_LINES_PER_DISTRICT = 3
BUS_LINES_PER_DISTRICT = 7
STATIONS_PER_DISTRICT = 135        # measured average, used to size scale runs
METRO_SNAP_KM = 0.45               # a new stop this close to another line's stop is a transfer
BUS_SNAP_KM = 0.30
MIN_LINKED_OFFSET_KM = 0.08        # a walk-linked twin stop is never on top of its partner
MIN_STOP_SPACING_KM = 0.25
MIN_METRO_STATIONS = 8
MIN_LINE_STOPS = 4

# The demo's physical model: ride times from a fixed speed (there is no schedule).
TRACK_FACTOR = {KIND_METRO: 1.10, KIND_BUS: 1.25}   # track length / straight distance
SPEED_KMH = {KIND_METRO: 35.0, KIND_BUS: 18.0}
DWELL_MIN = {KIND_METRO: 0.5, KIND_BUS: 0.4}

# Evaluator constants (protocol.md, imported from common) used to make sure
# each sample row really exercises the path it was built for.
GROUND_KM = {ACCESS_WALK: WALK_LIMIT_KM, ACCESS_BIKE: CYCLE_LIMIT_KM, ACCESS_TAXI: TAXI_LIMIT_KM}
DP_SLACK_KM = REFERENCE.dp_slack_km
TOL_DISTANCE = DISTANCE_TOLERANCE_KM
TOL_TIME = TIME_TOLERANCE_MIN
TOL_FARE = FARE_TOLERANCE_CNY
TOL_TRANSFER_KM = TRANSFER_DISTANCE_TOLERANCE_KM
MIN_FUZZY_JACCARD = MIN_STATION_SIMILARITY

# Straight distance between the stations an origin and a destination are put
# near; scenarios that need a short or a long trip ask for it.
TRIP_KM = (2.5, 13.0)
SHORT_TRIP_KM = (0.8, 2.5)
LONG_TRIP_KM = (9.0, 16.0)
MAX_ATTEMPTS = 400


def unknown_id(net, rng):
    """A stop id in the demo's style that no station has."""
    return "bus-%d" % (ID_BASE + len(net.ids) + 1000 + rng.randrange(9000))

# ---------------------------------------------------------------------------
# Network generation
# ---------------------------------------------------------------------------


class DistrictBuilder:
    """Lays out the lines of one district in a local km frame.

    Stations of a new line that fall near another line's station become
    transfers, alternately as a stop shared by both lines and as a twin stop a
    short walk away linked both ways, so both transfer styles are common.
    """

    GRID_KM = 0.5

    def __init__(self, net, rng, district, city_index, metro_numbers, bus_numbers):
        self.net = net
        self.rng = rng
        self.district = district
        self.city_index = city_index
        self.metro_numbers = metro_numbers
        self.bus_numbers = bus_numbers
        self.kx = KM_PER_DEG_LNG_EQUATOR * math.cos(math.radians(district.lat0))
        self.xy = {}
        self.grid = {}
        self.used_names = set()
        self.share_next = rng.random() < 0.5

    # -- geometry -----------------------------------------------------------

    def inside(self, x, y):
        return abs(x) <= DISTRICT_WIDTH_KM / 2 and abs(y) <= DISTRICT_HEIGHT_KM / 2

    def cell(self, x, y):
        return (int(math.floor(x / self.GRID_KM)), int(math.floor(y / self.GRID_KM)))

    def nearest(self, x, y, radius, excluded):
        cx, cy = self.cell(x, y)
        best, best_d = None, radius
        for gx in (cx - 1, cx, cx + 1):
            for gy in (cy - 1, cy, cy + 1):
                for s in self.grid.get((gx, gy), ()):
                    if s in excluded:
                        continue
                    sx, sy = self.xy[s]
                    d = math.hypot(sx - x, sy - y)
                    if d < best_d or (d == best_d and best is not None and s < best):
                        best, best_d = s, d
        return best, best_d

    # -- stops --------------------------------------------------------------

    def fresh_name(self):
        while True:
            name = (self.rng.choice(NAME_CHARS) + self.rng.choice(NAME_CHARS)
                    + self.rng.choice(NAME_SUFFIXES))
            if name not in self.used_names:
                self.used_names.add(name)
                return name

    def new_stop(self, x, y, name=None):
        d = self.district
        lng = round(d.lng0 + x / self.kx, 6)
        lat = round(d.lat0 + y / KM_PER_DEG_LAT, 6)
        s = self.net.add_stop("bus-%d" % (ID_BASE + len(self.net.ids)), name or self.fresh_name(), lng, lat,
                               self.city_index)
        self.xy[s] = (x, y)
        self.grid.setdefault(self.cell(x, y), []).append(s)
        d.stops.append(s)
        return s

    def twin_stop(self, partner, x, y):
        """A stop of the new line a short walk from `partner`, same name, linked."""
        px, py = self.xy[partner]
        if math.hypot(x - px, y - py) < MIN_LINKED_OFFSET_KM:
            angle = self.rng.random() * 2 * math.pi
            x, y = px + 0.15 * math.cos(angle), py + 0.15 * math.sin(angle)
        s = self.new_stop(x, y, self.net.names[partner])
        self.net.hops[s].add(partner)
        self.net.hops[partner].add(s)
        self.net.link_set[s].add(partner)
        self.net.link_set[partner].add(s)
        return s

    def place_stop(self, x, y, snap_km, line_stops, line_names):
        excluded = set(line_stops)
        for s in line_stops:
            excluded |= self.net.link_set[s]
        partner, _ = self.nearest(x, y, snap_km, excluded)
        if partner is not None and self.net.names[partner] not in line_names:
            share = self.share_next
            self.share_next = not share
            return partner if share else self.twin_stop(partner, x, y)
        return self.new_stop(x, y)

    def place_line(self, positions, kind):
        snap = METRO_SNAP_KM if kind == KIND_METRO else BUS_SNAP_KM
        stops, names = [], set()
        for x, y in positions:
            if stops:
                lx, ly = self.xy[stops[-1]]
                if math.hypot(x - lx, y - ly) < MIN_STOP_SPACING_KM:
                    continue
            s = self.place_stop(x, y, snap, stops, names)
            if stops and s == stops[-1]:
                continue
            stops.append(s)
            names.add(self.net.names[s])
        return stops

    # -- line layouts -------------------------------------------------------

    def metro_positions(self, anchor, angle):
        """Stations along a gently curving line through `anchor` (station at t=0)."""
        spacing = uniform(self.rng, 1.1, 1.5)
        amplitude = uniform(self.rng, 0.0, 0.35)
        ax, ay = anchor
        ca, sa = math.cos(angle), math.sin(angle)

        def point(t):
            along, off = t * spacing, amplitude * math.sin(t * 0.7)
            return ax + along * ca - off * sa, ay + along * sa + off * ca

        ahead, behind = [], []
        t = 0
        while self.inside(*point(t)):
            ahead.append(point(t))
            t += 1
        t = -1
        while self.inside(*point(t)):
            behind.append(point(t))
            t -= 1
        return behind[::-1] + ahead

    def bus_positions(self, anchor):
        """A meandering street route through `anchor`, kept inside the district."""
        spacing = uniform(self.rng, 0.5, 0.8)
        heading = self.rng.random() * 2 * math.pi

        def walk(start, heading, steps):
            points, (x, y) = [], start
            for _ in range(steps):
                heading += uniform(self.rng, -0.4, 0.4)
                nx, ny = x + spacing * math.cos(heading), y + spacing * math.sin(heading)
                if not self.inside(nx, ny):
                    heading += math.pi
                    nx, ny = x + spacing * math.cos(heading), y + spacing * math.sin(heading)
                x, y = nx, ny
                points.append((x, y))
            return points

        ahead = walk(anchor, heading, self.rng.randrange(5, 11))
        behind = walk(anchor, heading + math.pi, self.rng.randrange(4, 10))
        return behind[::-1] + [anchor] + ahead

    def add_line(self, kind, stops):
        net = self.net
        city = CITIES[self.city_index]
        if kind == KIND_METRO:
            number, template = self.next_metro_number(), METRO_NAME
        else:
            number, template = self.next_bus_number(), BUS_NAME
        line = Line(len(net.lines), city, kind, number, stops, self.district.index)
        first, last = net.names[stops[0]], net.names[stops[-1]]
        line.names = (template.format(number=number, first=first, last=last),
                      template.format(number=number, first=last, last=first))
        for a, b in zip(stops, stops[1:]):
            net.hops[a].add(b)
            net.hops[b].add(a)
        net.lines.append(line)
        self.district.lines.append(line)

    def next_metro_number(self):
        # Metro numbers run on per city so short names like 地铁2号线 stay unique.
        self.metro_numbers.append(len(self.metro_numbers) + 1)
        return self.metro_numbers[-1]

    def next_bus_number(self):
        top = 1000 if len(self.bus_numbers) < 800 else 10000
        while True:
            number = self.rng.randrange(1, top)
            if number not in self.bus_numbers:
                self.bus_numbers.add(number)
                return number

    def random_anchor(self, central):
        """An existing stop to route a new line through, so every line connects."""
        pool = [s for s in self.district.stops
                if not central or (abs(self.xy[s][0]) < DISTRICT_WIDTH_KM / 3
                                   and abs(self.xy[s][1]) < DISTRICT_HEIGHT_KM / 3)]
        return self.xy[self.rng.choice(pool or self.district.stops)]

    def build(self):
        # Metro lines cross near the centre at spread-out angles; each later
        # line runs through a station of an earlier one, and every bus line
        # through some existing stop, so the district is one connected network.
        base_angle = self.rng.random() * math.pi
        for k in range(METRO_LINES_PER_DISTRICT):
            for _ in range(20):
                if k == 0:
                    anchor = (uniform(self.rng, -2, 2), uniform(self.rng, -2, 2))
                else:
                    anchor = self.random_anchor(central=True)
                angle = base_angle + k * math.pi / METRO_LINES_PER_DISTRICT + uniform(self.rng, -0.2, 0.2)
                positions = self.metro_positions(anchor, angle)
                if len(positions) >= MIN_METRO_STATIONS:
                    break
            self.add_line_if_long(KIND_METRO, self.place_line(positions, KIND_METRO))
        for _ in range(BUS_LINES_PER_DISTRICT):
            self.add_line_if_long(KIND_BUS, self.place_line(self.bus_positions(self.random_anchor(False)), KIND_BUS))

    def add_line_if_long(self, kind, stops):
        if len(stops) >= MIN_LINE_STOPS:
            self.add_line(kind, stops)


def district_center(rng, city, first_of_city):
    if first_of_city:
        return city.center
    lng_min, lng_max, lat_min, lat_max = city.box
    return (round(uniform(rng, lng_min, lng_max), 4), round(uniform(rng, lat_min, lat_max), 4))


def build_network(seed, n_districts):
    net = Network(60.0 / SPEED_KMH[KIND_METRO])   # A* bound: nothing is faster than the metro
    metro_numbers = {c.code: [] for c in CITIES}
    bus_numbers = {c.code: set() for c in CITIES}
    for k in range(n_districts):
        rng = sub_rng(seed, "district", k)
        city_index = k % len(CITIES)
        city = CITIES[city_index]
        lng0, lat0 = district_center(rng, city, k < len(CITIES))
        district = District(k, city, lng0, lat0)
        net.districts.append(district)
        DistrictBuilder(net, rng, district, city_index,
                        metro_numbers[city.code], bus_numbers[city.code]).build()
    finish_network(net)
    return net


def finish_network(net):
    """Derive the router's tables: line directions (ride times from the fixed
    speeds and dwell times: the demo has no schedule), boardings, walk links."""
    for line in net.lines:
        for forward in (True, False):
            stops = line.stops if forward else line.stops[::-1]
            cumdist, cumtime = [0.0], [0.0]
            for a, b in zip(stops, stops[1:]):
                km = net.dist(a, b) * TRACK_FACTOR[line.kind]
                cumdist.append(cumdist[-1] + km)
                cumtime.append(cumtime[-1] + km / SPEED_KMH[line.kind] * 60 + DWELL_MIN[line.kind])
            kind = line.kind
            net.add_linedir(LineDir(len(net.linedirs), line, line.names[0 if forward else 1], stops,
                                    cumdist, cumtime, WAIT_MIN[kind], FARE_BANDS[kind], FARE_STEP_KM[kind]))
    net.finish()
