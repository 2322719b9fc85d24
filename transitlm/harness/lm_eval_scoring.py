"""What lm-evaluation-harness calls in the TransitLM tasks: each answer scored
by the project's own scoring, each figure aggregated by the evaluator's own
aggregation, so the harness's results equal report.json's ``metrics``.

A task folder's utils.py (written by ``harness.py lm-eval``) takes its
functions from ``task_functions(settings)``; for each benchmark:

``process_<benchmark>(doc, results)`` -- the task's process_results.  The
model's text (``results[0]``) is scored against the row (``doc``) by
transitlm.reward.scoring's Scorer -- the evaluators' own RowJudge, reading
the answer as ``evaluate.py --predictions`` does (reasoning left out, the
JSON found in the text) -- and one value per metric of the benchmark comes
back, in the catalogue's order:

  ``conn``: the row's details record, as details.jsonl holds it without the
      drawn routes (``row``: the row's number in the test file): its verdicts,
      failure codes and reasons, what ``--log_samples`` writes for the row;
  each other metric: the row's (numerator, denominator) of that metric
      (transitlm.evaluation.terms), a two-item list in the samples log, the record
      beside it in memory (``RowTerm.record``).

``<benchmark>_<metric>(items)`` -- the metric's aggregation: the rows'
records, put in test-file order (the harness's ranks hand them over
interleaved), folded by transitlm.evaluation.records.aggregate_records -- the
evaluator's own fold: its sums in input order, its denominators, MAPE as the
mean of three means -- and that metric taken from the figures, a non-finite
figure as None (report.json's null).

Standard library only; Python 3.8+.
"""

import json

from transitlm.evaluation.catalog import BENCHMARK_NAMES, benchmark_metrics
from transitlm.evaluation.records import aggregate_records
from transitlm.evaluation.reports import details_bytes, finite_or_none
from transitlm.reward.scoring import scorer_for
from transitlm.evaluation.terms import metric_terms

# The routes a record draws for the evaluator's page: the samples log has the
# answer and the label already.
DRAWINGS = ("prediction_routes", "label_routes")


def process_name(benchmark):
    """The name of a benchmark's process_results function in utils.py."""
    return "process_" + benchmark


def aggregation_name(benchmark, metric):
    """The name of a metric's aggregation function in utils.py."""
    return "%s_%s" % (benchmark, metric)


class RowTerm(list):
    """A row's (numerator, denominator) of one metric: a two-item list, as the
    samples log writes it, with the row's record beside it (``record``, in
    memory and through pickling, never in the log) for the aggregation."""

    def __init__(self, pair, record):
        list.__init__(self, pair)
        self.record = record


def record_of(item):
    """The row's record in a metric's item: conn's item is the record itself."""
    return item.record if isinstance(item, RowTerm) else item


def row_record(scorer, doc, completion):
    """The details record of one answer to one row, compact: as details.jsonl
    holds it (non-finite figures as null), without the drawn routes, ``row``
    the doc's row number."""
    record = scorer.record(completion, doc)
    record["row"] = doc.get("row", 1)
    line = json.loads(details_bytes(record).decode("utf-8"))
    return {key: value for key, value in line.items() if key not in DRAWINGS}


def processor(benchmark, settings):
    """The process_results of one benchmark's task (see the module's docstring)."""
    keys = [metric.key for metric in benchmark_metrics(benchmark)]
    protocol = settings["protocol"]

    def process(doc, results):
        scorer = scorer_for(benchmark, protocol, settings["station_info"],
                            settings.get("line_info"))
        record = row_record(scorer, doc, results[0] if results else "")
        terms = metric_terms(benchmark, protocol, record)
        values = {keys[0]: record}
        for key in keys[1:]:
            values[key] = RowTerm(terms[key], record)
        return values

    process.__name__ = process_name(benchmark)
    return process


def aggregation(benchmark, protocol, metric):
    """A metric's aggregation: the evaluator's figure over the rows' records."""

    def aggregate(items):
        records = sorted((record_of(item) for item in items), key=lambda record: record["row"])
        return finite_or_none(aggregate_records(benchmark, protocol, records)["metrics"][metric])

    aggregate.__name__ = aggregation_name(benchmark, metric)
    return aggregate


def task_functions(settings):
    """{name: function} of every benchmark's task, for a task folder's utils.py.

    ``settings``: the folder's settings (``protocol``, ``station_info``,
    ``line_info``); the network is loaded when the first answer is scored.
    """
    functions = {}
    for benchmark in BENCHMARK_NAMES:
        functions[process_name(benchmark)] = processor(benchmark, settings)
        for metric in benchmark_metrics(benchmark):
            functions[aggregation_name(benchmark, metric.key)] = aggregation(
                benchmark, settings["protocol"], metric.key)
    return functions
