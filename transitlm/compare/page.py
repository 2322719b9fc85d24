"""The page of a comparison (compare.py --html): a header in words, the main
table (runs of several benchmarks), and per benchmark group the runs, the
metrics with their intervals (bars and whiskers), the differences from the
baseline and every breakdown as a table.

The page takes compare.py's --json result (a dict; a damaged or hand-made
one is drawn as far as it goes, never as raw JSON).  Everything fits a
window of 900 pixels or more: long names, paths and signatures wrap, and a
table wider than the window scrolls in its own box.  Text from the result
(names, paths, notes, cities, codes) is isolated like the evaluator page's
(transitlm.pages.layout.bdi).  Its own CSS is COMPARISON_CSS, added after
the shared CSS of transitlm.pages.static.
"""

import math

from transitlm.compare.formats import fmt_p
from transitlm.evaluation.catalog import METRIC, METRIC_KEYS, benchmark_info
from transitlm.compare.main_table import short_title
from transitlm.pages.layout import (
    bdi, cut_text, esc, fmt_delta, fmt_metric, fmt_value, isolated, n, page, table_box)

# The comparison page's own CSS (kept apart from the evaluator page's, in static.py).
COMPARISON_CSS = """
/* comparison page */
.cmp .name,.cmp td code{overflow-wrap:anywhere}
.cmp table.main td:first-child,.cmp table.data td:first-child{min-width:9em}
.cmp table.data td.num,.cmp table.data th.num{text-align:right}
.cmp table.data td small,.cmp table.main td small{display:block;color:#4b535c;font-size:11px;
 white-space:nowrap}
.cmp .lead{margin:6px 0;max-width:980px}
.cmp code.sig{display:block;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-all;
 background:#f6f8fa;padding:4px 8px;border-radius:4px;margin:4px 0 10px}
table.main{border-collapse:collapse;margin:8px 0 4px;font-size:13px;max-width:100%}
table.main th,table.main td{padding:3px 8px;border-bottom:1px solid #e1e4e8;text-align:right;
 vertical-align:top;font-variant-numeric:tabular-nums}
table.main th:first-child,table.main td:first-child{text-align:left}
table.main tr.group th{background:#f3f4f6;text-align:left;font-size:13.5px;
 border-top:2px solid #8c959f}
table.main tr.mnames th{font-weight:600;color:#3d444d}
table.main td.best b{color:#0b4f8a}
table.main td.empty{background:#fafafa}
.mark{color:#a31515;font-weight:600}
svg .whisker{fill:none;stroke:#1f2328;stroke-width:1.6}
svg .whisker-end{fill:none;stroke:#1f2328;stroke-width:1.6}
svg.share{width:60px;height:8px;margin-left:6px;vertical-align:middle}
svg.share .track{fill:#eef1f4}svg.share .fill{fill:#2f6f9f}
svg.share.stage-error .fill{fill:#8a3b3b}
section.group{margin-top:26px;border-top:3px solid #d0d7de;padding-top:4px}
.notes{background:#fff8e1;border:1px solid #c9a227;padding:6px 12px;margin:8px 0;
 border-radius:4px}.notes ul{margin:4px 0;padding-left:20px}
.notes.bad{background:#fdecea;border-color:#a31515}
"""



# ---------------------------------------------------------------------------
# Reading a (possibly damaged) result
# ---------------------------------------------------------------------------

def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _interval(ci):
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(v) is not None
                                                               for v in ci):
        return float(ci[0]), float(ci[1])
    return None


def _dict(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _dicts(value):
    return [item for item in _list(value) if isinstance(item, dict)]


def _text(value, default="-"):
    if value is None or isinstance(value, (dict, list)):
        return default
    return fmt_value(value)


def _name(value):
    """A name from a file (run, model, city, code): isolated, may wrap anywhere."""
    return '<bdi class="name">%s</bdi>' % esc(_text(value))


def _metric_label(key):
    return METRIC[key].label if key in METRIC else str(key)


def _metric_order(runs):
    seen = []
    for run in runs:
        for key in _dict(run.get("metrics")):
            if key not in seen:
                seen.append(key)
    known = [key for key in METRIC_KEYS if key in seen]
    return known + sorted((key for key in seen if key not in known), key=str)


def _value_ci(metric, item, small=True):
    """'84.2%' with its interval (on its own small line, or in brackets)."""
    item = _dict(item)
    text = esc(fmt_metric(metric, _number(item.get("value"))))
    ci = _interval(item.get("ci"))
    if ci:
        interval = "[%s, %s]" % (fmt_metric(metric, ci[0]), fmt_metric(metric, ci[1]))
        text += "<small>%s</small>" % esc(interval) if small else " " + esc(interval)
    return text


def _p_text(value):
    p_value = _number(value)
    return fmt_p(p_value) if p_value is not None else "-"


def _table(headers, rows, css="data", numeric_from=1, text_columns=()):
    """A table of already-escaped cells; columns from `numeric_from` (but not
    those in `text_columns`) right-aligned."""
    head = "".join('<th class="num">%s</th>' % h if index >= numeric_from
                   and index not in text_columns else "<th>%s</th>" % h
                   for index, h in enumerate(headers))
    body = "".join("<tr>%s</tr>" % "".join(
        '<td class="num">%s</td>' % cell if index >= numeric_from and index not in text_columns
        else "<td>%s</td>" % cell for index, cell in enumerate(row)) for row in rows)
    return table_box('<table class="%s"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>'
                     % (css, head, body))


def _notes(notes, css="notes"):
    notes = [note for note in _list(notes) if isinstance(note, str)]
    if not notes:
        return ""
    bad = any(note.startswith("NOT COMPARABLE") for note in notes)
    return '<div class="%s%s"><b>Notes</b><ul>%s</ul></div>' % (
        css, " bad" if bad else "", "".join("<li>%s</li>" % bdi(note) for note in notes))


# ---------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------

def _intervals_words(result):
    resamples = _number(result.get("bootstrap"))
    if not resamples:
        return "No bootstrap: values only, without intervals or p-values."
    confidence = _number(result.get("confidence"))
    return ("%d paired bootstrap resamples (seed %s); %s percentile intervals; a difference "
            "is significant when p < %s (two-sided paired bootstrap)."
            % (resamples, _text(result.get("seed")),
               "%g%%" % (100 * confidence) if confidence else "-",
               "%g" % round(1 - confidence, 12) if confidence else "-"))


def _rows_words(group):
    """The group's paired and missing rows in words, as HTML (ids isolated)."""
    rows = _dict(group.get("rows"))
    paired = _number(rows.get("paired"))
    missing = rows.get("missing")
    count = _number(_dict(missing).get("count")) if isinstance(missing, dict) \
        else _number(missing)
    sizes = [_number(run.get("rows")) for run in _dicts(group.get("runs"))]
    sizes = [size for size in sizes if size is not None]
    words = []
    if paired is not None:
        words.append("%d rows paired by index_id%s" % (
            paired, " (of %d)" % max(sizes) if sizes else ""))
    if count:
        ids = [bdi(_text(i)) for i in _list(_dict(missing).get("first_ids"))]
        words.append("%d missing from some runs%s" % (
            count, " (first ids: %s)" % ", ".join(ids) if ids else ""))
    elif count == 0:
        words.append("none missing")
    return ", ".join(words)


def _group_title(group):
    first = (_dicts(group.get("runs")) or [{}])[0]
    benchmark = group.get("benchmark", first.get("benchmark"))
    title = (short_title(benchmark) if benchmark_info(benchmark)
             else _text(benchmark, "unknown benchmark")) \
        if isinstance(benchmark, str) or benchmark is None else "unknown benchmark"
    protocol = group.get("protocol", first.get("protocol"))
    if isinstance(protocol, str):
        title += ", protocol %s" % protocol
    return title


def _header(result, groups):
    out = ['<header><h1>TransitLM run comparison</h1>']
    baseline = bdi(_text(result.get("baseline")))
    if len(groups) == 1:
        group = groups[0]
        runs = _dicts(group.get("runs"))
        rows = _rows_words(group)
        out.append('<p class="lead">%s: %d run%s compared with the baseline <b>%s</b>%s.</p>'
                   % (bdi(_group_title(group)), len(runs), "" if len(runs) == 1 else "s",
                      baseline, "; " + rows if rows else ""))
    else:
        table = _dict(result.get("main_table"))
        models = len(_list(table.get("rows")))
        out.append('<p class="lead">%d benchmark groups, %d model%s, compared with the '
                   'baseline model <b>%s</b>. The main table puts them side by side; each '
                   'group follows with its runs, differences and breakdowns.</p>'
                   % (len(groups), models, "" if models == 1 else "s", baseline))
    out.append('<p class="lead">%s</p></header>' % bdi(_intervals_words(result)))
    return "".join(out)


# ---------------------------------------------------------------------------
# Main table
# ---------------------------------------------------------------------------

def main_table_html(result):
    """One table: per benchmark group a band (its title, its metric names, a
    row per model), so that it fits the page; best value bold, a dagger for
    a significant difference from the baseline, empty cells for a model
    without a run of the benchmark."""
    table = _dict(result.get("main_table"))
    columns = _dicts(table.get("columns"))
    rows = _dicts(table.get("rows"))
    if not columns or not rows:
        return ""
    width = 1 + max(len(_list(column.get("metrics"))) for column in columns)
    bands = []
    for index, column in enumerate(columns):
        metrics = [key for key in _list(column.get("metrics")) if isinstance(key, str)]
        band = ['<tr class="group"><th colspan="%d">%s</th></tr>'
                % (width, bdi(_text(column.get("title"), _group_title(column)))),
                '<tr class="mnames"><th>model</th>%s%s</tr>'
                % ("".join("<th>%s</th>" % esc(_metric_label(key)) for key in metrics),
                   "<th></th>" * (width - 1 - len(metrics)))]
        for row in rows:
            cells = _list(row.get("cells"))
            cell = cells[index] if index < len(cells) and isinstance(cells[index], dict) \
                else None
            parts = ["<td>%s</td>" % _name(row.get("model"))]
            for key in metrics:
                if cell is None:
                    parts.append('<td class="empty"></td>')
                    continue
                figure = _dict(_dict(cell.get("metrics")).get(key))
                value = esc(fmt_metric(key, _number(figure.get("value"))))
                if figure.get("best") is True:
                    value = "<b>%s</b>" % value
                if figure.get("significant") is True:
                    value += '<span class="mark" title="differs from the baseline">\u2020</span>'
                ci = _interval(figure.get("ci"))
                if ci:
                    value += "<small>[%s, %s]</small>" % (esc(fmt_metric(key, ci[0])),
                                                          esc(fmt_metric(key, ci[1])))
                parts.append('<td class="%s">%s</td>' % ("best" if figure.get("best") is True
                                                         else "num", value))
            parts.append("<td></td>" * (width - 1 - len(metrics)))
            band.append("<tr>%s</tr>" % "".join(parts))
        bands.append("<tbody>%s</tbody>" % "".join(band))
    legend = ("Each cell: the value, its interval below. <b>Bold</b>: the best value of the "
              "column (lowest for MAPE). \u2020: differs from the baseline <b>%s</b> "
              "(p below the significance level). Empty: no run of the model."
              % bdi(_text(table.get("baseline"))))
    signatures = "".join(
        '<p class="note">%s:</p><code class="sig">%s</code>'
        % (bdi(_text(column.get("title"), "group")), bdi(column["signature"]))
        if isinstance(column.get("signature"), str) else
        '<p class="note">%s: the runs\' signatures differ (listed with the group below).</p>'
        % bdi(_text(column.get("title"), "group"))
        for column in columns)
    return ('<section id="main"><h2>Main table</h2><p class="note">%s</p>'
            '%s<h3>Signatures</h3>%s</section>'
            % (legend, table_box('<table class="main">%s</table>' % "".join(bands)),
               signatures))


# ---------------------------------------------------------------------------
# A group
# ---------------------------------------------------------------------------

def metric_chart(metric, runs):
    """Bars of one metric per run with interval whiskers, labelled with the values."""
    entries = []
    for run in runs:
        item = _dict(_dict(run.get("metrics")).get(metric))
        entries.append((_text(run.get("name")), _number(item.get("value")),
                        _interval(item.get("ci"))))
    highs = [abs(v) for _, v, _ in entries if v is not None]
    highs += [max(abs(ci[0]), abs(ci[1])) for _, _, ci in entries if ci]
    top = max(highs + [1e-12])
    kind = METRIC[metric].kind if metric in METRIC else "mean"
    if kind == "rate":
        top = max(top, 1.0) if top > 0.5 else top
    label_w, value_w, width, row_h, gap = 200, 260, 760, 22, 8
    area = width - label_w - value_w
    parts = []
    for index, (name, value, ci) in enumerate(entries):
        y = index * (row_h + gap)
        text = fmt_metric(metric, value)
        if ci:
            text += " [%s, %s]" % (fmt_metric(metric, ci[0]), fmt_metric(metric, ci[1]))
        length = area * max(value, 0) / top if value is not None else 0
        label = cut_text(name, 24)
        part = ('<text class="lbl" x="%d" y="%s">%s</text><rect class="bar" x="%d" y="%d" '
                'width="%s" height="%d" />' % (label_w - 8, n(y + row_h * 0.7), isolated(label),
                                               label_w, y, n(length), row_h))
        end = length
        if ci:
            lo = label_w + area * max(ci[0], 0) / top
            hi = label_w + area * max(ci[1], 0) / top
            mid = y + row_h / 2.0
            part += ('<path class="whisker" d="M%s %sH%sM%s %sV%sM%s %sV%s" />'
                     % (n(lo), n(mid), n(hi), n(lo), n(mid - 6), n(mid + 6), n(hi), n(mid - 6),
                        n(mid + 6)))
            end = max(end, hi - label_w)
        part += '<text class="val" x="%s" y="%s">%s</text>' % (n(label_w + end + 8),
                                                               n(y + row_h * 0.7), esc(text))
        parts.append("<g><title>%s: %s</title>%s</g>" % (isolated(name), esc(text), part))
    height = max(len(entries) * (row_h + gap), row_h)
    label = _metric_label(metric)
    return ('<figure class="mchart"><figcaption>%s</figcaption><svg class="chart" '
            'viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s per run">%s'
            '</svg></figure>' % (esc(label), width, height, width, height, esc(label),
                                 "".join(parts)))


def _runs_table(runs):
    rows = []
    for run in runs:
        path = run.get("path")
        rows.append([_name(run.get("name")), _name(run.get("model")),
                     esc(_text(run.get("rows"))),
                     "<code>%s</code>" % bdi(path) if isinstance(path, str) else "-"])
    return _table(["run", "model", "rows", "path"], rows, numeric_from=2, text_columns=(3,))


def _signature_html(group, runs):
    signature = group.get("signature")
    if isinstance(signature, str):
        return ('<p class="note">Signature (what makes these figures comparable: version, '
                'benchmark, protocol, field, rows and the input files\' hashes):</p>'
                '<code class="sig">%s</code>' % bdi(signature))
    items = []
    for run in runs:
        text = run.get("signature")
        if isinstance(text, str):
            text = "|".join(part for part in text.split("|")
                            if not part.startswith("predictions:"))
        items.append('<p class="note">%s:</p><code class="sig">%s</code>'
                     % (bdi(_text(run.get("name"))),
                        bdi(text) if isinstance(text, str) else "none recorded"))
    return '<p class="note">The runs\' signatures differ:</p>' + "".join(items) if items else ""


def group_html(result, group, several, number=1):
    runs = _dicts(group.get("runs"))
    names = [_text(run.get("name")) for run in runs]
    metrics = _metric_order(runs)
    out = []
    if several:
        out.append('<section class="group cmp" id="group-%d"><h2>%s</h2><p class="lead">'
                   'Baseline <b>%s</b>%s.</p>' % (number, bdi(_group_title(group)),
                                bdi(_text(group.get("baseline"), "none")),
                                "; " + _rows_words(group) if _rows_words(group) else ""))
    else:
        out.append('<section class="group cmp" id="group-%d">' % number)
    out.append("<h3>Runs</h3>" + _runs_table(runs))
    out.append(_notes(group.get("notes")))
    rows = [[esc(_metric_label(metric))]
            + [_value_ci(metric, _dict(run.get("metrics")).get(metric)) for run in runs]
            for metric in metrics]
    out.append('<h3>Metrics</h3><p class="note">Each run over all its rows: the value, its '
               'bootstrap interval below.</p>%s'
               % _table(["metric"] + [_name(name) for name in names], rows))
    if metrics:
        out.append('<h3>Per metric</h3><p class="note">Bars: the value; whiskers: the '
                   'interval.</p>')
        out.extend(metric_chart(metric, runs) for metric in metrics)
    comparisons = _dicts(group.get("comparisons"))
    if comparisons:
        rows = []
        for c in comparisons:
            metric = c.get("metric")
            ci = _interval(c.get("ci"))
            rows.append([_name(c.get("run")), esc(_metric_label(metric)),
                         esc(fmt_delta(metric, _number(c.get("delta")))),
                         esc("[%s, %s]" % (fmt_delta(metric, ci[0]), fmt_delta(metric, ci[1])))
                         if ci else "-", esc(_p_text(c.get("p_value"))),
                         "<b>yes</b>" if c.get("significant") is True else "no"])
        out.append('<h3>Differences from the baseline</h3><p class="note">Over the paired '
                   'rows: run minus baseline, its paired bootstrap interval and p-value.</p>%s'
                   % _table(["run", "metric", "difference", "interval", "p-value",
                             "significant"], rows, numeric_from=2))
    else:
        out.append("<h3>Differences from the baseline</h3><p>No comparisons.</p>")
    breakdowns = group.get("breakdowns")
    if isinstance(breakdowns, dict) and breakdowns:
        out.append('<div class="breakdowns"><h3>Breakdowns</h3>%s</div>'
                   % breakdowns_html(breakdowns, names, metrics))
    out.append(_signature_html(group, runs))
    out.append("</section>")
    return "".join(out)


# ---------------------------------------------------------------------------
# Breakdowns
# ---------------------------------------------------------------------------

def _share_cell(count, whole, css=""):
    count, whole = _number(count), _number(whole)
    if count is None:
        return "-"
    if not whole:
        return esc("%d" % count)
    share = 100.0 * count / whole
    return ('%s<svg class="share %s" viewBox="0 0 100 8" preserveAspectRatio="none" '
            'role="img" aria-label="%.1f%%"><rect class="track" width="100" height="8" />'
            '<rect class="fill" width="%.1f" height="8" /></svg>'
            % (esc("%d (%.1f%%)" % (count, share)), esc(css), share,
               max(0.0, min(share, 100.0))))


def breakdowns_html(breakdowns, names, metrics):
    out = []
    for key, value in breakdowns.items():
        if key == "city" and _dicts(value) and all("city" in e for e in _dicts(value)):
            out.append(_city_html(_dicts(value), names, metrics))
        elif key == "req_type" and _dicts(value) and all("runs" in e for e in _dicts(value)):
            out.append(_req_type_html(_dicts(value), names))
        elif key == "failure" and isinstance(value, dict) and "stages" in value:
            out.append(_failure_html(value, names))
        else:
            out.append("<h4>By %s</h4>%s" % (bdi(key), generic_html(value)))
    return "".join(out)


def _city_html(entries, names, metrics):
    rows = []
    for entry in entries:
        city = entry.get("city")
        label = "(no city)" if city is None else (_text(city) or "(empty)")
        for position, name in enumerate(names):
            figures = _dict(_dict(entry.get("metrics")).get(name))
            rows.append([_name(label) if position == 0 else "", _name(name),
                         esc(_text(_dict(entry.get("rows")).get(name)))]
                        + [esc(fmt_metric(key, _number(figures.get(key)))) for key in metrics])
    return ('<h4>By city</h4><p class="note">Each run over its rows of the city.</p>%s'
            % _table(["city", "run", "rows"] + [esc(_metric_label(k)) for k in metrics], rows,
                     numeric_from=2))


def _req_type_html(entries, names):
    rows = []
    for entry in entries:
        cells = [bdi(_text(entry.get("req_type"))), bdi(_text(entry.get("name")))]
        for name in names:
            run = _dict(_dict(entry.get("runs")).get(name))
            samples, compliant = _number(run.get("samples")), _number(run.get("compliant"))
            cells.append(_share_cell(compliant, samples) if samples else "-")
        rows.append(cells)
    return ('<h4>By req_type</h4><p class="note">Round 5 preference compliance: compliant '
            'rows of the type (share of its rows).</p>%s'
            % _table(["req", "preference"] + [_name(name) for name in names], rows,
                     numeric_from=2))


def _failure_html(failure, names):
    totals = _dict(failure.get("rows"))
    rows = []
    for entry in _dicts(failure.get("stages")):
        stage = _text(entry.get("stage"))
        rows.append(["<b>%s</b>" % bdi(stage)]
                    + [_share_cell(_dict(entry.get("rows")).get(n), totals.get(n),
                                   "stage-error" if stage == "error" else "") for n in names])
    rows.append(["(no failure)"] + [_share_cell(_dict(failure.get("passed")).get(n),
                                                totals.get(n)) for n in names])
    stage_table = _table(["stage"] + [_name(n) for n in names], rows)
    rows = [["<code>%s</code>" % bdi(_text(entry.get("code")))]
            + [_share_cell(_dict(entry.get("rows")).get(n), totals.get(n)) for n in names]
            for entry in _dicts(failure.get("codes"))]
    code_table = _table(["code"] + [_name(n) for n in names], rows) if rows else \
        "<p>No failure codes.</p>"
    return ('<h4>By failure stage</h4><p class="note">Rows with a failure code of the stage '
            '(share of the run\'s rows).</p>%s<h4>By failure code</h4>%s'
            % (stage_table, code_table))


def generic_html(value, depth=0):
    """A breakdown of a shape this page does not know: tables where the shape
    allows (an object of objects, a list of objects), nested headings else;
    scalars as text, never as JSON."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        columns = []
        for item in value.values():
            for key in item:
                if key not in columns:
                    columns.append(key)
        return _table([""] + [bdi(c) for c in columns],
                      [[bdi(key)] + [_cell_html(item.get(c), depth) for c in columns]
                       for key, item in value.items()])
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        columns = []
        for item in value:
            for key in item:
                if key not in columns:
                    columns.append(key)
        return _table([bdi(c) for c in columns],
                      [[_cell_html(item.get(c), depth) for c in columns] for item in value],
                      numeric_from=len(columns))
    if isinstance(value, dict):
        level = min(4 + depth, 6)
        return "".join("<h%d>%s</h%d>%s" % (level, bdi(key), level, generic_html(item, depth + 1))
                       for key, item in value.items())
    if isinstance(value, list):
        return "<ul>%s</ul>" % "".join("<li>%s</li>" % _cell_html(item, depth)
                                       for item in value)
    return "<p>%s</p>" % bdi(_text(value))


def _cell_html(value, depth):
    if isinstance(value, (dict, list)):
        if depth >= 4:
            return "\u2026"
        return generic_html(value, depth + 1)
    return bdi(_text(value))


# ---------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------

def comparison_page(result):
    """The HTML page of compare.py's --json result."""
    result = _dict(result)
    groups = _dicts(result.get("groups")) if isinstance(result.get("groups"), list) \
        else [result]
    several = len(groups) > 1
    out = [_header(result, groups)]
    if several:
        out.append(_notes(result.get("notes")))
        out.append(main_table_html(result))
    out.extend(group_html(result, group, several, number)
               for number, group in enumerate(groups, 1))
    return page("TransitLM run comparison", '<div class="cmp">%s</div>' % "".join(out),
                COMPARISON_CSS)
