"""The command line of reward.py: ``serve`` (the reward over HTTP,
transitlm.reward.service) and ``prepare`` (a release file in a trainer's
layout, transitlm.reward.prepare).  Usage and input problems are one line on
stderr and exit status 2; the service stops on SIGINT/SIGTERM with 130/143.

Standard library only; Python 3.8+.
"""

import argparse
import sys

from common import PROTOCOLS, InputError
from transitlm.evaluation.catalog import BENCHMARK_NAMES, DATA_ENV
from transitlm.io.exit_status import EXIT_OK, EXIT_USAGE
from transitlm.io.files import overwrite_problem
from transitlm.io.json_service import add_listen_arguments
from transitlm.evaluation.chat_messages import read_prompt_file
from transitlm.reward import prepare, service
from transitlm.reward.scoring import LINE_ENV, SHAPINGS, STATION_ENV
from transitlm.reward.settings import ENV
from transitlm.io.terminal import CommandParser, one_line, printable


def _settings_arguments(parser):
    """The reward's settings: score()'s keywords, as flags."""
    parser.add_argument("--station_info", metavar="CSV",
                        help="station file (default: $%s, else $%s's, else the bundled "
                             "data/station_info.csv)" % (STATION_ENV, DATA_ENV))
    parser.add_argument("--line_info", metavar="CSV",
                        help="line file of the general-LLM rows (default: $%s, else the one "
                             "beside the station file)" % LINE_ENV)
    parser.add_argument("--benchmark", choices=BENCHMARK_NAMES,
                        help="score every row by this benchmark's rules (default: $%s, else "
                             "each row's task_id)" % ENV["benchmark"])
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS),
                        help="score every row under this protocol (default: $%s, else each "
                             "row's own, as prepare recorded it, else reference)"
                             % ENV["protocol"])
    parser.add_argument("--shaping", choices=SHAPINGS,
                        help="how the terms become one score (default: $%s, else dense)"
                             % ENV["shaping"])
    parser.add_argument("--failure", type=float, metavar="SCORE",
                        help="the score of a completion that cannot be read (default: $%s, "
                             "else 0; -1 for a penalty)" % ENV["failure"])
    parser.add_argument("--weights", metavar="KEY=W,...",
                        help="weights of dense and gated, e.g. conn=2,rem=3 (default: 1 each)")


USAGE = """commands:
  serve    [--port 8766] [--host 127.0.0.1] [--read_timeout SECONDS] [--station_info CSV]
           [--line_info CSV] [--benchmark B] [--protocol P] [--shaping S] [--failure F]
           [--weights KEY=W,...]
  prepare  --input CSV --format trl|verl|openrlhf --out FILE.jsonl [--benchmark B]
           [--split NAME] [--protocol P] [--allow_failing_labels]

'reward.py COMMAND --help' tells more."""


def build_parser():
    parser = CommandParser(
        prog="reward.py", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=USAGE,
        description="The benchmark's own verdicts as a reward for RL trainers (TRL, verl,\n"
                    "OpenRLHF): serve it over HTTP, or prepare a release file in a trainer's\n"
                    "layout. See docs/reward.md.")
    commands = parser.add_subparsers(dest="command", metavar="{serve,prepare}")
    commands.required = True
    serve = commands.add_parser(
        "serve", help="answer POST /get_reward as OpenRLHF's remote reward",
        description="Answer POST %s {\"query\", \"prompts\", \"labels\"} with {\"rewards\", "
                    "\"scores\", \"extra_logs\"}, as transitlm.reward.openrlhf.reward_func "
                    "does; GET /healthz." % service.REWARD_PATH)
    add_listen_arguments(serve, service.DEFAULT_PORT)
    _settings_arguments(serve)
    serve.set_defaults(run=service.serve)
    ready = commands.add_parser(
        "prepare", help="write a release CSV in a trainer's layout (JSON Lines)",
        description="Write the rows of a release CSV in TRL's, verl's or OpenRLHF's layout, "
                    "one JSON object per line, each what that trainer's adapter reads.")
    ready.add_argument("--input", required=True, metavar="CSV",
                       help="release file (index_id, sft_prompt, sft_label; optionally "
                            "system_prompt, task_id, req_type)")
    ready.add_argument("--format", required=True, choices=prepare.FORMATS,
                       help="the trainer's layout")
    ready.add_argument("--out", required=True, metavar="JSONL",
                       help="output file (written whole; missing folders are created)")
    ready.add_argument("--benchmark", choices=BENCHMARK_NAMES,
                       help="the rows' benchmark (default: each row's task_id, else the "
                            "file's name)")
    ready.add_argument("--system_prompt_file", metavar="PATH",
                       help="system prompt for every row instead of the system_prompt column "
                            "(UTF-8 text; an empty file sends none), as generate.py takes it")
    ready.add_argument("--split", metavar="NAME",
                       help="verl's extra_info split (default: the release file's, by its "
                            "name: train for transit-lm-benchmark1-train.csv, test for "
                            "...-test.csv; else %s)" % prepare.DEFAULT_SPLIT)
    ready.add_argument("--station_info", metavar="CSV",
                       help="station file the rows belong to, recorded with its SHA-256 in "
                            "every row (default: the reward's: $TRANSITLM_STATION_INFO, else "
                            "$%s's, else the bundled one)" % DATA_ENV)
    ready.add_argument("--line_info", metavar="CSV",
                       help="line file (default: the one beside the station file)")
    ready.add_argument("--protocol", choices=sorted(PROTOCOLS),
                       help="the protocol the rows are to be scored under, recorded in every "
                            "row (default: reference, refused when fewer than 90%% of a "
                            "benchmark's labels pass every check under it; given, it is used "
                            "whatever they pass)")
    ready.add_argument("--allow_failing_labels", action="store_true",
                       help="write the rows even when fewer than 90%% of a benchmark's labels "
                            "pass every check under the protocol (with a warning)")
    ready.add_argument("--allow_foreign_network", action="store_true",
                       help="write the rows even when most of the labels' stations are not "
                            "in the station file (or the network.json beside the file names "
                            "another network)")
    ready.set_defaults(run=_prepare)
    return parser


def _prepare(args):
    try:
        system_prompt = None
        if args.system_prompt_file:
            problem = overwrite_problem([("--out", args.out)],
                                        [("--system_prompt_file", args.system_prompt_file)])
            if problem:
                raise InputError(problem)
            system_prompt = read_prompt_file(args.system_prompt_file)
        preparer = prepare.prepare(args.input, args.format, args.out, args.benchmark,
                                  args.split, system_prompt, args.station_info, args.line_info,
                                  args.protocol, args.allow_foreign_network,
                                  args.allow_failing_labels)
    except InputError as exc:
        sys.stderr.write("error: %s\n" % one_line(exc))
        return EXIT_USAGE
    for line in prepare.summary_lines(preparer, args.out):
        print(printable(line))
    return EXIT_OK


def main(argv=None):
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    return args.run(args)
