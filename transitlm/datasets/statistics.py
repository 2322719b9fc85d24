"""The dataset's statistics (the card's tables and dataset.json's "statistics").

``DatasetStatistics`` counts as rows go by and keeps counters only, never the
rows, so its memory is bounded whatever the dataset's size: per SFT file
(task_id) the rows, preferences (req_type), route types, access modes,
distance bands and transfers of each row's first route; per corpus record kind
the records and characters, and of the sessions the candidates per session and
the first route's type; the networks (stations, line directions); the leakage
figures the builder checked.  ``merge`` adds another's counts (a worker's, a
part's) and ``from_json`` reads ``as_json``'s output back, so statistics
gathered by several processes or machines add up to those of one run.
``as_json`` is deterministic: the same counts give the same JSON, whatever
order they came in.

Route types: "subway" (every line a subway line by the evaluator's rule,
common.is_subway_line), "bus" (none), "mixed".  Access modes: walk (an empty
mode is a walk, as in the release), bike, taxi (打车, 网约车, 滴滴), other.
Distance bands of the route's total_distance (as the evaluator reads it).
Standard library only.
"""

from common import CYCLE, TAXI_MARKERS, WALK, RowError, is_subway_line, parse_distance_km

DISTANCE_BANDS_KM = (5.0, 10.0, 20.0, 40.0)
DISTANCE_BANDS = ("<5 km", "5-10 km", "10-20 km", "20-40 km", ">=40 km")
UNREADABLE = "unreadable"
TRANSFER_BUCKETS = ("0", "1", "2", "3+")
ROUTE_TYPES = ("subway", "bus", "mixed")
ACCESS_MODES = ("walk", "bike", "taxi", "other")
CANDIDATE_BUCKETS = ("1", "2", "3", "4", "5")
CORPUS_KINDS = ("session", "line", "station")
MAX_KEYS = 64            # distinct keys per counter (tasks, req_types, ...); beyond: "other"
OTHER = "other"


def route_type(label):
    lines = label.get("line_sequence") or []
    subway = sum(1 for name in lines if isinstance(name, str) and is_subway_line(name))
    if lines and subway == len(lines):
        return "subway"
    return "bus" if subway == 0 else "mixed"


def access_mode(mode):
    if not mode or mode == WALK:
        return "walk"
    if mode == CYCLE:
        return "bike"
    if mode in TAXI_MARKERS:
        return "taxi"
    return "other"


def distance_band(text):
    try:
        km = parse_distance_km(text, "total_distance")
    except (RowError, TypeError, ValueError):      # a text the evaluator cannot read
        return UNREADABLE
    for limit, band in zip(DISTANCE_BANDS_KM, DISTANCE_BANDS):
        if km < limit:
            return band
    return DISTANCE_BANDS[-1]


def transfer_bucket(label):
    lines = label.get("line_sequence") or []
    n = max(0, len(lines) - 1)
    return TRANSFER_BUCKETS[min(n, len(TRANSFER_BUCKETS) - 1)]


def first_route(label):
    """The route a row is counted by: the label itself, or benchmark 3's "first"."""
    if isinstance(label, dict) and isinstance(label.get("first"), dict):
        return label["first"]
    return label if isinstance(label, dict) else {}


def bump(counter, key, amount=1):
    key = str(key)
    if key not in counter and len(counter) >= MAX_KEYS:
        key = OTHER
    counter[key] = counter.get(key, 0) + amount


def ordered(counter, order=None):
    """A counter as a dict: the known keys in their order (zeros included), then
    any others sorted."""
    out = {}
    for key in order or ():
        out[key] = counter.get(key, 0)
    for key in sorted(k for k in counter if k not in out):
        out[key] = counter[key]
    return out


class DatasetStatistics(object):
    """Counters of a dataset's rows and records (see the module's docstring)."""

    def __init__(self):
        self.sft = {}         # task -> {"rows": n, counter name -> {key: n}}
        self.corpus = {kind: {"records": 0, "characters": 0} for kind in CORPUS_KINDS}
        self.candidates = {}
        self.session_route_types = {}
        self.networks = {}    # adcode -> {"city", "stations", "lines"}
        self.leakage = {}

    # -- adding -------------------------------------------------------------

    def add_sft_row(self, task, req_type, label):
        """One SFT row of file ``task`` (its task_id) with its label (a dict)."""
        entry = self._task(task)
        entry["rows"] += 1
        route = first_route(label)
        bump(entry["req_types"], req_type)
        bump(entry["route_types"], route_type(route))
        bump(entry["distance_bands"], distance_band(route.get("total_distance")))
        bump(entry["transfers"], transfer_bucket(route))
        for key in ("start_transfer_mode", "end_transfer_mode"):
            bump(entry["access_modes"], access_mode(route.get(key)))

    def add_corpus_record(self, kind, text, record):
        """One corpus record (kind session, line or station) with its text."""
        entry = self.corpus.get(kind)
        if entry is None:
            kind = OTHER
            entry = self.corpus.setdefault(OTHER, {"records": 0, "characters": 0})
        entry["records"] += 1
        entry["characters"] += len(text)
        if kind == "session":
            routes = record.get("routes") or []
            bump(self.candidates, len(routes))
            bump(self.session_route_types, route_type(routes[0] if routes else {}))

    def add_network(self, city, adcode, stations, lines):
        """A network of the dataset: its city, adcode, stations and line directions."""
        self.networks[str(adcode)] = {"city": city, "stations": int(stations), "lines": int(lines)}

    def set_leakage(self, figures):
        """The leakage figures the builder checked (a JSON-ready dict)."""
        self.leakage = dict(figures)

    def _task(self, task):
        task = str(task)
        if task not in self.sft and len(self.sft) >= MAX_KEYS:
            task = OTHER
        return self.sft.setdefault(task, {
            "rows": 0, "req_types": {}, "route_types": {}, "distance_bands": {}, "transfers": {},
            "access_modes": {}})

    # -- combining ----------------------------------------------------------

    def merge(self, other):
        """Add another DatasetStatistics' counts to these (networks and leakage:
        the other's entries are taken where these have none)."""
        for task, entry in other.sft.items():
            mine = self._task(task)
            mine["rows"] += entry["rows"]
            for name, counter in entry.items():
                if name != "rows":
                    for key, n in counter.items():
                        bump(mine[name], key, n)
        for kind, entry in other.corpus.items():
            mine = self.corpus.setdefault(kind, {"records": 0, "characters": 0})
            mine["records"] += entry["records"]
            mine["characters"] += entry["characters"]
        for key, n in other.candidates.items():
            bump(self.candidates, key, n)
        for key, n in other.session_route_types.items():
            bump(self.session_route_types, key, n)
        for code, network in other.networks.items():
            self.networks.setdefault(code, dict(network))
        for key, value in other.leakage.items():
            self.leakage.setdefault(key, value)
        return self

    @classmethod
    def from_json(cls, data):
        """The statistics that as_json() wrote."""
        stats = cls()
        for task, entry in data.get("sft", {}).items():
            mine = stats._task(task)
            mine["rows"] = int(entry["rows"])
            for name in ("req_types", "route_types", "distance_bands", "transfers", "access_modes"):
                for key, n in entry.get(name, {}).items():
                    if n:
                        bump(mine[name], key, int(n))
        corpus = data.get("corpus", {})
        for kind, entry in corpus.get("kinds", {}).items():
            stats.corpus[kind] = {"records": int(entry["records"]), "characters": int(entry["characters"])}
        for key, n in corpus.get("candidates_per_session", {}).items():
            if n:
                bump(stats.candidates, key, int(n))
        for key, n in corpus.get("session_route_types", {}).items():
            if n:
                bump(stats.session_route_types, key, int(n))
        for network in data.get("networks", []):
            stats.add_network(network["city"], network["adcode"], network["stations"], network["lines"])
        stats.leakage = dict(data.get("leakage", {}))
        return stats

    # -- reading ------------------------------------------------------------

    def stations(self):
        """Stations of the dataset: the networks' when given, else the corpus's station records."""
        if self.networks:
            return sum(n["stations"] for n in self.networks.values())
        return self.corpus["station"]["records"]

    def lines(self):
        """Line directions: the networks' when given, else the corpus's line records."""
        if self.networks:
            return sum(n["lines"] for n in self.networks.values())
        return self.corpus["line"]["records"]

    def as_json(self):
        sft = {}
        for task in sorted(self.sft):
            entry = self.sft[task]
            sft[task] = {"rows": entry["rows"],
                         "req_types": ordered(entry["req_types"]),
                         "route_types": ordered(entry["route_types"], ROUTE_TYPES),
                         "access_modes": ordered(entry["access_modes"], ACCESS_MODES),
                         "distance_bands": ordered(entry["distance_bands"], DISTANCE_BANDS),
                         "transfers": ordered(entry["transfers"], TRANSFER_BUCKETS)}
        kinds = {}
        for kind in list(CORPUS_KINDS) + sorted(k for k in self.corpus if k not in CORPUS_KINDS):
            kinds[kind] = dict(self.corpus[kind])
        return {
            "sft_rows": sum(e["rows"] for e in self.sft.values()),
            "sft": sft,
            "corpus": {"records": sum(e["records"] for e in self.corpus.values()),
                       "characters": sum(e["characters"] for e in self.corpus.values()),
                       "kinds": kinds,
                       "candidates_per_session": ordered(self.candidates, CANDIDATE_BUCKETS),
                       "session_route_types": ordered(self.session_route_types, ROUTE_TYPES)},
            "stations": self.stations(),
            "lines": self.lines(),
            "networks": [dict({"adcode": code}, **self.networks[code]) for code in sorted(self.networks)],
            "leakage": {key: self.leakage[key] for key in sorted(self.leakage)},
        }
