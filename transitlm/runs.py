"""Reading compare.py's inputs: run folders (report.json and details.jsonl) or
a details file with its report beside it, checked line by line; a run's rows
keyed for pairing by (index_id, occurrence).

Standard library only; Python 3.8+.
"""

import json
import os

import common

BENCHMARKS = ("single_route", "personalized", "diversity", "general_llm")

# Keys a details line must hold: always, on reachable funnel rows, on exact
# matches, and per scenario on evaluated rows.
ROW_KEYS = ("index_id", "status", "in_funnel")
REACHABLE_KEYS = ("station_grounding", "distance_plausibility", "line_iou", "station_iou",
                  "station_iou_exact", "exact_match", "score", "label_score",
                  "score_deviation_pct", "score_band")
EXACT_KEYS = ("distance_accurate", "time_accurate", "fare_accurate", "transfer_accurate",
              "overall_accurate", "distance_mape_pct", "time_mape_pct", "fare_mape_pct")
SCENARIO_KEYS = {"personalized": ("compliant", "label_compliant"),
                 "diversity": ("routes", "rd", "route_count", "rd_label", "label_route_count",
                               "all_routes_reachable", "label_first_score", "best_match")}


class CompareError(Exception):
    """A usage or input problem: one line on stderr, exit status 2."""


class Run(object):
    """One evaluation run: its report, its details records and their keys."""

    def __init__(self, name, path, report_path, details_path, report, records):
        self.name = name
        self.path = path
        self.report_path = report_path
        self.details_path = details_path
        self.report = report
        self.records = records
        self.keys = occurrence_keys(records)
        self.by_key = dict(zip(self.keys, records))

    @property
    def benchmark(self):
        return self.report["benchmark"]

    @property
    def protocol(self):
        return self.report["protocol"]


def report_beside(details_path):
    """The report JSON next to a details file: NAME.json for NAME.jsonl, the
    name with "details" replaced by "report", else report.json in its folder
    (the first that exists)."""
    folder, base = os.path.split(details_path)
    stem = base[:-len(".jsonl")] if base.endswith(".jsonl") else os.path.splitext(base)[0]
    candidates = [stem + ".json"]
    if "details" in base:
        candidates.append(stem.replace("details", "report") + ".json")
    candidates.append("report.json")
    for name in candidates:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.path.abspath(path) != os.path.abspath(details_path):
            return path
    raise CompareError("%s: no report JSON beside it (looked for %s)"
                       % (details_path, ", ".join(candidates)))


def run_files(path):
    """RUN argument -> (report path, details path)."""
    if os.path.isdir(path):
        report, details = os.path.join(path, "report.json"), os.path.join(path, "details.jsonl")
        for needed in (report, details):
            if not os.path.isfile(needed):
                raise CompareError("%s: no %s in this run folder"
                                   % (path, os.path.basename(needed)))
        return report, details
    if os.path.isfile(path):
        return report_beside(path), path
    raise CompareError("%s: no such run folder or details file" % path)


def read_report(path):
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except OSError as exc:
        raise CompareError("%s: cannot read (%s)" % (path, exc.strerror or exc))
    except (ValueError, RecursionError) as exc:
        raise CompareError("%s: not a JSON report (%s)" % (path, exc))
    if not isinstance(report, dict):
        raise CompareError("%s: not a JSON report (expected an object)" % path)
    if report.get("benchmark") not in BENCHMARKS:
        raise CompareError("%s: unknown benchmark %r" % (path, report.get("benchmark")))
    if report.get("protocol") not in common.PROTOCOLS:
        raise CompareError("%s: unknown protocol %r" % (path, report.get("protocol")))
    if not isinstance(report.get("metrics"), dict):
        raise CompareError("%s: the report has no metrics" % path)
    return report


def read_details(path):
    """details.jsonl -> list of dicts (one per line); CompareError naming the
    file and line for anything that is not a JSON object."""
    records = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    raise CompareError("%s line %d: empty line" % (path, number))
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    raise CompareError("%s line %d: not JSON (%s)" % (path, number, exc))
                if not isinstance(record, dict):
                    raise CompareError("%s line %d: expected a JSON object, got %s"
                                       % (path, number, common.type_name(record)))
                records.append(record)
    except OSError as exc:
        raise CompareError("%s: cannot read (%s)" % (path, exc.strerror or exc))
    except UnicodeDecodeError:
        raise CompareError("%s: not UTF-8 text" % path)
    return records


STATUSES = ("evaluated", "error", "no_response")


def check_record(benchmark, record, needs=()):
    """What is wrong with a details record, in words (the first key it lacks
    or a status/in_funnel of the wrong kind), or None."""
    for key in ROW_KEYS + tuple(needs):
        if key not in record:
            return "no %r key" % key
    if record["status"] not in STATUSES:
        return "status %s is not one of %s" % (json.dumps(record["status"]), ", ".join(STATUSES))
    if not isinstance(record["in_funnel"], bool):
        return "in_funnel is %s, expected true or false" % common.type_name(record["in_funnel"])
    missing = missing_verdict(benchmark, record)
    return "no %r key" % missing if missing else None


def missing_verdict(benchmark, record):
    """The first verdict key a record lacks, or None."""
    if benchmark == "personalized" and "req_type" not in record:
        return "req_type"
    if record["in_funnel"] and record.get("reachable"):
        for key in REACHABLE_KEYS:
            if key not in record:
                return key
        if record.get("exact_match"):
            for key in EXACT_KEYS:
                if key not in record:
                    return key
    if record["status"] == "evaluated":
        if "reachable" not in record:
            return "reachable"
        for key in SCENARIO_KEYS.get(benchmark, ()):
            if key not in record:
                return key
    return None


def occurrence_keys(records):
    """Pairing keys: (index_id, occurrence), so the k-th row with an id pairs
    with the k-th row with that id in another run."""
    seen, keys = {}, []
    for record in records:
        index_id = record.get("index_id")
        if not isinstance(index_id, (str, int, float, type(None))) or isinstance(index_id, bool):
            index_id = json.dumps(index_id, sort_keys=True)
        occurrence = seen.get(index_id, 0)
        seen[index_id] = occurrence + 1
        keys.append((index_id, occurrence))
    return keys


def load_run(name, path, needs=()):
    report_path, details_path = run_files(path)
    report = read_report(report_path)
    records = read_details(details_path)
    benchmark = report["benchmark"]
    for number, record in enumerate(records, 1):
        problem = check_record(benchmark, record, needs)
        if problem:
            raise CompareError("%s line %d: %s" % (details_path, number, problem))
    samples = (report.get("counts") or {}).get("samples")
    if samples is not None and samples != len(records):
        raise CompareError("%s has %d lines but %s counts %s samples: the files do not "
                           "belong together" % (details_path, len(records), report_path,
                                                samples))
    return Run(name, path, report_path, details_path, report, records)



def check_failure_codes(run):
    for number, record in enumerate(run.records, 1):
        codes = record["failure_codes"]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise CompareError("%s line %d: failure_codes is not a list of texts"
                               % (run.details_path, number))

