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
compare.py's details lines and run folders; hostile text (markup, bidi,
formulas, wide tokens) and run folders full of it; the evaluator pages'
run-folder fixtures; a parser of HTML pages; Chromium; GTFS feeds; route_eval's
line table; the route-eval service (its network, its cases, ServerTestCase, the
framing checks every JSON service gets); the reward's rows and chat template;
generate.py's stand-in and hostile chat servers.
"""

import contextlib
import csv
import hashlib
import html.parser
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def run_in_process(function, *args):
    """A command's function called in this process (from the main thread:
    the streams are swapped for the whole process) -> (exit status, stdout,
    stderr); argparse's usage errors (SystemExit) give their status."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = function(*args)
        except SystemExit as exc:
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def run_evaluator(benchmark, argv):
    """Run an evaluator in-process -> (exit status, stdout, stderr)."""
    import transitlm.cli
    return run_in_process(transitlm.cli.run, benchmark, argv)


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


# Each benchmark's test file in a parity case set.
PARITY_FILES = {"single_route": "b1.csv", "personalized": "b2.csv", "diversity": "b3.csv",
                "general_llm": "general.csv"}


def case_sets():
    """(name, folder, {benchmark: test file}) of the bundled data and every
    parity case set (each folder holds its station_info.csv and line_info.csv)."""
    from transitlm.catalog import DATA_DIR, benchmark_info
    sets = [("bundled", DATA_DIR, {name: os.path.join(DATA_DIR, benchmark_info(name).default_input)
                                   for name in PARITY_FILES})]
    if os.path.isdir(PARITY):
        for name in sorted(os.listdir(PARITY)):
            folder = os.path.join(PARITY, name)
            files = {bench: os.path.join(folder, short) for bench, short in PARITY_FILES.items()
                     if os.path.isfile(os.path.join(folder, short))}
            if files and os.path.isfile(os.path.join(folder, "station_info.csv")):
                sets.append((name, folder, files))
    return sets


def check_every_case_set(test, check):
    """``check(name, folder, files, protocol)`` -> rows checked, on every case
    set (case_sets) under both protocols, a subTest each -> the rows checked in all."""
    total = 0
    for name, folder, files in case_sets():
        for protocol in ("reference", "paper"):
            with test.subTest(case=name, protocol=protocol):
                total += check(name, folder, files, protocol)
    return total


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
    return json.loads(json.dumps(transitlm.reports.finite_or_none(folded["metrics"])))


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


# ---------------------------------------------------------------------------
# Hostile text (issue 30): what a model's answer, a feed, a folder name or a
# recorded model name may hold.  Markup that would run script if escaping
# failed sets data-pwned on <body> (a test reads it back from the DOM).
# ---------------------------------------------------------------------------

def pwn(tag):
    return "document.body.setAttribute('data-pwned','%s')" % tag


HOSTILE_MARKUP = (
    "<script>%s</script>" % pwn("script"),
    "<img src=x onerror=\"%s\">" % pwn("img"),
    "\"><svg onload=\"%s\">" % pwn("svg"),
    "'><iframe srcdoc=\"<script>parent.%s</script>\"></iframe>" % pwn("iframe"),
    "</title></textarea></style><script>%s</script>" % pwn("close"),
    "<a href=\"javascript:%s\">click</a>" % pwn("href"),
    "<svg><a href=\"javascript:%s\"><text>x</text></a></svg>" % pwn("svg-href"),
    "[x](javascript:alert(1)) ![y](javascript:alert(2)) <javascript:alert(3)>",
    "&lt;script&gt;%s&lt;/script&gt; &#x3C;img src=x onerror=1&#x3E;" % pwn("entity"),
    "<style>body{display:none}</style><meta http-equiv=\"refresh\" content=\"0;url=x\">",
    "<form action=\"http://evil.example\"><input name=q></form>"
    "<base href=\"http://evil.example/\">",
)
# Bidirectional text: overrides and isolates that would mirror the page's own
# words, and right-to-left letters beside numbers and brackets.
HOSTILE_BIDI = ("\u202e(prediction)\u202c", "\u2067\u05e9\u05dc\u05d5\u05dd 12 (ab)",
                "\u200f\u061c\u0645\u0631\u062d\u0628\u0627 3.5 km\u2069\u2066")
# Cells a spreadsheet would evaluate (OWASP's CSV injection), folder-safe.
HOSTILE_FORMULAS = ("=HYPERLINK(\"evil\",\"x\")", "+cmd|' /C calc'!A0", "-2+3+cmd|x",
                    "@SUM(1+1)*cmd|x", "\t=1+1", "\r=1+1", "  =1+1", "\uff1d1+1")
WIDE_TOKEN = "W" * 3000                 # one 3,000-character token
LONG_FOLDER = "a-folder-name-" + "y" * 126          # 140 characters


def hostile_text(index):
    """A hostile text of each class, by turns."""
    texts = HOSTILE_MARKUP + HOSTILE_BIDI + HOSTILE_FORMULAS + (WIDE_TOKEN,)
    return texts[index % len(texts)]


# Text that made a reader's time grow with the square of its length (issue
# 38): each pattern is repeated to the size wanted (reading_text).  The
# reading must stay linear on every one (tests/test_answers.py;
# bench/bench_reading.py gives the times at 1 MB).
_ROUTE_TEXT = json.dumps({"line_sequence": ["地铁1号线"], "station_sequence": ["罗湖", "国贸"],
                          "total_distance": "2公里"}, ensure_ascii=False)
READING_PATTERNS = {
    "escaped quotes": '\\"{',                       # \"{\"{... (a string never closed)
    "unclosed strings": '{"a',
    "quote and backslash": '"\\',
    "backslash runs": "\\" * 7 + '"',
    "square brackets": "[",
    "curly brackets": "{",
    "stringified route": json.dumps(_ROUTE_TEXT),   # "{\"line_sequence\": ...}"
    "stringified route, unquoted": json.dumps(_ROUTE_TEXT)[1:-1],
    "route": _ROUTE_TEXT,
    "open objects": '{"a":0 ',
    "closed objects": '{"a":0}',
    "reasoning tags": "<think></think>{",
    "mixed": '\\"{[{"a":0 "\\\\<think>' + json.dumps(_ROUTE_TEXT)[1:30],
}


def reading_text(pattern, size):
    """READING_PATTERNS[pattern] repeated to ``size`` characters."""
    unit = READING_PATTERNS[pattern]
    return (unit * (size // len(unit) + 1))[:size]


def hostile_runs(folder):
    """Run folders of two benchmarks whose folder names, recorded model names,
    cities and failure codes are hostile, in a 140-character folder -> paths."""
    runs = []
    parent = os.path.join(folder, LONG_FOLDER)
    models = (HOSTILE_MARKUP[1], HOSTILE_FORMULAS[0], None)     # None: named by its folder
    folders = ("<img src=x onerror=\"%s\">" % pwn("folder"), HOSTILE_FORMULAS[3],
               HOSTILE_BIDI[1] + LONG_FOLDER[:100])
    for benchmark in ("single_route", "personalized"):
        for index, (model, name) in enumerate(zip(models, folders)):
            records = benchmark_records(benchmark, 30, 0.4 + 0.2 * index, seed=index,
                                        cities=(HOSTILE_MARKUP[0], HOSTILE_BIDI[2],
                                                HOSTILE_FORMULAS[1], WIDE_TOKEN))
            for number, record in enumerate(records):
                if record["failure_codes"]:
                    record["failure_codes"].append("overlap." + hostile_text(number))
            runs.append(write_run(os.path.join(parent, name + "-" + benchmark), records,
                                  benchmark, model=model and model + " " + HOSTILE_BIDI[0]))
    return runs


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


class _Beside(object):
    """A slow fixture started as its test module is loaded and computed
    beside the suite, in the lane: one job at a time, in the order their
    modules were loaded, which is the order the tests run in (and ask for
    them) -- one core for the suite, one for the lane, rather than every
    fixture at once while the first modules run.  ``result()`` waits for the
    job and returns its value, or raises what it raised; a job the lane has
    not started yet is run at once by the caller.

    SIGINT and SIGTERM sent to this process go to a thread that does not
    hold them: between jobs the lane holds them, and a test that signals this
    process (transitlm.exit_status holds them in the main thread while a run
    commits) pauses the lane (``lane_paused``) so that they reach the main
    thread only; a job runs with them let through, so that the programs it
    starts can be stopped."""

    _lock = threading.Condition()
    _queue = []
    _lane = None
    _processes = []             # Offloaded's, running
    _busy = False               # the lane runs a job
    _paused = 0
    _HELD = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM")
                  if hasattr(signal, name))

    def _enqueue(self):
        self._value = self._error = None
        self._done = threading.Event()
        cls = _Beside
        with cls._lock:
            cls._queue.append(self)
            if cls._lane is None:
                cls._lane = threading.Thread(target=cls._run_lane, daemon=True)
                cls._lane.start()
                import atexit
                atexit.register(cls._stop)
            cls._lock.notify()

    @classmethod
    def _hold(cls, how):
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(how, cls._HELD)

    @classmethod
    def _run_lane(cls):
        cls._hold(signal.SIG_BLOCK)
        while True:
            with cls._lock:
                while not cls._queue or cls._paused:
                    cls._lock.wait()
                job = cls._queue.pop(0)
                cls._busy = True
            cls._hold(signal.SIG_UNBLOCK)
            try:
                job._run()
            finally:
                cls._hold(signal.SIG_BLOCK)
                with cls._lock:
                    cls._busy = False
                    cls._lock.notify_all()

    @classmethod
    @contextlib.contextmanager
    def paused(cls):
        """The lane's job done and no other started while the block runs."""
        with cls._lock:
            cls._paused += 1
            while cls._busy:
                cls._lock.wait()
        try:
            yield
        finally:
            with cls._lock:
                cls._paused -= 1
                cls._lock.notify_all()

    @classmethod
    def _stop(cls):
        # A module run on its own may not ask for every result.
        with cls._lock:
            del cls._queue[:]
            for process in cls._processes:
                process.kill()

    def _run(self):
        try:
            self._value = self._compute()
        except BaseException as exc:            # handed to the test that asks
            self._error = exc
        finally:
            self._done.set()

    def result(self):
        with _Beside._lock:
            mine = self in _Beside._queue
            if mine:
                _Beside._queue.remove(self)
        if mine:
            self._run()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


lane_paused = _Beside.paused


class Background(_Beside):
    """Work that waits on other processes (a program of its own, commands run
    one after another): ``function()`` run in the lane's thread."""

    def __init__(self, function):
        self._function = function
        self._enqueue()

    def _compute(self):
        return self._function()


class Offloaded(_Beside):
    """Pure computation (CPU-bound, so a thread of this process would not run
    it beside the tests): the function ``target`` ("package.module:function",
    called with JSON ``arguments``) run in a fresh Python process of its own
    (tests.support.fixture_process; not a fork of this process, whose other
    threads may hold locks) -> its JSON result; a function that failed fails
    the test with its traceback."""

    def __init__(self, target, *arguments):
        self.argv = [sys.executable, "-m", "tests.support.fixture_process", target,
                     json.dumps(arguments)]
        self._enqueue()

    def _compute(self):
        with _Beside._lock:
            process = subprocess.Popen(self.argv, cwd=REPO, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, universal_newlines=True,
                                       encoding="utf-8")
            _Beside._processes.append(process)
        try:
            out, err = process.communicate()
        finally:
            with _Beside._lock:
                _Beside._processes.remove(process)
        if process.returncode != 0:
            raise AssertionError("%s exited %s:\n%s" % (" ".join(self.argv[3:]),
                                                         process.returncode, err))
        return json.loads(out)


def in_ci():
    """Is CI set (CI=true, as CI services and .ci/run set it)?"""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_installed(program, checks, package):
    """From a test class's setUpClass: skip it where ``program`` (a path or
    None) is not installed -- on a developer's machine -- but fail under CI,
    so that a broken install is noticed."""
    if program:
        return
    if in_ci():
        raise AssertionError("%s are not possible here and CI is set: they must run (.ci/run "
                             "installs Debian's %s)" % (checks, package))
    raise unittest.SkipTest("%s skipped: not installed (Debian: apt-get install %s)"
                            % (checks, package))


def chromium_command(url, user_dir, *flags):
    return ([CHROMIUM] + list(CHROMIUM_FLAGS) + ["--user-data-dir=" + user_dir]
            + list(flags) + [url])


def with_script(page, script):
    """A page's HTML with ``script`` run after the page's own: added at the
    end of its body and allowed, by its SHA-256, in the page's
    Content-Security-Policy (which allows no other inline script)."""
    import base64
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    if "script-src " not in page:
        raise AssertionError("the page has no script-src in a Content-Security-Policy")
    page = page.replace("script-src ", "script-src 'sha256-%s' " % digest, 1)
    return page.replace("</body>", "<script>%s</script></body>" % script, 1)


# A page of frames: once everything has loaded it copies the attributes of
# each framed page's <body> (where a checking script left its findings) into
# its own <body>, which --dump-dom prints.  Frames of file:// pages can be
# read with --allow-file-access-from-files.
_FRAMES_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>%s<script>
window.addEventListener('load',function(){var out={};
[].forEach.call(document.querySelectorAll('iframe'),function(f){var found={};
 try{[].forEach.call(f.contentDocument.body.attributes,function(a){found[a.name]=a.value;});}
 catch(e){found=null;}
 out[f.id]=found;});
document.body.setAttribute('data-frames',JSON.stringify(out));});
</script></body></html>"""


def frames_command(folder, frames, height=700):
    """One headless Chromium run that opens pages of ``folder`` side by side,
    each in a frame of its own width: frames = [(id, file name, width)] ->
    the command (run it, then read its output with frames_found)."""
    path = os.path.join(folder, "frames.html")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(_FRAMES_PAGE % "".join(
            '<iframe id="%s" src="%s" width="%d" height="%d"></iframe>'
            % (ident, name, width, height) for ident, name, width in frames))
    profile = tempfile.mkdtemp(dir=folder)
    return chromium_command("file://" + path, profile, "--dump-dom",
                            "--allow-file-access-from-files", "--hide-scrollbars")


def frames_found(dom, log=""):
    """{frame id: {attribute of its page's <body>: value}} from the DOM that
    frames_command's run printed (None for a frame that could not be read)."""
    found = re.search(r'data-frames="([^"]*)"', dom)
    if not found:
        raise AssertionError("no findings from Chromium: %s" % log[-800:])
    return json.loads(html.unescape(found.group(1)))


def run_frames(folder, frames, height=700):
    """frames_command run -> frames_found."""
    done = subprocess.run(frames_command(folder, frames, height), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=BROWSER_TIMEOUT_S)
    return frames_found(done.stdout.decode("utf-8", "replace"),
                        done.stderr.decode("utf-8", "replace"))


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


def network_file_with_prefix(folder, name, prefix):
    """(header, rows as dicts) of a network file import_gtfs.py wrote into
    ``folder``, with ``prefix`` put before every stop id it holds, field by
    field as the file layouts say (station_info.csv: stop_id and
    next_hop_stations; line_info.csv: each station's stop_id and station_id;
    hop_times.csv: from_stop_id, to_stop_id; line_service.csv: a direction
    named by its end stops, "<id>><id>").  What --id_prefix should write."""
    def read(file_name):
        with open(os.path.join(folder, file_name), encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            return reader.fieldnames, list(reader)

    header, rows = read(name)
    ids = {row["stop_id"] for row in read("station_info.csv")[1]}
    for row in rows:
        if name == "station_info.csv":
            row["stop_id"] = prefix + row["stop_id"]
            row["next_hop_stations"] = json.dumps(
                [prefix + hop for hop in json.loads(row["next_hop_stations"])],
                ensure_ascii=False)
        elif name == "line_info.csv":
            stations = json.loads(row["station_list"])
            for station in stations:
                station["stop_id"] = prefix + station["stop_id"]
                station["station_id"] = prefix + station["station_id"]
            row["station_list"] = json.dumps(stations, ensure_ascii=False)
        elif name == "hop_times.csv":
            row["from_stop_id"] = prefix + row["from_stop_id"]
            row["to_stop_id"] = prefix + row["to_stop_id"]
        elif name == "line_service.csv":
            ends = row["direction"].split(">")
            if len(ends) == 2 and all(end in ids for end in ends):
                row["direction"] = ">".join(prefix + end for end in ends)
    return header, rows


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


# The services' fixtures (route_eval's line table, the route-eval service and
# the framing checks every JSON service gets, the reward's rows, generate.py's
# chat servers) are in tests/support/services.py; imported here, so a test
# imports every shared fixture from tests.support.
from tests.support.services import *  # noqa: E402,F401,F403
