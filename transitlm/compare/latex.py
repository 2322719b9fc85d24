"""compare.py --format latex: booktabs tabulars -- the main table (several
benchmark groups), each group's runs table, and every breakdown asked for
(city, req_type, failure) as a table of its own.

Each value is followed by +- half the width of its percentile interval; the
best printed value of a column is bold (lowest for MAPE); a dagger marks a
value that differs significantly from the baseline.  Notes are rows under a
table; the signature is a comment line under it (for the record, not the
reader).  The text is UTF-8: Chinese city names need a Unicode engine
(XeLaTeX, LuaLaTeX) or CJKutf8.

Standard library only; Python 3.8+.
"""

from transitlm.compare.formats import (
    city_label, comparison_index, fmt_compliance, fmt_number, fmt_share, group_baseline,
    group_title, intervals_line, metric_header, metric_keys, one_line, rows_line)
from transitlm.compare.group_figures import alpha_of
from transitlm.evaluation.catalog import LOWER_IS_BETTER
from transitlm.compare.metric_terms import shown_value
from transitlm.compare.groups import groups_of
from transitlm.compare.comparability import comparable_signature
from transitlm.io.terminal import printable

LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def latex_escape(text):
    """Text for LaTeX: specials escaped, "--" kept as two hyphens (not a dash)."""
    text = "".join(LATEX_SPECIALS.get(ch, ch) for ch in one_line(text))
    while "--" in text:
        text = text.replace("--", "-{}-")
    return text


def comment(text):
    """A LaTeX comment line (a newline in the text cannot end it early)."""
    return "% " + one_line(text)


def best_values(runs, keys):
    """Per metric the best printed value over the runs (max; min for MAPE)."""
    best = {}
    for key in keys:
        values = [shown_value(key, run["metrics"][key]["value"]) for run in runs]
        values = [value for value in values if value is not None]
        if values:
            best[key] = (min if key in LOWER_IS_BETTER else max)(values)
    return best


def latex_value(key, figure, best, significant, stacked=False):
    """value (bold when best), dagger when significant, +- half the interval
    after it, or under it (``stacked``: a cell as narrow as its value)."""
    text = fmt_number(key, figure["value"])
    if best:
        text = r"\textbf{%s}" % text
    if significant:
        text += r"$^\dagger$"
    if figure["ci"] is not None:
        half = r"{\scriptsize $\pm$%s}" % fmt_number(key,
                                                  (figure["ci"][1] - figure["ci"][0]) / 2.0)
        if stacked:
            return r"\begin{tabular}[t]{@{}r@{}}%s\\%s\end{tabular}" % (text, half)
        text += " " + half
    return text


def note_rows(notes, width):
    return [r"\multicolumn{%d}{l}{\footnotesize %s} \\" % (width, note) for note in notes]


def tabular(spec, header_lines, body, notes=(), width=1, after=()):
    return ([r"\begin{tabular}{%s}" % spec, r"\toprule"] + header_lines + [r"\midrule"]
            + body + [r"\bottomrule"] + note_rows(notes, width) + [r"\end{tabular}"]
            + list(after))


def format_latex(result):
    groups = groups_of(result)
    lines = []
    if len(groups) > 1:
        lines += latex_main_table(result) + [""]
    for group in groups:
        if lines:
            lines.append("")
        lines += latex_group(result, group)
    return printable("\n".join(lines) + "\n")


def latex_main_table(result):
    """The main table as one tabular of stacked blocks, one per benchmark
    group (its title, its metric names, a row per model), so that it is as
    wide as one group whatever the number of groups: it fits a landscape A4
    page (the page's main table is laid out the same way)."""
    table = result["main_table"]
    columns = table["columns"]
    width = 1 + max([len(column["metrics"]) for column in columns] + [1])
    body = []
    for index, column in enumerate(columns):
        if index:
            body.append(r"\midrule")
        body.append(r"\multicolumn{%d}{l}{\textbf{%s}} \\"
                    % (width, latex_escape(column["title"])))
        body.append(" & ".join(["Model"] + [latex_escape(metric_header(key))
                                            for key in column["metrics"]]) + r" \\")
        body.append(r"\cmidrule(lr){2-%d}" % (1 + len(column["metrics"])))
        for row in table["rows"]:
            cell = row["cells"][index]
            cells = [latex_escape(row["model"])]
            for key in column["metrics"]:
                if cell is None:
                    cells.append("")
                else:
                    figure = cell["metrics"][key]
                    cells.append(latex_value(key, figure, figure["best"], figure["significant"],
                                             stacked=True))
            body.append(" & ".join(cells) + r" \\")
    notes = legend_notes(result, table["baseline"], bool(table["rows"]))
    notes += [latex_escape(note) + "." for note in result["notes"]]
    after = [comment("signature (%s, protocol %s): %s"
                     % (column["title"], column["protocol"],
                        column["signature"] or "differs between the runs"))
             for column in columns]
    # The notes follow as a paragraph, which wraps at the line width (a row
    # of the table would widen it to the longest note).
    lines = ([r"\begin{tabular}{%s}" % ("l" + "r" * (width - 1)), r"\toprule"] + body
             + [r"\bottomrule", r"\end{tabular}"]
             + ([r"\par\smallskip{\footnotesize %s\par}" % r" \\ ".join(notes)] if notes else [])
             + after)
    return [comment("TransitLM main table: %d benchmark groups, a block each; %s"
                    % (len(columns), intervals_line(result)))] + lines


def legend_notes(result, baseline, several):
    notes = []
    if result["bootstrap"]:
        notes.append(r"$\pm$: half the width of the %g\%% percentile bootstrap interval."
                     % (100 * result["confidence"]))
        if several and baseline is not None:
            notes.append(r"$^\dagger$: differs from %s, p $<$ %g (two-sided paired bootstrap)."
                         % (latex_escape(baseline), alpha_of(result["confidence"])))
    return notes


def latex_group(result, group):
    """The group's runs table (runs as rows, metrics as columns), then its
    breakdown tables."""
    keys = metric_keys(group)
    index = comparison_index(group)
    best = best_values(group["runs"], keys)
    with_model = any(run.get("model") for run in group["runs"])
    head = ["Run"] + (["Model"] if with_model else []) + ["Rows"]
    width = len(head) + len(keys)
    header = [" & ".join(head + [latex_escape(metric_header(k)) for k in keys]) + r" \\"]
    body = []
    for run in group["runs"]:
        cells = [latex_escape(run["name"])]
        if with_model:
            cells.append(latex_escape(run.get("model") or "-"))
        cells.append(str(run["rows"]))
        for key in keys:
            figure = run["metrics"][key]
            comparison = index.get((run["name"], key))
            cells.append(latex_value(key, figure,
                                     shown_value(key, figure["value"]) is not None
                                     and shown_value(key, figure["value"]) == best.get(key),
                                     comparison is not None and comparison["significant"]))
        body.append(" & ".join(cells) + r" \\")
    baseline = group_baseline(result, group)
    notes = legend_notes(result, baseline, len(group["runs"]) > 1)
    notes += [latex_escape(note) + "." for note in group["notes"]]
    if group["signature"] is not None:
        after = [comment("signature: " + group["signature"])]
    else:
        after = [comment("signatures differ between the runs:")]
        after += [comment("  %s: %s" % (run["name"],
                                        comparable_signature(run["signature"]) or "none"))
                  for run in group["runs"]]
    lines = [comment("TransitLM comparison: %s, protocol %s; %s; %s"
                     % (group_title(group), group["protocol"], rows_line(group),
                        intervals_line(result)))]
    lines += tabular("l" * (len(head) - 1) + "r" * (len(keys) + 1), header, body, notes,
                     width, after)
    lines += latex_breakdowns(group, keys)
    return lines


def latex_breakdowns(group, keys):
    names = [run["name"] for run in group["runs"]]
    breakdowns = group["breakdowns"]
    lines = []
    if "city" in breakdowns:
        header = [" & ".join(["City", "Run", "Rows"]
                             + [latex_escape(metric_header(k)) for k in keys]) + r" \\"]
        body = []
        for number, entry in enumerate(breakdowns["city"]):
            if number:
                body.append(r"\addlinespace")
            for position, name in enumerate(names):
                figures = entry["metrics"][name]
                body.append(" & ".join(
                    [latex_escape(city_label(entry["city"])) if position == 0 else "",
                     latex_escape(name), str(entry["rows"][name])]
                    + [fmt_number(k, figures[k]) for k in keys]) + r" \\")
        lines += ["", comment("By city (each run over its rows of the city)")]
        lines += tabular("ll" + "r" * (len(keys) + 1), header, body)
    if "req_type" in breakdowns:
        header = [" & ".join(["Req", "Preference"] + [latex_escape(n) for n in names])
                  + r" \\"]
        body = [" & ".join([latex_escape(entry["req_type"]), latex_escape(entry["name"])]
                           + [latex_escape(fmt_compliance(entry["runs"][n])) for n in names])
                + r" \\" for entry in breakdowns["req_type"]]
        lines += ["", comment("Round 5 compliance by req_type (compliant / samples)")]
        lines += tabular("ll" + "r" * len(names), header, body)
    if "failure" in breakdowns:
        failure = breakdowns["failure"]
        header = [" & ".join(["Failure"] + [latex_escape(n) for n in names]) + r" \\"]

        def shares(rows):
            return [latex_escape(fmt_share(rows[n], failure["rows"][n])) for n in names]

        body = [" & ".join([r"\textbf{%s}" % latex_escape(entry["stage"])]
                           + shares(entry["rows"])) + r" \\" for entry in failure["stages"]]
        body.append(" & ".join(["(no failure)"] + shares(failure["passed"])) + r" \\")
        if failure["codes"]:
            body.append(r"\midrule")
        body += [" & ".join([r"\texttt{%s}" % latex_escape(entry["code"])]
                            + shares(entry["rows"])) + r" \\" for entry in failure["codes"]]
        lines += ["", comment("Rows per failure stage, then per failure code")]
        lines += tabular("l" + "r" * len(names), header, body)
    return lines
