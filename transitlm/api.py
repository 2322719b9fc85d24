"""The Python API: ``evaluate()`` runs an evaluator in-process and, with
``out=DIR``, writes a run folder that ``compare.py`` accepts.

Standard library only; Python 3.8+.
"""

import os
import tempfile

from transitlm.evaluation.catalog import DATA_DIR, load_benchmark
from transitlm.evaluation.engine import Options, RowSinks, evaluate_stream
from transitlm.io.files import (
    DETAILS_JSONL, REPORT_HTML, REPORT_JSON, REPORT_TXT, RUN_JSON, Outputs)
from transitlm.evaluation.provenance import (
    check_run_folder, read_generation, run_json, run_record, without_credentials)
from transitlm.evaluation.reports import (
    details_bytes, failure_line, failures_title, render_text_head, render_text_tail, report_json)


def evaluate(benchmark_name, rows=None, out=None, overwrite=False, **options):
    """Score rows from Python -> (report, records).

    ``rows``: dicts with ``index_id`` (or ``indexid``), ``sft_prompt``,
    ``sft_label``, the prediction under ``generate_results`` (text or an
    already-decoded object) and ``req_type`` for benchmark 2; or None to read
    ``input=PATH``.  A prediction's text is read as a model writes it, as the
    command line reads ``--predictions`` (reasoning left out, the JSON found
    in the text: transitlm.evaluation.answers); ``strict_json=True`` reads it as the
    published evaluator does.  Other keywords are the CLI's options (``protocol``,
    ``station_info``, ``predictions``, ...).  Raises InputError for a
    problem with the inputs; bad rows become error records, as in the CLI.

    ``out=DIR`` also writes a run folder (report.json, details.jsonl,
    report.txt and run.json, as the CLI's ``--out`` does, without the HTML
    page); a folder that already holds a run is refused unless ``overwrite``.
    """
    benchmark = load_benchmark(benchmark_name)
    command = api_command("transitlm.evaluate", [benchmark_name], dict(
        options, **({"rows": rows} if rows is not None else {}),
        **({"out": out} if out is not None else {}),
        **({"overwrite": True} if overwrite else {})))
    if rows is None and not options.get("input"):
        options["input"] = os.path.join(DATA_DIR, benchmark.default_input)
    if out is not None:
        check_run_folder(out, overwrite, api=True)
    opts = Options(benchmark, **options)
    opts.interface = "api"
    records = []
    report, _, _ = evaluate_stream(benchmark, opts,
                                   lambda aggregate: RowSinks(aggregate, collect=records),
                                   rows=rows)
    if out is not None:
        write_run_folder(out, report, records, overwrite=overwrite, command=command,
                         generation=read_generation(options.get("predictions")))
    return report, records


def write_run_folder(folder, report, records, overwrite=False, command=None, generation=None,
                     network=None, html_rows=500):
    """Write a run folder from a report and its records (as evaluate() returns
    them): every file through a temporary name, renamed when all are written;
    a failure leaves no file and no folder it created.  With ``network`` (the
    run's StationNetwork) the folder gets the evaluator's page, report.html,
    as the CLI's --out writes it."""
    check_run_folder(folder, overwrite, api=True)
    benchmark = load_benchmark(report["benchmark"])
    with Outputs() as outputs:
        outputs.make_folders(folder, "run folder")
        outputs.write(os.path.join(folder, REPORT_JSON), report_json(report))
        details = outputs.open(os.path.join(folder, DETAILS_JSONL), binary=True)
        for record in records:
            details.write(details_bytes(record))
        text = outputs.open(os.path.join(folder, REPORT_TXT))
        text.write(render_text_head(benchmark, report))
        lines = [line for line in map(failure_line, records) if line is not None]
        text.write(failures_title(len(lines), report["counts"]["samples"]))
        text.write("".join(lines))
        text.write(render_text_tail(report))
        if command is None:
            command = api_command("transitlm.api.write_run_folder", [folder],
                                  {"overwrite": overwrite} if overwrite else {})
        record = run_record(report, command, generation)
        outputs.write(os.path.join(folder, RUN_JSON), run_json(record))
        if network is not None:
            from transitlm.pages import evaluator_page
            details.handle.flush()
            if details.temp is not None:
                page = evaluator_page(report, details.temp, network, html_rows)
            else:               # details.jsonl is a device or a pipe: read back a copy
                with tempfile.NamedTemporaryFile(prefix="transitlm-") as copy:
                    for record in records:
                        copy.write(details_bytes(record))
                    copy.flush()
                    page = evaluator_page(report, copy.name, network, html_rows)
            outputs.write(os.path.join(folder, REPORT_HTML), page)


def api_command(function, args, keywords):
    """run.json's ``command`` for a run made through the Python API: the
    call, as one text -- ["transitlm.evaluate('single_route', input='b1.csv',
    out='runs/b1')"] -- keywords in name order, rows given in memory as
    their count, credentials in a URL redacted."""
    def shown(value):
        if isinstance(value, (list, tuple)) or hasattr(value, "__next__"):
            count = len(value) if isinstance(value, (list, tuple)) else None
            return "<%s rows>" % count if count is not None else "<rows>"
        return without_credentials(repr(value))
    parts = [shown(value) for value in args]
    parts += ["%s=%s" % (key, shown(keywords[key])) for key in sorted(keywords)]
    return ["%s(%s)" % (function, ", ".join(parts))]
