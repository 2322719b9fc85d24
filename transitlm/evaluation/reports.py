"""Reports: the JSON report, the per-row details lines, the text report and the
signature.

Standard library only; Python 3.8+.
"""

import json
import math
import os
import re

from common import TRANSFER_DISTANCE_TOLERANCE_KM, VERSION
from transitlm.evaluation.catalog import METRICS
from transitlm.evaluation.chat_messages import signature_part
from transitlm.evaluation.records import NO_RESPONSE, failure_codes, row_failed
from transitlm.io.terminal import BIDI_CONTROLS, encodable, printable

SCHEMA_VERSION = 3               # report.json / details.jsonl layout (README changelog)


def report_json(report):
    """The report as deterministic JSON text (sorted keys, no NaN)."""
    text = json.dumps(finite_or_none(report), ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    return text if encodable(text) else \
        json.dumps(finite_or_none(report), ensure_ascii=True, indent=1, sort_keys=True) + "\n"


def finite_or_none(value):
    """The value with every non-finite figure (in dicts and lists too) as None:
    a model may write "NaN" as a distance and float() accepts it; JSON cannot
    hold NaN, so a non-finite figure is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


# A value no input can hold (a random nonce between NUL characters): the row
# number's place in a details line rendered in one go (details_parts).
_ROW_MARK = "\x00row-%s\x00" % os.urandom(16).hex()
_ROW_MARK_BYTES = json.dumps(_ROW_MARK).encode()


# Characters JSON may hold raw inside a string that a reader of lines or a
# terminal would act on: DEL and the C1 controls (U+0085 is a line break to
# Python's str.splitlines, U+009B starts a terminal escape sequence), the
# bidirectional-text controls, and U+2028 / U+2029 (line and paragraph
# separators).  json.dumps escapes C0 already; these are written as \uXXXX
# too, so every line splitter sees one record per line and text is shown,
# not obeyed.  Still the same JSON value.
_JSON_UNSAFE_RE = re.compile("[\x7f-\x9f%s\u2028\u2029]" % BIDI_CONTROLS)


def _json_escape(match):
    return "\\u%04x" % ord(match.group())


def line_safe_json(text):
    """JSON text with the characters above escaped (\\u0085, \\u2028, ...);
    the text itself when it holds none."""
    if _JSON_UNSAFE_RE.search(text) is None:
        return text
    return _JSON_UNSAFE_RE.sub(_json_escape, text)


# The UTF-8 lead bytes of every character _JSON_UNSAFE_RE matches (U+007F,
# U+0080-U+00BF, U+0600-U+063F, U+2000-U+2FFF): a details line holding none
# of them needs no escaping, which four byte scans tell (the hot path: a
# fifth of the cost of the regex over the text).
_UNSAFE_LEAD_BYTES = (b"\x7f", b"\xc2", b"\xd8", b"\xe2")


def _line_safe_bytes(data):
    for lead in _UNSAFE_LEAD_BYTES:
        if lead in data:
            text = data.decode("utf-8")
            safe = line_safe_json(text)
            return data if safe is text else safe.encode("utf-8")
    return data


def _details_text(record, ensure_ascii=False):
    try:
        return json.dumps(record, ensure_ascii=ensure_ascii, sort_keys=True, allow_nan=False)
    except ValueError:                  # a non-finite figure: written as null
        return json.dumps(finite_or_none(record), ensure_ascii=ensure_ascii, sort_keys=True)


def _details_data(record):
    """A record as line-safe JSON in UTF-8 bytes: sorted keys, \\u escapes
    where UTF-8 cannot go (a lone surrogate) and for the characters
    line_safe_json escapes, non-finite figures as null."""
    try:
        data = _details_text(record).encode("utf-8")
    except UnicodeEncodeError:
        data = _details_text(record, ensure_ascii=True).encode()
    return _line_safe_bytes(data)


def details_parts(record):
    """A details line in two parts around the row number, as UTF-8 bytes.

    A worker process that reads its own rows numbers them from 1; the parent,
    which knows how many rows came before, writes ``head + N + tail``
    (details_line): the same bytes as _details_data of the whole record.
    """
    data = _details_data(dict(record, row=_ROW_MARK))
    if data.count(_ROW_MARK_BYTES) == 1:          # always, unless the nonce is guessed
        head, _, tail = data.partition(_ROW_MARK_BYTES)
        return head, tail + b"\n"
    return _details_parts_by_keys(record)


def _details_parts_by_keys(record):
    """details_parts without the mark: the keys before and after "row" rendered apart."""
    before = {key: value for key, value in record.items() if key < "row"}
    after = {key: value for key, value in record.items() if key > "row"}
    head, tail = _details_data(before), _details_data(after)
    # '{"a": 1}' and '{"z": 2}' -> '{"a": 1, "row": ' and ', "z": 2}\n'
    head = head[:-1] + (b", " if len(head) > 2 else b"") + b'"row": '
    tail = (b", " if len(tail) > 2 else b"") + tail[1:] + b"\n"
    return head, tail


def details_line(head, row, tail):
    return b"%s%d%s" % (head, row, tail)


def details_bytes(record):
    """One details line as UTF-8 bytes (sorted keys; \\u escapes where UTF-8 cannot go)."""
    head, tail = details_parts(record)
    return details_line(head, record["row"], tail)


def fmt_pct(part, whole):
    return "%5.1f%%" % (100.0 * part / whole) if whole else "    - "


def fmt_num(value, decimals):
    return "-" if value is None else "%.*f" % (decimals, value)


class TextReport(object):
    """Aligned plain-text lines: sections, counted rows and value rows."""

    LABEL_WIDTH = 38

    def __init__(self):
        self.lines = []

    def title(self, text):
        if self.lines:
            self.lines.append("")
        self.lines.append(text)

    def count(self, label, value, whole=None):
        pct = "  " + fmt_pct(value, whole) if whole is not None else ""
        self.lines.append("  %-*s %8d%s" % (self.LABEL_WIDTH, label, value, pct))

    def value(self, label, text):
        self.lines.append("  %-*s %8s" % (self.LABEL_WIDTH, label, text))

    def text(self, line):
        self.lines.append(line)

    def render(self):
        return "\n".join(self.lines) + "\n"


def render_funnel(out, rounds, labels=None):
    """Rounds 1-4 as text; ``labels`` renames a round's title."""
    labels = labels or {}
    reach, ground = rounds["reachability"], rounds["grounding"]
    overlap, acc = rounds["overlap"], rounds["accuracy"]
    out.title(labels.get("reachability", "Round 1  Reachability"))
    out.count("input", reach["input"])
    out.count("reachable", reach["passed"], reach["input"])
    out.title(labels.get("grounding", "Round 2  Station grounding and distance plausibility"))
    out.count("input (reachable)", ground["input"])
    out.count("station grounding", ground["station_grounding"], ground["input"])
    out.count("distance plausibility", ground["distance_plausibility"], ground["input"])
    out.title(labels.get("overlap", "Round 3  Line and station overlap"))
    out.count("input (reachable)", overlap["input"])
    out.value("line IoU mean", fmt_num(overlap["line_iou_mean"], 4))
    out.value("station IoU mean", fmt_num(overlap["station_iou_mean"], 4))
    out.count("station IoU = 1", overlap["station_iou_exact"], overlap["input"])
    out.count("exact match", overlap["exact_match"], overlap["input"])
    out.value("expert score mean (prediction)", fmt_num(overlap["expert_score_mean"], 2))
    out.value("expert score mean (label)", fmt_num(overlap["label_expert_score_mean"], 2))
    out.value("score deviation mean (%)", fmt_num(overlap["score_deviation_pct_mean"], 2))
    out.count("score worse than label", overlap["score_worse"], overlap["input"])
    out.count("score better than label", overlap["score_better"], overlap["input"])
    out.count("score same as label (within 0.1%)", overlap["score_same"], overlap["input"])
    out.title(labels.get("accuracy", "Round 4  Estimation accuracy"))
    out.count("input (exact matches)", acc["input"])
    for key, label in (("distance", "distance (10% or 0.5 km)"),
                       ("time", "time (10% or 5 min)"),
                       ("fare", "fare (10% or 1 CNY)"),
                       ("transfer", "access distances (0.5 km)"),
                       ("overall", "overall (distance, time and fare)")):
        out.count(label, acc[key], acc["input"])
    out.value("distance MAPE (%)", fmt_num(acc["distance_mape_pct"], 2))
    out.value("time MAPE (%)", fmt_num(acc["time_mape_pct"], 2))
    out.value("fare MAPE (%)", fmt_num(acc["fare_mape_pct"], 2))
    out.value("expert score mean (prediction)", fmt_num(acc["expert_score_mean"], 2))
    out.value("expert score mean (label)", fmt_num(acc["label_expert_score_mean"], 2))


def summary_line(metrics):
    """The paper's layout: Conn 97.0% | SG 98.5% | ... | MAPE 1.33% (then PC
    or RD where the benchmark reports it)."""
    return " | ".join("%s %s" % (metric.label, metric.text(metrics.get(metric.key)))
                      for metric in METRICS
                      if metric.benchmark is None or metric.key in metrics)


def render_header(out, report, title):
    counts = report["counts"]
    inputs = report["inputs"]
    out.text("%s   (protocol: %s)" % (title, report["protocol"]))
    out.text("  input         %s  (field %s)" % (printable(inputs["input"]),
                                                 inputs["input_field"]))
    if inputs.get("predictions"):
        out.text("  predictions   %s" % printable(inputs["predictions"]))
    out.text("  stations      %s" % printable(inputs["station_info"]))
    if inputs.get("line_info"):
        out.text("  lines         %s" % printable(inputs["line_info"]))
    if inputs.get("api_url"):
        out.text("  route-eval    %s" % printable(inputs["api_url"]))
    out.text("  samples %d   evaluated %d   errors %d   no response %d"
             % (counts["samples"], counts["evaluated"], counts["errors"],
                counts["no_response"]))
    notes = report.get("input_notes", {})
    join = notes.get("predictions_join")
    if join:
        out.text("  predictions: %d read, %d joined, %d test rows without one"
                 % (join["predictions"], join["joined"], join["missing"]))
    for warning in report.get("warnings", ()):
        out.text("  WARNING: " + printable(warning))
    for line in reading_notes(notes):
        out.text("  " + line)


def reading_notes(notes):
    """How the model's answers were read (report.json ``input_notes``), in
    sentences: for the text report and the page."""
    lines = []
    if notes.get("reasoning"):
        lines.append("%d answer(s) carried reasoning (<think>...</think>): the route was read "
                     "after it" % notes["reasoning"])
    if notes.get("reasoning_unclosed"):
        lines.append("%d answer(s) were cut off inside their reasoning (a <think> never "
                     "closed): no route to read, error.unclosed_reasoning"
                     % notes["reasoning_unclosed"])
    if notes.get("json_extracted"):
        lines.append("%d prediction(s) had text around the JSON; the first JSON object was used"
                     % notes["json_extracted"])
    return lines


def overlap_reason(record):
    """Why a reachable route is not an exact match, in words."""
    parts = []
    if record["station_iou"] != 1:
        parts.append("station IoU %.3f" % record["station_iou"])
    if record["line_iou"] != 1:
        parts.append("line IoU %.3f" % record["line_iou"])
    if not record["transfer_mode_match"]:
        parts.append("access modes differ from the label")
    return ", ".join(parts) or "not an exact match"


def accuracy_reason(record):
    parts = []
    for field in ("distance", "time", "fare"):
        if not record[field + "_accurate"]:
            parts.append("%s off by %.1f%%" % (field, record[field + "_mape_pct"]))
    if not record.get("transfer_accurate", True):
        parts.append("access distances off by more than %g km" % TRANSFER_DISTANCE_TOLERANCE_KM)
    return ", ".join(parts) or "accurate"


# Benchmark 3's codes that no verdict's reason words (a route that is not
# connected is worded by the scenario's other_failures).
_DIVERSITY_WORDS = {"diversity.fewer_than_two_routes": "fewer than two routes, no diversity "
                                                       "to measure",
                    "diversity.identical_routes": "the routes are identical (RD 0)"}


def row_failures(record):
    """Every failure of a row as "topic: reason" strings (text report): one
    or more for every row with a failure code (row_failed), none for a row
    without."""
    if record["status"] == "error":
        return ["error: " + record["error"]]
    if record["status"] == NO_RESPONSE:
        return ["no response: " + record["error"]]
    codes = failure_codes(record)
    out = []
    if record.get("in_funnel"):
        if not record.get("reachable"):
            out.append("reachability: " + record["reachable_reason"])
        else:
            if not record["station_grounding"]:
                out.append("grounding: " + record["station_grounding_reason"])
            if not record["distance_plausibility"]:
                out.append("plausibility: " + record["distance_plausibility_reason"])
            if not record["exact_match"]:
                out.append("overlap: " + overlap_reason(record))
            elif not (record["overall_accurate"] and record.get("transfer_accurate", True)):
                out.append("accuracy: " + accuracy_reason(record))
    elif "diversity.no_first_route" in codes:
        out.append("diversity: left out of Part A (%s)" % record.get("reachable_reason"))
    out.extend(record.get("other_failures", ()))
    out.extend("diversity: " + _DIVERSITY_WORDS[code] for code in codes
               if code in _DIVERSITY_WORDS)
    if codes and not out:               # a code no reason words: named as it is
        out.append("failure codes: " + ", ".join(codes))
    return out if codes else []


def failure_text(record):
    """The text report's line for a row that failed (row_failed), without
    its row number (failure_line_for adds it), or None."""
    if not row_failed(record):
        return None
    return printable("%s  %s" % (record["index_id"] or "(no id)",
                                 "; ".join(row_failures(record)))) + "\n"


def failure_line_for(row, text):
    return "  row %-6d %s" % (row, text)


def failure_line(record):
    """The text report's line for a row with a failed check, or None."""
    text = failure_text(record)
    return None if text is None else failure_line_for(record["row"], text)


def failures_title(failing, samples):
    return "\nRows with a failed check (%d of %d)\n" % (failing, samples)


def render_summary(out, report):
    out.title("Summary (%s protocol)" % report["protocol"])
    out.text("  " + summary_line(report["metrics"]))
    out.text("  signature: " + printable(report["signature"]))


# -- inputs and the report ------------------------------------------------------

def short_hash(hex_digest):
    return (hex_digest or "none")[:8]


def signature_line(report):
    """One line naming what makes two runs' figures comparable (as sacreBLEU's
    signature): transitlm:1.6.1|single_route|protocol:reference|rows:38|
    stations:889a5dbf|input:da737ae5|prompt:column#ab12cd34, plus lines,
    service and any figure option that is not at its default.

    It names the test and the question, not the model: two models scored on
    the same test file and station file, asked with the same system prompts,
    share it.  The prompt part (transitlm.evaluation.chat_messages.signature_part) is
    ``prompt:none`` for the labels scored as answers and ``prompt:unknown``
    when nothing records it; compare.py compares it only between runs that
    name one.  The input field (which column was scored) is provenance,
    ``inputs.input_field``, not part of it; the predictions' hash is in
    ``inputs.sha256.predictions``."""
    inputs = report["inputs"]
    sha = inputs["sha256"]
    options = inputs["options"]
    parts = ["transitlm:" + report["version"], report["benchmark"],
             "protocol:" + report["protocol"],
             "rows:%d" % report["counts"]["samples"],
             "stations:" + short_hash(sha.get("station_info")),
             "input:" + short_hash(sha.get("input")),
             signature_part(inputs.get("prompt"))]
    if sha.get("line_info"):
        parts.append("lines:" + short_hash(sha["line_info"]))
    if inputs.get("api_url"):
        parts.append("service:" + inputs["api_url"])
    for key in sorted(options):
        value = options[key]
        if key in ("protocol", "input_field") or value in (None, False):
            continue
        parts.append(key if value is True else "%s:%s" % (key, value))
    return "|".join(parts)


# -- the labels check -----------------------------------------------------------
#
# Scoring the labels as answers (--input_field sft_label) is a sanity check:
# a label that fails its own check is the test file, the station file or a
# rule of the protocol disagreeing, never a model.  Why a label can fail, by
# failure code (the codes the labels of a well-made file can carry first).

LABEL_FAILURE_WHY = {
    "reachability.count_mismatch":
        "a one-line label lists every station it passes; the published rules (--protocol "
        "reference) send that list as it is, and the route-eval check wants one boarding and "
        "one alighting name per line, so the intermediate stations cannot be matched "
        "(--protocol paper trims the list to its first and last name)",
    "preference.no_subway":
        "the label's route is judged to use the subway by its line names (reference: a name "
        "holding 地铁 or 号线, such as a bus line ending at a metro station)",
    "preference.bus_first":
        "the label's route has no bus leg, by its line names",
    "reachability.unknown_station":
        "a station of the label is not in the station file: is --station_info the network "
        "this file was built on?",
    "reachability.broken_hop":
        "two consecutive stations of the label are not one hop apart in the station file: is "
        "--station_info the network this file was built on?",
    "reachability.unknown_line":
        "a line of the label is not in the line file: is --line_info this file's?",
    "error.invalid_label": "the label cell is not a route the evaluator can read",
}
LABEL_FAILURE_OTHER = ("the label fails a check of its own: the file, the network or a rule "
                       "disagree; the rows are listed with their reasons")


def labels_check(report, codes):
    """report.json's ``labels_check`` of a run of the labels: how many fail,
    and by failure code how many rows and why."""
    counts = report["counts"]
    return {"labels": counts["samples"], "failing": counts["failed"],
            "by_code": {code: {"rows": rows, "why": LABEL_FAILURE_WHY.get(code,
                                                                         LABEL_FAILURE_OTHER)}
                        for code, rows in sorted(codes.items())}}


def labels_check_lines(report):
    """The labels check in sentences (text report and page): [] unless the
    run scored the labels."""
    check = report.get("labels_check")
    if not isinstance(check, dict):
        return []
    labels, failing = check.get("labels"), check.get("failing")
    if type(labels) is not int or type(failing) is not int:     # not a report of ours
        return []
    if not failing:
        return ["every one of the %d labels passes every check" % labels]
    lines = ["%d of %d labels fail their own check (%s): a failing label is the test file, "
             "the network or a rule of the protocol disagreeing, not a model"
             % (failing, labels, fmt_pct(failing, labels).strip())]
    by_code = check.get("by_code")
    for code, entry in sorted(by_code.items() if isinstance(by_code, dict) else ()):
        if isinstance(entry, dict) and type(entry.get("rows")) is int:
            lines.append("%s  %d row(s): %s" % (code, entry["rows"], entry.get("why")))
    return lines


def render_labels_check(out, report):
    lines = labels_check_lines(report)
    if lines:
        out.title("Labels check (the labels scored as answers: a sanity check)")
        for line in lines:
            out.text("  " + printable(line))


def build_report(benchmark, aggregate, context, inputs, notes, warnings):
    report = {"schema_version": SCHEMA_VERSION, "version": VERSION,
              "benchmark": benchmark.name, "protocol": context.protocol.name,
              "inputs": inputs, "warnings": warnings}
    figures = aggregate.figures()
    codes = figures.pop("failure_codes", None)
    report.update(figures)
    if codes is not None:
        report["labels_check"] = labels_check(report, codes)
    if notes:
        report["input_notes"] = notes
    report["signature"] = signature_line(report)
    return report


def render_text_head(benchmark, report):
    out = TextReport()
    render_header(out, report, benchmark.title)
    render_labels_check(out, report)
    benchmark.render(out, report)
    return out.render()


def render_text_tail(report):
    out = TextReport()
    render_summary(out, report)
    return "\n" + out.render()
