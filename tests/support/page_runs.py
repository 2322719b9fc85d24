"""The evaluator pages' fixtures: hand-made details lines and reports following the run-folder contract, on a five-stop network."""

import json
import os

from tests.support import common


EVALUATORS = ("single_route", "personalized", "diversity", "general_llm")

PAGE_STATIONS = {
    "bus-1": (116.30, 39.90, ["bus-2"]),
    "bus-2": (116.31, 39.90, ["bus-1", "bus-3"]),
    "bus-3": (116.32, 39.90, ["bus-2", "bus-4"]),
    "bus-4": (116.32, 39.91, ["bus-3"]),
    "bus-9": (116.40, 39.95, []),
}
PAGE_ORIGIN = [116.299, 39.899]
PAGE_DESTINATION = [116.321, 39.912]


def page_route(stations, lines=("1号线",), start="步行", end="步行"):
    return {"stations": list(stations), "lines": list(lines), "start_mode": start,
            "end_mode": end}


def page_record(row, codes, reachable=True, exact=True, accurate=True, city="北京", **extra):
    record = {"row": row, "index_id": "id%d" % row, "status": "evaluated", "error": None,
              "failed_round": None, "failure_codes": list(codes), "city": city,
              "in_funnel": True, "origin": PAGE_ORIGIN, "destination": PAGE_DESTINATION,
              "prediction_routes": {"first": page_route(["bus-1", "bus-2", "bus-3"])},
              "label_routes": {"first": page_route(["bus-1", "bus-2", "bus-3", "bus-4"])},
              "reachable": reachable, "reachable_reason": "r",
              "station_grounding": True, "station_grounding_reason": "g",
              "distance_plausibility": True, "distance_plausibility_reason": "p",
              "line_iou": 1.0, "station_iou": 0.75, "station_iou_exact": exact,
              "transfer_mode_match": True, "exact_match": exact, "score": 10.0,
              "label_score": 10.0, "score_deviation_pct": 0.0, "score_band": "same",
              "distance_accurate": accurate, "time_accurate": True, "fare_accurate": True,
              "transfer_accurate": True, "overall_accurate": accurate,
              "distance_mape_pct": 1.0, "time_mape_pct": 0.0, "fare_mape_pct": 0.0}
    record.update(extra)
    return record


def page_error_row(row, message="prediction is not valid JSON"):
    return {"row": row, "index_id": "id%d" % row, "status": "error", "error": message,
            "failed_round": None, "failure_codes": ["error.invalid_json"], "city": "深圳",
            "in_funnel": True, "origin": PAGE_ORIGIN, "destination": PAGE_DESTINATION,
            "prediction_routes": None, "label_routes": None}


def page_report(benchmark, records):
    """report.json as the contract defines it, figures computed by the engine."""
    import transitlm.evaluation.records
    figures = transitlm.evaluation.records.aggregate_records(benchmark, "reference", records)
    report = {"schema_version": 2, "version": "1.1.0", "benchmark": benchmark,
              "protocol": "reference",
              "signature": "transitlm:1.1.0|%s|protocol:reference|rows:%d"
                           % (benchmark, len(records)),
              "inputs": {"input": "in.csv", "input_field": "generate_results",
                         "predictions": None, "station_info": "stations.csv",
                         "line_info": None, "options": {"sample_count": None},
                         "sha256": {"input": "ab" * 32, "station_info": "cd" * 32}},
              "warnings": ["3 prediction(s) with an id not in the test file"],
              "input_notes": {}}
    report.update(figures)
    return report


def write_details(folder, records):
    path = os.path.join(folder, "details.jsonl")
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            try:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            except UnicodeEncodeError:      # a lone surrogate: JSON's \u escape keeps it
                handle.write(json.dumps(record) + "\n")
    return path


def page_network():
    return common.StationNetwork.from_dict(PAGE_STATIONS)
