"""The command line of compare.py: options, checking that no output overwrites
an input, writing the outputs.

Standard library only; Python 3.8+.
"""

import gc
import os
import sys

from common import InputError
import transitlm.io.exit_status
from transitlm.io.files import RUN_JSON
from transitlm.compare.breakdowns import BREAKDOWNS
from transitlm.compare.formats import (FORMATS, format_csv, format_markdown, format_text,
                                       one_line, result_json)
from transitlm.compare.latex import format_latex
from transitlm.compare.group_figures import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from transitlm.compare.groups import compare
from transitlm.compare.run_folders import CompareError, load_run, run_argument, run_files
from transitlm.io.files import RUN_FOLDER_FILES, Outputs, overwrite_problem, unwritable_problem
from transitlm.io.terminal import CommandParser

FORMATTERS = {"text": format_text, "markdown": format_markdown, "latex": format_latex,
              "csv": format_csv}
MAX_RESAMPLES = 100000
# Files of a run folder an output must not replace, beside compare's inputs.


def build_parser():
    parser = CommandParser(
        prog="compare.py",
        description="Compare TransitLM evaluation runs: metrics with bootstrap intervals, "
                    "paired significance against a baseline, breakdowns; runs of several "
                    "benchmarks give the paper's main table.")
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run folder written with --out, or a details JSONL with its "
                             "report JSON beside it")
    parser.add_argument("--names",
                        help="comma-separated names, one per run; runs of different "
                             "benchmarks with the same name are one model (default: the model "
                             "%s records, else the folder name)" % RUN_JSON)
    parser.add_argument("--baseline", help="name of the baseline model (default: the first)")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES, metavar="N",
                        help="bootstrap resamples (default %(default)s; 0 = no intervals)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="random seed (default %(default)s)")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                        help="interval confidence level (default %(default)s)")
    parser.add_argument("--format", choices=FORMATS,
                        help="stdout format (default text)")
    parser.add_argument("--json", metavar="PATH",
                        help="write the comparison as JSON (- : to stdout, instead of --format)")
    parser.add_argument("--html", metavar="PATH",
                        help="write the comparison as an HTML page (- : to stdout, instead of "
                             "--format)")
    parser.add_argument("--by", action="append", choices=BREAKDOWNS, default=[],
                        help="breakdown (repeatable)")
    parser.add_argument("--allow_different_inputs", "--allow-different-inputs", action="store_true",
                        help="compare runs of one benchmark scored on different test or "
                             "station files (refused otherwise); every output then says so")
    return parser


def html_page(result):
    try:                                 # loaded only when a page is asked for
        from transitlm.compare.page import comparison_page
    except ImportError:
        raise CompareError("--html needs the transitlm.pages package, which is not in this checkout")
    return comparison_page(result)


def protected_files(paths):
    """(what, path) of every input of the runs and the other files of their
    folders; CompareError for a RUN that is not there."""
    protected = []
    for path in paths:
        report, details, run_json = run_files(path)
        protected += [("an input", report), ("an input", details), ("an input", run_json)]
        if os.path.isdir(path):
            protected += [("a file of run folder %s," % path, os.path.join(path, name))
                          for name in RUN_FOLDER_FILES]
    return protected


def check_outputs(outputs, paths):
    """No output may replace an input, a run folder's file or another output
    (transitlm.io.files.overwrite_problem: symlinks, hard links, ./ spellings)."""
    for flag, output in outputs:
        if os.path.isdir(output):
            raise CompareError("%s %s is a folder, expected a file name" % (flag, output))
    problem = unwritable_problem(outputs) or overwrite_problem(outputs, protected_files(paths))
    if problem:
        raise CompareError(problem)


def check_options(args):
    if not 0 <= args.bootstrap <= MAX_RESAMPLES:
        raise CompareError("--bootstrap must be from 0 to %d" % MAX_RESAMPLES)
    if not 0.0 < args.confidence < 1.0:
        raise CompareError("--confidence must be between 0 and 1 (e.g. 0.95)")


def stdout_output(args):
    """The flag whose output goes to standard output instead of --format's
    (``--json -`` or ``--html -``), or None; CompareError when two outputs
    ask for it."""
    wanted = [flag for flag, path in (("--json", args.json), ("--html", args.html))
              if path == "-"]
    if len(wanted) > 1:
        raise CompareError("%s - both ask for standard output: only one output can go there"
                           % " - and ".join(wanted))
    if wanted and args.format is not None:
        raise CompareError("%s - writes to standard output instead of --format %s: give one "
                           "of them" % (wanted[0], args.format))
    return wanted[0] if wanted else None


def write_stdout_bytes(data):
    """UTF-8 bytes to standard output: the same bytes as in a file."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:                   # a text stream (a test's StringIO)
        sys.stdout.write(data.decode("utf-8"))
        return
    sys.stdout.flush()
    buffer.write(data)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    # Nothing built here holds a reference cycle; the cyclic collector would
    # only re-scan the growing list of decoded rows (as in transitlm.cli.run).
    gc.disable()
    try:
        check_options(args)
        to_stdout = stdout_output(args)
        by = list(dict.fromkeys(args.by))
        paths = [run_argument(path) for path in args.runs]
        outputs = [(flag, path) for flag, path in (("--json", args.json), ("--html", args.html))
                   if path and path != "-"]
        check_outputs(outputs, paths)
        needs = (("city",) if "city" in by else ()) + (
            ("failure_codes",) if "failure" in by else ())
        runs = [load_run(path, needs) for path in paths]
        result = compare(runs, args.baseline, args.bootstrap, args.seed, args.confidence, by,
                         args.allow_different_inputs, args.names)
        texts = {"--json": result_json(result) if args.json else None,
                 "--html": html_page(result) if args.html else None}
        # backslashreplace: a lone surrogate (a folder name that is not UTF-8)
        # is written as its \\u escape, which is also what JSON calls it.
        with Outputs() as files:
            for flag, path in outputs:
                files.write(path, texts[flag], errors="backslashreplace")
        if to_stdout:
            write_stdout_bytes(texts[to_stdout].encode("utf-8", "backslashreplace"))
        else:
            sys.stdout.write(FORMATTERS[args.format or "text"](result))
        sys.stdout.flush()
    except (CompareError, InputError) as exc:
        sys.stderr.write("error: %s\n" % one_line(str(exc)))
        return transitlm.io.exit_status.EXIT_USAGE
    except KeyboardInterrupt as exc:
        sys.stderr.write("\n%s\n" % transitlm.io.exit_status.interrupted_message(exc))
        return transitlm.io.exit_status.interrupted_status(exc)
    finally:
        gc.enable()
    return transitlm.io.exit_status.EXIT_OK
