#!/usr/bin/env python3
"""Benchmark 2 — personalized preferences: the single-route funnel plus Round 5,
preference compliance by req_type (2 fewer transfers, 5 no subway / bus first,
7 subway first, 8 shorter time).

Usage: python3 personalized/evaluate.py [--input CSV] [--json PATH] ...
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

import common  # noqa: E402
import transitlm.cli  # noqa: E402
import transitlm.evaluation.engine  # noqa: E402
import transitlm.evaluation.reports  # noqa: E402

FEWER_TRANSFERS, NO_SUBWAY, SUBWAY_FIRST, SHORTER_TIME = 2, 5, 7, 8
PREFERENCE_NAMES = {FEWER_TRANSFERS: "fewer_transfers", NO_SUBWAY: "no_subway",
                    SUBWAY_FIRST: "subway_first", SHORTER_TIME: "shorter_time"}
# What the paper calls req 5: it asks for a bus leg rather than forbidding the subway.
PAPER_NAMES = {NO_SUBWAY: "bus_first"}


def parse_req_type(text):
    """req_type cell -> int (empty -> 0); None when it is not a whole number.
    A cell given as a number (the Python API's rows, as pandas gives them) is
    read as its digits would be: 2 and 2.0 are 2, NaN is empty."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text != text:                         # NaN: a missing cell
            return 0
        return int(text) if float(text).is_integer() else None
    if not isinstance(text, str):
        return 0 if text is None else None
    text = text.strip()
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        return None


def transfers(route, protocol):
    """Transfers: legs - 1, floored at 0 (paper: transit legs; reference: raw list)."""
    legs = route.transit_lines if protocol.transfers_from_legs else len(route.lines)
    return max(0, legs - 1)


def transit_names(route):
    return [name for name in route.lines if name.strip() and name.strip() != common.TRANSFER]


def preference_compliance(req_type, route, label, protocol):
    """Does ``route`` honour preference ``req_type``?  -> Verdict."""
    if req_type == FEWER_TRANSFERS:
        have, allowed = transfers(route, protocol), transfers(label, protocol)
        return common.Verdict(have <= allowed, "%d transfer(s), the label has %d"
                              % (have, allowed))
    if req_type == NO_SUBWAY:
        if protocol.bus_first:
            buses = [n for n in transit_names(route) if not common.is_subway_line(n)]
            return common.Verdict(bool(buses), "bus leg: %s" % buses[0] if buses
                                  else "no bus leg")
        subway = [n for n in route.lines if common.is_subway_line(n)]
        return common.Verdict(not subway, "uses subway line %s" % subway[0] if subway
                              else "no subway line")
    if req_type == SUBWAY_FIRST:
        subway = [n for n in route.lines if common.is_subway_line(n)]
        return common.Verdict(bool(subway), "subway leg: %s" % subway[0] if subway
                              else "no subway leg")
    if req_type == SHORTER_TIME:
        if not label.time_min > 0:
            return common.Verdict(True, "label has no time")
        limit = common.PREFERENCE_TIME_FACTOR * label.time_min
        return common.Verdict(route.time_min <= limit, "%g min, limit %g min (1.1 x label)"
                              % (route.time_min, limit))
    return common.Verdict(True, "no known preference")


def preference_name(req_type, protocol):
    """The name of a known preference type under a protocol (its failure code too)."""
    if protocol.bus_first:
        return PAPER_NAMES.get(req_type, PREFERENCE_NAMES[req_type])
    return PREFERENCE_NAMES[req_type]


class Personalized(transitlm.evaluation.engine.Benchmark):
    name = "personalized"
    needs_req_type = True

    def sample_fields(self, sample):
        return {"req_type": parse_req_type(sample.req_type)}

    def evaluate(self, row, context):
        req_type = parse_req_type(row.sample.req_type)
        if req_type is None:
            raise common.RowError("req_type %r is not a whole number" % row.sample.req_type,
                                  "invalid_req_type")
        fields, pred, label = common.judge_single_route(row, context.protocol,
                                                        context.network,
                                                        context.route_drawings)
        verdict = preference_compliance(req_type, pred, label, context.protocol)
        fields["compliant"] = verdict.ok
        fields["compliant_reason"] = verdict.reason
        fields["label_compliant"] = preference_compliance(req_type, label, label,
                                                          context.protocol).ok
        if not verdict.ok:
            fields["other_failures"] = ["preference %d (%s): %s" % (
                req_type, PREFERENCE_NAMES[req_type], verdict.reason)]
        return fields

    def scenario_codes(self, record, protocol):
        # Only a known type can fail (an unknown one reads as compliant).
        if record["status"] == "evaluated" and not record["compliant"]:
            return ["preference." + preference_name(record["req_type"], protocol)]
        return []

    def totals(self, protocol):
        return PreferenceTotals(protocol)

    def render(self, out, report):
        transitlm.evaluation.reports.render_funnel(out, report["rounds"])
        render_preference(out, report["rounds"]["preference"])


class PreferenceTotals(object):
    """Round 5, folded record by record.  reference: over evaluated rows, unknown
    types count as compliant; paper: over rows with a known req_type, error
    rows not compliant."""

    def __init__(self, protocol):
        self.protocol = protocol
        self.input = self.compliant = self.label_compliant = 0
        self.by_type = {req_type: [0, 0, 0] for req_type in PREFERENCE_NAMES}

    def add(self, record):
        req_type = record.get("req_type")
        if self.protocol.preference_over_known:
            if req_type not in PREFERENCE_NAMES:
                return
        elif record["status"] != "evaluated":
            return
        compliant = bool(record.get("compliant"))
        label_compliant = bool(record.get("label_compliant"))
        self.input += 1
        self.compliant += compliant
        self.label_compliant += label_compliant
        typed = self.by_type.get(req_type)
        if typed is not None:
            typed[0] += 1
            typed[1] += compliant
            typed[2] += label_compliant

    def sections(self):
        by_type = {}
        for req_type in sorted(PREFERENCE_NAMES):
            samples, compliant, label_compliant = self.by_type[req_type]
            if samples:
                by_type[str(req_type)] = {"name": preference_name(req_type, self.protocol),
                                          "samples": samples, "compliant": compliant,
                                          "label_compliant": label_compliant}
        return {"rounds": {"preference": {"input": self.input, "compliant": self.compliant,
                                          "label_compliant": self.label_compliant,
                                          "by_req_type": by_type}}}


def render_preference(out, preference):
    out.title("Round 5  Preference compliance")
    out.count("input", preference["input"])
    out.count("compliant (prediction)", preference["compliant"], preference["input"])
    out.count("compliant (label)", preference["label_compliant"], preference["input"])
    out.text("")
    out.text("  %-4s %-18s %8s %18s %18s" % ("req", "preference", "samples",
                                           "compliant", "label compliant"))
    for key, row in preference["by_req_type"].items():
        out.text("  %-4s %-18s %8d %8d  %s %8d  %s" % (
            key, row["name"], row["samples"], row["compliant"],
            transitlm.evaluation.reports.fmt_pct(row["compliant"], row["samples"]), row["label_compliant"],
            transitlm.evaluation.reports.fmt_pct(row["label_compliant"], row["samples"])))


if __name__ == "__main__":
    transitlm.cli.script_main(Personalized())
