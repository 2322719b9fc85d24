"""The command line of generate.py: options, the run from start to summary, --evaluate.

Everything it prints goes through the key's redaction (``_Redacting``) and
text from files and servers through ``printable`` (control characters
escaped); the evaluator run by --evaluate gets an environment without the key.

Standard library only; Python 3.8+.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

from common import VERSION, InputError, file_sha256
from transitlm.io.bounded_json import loads_bounded
from transitlm.evaluation.catalog import BENCHMARK_NAMES, PROJECT_DIR
from transitlm.generate.chat import (ChatTransport, Redactor, build_body, chat_url,
                                     request_headers, thinking_off)
from transitlm.generate.settings import settings_record
from transitlm.generate.resume import OutputGuard, check_paths
from transitlm.generate.runner import (LineWriter, OutputState, ProgressLine, Run, Settings,
                                       UsageError, compact_output, drop_partial_line,
                                       infer_benchmark, input_notes, input_prompts,
                                       output_summary, pending_rows, prompt_note,
                                       read_output_state, run_dir_for, scan_input,
                                       summary_lines)
from transitlm.generate.waits import BACKOFF_BASE_S, BACKOFF_CAP_S
from transitlm.io.http_client import origin, url_problem
from transitlm.evaluation.chat_messages import read_prompt_file
from transitlm.evaluation.provenance import without_credentials
from transitlm.io.exit_status import (EXIT_OK, EXIT_USAGE, SIGNAL_STATUS, Terminated,
                                   interrupted_status)
from transitlm.io.terminal import CommandParser, non_negative_int, positive_int, printable

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def _number(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError("must be a finite number")
    return value


class _Parser(CommandParser):
    def error(self, message):
        # One line, no usage block: the same shape as every other input problem.
        raise UsageError("%s (see --help)" % message)


def build_parser():
    parser = _Parser(
        prog="generate.py",
        description="Ask a model (OpenAI chat-completions API) for every row of a "
                    "TransitLM test file and write its answers as a predictions file "
                    "the evaluators read (--predictions). Running the same command "
                    "again continues a stopped run.")
    parser.add_argument("--input", required=True, metavar="CSV",
                        help="test file (columns index_id/indexid, sft_prompt, optionally "
                             "system_prompt; e.g. the released transit-lm-benchmark1-test.csv)")
    parser.add_argument("--api_url", required=True, metavar="URL",
                        help="base URL of the API, e.g. http://127.0.0.1:8000/v1 "
                             "(requests go to URL/chat/completions)")
    parser.add_argument("--model", required=True, help="model name sent with each request")
    parser.add_argument("--out", metavar="JSONL",
                        help="output file (one JSON line per row; an existing file made with "
                             "the same settings is continued; missing folders are created; "
                             "the settings go to OUT.settings.json). Required unless "
                             "--dry_run")
    parser.add_argument("--restart", action="store_true",
                        help="discard --out and its settings file and start over")
    parser.add_argument("--adopt", action="store_true",
                        help="an existing --out without a settings file (made before 1.2.0): "
                             "record this command's settings for it and continue")
    parser.add_argument("--system_prompt_file", metavar="PATH",
                        help="system prompt for every row instead of the system_prompt "
                             "column (UTF-8 text; an empty file sends none). Without it a "
                             "row without a system_prompt cell gets the benchmark's "
                             "default prompt")
    parser.add_argument("--temperature", type=_number, default=0.0,
                        help="sampling temperature (default 0)")
    parser.add_argument("--max_tokens", type=positive_int, metavar="N",
                        help="most tokens per answer (default: the server's)")
    parser.add_argument("--top_p", type=_number, help="nucleus sampling (default: the server's)")
    parser.add_argument("--extra_body", metavar="JSON",
                        help="JSON object merged into every request, for server-specific "
                             "fields, e.g. '{\"top_k\": 1}' (strict JSON: no NaN)")
    parser.add_argument("--no_thinking", action="store_true",
                        help="ask the server to turn the model's thinking off: sends "
                             "chat_template_kwargs {\"enable_thinking\": false} (vLLM, SGLang, "
                             "llama.cpp), merged with --extra_body")
    parser.add_argument("--drop_reasoning", action="store_true",
                        help="do not record the reasoning a server sends apart from the "
                             "answer (reasoning_content or reasoning) in the output lines")
    parser.add_argument("--timeout", type=_positive_float, default=600.0, metavar="SECONDS",
                        help="time limit of one whole request (connect, send, redirects, "
                             "the full answer) before it is retried (default 600)")
    parser.add_argument("--api_key_env", metavar="NAME",
                        help="environment variable holding the API key (default "
                             "OPENAI_API_KEY; unset = no Authorization header)")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                        help="requests in flight (default 8)")
    parser.add_argument("--rate_limit", type=_positive_float, metavar="R",
                        help="at most R requests per second (default: no limit)")
    parser.add_argument("--retries", type=non_negative_int, default=6, metavar="N",
                        help="retries of a request that got 408, 409, 429, 5xx, a timeout or "
                             "a dropped connection (default 6; a 429 while other requests "
                             "are answered is not counted)")
    parser.add_argument("--backoff", type=_positive_float, default=BACKOFF_BASE_S,
                        metavar="SECONDS",
                        help="first retry waits up to this long, doubling each time, "
                             "capped at %g s (default %g); Retry-After wins"
                             % (BACKOFF_CAP_S, BACKOFF_BASE_S))
    parser.add_argument("--no_retry_errors", action="store_true",
                        help="keep rows that failed in an earlier run instead of asking again")
    parser.add_argument("--sample_count", type=positive_int, metavar="N",
                        help="only the first N rows")
    parser.add_argument("--dry_run", action="store_true",
                        help="print the first request (key hidden) and send nothing")
    parser.add_argument("--evaluate", action="store_true",
                        help="after a complete run, score the output with the matching "
                             "evaluator and write its run folder")
    parser.add_argument("--benchmark", choices=BENCHMARK_NAMES,
                        help="evaluator for --evaluate (default: inferred from the file "
                             "name, else the data)")
    parser.add_argument("--eval_out", metavar="DIR",
                        help="run folder of --evaluate (default: OUT without .jsonl + .run)")
    parser.add_argument("--eval_overwrite", action="store_true",
                        help="--evaluate: replace a run already in the run folder (the "
                             "evaluator's --overwrite)")
    parser.add_argument("--protocol", choices=("reference", "paper"),
                        help="--evaluate: the evaluator's rule set (default: its own)")
    parser.add_argument("--station_info", metavar="CSV",
                        help="--evaluate: station file (default: the evaluator's)")
    parser.add_argument("--line_info", metavar="CSV",
                        help="--evaluate, general LLM: line file (default: the one beside "
                             "the station file)")
    parser.add_argument("--allow_foreign_network", action="store_true",
                        help="--evaluate: score even when the test file's labels name "
                             "stations the station file lacks (the evaluator's flag); "
                             "otherwise such a file is refused before anything is asked")
    parser.add_argument("--allow_other_benchmark", action="store_true",
                        help="--evaluate: score even when the test file's first rows look "
                             "like another benchmark's than the one evaluated (the "
                             "evaluator's flag); otherwise such a file is refused before "
                             "anything is asked")
    return parser


def parse_extra_body(text, no_thinking=False):
    """--extra_body (strict JSON: no NaN or Infinity, which JSON does not
    have), with --no_thinking merged in -> the dict merged into every request."""
    value = {}
    if text is not None:
        try:
            value = loads_bounded(text, strict=True)
        except ValueError as exc:
            raise UsageError("--extra_body is %s" % exc)
        if not isinstance(value, dict):
            raise UsageError("--extra_body must be a JSON object")
        if value.get("stream"):
            raise UsageError("--extra_body cannot turn on streaming (generate.py reads whole "
                             "answers)")
    if no_thinking:
        try:
            value = thinking_off(value)
        except ValueError as exc:
            raise UsageError(str(exc))
    return value


def read_system_prompt(path):
    """The text of --system_prompt_file (transitlm.evaluation.chat_messages.read_prompt_file)."""
    try:
        return read_prompt_file(path)
    except InputError as exc:
        raise UsageError(str(exc))


def dry_run_text(url, headers, body, key_env, row_text, key_state="is not set"):
    """The first request as text, with the key hidden."""
    lines = ["POST %s" % url]
    for name, value in headers.items():
        if name == "Authorization":
            value = "Bearer <redacted: $%s>" % key_env
        lines.append("%s: %s" % (name, value))
    if "Authorization" not in headers:
        lines.append("(no Authorization header: $%s %s)" % (key_env, key_state))
    lines.append("")
    lines.append(json.dumps(body, ensure_ascii=False, indent=2))
    lines.append("")
    lines.append("dry run: nothing sent; " + row_text)
    return "\n".join(lines)


def evaluator_command(benchmark, input_path, out_path, run_dir, args):
    command = [sys.executable, os.path.join(PROJECT_DIR, benchmark, "evaluate.py"),
               "--input", input_path, "--predictions", out_path, "--out", run_dir, "--quiet"]
    if getattr(args, "eval_overwrite", False):
        command.append("--overwrite")
    if args.sample_count is not None:
        command += ["--sample_count", str(args.sample_count)]
    if args.protocol:
        command += ["--protocol", args.protocol]
    if args.station_info:
        command += ["--station_info", args.station_info]
    if args.line_info and benchmark == "general_llm":
        command += ["--line_info", args.line_info]
    if getattr(args, "allow_foreign_network", False):
        command.append("--allow_foreign_network")
    if getattr(args, "allow_other_benchmark", False):
        command.append("--allow_other_benchmark")
    return command


class _Redacting(object):
    """A text stream that takes the key's text out of everything written to it."""

    def __init__(self, stream, redactor):
        self._stream = stream
        self._redactor = redactor

    def write(self, text):
        return self._stream.write(self._redactor.text(text))

    def __getattr__(self, name):          # flush, isatty, fileno...
        return getattr(self._stream, name)


def run(argv, environ, stdout, stderr, transport=None, sleep=None, clock=None):
    """The command: -> exit status.  ``transport``/``sleep``/``clock`` are for tests.

    A usage or input problem raises UsageError with its one-line message,
    the key taken out and control characters escaped."""
    redactor = Redactor()
    try:
        return _run(argv, environ, stdout, stderr, transport, sleep, clock, redactor)
    except UsageError as exc:
        raise UsageError(printable(redactor.text(one_line_text(exc))))


def one_line_text(exc):
    return " ".join(str(exc).splitlines())


def _run(argv, environ, stdout, stderr, transport, sleep, clock, redactor):
    args = build_parser().parse_args(argv)
    if args.out is None and not args.dry_run:
        raise UsageError("--out is required (or use --dry_run)")
    if args.restart and args.adopt:
        raise UsageError("--restart and --adopt exclude each other")
    key_env = args.api_key_env or DEFAULT_KEY_ENV
    key = (environ.get(key_env) or "").strip() or None
    key_state = "is not set" if environ.get(key_env) is None else "is empty"
    if args.api_key_env and key is None:
        raise UsageError("--api_key_env %s: that environment variable %s" % (key_env, key_state))
    if key is not None and any(ord(char) < 33 or 127 <= ord(char) < 160 or ord(char) > 255
                               for char in key):
        raise UsageError("the API key in $%s holds a space, a control character or a "
                         "character outside Latin-1: it cannot be sent in an HTTP header"
                         % key_env)
    redactor.add(key)
    stdout, stderr = _Redacting(stdout, redactor), _Redacting(stderr, redactor)
    if not args.api_url.lower().startswith(("http://", "https://")):
        raise UsageError("--api_url must start with http:// or https:// (got %s)"
                         % args.api_url)
    if origin(chat_url(args.api_url)) is None:
        problem = url_problem(chat_url(args.api_url),
                              ": the key goes in $%s, not in the URL" % key_env)
        raise UsageError("--api_url %s is not the URL of a host generate.py can ask: %s"
                         % (without_credentials(args.api_url),
                            problem or "it names no host and port"))
    extra_body = parse_extra_body(args.extra_body, args.no_thinking)
    system_override = (read_system_prompt(args.system_prompt_file)
                       if args.system_prompt_file else None)
    run_dir = None
    if args.out:
        run_dir = (args.eval_out or run_dir_for(args.out)) if args.evaluate else None
        check_paths(args.out, (("--input", args.input),
                               ("--system_prompt_file", args.system_prompt_file),
                               ("--station_info", args.station_info),
                               ("--line_info", args.line_info)), run_dir)

    scan = scan_input(args.input, args.sample_count)
    if not scan.ids:
        raise UsageError("input file %s has no row with an id: nothing to ask" % args.input)
    # Whose default system prompt a row without one gets (transitlm.evaluation.chat_messages).
    benchmark, why = (args.benchmark, "--benchmark") if args.benchmark \
        else infer_benchmark(args.input, scan)
    prompts = input_prompts(args.input, benchmark, system_override)
    guard = None
    state = OutputState()
    if args.out:
        record = settings_record(args.model, args.api_url, system_override, args.temperature,
                                 args.top_p, args.max_tokens, extra_body,
                                 _input_sha256(args.input), VERSION, prompts.record())
        guard = OutputGuard(args.out, redactor.value(record), args.restart, args.adopt)
        state = guard.check()
    notes = input_notes(scan)
    note = prompt_note(scan, prompts, benchmark, why)
    if note:
        notes.append(note)
    if args.evaluate:
        # Refused now, not after every row was asked: the evaluator's check.
        notes += _network_notes(args, scan)
    if key is None and key_state == "is empty":
        notes.append("$%s is set but empty: requests carry no Authorization header" % key_env)
    for note in notes:
        stderr.write("generate.py: note: %s\n" % printable(note))

    input_ids = set(scan.ids)
    skipped = len(input_ids & state.results)
    kept_errors = 0 if not args.no_retry_errors else len(input_ids & state.errors)
    total = len(scan.ids)
    todo = total - skipped - kept_errors
    settings = Settings(chat_url(args.api_url), request_headers(key), args.model,
                        {"temperature": args.temperature, "max_tokens": args.max_tokens,
                         "top_p": args.top_p},
                        extra_body, system_override, args.retries, args.backoff,
                        BACKOFF_CAP_S, key, keep_reasoning=not args.drop_reasoning)

    if args.dry_run:
        return _dry_run(args, settings, state, total, todo, key_env, extra_body,
                        benchmark, system_override, stdout, key_state)

    transport = transport or ChatTransport(args.timeout, redactor=redactor)
    run_ = Run(settings, transport, None, args.concurrency, args.rate_limit, sleep=sleep,
               clock=clock, expected=todo)
    previous = _install_signal_handlers(run_)
    writer = None
    complete = False
    try:
        guard.prepare()
        drop_partial_line(args.out, state)
        writer = run_.writer = LineWriter(args.out, redactor)
        progress = ProgressLine(todo, run_.stats, stderr) if stderr.isatty() else None
        status = _execute(args, run_, writer, progress, state, total, skipped, kept_errors,
                          todo, stdout, stderr, benchmark, system_override)
        complete = status is None
        if writer.lines:
            guard.record_output(output_summary(args.out))
    finally:
        close = getattr(transport, "close", None)
        if close is not None and not any(thread.is_alive() for thread in run_.threads):
            close()              # (a worker still asking after a stop keeps its connection)
        if not complete:
            if writer is not None:
                writer.close()
            guard.undo_if_empty(writer.lines if writer is not None else 0)
        _restore_signal_handlers(previous)
    if status is not None:
        return status
    if not args.evaluate:
        return EXIT_OK
    answered = len(read_output_state(args.out).results)
    if not answered:
        stderr.write("generate.py: not evaluating %s: none of its rows has an answer (every "
                     "line is an error line); run the same command to ask again\n"
                     % printable(args.out))
        return EXIT_USAGE
    stdout.write("\nevaluating with %s/evaluate.py (%s) -> %s\n"
                 % (benchmark, why, printable(run_dir)))
    stdout.flush()
    environment = dict((name, value) for name, value in environ.items() if name != key_env)
    status = run_evaluator(evaluator_command(benchmark, args.input, args.out, run_dir, args),
                           stdout, stderr, environment)
    if status != 0:
        stderr.write("generate.py: the evaluator exited with status %d\n" % status)
    return status


def _network_notes(args, scan):
    """--evaluate: the test file against the benchmark evaluated
    (transitlm.evaluation.benchmark_check) and the station (and line) file the
    evaluator will use (transitlm.evaluation.network_check) -> their warnings;
    UsageError when the evaluator would refuse it.  A file that cannot be
    read is left to the evaluator, which says so itself."""
    from common import PROTOCOLS, StationNetwork, station_cache_folder
    from transitlm.evaluation import benchmark_check
    from transitlm.evaluation.catalog import line_file, load_benchmark, station_file
    from transitlm.evaluation.engine import Context, Options
    from transitlm.evaluation.inputs import SampleReader
    from transitlm.evaluation.network_check import cached_sha256, enforce, test_file_verdicts
    benchmark = args.benchmark or infer_benchmark(args.input, scan)[0]
    by_name = benchmark == "general_llm"
    try:
        station = station_file(args.station_info)
        network = StationNetwork.load(station, station_cache_folder())
        with SampleReader(args.input, None) as reader:
            head = reader.head()
        other = benchmark_check.benchmark_verdict(benchmark, head.header, head.rows, network)
        line_sha = names = None
        if by_name:
            # the names the evaluator matches on: its line file's
            evaluator = load_benchmark(benchmark)
            context = Context(Options(evaluator, station_info=station, api_url=None,
                                      line_info=args.line_info),
                              PROTOCOLS["reference"], network)
            evaluator.prepare(context)
            line_sha = cached_sha256(evaluator.line_info_path)
            names = evaluator.label_station_names(context)
        verdicts = test_file_verdicts(args.input, network, by_name, line_sha, names)
    except InputError:
        return []
    warnings = []
    try:
        warnings += benchmark_check.enforce(
            other, args.allow_other_benchmark, "input file %s" % args.input,
            "--allow_other_benchmark", lambda name: "--benchmark %s" % name)
        for verdict in verdicts:
            warnings += enforce(verdict, args.allow_foreign_network)
    except InputError as exc:
        raise UsageError("--evaluate: %s" % exc)
    return warnings


def _input_sha256(path):
    try:
        return file_sha256(path)
    except OSError as exc:
        raise UsageError("cannot read input file %s: %s" % (path, exc.strerror or exc))


def _dry_run(args, settings, state, total, todo, key_env, extra_body, benchmark,
             system_override, stdout, key_state):
    """Print the first request (key hidden); nothing is sent or written."""
    first = next(pending_rows(args.input, args.sample_count, state,
                              not args.no_retry_errors, benchmark, system_override), None)
    if first is None:
        stdout.write("dry run: every one of the %d rows already has a result in %s\n"
                     % (total, printable(args.out)))
        return EXIT_OK
    index_id, system, user = first
    body = build_body(args.model, system, user, settings.sampling, extra_body)
    row_text = "first of %d row%s to ask (id %s)" % (todo, "" if todo == 1 else "s", index_id)
    stdout.write(printable(dry_run_text(settings.url, settings.headers, body, key_env,
                                        row_text, key_state)) + "\n")
    return EXIT_OK


def _execute(args, run_, writer, progress, state, total, skipped, kept_errors, todo,
             stdout, stderr, benchmark, system_override):
    """Ask for the pending rows, then compact and summarise -> exit status when
    the run ends here (stopped, fatal answer), None when it completed."""
    started = time.monotonic()
    try:
        run_.start()
        tick = progress.tick if progress else None
        complete = run_.feed(pending_rows(args.input, args.sample_count, state,
                                          not args.no_retry_errors, benchmark,
                                          system_override), tick)
        complete = run_.join(tick) and complete
    finally:
        writer.close()           # waits for a line being written; later ones are dropped
        if progress:
            progress.finish()
    wall = time.monotonic() - started
    if run_.fatal is not None:
        stderr.write("generate.py: stopped: %s\n" % printable(run_.fatal))
        return EXIT_USAGE
    if not complete:
        name = signal.Signals(run_.signal).name if run_.signal else "a stop request"
        stderr.write("generate.py: stopped by %s after %d of %d rows of this run; run the "
                     "same command again to continue\n" % (name, run_.stats.done, todo))
        return SIGNAL_STATUS.get(run_.signal, 1)
    # Signals arriving while compacting only set the flag: the rename completes.
    try:
        dropped = compact_output(args.out) if read_output_state(args.out).needs_compaction else 0
    except (OSError, InputError) as exc:
        raise UsageError("cannot rewrite output file %s with one line per id: %s (its "
                         "lines are all there; the evaluators use an id's result line)"
                         % (args.out, getattr(exc, "strerror", None) or exc))
    for line in summary_lines(args.out, args.model, total, skipped, kept_errors,
                              run_.stats, wall, dropped, args.max_tokens):
        stdout.write(printable(line) + "\n")
    if run_.signal is not None:
        return SIGNAL_STATUS.get(run_.signal, 1)
    return None


def _has_fd(stream):
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is both
        return False


def run_evaluator(command, stdout, stderr, env=None):
    """Run the evaluator; its report goes to our stdout (copied when that stream
    is not a real file, as in tests) -> its exit status."""
    if _has_fd(stdout) and _has_fd(stderr):
        return subprocess.call(command, env=env)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout.write(result.stdout.decode("utf-8", "replace"))
    stderr.write(result.stderr.decode("utf-8", "replace"))
    return result.returncode


def _install_signal_handlers(run_):
    """SIGINT/SIGTERM stop the run (no traceback); only from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, lambda number, frame: run_.request_stop(number))
    return previous


def _restore_signal_handlers(previous):
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def main(argv=None):
    try:
        status = run(sys.argv[1:] if argv is None else argv, os.environ, sys.stdout, sys.stderr)
    except UsageError as exc:
        sys.stdout.flush()
        sys.stderr.write("generate.py: %s\n" % exc)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        sys.stderr.write("generate.py: stopped by %s\n"
                         % ("SIGTERM" if isinstance(exc, Terminated) else "SIGINT"))
        return interrupted_status(exc)
    sys.stdout.flush()
    return status
