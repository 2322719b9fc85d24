"""Deterministic generator of the bundled TransitLM demo data.

Writes a fictional transit network (``station_info.csv``, ``line_info.csv``)
and the four benchmark sample files (single route, personalized, diversity,
general LLM).  Every label is the answer of a real shortest-path router over
that network; every ``generate_results`` cell is built from the label so that
each path of the evaluation funnel (protocol.md) is exercised.  Which path a
row exercises is fixed by its position: row i of a file uses entry
i % len(table) of that file's scenario table (B1_SCENARIOS, B2_SCENARIOS,
B3_SCENARIOS, GENERAL_SCENARIOS in scenarios.py); the bundled demo has one
row per entry.  The network is made in network.py, a row's case in
cases.py (beside this module, in transitlm/networks/demo/).

Usage::

    python3 data/make_demo.py                      # small bundled demo -> data/
    python3 data/make_demo.py --out DIR            # the same into DIR
    python3 data/make_demo.py --stations 150000 --samples 10000 --out DIR

Options: ``--stations N`` (approximate network size; default: two districts,
about 280 stations), ``--samples N`` (rows per sample file; default: one per
scenario), ``--seed S`` and ``--workers N`` (processes building rows; the
output is the same for any value).

Output is byte-identical across runs and Python 3.8+ versions: only seeded
``random.Random`` instances are used (one per district and one per sample row),
never the global generator, and nothing depends on hash order or the clock.
Standard library only.
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import sys

# The generator checks its rows with the evaluator's own rules (value parsing,
# tolerances, name matching, geometry), so it imports them rather than
# restating them; the router that makes the labels lives in router.py.

from common import LINE_COLUMNS, STATION_FILE_COLUMNS, InputError
from transitlm.evaluation.catalog import DATA_DIR, benchmark_info
from transitlm.io.files import Outputs, write_csv
from transitlm.io.terminal import CommandParser
from transitlm.networks import limits
from transitlm.evaluation.prompt_texts import DEFAULT_LANGUAGE, system_prompt
from transitlm.io.exit_status import EXIT_USAGE
from transitlm.evaluation.workers import available_cores
from transitlm.networks.router import (
    KIND_METRO, Prefs, alternatives, dumps, pick_od, prefs_for_req, route_json, sub_rng)
from transitlm.networks.demo.cases import Case, prompt_json
from transitlm.networks.demo.network import (
    CITIES, MAX_ATTEMPTS, QUERY_SUFFIX_BY_REQ, QUERY_SUFFIX_DIVERSITY, STATIONS_PER_DISTRICT,
    TRIP_KM, build_network)
from transitlm.networks.demo.scenarios import (
    B1_SCENARIOS, B2_SCENARIOS, B3_SCENARIOS, GENERAL_SCENARIOS, NONCOMPLIANT_LABEL_SCENARIOS,
    complies, unintended_violation)

SEED_DEFAULT = 20240611

FILE_STATIONS = "station_info.csv"
FILE_LINES = "line_info.csv"
FILE_B1 = benchmark_info("single_route").default_input
FILE_B2 = benchmark_info("personalized").default_input
FILE_B3 = benchmark_info("diversity").default_input
FILE_GENERAL = benchmark_info("general_llm").default_input
# As the release's test files: a system prompt per row that tells a model the
# answer's format (generate.py sends it as the system message).
SAMPLE_COLUMNS = ["index_id", "system_prompt", "sft_prompt", "sft_label", "generate_results"]


class SampleFile:
    def __init__(self, key, filename, scenarios, with_req=False, routes=1, use_names=False):
        self.key = key
        self.filename = filename
        self.scenarios = scenarios
        self.with_req = with_req
        self.routes = routes
        self.use_names = use_names

    def scenario(self, row):
        entry = self.scenarios[row % len(self.scenarios)]
        return entry if self.with_req else (entry, 0)

    def columns(self):
        return SAMPLE_COLUMNS + (["req_type"] if self.with_req else [])


BENCHMARKS = (
    SampleFile("b1", FILE_B1, B1_SCENARIOS),
    SampleFile("b2", FILE_B2, B2_SCENARIOS, with_req=True),
    SampleFile("b3", FILE_B3, B3_SCENARIOS, routes=3),
    SampleFile("general", FILE_GENERAL, GENERAL_SCENARIOS, use_names=True),
)


def label_routes(case, bench):
    """The label route(s) for the case's trip, or None when the trip does not fit."""
    if bench.routes == 3:
        routes = alternatives(case, Prefs(), 3)
        return routes if len(routes) == 3 else None
    route = case.find(prefs_for_req(case.req_type))
    if route is None or (case.req_type == 7 and KIND_METRO not in route.kinds(case.net)):
        return None
    return [route]


def row_cells(net, seed, bench, row, case, pred):
    labels = case.labels
    if bench.routes == 3:
        label_text = dumps(dict(zip(("first", "second", "third"), labels)))
    else:
        label_text = dumps(labels[0])
    suffix = QUERY_SUFFIX_DIVERSITY if bench.routes == 3 else QUERY_SUFFIX_BY_REQ.get(case.req_type, "")
    cells = [hashlib.md5(("%s:%s:%d" % (seed, bench.key, row)).encode("utf-8")).hexdigest(),
             system_prompt(bench.key, DEFAULT_LANGUAGE),    # the demo is Chinese
             prompt_json(case, suffix),
             label_text,
             pred if isinstance(pred, str) else dumps(pred)]
    if bench.with_req:
        cells.append(str(case.req_type))
    return cells


def build_row(net, seed, bench, row):
    """One CSV row (list of cells) for sample `row` of a benchmark file.

    Trips are drawn until one suits the row's scenario (a builder returns None
    when, say, the label has no transfer to break).
    """
    rng = sub_rng(seed, bench.key, row)
    builder, req_type = bench.scenario(row)
    for _ in range(MAX_ATTEMPTS):
        district = net.districts[rng.randrange(len(net.districts))]
        origin, dest = pick_od(net, rng, district, *getattr(builder, "trip_km", TRIP_KM))
        case = Case(net, rng, district, origin, dest, [], [], req_type)
        case.routes = label_routes(case, bench)
        if case.routes is None:
            continue
        case.labels = [route_json(net, r, rng, use_names=bench.use_names, tag=bench.routes == 3)
                       for r in case.routes]
        if (bench.with_req and builder not in NONCOMPLIANT_LABEL_SCENARIOS
                and not complies(req_type, case.label, case.label)):
            continue
        pred = builder(case)
        if pred is None or (bench.with_req and unintended_violation(builder, req_type, pred, case.label)):
            continue
        return row_cells(net, seed, bench, row, case, pred)
    raise RuntimeError("no trip fits scenario %s (%s row %d)" % (builder.__name__, bench.key, row))


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def station_rows(net):
    for s, sid in enumerate(net.ids):
        yield [sid, CITIES[net.city[s]].code, "%.6f" % net.lng[s], "%.6f" % net.lat[s],
               json.dumps([net.ids[t] for t in sorted(net.hops[s])], ensure_ascii=False),
               net.names[s]]


def line_rows(net):
    # Grouped by city (file order breaks ties in the service's name matching).
    for city in CITIES:
        for ld in net.linedirs:
            if ld.line.city is not city:
                continue
            stations = [{"station_name": net.names[s], "stop_id": net.ids[s],
                         "x": net.lng[s], "y": net.lat[s],
                         "station_id": net.ids[s].split("-", 1)[1]} for s in ld.stops]
            yield [city.code, ld.name, json.dumps(stations, ensure_ascii=False)]


_WORKER_NET = None


def _init_worker(net):
    global _WORKER_NET
    _WORKER_NET = net


def _build_rows(task):
    seed, bench_index, start, stop = task
    bench = BENCHMARKS[bench_index]
    return [build_row(_WORKER_NET, seed, bench, row) for row in range(start, stop)]


def sample_rows(net, seed, bench_index, count, workers):
    """Rows in order; with workers > 1 they are built in parallel (same bytes)."""
    chunk = 200
    tasks = [(seed, bench_index, start, min(count, start + chunk)) for start in range(0, count, chunk)]
    if workers <= 1 or len(tasks) < 2:
        _init_worker(net)
        for task in tasks:
            for row in _build_rows(task):
                yield row
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_init_worker, initargs=(net,)) as pool:
        for rows in pool.imap(_build_rows, tasks):
            for row in rows:
                yield row


def default_workers():
    # Workers share the network by forking; where fork is unavailable, build serially.
    try:
        multiprocessing.get_context("fork")
    except ValueError:
        return 1
    return max(1, min(4, available_cores()))


def generate(out_dir, seed, stations, samples, workers):
    n_districts = 2 if stations is None else max(2, int(round(stations / STATIONS_PER_DISTRICT)))
    net = build_network(seed, n_districts)
    with Outputs() as files:
        files.make_folders(out_dir)

        def table(name):
            return files.open(os.path.join(out_dir, name), newline="")
        write_csv(table(FILE_STATIONS), STATION_FILE_COLUMNS, station_rows(net))
        write_csv(table(FILE_LINES), LINE_COLUMNS, line_rows(net))
        for index, bench in enumerate(BENCHMARKS):
            count = len(bench.scenarios) if samples is None else samples
            write_csv(table(bench.filename), bench.columns(),
                      sample_rows(net, seed, index, count, workers))
    return net


# Limits (README "Limits"): the scale options bound the network and rows built
# in memory; the seed's length bounds its conversion.
MAX_STATIONS = 1000000
MAX_SAMPLES = 1000000
MAX_WORKERS = 64
MAX_SEED_DIGITS = 40


def bounded(high):
    """An argparse type: a whole number from 0 to ``high``."""
    def parse(text):
        try:
            return limits.parse_int(text, 0, high)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc))
    return parse


def seed_int(text):
    """Any whole number of at most MAX_SEED_DIGITS digits."""
    return limits.seed_int(text, MAX_SEED_DIGITS)


def parse_args(argv):
    parser = CommandParser(prog="make_demo.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DATA_DIR, help="output folder (default: this script's folder)")
    parser.add_argument("--stations", type=bounded(MAX_STATIONS), default=None,
                        help="approximate station count of a large network (default: small demo)")
    parser.add_argument("--samples", type=bounded(MAX_SAMPLES), default=None,
                        help="rows per sample file (default: one per scenario)")
    parser.add_argument("--seed", type=seed_int, default=SEED_DEFAULT, help="generator seed")
    parser.add_argument("--workers", type=bounded(MAX_WORKERS), default=None,
                        help="processes building sample rows (output is identical for any value)")
    return parser.parse_args(argv)


def output_problem(out):
    """Why --out cannot take the files (a file, or a file there that can be
    neither replaced nor written through), or None."""
    if os.path.exists(out) and not os.path.isdir(out):
        return "--out %s is not a folder" % out
    return limits.unwritable_output([os.path.join(out, name) for name in
                                     [FILE_STATIONS, FILE_LINES] + [b.filename for b in BENCHMARKS]])


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    workers = default_workers() if args.workers is None else args.workers
    if args.samples is None and args.stations is None:
        workers = 1   # the bundled demo is tiny; a pool would only cost start-up time
    problem = output_problem(args.out)
    if problem:
        sys.stderr.write("make_demo.py: %s\n" % limits.one_line(problem))
        return EXIT_USAGE
    try:
        generate(args.out, args.seed, args.stations, args.samples, workers)
    except OSError as exc:
        sys.stderr.write("make_demo.py: %s\n" % limits.one_line(
            "cannot write to %s: %s" % (args.out, exc.strerror or exc)))
        return EXIT_USAGE
    except InputError as exc:
        sys.stderr.write("make_demo.py: %s\n" % limits.one_line(str(exc)))
        return EXIT_USAGE
    return 0

