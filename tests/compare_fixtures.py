"""Run folders for the compare.py tests, built by the tests themselves:
synthetic details lines of every benchmark, report.json as an evaluator of
schema 3 writes it (signature without the predictions, inputs.sha256) or of
an older schema, and run.json with the model."""

import hashlib
import json
import os
import random
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from tests.test_compare import evaluated_record, error_record, metrics_of  # noqa: E402
from tests.test_compare import run_compare  # noqa: E402,F401  (for the compare tests)

COMPARE = os.path.join(REPO, "compare.py")
STATIONS = hashlib.sha256(b"stations").hexdigest()


def digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def scenario_fields(benchmark, index, rng, quality):
    if benchmark == "personalized":
        return {"req_type": (2, 5, 7, 8)[index % 4], "compliant": rng.random() < quality,
                "label_compliant": True}
    if benchmark == "diversity":
        count = 2 if rng.random() < 0.7 else 1
        routes = {"first": {"reachable": True, "score": 10.0}}
        if count == 2:
            routes["second"] = {"reachable": rng.random() < quality, "score": 12.0}
        return {"routes": routes, "rd": rng.choice([0.0, 0.25, 0.5, 0.75]) if count == 2
                else 0.0, "route_count": count, "rd_label": 0.5, "label_route_count": 2,
                "all_routes_reachable": True, "label_first_score": 10.0,
                "best_match": "first"}
    return {}


def benchmark_records(benchmark, n, quality, seed, cities=("Beijing", "Shenzhen"), prefix="id"):
    """n details lines of a benchmark; `quality` 0..1 raises every rate."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        index_id = "%s%04d" % (prefix, i)
        if rng.random() < 0.03:
            record = error_record(i + 1, index_id, city=rng.choice(cities))
            if benchmark == "personalized":
                record["req_type"] = None
            records.append(record)
            continue
        reachable = rng.random() < 0.5 + 0.45 * quality
        exact = reachable and rng.random() < 0.4 + 0.5 * quality
        records.append(evaluated_record(
            i + 1, index_id, reachable=reachable, exact=exact,
            accurate=rng.random() < 0.7 + 0.3 * quality, grounded=rng.random() < 0.9,
            line_iou=1.0 if exact else rng.choice([0.0, 0.25, 0.5]),
            station_iou=1.0 if exact else rng.choice([0.0, 0.5, 0.75]),
            mape=rng.choice([0.0, 2.5, 10.0]), city=rng.choice(cities),
            **scenario_fields(benchmark, i, rng, quality)))
    return records


def write_run(folder, records, benchmark="single_route", protocol="reference", model=None,
              input_text=None, stations=STATIONS, predictions=None, run_json=True,
              old_schema=False, version="1.2.0", metrics=None):
    """A run folder: report.json (schema 3; old_schema: 2 with the
    predictions' hash in the signature and no run.json), details.jsonl and
    run.json recording `model` (generation null when None)."""
    os.makedirs(folder, exist_ok=True)
    input_hash = digest(input_text or benchmark)
    predictions = predictions or digest(folder)
    parts = ["transitlm:" + version, benchmark, "protocol:" + protocol,
             "field:generate_results", "rows:%d" % len(records), "stations:" + stations[:8],
             "input:" + input_hash[:8]]
    if old_schema:
        parts.append("predictions:" + predictions[:8])
    report = {"schema_version": 2 if old_schema else 3, "version": version,
              "benchmark": benchmark, "protocol": protocol, "signature": "|".join(parts),
              "inputs": {"sha256": {"input": input_hash, "station_info": stations,
                                    "predictions": predictions}},
              "counts": {"samples": len(records)},
              "metrics": metrics if metrics is not None
              else metrics_of(benchmark, protocol, records)}
    with open(os.path.join(folder, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, ensure_ascii=False)
    with open(os.path.join(folder, "details.jsonl"), "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    if run_json and not old_schema:
        generation = None if model is None else {"model": model, "temperature": 0.0}
        with open(os.path.join(folder, "run.json"), "w", encoding="utf-8") as handle:
            json.dump({"run_schema": 1, "created": "2026-11-24T13:40:00Z", "version": version,
                       "command": ["x"], "python": "3.11.7", "benchmark": benchmark,
                       "protocol": protocol, "generation": generation}, handle)
    return folder


def run_compare_process(argv, timeout=60, cwd=None):
    """compare.py in a fresh process -> (exit status, stdout bytes, stderr bytes)."""
    done = subprocess.run([sys.executable, COMPARE] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
    return done.returncode, done.stdout, done.stderr
