"""The release's settings, counts and corpus plan (issue 45, points 1 and 5).

The corpus plan is a pure function of (networks, settings): records are
numbered from 1 -- first the static records, network by network (one per
station in station_info.csv order, then one per line direction in
line_info.csv order), then the sessions, unit by unit (splits.units_of;
sessions split across units by splits.shares) -- and part k holds records
(k-1) * part_size + 1 to k * part_size.  A record's text and facts depend
only on its number, the networks and the settings (each session draws from
its own sub-seed), so any part can be built alone, by any process.

Standard library only; Python 3.8+.
"""

from transitlm.datasets.splits import origin_group, shares

DEFAULT_TRAIN = 30000          # rows per task (the release's)
DEFAULT_TEST = 10000           # rows per task, the general file too (the release's)
DEFAULT_CORPUS = 100000        # corpus sessions
DEFAULT_PART_SIZE = 50000      # records per part file, static records included
DEFAULT_SEED = 20240611        # make_benchmark.py's
MAX_ROWS = 1000000             # --train / --test
MAX_CORPUS = 100000000         # --corpus (the release has 13.9 M records)
MAX_PART_SIZE = 10000000
MAX_WORKERS = 64

STATIC_CHUNK = 2000            # records a worker makes per task: static records
# ... sessions: one origin group a task (its search made once): Plan.origin_groups


class Plan(object):
    """The records of the corpus and the parts that hold them."""

    def __init__(self, nets, units, corpus, part_size, group=None):
        self.statics = []              # per network: (first record, stations, line directions)
        first = 1
        for net in nets:
            self.statics.append((first, len(net.ids), len(net.linedirs)))
            first += len(net.ids) + len(net.linedirs)
        self.static_total = first - 1
        self.session_counts = shares(corpus, [u.weight for u in units])
        # per unit: how many sessions share an origin (``group``, else by density)
        self.origin_groups = [group or origin_group(count, u.weight)
                              for count, u in zip(self.session_counts, units)]
        self.session_first = []        # per unit: its first session's record number
        for count in self.session_counts:
            self.session_first.append(first)
            first += count
        self.total = first - 1
        self.part_size = part_size
        self.parts = max(1, -(-self.total // part_size))

    def part_range(self, number):
        """Records (first, last) of part ``number`` (from 1), both included."""
        first = (number - 1) * self.part_size + 1
        return first, min(self.total, number * self.part_size)

    def part_records(self, number):
        """How many records part ``number`` holds in the plan."""
        first, last = self.part_range(number)
        return last - first + 1

    def part_of(self, number):
        """The part that holds record ``number``."""
        return (number - 1) // self.part_size + 1

    def record(self, number):
        """("station", network, index) / ("line", network, index) / ("session", unit, local)."""
        if number <= self.static_total:
            for net_index, (first, stations, lines) in enumerate(self.statics):
                if first <= number < first + stations:
                    return "station", net_index, number - first
                if first + stations <= number < first + stations + lines:
                    return "line", net_index, number - first - stations
        for unit, first in enumerate(self.session_first):
            if first <= number < first + self.session_counts[unit]:
                return "session", unit, number - first
        raise ValueError("record %d is not in the plan" % number)

    def chunks(self, number):
        """The tasks of part ``number`` (a generator): (kind, owner, first index,
        last index exclusive, first record number), static and session runs
        cut into chunks."""
        first, last = self.part_range(number)
        n = first
        while n <= last:
            kind, owner, index = self.record(n)
            if kind == "session":
                end_of_run = self.session_first[owner] + self.session_counts[owner] - 1
                # to the end of the origin group: a task makes its group's search once
                chunk = self.origin_groups[owner]
                size = chunk - index % chunk
            else:
                start, stations, lines = self.statics[owner]
                end_of_run = start + stations - 1 if kind == "station" else start + stations + lines - 1
                size = STATIC_CHUNK
            stop = min(last, end_of_run, n + size - 1)
            yield (kind, owner, index, index + stop - n + 1, n)
            n = stop + 1


def parse_parts(text):
    """--parts "A-B" (or "A") -> (A, B), 1 <= A <= B; ValueError otherwise."""
    pieces = text.split("-")
    if len(pieces) > 2 or not all(p.strip().isdigit() for p in pieces):
        raise ValueError("--parts takes A-B, two part numbers (e.g. 1-4), not %r" % text)
    low, high = int(pieces[0]), int(pieces[-1])
    if not 1 <= low <= high:
        raise ValueError("--parts %s: the first part must be at least 1 and at most the last"
                         % text)
    return low, high


def settings_of(args, networks):
    """The settings dataset.json records (what decides the files' bytes; not
    --workers, --parts or where the networks were read from)."""
    return {"train": args.train, "test": args.test, "corpus": args.corpus,
            "part_size": args.part_size, "seed": args.seed, "lang": args.lang,
            "origin_group": args.origin_group or "auto",
            "networks": [n["network_sha256"] for n in networks]}
