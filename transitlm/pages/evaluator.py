"""The page of one evaluator run: header, funnel, metrics, failure reasons,
breakdowns and the row explorer with maps.

The details file may hold a million lines: it is read twice, streaming.  The
first pass counts failure codes and breakdowns and keeps only a bounded heap
of the rows to list; the second fetches those rows.
"""

import heapq
import json
import zlib
import common
import transitlm.evaluation.records
import transitlm.evaluation.reports
from transitlm.evaluation.catalog import METRICS, benchmark_info
from transitlm.io.files import DETAILS_JSONL, write_whole
from transitlm.pages.layout import (
    bar_chart, bdi, clean_text, css_word, cut_text, esc, fmt_count_pct, fmt_metric,
    fmt_value, html_table, page, table_box)
from transitlm.pages.maps import Stops, bdi_join, row_map
from transitlm.evaluation.records import failure_codes, row_failed


STAGES = transitlm.evaluation.records.STAGES


# ---------------------------------------------------------------------------
# Reading the details file (two streaming passes)
# ---------------------------------------------------------------------------

def page_title(benchmark, default):
    """The heading of a benchmark's page (the catalogue's), else ``default``."""
    info = benchmark_info(benchmark)
    return info.page_title if info else default


def read_details(path):
    """Yield (line number, record dict) of a details JSONL file."""
    try:
        handle = open(path, "r", encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise common.InputError("cannot read details file %s: %s"
                                % (path, exc.strerror or exc))
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise common.InputError("details file %s line %d is not JSON"
                                            % (path, number))
                if not isinstance(record, dict):
                    raise common.InputError("details file %s line %d is not a JSON object"
                                            % (path, number))
                yield number, record
        except OSError as exc:
            raise common.InputError("cannot read details file %s: %s"
                                    % (path, exc.strerror or exc))


def code_stage(code):
    return code.split(".", 1)[0]


def first_stage(codes):
    """The first failed stage of a row ('passed' when none)."""
    return code_stage(codes[0]) if codes else "passed"


def city_of(record):
    city = record.get("city")
    return "(no city)" if city in (None, "") else clean_text(city)


def _spread(number):
    """A deterministic pseudo-random key of a line number (sampling order)."""
    return zlib.crc32(b"%d" % number)


BREAKDOWN_COLUMNS = (("samples", "rows"), ("evaluated", "evaluated"),
                     ("entered", "Round 1 input"), ("reachable", "reachable"),
                     ("grounding", "station grounding"),
                     ("plausibility", "distance plausibility"),
                     ("exact", "exact match"), ("accurate", "accurate"))


def breakdown_step(counter, record):
    """Add one row to a breakdown counter (dict of counts)."""
    def bump(key):
        counter[key] = counter.get(key, 0) + 1
    bump("samples")
    if record.get("status") == "evaluated":
        bump("evaluated")
    if record.get("in_funnel"):
        bump("entered")
        if record.get("reachable"):
            bump("reachable")
            if record.get("station_grounding"):
                bump("grounding")
            if record.get("distance_plausibility"):
                bump("plausibility")
            if record.get("exact_match"):
                bump("exact")
                if record.get("overall_accurate"):
                    bump("accurate")
    if record.get("compliant") is not None:
        bump("judged")
        if record.get("compliant"):
            bump("compliant")


class DetailsScan(object):
    """Pass 1 over the details: counts, breakdowns and the rows to list."""

    def __init__(self, html_rows):
        self.limit = max(0, int(html_rows))
        self.rows = 0
        self.failing = 0
        self.code_counts = {}
        self.by_city = {}
        self.by_req_type = {}
        self.statuses = {}
        self._code_seen = {}
        self._heap = []             # max-heap (negated keys) of the rows to list

    def add(self, number, record):
        self.rows += 1
        codes = failure_codes(record)
        status = str(record.get("status"))
        self.statuses[status] = self.statuses.get(status, 0) + 1
        breakdown_step(self.by_city.setdefault(city_of(record), {}), record)
        if "req_type" in record:
            key = "(none)" if record["req_type"] is None else str(record["req_type"])
            breakdown_step(self.by_req_type.setdefault(key, {}), record)
        if row_failed(record):
            self.failing += 1
            # Round-robin over codes: a row's rank is how often its rarest code
            # was seen before, so every code gets rows in the list.
            occurrence = None
            for code in set(codes):
                self.code_counts[code] = self.code_counts.get(code, 0) + 1
                seen = self._code_seen.get(code, 0)
                self._code_seen[code] = seen + 1
                occurrence = seen if occurrence is None else min(occurrence, seen)
            key = (0, occurrence, _spread(number), number)
        else:
            key = (1, 0, _spread(number), number)
        self._offer(key)

    def _offer(self, key):
        if not self.limit:
            return
        negated = tuple(-part for part in key)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, negated)
        elif negated > self._heap[0]:
            heapq.heapreplace(self._heap, negated)

    def selected(self):
        """Listed line numbers: failures first, then passed rows, each in file order."""
        keys = sorted(tuple(-part for part in item) for item in self._heap)
        return sorted(keys, key=lambda key: (key[0], key[3]))


def scan_details(path, html_rows):
    scan = DetailsScan(html_rows)
    for number, record in read_details(path):
        scan.add(number, record)
    return scan


def fetch_rows(path, line_numbers):
    """Pass 2: {line number: record} of the wanted lines only."""
    wanted = set(line_numbers)
    found = {}
    if not wanted:
        return found
    for number, record in read_details(path):
        if number in wanted:
            found[number] = record
            if len(found) == len(wanted):
                break
    return found


def funnel_bars(report):
    """The funnel as bars: (label, count, base, base label, is a filter)."""
    counts, rounds = report.get("counts", {}), report.get("rounds", {})
    reach = rounds.get("reachability", {})
    ground = rounds.get("grounding", {})
    overlap = rounds.get("overlap", {})
    acc = rounds.get("accuracy", {})
    samples = counts.get("samples", 0)
    bars = [("samples", samples, samples, "samples", True),
            ("evaluated", counts.get("evaluated", 0), samples, "samples", True),
            ("Round 1 input", reach.get("input", 0), samples, "samples", True),
            ("reachable", reach.get("passed", 0), reach.get("input", 0), "Round 1 input", True),
            ("station grounding", ground.get("station_grounding", 0), ground.get("input", 0),
             "reachable", False),
            ("distance plausibility", ground.get("distance_plausibility", 0),
             ground.get("input", 0), "reachable", False),
            ("exact match", overlap.get("exact_match", 0), overlap.get("input", 0),
             "reachable", True),
            ("accurate (overall)", acc.get("overall", 0), acc.get("input", 0),
             "exact matches", True)]
    pref = rounds.get("preference")
    if isinstance(pref, dict):
        bars.append(("preference-compliant", pref.get("compliant", 0), pref.get("input", 0),
                     "Round 5 input", True))
    return bars


def diversity_bars(report):
    div = report.get("diversity")
    if not isinstance(div, dict):
        return []
    samples = report.get("counts", {}).get("samples", 0)
    bars = []
    hits = div.get("best_match_hits", {})
    for key in common.ROUTE_KEYS:
        if key in hits:
            bars.append(("best match in %s" % key, hits[key], samples, "samples"))
    reach = div.get("route_reachability", {})
    for key in common.ROUTE_KEYS:
        item = reach.get(key)
        if isinstance(item, dict):
            bars.append(("%s route present" % key, item.get("present", 0), samples, "samples"))
            bars.append(("%s route reachable" % key, item.get("reachable", 0),
                         item.get("present", 0), "present"))
    if "all_routes_reachable" in div:
        bars.append(("all routes reachable", div["all_routes_reachable"], samples, "samples"))
    for count, rows in sorted(div.get("route_count_distribution", {}).items()):
        bars.append(("rows with %s route(s)" % count, rows, samples, "samples"))
    return bars


def _pct_text(count, base, base_label):
    if not base:
        return "%d" % count
    return "%d \u00b7 %.1f%% of %d %s" % (count, 100.0 * count / base, base, base_label)


def funnel_section(report):
    bars = funnel_bars(report)
    top = max([bar[1] for bar in bars] + [1])
    chart = bar_chart([{"label": label, "count": count, "scale_max": top,
                        "text": _pct_text(count, base, base_label),
                        "css": "" if is_filter else "check", "indent": not is_filter}
                       for label, count, base, base_label, is_filter in bars],
                      aria="funnel: counts per round")
    rows = "".join('<tr><td>%s</td><td class="num">%d</td><td class="num">%s</td><td>%s</td></tr>'
                   % (esc(label), count, "%.1f%%" % (100.0 * count / base) if base else "-",
                      esc(base_label + ("" if is_filter else " (a check: removes no rows)")))
                   for label, count, base, base_label, is_filter in bars)
    out = ['<section id="funnel"><h2>Funnel</h2>',
           '<p class="note">Bar length is proportional to the count. Station grounding and '
           'distance plausibility (lighter, indented) are checks on the reachable rows: they '
           'do not remove rows from the later rounds.</p>', chart,
           table_box('<table class="data" id="funnel-table"><thead><tr><th>step</th>'
                     '<th>rows</th><th>%</th><th>of</th></tr></thead><tbody>' + rows
                     + '</tbody></table>')]
    extra = diversity_bars(report)
    if extra:
        top = max([bar[1] for bar in extra] + [1])
        out.append('<h3>Routes (benchmark 3)</h3>')
        out.append(bar_chart([{"label": label, "count": count, "scale_max": top,
                               "text": _pct_text(count, base, base_label)}
                              for label, count, base, base_label in extra],
                             aria="routes: best matches and per-route reachability"))
        div = report["diversity"]
        out.append(html_table(["figure", "value"], [
            [label, _pct_text(count, base, base_label)] for label, count, base, base_label
            in extra] + [["RD mean (prediction)", fmt_value(div.get("rd_mean"))],
                         ["RD mean (label)", fmt_value(div.get("rd_label_mean"))]]))
    out.append("</section>")
    return "".join(out)


def metrics_section(report):
    metrics = report.get("metrics", {}) or {}
    cells = []
    for metric in METRICS:
        key, label, meaning = metric.key, metric.label, metric.meaning
        if key in metrics:
            cells.append('<div class="metric" data-metric="%s"><div class="mname">%s</div>'
                         '<div class="mval">%s</div><div class="mdesc">%s</div></div>'
                         % (key, esc(label), esc(fmt_metric(key, metrics[key])), esc(meaning)))
    try:
        summary = transitlm.evaluation.reports.summary_line(metrics)
    except (KeyError, TypeError, ValueError):
        summary = ""
    return ('<section id="metrics"><h2>Metrics (the paper\'s names)</h2><div class="metrics">%s'
            '</div><p class="summary"><code>%s</code></p></section>' % ("".join(cells),
                                                                        esc(summary)))


def failures_section(scan):
    codes = sorted(scan.code_counts.items(),
                   key=lambda item: (_stage_rank(code_stage(item[0])), -item[1], item[0]))
    if not codes:
        return ('<section id="failures"><h2>Failure reasons</h2><p>No row failed a check.</p>'
                '</section>')
    top = max(count for _, count in codes)
    bars = [{"label": code, "count": count, "scale_max": top, "code": code,
             "text": "%d row%s \u00b7 %.1f%% of %d" % (count, "" if count == 1 else "s",
                                                       100.0 * count / scan.rows, scan.rows),
             "css": "stage-" + css_word(code_stage(code)), "href": "#code=" + code,
             "outside": True}
            for code, count in codes]
    codes_table = html_table(["code", "stage", "rows"], [[code, code_stage(code), count]
                                                        for code, count in codes],
                             outside=(0, 1))
    return ('<section id="failures"><h2>Failure reasons</h2><p class="note">Rows per failure '
            'code, in stage order (a row may carry several codes). Each bar is a link that '
            'filters the row list below. %d of %d rows failed: a failed check, an error or no '
            'response (the text report counts and lists the same rows).</p>%s'
            '<details><summary>as a table</summary>%s</details></section>'
            % (scan.failing, scan.rows, bar_chart(bars, width=860, label_width=330,
                                                  value_width=200, aria="failure codes"),
               codes_table))


def _stage_rank(stage):
    return STAGES.index(stage) if stage in STAGES else len(STAGES)


def _breakdown_table(groups, first_header, with_compliance, order=None):
    headers = [first_header] + [label for _, label in BREAKDOWN_COLUMNS]
    if with_compliance:
        headers.append("compliant")
    rows = []
    for name in sorted(groups, key=order or (lambda key: (-groups[key].get("samples", 0), key))):
        counts = groups[name]
        bases = {"samples": None, "evaluated": "samples", "entered": "samples",
                 "reachable": "entered", "grounding": "reachable",
                 "plausibility": "reachable", "exact": "reachable", "accurate": "exact"}
        row = [name]
        for key, _ in BREAKDOWN_COLUMNS:
            base = bases[key]
            row.append(fmt_count_pct(counts.get(key, 0), counts.get(base, 0) if base else 0))
        if with_compliance:
            row.append(fmt_count_pct(counts.get("compliant", 0), counts.get("judged", 0)))
        rows.append(row)
    return html_table(headers, rows)


def breakdowns_section(report, scan):
    out = ['<section id="breakdowns"><h2>Breakdowns</h2><p class="note">Percentages: '
           'evaluated and Round 1 input of rows, reachable of Round 1 input, grounding, '
           'plausibility and exact match of reachable, accurate of exact matches%s.</p>'
           % (", compliant of the rows with a preference verdict" if scan.by_req_type else "")]
    out.append("<h3>Per city</h3>")
    out.append(_breakdown_table(scan.by_city, "city", bool(scan.by_req_type)))
    pref = report.get("rounds", {}).get("preference")
    if isinstance(pref, dict) or scan.by_req_type:
        out.append("<h3>Per preference type (req_type)</h3>")
        by_type = pref.get("by_req_type", {}) if isinstance(pref, dict) else {}
        if by_type:
            out.append(html_table(["req_type", "preference", "rows", "compliant",
                               "label compliant"],
                              [[key, item.get("name"), item.get("samples", 0),
                                fmt_count_pct(item.get("compliant", 0), item.get("samples", 0)),
                                fmt_count_pct(item.get("label_compliant", 0),
                                              item.get("samples", 0))]
                               for key, item in sorted(by_type.items(), key=_req_key)]))
        if scan.by_req_type:
            out.append(_breakdown_table(scan.by_req_type, "req_type", True,
                                        order=lambda key: _req_key((key, None))))
    out.append("</section>")
    return "".join(out)


def _req_key(item):
    key = item[0]
    return (0, int(key), key) if key.isdigit() else (1, 0, key)


# ---------------------------------------------------------------------------
# Header
# ---------------------------------------------------------------------------

def header_section(report, scan):
    inputs = report.get("inputs", {}) or {}
    hashes = inputs.get("sha256", {}) or {}
    rows = []
    for role in ("input", "predictions", "station_info", "line_info"):
        path = inputs.get(role)
        if not path and role not in hashes:
            continue
        digest = hashes.get(role) or hashes.get(path) or ""
        rows.append([role, path or "-", digest or "-"])
    if inputs.get("api_url"):
        rows.append(["api_url", inputs["api_url"], "-"])
    options = inputs.get("options") or {}
    option_text = ", ".join("%s=%s" % (key, fmt_value(options[key])) for key in sorted(options))
    counts = report.get("counts", {})
    title = page_title(report.get("benchmark"), "TransitLM %s"
                                 % report.get("benchmark"))
    out = ['<header><h1>%s</h1>' % bdi(title),
           '<p class="sub">protocol <b>%s</b> \u00b7 field %s \u00b7 version %s</p>'
           % (bdi(report.get("protocol")), bdi(inputs.get("input_field") or "-"),
              bdi(report.get("version") or "-"))]
    if report.get("signature"):
        out.append('<p class="sig">signature <code>%s</code></p>' % bdi(report["signature"]))
    out.append(html_table(["role", "file", "sha256"], rows, "data inputs", outside=(1, 2)))
    if option_text:
        out.append('<p class="opts">options: %s</p>' % bdi(option_text))
    out.append('<p class="counts">samples <b>%d</b> \u00b7 evaluated <b>%d</b> \u00b7 errors '
               '<b>%d</b> \u00b7 no response <b>%d</b> \u00b7 details lines <b>%d</b></p>'
               % (counts.get("samples", 0), counts.get("evaluated", 0),
                  counts.get("errors", 0), counts.get("no_response", 0), scan.rows))
    warnings = [w for w in report.get("warnings", []) or [] if w]
    if scan.rows != counts.get("samples", scan.rows):
        warnings.append("the details file has %d rows, the report %d samples"
                        % (scan.rows, counts.get("samples", 0)))
    if warnings:
        out.append('<div class="warnings"><b>Warnings</b><ul>%s</ul></div>'
                   % "".join("<li>%s</li>" % bdi(w) for w in warnings))
    notes = report.get("input_notes") or {}
    reading = transitlm.evaluation.reports.reading_notes(notes) if isinstance(notes, dict) else []
    if reading:
        out.append('<p class="reading">%s</p>' % "<br>".join(bdi(line) for line in reading))
    labels = transitlm.evaluation.reports.labels_check_lines(report)
    if labels:
        out.append('<div class="labels-check"><b>Labels check</b> (the labels scored as '
                   'answers: a sanity check)<ul>%s</ul></div>'
                   % "".join("<li>%s</li>" % bdi(line) for line in labels))
    if notes:
        out.append('<details class="notes"><summary>input notes</summary>%s</details>'
                   % html_table(["note", "value"], [[key, notes[key]] for key in sorted(notes)],
                                outside=(0, 1)))
    out.append("</header>")
    return "".join(out)


# ---------------------------------------------------------------------------
# Row explorer
# ---------------------------------------------------------------------------

NOT_REACHED = "not reached"
NOT_CHECKED = "not checked"


def verdict_rows(record, benchmark, protocol=None):
    """(check, verdict, detail) lines of one row.  A check the row never
    reached (a later round of a route that is not reachable, accuracy of a
    route that is not an exact match) reads "not reached"; a check the
    protocol does not make (the general LLM's distance plausibility under
    the published rules) reads "not checked" -- never "yes"."""
    if record.get("status") != "evaluated":
        # The error itself is in the row's reasons (error_text): shown once.
        return [("status", record.get("status"), "not evaluated: no check ran (the reason "
                 "is in the row's line above)")]
    in_funnel = bool(record.get("in_funnel"))
    reached = in_funnel and bool(record.get("reachable"))        # Rounds 2 and 3
    exact = reached and bool(record.get("exact_match"))          # Round 4
    why_not = ("the route is not reachable (Round 1)" if in_funnel
               else "the row is left out of the funnel")
    if in_funnel:
        out = [("reachable", record.get("reachable"), record.get("reachable_reason"))]
    else:
        out = [("reachable", NOT_REACHED, "left out of the funnel: %s"
                % clean_text(record.get("reachable_reason") or "-"))]
    if reached:
        out.append(("station grounding", record.get("station_grounding"),
                    record.get("station_grounding_reason")))
        if benchmark == "general_llm" and not _general_dp_checked(protocol):
            out.append(("distance plausibility", NOT_CHECKED,
                        "the published route-eval service makes no such check (the row "
                        "counts as plausible, as in the published figures)"))
        else:
            out.append(("distance plausibility", record.get("distance_plausibility"),
                        record.get("distance_plausibility_reason")))
        out.append(("exact match", record.get("exact_match"),
                    "line IoU %s, station IoU %s, access modes %s"
                    % (fmt_value(record.get("line_iou")), fmt_value(record.get("station_iou")),
                       "match" if record.get("transfer_mode_match") else "differ")))
        out.append(("expert score", record.get("score_band"),
                    "%s vs label %s (%s%%)" % (fmt_value(record.get("score")),
                                               fmt_value(record.get("label_score")),
                                               fmt_value(record.get("score_deviation_pct")))))
    else:
        out += [(check, NOT_REACHED, why_not) for check in
                ("station grounding", "distance plausibility", "exact match", "expert score")]
    accuracy = [("%s accurate" % key, key + "_accurate", "MAPE %s%%"
                 % fmt_value(record.get(key + "_mape_pct"))) for key in ("distance", "time",
                                                                         "fare")]
    accuracy.append(("access distances accurate", "transfer_accurate", ""))
    for check, key, detail in accuracy:
        if exact:
            out.append((check, record.get(key), detail))
        else:
            out.append((check, NOT_REACHED, why_not if not reached else
                        "not an exact match (Round 3)"))
    if "compliant" in record:
        out.append(("preference compliant (req_type %s)" % fmt_value(record.get("req_type")),
                    record.get("compliant"), record.get("compliant_reason")))
    if benchmark == "diversity":
        routes = record.get("routes") or {}
        for key in common.ROUTE_KEYS:
            item = routes.get(key) if isinstance(routes, dict) else None
            if isinstance(item, dict):
                out.append(("%s route reachable" % key, item.get("reachable"),
                            "%s; score %s" % (clean_text(item.get("reachable_reason") or ""),
                                              fmt_value(item.get("score")))))
        out.append(("best match", record.get("best_match") or "-",
                    "RD %s (label %s), %s route(s)" % (fmt_value(record.get("rd")),
                                                       fmt_value(record.get("rd_label")),
                                                       fmt_value(record.get("route_count")))))
    return out


def _general_dp_checked(protocol):
    """Does the protocol check a general-LLM row's distance plausibility?"""
    rules = common.PROTOCOLS.get(protocol) if isinstance(protocol, str) else None
    return bool(rules and rules.general_dp_checked)


def verdicts_table(record, benchmark, protocol=None):
    """A row's verdicts, one line each: check, verdict and detail in three
    cells; a passed check green, a failed one red, one not reached or not
    checked grey."""
    return (
        '<table class="verdicts"><thead><tr><th>check</th><th>verdict</th><th>detail</th>'
        '</tr></thead><tbody>%s</tbody></table>' % "".join(
            '<tr><td>%s</td><td class="v-%s">%s</td><td>%s</td></tr>'
            % (esc(check), "ok" if verdict is True else "bad" if verdict is False else "na",
               esc(fmt_value(verdict)) if verdict in (True, False, None, NOT_REACHED,
                                                      NOT_CHECKED) else bdi(fmt_value(verdict)),
               bdi(detail) if detail else "")
            for check, verdict, detail in verdict_rows(record, benchmark, protocol)))


def error_text(record):
    """The error of a row not evaluated, with the generator's error when the
    message does not already hold it (a missing prediction's message does)."""
    message = clean_text(record.get("error") or "")
    generator = record.get("generator_error")
    if generator is not None and generator != "":
        generator = clean_text(fmt_value(generator))
        if generator not in message:
            message = "%s (generator error: %s)" % (message, generator) if message \
                else "generator error: " + generator
    return message


def explorer_row(record, benchmark, stops, open_map, index=0, protocol=None):
    codes = failure_codes(record)
    stage = first_stage(codes)
    status = str(record.get("status"))
    city = city_of(record)
    svg, notes = row_map(record, benchmark, stops, "rs%d" % index)
    verdicts = verdicts_table(record, benchmark, protocol)
    return ('<tbody class="r" data-status="%s" data-stage="%s" data-codes="%s" data-city="%s">'
            '<tr class="head"><td class="num">%s</td><td class="id">%s</td><td>%s</td>'
            '<td>%s</td><td>%s</td><td>%s</td></tr>'
            '<tr class="more"><td colspan="6"><details%s><summary>map and verdicts</summary>'
            '<div class="rowbody"><div class="mapbox">%s%s</div>%s</div></details></td></tr>'
            '</tbody>'
            % (esc(status), esc(stage), esc(" ".join(codes)), esc(city),
               esc(record.get("row")), bdi(record.get("index_id") or "(no id)"), bdi(city),
               _word(status), _word(stage), _reasons_html(record, codes),
               " open" if open_map else "", svg, notes, verdicts))


def _word(value):
    """A word of the details' vocabulary (a status, a stage): isolated, but
    never broken inside (a long one widens its table, which scrolls)."""
    return '<bdi class="word">%s</bdi>' % esc(value)


def _reasons_html(record, codes):
    """The row's codes and the reasons of its failed verdicts (read from the
    record), each isolated (bdi)."""
    if not codes:
        return "passed every check"
    texts = []
    error = error_text(record)
    if error:
        texts.append(error)
    reached = record.get("in_funnel") and record.get("reachable")
    for verdict, reason in (("reachable", "reachable_reason"),
                            ("station_grounding", "station_grounding_reason"),
                            ("distance_plausibility", "distance_plausibility_reason"),
                            ("compliant", "compliant_reason")):
        if verdict in ("station_grounding", "distance_plausibility") and not reached:
            continue                    # a check the row never reached
        if record.get(verdict) is False and record.get(reason) \
                and record.get("status") == "evaluated":
            texts.append(clean_text(record[reason]))
    return bdi_join(codes, "; ") + (" \u2014 " + bdi_join(texts, "; ") if texts else "")


def explorer_section(scan, rows, benchmark, stops, protocol=None):
    options = {"status": sorted(scan.statuses),
               "stage": sorted({code_stage(code) for code in scan.code_counts},
                               key=_stage_rank) + ["passed"],
               "code": sorted(scan.code_counts, key=lambda c: (_stage_rank(code_stage(c)), c)),
               "city": sorted(scan.by_city)}
    selects = "".join(
        '<label>%s <select id="f-%s"><option value="">all</option>%s</select></label>'
        % (name, name, "".join('<option value="%s">%s</option>' % (esc(v), esc(cut_text(v, 60)))
                               for v in values))
        for name, values in (("status", options["status"]), ("stage", options["stage"]),
                             ("code", options["code"]), ("city", options["city"])))
    left_out = scan.rows - len(rows)
    listed_failing = sum(1 for record in rows if row_failed(record))
    body = "".join(explorer_row(record, benchmark, stops, index == 0, index, protocol)
                   for index, record in enumerate(rows))
    return ('<section id="rows"><h2>Rows</h2><p class="note">%d of %d rows listed (%d with a '
            'failure, %d passed); <b>%d rows left out</b> of this page (limit --html_rows %d: '
            'failures first, spread over every failure code, then a deterministic sample of '
            'passed rows). The full list is in %s.</p>'
            '<div class="filters">%s<label>search <input id="f-text" type="search" '
            'placeholder="id, reason, city"></label><button id="f-reset" type="button">reset'
            '</button></div><p id="shown" class="note" aria-live="polite"></p>'
            '%s</section>'
            % (len(rows), scan.rows, listed_failing, len(rows) - listed_failing, left_out,
               scan.limit, DETAILS_JSONL, selects, table_box(
                   '<table class="rows"><thead><tr><th>row</th><th>id</th><th>city</th>'
                   '<th>status</th><th>first failed stage</th><th>reasons</th></tr></thead>%s'
                   '</table>' % body)))


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def evaluator_page(report, details_path, network, html_rows=500):
    """The HTML page of one evaluator run (report.json dict + details.jsonl path)."""
    benchmark = report.get("benchmark")
    scan = scan_details(details_path, html_rows)
    wanted = [key[3] for key in scan.selected()]
    fetched = fetch_rows(details_path, wanted)
    rows = [fetched[number] for number in wanted if number in fetched]
    stops = Stops(network, prefix_fallback=(benchmark == "general_llm"))
    nav = ('<nav><a href="#funnel">funnel</a><a href="#metrics">metrics</a>'
           '<a href="#failures">failure reasons</a><a href="#breakdowns">breakdowns</a>'
           '<a href="#rows">rows</a></nav>')
    body = "".join((header_section(report, scan), nav, funnel_section(report),
                    metrics_section(report), failures_section(scan),
                    breakdowns_section(report, scan),
                    explorer_section(scan, rows, benchmark, stops, report.get("protocol"))))
    title = "%s (%s)" % (page_title(benchmark, str(benchmark)),
                         report.get("protocol"))
    return page(title, body)


def write_evaluator_page(path, report, details_path, network, html_rows=500):
    write_whole(path, evaluator_page(report, details_path, network, html_rows),
                errors="backslashreplace")
