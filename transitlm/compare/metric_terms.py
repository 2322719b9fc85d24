"""The metrics of a comparison: how they are shown, the evaluator's own
aggregation of a run's details lines, and the columns of each row's
(numerator, denominator) terms (transitlm.evaluation.terms), whose sums over the rows
give every metric.

Standard library only; Python 3.8+.
"""

import math

import common
import transitlm.evaluation.records
from transitlm.evaluation.catalog import METRIC, METRIC_KEYS
from transitlm.compare.run_folders import CompareError, shown
from transitlm.evaluation.terms import metric_terms





def scaled(key, value):
    """A figure as shown: rates in percent, the others as they are."""
    return value * 100.0 if METRIC[key].kind == "rate" else value


def decimals(key):
    """Decimals shown: 1 for rates (in percent), 2 for MAPE, 3 for means."""
    return METRIC[key].decimals


def shown_value(key, value):
    """The figure as printed (scaled and rounded), for ties and the best value."""
    return None if value is None else round(scaled(key, value), decimals(key))


def json_value(value):
    """A figure as it reads back from the report JSON (non-finite -> null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def aggregate(benchmark, protocol, records, what):
    """transitlm.evaluation.records.aggregate_records, with any failure to fold the lines as an input error."""
    try:
        return transitlm.evaluation.records.aggregate_records(benchmark, protocol, records)
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

