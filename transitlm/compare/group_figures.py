"""The figures of a comparison (compare.py) of runs of one benchmark and
protocol: rows paired by id, every run resampled on the same draws, each
run's values and intervals, and the differences from the baseline with their
paired p-values (a group of the --json result).

Standard library only; Python 3.8+.
"""

from transitlm.compare import bootstrap as resampling
from transitlm.compare.breakdowns import city_breakdown, failure_breakdown, req_type_breakdown
from transitlm.compare.metric_terms import aggregate, json_value, metric_names, run_metrics, term_columns
from transitlm.compare.run_folders import CompareError
from transitlm.compare.comparability import comparability_notes, shared_signature

SCHEMA_VERSION = 2
DEFAULT_SEED = 12345
DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
FIRST_IDS_SHOWN = 5


def pair_rows(runs):
    """-> (paired keys in the first run's order, missing report).

    A row is paired when its id is in every run; each id is paired once, by
    its first row in every run (key (index_id, 0)): a later row repeating an
    id is left out of the paired statistics (repeated_rows; a note says so),
    so a test file that holds its rows twice is not paired twice.  Ids not
    in every run are reported per run that lacks them, with their count and
    first ids.
    """
    common_keys = {key for key in runs[0].keys if not key[1]}
    for run in runs[1:]:
        common_keys &= set(run.by_key)
    paired = [key for key in runs[0].keys if key in common_keys]
    union = []
    seen = set()
    for run in runs:
        for key in run.keys:
            if not key[1] and key not in seen:
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


def repeated_rows(run):
    """(rows of ``run`` that repeat an earlier row's id, the first such ids)."""
    keys = [key for key in run.keys if key[1]]
    return len(keys), [key[0] for key in keys[:FIRST_IDS_SHOWN]]


def resampled_metrics(columns_by_series, n, resamples, seed):
    """Bootstrap each series' ratio of sums over the same resampled rows.

    columns_by_series: list of (numerator column, denominator column) over n rows.
    -> list per series of the resampled ratios (None where undefined).
    """
    columns = []
    for numerators, denominators in columns_by_series:
        columns.extend((numerators, denominators))
    sums = resampling.bootstrap_column_sums(columns, n, resamples, seed)
    out = []
    for index in range(len(columns_by_series)):
        out.append([resampling.ratio(row[2 * index], row[2 * index + 1]) for row in sums])
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


def compare_group(runs, baseline, resamples, seed, confidence, by=(), allow_different=False):
    """The comparison of runs of one benchmark and protocol: the group dict of
    the --json result (docs/comparison.md).  `baseline` is the name of one of
    the runs, or None (no differences).  CompareError when the runs were scored
    on different input files and `allow_different` is false."""
    first = runs[0]
    for run in runs[1:]:
        if (run.benchmark, run.protocol) != (first.benchmark, first.protocol):
            raise ValueError("compare_group takes runs of one benchmark and protocol")
    input_notes, refusal = comparability_notes(runs, allow_different)
    if refusal:
        raise CompareError("%s (protocol %s): %s" % (first.benchmark, first.protocol, refusal))
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
    all_paired = all(len(run.keys) == len(paired) for run in runs)
    if resamples:
        paired_set = set(paired)
        for run in runs:
            if all_paired:
                own_samples.update({k: v for k, v in paired_samples.items() if k[0] == run.name})
            else:
                extra = [key for key in run.keys if key not in paired_set]
                own_samples.update(bootstrap_runs([run], [paired + extra], metrics,
                                                  resamples, seed))

    run_entries = []
    for run in runs:
        entry = {"name": run.name, "model": run.model, "path": run.path,
                 "benchmark": run.benchmark, "protocol": run.protocol,
                 "signature": run.report.get("signature"), "rows": len(run.records),
                 "metrics": {}}
        for key in metrics:
            ci = (resampling.percentile_interval(own_samples[(run.name, key)], confidence)
                  if resamples else None)
            entry["metrics"][key] = {"value": values[run.name].get(key), "ci": ci}
        run_entries.append(entry)

    comparisons = comparison_entries(runs, baseline, metrics, values, paired, all_paired,
                                     paired_samples, resamples, confidence)
    notes = input_notes + comparison_notes(runs, paired, missing)
    if baseline is None:
        notes.append("no run of this benchmark is the baseline: no differences")
    group = {"benchmark": first.benchmark, "protocol": first.protocol, "baseline": baseline,
             "signature": shared_signature(runs),
             "rows": {"paired": len(paired), "missing": missing},
             "runs": run_entries, "comparisons": comparisons, "notes": notes,
             "breakdowns": {}}
    if "city" in by:
        group["breakdowns"]["city"] = city_breakdown(runs, metrics)
    if "req_type" in by and first.benchmark == "personalized":
        group["breakdowns"]["req_type"] = req_type_breakdown(runs, folded)
    if "failure" in by:
        group["breakdowns"]["failure"] = failure_breakdown(runs)
    return group


def comparison_entries(runs, baseline, metrics, values, paired, all_paired, samples,
                       resamples, confidence):
    if baseline is None:
        return []
    base = next(run for run in runs if run.name == baseline)
    if not all_paired:
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
                ci = resampling.percentile_interval(deltas, confidence)
                p_value = resampling.paired_p_value(deltas)
            out.append({"run": run.name, "metric": key, "delta": delta, "ci": ci,
                        "p_value": p_value,
                        "significant": p_value is not None and p_value < alpha_of(confidence)})
    return out


def short_id(index_id, limit=40):
    """An index_id in a note, cut to about `limit` characters."""
    text = "null" if index_id is None else str(index_id)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def comparison_notes(runs, paired, missing):
    notes = []
    if missing["count"]:
        notes.append("%d row(s) are missing from some runs (first ids: %s) and are left out "
                     "of the paired statistics (%d rows paired); each run's value and "
                     "interval are over all its rows, a difference and its interval over the "
                     "paired rows only, so a difference may differ from the difference of the "
                     "values shown"
                     % (missing["count"], ", ".join(short_id(i) for i in missing["first_ids"]),
                        len(paired)))
        for name, lack in missing["runs"].items():
            notes.append("%s lacks %d row(s) (first ids: %s)"
                         % (name, lack["count"],
                            ", ".join(short_id(i) for i in lack["first_ids"])))
    for run in runs:
        count, first_ids = repeated_rows(run)
        if count:
            notes.append("%s has %d row(s) repeating an earlier row's index_id (first ids: %s): "
                         "each id is paired once, by its first row, and the repeats are left "
                         "out of the paired statistics (%d rows paired); the run's value and "
                         "interval are over all its rows, as its report's"
                         % (run.name, count, ", ".join(short_id(i) for i in first_ids),
                            len(paired)))
    return notes

