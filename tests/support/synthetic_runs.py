"""compare.py's inputs made by hand: synthetic details lines, the metrics a report holds, run folders."""

import hashlib
import json
import os
import random

from tests.support import REPO
from tests.support.evaluator_rows import run_in_process


def evaluated_record(row, index_id, reachable=True, exact=True, accurate=True,
                     grounded=True, plausible=True, line_iou=None, station_iou=None,
                     mape=0.0, city="北京", codes=None, **extra):
    """A details line of an evaluated single-route row (every verdict)."""
    line_iou = (1.0 if exact else 0.5) if line_iou is None else line_iou
    station_iou = (1.0 if exact else 0.5) if station_iou is None else station_iou
    if codes is None:
        codes = []
        if not reachable:
            codes.append("reachability.not_connected")
        else:
            if not grounded:
                codes.append("grounding.origin_far")
            if not exact:
                codes.append("overlap.stations")
            elif not accurate:
                codes += ["accuracy.distance", "accuracy.time", "accuracy.fare"]
    record = {
        "row": row, "index_id": index_id, "status": "evaluated", "error": None,
        "failed_round": (None if reachable and exact and accurate else
                         "reachability" if not reachable else
                         "overlap" if not exact else "accuracy"),
        "failure_codes": codes, "city": city, "in_funnel": True,
        "origin": [116.0, 39.0], "destination": [116.1, 39.1],
        "prediction_routes": {"first": {"stations": ["A", "B"], "lines": ["L1"],
                                        "start_mode": "步行", "end_mode": "步行"}},
        "label_routes": {"first": {"stations": ["A", "B"], "lines": ["L1"],
                                   "start_mode": "步行", "end_mode": "步行"}},
        "reachable": reachable, "reachable_reason": "r",
        "station_grounding": grounded, "station_grounding_reason": "g",
        "distance_plausibility": plausible, "distance_plausibility_reason": "p",
        "line_iou": line_iou, "station_iou": station_iou,
        "station_iou_exact": station_iou == 1.0, "transfer_mode_match": True,
        "exact_match": exact, "score": 10.0, "label_score": 10.0,
        "score_deviation_pct": 0.0, "score_band": "same",
        "distance_accurate": accurate, "time_accurate": accurate,
        "fare_accurate": accurate, "transfer_accurate": True,
        "overall_accurate": accurate, "distance_mape_pct": mape,
        "time_mape_pct": mape, "fare_mape_pct": mape}
    record.update(extra)
    return record


def error_record(row, index_id, city=None, in_funnel=True):
    return {"row": row, "index_id": index_id, "status": "error", "error": "not JSON",
            "failed_round": None, "failure_codes": ["error.invalid_json"], "city": city,
            "in_funnel": in_funnel, "origin": None, "destination": None,
            "prediction_routes": None, "label_routes": None, "reachable": False}


def synthetic_records(n, reach_rate, seed, exact_rate=0.8, cities=("北京", "深圳")):
    """n single-route rows: reachable with probability reach_rate, an exact
    match with exact_rate, some error rows; deterministic for a seed."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        index_id = "id%05d" % i
        if rng.random() < 0.02:
            records.append(error_record(i + 1, index_id))
            continue
        reachable = rng.random() < reach_rate
        exact = reachable and rng.random() < exact_rate
        records.append(evaluated_record(
            i + 1, index_id, reachable=reachable, exact=exact,
            accurate=rng.random() < 0.9, grounded=rng.random() < 0.95,
            line_iou=1.0 if exact else rng.choice([0.0, 0.25, 0.5]),
            station_iou=1.0 if exact else rng.choice([0.0, 1 / 3.0, 0.5, 0.75]),
            mape=rng.choice([0.0, 0.0, 2.5, 7.125, 31.0]), city=rng.choice(cities)))
    return records


def metrics_of(benchmark, protocol, records):
    """The metrics as a report JSON holds them (the engine's aggregation)."""
    import transitlm.evaluation.records
    import transitlm.evaluation.reports
    folded = transitlm.evaluation.records.aggregate_records(benchmark, protocol, records)
    return json.loads(json.dumps(transitlm.evaluation.reports.finite_or_none(folded["metrics"])))


def run_compare(argv):
    """compare_cli.main in-process -> (exit status, stdout, stderr)."""
    from transitlm.compare import cli as compare_cli
    return run_in_process(compare_cli.main, list(argv))


COMPARE = os.path.join(REPO, "compare.py")
STATIONS_SHA256 = hashlib.sha256(b"stations").hexdigest()   # of "the" station file


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
              input_text=None, stations=STATIONS_SHA256, predictions=None, run_json=True,
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
