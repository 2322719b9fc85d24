"""The page of a comparison (compare.py --html): metric charts with intervals,
the runs, differences against the baseline and breakdowns.
"""

import math
from transitlm.pages.layout import (
    METRICS, METRIC_INFO, html_table, esc, fmt_delta, fmt_metric, fmt_value, n, page)


# ---------------------------------------------------------------------------
# Comparison page
# ---------------------------------------------------------------------------

def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _interval(ci):
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(v) is not None
                                                               for v in ci):
        return float(ci[0]), float(ci[1])
    return None


def metric_chart(metric, runs):
    """Bars of one metric per run with CI whiskers, labelled with the values."""
    entries = []
    for run in runs:
        item = (run.get("metrics") or {}).get(metric) or {}
        entries.append((str(run.get("name")), _number(item.get("value")),
                        _interval(item.get("ci"))))
    highs = [abs(v) for _, v, _ in entries if v is not None]
    highs += [max(abs(ci[0]), abs(ci[1])) for _, _, ci in entries if ci]
    top = max(highs + [1e-12])
    kind = METRIC_INFO.get(metric, ("", "frac", ""))[1]
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
        part = ('<text class="lbl" x="%d" y="%s">%s</text><rect class="bar" x="%d" y="%d" '
                'width="%s" height="%d" />' % (label_w - 8, n(y + row_h * 0.7), esc(name),
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
        parts.append("<g><title>%s: %s</title>%s</g>" % (esc(name), esc(text), part))
    height = max(len(entries) * (row_h + gap), row_h)
    label = METRIC_INFO.get(metric, (metric, "", ""))[0]
    return ('<figure class="mchart"><figcaption>%s</figcaption><svg class="chart" '
            'viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s per run">%s'
            '</svg></figure>' % (esc(label), width, height, width, height, esc(label),
                                 "".join(parts)))


def _metric_order(runs):
    seen = []
    for run in runs:
        for key in (run.get("metrics") or {}):
            if key not in seen:
                seen.append(key)
    known = [key for key, _, _, _ in METRICS if key in seen]
    return known + sorted(key for key in seen if key not in known)


def breakdown_html(value, depth=0):
    """A generic rendering of the comparison's breakdowns: tables where the
    shape allows (dict of dicts of scalars, list of dicts), else nested lists."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()) \
            and all(not isinstance(x, (dict, list)) for v in value.values() for x in v.values()):
        columns = []
        for item in value.values():
            for key in item:
                if key not in columns:
                    columns.append(key)
        return html_table([""] + columns, [[key] + [item.get(c) for c in columns]
                                       for key, item in value.items()])
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) \
            and all(not isinstance(x, (dict, list)) for v in value for x in v.values()):
        columns = []
        for item in value:
            for key in item:
                if key not in columns:
                    columns.append(key)
        return html_table(columns, [[item.get(c) for c in columns] for item in value])
    if isinstance(value, dict):
        level = min(3 + depth, 6)
        return "".join("<h%d>%s</h%d>%s" % (level, esc(key), level,
                                            breakdown_html(item, depth + 1))
                       for key, item in value.items())
    return "<p>%s</p>" % esc(fmt_value(value))


def comparison_page(result):
    """The HTML page of compare.py's --json result: runs side by side."""
    runs = [run for run in result.get("runs") or [] if isinstance(run, dict)]
    metrics = _metric_order(runs)
    rows_info = result.get("rows") or {}
    out = ['<header><h1>TransitLM run comparison</h1>',
           '<p class="sub">baseline <b>%s</b> \u00b7 confidence %s \u00b7 bootstrap %s '
           'resamples \u00b7 seed %s \u00b7 paired rows %s \u00b7 missing rows %s</p>'
           % (esc(result.get("baseline")), esc(fmt_value(result.get("confidence"))),
              esc(fmt_value(result.get("bootstrap"))), esc(fmt_value(result.get("seed"))),
              esc(fmt_value(rows_info.get("paired"))), esc(fmt_value(rows_info.get("missing")))),
           html_table(["run", "benchmark", "protocol", "rows", "signature", "path"],
                  [[run.get("name"), run.get("benchmark"), run.get("protocol"),
                    run.get("rows"), run.get("signature"), run.get("path")] for run in runs]),
           "</header>"]
    table_rows = []
    for metric in metrics:
        row = [METRIC_INFO.get(metric, (metric,))[0]]
        for run in runs:
            item = (run.get("metrics") or {}).get(metric) or {}
            text = fmt_metric(metric, _number(item.get("value")))
            ci = _interval(item.get("ci"))
            if ci:
                text += " [%s, %s]" % (fmt_metric(metric, ci[0]), fmt_metric(metric, ci[1]))
            row.append(text)
        table_rows.append(row)
    out.append('<section id="metrics"><h2>Metrics</h2><p class="note">Value with its %s '
               'bootstrap interval in brackets.</p>%s' % (
                   esc(fmt_value(result.get("confidence"))),
                   html_table(["metric"] + [str(run.get("name")) for run in runs], table_rows)))
    out.append('<h3>Per metric</h3><p class="note">Bars: the value; whiskers: the interval.'
               '</p>')
    out.extend(metric_chart(metric, runs) for metric in metrics)
    out.append("</section>")
    comparisons = [c for c in result.get("comparisons") or [] if isinstance(c, dict)]
    out.append('<section id="significance"><h2>Differences from the baseline</h2>%s</section>'
               % (html_table(["run", "metric", "difference", "interval", "p-value", "significant"],
                         [[c.get("run"), METRIC_INFO.get(c.get("metric"),
                                                         (c.get("metric"),))[0],
                           fmt_delta(c.get("metric"), _number(c.get("delta"))),
                           ("[%s, %s]" % tuple(fmt_delta(c.get("metric"), v)
                                               for v in _interval(c.get("ci"))))
                           if _interval(c.get("ci")) else "-",
                           "%.4f" % c["p_value"] if _number(c.get("p_value")) is not None
                           else "-",
                           "yes" if c.get("significant") else "no"] for c in comparisons])
                  if comparisons else "<p>No comparisons.</p>"))
    breakdowns = result.get("breakdowns")
    if breakdowns:
        out.append('<section id="breakdowns"><h2>Breakdowns</h2>%s</section>'
                   % breakdown_html(breakdowns))
    return page("TransitLM run comparison", "".join(out))
