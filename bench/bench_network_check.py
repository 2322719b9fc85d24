#!/usr/bin/env python3
"""What the network check (transitlm/evaluation/network_check.py) costs an evaluator run.

Grows each bundled example file to --samples rows (the rows repeated with
new ids, as bench/benchmark.py grows its files), times the evaluator on it in
a fresh process (--workers 1 --quiet, the JSON report written: best of
--repeat), and times, in this process, what the check adds to that run: the
labels' stations put into a set as each row goes by (LabelStations.add, on
labels already decoded, as the engine hands them over, for the rows it
samples: every row up to SAMPLE_HEAD, then one in SAMPLE_STRIDE) and the look-up of
the distinct ones at the end (LabelStations.verdict).  Prints both and the
check's share of the run; the issue asks for under 2 % at 100,000 rows.
Figures go in docs/performance.md.

    python3 bench/bench_network_check.py [--samples N] [--repeat K] [--only NAME]
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
sys.path.insert(0, REPO)

import common  # noqa: E402
from transitlm.evaluation.catalog import BENCHMARK_NAMES, benchmark_info, station_file  # noqa: E402
from transitlm.evaluation.network_check import SAMPLE_HEAD, SAMPLE_STRIDE, LabelStations  # noqa: E402

csv.field_size_limit(2 ** 31 - 1)


def grown(source, target, samples):
    """``source``'s rows repeated, with new ids, to ``samples`` rows -> the labels' text."""
    with open(source, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    id_key = "index_id" if "index_id" in header else "indexid"
    labels = []
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        for number in range(samples):
            row = dict(rows[number % len(rows)])
            row[id_key] = "%s-%d" % (row[id_key], number)
            writer.writerow(row)
            labels.append(row["sft_label"])
    return labels


def evaluator_seconds(name, path, repeat):
    script = os.path.join(REPO, name, "evaluate.py")
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.check_call([sys.executable, script, "--input", path, "--quiet",
                                   "--workers", "1", "--json", os.path.join(tmp, "r.json")],
                                  stdout=subprocess.DEVNULL)
            took = time.perf_counter() - started
            best = took if best is None else min(best, took)
    return best


def check_seconds(name, labels, network, repeat):
    decoded = [json.loads(text) for text in labels]
    best = None
    for _ in range(repeat):
        stations = LabelStations(network, name == "general_llm")
        started = time.perf_counter()
        add = stations.add
        for row, label in enumerate(decoded, 1):
            # as the engine's RowJudge.decode asks
            if row <= SAMPLE_HEAD or not row % SAMPLE_STRIDE:
                add(label)
        verdict = stations.verdict(network.path)
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    return best, verdict


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", choices=BENCHMARK_NAMES)
    args = parser.parse_args(argv)
    network = common.StationNetwork.load(station_file(None), common.station_cache_folder())
    print("%-14s %10s %12s %10s %8s  %s" % ("benchmark", "rows", "evaluator", "check",
                                            "share", "label stations"))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or BENCHMARK_NAMES:
            source = os.path.join(REPO, "data", benchmark_info(name).default_input)
            path = os.path.join(tmp, "%s.csv" % name)
            labels = grown(source, path, args.samples)
            run = evaluator_seconds(name, path, args.repeat)
            check, verdict = check_seconds(name, labels, network, args.repeat)
            print("%-14s %10d %10.2f s %8.3f s %7.2f%%  %d of %d in the station file"
                  % (name, args.samples, run, check, 100.0 * check / run, verdict.known,
                     verdict.total), flush=True)


if __name__ == "__main__":
    main()
