"""The Python API: ``evaluate()`` runs an evaluator in-process.

Standard library only; Python 3.8+.
"""

import os

from transitlm.engine import DATA_DIR, Options, RowSinks, evaluate_stream
from transitlm.records import load_benchmark


def evaluate(benchmark_name, rows=None, **options):
    """Score rows from Python -> (report, records).

    ``rows``: dicts with ``index_id`` (or ``indexid``), ``sft_prompt``,
    ``sft_label``, the prediction under ``generate_results`` (text or an
    already-decoded object) and ``req_type`` for benchmark 2; or None to read
    ``input=PATH``.  Other keywords are the CLI's options (``protocol``,
    ``station_info``, ``predictions``, ...).  Raises InputError for a
    problem with the inputs; bad rows become error records, as in the CLI.
    """
    benchmark = load_benchmark(benchmark_name)
    if rows is None and not options.get("input"):
        options["input"] = os.path.join(DATA_DIR, benchmark.default_input)
    opts = Options(benchmark, **options)
    records = []
    report, _, _ = evaluate_stream(benchmark, opts,
                                   lambda aggregate: RowSinks(aggregate, collect=records),
                                   rows=rows)
    return report, records
