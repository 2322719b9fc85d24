#!/usr/bin/env python3
"""Speed and memory of the four evaluators at full scale.

Builds (once) a ~150,000-station network and 10,000-row sample files with
data/make_demo.py's scale options into bench/scale/; for more rows
(--samples 100000, 1000000) the row files are grown by repeating those rows
with new ids, so the network is not regenerated.  Then runs each evaluator in
a fresh process with the JSON report, the details and the text report on
(--outputs quiet: --quiet only), and prints rows/s, wall time (best of
--repeat runs) and peak memory (the maximum resident set size of the evaluator
or of one of its worker processes, from os.wait4).  Figures go in the README.

    python3 bench/benchmark.py [--stations N] [--samples N ...] [--repeat K]
                               [--outputs full|quiet] [--only NAME] [--against REF]

--against REF compares this checkout with a git revision instead: the two run
in turn (REF, this, REF, this, ...) so that both see the same spells of a
machine whose speed drifts, and the medians are printed.
"""

import argparse
import csv
import json
import os
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
    try:
        run_all(args, roots, stations, out)
    finally:
        if args.against:
            subprocess.call(["git", "-C", REPO, "worktree", "remove", "--force", roots[0]])


def run_all(args, roots, stations, out):
    env = dict(os.environ, TRANSITLM_CACHE_DIR="off")
    if args.station_cache == "on":
        env["TRANSITLM_CACHE_DIR"] = os.path.join(args.data, "cache")
        made = [warm_station_cache(root, stations, env["TRANSITLM_CACHE_DIR"])
                for root in roots]
        print("station cache: %s (%s)" % (env["TRANSITLM_CACHE_DIR"], ", ".join(made)))
    else:
        print("station cache: off")
    print("calibration: 5M-step Python loop %.2f s (before)" % calibration_seconds())
    if args.against:
        print("%-14s %8s %10s %10s %8s" % ("evaluator", "rows", "REF (s)", "this (s)",
                                           "change"))
    else:
        print("%-14s %8s %10s %10s %12s" % ("evaluator", "rows", "wall (s)", "rows/s",
                                            "peak (MB)"))
    for label, name, sample_file, extra in EVALUATORS:
        if args.only and label.strip() not in args.only and name not in args.only:
            continue
        for samples in args.samples:
            sample_path = grown_file(args.data, sample_file, samples)
            commands = [evaluator_command(root, name, sample_path, stations, extra,
                                          args.outputs, out, args.data) for root in roots]
            rows = count_rows(sample_path)
            # In turn, so that every checkout sees the same spells of the machine.
            runs = [[] for _ in commands]
            for _ in range(args.repeat):
                for command, times in zip(commands, runs):
                    times.append(measure(command, env))
            if args.against:
                before, after = (median([run[0] for run in times]) for times in runs)
                print("%-14s %8d %10.2f %10.2f %+7.0f%%"
                      % (label, rows, before, after, (after / before - 1.0) * 100.0),
                      flush=True)
            else:
                wall = min(run[0] for run in runs[0])
                peak = max(run[1] for run in runs[0])
                print("%-14s %8d %10.2f %10.0f %12.1f" % (label, rows, wall, rows / wall,
                                                         peak), flush=True)
    print("calibration: 5M-step Python loop %.2f s (after)" % calibration_seconds())
    if args.against:
        print("REF = %s; medians of %d alternating runs each." % (args.against, args.repeat))
    else:
        print("peak = the largest resident set of the evaluator or one of its worker "
              "processes (they share the parent's pages).")


if __name__ == "__main__":
    main()
