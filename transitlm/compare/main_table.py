"""The main table of a paper (issue 24): a row per model, a column group per
benchmark and protocol with its metrics, each cell the value with its
interval, its difference from the baseline model and whether that is
significant, and the best value per column marked.

Built from the groups of a comparison (transitlm.compare.group_figures.compare_group);
formatted by compare_formats, compare_latex and pages.comparison.

Standard library only; Python 3.8+.
"""

from transitlm.evaluation.catalog import LOWER_IS_BETTER, benchmark_info
from transitlm.compare.metric_terms import shown_value


def short_title(benchmark):
    """A benchmark's column-group title ("Benchmark 1: single route")."""
    info = benchmark_info(benchmark)
    return info.short_title if info else benchmark


def group_title(benchmark, protocol, protocols_of_benchmark):
    title = short_title(benchmark)
    if protocols_of_benchmark > 1:
        title += " (%s)" % protocol
    return title


def _metric_keys(group):
    runs = group.get("runs") or []
    return list(runs[0]["metrics"]) if runs else []


def main_table(groups, models, baseline, confidence):
    """-> {"baseline", "confidence", "columns": [...], "rows": [...]}; see
    docs/comparison.md ("JSON")."""
    protocol_count = {}
    for group in groups:
        protocol_count[group["benchmark"]] = protocol_count.get(group["benchmark"], 0) + 1
    columns = []
    for group in groups:
        columns.append({"benchmark": group["benchmark"], "protocol": group["protocol"],
                        "title": group_title(group["benchmark"], group["protocol"],
                                             protocol_count[group["benchmark"]]),
                        "metrics": _metric_keys(group), "signature": group["signature"],
                        "baseline": group["baseline"]})
    rows = [{"model": model, "cells": []} for model in models]
    for group, column in zip(groups, columns):
        by_name = {run["name"]: run for run in group["runs"]}
        index = {(c["run"], c["metric"]): c for c in group["comparisons"]}
        best = {}
        for key in column["metrics"]:
            values = [shown_value(key, run["metrics"][key]["value"]) for run in group["runs"]]
            values = [value for value in values if value is not None]
            if values:
                best[key] = (min if key in LOWER_IS_BETTER else max)(values)
        for row in rows:
            run = by_name.get(row["model"])
            if run is None:
                row["cells"].append(None)
                continue
            cell = {"run": run["name"], "rows": run["rows"], "metrics": {}}
            for key in column["metrics"]:
                figure = run["metrics"][key]
                comparison = index.get((run["name"], key))
                value = shown_value(key, figure["value"])
                cell["metrics"][key] = {
                    "value": figure["value"], "ci": figure["ci"],
                    "delta": comparison["delta"] if comparison else None,
                    "p_value": comparison["p_value"] if comparison else None,
                    "significant": bool(comparison and comparison["significant"]),
                    "best": value is not None and value == best.get(key)}
            row["cells"].append(cell)
    return {"baseline": baseline, "confidence": confidence, "columns": columns, "rows": rows}
