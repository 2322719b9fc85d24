#!/usr/bin/env python3
"""Speed and memory of the four evaluators at full scale.

Builds (once) a ~150,000-station network and 10,000-row sample files with
data/make_demo.py's scale options into bench/scale/; for more rows
(--samples 100000, 1000000) the row files are grown by repeating those rows
with new ids, so the network is not regenerated.  Then runs each evaluator in
a fresh process with the JSON report, the details and the text report on
(--outputs quiet: --quiet only), and prints rows/s, wall time (best of
--repeat runs) and peak memory (the maximum resident set size of the evaluator
or of one of its worker processes, from os.wait4).  Beside every figure it
prints the parse floor of the same file (bench/parse_floor.py: the csv module
and json.loads of the three JSON cells of every row, in a process of its own)
and how many times the floor the evaluator took.  Figures go in
docs/performance.md.

    python3 bench/benchmark.py [--stations N] [--samples N ...] [--repeat K]
                               [--outputs full|quiet] [--only NAME] [--against REF]
                               [--published PATH]

--against REF compares this checkout with a git revision, --published PATH
with the published evaluator (a checkout of HotTricker/TransitLM that the
user fetched; never part of this repository; its general LLM evaluator calls
a remote service and is not run): each runs in turn with this checkout and
the floor (floor, PATH, REF, this, floor, ...) so that all see the same
spells of a machine whose speed drifts, and the medians are printed.
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCALE_DIR = os.path.join(HERE, "scale")

# (label, evaluator, sample file, extra flags)
EVALUATORS = [
    ("single_route", "single_route", "benchmark1_single_route_example.csv", []),
    ("  --workers 1", "single_route", "benchmark1_single_route_example.csv", ["--workers", "1"]),
    ("personalized", "personalized", "benchmark2_personalized_example.csv", []),
    ("diversity", "diversity", "benchmark3_diversity_example.csv", []),
    ("general_llm", "general_llm", "general_llm_example.csv", []),
]


def build_scale_data(folder, stations, samples):
    marker = os.path.join(folder, "scale.json")
    wanted = {"stations": stations, "samples": samples}
    if os.path.isfile(marker):
        with open(marker, encoding="utf-8") as handle:
            if json.load(handle) == wanted:
                return
    os.makedirs(folder, exist_ok=True)
    print("building scale data (%d stations, %d rows per file) in %s ..."
          % (stations, samples, folder), flush=True)
    started = time.time()
    subprocess.check_call([sys.executable, os.path.join(REPO, "data", "make_demo.py"),
                           "--stations", str(stations), "--samples", str(samples),
                           "--out", folder])
    print("  built in %.1f s" % (time.time() - started), flush=True)
    with open(marker, "w", encoding="utf-8") as handle:
        json.dump(wanted, handle)


BASE_SAMPLES = 10000             # rows make_demo.py generates; more are repeats


def grown_file(folder, sample_file, samples):
    """The sample file with ``samples`` rows: the base rows repeated with new ids."""
    source = os.path.join(folder, sample_file)
    if samples <= BASE_SAMPLES:
        return source
    target = os.path.join(folder, "x%d-%s" % (samples, sample_file))
    if os.path.isfile(target):
        return target
    csv.field_size_limit(1 << 30)
    with open(source, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    i_id = header.index("index_id") if "index_id" in header else header.index("indexid")
    with open(target + ".tmp", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        written = 0
        copy = 0
        while written < samples:
            for row in body[:samples - written]:
                row = list(row)
                row[i_id] = "%s-%d" % (row[i_id], copy)
                writer.writerow(row)
            written += min(len(body), samples - written)
            copy += 1
    os.replace(target + ".tmp", target)
    return target


def measure(command, env=None):
    """Wall time and the child's own peak memory (ru_maxrss, Linux KB)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    err = proc.stderr.read()
    proc.stderr.close()
    if status != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(command), err.decode("utf-8", "replace")))
    return wall, usage.ru_maxrss / 1024.0


def calibration_seconds():
    """A fixed pure-Python loop: how fast this machine is right now.

    Shared machines drift (here by up to 1.7x within minutes); printing this
    beside the figures makes runs comparable.
    """
    started = time.perf_counter()
    total = 0
    for number in range(5000000):
        total += number
    return time.perf_counter() - started


def warm_station_cache(root, stations, folder):
    """Make the station cache of the checkout at ``root`` (a process of its own:
    a forked child starts with its parent's memory, which would count in the
    children's peak) -> "loaded", "built", or "none" for a checkout without one."""
    return subprocess.check_output([sys.executable, "-c", (
        "import sys; sys.path.insert(0, sys.argv[1]); import common; "
        "use = getattr(common.StationNetwork.load(sys.argv[2]), 'use_cache', None); "
        "print(use(sys.argv[3]) if use else 'none')"),
        root, stations, folder]).decode().strip()


def floor_command(sample_path):
    return [sys.executable, os.path.join(HERE, "parse_floor.py"), sample_path]


# The published evaluator's scripts, by evaluator (general_llm calls a remote
# service by default: never run here).
PUBLISHED_SCRIPTS = ("single_route", "personalized", "diversity")


def stage_published(path, folder, stations):
    """A copy of the published evaluator's scripts in ``folder``, its data/
    holding the scale station file (it reads data/station_info.csv beside
    its common.py and has no option naming another) -> ``folder``."""
    scripts = ["common.py"] + [os.path.join(name, "evaluate.py") for name in PUBLISHED_SCRIPTS]
    missing = [name for name in scripts if not os.path.isfile(os.path.join(path, name))]
    if missing:
        raise SystemExit("--published %s: not a checkout of the published evaluator (no %s)"
                         % (path, ", ".join(missing)))
    for name in scripts:
        os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
        shutil.copyfile(os.path.join(path, name), os.path.join(folder, name))
    os.makedirs(os.path.join(folder, "data"), exist_ok=True)
    os.symlink(os.path.abspath(stations), os.path.join(folder, "data", "station_info.csv"))
    return folder


def published_command(folder, name, sample_path):
    """The published evaluator on a sample file (it has no --quiet: its report
    and failure lines go to stdout, discarded), or None for general_llm."""
    if name not in PUBLISHED_SCRIPTS:
        return None
    return [sys.executable, os.path.join(folder, name, "evaluate.py"), "--input", sample_path]


def evaluator_command(root, name, sample_path, stations, extra, outputs, out, data):
    command = [sys.executable, os.path.join(root, name, "evaluate.py"),
               "--input", sample_path, "--station_info", stations] + extra
    if outputs == "full":
        command += ["--json", os.path.join(out, "report.json"),
                    "--details", os.path.join(out, "details.jsonl")]
    else:
        command += ["--quiet"]
    if name == "general_llm":
        command += ["--line_info", os.path.join(data, "line_info.csv")]
    return command


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def checkout(revision, folder):
    """A detached git worktree of ``revision`` in ``folder``."""
    done = subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", folder, revision],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit("cannot check out %s: %s"
                         % (revision, done.stdout.decode("utf-8", "replace").strip()))


def count_rows(path):
    import csv
    csv.field_size_limit(1 << 30)
    with open(path, encoding="utf-8", newline="") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stations", type=int, default=150000)
    parser.add_argument("--samples", type=int, nargs="+", default=[10000],
                        help="row counts to measure (beyond %d: the rows repeated with "
                             "new ids)" % BASE_SAMPLES)
    parser.add_argument("--outputs", choices=("full", "quiet"), default="full",
                        help="full: the JSON report, the details and the text report with "
                             "its failure lines (what the memory target is about; default); "
                             "quiet: --quiet and nothing else (the published evaluator's "
                             "work, for speed comparisons)")
    parser.add_argument("--only", action="append",
                        help="measure only this evaluator label (repeatable)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per evaluator; the best wall time is reported")
    parser.add_argument("--data", default=SCALE_DIR, help="scale data folder")
    parser.add_argument("--against", metavar="REF",
                        help="compare with this git revision, in alternating runs "
                             "(medians of --repeat runs each)")
    parser.add_argument("--published", metavar="PATH",
                        help="compare with the published evaluator (a checkout of "
                             "HotTricker/TransitLM) in alternating runs (medians of --repeat "
                             "runs each); its general LLM evaluator is not run")
    parser.add_argument("--station_cache", choices=("on", "off"), default="on",
                        help="on (default): the station cache in DATA/cache, made before "
                             "the runs are timed (what every run after the first one on a "
                             "station file sees); off: no cache")
    args = parser.parse_args(argv)
    build_scale_data(args.data, args.stations, min(BASE_SAMPLES, min(args.samples)))
    stations = os.path.join(args.data, "station_info.csv")
    out = tempfile.mkdtemp(prefix="transitlm-bench-")
    roots = [REPO]
    if args.against:
        roots.insert(0, os.path.join(out, "against"))
        checkout(args.against, roots[0])
    published = None
    if args.published:
        published = stage_published(args.published, os.path.join(out, "published"), stations)
    try:
        run_all(args, roots, stations, out, published)
    finally:
        if args.against:
            subprocess.call(["git", "-C", REPO, "worktree", "remove", "--force", roots[0]])
        # The runs' outputs (details of a million rows take gigabytes) and the
        # copy of the published evaluator.
        shutil.rmtree(out, ignore_errors=True)


def run_all(args, roots, stations, out, published=None):
    env = dict(os.environ, TRANSITLM_CACHE_DIR="off")
    if args.station_cache == "on":
        env["TRANSITLM_CACHE_DIR"] = os.path.join(args.data, "cache")
        made = [warm_station_cache(root, stations, env["TRANSITLM_CACHE_DIR"])
                for root in roots]
        print("station cache: %s (%s)" % (env["TRANSITLM_CACHE_DIR"], ", ".join(made)))
    else:
        print("station cache: off")
    print("calibration: 5M-step Python loop %.2f s (before)" % calibration_seconds())
    compared = bool(args.against or published)
    # The columns of a figure line (wall times in seconds; x floor: this
    # checkout's time over the floor's; x faster: the published evaluator's
    # time over this checkout's).
    heads = ["evaluator", "rows"]
    if published:
        heads.append("published")
    if args.against:
        heads.append("REF")
    heads.append("this" if compared else "wall (s)")
    if published:
        heads.append("x faster")
    if args.against:
        heads.append("change")
    heads += ["floor", "x floor", "rows/s", "peak (MB)"]
    print("%-14s %8s" % tuple(heads[:2]) + "".join(" %10s" % head for head in heads[2:]))
    for label, name, sample_file, extra in EVALUATORS:
        if args.only and label.strip() not in args.only and name not in args.only:
            continue
        for samples in args.samples:
            sample_path = grown_file(args.data, sample_file, samples)
            # (what, command): the floor first, then the others, this checkout last.
            commands = [("floor", floor_command(sample_path))]
            if published:
                commands.append(("published", published_command(published, name, sample_path)))
            commands += [("REF" if root != REPO else "this",
                          evaluator_command(root, name, sample_path, stations, extra,
                                            args.outputs, out, args.data)) for root in roots]
            rows = count_rows(sample_path)
            # In turn, so that every command sees the same spells of the machine.
            runs = {what: [] for what, _ in commands}
            for _ in range(args.repeat):
                for what, command in commands:
                    if command is not None:
                        runs[what].append(measure(command, env))
            pick = median if compared else min
            wall = {what: pick([run[0] for run in times]) if times else None
                    for what, times in runs.items()}
            peak = max(run[1] for run in runs["this"])
            cells = []
            if published:
                cells.append(_seconds(wall["published"]))
            if args.against:
                cells.append(_seconds(wall["REF"]))
            cells.append(_seconds(wall["this"]))
            if published:
                cells.append("-" if wall["published"] is None
                             else "x%.2f" % (wall["published"] / wall["this"]))
            if args.against:
                cells.append("%+.0f%%" % ((wall["this"] / wall["REF"] - 1.0) * 100.0))
            cells += [_seconds(wall["floor"]), "%.2f" % (wall["this"] / wall["floor"]),
                      "%.0f" % (rows / wall["this"]), "%.1f" % peak]
            print("%-14s %8d" % (label, rows) + "".join(" %10s" % cell for cell in cells),
                  flush=True)
    print("calibration: 5M-step Python loop %.2f s (after)" % calibration_seconds())
    if compared:
        print("%smedians of %d alternating runs each (the floor's too)."
              % ("REF = %s; " % args.against if args.against else "", args.repeat))
    else:
        print("wall and floor: the best of %d runs each." % args.repeat)
    if published:
        print("published = %s (its general LLM evaluator is not run: it calls a remote "
              "service)." % args.published)
    print("floor = bench/parse_floor.py on the same file (csv module + json.loads of the three "
          "JSON cells of every row); x floor = this / floor.")
    print("peak = the largest resident set of this checkout's evaluator or one of its worker "
          "processes (they share the parent's pages).")


def _seconds(value):
    return "-" if value is None else "%.2f" % value


if __name__ == "__main__":
    main()
