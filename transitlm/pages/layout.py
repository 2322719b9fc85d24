"""What every page shares: escaping and number formats, tables, bar charts and
the page shell (``page``: its Content-Security-Policy), and writing a page to
a file.

Text from outside -- files, model answers, folder and model names -- is
escaped for HTML (``esc``), its control characters, bidirectional-text
controls and lone surrogates shown as backslash escapes (``clean_text``),
and isolated from the page's own words: ``bdi`` in HTML, ``isolated`` in SVG
text and tooltips, so that right-to-left text cannot reorder them.
"""

import base64
import hashlib
import html
import json
import math
import re
import unicodedata
from transitlm.evaluation.catalog import METRIC
from transitlm.pages.static import CSS, SCRIPT
from transitlm.io.terminal import printable


TEXT_COLOUR = "#1f2328"


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

def clean_text(value):
    """Text safe to write as UTF-8 HTML: control characters (ANSI escapes),
    bidirectional-text controls (U+202E) and lone surrogates shown as
    backslash escapes (transitlm.io.terminal.printable); tab and newline kept."""
    return printable(value if isinstance(value, str) else str(value))


def esc(value):
    """Escaped text for HTML content and quoted attributes; None -> empty."""
    if value is None:
        return ""
    return html.escape(clean_text(value), quote=True)


def bdi(value):
    """Text from outside in HTML content: escaped (esc) and isolated in a
    <bdi>, so its direction cannot reorder the words around it."""
    return "<bdi>%s</bdi>" % esc(value)


# First strong isolate ... pop directional isolate: <bdi> where no element
# can go (SVG text, a tooltip's title).
FSI, PDI = "\u2068", "\u2069"


def isolated(value):
    """Text from outside for SVG text and titles: escaped (esc) between FSI
    and PDI, the Unicode form of <bdi> (its own FSI and PDI are escaped)."""
    return FSI + esc(value) + PDI


def fmt_count_pct(part, whole):
    """'32 (84.2%)'; '32' when there is no base."""
    if not whole:
        return "%d" % part
    return "%d (%.1f%%)" % (part, 100.0 * part / whole)


def metric_kind(key):
    """A metric's kind (transitlm.evaluation.catalog.Metric); "mean" for an unknown key."""
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

    bars: dicts {label, count, scale_max, text, css?, href?, indent?,
    outside?}; the bar length is count / scale_max of the bar area; a label
    from outside (``outside``: a failure code) is isolated and shortened to
    its room (whole in the bar's tooltip).
    """
    row_h, gap = 24, 6
    area = width - label_width - value_width
    parts = []
    for index, bar in enumerate(bars):
        y = index * (row_h + gap)
        length = area * bar["count"] / bar["scale_max"] if bar["scale_max"] else 0
        indent = 14 if bar.get("indent") else 0
        label = isolated(cut_text(bar["label"], label_width / CHART_CHAR_PX)) \
            if bar.get("outside") else esc(bar["label"])
        item = ('<text class="lbl" x="%d" y="%s">%s</text>'
                '<rect class="bar %s" x="%d" y="%d" width="%s" height="%d" />'
                '<text class="val" x="%s" y="%s">%s</text>'
                % (label_width - 8, n(y + row_h * 0.68), label,
                   esc(bar.get("css", "")), label_width + indent, y, n(max(length, 0)), row_h,
                   n(label_width + indent + max(length, 0) + 6), n(y + row_h * 0.68),
                   esc(bar["text"])))
        item += '<title>%s: %s</title>' % (isolated(bar["label"]) if bar.get("outside")
                                           else esc(bar["label"]), esc(bar["text"]))
        if bar.get("href"):
            item = '<a href="%s" class="codelink" data-code="%s">%s</a>' % (
                esc(bar["href"]), esc(bar.get("code", "")), item)
        parts.append("<g>%s</g>" % item)
    height = max(len(bars) * (row_h + gap), row_h)
    return ('<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" '
            'aria-label="%s">%s</svg>' % (width, height, width, height, esc(aria),
                                          "".join(parts)))


# Characters of a chart label's width (12.5 px text: about 7 px a character),
# beyond which cut_text shortens it (its tooltip holds it whole).
CHART_CHAR_PX = 7.0


def cut_text(text, columns):
    """Text shortened to about ``columns`` characters (CJK characters count
    two), with an ellipsis when cut: a label that must stay in its box."""
    text = clean_text(text)
    used = 0
    for index, char in enumerate(text):
        used += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        if used > columns - 1:
            return text[:index] + "\u2026"
    return text


def css_word(text):
    return re.sub(r"[^a-z0-9_-]", "", text.lower()) or "x"


def table_box(table):
    """A table in its own box, which scrolls sideways when the table is wider
    than the window (the page itself never is)."""
    return '<div class="tbox">%s</div>' % table


def html_table(headers, rows, css="data", outside=(0,)):
    """A table of data in its box: numbers right-aligned; the text of the
    columns in ``outside`` (from files: names, paths, codes) isolated (bdi)
    and wrapped anywhere if need be, the page's own words as they are."""
    head = "".join("<th>%s</th>" % esc(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join(
        '<td class="num">%s</td>' % esc(cell) if isinstance(cell, (int, float))
        and not isinstance(cell, bool) else "<td>%s</td>" % (
            bdi if index in outside else esc)(fmt_value(cell))
        for index, cell in enumerate(row)) for row in rows)
    return table_box('<table class="%s"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>'
                     % (css, head, body))


def _sha256(text):
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def content_security_policy(css, script):
    """The pages' policy: nothing from anywhere -- no network request, no
    form, frame, plugin or base URL -- but the page's own <style> and
    <script>, allowed by their SHA-256 (no other inline script, handler or
    style attribute runs or applies)."""
    return ("default-src 'none'; style-src 'sha256-%s'; script-src 'sha256-%s'; "
            "base-uri 'none'; form-action 'none'" % (_sha256(css), _sha256(script)))


def page(title, body, extra_css=""):
    """A whole page: its CSS (the shared CSS, then ``extra_css``) and script
    inline, allowed by the Content-Security-Policy and nothing else."""
    css = CSS + extra_css
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="%s">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<title>%s</title><style>%s</style></head><body>%s<script>%s</script></body>'
            '</html>\n' % (content_security_policy(css, SCRIPT), esc(title), css, body,
                            SCRIPT))
