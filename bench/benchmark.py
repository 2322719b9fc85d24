#!/usr/bin/env python3
"""Speed and memory of the four evaluators at full scale.

Builds (once) a ~150,000-station network and 10,000-row sample files with
data/make_demo.py's scale options into bench/scale/, then runs each evaluator
in a fresh process and prints rows/s, wall time (best of --repeat runs) and
peak memory (the maximum resident set size of the evaluator or of one of its
worker processes, from os.wait4).  Figures go in the README.

    python3 bench/benchmark.py [--stations N] [--samples N] [--repeat K]
"""

import argparse
import json
import os
import subprocess
import sys
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


def measure(command):
    """Wall time and the child's own peak memory (ru_maxrss, Linux KB)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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


def count_rows(path):
    import csv
    csv.field_size_limit(1 << 30)
    with open(path, encoding="utf-8", newline="") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stations", type=int, default=150000)
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per evaluator; the best wall time is reported")
    parser.add_argument("--data", default=SCALE_DIR, help="scale data folder")
    args = parser.parse_args(argv)
    build_scale_data(args.data, args.stations, args.samples)
    stations = os.path.join(args.data, "station_info.csv")
    print("calibration: 5M-step Python loop %.2f s (before)" % calibration_seconds())
    print("%-14s %8s %10s %10s %12s" % ("evaluator", "rows", "wall (s)", "rows/s",
                                        "peak (MB)"))
    for label, name, sample_file, extra in EVALUATORS:
        sample_path = os.path.join(args.data, sample_file)
        command = [sys.executable, os.path.join(REPO, name, "evaluate.py"),
                   "--input", sample_path, "--station_info", stations, "--quiet"] + extra
        if name == "general_llm":
            command += ["--line_info", os.path.join(args.data, "line_info.csv")]
        rows = count_rows(sample_path)
        runs = [measure(command) for _ in range(args.repeat)]
        wall = min(run[0] for run in runs)
        peak = max(run[1] for run in runs)
        print("%-14s %8d %10.2f %10.0f %12.1f" % (label, rows, wall, rows / wall, peak),
              flush=True)
    print("calibration: 5M-step Python loop %.2f s (after)" % calibration_seconds())
    print("peak = the largest resident set of the evaluator or one of its worker "
          "processes (they share the parent's pages).")


if __name__ == "__main__":
    main()
