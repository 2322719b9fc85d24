"""Each row's terms of every metric: the (numerator, denominator) pair of one
details record such that a metric is the sum of its numerators over the sum
of its denominators over the rows -- the evaluator's own denominators, not a
mean of per-row values.

compare.py resamples these terms; the reward reads one row's terms as its
verdicts; the lm-evaluation-harness tasks sum them into the evaluator's
figures.

Standard library only; Python 3.8+.
"""

import common

# Round 5's preference types (personalized/evaluate.py PREFERENCE_NAMES).
PREFERENCE_TYPES = (2, 5, 7, 8)


def number(record, key):
    """A numeric field of a details record (None stays None: a non-finite
    figure written as null); DetailsTypeError for anything else."""
    value = record.get(key)
    if value is None or isinstance(value, (int, float)):
        return value
    raise ValueError("%s is %s, expected a number" % (key, common.type_name(value)))


def metric_terms(benchmark, protocol, record):
    """{metric: (numerator, denominator)} of one details record, such that each
    metric is sum(numerators) / sum(denominators) over the rows (the rules of
    transitlm.evaluation.records.FunnelTotals/metrics_block, personalized.PreferenceTotals and
    diversity.DiversityTotals).  A numerator may be None (a figure written as
    null), which leaves that metric without an interval.  ValueError when a
    figure has the wrong type.
    """
    rules = common.PROTOCOLS[protocol]
    evaluated = record.get("status") == "evaluated"
    entered = bool(record.get("in_funnel"))
    reached = entered and bool(record.get("reachable"))
    exact = reached and bool(record.get("exact_match"))

    def on_reached(key):
        return number(record, key) if reached else 0

    if exact:
        accurate = sum(bool(record.get(key)) for key in
                       ("distance_accurate", "time_accurate", "fare_accurate"))
        mapes = [number(record, key) for key in
                 ("distance_mape_pct", "time_mape_pct", "fare_mape_pct")]
        mape_sum = None if None in mapes else common.plain_sum(mapes)
    else:
        accurate, mape_sum = 0, 0
    terms = {
        "conn": (int(reached), int(entered)),
        "sg": (int(reached and bool(record.get("station_grounding"))), int(reached)),
        "dp": (int(reached and bool(record.get("distance_plausibility"))), int(reached)),
        "lo": (on_reached("line_iou"), int(reached)),
        "sso": (on_reached("station_iou"), int(reached)),
        "rem": (int(exact), int(reached)),
        # EA and MAPE: three estimates per exact match.
        "ea": (accurate, 3 * int(exact)),
        "mape": (mape_sum, 3 * int(exact)),
    }
    if benchmark == "personalized":
        if rules.preference_over_known:
            req_type = record.get("req_type")
            in_scope = isinstance(req_type, int) and req_type in PREFERENCE_TYPES
        else:
            in_scope = evaluated
        terms["pc"] = (int(in_scope and bool(record.get("compliant"))), int(in_scope))
    if benchmark == "diversity":
        if rules.rd_over_all_rows:
            terms["rd"] = (number(record, "rd") if evaluated else 0, 1)
        else:
            count = number(record, "route_count") if evaluated else 0
            in_scope = evaluated and count is not None and count >= 2
            terms["rd"] = (number(record, "rd") if in_scope else 0, int(in_scope))
    return terms
