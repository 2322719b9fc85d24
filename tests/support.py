"""Shared fixtures of the test suite: whatever more than one test module
uses lives here, and nowhere else (a test module never imports another).

A test module's name says which module or command it tests: test_<module>.py
for transitlm/<module>.py and common.py, with a prefix per folder
(test_compare_*, test_generate_*, test_networks_*, test_pages_*,
test_general_llm_*).  tests/route_oracle.py (an independent router) and
tests/real_feeds.py (the real GTFS feeds, imported once per run) are tools of
their own, not fixtures.

Importing this module is cheap: it imports the rules (common) and the standard
library; the project's other modules are imported inside the helpers that use
them.  Where a name here is longer than the one the tests used before
(page_route, page_record, service_case, line_table, HostileServer,
HOSTILE_KEY, ...), the test modules import it under the old name, so their
test code reads as it did.

Sections: paths; rows for the evaluators (a toy network); parity goldens;
compare.py's details lines and run folders; the evaluator pages' run-folder
fixtures; a parser of HTML pages; Chromium; GTFS feeds; route_eval's line
table; the route-eval service (its network, its cases, ServerTestCase, the
framing checks every JSON service gets); the reward's rows and chat template;
generate.py's stand-in and hostile chat servers.
"""

import contextlib
import csv
import hashlib
import html.parser
import http.client
import io
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
PARITY = os.path.join(SHARED, "parity")

import common  # noqa: E402

# The tests do not write station caches into the user's cache folder (the
# station cache tests choose their own folder).
os.environ.setdefault("TRANSITLM_CACHE_DIR", "off")


# ---------------------------------------------------------------------------
# Rows for the evaluators: a toy network on the equator, route objects,
# prompts, station and sample files, an evaluator run in-process
# ---------------------------------------------------------------------------

# On the equator one degree of longitude is 2*pi*6371/360 = 111.19 km.
KM_PER_DEGREE = 2 * 3.141592653589793 * common.EARTH_RADIUS_KM / 360.0


def east(km):
    """Longitude of a point `km` east of (0, 0) on the equator."""
    return km / KM_PER_DEGREE


def toy_network():
    """A -- B -- C -- D in a row (both directions), 1 km apart on the equator;
    E is isolated with no hops; X has no coordinates in the file (unknown)."""
    return common.StationNetwork.from_dict({
        "A": (east(0), 0.0, ["B"]),
        "B": (east(1), 0.0, ["A", "C"]),
        "C": (east(2), 0.0, ["B", "D"]),
        "D": (east(3), 0.0, ["C"]),
        "E": (east(10), 0.0, []),
    })


def route(**fields):
    """A route object with sensible defaults (A -> D on one line)."""
    base = {"station_sequence": ["A", "B", "C", "D"], "line_sequence": ["地铁1号线(A--D)"],
            "total_distance": "3.0公里", "total_time": "20分钟", "total_fare": "3",
            "start_transfer_mode": "步行", "end_transfer_mode": "步行",
            "start_transfer_distance": "", "end_transfer_distance": ""}
    base.update(fields)
    return base


def prompt(start=(0.0, 0.0), end=None, city="北京"):
    end = end if end is not None else (east(3), 0.0)
    return json.dumps({"query": "从甲到乙怎么走", "start": "%f,%f" % start,
                       "end": "%f,%f" % end, "city": city}, ensure_ascii=False)


TOY_STATIONS = [
    # stop_id, lng, lat, next hops
    ("A", east(0), 0.0, ["B"]),
    ("B", east(1), 0.0, ["A", "C"]),
    ("C", east(2), 0.0, ["B", "D"]),
    ("D", east(3), 0.0, ["C"]),
    ("E", east(10), 0.0, []),
]


def write_station_file(path, stations=TOY_STATIONS):
    import csv
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations",
                         "station_name"])
        for stop, lng, lat, hops in stations:
            writer.writerow([stop, "010", "%.9f" % lng, "%.9f" % lat,
                             json.dumps(hops), "站" + stop])


def write_samples(path, rows, columns=("index_id", "sft_prompt", "sft_label",
                                       "generate_results")):
    """rows: dicts; values that are not text are JSON-encoded."""
    import csv
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([value if isinstance(value, str) else
                             json.dumps(value, ensure_ascii=False)
                             for value in (row.get(col, "") for col in columns)])


def run_evaluator(benchmark, argv):
    """Run an evaluator in-process -> (exit status, stdout, stderr)."""
    import transitlm.cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = transitlm.cli.run(benchmark, argv)
        except SystemExit as exc:         # argparse usage errors
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def evaluate_to_files(benchmark, argv, folder):
    """Run an evaluator with --json and --details written into `folder`.

    -> (report dict, list of details rows, stdout); a non-zero exit fails.
    """
    report_path = os.path.join(folder, "report.json")
    details_path = os.path.join(folder, "details.jsonl")
    status, stdout, stderr = run_evaluator(
        benchmark, list(argv) + ["--json", report_path, "--details", details_path])
    if status != 0:
        raise AssertionError("exit status %s: %s" % (status, stderr))
    with open(report_path, encoding="utf-8") as handle:
        report = json.load(handle)
    with open(details_path, encoding="utf-8") as handle:
        details = [json.loads(line) for line in handle]
    return report, details, stdout


# ---------------------------------------------------------------------------
# Parity goldens (../shared/parity, see its README): a golden integer must be
# equal; a float is stored as [value, decimals] and ours must round to it
# (|ours - value| <= 0.5 * 10**-decimals, with a hair of slack for binary
# representation).
# ---------------------------------------------------------------------------

def golden_differences(golden, ours, path=""):
    """List of human-readable mismatches between a golden and our report."""
    problems = []
    if isinstance(golden, dict):
        if not isinstance(ours, dict):
            return ["%s: expected an object, got %r" % (path or "/", ours)]
        for key, value in golden.items():
            where = "%s/%s" % (path, key)
            if key not in ours:
                problems.append("%s: missing" % where)
            else:
                problems.extend(golden_differences(value, ours[key], where))
        return problems
    if isinstance(golden, list) and len(golden) == 2 and isinstance(golden[1], int) \
            and isinstance(golden[0], (int, float)):
        value, decimals = golden
        if not isinstance(ours, (int, float)) or isinstance(ours, bool):
            return ["%s: expected %s, got %r" % (path, value, ours)]
        if abs(ours - value) > 0.5 * 10 ** -decimals + 1e-12:
            return ["%s: expected %.*f, got %r" % (path, decimals, value, ours)]
        return []
    if golden != ours:
        return ["%s: expected %r, got %r" % (path, golden, ours)]
    return []


def parity_cases(golden_name, sample_name):
    """(case name, folder) of every parity case set with both files."""
    if not os.path.isdir(PARITY):
        return []
    out = []
    for name in sorted(os.listdir(PARITY)):
        folder = os.path.join(PARITY, name)
        if os.path.isfile(os.path.join(folder, golden_name)) and \
                os.path.isfile(os.path.join(folder, sample_name)):
            out.append((name, folder))
    return out


def load_golden(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as handle:
        return json.load(handle)


# ---------------------------------------------------------------------------
# compare.py: synthetic details lines, the metrics a report holds, run folders
# (report.json as an evaluator of schema 3 writes it -- signature without the
# predictions, inputs.sha256 -- or of an older schema, and run.json with the
# model), and compare.py in-process or in a fresh process
# ---------------------------------------------------------------------------

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
    import transitlm.records
    import transitlm.reports
    folded = transitlm.records.aggregate_records(benchmark, protocol, records)
    return json.loads(json.dumps(transitlm.reports._finite(folded["metrics"])))


def run_compare(argv):
    """compare_cli.main in-process -> (exit status, stdout, stderr)."""
    from transitlm.compare import cli as compare_cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = compare_cli.main(list(argv))
        except SystemExit as exc:
            status = exc.code
    return status, out.getvalue(), err.getvalue()


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


def run_compare_process(argv, timeout=60, cwd=None):
    """compare.py in a fresh process -> (exit status, stdout bytes, stderr bytes)."""
    done = subprocess.run([sys.executable, COMPARE] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


# ---------------------------------------------------------------------------
# Evaluator pages: hand-made details lines and reports following the
# run-folder contract, on a five-stop network
# ---------------------------------------------------------------------------

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


def page_records(benchmark):
    records = [
        page_record(1, []),
        page_record(2, ["reachability.not_connected"], reachable=False, exact=False,
                    prediction_routes={"first": page_route(["bus-1", "bus-3", "bus-404"])}),
        page_record(3, ["overlap.stations"], exact=False, city="深圳"),
        page_record(4, ["accuracy.distance"], accurate=False),
        page_error_row(5),
        page_record(6, []),
    ]
    if benchmark == "personalized":
        for record in records:
            if record["status"] == "evaluated":
                record.update(req_type=2 if record["row"] % 2 else 5, compliant=True,
                              compliant_reason="ok", label_compliant=True)
        records[5].update(compliant=False, compliant_reason="2 transfers, label 1")
        records[5]["failure_codes"] = ["preference.fewer_transfers"]
    if benchmark == "diversity":
        for record in records:
            if record["status"] == "evaluated":
                record["prediction_routes"]["second"] = page_route(["bus-2", "bus-3", "bus-4"])
                record["prediction_routes"]["third"] = page_route(["bus-1", "bus-2"])
                record.update(routes={"first": {"reachable": True, "reachable_reason": "r",
                                                "score": 1.0}},
                              best_match="first", rd=0.5, route_count=3, rd_label=0.4,
                              label_route_count=3, all_routes_reachable=True,
                              label_first_score=1.0)
    if benchmark == "general_llm":
        for record in records:
            if record["status"] == "evaluated":
                record["prediction_routes"] = {"first": page_route(["甲", "乙"])}
                record["label_routes"] = {"first": page_route(["甲", "丁"])}
                # Ids without the bus- prefix: found through the fallback.
                record["match_details"] = [
                    {"line_query": "1号线", "line_name": "1号线", "boarding_query": "甲",
                     "boarding_name": "甲站", "boarding_stop_id": "1",
                     "alighting_query": "乙", "alighting_name": "乙站",
                     "alighting_stop_id": "3"}]
        records.append({"row": 7, "index_id": "id7", "status": "no_response",
                        "error": "empty prediction", "failed_round": None,
                        "failure_codes": ["no_response"], "city": None, "in_funnel": True,
                        "origin": None, "destination": None, "prediction_routes": None,
                        "label_routes": None})
    return records


def page_report(benchmark, records):
    """report.json as the contract defines it, figures computed by the engine."""
    import transitlm.records
    figures = transitlm.records.aggregate_records(benchmark, "reference", records)
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


# ---------------------------------------------------------------------------
# HTML pages: a small parser collecting what the tests look at
# ---------------------------------------------------------------------------

class PageParser(html.parser.HTMLParser):
    def __init__(self):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.references = []          # values of src / href attributes
        self.styles = []              # <style> texts and style attributes
        self.maps = 0                 # <svg class="map">
        self.listed_rows = 0          # <tbody class="r">
        self.tables = {}              # table id -> rows of cell texts
        self.metrics = {}             # data-metric -> value text
        self.script_types = []
        self._stack = []
        self._table = None
        self._cell = None
        self._metric = None
        self._in_mval = False
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href", "xlink:href", "action", "data"):
            if attrs.get(name):
                self.references.append(attrs[name])
        if attrs.get("style"):
            self.styles.append(attrs["style"])
        classes = (attrs.get("class") or "").split()
        if tag == "svg" and "map" in classes:
            self.maps += 1
        if tag == "tbody" and "r" in classes:
            self.listed_rows += 1
        if tag == "table" and attrs.get("id"):
            self._table = attrs["id"]
            self.tables[self._table] = []
        if tag == "tr" and self._table:
            self.tables[self._table].append([])
        if tag in ("td", "th") and self._table:
            self._cell = []
        if attrs.get("data-metric"):
            self._metric = attrs["data-metric"]
        if "mval" in classes:
            self._in_mval = True
        if tag == "style":
            self._in_style = True
        if tag == "script":
            self.script_types.append(attrs.get("type", ""))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        if tag == "table":
            self._table = None
        if tag == "div" and self._in_mval:
            self._in_mval = False
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_mval and self._metric:
            self.metrics[self._metric] = data.strip()
        if self._in_style:
            self.styles.append(data)


def parse_page(text):
    parser = PageParser()
    parser.feed(text)
    parser.close()
    return parser


def external_references(parser):
    """Every http(s) reference in src/href attributes or CSS url()."""
    found = [ref for ref in parser.references if re.match(r"\s*(https?:)?//", ref, re.I)]
    for style in parser.styles:
        for url in re.findall(r"url\(\s*['\"]?([^'\")]*)", style, re.I):
            if re.match(r"\s*(https?:)?//", url, re.I):
                found.append(url)
    return found


# ---------------------------------------------------------------------------
# Chromium, headless: the browser checks skip where it is not installed,
# except under CI (CI=true), where a missing browser fails
# ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
BROWSER_TIMEOUT_S = 120


def in_ci():
    """Is CI set (CI=true, as CI services and .ci/run set it)?"""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def chromium_command(url, user_dir, *flags):
    return ([CHROMIUM] + list(CHROMIUM_FLAGS) + ["--user-data-dir=" + user_dir]
            + list(flags) + [url])


def run_chromium(url, user_dir, *flags):
    """Run headless Chromium on a file URL -> (stdout, stderr)."""
    done = subprocess.run(chromium_command(url, user_dir, *flags), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=BROWSER_TIMEOUT_S)
    return (done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


# ---------------------------------------------------------------------------
# GTFS feeds written by the tests
# ---------------------------------------------------------------------------

# A tiny two-route feed: a metro line A-B-C (both directions, parent station
# S_B with platforms B1/B2 used by the two directions) and a bus line C-D.
BASE_FEED = {
    "agency.txt": "agency_id,agency_name,agency_url,agency_timezone\n"
                  "X,Test Transit,http://x,Europe/Test_City\n",
    "stops.txt": "stop_id,stop_name,stop_lat,stop_lon,location_type,parent_station\n"
                 "A,Alpha,40.000,-73.000,,\n"
                 "S_B,Beta,40.010,-73.000,1,\n"
                 "B1,Beta,40.010,-73.000,0,S_B\n"
                 "B2,Beta,40.0101,-73.000,0,S_B\n"
                 "C,Gamma 地铁站,40.020,-73.000,,\n"
                 "D,Delta,40.030,-73.000,,\n",
    "routes.txt": "route_id,route_short_name,route_long_name,route_type\n"
                  "M,1,,1\n"
                  "BUS,,Crosstown 号线,3\n",
    "trips.txt": "route_id,service_id,trip_id,direction_id\n"
                 "M,WK,m1,0\nM,WK,m2,0\nM,WK,m3,1\nBUS,WK,b1,0\nM,SAT,s1,0\n",
    "calendar.txt": "service_id,monday,tuesday,wednesday,thursday,friday,saturday,sunday,"
                    "start_date,end_date\n"
                    "WK,1,1,1,1,1,0,0,20240101,20240107\n"
                    "SAT,0,0,0,0,0,1,0,20240101,20240107\n",
    "stop_times.txt": "trip_id,arrival_time,departure_time,stop_id,stop_sequence\n"
                      "m1,08:00:00,08:00:00,A,1\n"
                      "m1,08:02:00,08:02:30,B1,2\n"
                      "m1,08:05:00,08:05:00,C,3\n"
                      "m2,09:00:00,09:00:00,A,1\n"
                      "m2,,,B1,2\n"
                      "m2,09:06:00,09:06:00,C,3\n"
                      "m3,25:00:00,25:00:00,C,1\n"
                      "m3,25:03:00,25:03:00,B2,2\n"
                      "m3,25:05:00,25:05:00,A,3\n"
                      "b1,10:00:00,10:00:00,C,1\n"
                      "b1,10:10:00,10:10:00,D,2\n"
                      "s1,10:00:00,10:00:00,A,1\n"
                      "s1,10:09:00,10:09:00,D,2\n",
}


def write_feed(folder, files, as_zip=False, bom=False):
    """Write a feed folder (or zip) from {name: text}; returns its path."""
    if as_zip:
        path = os.path.join(folder, "feed.zip")
        with zipfile.ZipFile(path, "w") as archive:
            for name, text in files.items():
                archive.writestr(name, ("\ufeff" if bom else "") + text)
        return path
    path = os.path.join(folder, "feed")
    os.makedirs(path, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(path, name), "w", encoding="utf-8", newline="") as handle:
            handle.write(("\ufeff" if bom else "") + text)
    return path


# ---------------------------------------------------------------------------
# general_llm/route_eval.py: a line table from hand-written rows
# ---------------------------------------------------------------------------

def line_table(*rows):
    """LineTable from (citycode, line name, [(station name, stop id), ...]) rows."""
    from general_llm.route_eval import LineTable
    return LineTable.from_rows(
        [(city, name, [{"station_name": s, "stop_id": i} for s, i in stations])
         for city, name, stations in rows])


# ---------------------------------------------------------------------------
# The route-eval service (general_llm/server.py): a five-stop Shenzhen network
# with two lines, and a varied batch of cases
# ---------------------------------------------------------------------------

SHENZHEN = "深圳"
WALK = "步行"
SERVICE_LINE_1 = "地铁1号线(罗湖--机场东)"
SERVICE_LINE_2 = "地铁2号线(赤湾--新秀)"
SERVICE_STATIONS_1 = [("罗湖", "bus-1"), ("国贸", "bus-2"), ("老街", "bus-3")]
SERVICE_STATIONS_2 = [("老街", "bus-3"), ("大剧院", "bus-4"), ("湖贝", "bus-5")]
SERVICE_STOPS = {  # stop id -> (lng, lat, next hops), about 1 km apart
    "bus-1": (114.01, 22.5, ["bus-2"]),
    "bus-2": (114.02, 22.5, ["bus-1", "bus-3"]),
    "bus-3": (114.03, 22.5, ["bus-2", "bus-4"]),
    "bus-4": (114.04, 22.5, ["bus-3", "bus-5"]),
    "bus-5": (114.05, 22.5, ["bus-4"]),
}
SERVICE_LINE_ROWS = [("0755", SERVICE_LINE_1, SERVICE_STATIONS_1),
                     ("0755", SERVICE_LINE_2, SERVICE_STATIONS_2)]


def fixture_lines():
    from general_llm.route_eval import LineTable
    return LineTable.from_rows([(city, name, [{"station_name": n, "stop_id": i}
                                              for n, i in stations])
                                for city, name, stations in SERVICE_LINE_ROWS])


def fixture_stations():
    return common.StationNetwork.from_dict(SERVICE_STOPS)


def service_case(lines, names, start=(114.0, 22.5), end=(114.05, 22.49)):
    return {"city": SHENZHEN, "start": list(start), "end": list(end),
            "pred": {"line_sequence": lines, "station_name": names,
                     "start_transfer_mode": WALK, "end_transfer_mode": WALK}}


def sample_cases(seed=0):
    """A varied batch: reachable, unreachable, far from the origin, malformed."""
    far = 114.0 - 0.05 * (seed % 3)     # 0, ~5 or ~10 km west of the first stop
    return [
        service_case(["地铁1号线"], ["罗湖", "老街"], start=(far, 22.5)),
        service_case(["地铁1号线", "地铁2号线"], ["罗湖", "老街", "老街", "湖贝"]),
        service_case(["地铁1号线", "地铁2号线"], ["罗湖", "国贸", "大剧院", "湖贝"]),
        service_case(["977路"], ["罗湖", "国贸"]),
        {"city": SHENZHEN, "start": "114,22", "end": [114.0, 22.5], "pred": {}},
        "not a case",
        service_case(["地铁2号线"], ["老街", "湖贝站"], end=(114.05, 22.5 - 0.001 * seed)),
    ]


class ServerTestCase(unittest.TestCase):
    """Runs a JSON service (transitlm/json_service.py) on a free loopback port
    in a thread: the route-eval service, unless ``make_server`` says otherwise."""

    SERVER_OPTIONS = {}

    def make_server(self):
        """The service, bound to 127.0.0.1 on a free port, logging to self.log."""
        from general_llm import server as service
        self.lines = fixture_lines()
        self.stations = fixture_stations()
        return service.make_server(self.lines, self.stations, "127.0.0.1", 0,
                                   log=self.log.append, **self.SERVER_OPTIONS)

    def setUp(self):
        self.log = []
        self.server = self.make_server()
        # A short poll interval keeps shutdown() in tearDown quick.
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.host, self.port = self.server.server_address[:2]

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def request(self, method, path, body=None, headers=None, connection=None):
        """-> (status, headers, decoded JSON body or None)."""
        conn = connection or http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body, ensure_ascii=False).encode("utf-8")
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            raw = response.read()
            payload = json.loads(raw.decode("utf-8")) if raw else None
            return response.status, response, payload
        finally:
            if connection is None:
                conn.close()

    def concurrent_posts(self, path, clients, requests, body, expected, timeout=60):
        """``clients`` threads start together, each posting ``requests`` bodies
        on its own keep-alive connection: ``body(number, index)`` and the
        answer ``expected(number, index)`` -> the (client, request, status)
        of every wrong answer and the client of every exception."""
        failures = []
        barrier = threading.Barrier(clients)

        def client(number):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                barrier.wait(timeout)
                for index in range(requests):
                    status, _, payload = self.request("POST", path, body(number, index),
                                                      connection=conn)
                    if status != 200 or payload != expected(number, index):
                        failures.append((number, index, status))
            except Exception as exc:  # reported: the caller's assertion fails
                failures.append((number, repr(exc)))
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(2 * timeout)
        return failures

    def raw_request(self, method, path, headers):
        """A request with exactly these headers (no automatic Content-Length)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.endheaders()
            response = conn.getresponse()
            return response.status, response, json.loads(response.read().decode("utf-8"))
        finally:
            conn.close()


class FramingChecks(object):
    """Raw exchanges with a JSON service on ``self.port`` (127.0.0.1), for the
    RFC 9112 framing attacks: a request with a head and a body of one's own,
    read until the server closes.  ``PATH`` and ``BODY``: a POST route of the
    service and a valid body for it."""

    PATH = b"/api/eval/route/batch"
    BODY = b'{"cases": []}'

    def exchange(self, head, body=None, version=b"HTTP/1.1", path=None, method=b"POST"):
        """Send one request; -> (status, everything the server sent until it closed)."""
        body = self.BODY if body is None else body
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            sock.sendall(method + b" " + (path or self.PATH) + b" " + version
                         + b"\r\nHost: t\r\n" + head + b"\r\n" + body)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            sock.close()
        answer = b"".join(chunks)
        return int(answer.split(b" ", 2)[1]), answer

    def assertRefused(self, head, status, words, **kwargs):
        got, answer = self.exchange(head, **kwargs)
        self.assertEqual(got, status, (head, answer[:300]))
        self.assertIn(b"Connection: close", answer)      # read to the end: it was closed
        self.assertIn(words.encode(), answer)
        self.assertEqual(answer.count(b"HTTP/1.1 "), 1)  # no second request smuggled in


def write_fixture_files(folder):
    """station_info.csv and line_info.csv of the fixture network -> their paths."""
    station_path = os.path.join(folder, "station_info.csv")
    with open(station_path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations"])
        for stop, (lng, lat, hops) in SERVICE_STOPS.items():
            writer.writerow([stop, "440300", lng, lat, json.dumps(hops)])
    line_path = os.path.join(folder, "line_info.csv")
    with open(line_path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["citycode", "line_name", "station_list"])
        for city, name, stations in SERVICE_LINE_ROWS:
            writer.writerow([city, name, json.dumps(
                [{"station_name": n, "stop_id": i, "x": 0, "y": 0, "station_id": i}
                 for n, i in stations], ensure_ascii=False)])
    return station_path, line_path


# ---------------------------------------------------------------------------
# The reward (transitlm/reward/): the bundled example rows, and a prompt as a
# trainer's chat template writes it
# ---------------------------------------------------------------------------

EXAMPLE_FILES = {"single_route": "benchmark1_single_route_example.csv",
                 "personalized": "benchmark2_personalized_example.csv",
                 "diversity": "benchmark3_diversity_example.csv",
                 "general_llm": "general_llm_example.csv"}


def example_rows(benchmark):
    """The rows (dicts) of a benchmark's bundled example file."""
    return read_csv(os.path.join(REPO, "data", EXAMPLE_FILES[benchmark]))


def run_reward(argv, environ=None):
    """reward.py's command line in-process, with ``environ`` added to the
    environment -> (exit status, stdout, stderr)."""
    from transitlm.reward import cli as reward_cli
    out, err = io.StringIO(), io.StringIO()
    saved = {name: os.environ.get(name) for name in environ or {}}
    os.environ.update(environ or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = reward_cli.main(list(argv))
            except SystemExit as exc:         # argparse usage errors
                status = exc.code
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
    return status, out.getvalue(), err.getvalue()


def chatml(messages):
    """Chat messages as a ChatML template renders them for generation (what
    OpenRLHF's prompt holds, the assistant's turn begun)."""
    return "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"])
                   for m in messages) + "<|im_start|>assistant\n"


# ---------------------------------------------------------------------------
# generate.py: a stand-in OpenAI-compatible chat server, and a loopback server that
# misbehaves on purpose (its answer chosen by the path's first segment)
# ---------------------------------------------------------------------------

B1 = os.path.join(REPO, "data", "benchmark1_single_route_example.csv")   # a bundled example
SECRET = "sk-test-0123456789SECRETKEY"


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert text == "" or text.endswith("\n"), "file ends with a partial line"
    return [json.loads(line) for line in text.splitlines()]


def fenced(text):
    return "Here is the route:\n```json\n%s\n```\n" % text


# ---------------------------------------------------------------------------
# The stand-in server
# ---------------------------------------------------------------------------

class _QueueingServer(ThreadingHTTPServer):
    # The default listen backlog (5) drops the SYNs of a client connecting
    # with more threads at once, which then wait a second to retry.
    request_queue_size = 64


class StandIn(object):
    """An OpenAI-compatible chat-completions server for tests.

    ``script(user_text, nth)`` -> an action for the nth (1-based) request with
    that user message: ("ok", text), ("status", code, message, headers),
    ("slow", seconds, text), ("trickle", seconds per byte, text) or ("drop",).
    Requests are recorded.
    """

    def __init__(self, script, key=None, model="stand-in-model"):
        self.script = script
        self.key = key
        self.model = model
        self.lock = threading.Lock()
        self.requests = []          # (user text, Authorization header, body)
        self.seen = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                stand_in.handle(self)

        self.server = _QueueingServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d/v1" % self.server.server_address[1]
        # A short poll interval keeps shutdown() in close() quick (default 0.5 s).
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def users(self):
        with self.lock:
            return [user for user, _, _ in self.requests]

    def handle(self, handler):
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length).decode("utf-8"))
        user = body["messages"][-1]["content"]
        auth = handler.headers.get("Authorization")
        with self.lock:
            self.requests.append((user, auth, body))
            nth = self.seen[user] = self.seen.get(user, 0) + 1
        if handler.path != "/v1/chat/completions":
            return self.send(handler, 404, {"error": {"message": "no such path"}})
        if self.key is not None and auth != "Bearer " + self.key:
            # Real servers echo (part of) the key presented: ours echoes all of it.
            return self.send(handler, 401, {"error": {
                "message": "Incorrect API key provided: %s" % (auth or "")[7:]}})
        if body["model"] != self.model:
            return self.send(handler, 404, {"error": {
                "message": "The model `%s` does not exist" % body["model"]}})
        action = self.script(user, nth)
        if action[0] == "drop":
            handler.close_connection = True
            return
        if action[0] == "status":
            _, code, message, headers = action
            return self.send(handler, code, {"error": {"message": message}}, headers)
        if action[0] == "slow":
            time.sleep(action[1])
        text = action[-1]
        answer = {"id": "c1", "object": "chat.completion", "model": self.model,
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": text}}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                            "total_tokens": 15}}
        if action[0] == "trickle":
            return self.trickle(handler, answer, action[1])
        self.send(handler, 200, answer)

    @staticmethod
    def trickle(handler, obj, seconds_per_byte):
        """A 200 whose body arrives a byte at a time (each within any socket timeout)."""
        data = json.dumps(obj).encode("utf-8")
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            for index in range(len(data)):
                handler.wfile.write(data[index:index + 1])
                handler.wfile.flush()
                time.sleep(seconds_per_byte)
        except OSError:
            pass      # the client gave up

    @staticmethod
    def send(handler, code, obj, headers=None):
        data = json.dumps(obj).encode("utf-8")
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            pass      # the client gave up (timeout test)


def answers_from(path, fence_every=2):
    """user prompt -> the row's generate_results text (every other one fenced
    when it is valid JSON), checked unique so the server can answer by prompt."""
    by_prompt = {}
    for number, row in enumerate(read_csv(path)):
        text = row["generate_results"]
        try:
            json.loads(text)
            if number % fence_every == 0:
                text = fenced(text)
        except ValueError:
            pass
        assert row["sft_prompt"] not in by_prompt
        by_prompt[row["sft_prompt"]] = text
    return by_prompt


def run_generate(argv, environ=None, sleep=None):
    """runner_cli.run in-process -> (status, stdout, stderr)."""
    from transitlm.generate import runner
    from transitlm.generate import cli as runner_cli
    out, err = io.StringIO(), io.StringIO()
    try:
        status = runner_cli.run(argv, environ or {}, out, err, sleep=sleep)
    except runner.UsageError as exc:
        err.write("generate.py: %s\n" % exc)
        status = 2
    return status, out.getvalue(), err.getvalue()


def completion(text):
    return json.dumps({"model": "hostile-model", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                           "content": text}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class HostileServer(object):
    """A loopback server whose answer depends on the first segment of the path
    (``/CASE/v1/chat/completions``) and on how often that case was asked:
    ``behave(handler, case, nth, body)`` writes raw bytes.  Requests are
    recorded as (method, path, Authorization, body bytes)."""

    def __init__(self, behave):
        self.behave = behave
        self.lock = threading.Lock()
        self.requests = []
        self.counts = {}
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                case = self.path.strip("/").split("/")[0]
                with hostile.lock:
                    hostile.requests.append((self.command, self.path,
                                             self.headers.get("Authorization"), body))
                    nth = hostile.counts[case] = hostile.counts.get(case, 0) + 1
                self.close_connection = True
                try:
                    hostile.behave(self, case, nth, body)
                    self.wfile.flush()
                except OSError:
                    pass            # the client gave up

            do_POST = do_GET = do_PUT = handle_any

        self.server = _QueueingServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, case):
        return "%s/%s/v1" % (self.base, case)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def seen(self, case):
        with self.lock:
            return [r for r in self.requests if r[1].strip("/").split("/")[0] == case]


def raw_answer(handler, status_line, headers=(), body=b""):
    head = [status_line] + ["%s: %s" % pair for pair in headers]
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers):
        head.append("Content-Length: %d" % len(body))
    head.append("Connection: close")
    handler.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


HOSTILE_KEY = "sk-HOSTILE-0123456789abcdefXYZ"


def write_input(folder, rows=2, name="input.csv"):
    """A small test file of our own: ids r1..rN."""
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["indexid", "system_prompt", "sft_prompt"])
        for number in range(1, rows + 1):
            writer.writerow(["r%d" % number, "You plan routes.", "prompt %d" % number])
    return path
