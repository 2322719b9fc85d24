"""The command line of compare.py: options, run names, writing the outputs.

Standard library only; Python 3.8+.
"""

import argparse
import gc
import os
import sys

import transitlm.status
from transitlm.breakdowns import BREAKDOWNS
from transitlm.compare_formats import FORMATS, FORMATTERS, result_json
from transitlm.comparison import (DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED,
                                  compare_runs)
from transitlm.runs import CompareError, check_failure_codes, load_run


# 7. Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="compare.py",
        description="Compare TransitLM evaluation runs: metrics with bootstrap intervals, "
                    "paired significance against a baseline, breakdowns.")
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run folder written with --out, or a details JSONL with its "
                             "report JSON beside it")
    parser.add_argument("--names", help="comma-separated run names (default: folder names)")
    parser.add_argument("--baseline", help="name of the baseline run (default: the first)")
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
    return parser


def run_names(paths, names_option):
    if names_option is not None:
        names = [name.strip() for name in names_option.split(",")]
        if len(names) != len(paths):
            raise CompareError("--names gives %d name(s) for %d run(s)"
                               % (len(names), len(paths)))
        if any(not name for name in names):
            raise CompareError("--names has an empty name")
        if len(set(names)) != len(names):
            raise CompareError("--names repeats a name")
        return names
    names = [default_name(path) for path in paths]
    if len(set(names)) != len(names):
        names = [os.path.normpath(path) for path in paths]
    seen = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else "%s#%d" % (name, seen[name]))
    return unique


def default_name(path):
    path = os.path.normpath(path)
    if os.path.isdir(path):
        return os.path.basename(os.path.abspath(path))
    base = os.path.basename(path)
    return base[:-len(".jsonl")] if base.endswith(".jsonl") else os.path.splitext(base)[0]


def write_file(path, text):
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise CompareError("cannot write %s: %s" % (path, exc.strerror or exc))


def html_page(result):
    try:
        from transitlm.pages import comparison_page
    except ImportError:
        raise CompareError("--html needs the transitlm.pages package, which is not in this checkout")
    return comparison_page(result)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    # Nothing built here holds a reference cycle; the cyclic collector would
    # only re-scan the growing list of decoded rows (as in transitlm.cli.run).
    gc.disable()
    try:
        if args.bootstrap < 0:
            raise CompareError("--bootstrap must be 0 or more")
        if not 0.0 < args.confidence < 1.0:
            raise CompareError("--confidence must be between 0 and 1 (e.g. 0.95)")
        names = run_names(args.runs, args.names)
        baseline = names[0] if args.baseline is None else args.baseline
        if baseline not in names:
            raise CompareError("--baseline %s is not one of the runs (%s)"
                               % (baseline, ", ".join(names)))
        by = list(dict.fromkeys(args.by))
        needs = (("city",) if "city" in by else ()) + (
            ("failure_codes",) if "failure" in by else ())
        runs = [load_run(name, path, needs) for name, path in zip(names, args.runs)]
        if "failure" in by:
            for run in runs:
                check_failure_codes(run)
        result = compare_runs(runs, baseline, args.bootstrap, args.seed, args.confidence, by)
        page = html_page(result) if args.html else None
        if args.json:
            write_file(args.json, result_json(result))
        if args.html:
            write_file(args.html, page)
        sys.stdout.write(FORMATTERS[args.format](result))
        sys.stdout.flush()
    except CompareError as exc:
        sys.stderr.write("error: %s\n" % exc)
        return transitlm.status.EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    finally:
        gc.enable()
    return transitlm.status.EXIT_OK

