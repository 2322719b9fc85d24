"""The breakdowns of a comparison (compare.py --by): every metric per city,
Round 5 compliance per preference type, rows per failure stage and code.

Standard library only; Python 3.8+.
"""

from transitlm.compare import bootstrap as resampling
from transitlm.compare.metric_terms import aggregate, json_value

BREAKDOWNS = ("city", "req_type", "failure")


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
                "rate": resampling.ratio(row["compliant"], row["samples"])}
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
