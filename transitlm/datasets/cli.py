"""make_dataset.py: the TransitLM training-data release for one or more network folders.

    python3 data/make_dataset.py --network DIR [--network DIR ...] --out DIR
        [--train N] [--test N] [--corpus N] [--part_size N] [--seed S] [--lang zh|en]
        [--origin_group N] [--workers N] [--parts A-B]

Writes the SFT splits (transit-lm-benchmark{1,2,3}-{train,test}.csv and
transit-lm-general-benchmark1-test.csv), sft/*.jsonl, the network files
(transit-lm-station-info.csv, transit-lm-line-info.csv,
transit-lm-station-ids.json, network.json), the pre-training corpus
(transit-lm-cpt-corpus/*.csv), the card (README.md) and the manifest
(dataset.json); docs/training-data.md describes them.

The order of a run: the four test files are drawn first and their trips held
out (splits.HoldOut); then the train files, checked against the hold-out;
then the corpus parts that are not there yet, each renamed into place when
complete, each record audited by the task that made it (audit.CorpusAudit);
last the network files, the statistics (from those audits, and for parts
another run built, read back from the files and audited by the same code, so
they are the same however the parts were built), dataset.json and the card.
``--parts A-B`` draws the test trips (to hold them out), writes only those
parts and a dataset.json holding the settings; a run without it completes
the folder.

Shortfall: a network that cannot supply the rows asked for gives what it
has (a file may hold fewer rows, even none: benchmark 3 on a network without
three distinct routes); each file's shortfall is printed and recorded in
dataset.json ("shortfall"), and so are corpus sessions that found no trip.
Refused with exit status 2 and nothing written: a network with fewer than two
lines, and networks that give no benchmark-1 test row at all.

Bad input -- a network folder that cannot be read or has nothing to route
on, two networks sharing a stop id or an ad_code, an --out that is a file or
a device or holds other files or another dataset, a --parts range outside
the plan -- stops the run with exit status 2 and one line, before anything
is written.

Standard library only; Python 3.8+.
"""

import collections
import csv
import hashlib
import json
import os
import sys

from common import VERSION, InputError
from transitlm.io.exit_status import EXIT_USAGE, EXIT_WORKER, WorkerFailed, signals_held
from transitlm.io.files import Outputs, make_folders, write_whole
from transitlm.evaluation.network_check import network_record
from transitlm.networks import limits
from transitlm.networks.benchmark_builder import (MAX_SEED_DIGITS, TRIP_KM, NetworkError,
                                                  load_network, satisfiable_req_types,
                                                  warm_bound_tables)
from transitlm.io.terminal import CommandParser, Progress
from transitlm.evaluation.workers import (DEFAULT_BUILD_WORKERS, ForkedWorkers, WorkerFailure,
                                          build_worker_count, can_fork)
from transitlm.datasets import plan as planning
from transitlm.datasets import card, corpus_texts, release, sft, statistics, tasks
from transitlm.datasets import release_names as names
from transitlm.datasets.audit import CorpusAudit
from transitlm.datasets.candidates import COST_FACTOR, MAX_CANDIDATES
from transitlm.datasets.splits import (MAX_ORIGIN_GROUP, MIN_ORIGIN_GROUP, NEAR_KM, HoldOut,
                                       shares, units_of)

LEAKAGE_RULES = [
    "pair: the unordered (first boarding stop, last alighting stop) of a test label's first "
    "route, in any of the four test files, is never the pair of a train row's first route nor "
    "of any route of a corpus session",
    "near: no train row or corpus session starts within %g m of a test trip's start and ends "
    "within %g m of its end, in either direction" % (NEAR_KM * 1000, NEAR_KM * 1000)]
MAX_ORIGIN_GROUP_ARG = 10000  # --origin_group
ROW_CHUNK = 4                 # candidate rows per task
ROW_TRIES = 3                 # candidate rows per row asked for (as make_benchmark.py)
PROG = "make_dataset.py"


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------

def parse_args(argv):
    return make_parser().parse_args(argv)


def make_parser(prog=PROG, description="Build the TransitLM training-data release (SFT splits, "
                "pre-training corpus, station vocabulary) for network folders."):
    """make_dataset.py's options (data/ray_make_dataset.py adds its own to them)."""
    parser = CommandParser(prog=prog, description=description)
    parser.add_argument("--network", action="append", required=True,
                        help="network folder (import_gtfs.py or make_demo.py); repeat for several cities")
    parser.add_argument("--out", required=True, help="release folder")
    parser.add_argument("--train", type=limits.int_arg(0, planning.MAX_ROWS),
                        default=planning.DEFAULT_TRAIN, help="train rows per task (default %(default)s)")
    parser.add_argument("--test", type=limits.int_arg(1, planning.MAX_ROWS),
                        default=planning.DEFAULT_TEST,
                        help="test rows per task, the general file too (default %(default)s)")
    parser.add_argument("--corpus", type=limits.int_arg(0, planning.MAX_CORPUS),
                        default=planning.DEFAULT_CORPUS, help="corpus sessions (default %(default)s)")
    parser.add_argument("--part_size", type=limits.int_arg(1, planning.MAX_PART_SIZE),
                        default=planning.DEFAULT_PART_SIZE,
                        help="records per corpus part, static records included (default %(default)s)")
    parser.add_argument("--seed", type=lambda t: limits.seed_int(t, MAX_SEED_DIGITS),
                        default=planning.DEFAULT_SEED, help="generator seed")
    parser.add_argument("--origin_group", type=limits.int_arg(1, MAX_ORIGIN_GROUP_ARG), default=None,
                        help="corpus sessions that share one origin point and its search "
                             "(default: by the corpus's density, %d to %d: see "
                             "docs/training-data.md)" % (MIN_ORIGIN_GROUP, MAX_ORIGIN_GROUP))
    parser.add_argument("--lang", choices=("zh", "en"), default="zh",
                        help="language of prompts and corpus texts (default zh)")
    parser.add_argument("--workers", type=limits.int_arg(0, planning.MAX_WORKERS), default=0,
                        metavar="N",
                        help="forked worker processes (where fork is available); the bytes "
                             "written do not depend on it. 0 = one per available CPU core, at most %d "
                             "(default); 1 = a single process" % DEFAULT_BUILD_WORKERS)
    parser.add_argument("--parts", default=None,
                        help="build only corpus parts A-B (and dataset.json's settings)")
    return parser


def fail(message):
    sys.stderr.write("%s: %s\n" % (PROG, limits.one_line(str(message))))
    return EXIT_USAGE


# ---------------------------------------------------------------------------
# Workers: tasks in, results out in submission order
# ---------------------------------------------------------------------------

class Runner(object):
    """tasks.run_task in forked workers (or here, for --workers 1), results in
    the order the tasks were submitted."""

    def __init__(self, workers):
        workers = build_worker_count(workers)
        forked = workers > 1 and can_fork()
        if forked and tasks.CONTEXT is not None:
            for net in tasks.CONTEXT.nets:      # made once here, shared by the forks
                warm_bound_tables(net)
        self.pool = ForkedWorkers(workers, tasks.run_task) if forked else None
        self.window = 2 * workers if self.pool else 1
        self.done = collections.deque()

    @property
    def busy(self):
        return self.pool.busy if self.pool else len(self.done)

    def submit(self, task):
        if self.pool:
            self.pool.submit(task)
        else:
            self.done.append(tasks.run_task(task))

    def result(self):
        problem, value = self.pool.result() if self.pool else self.done.popleft()
        if problem is not None:
            raise tasks.RecordError(problem)
        return value

    def discard(self):
        if self.pool:
            self.pool.discard()
        self.done.clear()

    def close(self, kill=False):
        if self.pool:
            self.pool.close(kill=kill)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        self.close(kill=kind is not None)


class Digest(object):
    """An open output that hashes what is written through it (the file's bytes:
    UTF-8, newlines as written) and counts rows."""

    def __init__(self, handle):
        self.handle = handle
        self.sha = hashlib.sha256()
        self.rows = 0

    def write(self, data):
        self.sha.update(data.encode("utf-8"))
        self.handle.write(data)


# ---------------------------------------------------------------------------
# SFT files
# ---------------------------------------------------------------------------

def draw_file(runner, ctx, kind, split, task_id, count, sink, progress):
    """Draw a file's rows unit by unit (splits.shares), each row's candidates in
    order until the unit has its share or ROW_TRIES times it were tried;
    ``sink(cells, pair, origin, dest)`` takes each row -> figures."""
    figures = {"asked": count, "rows": 0, "no_trip": 0, "out_of_range": 0, "no_label": 0,
               "refused_near": 0, "refused_pair": 0}
    counts = shares(count, [u.weight for u in ctx.units])
    for unit, wanted in zip(ctx.units, counts):
        got, next_row, limit = 0, 0, ROW_TRIES * wanted
        while got < wanted:
            while runner.busy < runner.window and next_row < limit:
                runner.submit(("rows", kind, split, unit.index, task_id, next_row,
                               min(limit, next_row + ROW_CHUNK)))
                next_row += ROW_CHUNK
            if not runner.busy:
                break
            for row, cells, pair, origin, dest, draws, refusals in runner.result():
                if got >= wanted:
                    break
                figures["out_of_range"] += draws.get("range", 0)
                figures["no_label"] += draws.get("route", 0)
                figures["refused_near"] += refusals.get("near", 0)
                figures["refused_pair"] += refusals.get("pair", 0)
                if cells is None:
                    figures["no_trip"] += 1
                    continue
                sink(cells, pair, origin, dest)
                got += 1
                progress.step()
        runner.discard()
        figures["rows"] += got
    figures["short"] = count - figures["rows"]
    return figures


class SplitSink(object):
    """Where a file's rows go: its CSV (and sft/*.jsonl), the statistics, the hold-out."""

    def __init__(self, files, out, name, split, task_id, stats, holdout, jsonl):
        self.task_id = task_id
        self.stats = stats
        self.holdout = holdout
        self.path = names.split_file(name, split)
        self.csv = Digest(files.open(os.path.join(out, self.path), newline=""))
        self.writer = csv.writer(self.csv)
        self.writer.writerow(names.SFT_COLUMNS)
        self.jsonl = None
        if jsonl:
            self.jsonl_path = names.sft_jsonl(name, split)
            self.jsonl = Digest(files.open(os.path.join(out, self.jsonl_path)))

    def __call__(self, cells, pair, origin, dest):
        row = sft.csv_row(cells, self.task_id)
        self.writer.writerow(row)
        self.csv.rows += 1
        if self.jsonl is not None:
            self.jsonl.write(sft.jsonl_line(row))
            self.jsonl.rows += 1
        if self.holdout is not None:
            self.holdout.add(pair, origin, dest)
        self.stats.add_sft_row(self.task_id, int(row[1]), json.loads(row[6]))

    def entries(self):
        out = {self.path: {"rows": self.csv.rows, "sha256": self.csv.sha.hexdigest()}}
        if self.jsonl is not None:
            out[self.jsonl_path] = {"rows": self.jsonl.rows, "sha256": self.jsonl.sha.hexdigest()}
        return out


def hold_only(holdout):
    def sink(cells, pair, origin, dest):
        holdout.add(pair, origin, dest)
    return sink


# ---------------------------------------------------------------------------
# Corpus parts
# ---------------------------------------------------------------------------

def build_parts(runner, ctx, out, numbers, progress):
    """Build the parts ``numbers`` (each renamed into place when complete) ->
    (figures: sessions not found, draws refused; {part: (its CorpusAudit, made
    by its tasks; the SHA-256 of its bytes, hashed as they were written)}
    for the parts of a run that audits).  Tasks are made as they are
    submitted, so memory does not grow with --corpus."""
    figures = {"parts": len(numbers), "records": 0, "sessions_missing": 0}
    audits, digests = {}, {}
    todo = ((k, chunk) for k in numbers for chunk in ctx.plan.chunks(k))
    waiting = collections.deque()          # part number of each submitted task
    writer, current = None, None
    try:
        while True:
            while runner.busy < runner.window:
                task = next(todo, None)
                if task is None:
                    break
                runner.submit(("records",) + task[1])
                waiting.append(task[0])
            if not waiting:
                break
            k = waiting.popleft()
            text, count, counts, missing, checks = runner.result()
            if checks is not None:
                audits.setdefault(k, CorpusAudit()).merge(checks)
            if k != current:
                # One part renamed into place and the next one's temporary
                # made and recorded, or neither: a signal waits until both
                # are done, so the finally below knows every temporary.
                with signals_held():
                    if writer is not None:
                        writer.commit()
                        digests[current] = writer.sha256
                        writer = None
                    writer = release.PartWriter(os.path.join(out, names.corpus_part(k)), k)
                current = k
            writer.write(text, count)
            figures["records"] += count
            figures["sessions_missing"] += missing
            for key, value in counts.items():
                figures[key] = figures.get(key, 0) + value
            progress.step(count + missing)
        if writer is not None:
            writer.commit()
            digests[current] = writer.sha256
            writer = None
    finally:
        if writer is not None:
            writer.discard()
    built = {k: (audits[k], digests[k]) for k in digests if k in audits}
    return figures, built


def read_part(ctx, k, path, progress):
    """Corpus part ``k``, built by another run, read back and audited -> its
    CorpusAudit; an InputError (one line: the part, what is wrong, the fix)
    for a part that is not one."""
    part = CorpusAudit()
    rel = names.corpus_part(k)
    try:
        rows = release.read_csv_rows(path)
        if next(rows, None) != names.CORPUS_COLUMNS:
            raise InputError("%s is not a corpus part (its header differs): remove it and run "
                             "again" % path)
        for row in rows:
            if len(row) != len(names.CORPUS_COLUMNS):
                raise InputError("%s row %d has %d cells, not %d: remove the part and run again"
                                 % (rel, part.records + 1, len(row), len(names.CORPUS_COLUMNS)))
            progress.step()
            part.add(ctx, k, *row)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError("%s cannot be read as a corpus part (%s): remove it and run again"
                         % (rel, limits.one_line(str(exc))))
    return part


def read_corpus(out, ctx, stats, progress, built=None):
    """Every part of the plan: file entries, statistics, and the checks
    (hold-out, texts, network; static records once each) -> (entries, figures).
    A part in ``built`` (part -> (its CorpusAudit, its SHA-256)) was made by
    this run, whose tasks made every check of audit.CorpusAudit on each
    record as the part holds it (the texts as they were made), and whose
    writer hashed its bytes as it wrote them: it is not read again.  Every
    other part is read back, hashed and checked in full."""
    built = built or {}
    entries = {}
    checks = CorpusAudit()
    for k in range(1, ctx.plan.parts + 1):
        rel = names.corpus_part(k)
        path = os.path.join(out, rel)
        if k in built:
            part, sha = built[k]
        else:
            sha, _ = release.file_digest(path)
            part = read_part(ctx, k, path, progress)
        checks.merge(part)
        entries[rel] = {"rows": part.records, "sha256": sha}
    checked = checks.finish(ctx.nets)
    stats.merge(checks.stats)
    return entries, checked


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def load_networks(folders):
    nets = []
    for folder in folders:
        if not os.path.isdir(folder):
            raise InputError("--network %s is not a folder" % folder)
        try:
            nets.append(load_network(folder))
        except NetworkError as exc:
            raise InputError(str(exc))
    return nets


def network_entries(folders, nets, units):
    out = []
    for folder, net in zip(folders, nets):
        areas = [{"adcode": u.code, "city": u.district.city.name, "stations": u.weight}
                 for u in units if u.net is net]
        first = net.districts[0]
        out.append({"city": first.city.name, "adcode": first.city.code, "areas": areas,
                    "network_sha256": net.identity,
                    "station_info_sha256": release.file_digest(
                        os.path.join(folder, "station_info.csv"))[0],
                    "line_info_sha256": release.file_digest(
                        os.path.join(folder, "line_info.csv"))[0],
                    "stations": len(net.ids), "line_directions": len(net.linedirs)})
    return out


def prepare(args):
    """Everything checked before anything is written -> (ctx, networks, settings, parts)."""
    problem = release.out_problem(args.out)
    if problem:
        raise InputError(problem)
    nets = load_networks(args.network)
    for folder, net in zip(args.network, nets):
        if len(net.lines) < 2:
            raise InputError("%s has %d line: a release needs a network of two or more (transfers, "
                             "alternatives)" % (folder, len(net.lines)))
        if not units_of([net]):
            raise InputError("%s: no area with lines to route on" % folder)
    problem = release.station_collision(nets, args.network) or \
        release.adcode_collision(nets, args.network)
    if problem:
        raise InputError(problem)
    units = units_of(nets)
    plan = planning.Plan(nets, units, args.corpus, args.part_size, args.origin_group)
    if plan.parts > names.MAX_PARTS:
        raise InputError("the corpus would have %d parts, more than %d: give a larger "
                         "--part_size" % (plan.parts, names.MAX_PARTS))
    parts = None
    if args.parts is not None:
        try:
            parts = planning.parse_parts(args.parts)
        except ValueError as exc:
            raise InputError(str(exc))
        if parts[1] > plan.parts:
            raise InputError("--parts %s is outside the plan: it has parts 1-%d"
                             % (args.parts, plan.parts))
    networks = network_entries(args.network, nets, units)
    settings = planning.settings_of(args, networks)
    release.check_contents(args.out, plan.parts, settings)
    req_types = [satisfiable_req_types(net)[0] for net in nets]
    try:
        services = [corpus_texts.read_line_service(folder) for folder in args.network]
    except NetworkError as exc:
        raise InputError(str(exc))
    ctx = tasks.Context(nets, units, plan, args.seed, args.lang, req_types, services)
    return ctx, networks, settings, parts


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        ctx, networks, settings, parts = prepare(args)
    except InputError as exc:
        return fail(exc)
    try:
        with Outputs() as files:
            files.make_folders(args.out)
            build(args, ctx, networks, settings, parts, files)
    except (InputError, tasks.RecordError) as exc:
        return fail(exc)
    except (WorkerFailed, WorkerFailure) as exc:
        sys.stderr.write("%s: %s; the parts finished are kept, the same command finishes the "
                         "run\n" % (PROG, limits.one_line(str(exc))))
        return EXIT_WORKER
    return 0


def say(text):
    print(limits.terminal_text(text))


def build(args, ctx, networks, settings, parts, files):
    out = args.out
    removed = release.remove_leftovers(out, parts)
    if removed:
        say("removed %d unfinished file(s) of an earlier run" % removed)
    say("networks       %s" % "; ".join(
        "%s (%d stations, %d line directions)" % (
            ", ".join(a["city"] for a in n["areas"]), n["stations"], n["line_directions"])
        for n in networks))
    say("plan           %d corpus records in %d part(s) of %d: %d static, %d sessions"
        % (ctx.plan.total, ctx.plan.parts, ctx.plan.part_size, ctx.plan.static_total,
           ctx.plan.total - ctx.plan.static_total))
    stats = statistics.DatasetStatistics()
    for unit in ctx.units:
        lines = sum(1 for ld in unit.net.linedirs if ld.line.city.code == unit.code)
        stats.add_network(unit.district.city.name, unit.code, unit.weight, lines)
    holdout = HoldOut(ctx.nets)
    enabled = sys.stderr.isatty()
    tasks.CONTEXT = ctx
    entries, shortfall, summaries = {}, {}, []

    # 1. The test files: drawn first, their trips held out.  A --parts run
    # reads the trips another --parts run of these settings drew, when one
    # left them (release.read_holdout_cache); else it draws and leaves them.
    key = release.holdout_key(settings) if parts else None
    cached = release.read_holdout_cache(out, key) if parts else None
    if cached is not None:
        for entry in cached:
            holdout.add(*entry)
        say("hold-out       %d test trips (%d pairs), as an earlier --parts run of these settings "
            "drew them" % (holdout.trips, len(holdout.pairs)))
    if not parts:
        files.make_folders(os.path.join(out, names.SFT_FOLDER))
    with Runner(args.workers) as runner:
        progress = Progress(4 * args.test, enabled)
        for kind, name, split, rel in names.split_files():
            if split != "test" or cached is not None:
                continue
            task_id = names.task_id(name, split)
            sink = hold_only(holdout) if parts else SplitSink(
                files, out, name, split, task_id, stats, holdout, kind != "general")
            figures = draw_file(runner, ctx, kind, split, task_id, args.test, sink, progress)
            if kind == "b1" and not figures["rows"]:
                raise InputError("the networks give no trip %g-%g km long with a route (%d "
                                 "candidate rows tried): nothing written"
                                 % (TRIP_KM[0], TRIP_KM[1], ROW_TRIES * args.test))
            summaries.append((rel, figures))
            if not parts:
                entries.update(sink.entries())
        progress.finish()
    if parts and cached is None:
        release.write_holdout_cache(out, key, holdout.entries)

    # The settings: the folder is this dataset's from now on.
    if release.read_manifest(out) is None:
        write_whole(os.path.join(out, names.MANIFEST), release.manifest_text(
            base_manifest(settings, networks, complete=False)))

    # 2. The train files, checked against the hold-out; 3. the corpus parts.
    ctx.holdout = holdout
    ctx.audit = not parts
    with Runner(args.workers) as runner:
        if not parts:
            progress = Progress(3 * args.train, enabled)
            for kind, name, split, rel in names.split_files():
                if split != "train":
                    continue
                task_id = names.task_id(name, split)
                sink = SplitSink(files, out, name, split, task_id, stats, None, True)
                figures = draw_file(runner, ctx, kind, split, task_id, args.train, sink, progress)
                summaries.append((rel, figures))
                entries.update(sink.entries())
            progress.finish()
        wanted = range(parts[0], parts[1] + 1) if parts else range(1, ctx.plan.parts + 1)
        numbers = [k for k in wanted if not os.path.exists(os.path.join(out, names.corpus_part(k)))]
        if parts:
            # Shared with runs of other ranges (beside this one): a --parts run
            # that fails must not remove it from under them (Outputs would, were
            # it empty), so it is made outside the run's transaction.
            make_folders(os.path.join(out, names.CORPUS_FOLDER), [], "output folder")
        else:
            files.make_folders(os.path.join(out, names.CORPUS_FOLDER))
        total = sum(ctx.plan.part_records(k) for k in numbers)
        progress = Progress(total, enabled)
        corpus, built = build_parts(runner, ctx, out, numbers, progress)
        progress.finish()
    for rel, figures in summaries:
        if figures["short"]:
            shortfall[rel] = figures["short"]
        say(row_summary(rel, figures))
    say("%-40s %d part(s) built (%d records), %d already there%s" % (
        names.CORPUS_FOLDER + "/", corpus["parts"], corpus["records"],
        len(wanted) - len(numbers), corpus_note(corpus)))
    if parts:
        say("parts %d-%d of %d written; run without --parts to complete the folder"
            % (parts[0], parts[1], ctx.plan.parts))
        return

    # 4. Network files, the corpus audited (other runs' parts read back), the
    # manifest and the card.
    network_files = Outputs()
    with network_files:
        release.write_network_files(network_files, out, args.network, ctx.nets)
    for rel in (names.STATION_INFO, names.LINE_INFO, names.STATION_IDS):
        sha, _ = release.file_digest(os.path.join(out, rel))
        rows = sum(len(net.ids) for net in ctx.nets) if rel != names.LINE_INFO else \
            sum(1 for _ in release.network_rows(args.network, "line_info.csv", ("line_name",)))
        entries[rel] = {"rows": rows, "sha256": sha}
    record = network_record(os.path.join(out, names.STATION_INFO), os.path.join(out, names.LINE_INFO),
                            None, beside=True)
    files.write(os.path.join(out, names.NETWORK_JSON), record)
    entries[names.NETWORK_JSON] = {"rows": 1, "sha256": hashlib.sha256(record.encode("utf-8")).hexdigest()}
    progress = Progress(sum(ctx.plan.part_records(k) for k in range(1, ctx.plan.parts + 1)
                            if k not in built), enabled)
    corpus_entries, checked = read_corpus(out, ctx, stats, progress, built)
    progress.finish()
    entries.update(corpus_entries)
    train = [f for rel, f in summaries if rel.endswith("-train.csv")]
    leakage = {
        "near_km": NEAR_KM,
        "test_trips_held_out": holdout.trips, "pairs_held_out": len(holdout.pairs),
        "train_rows_checked": sum(f["rows"] for f in train),
        "train_draws_refused_near": sum(f["refused_near"] for f in train),
        "train_draws_refused_pair": sum(f["refused_pair"] for f in train),
        "corpus_sessions_checked": checked["sessions"],
        "corpus_routes_checked": checked["routes"],
        "violations": 0}
    stats.set_leakage(leakage)
    missing = ctx.plan.total - ctx.plan.static_total - checked["sessions"]
    if missing:
        shortfall["corpus_sessions"] = missing
    manifest = base_manifest(settings, networks, complete=True)
    manifest.update({
        "split_rule": "rows of each file and corpus sessions are split across the networks' "
                      "areas (one per ad_code) in proportion to their stations, largest "
                      "remainder first, ties to the earlier area",
        "candidate_cost": "expert score (protocol.md section 3)",
        "candidate_cost_factor": COST_FACTOR, "max_candidates": MAX_CANDIDATES,
        "origin_groups": {unit.code: group for unit, group in zip(ctx.units, ctx.plan.origin_groups)},
        "shortfall": shortfall, "leakage": leakage, "leakage_rules": LEAKAGE_RULES,
        "statistics": stats.as_json(),
        "files": {k: entries[k] for k in sorted(entries)}})
    files.write(os.path.join(out, names.MANIFEST), release.manifest_text(manifest))
    files.write(os.path.join(out, names.CARD), card.card_text(manifest))
    say("leakage        %d test trips held out (%d pairs); %d train rows and %d corpus sessions "
        "(%d routes) checked; draws refused: %d near, %d by pair"
        % (holdout.trips, len(holdout.pairs), leakage["train_rows_checked"], checked["sessions"],
           checked["routes"], leakage["train_draws_refused_near"],
           leakage["train_draws_refused_pair"]))
    release.remove_holdout_caches(out)
    say("wrote          %s (%s, %s)" % (out, names.MANIFEST, names.CARD))


def base_manifest(settings, networks, complete):
    return {names.MANIFEST_MARKER: names.MANIFEST_SCHEMA, "version": VERSION,
            "complete": complete, "settings": settings, "networks": networks}


def row_summary(rel, figures):
    note = ""
    if figures["short"]:
        note = ("  (%d short: %d candidate rows found no trip; draws rejected: %d out of range, "
                "%d without a label, %d near a test trip, %d with a held-out pair)"
                % (figures["short"], figures["no_trip"], figures["out_of_range"],
                   figures["no_label"], figures["refused_near"], figures["refused_pair"]))
    elif figures["refused_near"] or figures["refused_pair"]:
        note = "  (draws refused by the hold-out: %d near, %d by pair)" % (
            figures["refused_near"], figures["refused_pair"])
    return "%-40s %6d rows%s" % (rel, figures["rows"], note)


def corpus_note(figures):
    parts = []
    if figures["sessions_missing"]:
        parts.append("%d sessions found no trip" % figures["sessions_missing"])
    refused = figures.get("near", 0) + figures.get("pair", 0)
    if refused or figures.get("candidate_pair"):
        parts.append("draws refused by the hold-out: %d near, %d by pair; %d candidates dropped"
                     % (figures.get("near", 0), figures.get("pair", 0),
                        figures.get("candidate_pair", 0)))
    return "  (%s)" % "; ".join(parts) if parts else ""
