"""The command line every evaluator shares: flags, output files, exit statuses.

Standard library only; Python 3.8+.
"""

import gc
import os
import sys
import tempfile

from common import InputError, PROTOCOLS
from transitlm.evaluation.catalog import DATA_DIR, DATA_ENV, station_file
from transitlm.evaluation.engine import Options, RowSinks, evaluate_stream
from transitlm.io.files import (
    DETAILS_JSONL, REPORT_HTML, REPORT_JSON, REPORT_TXT, RUN_JSON, OutputFile, Outputs,
    is_stream, overwrite_problem, settings_path, unwritable_problem)
from transitlm.evaluation.provenance import (
    check_run_folder, command_line, read_generation, run_json,
    run_record)
from transitlm.evaluation.inputs import CHUNK_BYTES
from transitlm.evaluation.workers import MIN_ROWS_PER_WORKER
from transitlm.evaluation.reports import failures_title, render_text_head, render_text_tail, report_json
from transitlm.io.exit_status import (
    EXIT_OK, EXIT_SERVICE, EXIT_USAGE, EXIT_WORKER, ServiceError, WorkerFailed,
    interrupted_message, interrupted_status, run_command)
from transitlm.io.terminal import CommandParser, non_negative_int, one_line

# -- the command line -------------------------------------------------------------

def build_parser(benchmark):
    parser = CommandParser(
        prog=os.path.join(os.path.basename(os.path.dirname(sys.argv[0]) or "."),
                          os.path.basename(sys.argv[0])),
        description="%s: score model routes against the station graph (TransitLM)."
        % benchmark.title)
    parser.add_argument("--input", default=os.path.join(DATA_DIR, benchmark.default_input),
                        help="sample CSV (default: the bundled example data/%s)"
                        % benchmark.default_input)
    parser.add_argument("--input_field", choices=("generate_results", "sft_label"),
                        default="generate_results",
                        help="column holding the prediction; sft_label scores the label "
                             "against itself (a sanity check)")
    parser.add_argument("--predictions", metavar="PATH",
                        help="model outputs in a separate file (JSON Lines or CSV with "
                             "index_id/indexid and generate_results), joined to the test "
                             "rows by id")
    parser.add_argument("--strict_json", action="store_true",
                        help="read --predictions as the published evaluator reads a cell: "
                             "the text must be JSON (no reasoning block, no text around "
                             "it), else an error row")
    parser.add_argument("--sample_count", type=non_negative_int, metavar="N",
                        help="evaluate only the first N rows")
    parser.add_argument("--station_info", metavar="CSV",
                        help="station file (default: $%s/station_info.csv or "
                             "transit-lm-station-info.csv if set, else the bundled "
                             "data/station_info.csv)" % DATA_ENV)
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="reference",
                        help="reference: the published evaluator's rules, quirks included "
                             "(default); paper: the TransitLM paper's definitions")
    parser.add_argument("--allow_foreign_network", action="store_true",
                        help="score even when most of the labels' stations are not in the "
                             "station file, or the network.json beside the test file names "
                             "another network (recorded in the report and %s)" % RUN_JSON)
    parser.add_argument("--allow_other_benchmark", action="store_true",
                        help="score even when the test file's first rows look like another "
                             "benchmark's (labels with first/second/third routes, labels "
                             "naming stations, req_type preferences; recorded in the report "
                             "and %s)" % RUN_JSON)
    parser.add_argument("--out", metavar="DIR",
                        help="write a run folder: DIR/%s, DIR/%s, DIR/%s, DIR/%s and DIR/%s "
                             "(who made it); DIR is created. A folder that already holds a "
                             "run is refused unless --overwrite"
                             % (REPORT_JSON, DETAILS_JSONL, REPORT_TXT, REPORT_HTML, RUN_JSON))
    parser.add_argument("--overwrite", action="store_true",
                        help="let --out replace the run a folder already holds")
    parser.add_argument("--json", metavar="PATH",
                        help="write the JSON report to PATH ('-' = stdout, replacing the "
                             "text report)")
    parser.add_argument("--details", metavar="PATH",
                        help="write one JSON line per input row (verdicts, reasons, failure "
                             "codes); '-' = stdout, replacing the text report")
    parser.add_argument("--html", metavar="PATH",
                        help="write a self-contained HTML report (funnel, failure reasons, "
                             "row explorer with route maps)")
    parser.add_argument("--html_rows", type=non_negative_int, default=500, metavar="N",
                        help="rows listed (with a map each) in the HTML report: failures "
                             "first, then a sample of passed rows (default 500)")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-row failure lines and no progress line")
    parser.add_argument("--workers", type=non_negative_int, default=0, metavar="N",
                        help="evaluate in up to N forked worker processes (where fork is "
                             "available; each takes chunks of about %d KB of the file, or "
                             "with --predictions or --sample_count at least %d rows); every "
                             "output is identical to a single-process run. 0 = one per CPU "
                             "core (default); 1 = a single process"
                             % (CHUNK_BYTES // 1024, MIN_ROWS_PER_WORKER))
    benchmark.add_arguments(parser)
    return parser


# Flags of the command line that are not evaluation options (where outputs go).
OUTPUT_FLAGS = ("out", "overwrite", "json", "details", "html", "html_rows")


def options_from_args(benchmark, args):
    values = {key: value for key, value in vars(args).items() if key not in OUTPUT_FLAGS}
    return Options(benchmark, **values)


def _output_plan(args, benchmark, options):
    """Where each output goes -> dict of role -> path ('-' = stdout); exit 2 on
    clashes (two outputs to one file, two to stdout)."""
    plan = {"json": args.json, "details": args.details, "html": args.html}
    if args.out:
        for role, name in OUT_FILES:
            plan[role] = os.path.join(args.out, name)
    to_stdout = [role for role, path in plan.items() if path == "-"]
    if len(to_stdout) > 1:
        raise InputError("only one output can go to stdout ('-'), not --%s"
                         % " and --".join(to_stdout))
    if plan["html"] == "-":
        raise InputError("--html needs a file name")
    files = [(_role_name(role), path) for role, path in plan.items() if path != "-"]
    problem = unwritable_problem(files) or overwrite_problem(
        files,
        [("the input file", args.input), ("the predictions file", args.predictions),
         ("the settings file of the predictions",
          settings_path(args.predictions) if args.predictions else None),
         ("the station file", station_file(args.station_info))]
        + benchmark.input_files(options))
    if problem:
        raise InputError(problem)
    if args.out:
        check_run_folder(args.out, args.overwrite)
    return plan


# The run folder's files by their role in the plan.
OUT_FILES = (("out_json", REPORT_JSON), ("out_details", DETAILS_JSONL), ("out_text", REPORT_TXT),
             ("out_html", REPORT_HTML), ("out_run", RUN_JSON))


def _role_name(role):
    names = {"json": "--json", "details": "--details", "html": "--html"}
    names.update((key, "--out's " + name) for key, name in OUT_FILES)
    return names[role]


def run(benchmark, argv=None):
    """Parse arguments, evaluate, write the reports; return the exit status.
    A signal while the arguments are parsed or the run goes on ends in its
    status (130/143) with nothing written, never in a KeyboardInterrupt."""
    try:
        args = build_parser(benchmark).parse_args(argv)
        # Nothing the evaluators build holds a reference cycle: reference counting
        # frees it all, and the cyclic collector would only re-scan the station index.
        gc.disable()
        return _run(benchmark, args)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_USAGE
    except ServiceError as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_SERVICE
    except WorkerFailed as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_WORKER
    except KeyboardInterrupt as exc:
        sys.stderr.write("\n%s\n" % interrupted_message(exc))
        return interrupted_status(exc)
    finally:
        gc.enable()


def _run(benchmark, args):
    options = options_from_args(benchmark, args)
    plan = _output_plan(args, benchmark, options)
    generation = read_generation(args.predictions) if args.out else None
    outputs = Outputs()                # files and folders, kept only when all went well
    output = outputs.open
    spools = []

    def spool(binary=False):
        handle = _Spool(binary)
        spools.append(handle)
        return handle

    try:
        # A run folder is created only now, after the plan's checks, and removed
        # again (with the parents it needed) when the run does not succeed.
        if args.out:
            outputs.make_folders(args.out, "run folder")
        # The details are read back after the rounds for a page or standard
        # output: from the first details file that is not a stream (a device
        # or a pipe is written through, and cannot be read back), else a spool.
        read_back = plan["details"] == "-" or plan["html"] or plan.get("out_html")
        details_files = [path for path in (plan.get("out_details"), plan["details"])
                         if path not in (None, "-")]
        details_path = next((path for path in details_files
                             if not (read_back and is_stream(path))), None)
        details = None
        if details_path:
            details = output(details_path, binary=True)
        elif details_files or read_back:
            details = spool(binary=True)
        text_wanted = not any(plan[role] == "-" for role in ("json", "details")) \
            or plan.get("out_text")
        failures = None
        if text_wanted and not options.quiet:
            failures = spool()

        report, sinks, network = evaluate_stream(
            benchmark, options, lambda aggregate: RowSinks(aggregate, details, failures))

        json_text = report_json(report)
        for role in ("json", "out_json"):
            if plan.get(role) and plan[role] != "-":
                output(plan[role]).write(json_text)
        for path in details_files:
            if path != details_path:
                _copy_spool(details, output(path, binary=True))
        text_parts = None
        if text_wanted:
            head = render_text_head(benchmark, report)
            tail = render_text_tail(report)
            text_parts = (head, failures, sinks.failing, report["counts"]["samples"], tail)
            if plan.get("out_text"):
                _write_text_report(output(plan["out_text"]), text_parts)
        for role in ("html", "out_html"):
            if plan.get(role):
                _write_html(output(plan[role]), report, details, network, args.html_rows)
        if plan.get("out_run"):
            output(plan["out_run"]).write(run_json(run_record(report, command_line(),
                                                              generation)))
        # Standard output first, then the files renamed into place together:
        # a run stopped before that point leaves none of its outputs, and one
        # past it has finished (transitlm.io.files.Outputs.commit).
        try:
            if plan["json"] == "-":
                _stdout_write(json_text)
            elif plan["details"] == "-":
                _stdout_copy(details)
            else:
                _write_text_report(_StdoutWriter(), text_parts)
            _stdout_flush()
        except BrokenPipeError:
            pass                       # `evaluate.py | head`: the files are still written
        outputs.commit()
    finally:
        outputs.discard()
        for handle in spools:
            handle.handle.close()
    return EXIT_OK


class _Spool(object):
    """A temporary file for an output assembled after the rounds (failure lines,
    details for stdout or the HTML page)."""

    def __init__(self, binary=False):
        self.handle = tempfile.NamedTemporaryFile(
            mode="w+b" if binary else "w+", prefix="transitlm-",
            **({} if binary else {"encoding": "utf-8", "newline": "\n"}))
        self.path = self.handle.name

    def write(self, data):
        self.handle.write(data)

    def chunks(self):
        self.handle.flush()
        self.handle.seek(0)
        return iter(lambda: self.handle.read(1 << 20), self.handle.read(0))


def _blocks(source):
    """The bytes written so far to a spool or to an output not yet committed."""
    if isinstance(source, OutputFile):
        source.handle.flush()
        with open(source.temp, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                yield block
    else:
        for block in source.chunks():
            yield block


def _copy_spool(source, target):
    for block in _blocks(source):
        target.write(block)


def _write_text_report(target, parts):
    head, failures, failing, samples, tail = parts
    target.write(head)
    if failures is not None:
        target.write(failures_title(failing, samples))
        for block in failures.chunks():
            target.write(block)
    target.write(tail)


def _write_html(target, report, details, network, html_rows):
    from transitlm import pages
    if isinstance(details, OutputFile):
        details.handle.flush()
        path = details.temp
    else:
        details.handle.flush()
        path = details.path
    target.write(pages.evaluator_page(report, path, network, html_rows))


class _StdoutWriter(object):
    def write(self, text):
        _stdout_write(text)


# Writing to standard output: a closed pipe (BrokenPipeError) passes through
# (the run still writes its files); any other failure is a usage error.

def _stdout_write(text):
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError("cannot write to standard output: %s" % (exc.strerror or exc))


def _stdout_copy(source):
    try:
        sys.stdout.flush()
        out = sys.stdout.buffer
        for block in _blocks(source):
            out.write(block)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError("cannot write to standard output: %s" % (exc.strerror or exc))


def _stdout_flush():
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError("cannot write to standard output: %s" % (exc.strerror or exc))


def script_main(benchmark):
    """Entry point of a scenario script: run and exit with its status."""
    sys.exit(run_command(lambda argv: run(benchmark, argv)))
