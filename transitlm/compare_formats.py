"""The output formats of a comparison (compare.py --format): aligned text,
Markdown pipe tables, a LaTeX booktabs tabular, CSV rows, and the JSON text.

Standard library only; Python 3.8+.
"""

import csv
import io
import json
import unicodedata

from transitlm.comparison import alpha_of
from transitlm.metric_terms import LOWER_IS_BETTER, METRIC_KIND, METRIC_LABEL

FORMATS = ("text", "markdown", "latex", "csv")


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
