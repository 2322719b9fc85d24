"""The command line of harness.py: ``lm-eval`` writes a task folder for
lm-evaluation-harness (transitlm.harness.lm_eval_tasks) and says how to run it.

Standard library only; Python 3.8+.
"""

import os
import shlex
import sys

from common import PROTOCOLS, InputError
from transitlm.catalog import BENCHMARK_NAMES, DATA_DIR, DATA_ENV, benchmark_info
from transitlm.exit_status import EXIT_OK, EXIT_USAGE
from transitlm.generate.runner import UsageError, infer_benchmark, scan_input
from transitlm.harness.lm_eval_tasks import GROUP, MAX_GEN_TOKS, TASKS, write_task_folder
from transitlm.terminal import CommandParser, one_line, positive_int, printable

PROG = "harness.py"
# How the folder is run, shown after it is written (an OpenAI-compatible server).
RUN_COMMAND = ("lm_eval --model local-chat-completions --model_args "
               "base_url=http://127.0.0.1:8000/v1/chat/completions,model=NAME "
               "--tasks %s --include_path %s --apply_chat_template --output_path OUT "
               "--log_samples")


def build_parser():
    parser = CommandParser(
        prog=PROG, description="TransitLM inside other evaluation tools (docs/harness.md).")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    lm_eval = commands.add_parser(
        "lm-eval", help="write a task folder for lm-evaluation-harness (--include_path)",
        description="Write a task folder for lm-evaluation-harness: the tasks %s and the "
                    "group %s over the test files given (default: the bundled examples), "
                    "scored by the evaluators' own rules." % (", ".join(TASKS.values()), GROUP))
    lm_eval.add_argument("--input", action="append", metavar="CSV",
                         help="test file (the release's columns: index_id, system_prompt, "
                              "sft_prompt, sft_label, req_type for benchmark 2); repeat it "
                              "for more benchmarks (default: the four bundled examples in "
                              "data/)")
    lm_eval.add_argument("--benchmark", choices=BENCHMARK_NAMES,
                         help="benchmark of a single --input (default: inferred from its "
                              "name, else its data)")
    lm_eval.add_argument("--station_info", metavar="CSV",
                         help="station file (default: $%s's, else the bundled "
                              "data/station_info.csv)" % DATA_ENV)
    lm_eval.add_argument("--line_info", metavar="CSV",
                         help="line file of the general-LLM task (default: the one beside "
                              "the station file)")
    lm_eval.add_argument("--protocol", choices=sorted(PROTOCOLS), default="reference",
                         help="reference: the published evaluator's rules (default); paper: "
                              "the TransitLM paper's definitions")
    lm_eval.add_argument("--max_gen_toks", type=positive_int, default=MAX_GEN_TOKS,
                         metavar="N",
                         help="most tokens per answer (default %d: room for a reasoning "
                              "model; the harness's own default, 256, cuts answers short)"
                              % MAX_GEN_TOKS)
    lm_eval.add_argument("--allow_foreign_network", action="store_true",
                         help="write the tasks even when most of a test file's label "
                              "stations are not in the station file (or the network.json "
                              "beside it names another network)")
    lm_eval.add_argument("--out", required=True, metavar="DIR",
                         help="the task folder to write (new or empty; give it to lm_eval "
                              "as --include_path)")
    lm_eval.add_argument("--overwrite", action="store_true",
                         help="replace a task folder this command wrote before")
    return parser


def chosen_inputs(args):
    """[(benchmark, test file, how the benchmark was chosen)] of the command line."""
    if not args.input:
        if args.benchmark:
            raise InputError("--benchmark names the benchmark of an --input")
        return [(name, os.path.join(DATA_DIR, benchmark_info(name).default_input),
                 "bundled example") for name in BENCHMARK_NAMES]
    if args.benchmark and len(args.input) > 1:
        raise InputError("--benchmark names the benchmark of a single --input; with several, "
                         "each is inferred from its name or data")
    chosen = []
    for path in args.input:
        if args.benchmark:
            benchmark, why = args.benchmark, "--benchmark"
        else:
            try:
                benchmark, why = infer_benchmark(path, scan_input(path))
            except UsageError as exc:
                raise InputError(str(exc))
        for other, other_path, _ in chosen:
            if other == benchmark:
                raise InputError("--input %s and --input %s are both %s test files: give one "
                                 "per benchmark" % (other_path, path, benchmark))
        chosen.append((benchmark, path, why))
    return chosen


def lm_eval_command(args, out):
    chosen = chosen_inputs(args)
    settings = write_task_folder(args.out, [(benchmark, path) for benchmark, path, _ in chosen],
                                 args.protocol, args.station_info, args.line_info,
                                 args.max_gen_toks, args.overwrite, args.allow_foreign_network)
    folder = os.path.abspath(args.out)
    out.write("Wrote the lm-evaluation-harness task folder %s\n" % printable(folder))
    width = max(len(TASKS[benchmark]) for benchmark, _, _ in chosen)
    for benchmark, path, why in chosen:
        task = settings["tasks"][TASKS[benchmark]]
        out.write("  %-*s  %5d rows  %s  (%s)\n" % (width, TASKS[benchmark], task["rows"],
                                                   printable(path), why))
        for warning in task.get("warnings", ()):
            out.write("  %-*s  WARNING: %s\n" % (width, "", printable(warning)))
        if task["system_prompt"] == "default":
            out.write("  %-*s  the file has no system_prompt column: the default system "
                      "prompt is sent (docs/harness.md)\n" % (width, ""))
    out.write("  group %s, protocol %s, stations %s\n"
              % (GROUP, settings["protocol"], printable(settings["station_info"])))
    out.write("Run it (any model backend; here an OpenAI-compatible chat server):\n  %s\n"
              % (RUN_COMMAND % (GROUP, printable(shlex.quote(folder)))))
    return EXIT_OK


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        return lm_eval_command(args, out)
    except InputError as exc:
        err.write(one_line("%s %s: error: %s" % (PROG, args.command, exc)) + "\n")
        return EXIT_USAGE
