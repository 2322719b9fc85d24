#!/usr/bin/env python3
"""Compare evaluation runs: metrics with bootstrap intervals, paired
significance against a baseline, and breakdowns by city, req_type and failure.

Usage: python3 compare.py RUN [RUN ...] [--names a,b] [--baseline NAME]
           [--bootstrap N] [--seed S] [--confidence 0.95]
           [--format text|markdown|latex|csv] [--json PATH] [--html PATH]
           [--by city|req_type|failure ...]

A RUN is a folder written by an evaluator's --out (report.json and
details.jsonl), or a details JSON Lines file with its report JSON beside it.

Layers: read runs -> per-row terms (metric_terms) -> resampling
(significance.py) -> formatting.  Metric values come from the evaluator's own
aggregation (transitlm.records.aggregate_records) and must equal the report's metrics.
"""

import argparse
import csv
import gc
import io
import json
import math
import os
import sys
import unicodedata

REPO = os.path.dirname(os.path.abspath(__file__))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import common  # noqa: E402
import transitlm.cli  # noqa: E402
import transitlm.records  # noqa: E402
import transitlm.status  # noqa: E402
import significance  # noqa: E402

SCHEMA_VERSION = 1
DEFAULT_SEED = 12345
DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
FIRST_IDS_SHOWN = 5
BENCHMARKS = ("single_route", "personalized", "diversity", "general_llm")
BREAKDOWNS = ("city", "req_type", "failure")
FORMATS = ("text", "markdown", "latex", "csv")

# The metrics of report["metrics"] in the paper's order: label and kind.
# rate: a fraction shown in percent; mean: shown with 3 decimals; pct: already
# in percent (MAPE).  Lower is better only for MAPE.
METRICS = (("conn", "Conn", "rate"), ("sg", "SG", "rate"), ("dp", "DP", "rate"),
           ("lo", "LO", "mean"), ("sso", "SSO", "mean"), ("rem", "REM", "rate"),
           ("ea", "EA", "rate"), ("mape", "MAPE", "pct"), ("pc", "PC", "rate"),
           ("rd", "RD", "mean"))
METRIC_LABEL = {key: label for key, label, _ in METRICS}
METRIC_KIND = {key: kind for key, _, kind in METRICS}
LOWER_IS_BETTER = {"mape"}

# Round 5's preference types (personalized/evaluate.py PREFERENCE_NAMES).
PREFERENCE_TYPES = (2, 5, 7, 8)

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


# ---------------------------------------------------------------------------
# 1. Reading runs
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# 2. Metric values (the evaluator's aggregation) and per-row terms
# ---------------------------------------------------------------------------

def json_value(value):
    """A figure as it reads back from the report JSON (non-finite -> null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def aggregate(benchmark, protocol, records, what):
    """transitlm.records.aggregate_records, with any failure to fold the lines as an input error."""
    try:
        return transitlm.records.aggregate_records(benchmark, protocol, records)
    except common.InputError as exc:
        raise CompareError("%s: %s" % (what, exc))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CompareError("%s: the details lines cannot be aggregated (%s: %s)"
                           % (what, type(exc).__name__, exc))


def metric_names(benchmark, metrics):
    return [key for key, _, _ in METRICS if key in metrics]


def run_metrics(run):
    """The run's metrics recomputed from its details lines; CompareError when
    they differ from the report's (the files do not belong together)."""
    folded = aggregate(run.benchmark, run.protocol, run.records, run.details_path)
    metrics = {key: json_value(value) for key, value in folded["metrics"].items()}
    reported = run.report["metrics"]
    for key in sorted(set(metrics) | set(reported)):
        if metrics.get(key, "absent") != reported.get(key, "absent"):
            raise CompareError(
                "%s: metric %s recomputed from %s is %r but the report says %r: the files "
                "do not belong together" % (run.report_path, key, run.details_path,
                                            metrics.get(key), reported.get(key)))
    return metrics, folded


def number(record, key):
    """A numeric field of a details record (None stays None: a non-finite
    figure written as null); DetailsTypeError for anything else."""
    value = record.get(key)
    if value is None or isinstance(value, (int, float)):
        return value
    raise ValueError("%s is %s, expected a number" % (key, common.type_name(value)))


def metric_terms(benchmark, protocol, record):
    """{metric: (numerator, denominator)} of one details record, such that each
    metric is sum(numerators) / sum(denominators) over the rows (the rules of
    transitlm.records.FunnelTotals/metrics_block, personalized.PreferenceTotals and
    diversity.DiversityTotals).  A numerator may be None (a figure written as
    null), which leaves that metric without an interval.  ValueError when a
    figure has the wrong type.
    """
    rules = common.PROTOCOLS[protocol]
    evaluated = record.get("status") == "evaluated"
    entered = bool(record.get("in_funnel"))
    reached = entered and bool(record.get("reachable"))
    exact = reached and bool(record.get("exact_match"))

    def on_reached(key):
        return number(record, key) if reached else 0

    if exact:
        accurate = sum(bool(record.get(key)) for key in
                       ("distance_accurate", "time_accurate", "fare_accurate"))
        mapes = [number(record, key) for key in
                 ("distance_mape_pct", "time_mape_pct", "fare_mape_pct")]
        mape_sum = None if None in mapes else common.plain_sum(mapes)
    else:
        accurate, mape_sum = 0, 0
    terms = {
        "conn": (int(reached), int(entered)),
        "sg": (int(reached and bool(record.get("station_grounding"))), int(reached)),
        "dp": (int(reached and bool(record.get("distance_plausibility"))), int(reached)),
        "lo": (on_reached("line_iou"), int(reached)),
        "sso": (on_reached("station_iou"), int(reached)),
        "rem": (int(exact), int(reached)),
        # EA and MAPE: three estimates per exact match.
        "ea": (accurate, 3 * int(exact)),
        "mape": (mape_sum, 3 * int(exact)),
    }
    if benchmark == "personalized":
        if rules.preference_over_known:
            req_type = record.get("req_type")
            in_scope = isinstance(req_type, int) and req_type in PREFERENCE_TYPES
        else:
            in_scope = evaluated
        terms["pc"] = (int(in_scope and bool(record.get("compliant"))), int(in_scope))
    if benchmark == "diversity":
        if rules.rd_over_all_rows:
            terms["rd"] = (number(record, "rd") if evaluated else 0, 1)
        else:
            count = number(record, "route_count") if evaluated else 0
            in_scope = evaluated and count is not None and count >= 2
            terms["rd"] = (number(record, "rd") if in_scope else 0, int(in_scope))
    return terms


def term_columns(run, records, metrics):
    """Per-row numerator and denominator columns of `metrics` for records of a run."""
    numerators = {key: [] for key in metrics}
    denominators = {key: [] for key in metrics}
    for record in records:
        try:
            terms = metric_terms(run.benchmark, run.protocol, record)
        except ValueError as exc:
            raise CompareError("%s row %s: %s" % (run.details_path, record.get("row"), exc))
        for key in metrics:
            numerator, denominator = terms[key]
            numerators[key].append(numerator)
            denominators[key].append(denominator)
    return numerators, denominators


# ---------------------------------------------------------------------------
# 3. Pairing and resampling
# ---------------------------------------------------------------------------

def pair_rows(runs):
    """-> (paired keys in the first run's order, missing report).

    A row is paired when its (index_id, occurrence) is in every run; the
    others are reported per run that lacks them, with their count and first ids.
    """
    common_keys = set(runs[0].keys)
    for run in runs[1:]:
        common_keys &= set(run.by_key)
    paired = [key for key in runs[0].keys if key in common_keys]
    union = []
    seen = set()
    for run in runs:
        for key in run.keys:
            if key not in seen:
                seen.add(key)
                union.append(key)
    by_run = {}
    for run in runs:
        lacking = [key for key in union if key not in run.by_key]
        if lacking:
            by_run[run.name] = {"count": len(lacking),
                                "first_ids": [key[0] for key in lacking[:FIRST_IDS_SHOWN]]}
    unpaired = [key for key in union if key not in common_keys]
    missing = {"count": len(unpaired),
               "first_ids": [key[0] for key in unpaired[:FIRST_IDS_SHOWN]],
               "runs": by_run}
    return paired, missing


def resampled_metrics(columns_by_series, n, resamples, seed):
    """Bootstrap each series' ratio of sums over the same resampled rows.

    columns_by_series: list of (numerator column, denominator column) over n rows.
    -> list per series of the resampled ratios (None where undefined).
    """
    columns = []
    for numerators, denominators in columns_by_series:
        columns.extend((numerators, denominators))
    sums = significance.bootstrap_column_sums(columns, n, resamples, seed)
    out = []
    for index in range(len(columns_by_series)):
        out.append([significance.ratio(row[2 * index], row[2 * index + 1]) for row in sums])
    return out


def bootstrap_runs(runs, keys_by_run, metrics, resamples, seed):
    """{(run name, metric): [resampled values]} with every run resampled on the
    same draws of row positions (the runs' rows listed in the same order)."""
    series, index = [], []
    for run, keys in zip(runs, keys_by_run):
        numerators, denominators = term_columns(run, [run.by_key[k] for k in keys], metrics)
        for key in metrics:
            series.append((numerators[key], denominators[key]))
            index.append((run.name, key))
    n = len(keys_by_run[0]) if keys_by_run else 0
    return dict(zip(index, resampled_metrics(series, n, resamples, seed)))


def alpha_of(confidence):
    return round(1.0 - confidence, 12)


# ---------------------------------------------------------------------------
# 4. The comparison
# ---------------------------------------------------------------------------

def compare_runs(runs, baseline, resamples, seed, confidence, by=()):
    """The comparison as the --json dict (see the README, "Comparing models")."""
    first = runs[0]
    for run in runs[1:]:
        if run.benchmark != first.benchmark:
            raise CompareError("runs of different benchmarks: %s is %s, %s is %s"
                               % (first.name, first.benchmark, run.name, run.benchmark))
        if run.protocol != first.protocol:
            raise CompareError("runs of different protocols: %s is %s, %s is %s"
                               % (first.name, first.protocol, run.name, run.protocol))
    if "req_type" in by and first.benchmark != "personalized":
        raise CompareError("--by req_type needs benchmark 2 (personalized) runs, these are %s"
                           % first.benchmark)
    values, folded = {}, {}
    for run in runs:
        values[run.name], folded[run.name] = run_metrics(run)
    metrics = metric_names(first.benchmark, values[first.name])
    paired, missing = pair_rows(runs)

    # Paired draws: positions in the paired rows, the same for every run.
    paired_samples = {}
    if resamples:
        paired_samples = bootstrap_runs(runs, [paired] * len(runs), metrics, resamples, seed)
    # A run's own interval is over all its rows; when no row is missing these
    # are the paired rows (same order, same seed: the same draws).
    own_samples = {}
    if resamples:
        for run in runs:
            if not missing["count"]:
                own_samples.update({k: v for k, v in paired_samples.items() if k[0] == run.name})
            else:
                extra = [key for key in run.keys if key not in set(paired)]
                own_samples.update(bootstrap_runs([run], [paired + extra], metrics,
                                                  resamples, seed))

    run_entries = []
    for run in runs:
        entry = {"name": run.name, "path": run.path, "benchmark": run.benchmark,
                 "protocol": run.protocol, "signature": run.report.get("signature"),
                 "rows": len(run.records), "metrics": {}}
        for key in metrics:
            ci = (significance.percentile_interval(own_samples[(run.name, key)], confidence)
                  if resamples else None)
            entry["metrics"][key] = {"value": values[run.name].get(key), "ci": ci}
        run_entries.append(entry)

    comparisons = comparison_entries(runs, baseline, metrics, values, paired, missing,
                                     paired_samples, resamples, confidence)
    notes = comparison_notes(runs, paired, missing)
    result = {"schema_version": SCHEMA_VERSION, "confidence": confidence,
              "bootstrap": resamples, "seed": seed, "baseline": baseline,
              "benchmark": first.benchmark, "protocol": first.protocol,
              "rows": {"paired": len(paired), "missing": missing},
              "runs": run_entries, "comparisons": comparisons, "notes": notes,
              "breakdowns": {}}
    if "city" in by:
        result["breakdowns"]["city"] = city_breakdown(runs, metrics)
    if "req_type" in by:
        result["breakdowns"]["req_type"] = req_type_breakdown(runs, folded)
    if "failure" in by:
        result["breakdowns"]["failure"] = failure_breakdown(runs)
    return result


def comparison_entries(runs, baseline, metrics, values, paired, missing, samples,
                       resamples, confidence):
    base = next(run for run in runs if run.name == baseline)
    if missing["count"]:
        paired_set = set(paired)
        paired_values = {}
        for run in runs:
            records = [r for k, r in zip(run.keys, run.records) if k in paired_set]
            folded = aggregate(run.benchmark, run.protocol, records, run.details_path)
            paired_values[run.name] = {k: json_value(v) for k, v in folded["metrics"].items()}
    else:
        paired_values = values
    out = []
    for run in runs:
        if run.name == baseline:
            continue
        for key in metrics:
            value, base_value = paired_values[run.name].get(key), paired_values[base.name].get(key)
            delta = None if value is None or base_value is None else value - base_value
            ci, p_value = None, None
            if resamples:
                deltas = [None if a is None or b is None else a - b for a, b in
                          zip(samples[(run.name, key)], samples[(base.name, key)])]
                ci = significance.percentile_interval(deltas, confidence)
                p_value = significance.paired_p_value(deltas)
            out.append({"run": run.name, "metric": key, "delta": delta, "ci": ci,
                        "p_value": p_value,
                        "significant": p_value is not None and p_value < alpha_of(confidence)})
    return out


def comparison_notes(runs, paired, missing):
    notes = []
    if missing["count"]:
        notes.append("%d row(s) are missing from some runs (first ids: %s) and are left out "
                     "of the paired statistics (%d rows paired); each run's value and "
                     "interval are over all its rows, a difference and its interval over the "
                     "paired rows only, so a difference may differ from the difference of the "
                     "values shown"
                     % (missing["count"], ", ".join(str(i) for i in missing["first_ids"]),
                        len(paired)))
        for name, lack in missing["runs"].items():
            notes.append("%s lacks %d row(s) (first ids: %s)"
                         % (name, lack["count"], ", ".join(str(i) for i in lack["first_ids"])))
    duplicated = sum(1 for key in runs[0].keys if key[1] == 1)
    if duplicated:
        notes.append("%s repeats %d index_id(s): the k-th row with an id is paired with the "
                     "k-th row with that id in the other runs" % (runs[0].name, duplicated))
    return notes


# ---------------------------------------------------------------------------
# 5. Breakdowns
# ---------------------------------------------------------------------------

def _most_frequent_first(counts_by_name):
    """Keys ordered by their total over runs, descending, then by name."""
    return sorted(counts_by_name, key=lambda name: (-sum(counts_by_name[name].values()),
                                                    str(name)))


def city_breakdown(runs, metrics):
    """Every metric per city for each run (the evaluator's aggregation over the
    run's rows of that city), with row counts; most rows first, no city last."""
    by_city = {}
    for run in runs:
        for record in run.records:
            city = record.get("city")
            by_city.setdefault(city, {}).setdefault(run.name, []).append(record)
    rows = {city: {name: len(records) for name, records in per_run.items()}
            for city, per_run in by_city.items()}
    order = sorted(by_city, key=lambda c: (c is None, -sum(rows[c].values()), str(c)))
    out = []
    for city in order:
        entry = {"city": city, "rows": {}, "metrics": {}}
        for run in runs:
            records = by_city[city].get(run.name, [])
            entry["rows"][run.name] = len(records)
            if records:
                folded = aggregate(run.benchmark, run.protocol, records, run.details_path)
                figures = {k: json_value(v) for k, v in folded["metrics"].items()}
            else:
                figures = {}
            entry["metrics"][run.name] = {key: figures.get(key) for key in metrics}
        out.append(entry)
    return out


def req_type_breakdown(runs, folded):
    """Round 5 compliance per preference type for each run."""
    types = {}
    for run in runs:
        by_type = folded[run.name]["rounds"]["preference"]["by_req_type"]
        for req_type, row in by_type.items():
            types.setdefault(req_type, {"req_type": req_type, "name": row["name"], "runs": {}})
            types[req_type]["runs"][run.name] = {
                "samples": row["samples"], "compliant": row["compliant"],
                "label_compliant": row["label_compliant"],
                "rate": significance.ratio(row["compliant"], row["samples"])}
    out = []
    for req_type in sorted(types, key=lambda t: (len(t), t)):
        entry = types[req_type]
        for run in runs:
            entry["runs"].setdefault(run.name, {"samples": 0, "compliant": 0,
                                                "label_compliant": 0, "rate": None})
        out.append(entry)
    return out


def failure_breakdown(runs):
    """Rows per failure code and per stage (the part before the first dot) for
    each run, most frequent first; plus rows without any failure code."""
    codes, stages, clean = {}, {}, {}
    for run in runs:
        clean[run.name] = 0
        for record in run.records:
            row_codes = record["failure_codes"]
            if not row_codes:
                clean[run.name] += 1
            for code in sorted(set(row_codes)):
                codes.setdefault(code, {}).setdefault(run.name, 0)
                codes[code][run.name] += 1
            for stage in sorted({code.split(".", 1)[0] for code in row_codes}):
                stages.setdefault(stage, {}).setdefault(run.name, 0)
                stages[stage][run.name] += 1

    def filled(counts):
        return {run.name: counts.get(run.name, 0) for run in runs}

    return {"rows": {run.name: len(run.records) for run in runs}, "passed": clean,
            "stages": [{"stage": s, "rows": filled(stages[s])}
                       for s in _most_frequent_first(stages)],
            "codes": [{"code": c, "stage": c.split(".", 1)[0], "rows": filled(codes[c])}
                      for c in _most_frequent_first(codes)]}


def check_failure_codes(run):
    for number, record in enumerate(run.records, 1):
        codes = record["failure_codes"]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise CompareError("%s line %d: failure_codes is not a list of texts"
                               % (run.details_path, number))


# ---------------------------------------------------------------------------
# 6. Formatting
# ---------------------------------------------------------------------------

def metric_header(key, delta=False):
    kind = METRIC_KIND[key]
    if kind == "rate":
        return METRIC_LABEL[key] + (" pp" if delta else " %")
    if kind == "pct":
        return METRIC_LABEL[key] + (" pp" if delta else " %")
    return METRIC_LABEL[key]


def scaled(key, value):
    return value * 100.0 if METRIC_KIND[key] == "rate" else value


def decimals(key):
    return {"rate": 1, "pct": 2, "mean": 3}[METRIC_KIND[key]]


def fmt_number(key, value, sign=False):
    if value is None:
        return "-"
    return ("%+.*f" if sign else "%.*f") % (decimals(key), scaled(key, value))


def fmt_interval(key, ci):
    if ci is None:
        return ""
    return "[%s, %s]" % (fmt_number(key, ci[0]), fmt_number(key, ci[1]))


def fmt_value_ci(key, figure):
    text = fmt_number(key, figure["value"])
    if figure["ci"] is not None:
        text += " " + fmt_interval(key, figure["ci"])
    return text


def fmt_p(p_value):
    if p_value is None:
        return ""
    if p_value < 0.0005:
        return "p<0.001"
    return "p=%.3f" % p_value


def fmt_comparison(comparison, mark="*"):
    key = comparison["metric"]
    parts = [fmt_number(key, comparison["delta"], sign=True)]
    if comparison["ci"] is not None:
        parts.append(fmt_interval(key, comparison["ci"]))
    if comparison["p_value"] is not None:
        parts.append(fmt_p(comparison["p_value"]))
    text = " ".join(parts)
    return text + " " + mark if comparison["significant"] else text


def display_width(text):
    """Terminal columns of a text (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def aligned(rows, right_from=1, left=()):
    """Rows of cells -> lines; the first `right_from` columns and those in
    `left` left-aligned, the others right-aligned, two spaces apart."""
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - display_width(cell))
            cells.append(cell + pad if i < right_from or i in left else pad + cell)
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def comparison_index(result):
    return {(c["run"], c["metric"]): c for c in result["comparisons"]}


def metric_keys(result):
    return list(result["runs"][0]["metrics"]) if result["runs"] else []


def intervals_line(result):
    if not result["bootstrap"]:
        return "no bootstrap (--bootstrap 0): no intervals or p-values"
    return ("%d paired bootstrap resamples (seed %s), %g%% percentile intervals"
            % (result["bootstrap"], result["seed"], 100 * result["confidence"]))


def rows_line(result):
    biggest = max(run["rows"] for run in result["runs"])
    return "%d rows paired by index_id (of %d)" % (result["rows"]["paired"], biggest)


def significance_legend(result, mark):
    return "%s marks p < %g, two-sided paired bootstrap" % (mark, alpha_of(result["confidence"]))


def format_text(result):
    keys, names = metric_keys(result), [run["name"] for run in result["runs"]]
    others = [name for name in names if name != result["baseline"]]
    lines = ["TransitLM comparison: %s (protocol: %s)" % (result["benchmark"],
                                                          result["protocol"]),
             "  baseline %s; %s" % (result["baseline"], rows_line(result)),
             "  " + intervals_line(result), ""]
    lines += aligned([["run", "rows", "signature"]]
                     + [[run["name"], str(run["rows"]), run["signature"] or "-"]
                        for run in result["runs"]], left=(2,))
    lines += ["", "Metrics (each run over all its rows%s)"
              % (", value [interval]" if result["bootstrap"] else "")]
    table = [["metric"] + names]
    for key in keys:
        table.append([metric_header(key)]
                     + [fmt_value_ci(key, run["metrics"][key]) for run in result["runs"]])
    lines += aligned(table)
    if others:
        index = comparison_index(result)
        lines += ["", "Differences from %s (paired rows; %s)"
                  % (result["baseline"], significance_legend(result, "*"))]
        table = [["metric"] + others]
        for key in keys:
            table.append([metric_header(key, delta=True)]
                         + [fmt_comparison(index[(name, key)]) for name in others])
        lines += aligned(table)
    for note in result["notes"]:
        lines += ["", "Note: " + note]
    lines += text_breakdowns(result, keys, names)
    return "\n".join(lines) + "\n"


def city_label(city):
    return "(no city)" if city is None else (city or "(empty)")


def text_breakdowns(result, keys, names):
    lines = []
    breakdowns = result["breakdowns"]
    if "city" in breakdowns:
        lines += ["", "By city (each run over its rows of the city)"]
        table = [["city", "run", "rows"] + [metric_header(k) for k in keys]]
        for entry in breakdowns["city"]:
            for name in names:
                figures = entry["metrics"][name]
                table.append([city_label(entry["city"]), name, str(entry["rows"][name])]
                             + [fmt_number(k, figures[k]) for k in keys])
        lines += aligned(table, right_from=2)
    if "req_type" in breakdowns:
        lines += ["", "By req_type (Round 5 compliance: compliant / samples)"]
        table = [["req", "preference"] + names]
        for entry in breakdowns["req_type"]:
            table.append([entry["req_type"], entry["name"]]
                         + [fmt_compliance(entry["runs"][name]) for name in names])
        lines += aligned(table, right_from=2)
    if "failure" in breakdowns:
        failure = breakdowns["failure"]
        lines += ["", "By failure stage (rows with a failure code of the stage)"]
        table = [["stage"] + names]
        for entry in failure["stages"]:
            table.append([entry["stage"]] + [fmt_share(entry["rows"][n], failure["rows"][n])
                                             for n in names])
        table.append(["(no failure)"] + [fmt_share(failure["passed"][n], failure["rows"][n])
                                         for n in names])
        lines += aligned(table)
        lines += ["", "By failure code (rows with the code)"]
        table = [["code"] + names]
        for entry in failure["codes"]:
            table.append([entry["code"]] + [fmt_share(entry["rows"][n], failure["rows"][n])
                                            for n in names])
        lines += aligned(table)
    return lines


def fmt_compliance(row):
    if not row["samples"]:
        return "-"
    return "%d/%d (%.1f%%)" % (row["compliant"], row["samples"], 100.0 * row["rate"])


def fmt_share(count, whole):
    return "%d (%.1f%%)" % (count, 100.0 * count / whole) if whole else str(count)


def md_cell(text):
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")


def md_table(rows, right_from=1):
    out = ["| " + " | ".join(rows[0]) + " |",
           "|" + "|".join("---" if i < right_from else "---:" for i in range(len(rows[0])))
           + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return out


def format_markdown(result):
    keys, names = metric_keys(result), [run["name"] for run in result["runs"]]
    others = [name for name in names if name != result["baseline"]]
    lines = ["**TransitLM comparison** — benchmark `%s`, protocol `%s`; baseline `%s`; %s; %s."
             % (result["benchmark"], result["protocol"], result["baseline"],
                rows_line(result), intervals_line(result)), ""]
    table = [["run", "rows"] + [md_cell(metric_header(k)) for k in keys]]
    for run in result["runs"]:
        table.append([md_cell(run["name"]), str(run["rows"])]
                     + [fmt_value_ci(k, run["metrics"][k]) for k in keys])
    lines += md_table(table, right_from=1)
    if others:
        index = comparison_index(result)
        lines += ["", "Differences from `%s` over the paired rows (**bold**: p < %g, "
                  "two-sided paired bootstrap):" % (result["baseline"],
                                                    alpha_of(result["confidence"])), ""]
        table = [["run"] + [md_cell(metric_header(k, delta=True)) for k in keys]]
        for name in others:
            cells = []
            for key in keys:
                comparison = index[(name, key)]
                text = fmt_comparison(comparison, mark="").strip()
                cells.append("**%s**" % text if comparison["significant"] else text)
            table.append([md_cell(name)] + cells)
        lines += md_table(table)
    for note in result["notes"]:
        lines += ["", "*Note:* " + md_cell(note)]
    breakdowns = result["breakdowns"]
    if "city" in breakdowns:
        lines += ["", "By city:", ""]
        table = [["city", "run", "rows"] + [md_cell(metric_header(k)) for k in keys]]
        for entry in breakdowns["city"]:
            for name in names:
                table.append([md_cell(city_label(entry["city"])), md_cell(name),
                              str(entry["rows"][name])]
                             + [fmt_number(k, entry["metrics"][name][k]) for k in keys])
        lines += md_table(table, right_from=2)
    if "req_type" in breakdowns:
        lines += ["", "Round 5 compliance by req_type (compliant / samples):", ""]
        table = [["req", "preference"] + [md_cell(n) for n in names]]
        for entry in breakdowns["req_type"]:
            table.append([entry["req_type"], entry["name"]]
                         + [fmt_compliance(entry["runs"][n]) for n in names])
        lines += md_table(table, right_from=2)
    if "failure" in breakdowns:
        failure = breakdowns["failure"]
        lines += ["", "Rows per failure stage and code:", ""]
        table = [["failure"] + [md_cell(n) for n in names]]
        for entry in failure["stages"]:
            table.append(["**%s**" % md_cell(entry["stage"])]
                         + [fmt_share(entry["rows"][n], failure["rows"][n]) for n in names])
        table.append(["(no failure)"] + [fmt_share(failure["passed"][n], failure["rows"][n])
                                         for n in names])
        for entry in failure["codes"]:
            table.append(["`%s`" % entry["code"].replace("`", "'")]
                         + [fmt_share(entry["rows"][n], failure["rows"][n]) for n in names])
        lines += md_table(table)
    return "\n".join(lines) + "\n"


LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def latex_escape(text):
    return "".join(LATEX_SPECIALS.get(ch, ch) for ch in text)


def best_values(result, keys):
    """Per metric the best value over the runs (max; min for MAPE), or None."""
    best = {}
    for key in keys:
        values = [run["metrics"][key]["value"] for run in result["runs"]
                  if run["metrics"][key]["value"] is not None]
        if values:
            pick = min if key in LOWER_IS_BETTER else max
            best[key] = round(scaled(key, pick(values)), decimals(key))
    return best


def format_latex(result):
    """booktabs tabular: runs as rows, metrics as columns, value +- half the
    width of its percentile interval, best printed value per column in bold,
    dagger on values significantly different from the baseline."""
    keys = metric_keys(result)
    index = comparison_index(result)
    best = best_values(result, keys)
    lines = ["% TransitLM comparison: " + latex_escape(result["benchmark"]) + ", protocol "
             + result["protocol"] + "; " + rows_line(result) + "; " + intervals_line(result),
             r"\begin{tabular}{l" + "r" * (len(keys) + 1) + "}", r"\toprule",
             " & ".join(["Run", "Rows"] + [latex_escape(metric_header(k)) for k in keys])
             + r" \\", r"\midrule"]
    for run in result["runs"]:
        cells = [latex_escape(run["name"]), str(run["rows"])]
        for key in keys:
            figure = run["metrics"][key]
            text = fmt_number(key, figure["value"])
            if figure["value"] is not None and \
                    round(scaled(key, figure["value"]), decimals(key)) == best.get(key):
                text = r"\textbf{%s}" % text
            comparison = index.get((run["name"], key))
            if comparison is not None and comparison["significant"]:
                text += r"$^\dagger$"
            if figure["ci"] is not None:
                half = (figure["ci"][1] - figure["ci"][0]) / 2.0
                text += r" {\scriptsize $\pm$%s}" % fmt_number(key, half)
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines.append(r"\bottomrule")
    notes = []
    if result["bootstrap"]:
        notes.append(r"$\pm$: half the width of the %g\%% percentile bootstrap interval."
                     % (100 * result["confidence"]))
    if len(result["runs"]) > 1:
        notes.append(r"$^\dagger$: differs from %s, p $<$ %g (two-sided paired bootstrap)."
                     % (latex_escape(result["baseline"]), alpha_of(result["confidence"])))
    notes += [latex_escape(note) + "." for note in result["notes"]]
    for note in notes:
        lines.append(r"\multicolumn{%d}{l}{\footnotesize %s} \\" % (len(keys) + 2, note))
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ("section", "group", "run", "metric", "value", "ci_low", "ci_high", "rows",
              "delta", "delta_ci_low", "delta_ci_high", "p_value", "significant",
              "paired_rows", "missing_rows")


def csv_number(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def csv_rows(result):
    """One row per run x metric (section "metrics"), then breakdown rows."""
    index = comparison_index(result)
    paired, missing = result["rows"]["paired"], result["rows"]["missing"]["count"]
    rows = []

    def add(section, group, run, metric, value, count, ci=None, comparison=None):
        row = {"section": section, "group": group, "run": run, "metric": metric,
               "value": csv_number(value), "rows": count,
               "ci_low": csv_number(ci[0]) if ci else "",
               "ci_high": csv_number(ci[1]) if ci else "",
               "paired_rows": paired, "missing_rows": missing}
        if comparison is not None:
            row.update(delta=csv_number(comparison["delta"]),
                       delta_ci_low=csv_number(comparison["ci"][0]) if comparison["ci"] else "",
                       delta_ci_high=csv_number(comparison["ci"][1]) if comparison["ci"] else "",
                       p_value=csv_number(comparison["p_value"]),
                       significant=csv_number(comparison["significant"]))
        rows.append(row)

    for run in result["runs"]:
        for key, figure in run["metrics"].items():
            add("metrics", "", run["name"], key, figure["value"], run["rows"], figure["ci"],
                index.get((run["name"], key)))
    breakdowns = result["breakdowns"]
    for entry in breakdowns.get("city", ()):
        for name, figures in entry["metrics"].items():
            for key, value in figures.items():
                add("city", city_label(entry["city"]), name, key, value, entry["rows"][name])
    for entry in breakdowns.get("req_type", ()):
        for name, row in entry["runs"].items():
            add("req_type", entry["req_type"], name, "pc", row["rate"], row["samples"])
    failure = breakdowns.get("failure")
    if failure:
        for entry in failure["stages"]:
            for name, count in entry["rows"].items():
                add("failure_stage", entry["stage"], name, "rows", count, failure["rows"][name])
        for entry in failure["codes"]:
            for name, count in entry["rows"].items():
                add("failure_code", entry["code"], name, "rows", count, failure["rows"][name])
    return rows


def format_csv(result):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(result):
        writer.writerow(row)
    return buffer.getvalue()


FORMATTERS = {"text": format_text, "markdown": format_markdown, "latex": format_latex,
              "csv": format_csv}


def result_json(result):
    return json.dumps(result, ensure_ascii=False, indent=1) + "\n"


# ---------------------------------------------------------------------------
# 7. Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="compare.py",
        description="Compare TransitLM evaluation runs: metrics with bootstrap intervals, "
                    "paired significance against a baseline, breakdowns.")
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run folder written with --out, or a details JSONL with its "
                             "report JSON beside it")
    parser.add_argument("--names", help="comma-separated run names (default: folder names)")
    parser.add_argument("--baseline", help="name of the baseline run (default: the first)")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES, metavar="N",
                        help="bootstrap resamples (default %(default)s; 0 = no intervals)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="random seed (default %(default)s)")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                        help="interval confidence level (default %(default)s)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="stdout format (default %(default)s)")
    parser.add_argument("--json", metavar="PATH", help="write the comparison as JSON")
    parser.add_argument("--html", metavar="PATH", help="write the comparison as an HTML page")
    parser.add_argument("--by", action="append", choices=BREAKDOWNS, default=[],
                        help="breakdown (repeatable)")
    return parser


def run_names(paths, names_option):
    if names_option is not None:
        names = [name.strip() for name in names_option.split(",")]
        if len(names) != len(paths):
            raise CompareError("--names gives %d name(s) for %d run(s)"
                               % (len(names), len(paths)))
        if any(not name for name in names):
            raise CompareError("--names has an empty name")
        if len(set(names)) != len(names):
            raise CompareError("--names repeats a name")
        return names
    names = [default_name(path) for path in paths]
    if len(set(names)) != len(names):
        names = [os.path.normpath(path) for path in paths]
    seen = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else "%s#%d" % (name, seen[name]))
    return unique


def default_name(path):
    path = os.path.normpath(path)
    if os.path.isdir(path):
        return os.path.basename(os.path.abspath(path))
    base = os.path.basename(path)
    return base[:-len(".jsonl")] if base.endswith(".jsonl") else os.path.splitext(base)[0]


def write_file(path, text):
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise CompareError("cannot write %s: %s" % (path, exc.strerror or exc))


def html_page(result):
    try:
        from transitlm.pages import comparison_page
    except ImportError:
        raise CompareError("--html needs the transitlm.pages package, which is not in this checkout")
    return comparison_page(result)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    # Nothing built here holds a reference cycle; the cyclic collector would
    # only re-scan the growing list of decoded rows (as in transitlm.cli.run).
    gc.disable()
    try:
        if args.bootstrap < 0:
            raise CompareError("--bootstrap must be 0 or more")
        if not 0.0 < args.confidence < 1.0:
            raise CompareError("--confidence must be between 0 and 1 (e.g. 0.95)")
        names = run_names(args.runs, args.names)
        baseline = names[0] if args.baseline is None else args.baseline
        if baseline not in names:
            raise CompareError("--baseline %s is not one of the runs (%s)"
                               % (baseline, ", ".join(names)))
        by = list(dict.fromkeys(args.by))
        needs = (("city",) if "city" in by else ()) + (
            ("failure_codes",) if "failure" in by else ())
        runs = [load_run(name, path, needs) for name, path in zip(names, args.runs)]
        if "failure" in by:
            for run in runs:
                check_failure_codes(run)
        result = compare_runs(runs, baseline, args.bootstrap, args.seed, args.confidence, by)
        page = html_page(result) if args.html else None
        if args.json:
            write_file(args.json, result_json(result))
        if args.html:
            write_file(args.html, page)
        sys.stdout.write(FORMATTERS[args.format](result))
        sys.stdout.flush()
    except CompareError as exc:
        sys.stderr.write("error: %s\n" % exc)
        return transitlm.status.EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    finally:
        gc.enable()
    return transitlm.status.EXIT_OK


if __name__ == "__main__":
    try:
        status = main()
    except BrokenPipeError:
        sys.stderr.close()
        status = transitlm.status.EXIT_OK
    sys.exit(status)
