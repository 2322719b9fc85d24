"""The command line of compare.py: options, checking that no output overwrites
an input, writing the outputs.

Standard library only; Python 3.8+.
"""

import argparse
import gc
import os
import sys

from common import VERSION
import transitlm.status
from transitlm.compare.breakdowns import BREAKDOWNS
from transitlm.compare.formats import (FORMATS, format_csv, format_markdown, format_text,
                                       one_line, result_json)
from transitlm.compare.latex import format_latex
from transitlm.compare.group_figures import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from transitlm.compare.groups import compare
from transitlm.compare.run_folders import CompareError, load_run, run_files

FORMATTERS = {"text": format_text, "markdown": format_markdown, "latex": format_latex,
              "csv": format_csv}
MAX_RESAMPLES = 100000
# Files of a run folder an output must not replace, beside compare's inputs.
RUN_FOLDER_FILES = ("report.json", "details.jsonl", "run.json", "report.txt", "report.html")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="compare.py",
        description="Compare TransitLM evaluation runs: metrics with bootstrap intervals, "
                    "paired significance against a baseline, breakdowns; runs of several "
                    "benchmarks give the paper's main table.")
    parser.add_argument("--version", action="version", version="transitlm " + VERSION,
                        help="print the project's version and exit")
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run folder written with --out, or a details JSONL with its "
                             "report JSON beside it")
    parser.add_argument("--names",
                        help="comma-separated names, one per run; runs of different "
                             "benchmarks with the same name are one model (default: the model "
                             "run.json records, else the folder name)")
    parser.add_argument("--baseline", help="name of the baseline model (default: the first)")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES, metavar="N",
                        help="bootstrap resamples (default %(default)s; 0 = no intervals)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="random seed (default %(default)s)")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                        help="interval confidence level (default %(default)s)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="stdout format (default %(default)s)")
    parser.add_argument("--json", metavar="PATH", help="write the comparison as JSON")
    parser.add_argument("--html", metavar="PATH", help="write the comparison as an HTML page")
    parser.add_argument("--by", action="append", choices=BREAKDOWNS, default=[],
                        help="breakdown (repeatable)")
    parser.add_argument("--allow_different_inputs", "--allow-different-inputs", action="store_true",
                        help="compare runs of one benchmark scored on different test or "
                             "station files (refused otherwise); every output then says so")
    return parser


def write_file(path, text):
    try:
        # backslashreplace: a lone surrogate (a folder name that is not UTF-8)
        # is written as its \\u escape, which is also what JSON calls it.
        with open(path, "w", encoding="utf-8", errors="backslashreplace",
                  newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise CompareError("cannot write %s: %s" % (path, exc.strerror or exc))


def html_page(result):
    try:                                 # loaded only when a page is asked for
        from transitlm.compare.page import comparison_page
    except ImportError:
        raise CompareError("--html needs the transitlm.pages package, which is not in this checkout")
    return comparison_page(result)


def _same_file(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def protected_files(paths):
    """(path, what) of every input of the runs and the other files of their
    folders; CompareError for a RUN that is not there."""
    protected = []
    for path in paths:
        report, details, run_json = run_files(path)
        protected += [(report, "an input (%s)" % report), (details, "an input (%s)" % details)]
        if run_json:
            protected.append((run_json, "an input (%s)" % run_json))
        if os.path.isdir(path):
            for name in RUN_FOLDER_FILES:
                protected.append((os.path.join(path, name), "a file of run folder %s" % path))
    return protected


def check_outputs(outputs, paths):
    """No output may replace an input, a run folder's file or another output
    (compared by real path and by file identity: symlinks, hard links, ./)."""
    protected = protected_files(paths)
    for index, (flag, output) in enumerate(outputs):
        if os.path.isdir(output):
            raise CompareError("%s %s is a folder, expected a file name" % (flag, output))
        for path, what in protected:
            if _same_file(output, path):
                raise CompareError("%s %s is %s: refusing to overwrite it" % (flag, output, what))
        for other_flag, other in outputs[:index]:
            if _same_file(output, other):
                raise CompareError("%s and %s name the same file (%s)" % (other_flag, flag,
                                                                          output))


def check_options(args):
    if not 0 <= args.bootstrap <= MAX_RESAMPLES:
        raise CompareError("--bootstrap must be from 0 to %d" % MAX_RESAMPLES)
    if not 0.0 < args.confidence < 1.0:
        raise CompareError("--confidence must be between 0 and 1 (e.g. 0.95)")


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    # Nothing built here holds a reference cycle; the cyclic collector would
    # only re-scan the growing list of decoded rows (as in transitlm.cli.run).
    gc.disable()
    try:
        check_options(args)
        by = list(dict.fromkeys(args.by))
        outputs = [(flag, path) for flag, path in (("--json", args.json), ("--html", args.html))
                   if path]
        check_outputs(outputs, args.runs)
        needs = (("city",) if "city" in by else ()) + (
            ("failure_codes",) if "failure" in by else ())
        runs = [load_run(path, needs) for path in args.runs]
        result = compare(runs, args.baseline, args.bootstrap, args.seed, args.confidence, by,
                         args.allow_different_inputs, args.names)
        page = html_page(result) if args.html else None
        stdout = FORMATTERS[args.format](result)
        if args.json:
            write_file(args.json, result_json(result))
        if args.html:
            write_file(args.html, page)
        sys.stdout.write(stdout)
        sys.stdout.flush()
    except CompareError as exc:
        sys.stderr.write("error: %s\n" % one_line(str(exc)))
        return transitlm.status.EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    finally:
        gc.enable()
    return transitlm.status.EXIT_OK
