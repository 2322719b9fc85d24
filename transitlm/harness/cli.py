"""The command line of harness.py: ``lm-eval`` writes a task folder for
lm-evaluation-harness (transitlm.harness.lm_eval_tasks) and says how to run it.

Standard library only; Python 3.8+.
"""

import os
import shlex
import sys

from common import PROTOCOLS, InputError
from transitlm.evaluation.catalog import (BENCHMARK_NAMES, DATA_DIR, DATA_ENV, RELEASE_TEST_FILES,
                               STATION_FILE_NAMES, benchmark_info, folder_file, release_file,
                               release_test_files)
from transitlm.io.files import DETAILS_JSONL, REPORT_HTML, REPORT_JSON, REPORT_TXT, RUN_JSON
from transitlm.io.exit_status import EXIT_OK, EXIT_USAGE
from transitlm.generate.runner import UsageError, infer_benchmark, scan_input
from transitlm.harness.context_fit import MIN_ANSWER_TOKENS
from transitlm.harness.lm_eval_import import import_run
from transitlm.harness.lm_eval_tasks import GROUP, MAX_GEN_TOKS, TASKS, write_task_folder
from transitlm.evaluation.chat_messages import DEFAULT, read_prompt_file
from transitlm.evaluation.provenance import command_line
from transitlm.io.terminal import CommandParser, one_line, positive_int, printable

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
    lm_eval.add_argument("--data", metavar="DIR",
                         help="a release folder (data/make_dataset.py's --out, or the "
                              "published release): the tasks of every test file it holds "
                              "(%s) on its station file, transit-lm-station-info.csv, and "
                              "its line file; instead of --input"
                              % ", ".join(RELEASE_TEST_FILES))
    lm_eval.add_argument("--benchmark", choices=BENCHMARK_NAMES,
                         help="benchmark of a single --input (default: inferred from its "
                              "name, else its data)")
    lm_eval.add_argument("--station_info", metavar="CSV",
                         help="station file (default: --data's, else $%s's, else the "
                              "bundled data/station_info.csv)" % DATA_ENV)
    lm_eval.add_argument("--line_info", metavar="CSV",
                         help="line file of the general-LLM task (default: the one beside "
                              "the station file)")
    lm_eval.add_argument("--protocol", choices=sorted(PROTOCOLS), default="reference",
                         help="reference: the published evaluator's rules (default); paper: "
                              "the TransitLM paper's definitions")
    lm_eval.add_argument("--system_prompt_file", metavar="PATH",
                         help="system prompt for every row instead of the system_prompt "
                              "column (UTF-8 text; an empty file sends none), as generate.py "
                              "takes it. Without it a row without a system_prompt cell gets "
                              "the benchmark's default prompt")
    lm_eval.add_argument("--max_gen_toks", type=positive_int, default=MAX_GEN_TOKS,
                         metavar="N",
                         help="most tokens per answer (default %d: room for a reasoning "
                              "model; the harness's own default, 256, cuts answers short)"
                              % MAX_GEN_TOKS)
    lm_eval.add_argument("--context_size", type=positive_int, metavar="N",
                         help="the server's context in tokens (vLLM --max-model-len, "
                              "llama-server -c): each task's max_gen_toks is set to what its "
                              "longest prompt leaves (prompts estimated from above, a token "
                              "per UTF-8 byte) and rows whose prompt alone may not fit are "
                              "named")
    lm_eval.add_argument("--allow_foreign_network", action="store_true",
                         help="write the tasks even when most of a test file's label "
                              "stations are not in the station file (or the network.json "
                              "beside it names another network)")
    lm_eval.add_argument("--allow_other_benchmark", action="store_true",
                         help="write the tasks even when a test file's first rows look like "
                              "another benchmark's than its task's (labels with "
                              "first/second/third routes, labels naming stations, req_type "
                              "preferences); import scores them the same way")
    lm_eval.add_argument("--out", required=True, metavar="DIR",
                         help="the task folder to write (new or empty; give it to lm_eval "
                              "as --include_path)")
    lm_eval.add_argument("--overwrite", action="store_true",
                         help="replace a task folder this command wrote before")
    imports = commands.add_parser(
        "import", help="turn an lm_eval run's output into run folders for compare.py",
        description="Score the answers one `lm_eval ... --log_samples --output_path X` run "
                    "logged for the TransitLM tasks with the evaluator's own engine: one run "
                    "folder per task (%s, %s, %s, %s, %s and the answers as "
                    "predictions.jsonl), named by the task, as evaluate.py --predictions "
                    "writes it; other tasks are left alone."
                    % (REPORT_JSON, DETAILS_JSONL, REPORT_TXT, REPORT_HTML, RUN_JSON))
    imports.add_argument("lm_eval_output", metavar="LM_EVAL_OUTPUT",
                         help="the harness's --output_path X, the model folder in it, or its "
                              "results_<date>.json")
    imports.add_argument("--out", required=True, metavar="DIR",
                         help="folder of the run folders: DIR/<task> for each TransitLM task")
    imports.add_argument("--overwrite", action="store_true",
                         help="replace the runs the task folders already hold")
    return parser


def release_inputs(args):
    """--data DIR -> [(benchmark, test file, why)] of the release's test files
    DIR holds; sets args.station_info to DIR's station file unless it is
    given.  InputError for a folder that is not a release's."""
    folder = args.data
    if args.input or args.benchmark:
        raise InputError("--data takes the test files of a release folder: give it without "
                         "--input and --benchmark")
    if not os.path.isdir(folder):
        raise InputError("--data %s is not a folder" % folder)
    found = release_test_files(folder)
    if not found:
        raise InputError("--data %s holds none of the release's test files (%s)"
                         % (folder, ", ".join(RELEASE_TEST_FILES)))
    if not args.station_info:
        args.station_info = folder_file(folder, STATION_FILE_NAMES)
        if args.station_info is None:
            raise InputError("--data %s holds no station file (%s): give --station_info"
                             % (folder, " or ".join(reversed(STATION_FILE_NAMES))))
    return [(benchmark, path, "release test file") for benchmark, path in found]


def chosen_inputs(args):
    """[(benchmark, test file, how the benchmark was chosen)] of the command line."""
    if args.data:
        return release_inputs(args)
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


def context_lines(task, width, fit, context_size):
    """What --context_size made of a task: its max_gen_toks, the rows that may not fit."""
    lines = "  %-*s  max_gen_toks %d: a %d-token context less the longest prompt, ~%d tokens " \
            "(estimated from its UTF-8 bytes)\n" % (width, "", fit["max_gen_toks"],
                                                   context_size, fit["longest_prompt_tokens"])
    if fit["max_gen_toks"] < MIN_ANSWER_TOKENS:
        lines += ("  WARNING: %s: %d tokens may cut a route's answer short: give the server a "
                  "larger context\n" % (task, fit["max_gen_toks"]))
    if fit["rows_too_long"]:
        rows = fit["rows_too_long"]
        lines += ("  WARNING: %s: %d row(s) whose prompt alone may not fit a %d-token context "
                  "(estimated from UTF-8 bytes, an upper bound): row %s%s; a server refuses "
                  "such a request, which ends the lm_eval run: give the server a larger "
                  "context, or shorten or drop the rows\n"
                  % (task, len(rows), context_size, ", ".join(map(str, rows[:8])),
                     ", ..." if len(rows) > 8 else ""))
    return lines


def lm_eval_command(args, out):
    chosen = chosen_inputs(args)
    system_prompt = (read_prompt_file(args.system_prompt_file)
                     if args.system_prompt_file else None)
    settings = write_task_folder(args.out, [(benchmark, path) for benchmark, path, _ in chosen],
                                 args.protocol, args.station_info, args.line_info,
                                 args.max_gen_toks, args.overwrite, system_prompt,
                                 args.context_size, args.allow_foreign_network,
                                 args.allow_other_benchmark)
    folder = os.path.abspath(args.out)
    out.write("Wrote the lm-evaluation-harness task folder %s\n" % printable(folder))
    width = max(len(TASKS[benchmark]) for benchmark, _, _ in chosen)
    for benchmark, path, why in chosen:
        task = settings["tasks"][TASKS[benchmark]]
        out.write("  %-*s  %5d rows  %s  (%s)\n" % (width, TASKS[benchmark], task["rows"],
                                                   printable(path), why))
        if (release_file(path) or (None, None))[1] == "train":
            out.write("  %-*s  WARNING: %s is the release's training split: its figures say "
                      "how well the model learned its training rows, not how it plans unseen "
                      "trips (the test file is %s)\n"
                      % (width, "", printable(os.path.basename(path)),
                         benchmark_info(benchmark).release_file("test")))
        for warning in task.get("warnings", ()):
            out.write("  %-*s  WARNING: %s\n" % (width, "", printable(warning)))
        if DEFAULT in task["prompt"]["source"].split("+"):
            out.write("  %-*s  rows without a system_prompt cell are sent the default system "
                      "prompt (docs/harness.md)\n" % (width, ""))
        if "context" in task:
            out.write(context_lines(TASKS[benchmark], width, task["context"],
                                    settings["context_size"]))
    if args.data:
        absent = [name for name in RELEASE_TEST_FILES
                  if not os.path.isfile(os.path.join(args.data, name))]
        if absent:
            out.write("  not in %s: %s (no task written for it)\n"
                      % (printable(args.data), ", ".join(absent)))
    out.write("  group %s, protocol %s, stations %s\n"
              % (GROUP, settings["protocol"], printable(settings["station_info"])))
    out.write("Run it (any model backend; here an OpenAI-compatible chat server):\n  %s\n"
              % (RUN_COMMAND % (GROUP, printable(shlex.quote(folder)))))
    return EXIT_OK


def import_command(args, out, command):
    imported = import_run(args.lm_eval_output, args.out, args.overwrite, command)
    model = imported.tasks[0][2]
    out.write("Imported the lm-evaluation-harness run %s (model %s, lm_eval %s)\n"
              % (printable(imported.run.results_path), printable(str(model["model"])),
                 printable(str(model["lm_eval_version"]))))
    width = max(len(plan.task) for plan, _, _ in imported.tasks)
    for plan, report, generation in imported.tasks:
        subset = ("" if plan.rows == plan.file_rows else
                  "  (a subset: lm_eval --limit; scored as --sample_count %d)" % plan.rows)
        out.write("  %-*s  %5d of %d rows  %s%s\n" % (width, plan.task, plan.rows,
                                                     plan.file_rows, printable(plan.out), subset))
        differ = [key for key, value in generation["harness_figures"].items()
                  if value != report["metrics"].get(key)]
        if differ:
            out.write("  WARNING: %s: %s differs from the harness's own figure (%s "
                      "harness_figures): did another version of the project score the "
                      "harness's run?\n" % (plan.task, ", ".join(differ), RUN_JSON))
    if imported.foreign:
        out.write("  left alone: %d sample(s) of %d other task(s) (%s%s)\n"
                  % (imported.foreign_samples, len(imported.foreign),
                     printable(", ".join(imported.foreign[:3])),
                     ", ..." if len(imported.foreign) > 3 else ""))
    out.write("Compare them: python3 compare.py %s\n" % " ".join(
        printable(shlex.quote(plan.out)) for plan, _, _ in imported.tasks))
    return EXIT_OK


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    command = command_line() if argv is None else [PROG] + list(argv)
    try:
        if args.command == "import":
            return import_command(args, out, command)
        return lm_eval_command(args, out)
    except InputError as exc:
        err.write(one_line("%s %s: error: %s" % (PROG, args.command, exc)) + "\n")
        return EXIT_USAGE
