#!/usr/bin/env python3
"""Benchmark 3 — route diversity: up to three routes per row (first/second/third).

Part A is the funnel on the first route (reference: with a best match searched in
second and third), Part B per-route reachability, Part C route diversity (RD),
Part D expert scores per route.

Usage: python3 diversity/evaluate.py [--input CSV] [--json PATH] ...
"""

import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

import common  # noqa: E402
from diversity import real_routes  # noqa: E402
import transitlm.cli  # noqa: E402
import transitlm.evaluation.engine  # noqa: E402
import transitlm.evaluation.records  # noqa: E402
import transitlm.evaluation.reports  # noqa: E402

KEYS = common.ROUTE_KEYS


def present_routes(obj, what, protocol, parsed=None):
    """{key: Route} for the keys first/second/third that are present and non-empty.

    ``parsed``: (JSON object, its routes) of the other side; a route equal to
    its route under the same key there is that Route (parsing is
    deterministic, and Routes are never changed), not parsed again.
    """
    if not isinstance(obj, dict):
        raise common.RowError("%s is %s, expected a JSON object with first/second/third"
                              % (what, common.type_name(obj)))
    other, other_routes = parsed if parsed is not None else ({}, {})
    if not isinstance(other, dict):
        other = {}
    routes = {}
    for key in KEYS:
        value = obj.get(key)
        if not value:
            continue
        if key in other_routes and value == other.get(key):
            routes[key] = other_routes[key]
        else:
            routes[key] = common.Route(value, protocol, "%s %s" % (what, key))
    return routes


def route_diversity(routes, protocol):
    """RD = mean over route pairs of 1 - IoU of their line signatures.

    reference: signatures skip empty access modes, routes with an empty
    signature are ignored, and fewer than 2 routes give 0.  paper: every
    present route counts, an empty mode reads as 步行.  -> (RD, n routes).
    """
    walk = protocol.line_set_with_access
    signatures = [route.line_signature(walk) for route in routes]
    if not walk:
        signatures = [s for s in signatures if s]
    if len(signatures) < 2:
        return 0.0, len(signatures)
    pairs = list(itertools.combinations(signatures, 2))
    return (common.plain_sum([1.0 - common.iou(a, b) for a, b in pairs]) / len(pairs),
            len(signatures))


def best_match(routes, label_first, reachable):
    """The first of second/third (present and reachable: ``reachable`` holds the
    keys of the reachable routes) whose stations equal the label's first route
    (station IoU 1), or None."""
    for key in KEYS[1:]:
        route = routes.get(key)
        if route is None or key not in reachable:
            continue
        if common.iou(route.stations, label_first.stations) == 1:
            return key
    return None


class Diversity(transitlm.evaluation.engine.Benchmark):
    name = "diversity"
    lines = None                 # the line file of the reward's real routes (prepare)

    def prepare(self, context):
        self.lines = real_routes.line_table(context)

    def in_funnel_default(self, protocol):
        # reference: Part A takes only rows with a first route on both sides.
        return protocol.funnel_over_all_rows

    def label_drawing(self, label, protocol):
        return {key: common.route_json(route)
                for key, route in present_routes(label, "label", protocol).items()}

    def evaluate(self, row, context):
        protocol, network = context.protocol, context.network
        preds = present_routes(row.prediction, "prediction", protocol)
        labels = present_routes(row.label, "label", protocol, (row.prediction, preds))
        if not preds:
            raise common.RowError("prediction has no route (first, second or third)",
                                  "no_route")
        fields = {"routes": {}, "other_failures": []}
        if context.route_drawings:
            fields["prediction_routes"] = {key: common.route_json(route)
                                           for key, route in preds.items()}
            fields["label_routes"] = {key: common.route_json(route)
                                      for key, route in labels.items()}
        reachable_keys = []
        verdicts = {}
        for key, route in preds.items():
            verdict = verdicts[key] = common.check_reachability(route.stations, network,
                                                                protocol)
            fields["routes"][key] = {"reachable": verdict.ok, "reachable_reason": verdict.reason,
                                     "score": route.score}
            if verdict.ok:
                reachable_keys.append(key)
            elif key != "first":
                fields["other_failures"].append("route %s: %s" % (key, verdict.reason))
        fields["all_routes_reachable"] = len(reachable_keys) == len(preds)
        fields["rd"], fields["route_count"] = route_diversity(
            [preds[k] for k in KEYS if k in preds], protocol)
        fields["rd_label"], fields["label_route_count"] = route_diversity(
            [labels[k] for k in KEYS if k in labels], protocol)
        if context.real_routes is not None:     # the reward asks (transitlm/reward/diversity.py)
            fields["route_checks"] = real_routes.route_checks(preds, row, context, self.lines)
        label_first = labels.get("first")
        fields["label_first_score"] = label_first.score if label_first else None
        fields.update(self.first_route_funnel(row, preds, label_first, context, verdicts))
        return fields

    def first_route_funnel(self, row, preds, label_first, context, verdicts):
        """Part A fields for the row (the single-route checks on `first`);
        ``verdicts``: the reachability of each predicted route by key."""
        protocol, network = context.protocol, context.network
        first = preds.get("first")
        if first is None or label_first is None:
            missing = "prediction" if first is None else "label"
            return {"in_funnel": protocol.funnel_over_all_rows, "reachable": False,
                    "reachable_reason": "%s has no first route" % missing,
                    "best_match": None,
                    "_codes": {"reachability": ("no_first_route",)}}
        fields = common.judge_route(first, label_first, row.origin, row.destination,
                                    network, protocol, verdicts["first"])
        fields["in_funnel"] = True
        fields["best_match"] = None
        if not fields["reachable"]:
            return fields
        if fields["station_iou"] == 1:
            fields["best_match"] = "first"
        elif protocol.best_match:
            key = best_match(preds, label_first,
                             {key for key, verdict in verdicts.items() if verdict.ok})
            if key is not None:
                fields.update(common.compare_routes(preds[key], label_first, protocol))
                fields["best_match"] = key
        return fields

    def scenario_codes(self, record, protocol):
        """What fails beyond Part A's funnel: a row Part A leaves out, other
        routes that are not connected, no diversity to measure."""
        if record["status"] != "evaluated":
            return []
        codes = []
        if not record["in_funnel"]:
            codes.append("diversity.no_first_route")
        for key in KEYS[1:]:
            route = record["routes"].get(key)
            if route is not None and not route["reachable"]:
                codes.append("diversity.%s_unreachable" % key)
        if record["route_count"] < 2:
            codes.append("diversity.fewer_than_two_routes")
        elif not record["rd"] > 0:
            codes.append("diversity.identical_routes")
        return codes

    def totals(self, protocol):
        return DiversityTotals(protocol)

    def render(self, out, report):
        transitlm.evaluation.reports.render_funnel(out, report["rounds"], {
            "reachability": "Part A  Round 1  Reachability of the first route",
            "grounding": "Part A  Round 2  Station grounding and distance plausibility",
            "overlap": "Part A  Round 3  Overlap (best match)",
            "accuracy": "Part A  Round 4  Estimation accuracy (best match)"})
        render_diversity(out, report["diversity"], common.PROTOCOLS[report["protocol"]])


class DiversityTotals(object):
    """Parts A (best-match hits), B, C and D, folded record by record."""

    def __init__(self, protocol):
        self.protocol = protocol
        self.hits = {key: 0 for key in KEYS}
        self.reach = {key: [0, 0] for key in KEYS}        # present, reachable
        self.all_reachable = 0
        self.distribution = {}
        # [sum, rows]: sums start at 0.0, counts at 0 (see transitlm.evaluation.records.Aggregate)
        self.rd = [0.0, 0]
        self.rd_label = [0.0, 0]
        self.route_scores = {key: [0.0, 0] for key in KEYS}
        self.first_score = [0.0, 0]
        self.label_first_score = [0.0, 0]

    def add(self, record):
        evaluated = record["status"] == "evaluated"
        if self.protocol.rd_over_all_rows:
            self.rd[0] += record.get("rd", 0.0) if evaluated else 0.0
            self.rd[1] += 1
        if not evaluated:
            return
        # A hit is an exact match (stations and access modes), by the route that made it.
        if record.get("in_funnel") and record.get("exact_match") and record.get("best_match"):
            self.hits[record["best_match"]] += 1
        routes = record["routes"]
        for key, route in routes.items():
            self.reach[key][0] += 1
            self.reach[key][1] += bool(route["reachable"])
            self.route_scores[key][0] += transitlm.evaluation.records._number(route["score"])
            self.route_scores[key][1] += 1
        self.all_reachable += bool(record["all_routes_reachable"])
        count = str(record["route_count"])
        self.distribution[count] = self.distribution.get(count, 0) + 1
        if self.protocol.rd_over_all_rows:
            _fold(self.rd_label, record["rd_label"])
        else:
            if record["route_count"] >= 2:
                _fold(self.rd, record["rd"])
            if record["label_route_count"] >= 2:
                _fold(self.rd_label, record["rd_label"])
        label_first = record["label_first_score"]
        if (label_first or 0) > 0:
            _fold(self.label_first_score, label_first)
            if "first" in routes:
                _fold(self.first_score, routes["first"]["score"])

    def sections(self):
        parts = {
            "route_reachability": {key: {"present": present, "reachable": reachable}
                                   for key, (present, reachable) in self.reach.items()},
            "all_routes_reachable": self.all_reachable,
            "route_count_distribution": dict(sorted(self.distribution.items())),
            "rd_mean": _mean(self.rd),
            "rd_label_mean": _mean(self.rd_label),
            "route_expert_score_mean": {key: _mean(total)
                                        for key, total in self.route_scores.items()},
            "first_expert_score_mean": _mean(self.first_score),
            "label_first_expert_score_mean": _mean(self.label_first_score),
        }
        if self.protocol.best_match:
            parts["best_match_hits"] = self.hits
        return {"diversity": parts}


def _fold(total, value):
    total[0] += transitlm.evaluation.records._number(value)
    total[1] += 1


def _mean(total):
    return total[0] / total[1] if total[1] else None


def render_diversity(out, parts, protocol):
    if "best_match_hits" in parts:
        out.title("Part A  Best-match hits (exact matches, by the route that matched)")
        for key in KEYS:
            out.count("found in " + key, parts["best_match_hits"][key])
    out.title("Part B  Reachability per predicted route")
    out.text("  %-12s %8s %10s" % ("route", "present", "reachable"))
    for key in KEYS:
        row = parts["route_reachability"][key]
        out.text("  %-12s %8d %10d  %s" % (key, row["present"], row["reachable"],
                                          transitlm.evaluation.reports.fmt_pct(row["reachable"], row["present"])))
    out.count("rows whose routes are all reachable", parts["all_routes_reachable"])
    out.title("Part C  Route diversity")
    for count, rows in parts["route_count_distribution"].items():
        out.count("rows with %s route(s)" % count, rows)
    scope = "all rows" if protocol.rd_over_all_rows else "rows with >= 2"
    out.value("RD mean, prediction (%s)" % scope, transitlm.evaluation.reports.fmt_num(parts["rd_mean"], 4))
    out.value("RD mean, label (%s)" % scope, transitlm.evaluation.reports.fmt_num(parts["rd_label_mean"], 4))
    out.title("Part D  Expert score per route")
    for key in KEYS:
        out.value("%s route mean" % key,
                  transitlm.evaluation.reports.fmt_num(parts["route_expert_score_mean"][key], 2))
    out.value("first route mean (label score > 0)",
              transitlm.evaluation.reports.fmt_num(parts["first_expert_score_mean"], 2))
    out.value("label first route mean", transitlm.evaluation.reports.fmt_num(parts["label_first_expert_score_mean"], 2))


if __name__ == "__main__":
    transitlm.cli.script_main(Diversity())
