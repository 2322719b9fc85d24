"""The metrics of a comparison: their labels and kinds, the evaluator's own
aggregation of a run's details lines, and each row's (numerator,
denominator) terms, whose sums over the rows give every metric.

Standard library only; Python 3.8+.
"""

import math

import common
import transitlm.records
from transitlm.catalog import METRIC, METRIC_KEYS
from transitlm.compare.run_folders import CompareError, shown





def scaled(key, value):
    """A figure as shown: rates in percent, the others as they are."""
    return value * 100.0 if METRIC[key].kind == "rate" else value


def decimals(key):
    """Decimals shown: 1 for rates (in percent), 2 for MAPE, 3 for means."""
    return METRIC[key].decimals


def shown_value(key, value):
    """The figure as printed (scaled and rounded), for ties and the best value."""
    return None if value is None else round(scaled(key, value), decimals(key))


# Round 5's preference types (personalized/evaluate.py PREFERENCE_NAMES).
PREFERENCE_TYPES = (2, 5, 7, 8)


def json_value(value):
    """A figure as it reads back from the report JSON (non-finite -> null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def aggregate(benchmark, protocol, records, what):
    """transitlm.records.aggregate_records, with any failure to fold the lines as an input error."""
    try:
        return transitlm.records.aggregate_records(benchmark, protocol, records)
    except common.InputError as exc:
        raise CompareError("%s: %s" % (what, exc))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CompareError("%s: the details lines cannot be aggregated (%s: %s)"
                           % (what, type(exc).__name__, exc))


def metric_names(benchmark, metrics):
    return [key for key in METRIC_KEYS if key in metrics]


def run_metrics(run):
    """The run's metrics recomputed from its details lines; CompareError when
    they differ from the report's (the files do not belong together)."""
    folded = aggregate(run.benchmark, run.protocol, run.records, run.details_path)
    metrics = {key: json_value(value) for key, value in folded["metrics"].items()}
    reported = run.report["metrics"]
    for key in sorted(set(metrics) | set(reported)):
        if metrics.get(key, "absent") != reported.get(key, "absent"):
            raise CompareError(
                "%s: metric %s recomputed from %s is %s but the report says %s: the files "
                "do not belong together" % (run.report_path, shown(key), run.details_path,
                                            shown(metrics.get(key, "absent")),
                                            shown(reported.get(key, "absent"))))
    return metrics, folded


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
    transitlm.records.FunnelTotals/metrics_block, personalized.PreferenceTotals and
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


def term_columns(run, records, metrics):
    """Per-row numerator and denominator columns of `metrics` for records of a run."""
    numerators = {key: [] for key in metrics}
    denominators = {key: [] for key in metrics}
    for record in records:
        try:
            terms = metric_terms(run.benchmark, run.protocol, record)
        except ValueError as exc:
            raise CompareError("%s row %s: %s" % (run.details_path, record.get("row"), exc))
        for key in metrics:
            numerator, denominator = terms[key]
            numerators[key].append(numerator)
            denominators[key].append(denominator)
    return numerators, denominators

