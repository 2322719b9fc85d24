#!/usr/bin/env python3
"""Speed of compare.py: 4 synthetic run folders of 10,000 rows each (benchmark
1, paired by index_id), compared with 1,000 bootstrap resamples.

Usage: python3 bench/bench_compare.py [--rows N] [--runs N] [--bootstrap N]
                                      [--repeat N] [--by city --by failure]

The folders are built in a temporary directory (report metrics from the
engine's own aggregation, as an evaluator writes them) and removed afterwards.
Each repeat runs compare.py in a fresh process; the best wall time and the
best CPU time (user + system of the process) are printed with a calibration
line (the machine's speed drifts).
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import transitlm.evaluation.records  # noqa: E402
import transitlm.evaluation.reports  # noqa: E402

CITIES = ("北京", "上海", "深圳", "成都")


def calibration_seconds():
    """The same fixed pure-Python loop as bench/benchmark.py."""
    started = time.perf_counter()
    total = 0
    for number in range(5000000):
        total += number
    return time.perf_counter() - started


def synthetic_row(row, index_id, quality, rng):
    """One details line of benchmark 1 with every verdict; `quality` (0..1)
    shifts the chances of passing each check.  Real-valued figures (IoUs,
    MAPEs) are spread out so that rows rarely share all their terms."""
    city = rng.choice(CITIES)
    if rng.random() < 0.02:
        return {"row": row, "index_id": index_id, "status": "error", "error": "not JSON",
                "failed_round": None, "failure_codes": ["error.invalid_json"], "city": city,
                "in_funnel": True, "reachable": False, "origin": None, "destination": None,
                "prediction_routes": None, "label_routes": None}
    reachable = rng.random() < 0.6 + 0.35 * quality
    exact = reachable and rng.random() < 0.5 + 0.4 * quality
    accurate = [rng.random() < 0.8 + 0.15 * quality for _ in range(3)]
    mapes = [0.0 if ok else rng.uniform(10.0, 80.0) for ok in accurate]
    iou = 1.0 if exact else rng.choice([0.0, 0.2, 0.25, 1 / 3.0, 0.4, 0.5, 0.6, 2 / 3.0, 0.75])
    codes = []
    if not reachable:
        codes.append("reachability.broken_hop")
    elif not exact:
        codes.append("overlap.station_mismatch")
    else:
        codes += ["accuracy." + name for name, ok in zip(("distance", "time", "fare"),
                                                         accurate) if not ok]
    score = rng.uniform(5.0, 40.0)
    return {
        "row": row, "index_id": index_id, "status": "evaluated", "error": None,
        "failed_round": None if not codes else codes[0].split(".")[0],
        "failure_codes": codes, "city": city, "in_funnel": True,
        "origin": [116.3, 39.9], "destination": [116.4, 39.8],
        "prediction_routes": {"first": {"stations": ["s1", "s2"], "lines": ["1号线"],
                                        "start_mode": "步行", "end_mode": "步行"}},
        "label_routes": {"first": {"stations": ["s1", "s2"], "lines": ["1号线"],
                                   "start_mode": "步行", "end_mode": "步行"}},
        "reachable": reachable, "reachable_reason": "synthetic",
        "station_grounding": rng.random() < 0.9, "station_grounding_reason": "synthetic",
        "distance_plausibility": rng.random() < 0.9,
        "distance_plausibility_reason": "synthetic",
        "line_iou": iou, "station_iou": 1.0 if exact else min(1.0, iou + 0.1),
        "station_iou_exact": exact, "transfer_mode_match": True, "exact_match": exact,
        "score": score, "label_score": score, "score_deviation_pct": 0.0, "score_band": "same",
        "distance_accurate": accurate[0], "time_accurate": accurate[1],
        "fare_accurate": accurate[2], "transfer_accurate": True,
        "overall_accurate": all(accurate), "distance_mape_pct": mapes[0],
        "time_mape_pct": mapes[1], "fare_mape_pct": mapes[2]}


def write_run(folder, records):
    os.makedirs(folder)
    metrics = transitlm.evaluation.records.aggregate_records("single_route", "reference", records)["metrics"]
    report = {"schema_version": 2, "benchmark": "single_route", "protocol": "reference",
              "signature": "bench|single_route|protocol:reference|rows:%d" % len(records),
              "counts": {"samples": len(records)}, "metrics": transitlm.evaluation.reports.finite_or_none(metrics)}
    with open(os.path.join(folder, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, ensure_ascii=False, indent=1, sort_keys=True)
    with open(os.path.join(folder, "details.jsonl"), "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--by", action="append", default=[], choices=("city", "failure"))
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="bench_compare_")
    try:
        runs = []
        for index in range(args.runs):
            rng = random.Random(index)
            quality = index / max(1, args.runs - 1)
            records = [synthetic_row(i + 1, "row%06d" % i, quality, rng)
                       for i in range(args.rows)]
            path = os.path.join(folder, "model_%d" % (index + 1))
            write_run(path, records)
            runs.append(path)
        command = [sys.executable, os.path.join(REPO, "compare.py")] + runs + [
            "--bootstrap", str(args.bootstrap), "--json", os.path.join(folder, "c.json")]
        for name in args.by:
            command += ["--by", name]
        print("calibration: 5M-step Python loop %.2f s (before)" % calibration_seconds())
        times, cpu = [], []
        for _ in range(args.repeat):
            started, before = time.perf_counter(), os.times()
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  universal_newlines=True)
            after = os.times()
            times.append(time.perf_counter() - started)
            cpu.append(after.children_user + after.children_system
                       - before.children_user - before.children_system)
            if done.returncode != 0:
                sys.exit("compare.py failed: " + done.stderr.strip())
        print("compare.py: %d runs x %d rows x %d resamples%s: best %.2f s of %d (all: %s); "
              "CPU time best %.2f s (less sensitive to a busy machine)"
              % (args.runs, args.rows, args.bootstrap,
                 "".join(" --by " + b for b in args.by), min(times), len(times),
                 ", ".join("%.2f" % t for t in times), min(cpu)))
        print("calibration: 5M-step Python loop %.2f s (after)" % calibration_seconds())
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
