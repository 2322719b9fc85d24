"""The output formats of a comparison (compare.py --format): aligned text,
Markdown pipe tables and CSV rows (LaTeX: compare_latex), and the JSON text;
the cell formats they share.

Every text that comes from a file (run and model names, signatures, cities,
failure codes, ids) is escaped for the terminal and kept on one line
(transitlm.io.terminal.one_line: control characters, bidirectional-text
controls, lone surrogates, line breaks and tabs as backslash escapes), and
for its medium: Markdown cells and notes show HTML and link syntax as text
(``md_cell``), a CSV cell a spreadsheet would take for a formula gets a
leading apostrophe (``csv_cell``), JSON holds no raw line separator
(``transitlm.evaluation.reports.line_safe_json``).

Standard library only; Python 3.8+.
"""

import csv
import io
import json
import re
import unicodedata

from transitlm.compare.group_figures import alpha_of
from transitlm.evaluation.catalog import METRIC, benchmark_info
from transitlm.compare.main_table import short_title
from transitlm.compare.metric_terms import decimals, scaled
from transitlm.compare.groups import groups_of
from transitlm.compare.comparability import comparable_signature
from transitlm.evaluation.reports import line_safe_json
from transitlm.io.terminal import one_line, printable

FORMATS = ("text", "markdown", "latex", "csv")

BEST_MARK_TEXT = "^"


# ---------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------

def metric_header(key, delta=False):
    metric = METRIC[key]
    if metric.kind in ("rate", "pct"):
        return metric.label + (" pp" if delta else " %")
    return metric.label


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
    """p<0.001 below 0.0005 (the resolution of the bootstrap), else p=0.123."""
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
    rows = [[one_line(cell) for cell in row] for row in rows]
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - display_width(cell))
            cells.append(cell + pad if i < right_from or i in left else pad + cell)
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def comparison_index(group):
    return {(c["run"], c["metric"]): c for c in group["comparisons"]}


def metric_keys(group):
    return list(group["runs"][0]["metrics"]) if group["runs"] else []


def intervals_line(result):
    if not result["bootstrap"]:
        return "no bootstrap (--bootstrap 0): no intervals or p-values"
    return ("%d paired bootstrap resamples (seed %s), %g%% percentile intervals"
            % (result["bootstrap"], result["seed"], 100 * result["confidence"]))


def rows_line(group):
    biggest = max(run["rows"] for run in group["runs"])
    return "%d rows paired by index_id (of %d)" % (group["rows"]["paired"], biggest)


def significance_legend(result, mark):
    return "%s marks p < %g, two-sided paired bootstrap" % (mark, alpha_of(result["confidence"]))


def group_baseline(result, group):
    """The group's baseline run name, or None (the baseline model has no run here)."""
    return group["baseline"] if "baseline" in group and group is not result \
        else result["baseline"]


def group_title(group):
    return short_title(group["benchmark"])


def group_tag(column, columns):
    """B1, B2, B3, GL; with the protocol when a benchmark has two groups."""
    info = benchmark_info(column["benchmark"])
    tag = info.tag if info else column["benchmark"]
    if sum(1 for c in columns if c["benchmark"] == column["benchmark"]) > 1:
        tag += "/" + column["protocol"]
    return tag


def signature_lines(group):
    """["signature: ..."] when the runs share one; else one line per run."""
    if group["signature"] is not None:
        return ["signature: " + one_line(group["signature"])]
    lines = ["signatures differ between the runs:"]
    for run in group["runs"]:
        signature = comparable_signature(run["signature"])
        lines.append("  %s: %s" % (one_line(run["name"]),
                                   one_line(signature) if signature else "(none recorded)"))
    return lines


def city_label(city):
    return "(no city)" if city is None else (city or "(empty)")


def fmt_compliance(row):
    if not row["samples"]:
        return "-"
    return "%d/%d (%.1f%%)" % (row["compliant"], row["samples"], 100.0 * row["rate"])


def fmt_share(count, whole):
    return "%d (%.1f%%)" % (count, 100.0 * count / whole) if whole else str(count)


def main_cell_text(key, figure, significant_mark, best_mark=None, with_ci=True):
    """A main-table cell: value, interval, significance mark (and best mark)."""
    text = fmt_number(key, figure["value"])
    if best_mark and figure["best"]:
        text = best_mark(text)
    if with_ci and figure["ci"] is not None:
        text += " " + fmt_interval(key, figure["ci"])
    if figure["significant"]:
        text += significant_mark
    return text


def main_legend(result, mark, best, escape=one_line):
    table = result["main_table"]
    parts = ["value [%g%% interval]" % (100 * result["confidence"])
             if result["bootstrap"] else "value"]
    if result["bootstrap"]:
        parts.append("%s: differs from %s, p < %g (two-sided paired bootstrap)"
                     % (mark, escape(table["baseline"]), alpha_of(result["confidence"])))
    parts.append("%s: the best value of the column (lowest for MAPE)" % best)
    parts.append("empty: no run of the model")
    return "; ".join(parts)


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

def format_text(result):
    groups = groups_of(result)
    if len(groups) == 1:
        lines = ["TransitLM comparison: %s (protocol: %s)" % (result["benchmark"],
                                                              result["protocol"]),
                 "  baseline %s; %s" % (one_line(result["baseline"]), rows_line(result)),
                 "  " + intervals_line(result), ""]
        lines += text_group(result, result)
        return printable("\n".join(lines) + "\n")
    table = result["main_table"]
    lines = ["TransitLM comparison: %d benchmark groups, %d models; baseline %s"
             % (len(groups), len(table["rows"]), one_line(result["baseline"])),
             "  " + intervals_line(result), ""]
    lines += text_main_table(result)
    for note in result["notes"]:
        lines += ["", "Note: " + one_line(note)]
    for group in groups:
        lines += ["", "=" * 78,
                  "%s (protocol: %s); baseline %s; %s"
                  % (group_title(group), group["protocol"],
                     one_line(group["baseline"] or "none"), rows_line(group)), ""]
        lines += text_group(result, group)
    return printable("\n".join(lines) + "\n")


def text_main_table(result):
    """The main table turned for a terminal: a row per benchmark and metric, a
    column per model."""
    table = result["main_table"]
    lines = ["Main table (%s)" % main_legend(result, "*", BEST_MARK_TEXT)]
    rows = [["benchmark", "metric"] + [row["model"] for row in table["rows"]]]
    for index, column in enumerate(table["columns"]):
        for number, key in enumerate(column["metrics"]):
            cells = []
            for row in table["rows"]:
                cell = row["cells"][index]
                cells.append("" if cell is None else main_cell_text(
                    key, cell["metrics"][key], " *", lambda text: text + BEST_MARK_TEXT))
            rows.append([group_tag(column, table["columns"]) if number == 0 else "",
                         metric_header(key)] + cells)
    lines += aligned(rows, right_from=2)
    lines += [""] + ["%s = %s (protocol %s); %s"
                     % (group_tag(column, table["columns"]), column["title"],
                        column["protocol"],
                        "signature: " + one_line(column["signature"])
                        if column["signature"] else "signatures differ between the runs")
                     for column in table["columns"]]
    return lines


def text_group(result, group):
    keys, names = metric_keys(group), [run["name"] for run in group["runs"]]
    baseline = group_baseline(result, group)
    others = [name for name in names if name != baseline] if baseline is not None else []
    lines = aligned([["run", "model", "rows"]]
                    + [[run["name"], run.get("model") or "-", str(run["rows"])]
                       for run in group["runs"]], right_from=2)
    lines += ["", "Metrics (each run over all its rows%s)"
              % (", value [interval]" if result["bootstrap"] else "")]
    table = [["metric"] + names]
    for key in keys:
        table.append([metric_header(key)]
                     + [fmt_value_ci(key, run["metrics"][key]) for run in group["runs"]])
    lines += aligned(table)
    if others:
        index = comparison_index(group)
        lines += ["", "Differences from %s (paired rows; %s)"
                  % (one_line(baseline), significance_legend(result, "*"))]
        table = [["metric"] + others]
        for key in keys:
            table.append([metric_header(key, delta=True)]
                         + [fmt_comparison(index[(name, key)]) for name in others])
        lines += aligned(table)
    for note in group["notes"]:
        lines += ["", "Note: " + one_line(note)]
    lines += text_breakdowns(group, keys, names)
    lines += [""] + signature_lines(group)
    return lines


def text_breakdowns(group, keys, names):
    lines = []
    breakdowns = group["breakdowns"]
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


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------

# Markdown: the punctuation that starts emphasis, code, links, images and
# table cells is backslash-escaped (an underscore only where it could start
# or end emphasis: not between two letters or digits, as in model_a); <, >
# and & become entities, so raw HTML (<img onerror=...>), autolinks
# (<javascript:...>) and entities are text.
_MD_ESCAPED_RE = re.compile(r"([\\`*\[\]|~]|_(?![^\W_])|(?<![^\W_])_)")
_MD_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


def md_cell(text):
    """Text from a file for a Markdown table cell or note: shown as written,
    never markup."""
    text = one_line(text)
    for char, entity in _MD_ENTITIES:
        text = text.replace(char, entity)
    return _MD_ESCAPED_RE.sub(r"\\\1", text)


def md_code(text, in_table=False):
    """Text as a code span (no markup is read inside one); a backtick, which
    would end it, becomes '; in a table a pipe is escaped (GitHub's tables
    split cells before they read code spans)."""
    text = one_line(text).replace("`", "'")
    return "`%s`" % (text.replace("|", "\\|") if in_table else text)


def md_table(rows, right_from=1):
    out = ["| " + " | ".join(rows[0]) + " |",
           "|" + "|".join("---" if i < right_from else "---:" for i in range(len(rows[0])))
           + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return out


def format_markdown(result):
    groups = groups_of(result)
    if len(groups) == 1:
        lines = ["**TransitLM comparison** — benchmark `%s`, protocol `%s`; baseline %s; %s; %s."
                 % (result["benchmark"], result["protocol"], md_code(result["baseline"]),
                    rows_line(result), intervals_line(result)), ""]
        lines += markdown_group(result, result)
        return printable("\n".join(lines) + "\n")
    lines = ["**TransitLM comparison** — %d benchmark groups, %d models; baseline %s; %s."
             % (len(groups), len(result["main_table"]["rows"]), md_code(result["baseline"]),
                intervals_line(result)), ""]
    lines += markdown_main_table(result)
    for note in result["notes"]:
        lines += ["", "*Note:* " + md_cell(note)]
    for group in groups:
        lines += ["", "### %s (protocol `%s`)" % (group_title(group), group["protocol"]), "",
                  "Baseline %s; %s." % (md_code(group["baseline"] or "none"), rows_line(group)),
                  ""]
        lines += markdown_group(result, group)
    return printable("\n".join(lines) + "\n")


def markdown_main_table(result):
    table = result["main_table"]
    columns = table["columns"]
    header = ["model"]
    for column in columns:
        tag = group_tag(column, columns)
        header += ["%s %s" % (tag, md_cell(metric_header(key))) for key in column["metrics"]]
    rows = [header]
    for row in table["rows"]:
        cells = [md_cell(row["model"])]
        for index, column in enumerate(columns):
            cell = row["cells"][index]
            for key in column["metrics"]:
                cells.append("" if cell is None else main_cell_text(
                    key, cell["metrics"][key], "†", lambda text: "**%s**" % text))
        rows.append(cells)
    lines = ["Main table (%s):" % main_legend(result, "†", "**bold**", md_code), ""]
    lines += md_table(rows)
    lines += [""] + ["- %s = %s (protocol `%s`): %s"
                     % (group_tag(column, columns), column["title"], column["protocol"],
                        "signature " + md_code(column["signature"]) if column["signature"]
                        else "signatures differ between the runs")
                     for column in columns]
    return lines


def markdown_group(result, group):
    keys, names = metric_keys(group), [run["name"] for run in group["runs"]]
    baseline = group_baseline(result, group)
    others = [name for name in names if name != baseline] if baseline is not None else []
    table = [["run", "model", "rows"] + [md_cell(metric_header(k)) for k in keys]]
    for run in group["runs"]:
        table.append([md_cell(run["name"]), md_cell(run.get("model") or "-"), str(run["rows"])]
                     + [fmt_value_ci(k, run["metrics"][k]) for k in keys])
    lines = md_table(table, right_from=2)
    if others:
        index = comparison_index(group)
        lines += ["", "Differences from %s over the paired rows (**bold**: p < %g, "
                  "two-sided paired bootstrap):" % (md_code(baseline),
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
    for note in group["notes"]:
        lines += ["", "*Note:* " + md_cell(note)]
    lines += markdown_breakdowns(group, keys, names)
    lines += [""] + (["Signature: " + md_code(group["signature"])]
                     if group["signature"] is not None else
                     ["Signatures differ between the runs:", ""]
                     + ["- %s: %s" % (md_cell(run["name"]),
                                      md_code(comparable_signature(run["signature"]) or "none"))
                        for run in group["runs"]])
    return lines


def markdown_breakdowns(group, keys, names):
    lines = []
    breakdowns = group["breakdowns"]
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
            table.append([md_cell(entry["req_type"]), md_cell(entry["name"])]
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
            table.append([md_code(entry["code"], in_table=True)]
                         + [fmt_share(entry["rows"][n], failure["rows"][n]) for n in names])
        lines += md_table(table)
    return lines


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------

CSV_FIELDS = ("section", "benchmark", "protocol", "group", "run", "model", "metric", "value",
              "ci_low", "ci_high", "rows", "delta", "delta_ci_low", "delta_ci_high",
              "p_value", "significant", "best", "paired_rows", "missing_rows")


# CSV injection (OWASP): a spreadsheet takes a cell beginning with one of
# these for a formula (=HYPERLINK(...), +cmd|..., -2+3, @SUM(...)), also
# after leading spaces, and in the full-width forms some spreadsheets read
# as the same; tab and carriage return start a formula in some importers.
FORMULA_STARTS = "=+-@\t\r\uff1d\uff0b\uff0d\uff20"
# A plain decimal number is a value in every spreadsheet, not a formula.
_CSV_NUMBER_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def csv_cell(text):
    """Text for a CSV cell: on one line (one_line), and with a leading
    apostrophe when a spreadsheet would evaluate it (OWASP's advice), unless
    it is a plain number (-0.05 stays a number)."""
    text = one_line(text)
    stripped = text.lstrip()
    if stripped[:1] and stripped[0] in FORMULA_STARTS and not _CSV_NUMBER_RE.match(text):
        return "'" + text
    return text


def csv_number(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def csv_rows(result):
    """Per group: one row per run x metric (section "metrics"), breakdown rows,
    notes and the signature; then the main table (several groups) and the
    comparison's own notes."""
    rows = []
    groups = groups_of(result)
    for group in groups:
        rows += csv_group_rows(group)
    if len(groups) > 1:
        table = result["main_table"]
        for index, column in enumerate(table["columns"]):
            for row in table["rows"]:
                cell = row["cells"][index]
                if cell is None:
                    continue
                for key in column["metrics"]:
                    figure = cell["metrics"][key]
                    ci = figure["ci"]
                    rows.append({"section": "main", "benchmark": column["benchmark"],
                                 "protocol": column["protocol"], "run": cell["run"],
                                 "model": row["model"], "metric": key,
                                 "value": csv_number(figure["value"]),
                                 "ci_low": csv_number(ci[0]) if ci else "",
                                 "ci_high": csv_number(ci[1]) if ci else "",
                                 "rows": cell["rows"], "delta": csv_number(figure["delta"]),
                                 "p_value": csv_number(figure["p_value"]),
                                 "significant": csv_number(figure["significant"]),
                                 "best": csv_number(figure["best"])})
        for note in result["notes"]:
            rows.append({"section": "note", "group": note})
    return [{key: csv_cell(value) if isinstance(value, str) else value
             for key, value in row.items()} for row in rows]


def csv_group_rows(group):
    index = comparison_index(group)
    paired, missing = group["rows"]["paired"], group["rows"]["missing"]["count"]
    models = {run["name"]: run.get("model") or "" for run in group["runs"]}
    rows = []

    def add(section, name, metric, value, count, label="", ci=None, comparison=None):
        row = {"section": section, "benchmark": group["benchmark"],
               "protocol": group["protocol"], "group": label, "run": name,
               "model": models.get(name, ""), "metric": metric, "value": csv_number(value),
               "rows": count, "ci_low": csv_number(ci[0]) if ci else "",
               "ci_high": csv_number(ci[1]) if ci else "",
               "paired_rows": paired, "missing_rows": missing}
        if comparison is not None:
            row.update(delta=csv_number(comparison["delta"]),
                       delta_ci_low=csv_number(comparison["ci"][0]) if comparison["ci"] else "",
                       delta_ci_high=csv_number(comparison["ci"][1]) if comparison["ci"] else "",
                       p_value=csv_number(comparison["p_value"]),
                       significant=csv_number(comparison["significant"]))
        rows.append(row)

    for run in group["runs"]:
        for key, figure in run["metrics"].items():
            add("metrics", run["name"], key, figure["value"], run["rows"], ci=figure["ci"],
                comparison=index.get((run["name"], key)))
    breakdowns = group["breakdowns"]
    for entry in breakdowns.get("city", ()):
        for name, figures in entry["metrics"].items():
            for key, value in figures.items():
                add("city", name, key, value, entry["rows"][name], city_label(entry["city"]))
    for entry in breakdowns.get("req_type", ()):
        for name, row in entry["runs"].items():
            add("req_type", name, "pc", row["rate"], row["samples"], entry["req_type"])
    failure = breakdowns.get("failure")
    if failure:
        for entry in failure["stages"]:
            for name, count in entry["rows"].items():
                add("failure_stage", name, "rows", count, failure["rows"][name], entry["stage"])
        for name, count in failure["passed"].items():
            add("failure_stage", name, "rows", count, failure["rows"][name], "(no failure)")
        for entry in failure["codes"]:
            for name, count in entry["rows"].items():
                add("failure_code", name, "rows", count, failure["rows"][name], entry["code"])
    for note in group["notes"]:
        rows.append({"section": "note", "benchmark": group["benchmark"],
                     "protocol": group["protocol"], "group": note})
    if group["signature"] is not None:
        rows.append({"section": "signature", "benchmark": group["benchmark"],
                     "protocol": group["protocol"], "group": group["signature"]})
    else:
        for run in group["runs"]:
            rows.append({"section": "signature", "benchmark": group["benchmark"],
                         "protocol": group["protocol"], "run": run["name"],
                         "group": comparable_signature(run["signature"]) or ""})
    return rows


def format_csv(result):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(result):
        writer.writerow(row)
    return printable(buffer.getvalue())


def result_json(result):
    return line_safe_json(json.dumps(result, ensure_ascii=False, indent=1)) + "\n"
