"""What every page shares: escaping and number formats, tables, bar charts and
the page shell (``page``), and writing a page to a file.
"""

import html
import json
import math
import re
from transitlm.catalog import METRIC
from transitlm.pages.static import CSS, SCRIPT


TEXT_COLOUR = "#1f2328"


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(value):
    """Text safe to write as UTF-8 HTML: lone surrogates and control
    characters (ANSI escapes) shown as backslash escapes."""
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL_RE.sub(lambda match: "\\x%02x" % ord(match.group()), text)


def esc(value):
    """Escaped text for HTML content and quoted attributes; None -> empty."""
    if value is None:
        return ""
    return html.escape(clean_text(value), quote=True)


def fmt_count_pct(part, whole):
    """'32 (84.2%)'; '32' when there is no base."""
    if not whole:
        return "%d" % part
    return "%d (%.1f%%)" % (part, 100.0 * part / whole)


def metric_kind(key):
    """A metric's kind (transitlm.catalog.Metric); "mean" for an unknown key."""
    return METRIC[key].kind if key in METRIC else "mean"


def fmt_metric(key, value):
    """A metric value the way the summary line shows it; '-' for null."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return METRIC[key].text(value) if key in METRIC else "%.3f" % value


def fmt_delta(key, value):
    """A metric difference: percentage points for rates."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    kind = metric_kind(key)
    if kind == "rate":
        return "%+.1f pp" % (100.0 * value)
    if kind == "pct":
        return "%+.2f pp" % value
    return "%+.3f" % value


def fmt_value(value):
    """A scalar of the data as short text."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "%.4g" % value if math.isfinite(value) else "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def n(value):
    """A coordinate for SVG (one decimal)."""
    return "%.1f" % value


# ---------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------

def bar_chart(bars, width=760, label_width=250, value_width=230, aria="bar chart"):
    """Horizontal bars with text labels.

    bars: dicts {label, count, scale_max, text, css?, href?, indent?}; the
    bar length is count / scale_max of the bar area.
    """
    row_h, gap = 24, 6
    area = width - label_width - value_width
    parts = []
    for index, bar in enumerate(bars):
        y = index * (row_h + gap)
        length = area * bar["count"] / bar["scale_max"] if bar["scale_max"] else 0
        indent = 14 if bar.get("indent") else 0
        item = ('<text class="lbl" x="%d" y="%s">%s</text>'
                '<rect class="bar %s" x="%d" y="%d" width="%s" height="%d" />'
                '<text class="val" x="%s" y="%s">%s</text>'
                % (label_width - 8, n(y + row_h * 0.68), esc(bar["label"]),
                   esc(bar.get("css", "")), label_width + indent, y, n(max(length, 0)), row_h,
                   n(label_width + indent + max(length, 0) + 6), n(y + row_h * 0.68),
                   esc(bar["text"])))
        item += '<title>%s: %s</title>' % (esc(bar["label"]), esc(bar["text"]))
        if bar.get("href"):
            item = '<a href="%s" class="codelink" data-code="%s">%s</a>' % (
                esc(bar["href"]), esc(bar.get("code", "")), item)
        parts.append("<g>%s</g>" % item)
    height = max(len(bars) * (row_h + gap), row_h)
    return ('<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" '
            'aria-label="%s">%s</svg>' % (width, height, width, height, esc(aria),
                                          "".join(parts)))


def css_word(text):
    return re.sub(r"[^a-z0-9_-]", "", text.lower()) or "x"


def html_table(headers, rows, css="data"):
    head = "".join("<th>%s</th>" % esc(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join(
        '<td class="num">%s</td>' % esc(cell) if isinstance(cell, (int, float))
        and not isinstance(cell, bool) else "<td>%s</td>" % esc(fmt_value(cell))
        for cell in row) for row in rows)
    return '<table class="%s"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (
        css, head, body)


def page(title, body):
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<title>%s</title><style>%s</style></head><body>%s<script>%s</script></body>'
            '</html>\n' % (esc(title), CSS, body, SCRIPT))
