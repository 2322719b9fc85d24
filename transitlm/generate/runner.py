"""The runner of generate.py: the rows to ask, the output file, the run loop.

- the input file: a streaming scan (ids, duplicates, hints for inferring the
  benchmark) and the rows to ask for;
- the output file: what an existing one holds (resuming), appending whole
  lines, compacting to one line per id;
- the run: worker threads that ask for each row (``ask_row``: the request of
  ``transitlm.generate.chat``, retried as ``transitlm.generate.failures``
  and ``transitlm.generate.waits`` say), the first answers held until they
  show the server is configured (``FirstAnswers``), counters, the progress
  line and the end-of-run summary.

Standard library only; Python 3.8+.
"""

import json
import os
import queue
import random
import re
import threading
import time
from contextlib import closing

from common import InputError
from transitlm.evaluation.benchmark_check import likely_benchmark
from transitlm.evaluation.catalog import benchmark_of_task
from transitlm.io.csv_rows import csv_rows, data_rows, header_columns
from transitlm.io.files import OutputFile
from transitlm.io.bounded_json import finite, loads_bounded
from transitlm.generate.chat import (MAX_ANSWER_BYTES, FatalAnswer, Redactor, build_body,
                                     one_line, parse_completion, redirect_message,
                                     server_message, token_count)
from transitlm.generate.failures import (FIRST_ANSWERS, SAME_ANSWER_REPEATS, FirstAnswers,
                                         classify_status, fixed_answer, refuses_the_row)
from transitlm.generate.waits import RateLimiter, backoff_delay, server_wait
from transitlm.evaluation.chat_messages import DEFAULT, PromptTally, system_prompt_for

OUTPUT_ID = "indexid"                     # written to --out, as the release names it
INFER_SCAN_ROWS = 200          # rows looked at to infer the benchmark from the data
HEAD_COLUMNS = ("task_id", "req_type", "sft_label")   # what those rows keep
PROGRESS_DELAY_S = 2.0         # short runs print no progress line (as the evaluators)
PROGRESS_INTERVAL_S = 0.5
# Bytes of one --out line: generate.py writes an answer of at most
# MAX_ANSWER_BYTES with ASCII escapes (at most 3 bytes for each byte of the
# answer) and a few fields; a longer line is not one of its lines.
MAX_OUTPUT_LINE_BYTES = 4 * MAX_ANSWER_BYTES


class UsageError(Exception):
    """A usage or input-file problem: one line on stderr, exit 2."""


def format_duration(seconds):
    """Seconds -> ``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    seconds = int(round(max(seconds, 0)))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %02d s" % (seconds // 60, seconds % 60)
    return "%d h %02d min" % (seconds // 3600, seconds % 3600 // 60)


def run_dir_for(out_path):
    """Default run folder of --evaluate: the predictions path without .jsonl, + .run."""
    base = out_path[:-len(".jsonl")] if out_path.endswith(".jsonl") else out_path
    return base + ".run"


# ---------------------------------------------------------------------------
# The input file
# ---------------------------------------------------------------------------

class InputScan(object):
    """What a first pass over the input tells: ids in order, duplicates, columns,
    and hints for inferring the benchmark.  Holds ids, never prompts."""

    def __init__(self):
        self.ids = []                 # unique ids in input order
        self.rows = 0                 # data rows read (within --sample_count)
        self.duplicates = []          # ids seen again (each repeat once)
        self.empty_ids = 0            # rows without an id (cannot be joined: skipped)
        self.has_system_prompt = False
        self.has_req_type = False
        self.header = ()              # the input's columns
        self.head = []                # the first rows' task_id, req_type and sft_label cells


def scan_input(path, sample_count=None):
    """First pass over the input CSV -> InputScan (streaming; keeps ids only)."""
    scan = InputScan()
    seen = set()
    try:
        with closing(csv_rows(path)) as reader:
            header, i_id = header_columns(reader, path, ("sft_prompt",))
            scan.has_system_prompt = "system_prompt" in header
            scan.has_req_type = "req_type" in header
            scan.header = tuple(header)
            kept = [(name, header.index(name)) for name in HEAD_COLUMNS if name in header]
            for cells in data_rows(reader, len(header), sample_count):
                scan.rows += 1
                index_id = cells[i_id]
                if not index_id.strip():
                    scan.empty_ids += 1
                elif index_id in seen:
                    scan.duplicates.append(index_id)
                else:
                    seen.add(index_id)
                    scan.ids.append(index_id)
                if scan.rows <= INFER_SCAN_ROWS:
                    scan.head.append({name: cells[i] for name, i in kept})
    except InputError as exc:
        raise UsageError(str(exc))
    return scan


def iter_input_rows(path, sample_count=None):
    """Second pass: yield (row number, id, system_prompt or "", sft_prompt), streaming."""
    try:
        with closing(csv_rows(path)) as reader:
            header, i_id = header_columns(reader, path, ("sft_prompt",))
            i_system = header.index("system_prompt") if "system_prompt" in header else None
            i_prompt = header.index("sft_prompt")
            for row_no, cells in enumerate(data_rows(reader, len(header), sample_count), 1):
                system = cells[i_system] if i_system is not None else ""
                yield row_no, cells[i_id], system, cells[i_prompt]
    except InputError as exc:
        raise UsageError(str(exc))


def pending_rows(input_path, sample_count, state, retry_errors, benchmark, override=None):
    """Rows to ask for: (id, system prompt, user), each id once, none already
    answered; the system prompt as transitlm.evaluation.chat_messages chooses it (``override``:
    the text of --system_prompt_file; ``benchmark``: whose default prompt a
    row without one gets)."""
    asked = set()
    for _, index_id, system, user in iter_input_rows(input_path, sample_count):
        if not index_id.strip() or index_id in asked or index_id in state.results:
            continue
        if index_id in state.errors and not retry_errors:
            continue
        asked.add(index_id)
        yield index_id, system_prompt_for(system, benchmark, override)[1], user


def input_prompts(input_path, benchmark, override=None):
    """The system prompts of every row of the input (the whole file, as
    ``input_sha256`` covers it) -> PromptTally: its record goes to the
    settings sidecar, its sources to the note on a default prompt."""
    tally = PromptTally()
    for _, _, system, _ in iter_input_rows(input_path):
        tally.add(*system_prompt_for(system, benchmark, override))
    return tally


def prompt_note(scan, tally, benchmark, why):
    """The note when rows get the default system prompt (text or None)."""
    rows = tally.counts.get(DEFAULT, 0)
    if not rows:
        return None
    where = ("input has no system_prompt column" if not scan.has_system_prompt
             else "%d row%s without a system_prompt cell" % (rows, "" if rows == 1 else "s"))
    return ("%s: sent the default system prompt of %s (%s; --system_prompt_file sets "
            "another, docs/model-runner.md)" % (where, benchmark, why))


def input_notes(scan):
    """Things about the input worth a line on stderr (list of text)."""
    notes = []
    if scan.duplicates:
        distinct = list(dict.fromkeys(scan.duplicates))
        notes.append("input repeats %d id%s in %d more row%s (each id asked once), e.g. %s"
                     % (len(distinct), "" if len(distinct) == 1 else "s",
                        len(scan.duplicates), "" if len(scan.duplicates) == 1 else "s",
                        ", ".join(distinct[:3])))
    if scan.empty_ids:
        notes.append("%d input row%s without an id skipped (they cannot be joined)"
                     % (scan.empty_ids, "" if scan.empty_ids == 1 else "s"))
    return notes


def infer_benchmark(input_path, scan):
    """-> (benchmark name, why).  The release's file names first
    (transit-lm-benchmark{1,2,3}-test.csv, ...), then the data, by the
    evaluators' own rule (transitlm.evaluation.benchmark_check: labels with
    first/second/third routes, labels naming stations, req_type preferences,
    task_id); a file whose data says nothing is single_route's."""
    benchmark = benchmark_of_task(os.path.basename(input_path))
    if benchmark is not None:
        return benchmark, "from the file name"
    benchmark, why = likely_benchmark(scan.header, scan.head)
    if benchmark is not None:
        return benchmark, why[len("its "):] if why.startswith("its ") else why
    return "single_route", "no sign of another benchmark in the file name or data"


# ---------------------------------------------------------------------------
# The output file: reading what is there, appending, compacting
# ---------------------------------------------------------------------------

def _line_id(obj):
    for key in (OUTPUT_ID, "index_id"):
        if key in obj:
            return str(obj[key])
    return None


class OutputState(object):
    """What an existing --out file holds."""

    def __init__(self):
        self.results = set()      # ids with a result line
        self.errors = set()       # ids with an error line and no result line
        self.lines = 0            # whole non-blank lines
        self.ids = 0              # distinct ids
        self.valid_end = 0        # byte offset after the last whole line
        self.partial_bytes = 0    # bytes of a trailing line cut short (to drop)

    @property
    def needs_compaction(self):
        return self.lines > self.ids


def _whole_lines(handle, path):
    """Yield (start offset, line bytes with newline) of whole lines; a trailing
    line without its newline (a write cut short) is not yielded.  A line
    longer than MAX_OUTPUT_LINE_BYTES is not generate.py's: UsageError."""
    offset = 0
    line_no = 0
    while True:
        line = handle.readline(MAX_OUTPUT_LINE_BYTES + 1)
        line_no += 1
        if len(line) > MAX_OUTPUT_LINE_BYTES:
            raise UsageError("%s line %d is longer than %d bytes: not a line of generate.py; "
                             "refusing to add to it (choose another --out, or --restart)"
                             % (path, line_no, MAX_OUTPUT_LINE_BYTES))
        if not line.endswith(b"\n"):
            return
        yield offset, line
        offset += len(line)


def _parse_output_line(line, path, line_no):
    """-> (id, is_result) or None for a blank line; UsageError for a foreign line
    (not a JSON object with an id and generate_results or error, nested too
    deep, too large: see transitlm.io.bounded_json)."""
    obj = _output_line(line, path, line_no)
    return None if obj is None else (_line_id(obj), "generate_results" in obj)


def _output_line(line, path, line_no):
    """An --out line -> its object (None for a blank line); UsageError for a
    foreign line (not strict JSON -- generate.py never writes NaN --, not an
    object with an id and generate_results or error, nested too deep, too
    large: see transitlm.io.bounded_json)."""
    if not line.strip():
        return None
    reason = ""
    try:
        obj = loads_bounded(line, strict=True)
    except ValueError as exc:
        obj, reason = None, " (%s)" % exc
    if not isinstance(obj, dict) or _line_id(obj) is None \
            or not ("generate_results" in obj or "error" in obj):
        raise UsageError("%s line %d is not a result or error line of generate.py%s; "
                         "refusing to add to it (choose another --out, or --restart)"
                         % (path, line_no, reason))
    return obj


def read_output_state(path):
    """Scan an existing output file (absent: empty state)."""
    state = OutputState()
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return state
    except OSError as exc:
        raise UsageError("cannot read output file %s: %s" % (path, exc.strerror or exc))
    seen = set()
    with handle:
        for line_no, (offset, line) in enumerate(_whole_lines(handle, path), 1):
            parsed = _parse_output_line(line, path, line_no)
            state.valid_end = offset + len(line)
            if parsed is None:
                continue
            index_id, is_result = parsed
            state.lines += 1
            seen.add(index_id)
            if is_result:
                state.results.add(index_id)
            else:
                state.errors.add(index_id)
        size = handle.seek(0, os.SEEK_END)
    state.errors -= state.results
    state.ids = len(seen)
    state.partial_bytes = size - state.valid_end
    return state


def drop_partial_line(path, state):
    """Cut a trailing partial line (a write interrupted by a kill) before appending."""
    if state.partial_bytes:
        os.truncate(path, state.valid_end)
        state.partial_bytes = 0


def _chosen_lines(path, describe=None):
    """The line the evaluators use for each id of ``path``: its first result
    line, else its last error line -> ({id: (line number, is_result, what
    ``describe(line's object)`` says)}, the number of lines)."""
    keep = {}
    total = 0
    with open(path, "rb") as handle:
        for line_no, (_, line) in enumerate(_whole_lines(handle, path), 1):
            obj = _output_line(line, path, line_no)
            if obj is None:
                continue
            total += 1
            index_id, is_result = _line_id(obj), "generate_results" in obj
            kept = keep.get(index_id)
            if kept is None or not kept[1]:      # a result line, once kept, stays
                keep[index_id] = (line_no, is_result, describe(obj) if describe else None)
    return keep, total


def compact_output(path):
    """Rewrite ``path`` with exactly one line per id, in file order: an id's first
    result line, else its last error line.  Goes through a temporary file in the
    same folder and an atomic rename, so a kill leaves the old or the new file.
    Returns the number of lines dropped."""
    keep, total = _chosen_lines(path)
    chosen = set(line_no for line_no, _, _ in keep.values())
    with OutputFile(path, binary=True, keep_mode=True, durable=True) as out, \
            open(path, "rb") as handle:
        for line_no, (_, line) in enumerate(_whole_lines(handle, path), 1):
            if line_no in chosen:
                out.write(line)
    return total - len(keep)


MAX_MODEL_NAMES = 20           # model names counted apart in output_summary


def output_summary(path):
    """What the output holds, an id at a time as the evaluators read it (for
    the settings sidecar and run.json): ids, answered, failed, empty answers,
    answers cut by the token limit (finish_reason "length", empty or not) and
    the model names the answer lines record (at most MAX_MODEL_NAMES, the
    rest counted as "(other names)")."""
    def describe(obj):
        model = obj.get("model")
        return ("error" in obj and "finish_reason" in obj, obj.get("finish_reason") == "length",
                model if isinstance(model, str) else None)
    keep, _ = _chosen_lines(path, describe)
    summary = {"ids": len(keep), "answered": 0, "failed": 0, "empty_answers": 0,
               "cut_by_token_limit": 0, "models": {}}
    for _, is_result, (empty, cut, model) in keep.values():
        summary["answered" if is_result else "failed"] += 1
        summary["empty_answers"] += empty
        summary["cut_by_token_limit"] += cut
        if is_result and model is not None:
            models = summary["models"]
            if model not in models and len(models) >= MAX_MODEL_NAMES:
                model = "(other names)"
            models[model] = models.get(model, 0) + 1
    return summary


# Characters some line readers (str.splitlines, editors) take for a line end:
# escaped, so that a line of the output is one line to every reader.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_LINE_BREAK_TABLE = str.maketrans(_LINE_BREAKS)


def readable_json_line(obj):
    """One strict JSON line, as UTF-8 bytes a person can read (Chinese as
    itself, not \\uXXXX); a lone surrogate (half of a character a server
    sent escaped) is written as its JSON escape, never as invalid UTF-8."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False).translate(_LINE_BREAK_TABLE)
    return (text + "\n").encode("utf-8", "backslashreplace")


class LineWriter(object):
    """Appends whole JSON lines to the output file, one write() each, from any
    thread.  O_APPEND and a single write per line mean a kill never leaves half
    a line behind a whole one; after close() further lines are dropped.  Every
    string of a line (and every key) has the secret of ``redactor`` taken out,
    whatever part of a server's answer it came from, and a NaN or infinite
    number is written as null (a line is strict JSON).  ``lines`` counts the
    lines written."""

    def __init__(self, path, redactor=None):
        self.lock = threading.Lock()
        self.closed = False
        self.lines = 0
        self.redactor = redactor or Redactor()
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError("cannot write output file %s: %s" % (path, exc.strerror or exc))

    def write(self, obj):
        # Strict JSON: a NaN or infinite number a server sent (in usage, say) becomes null.
        data = readable_json_line(finite(self.redactor.value(obj)))
        with self.lock:
            if self.closed:
                return False
            view = memoryview(data)
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
            self.lines += 1
            return True

    def close(self):
        with self.lock:
            if not self.closed:
                self.closed = True
                os.close(self.fd)


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

class Stats(object):
    """Counters shared by the worker threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answered = 0
        self.failed = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.total_tokens = 0
        self.empty = 0            # answers without text (counted in failed too)
        self.cut = 0              # answers cut by the token limit (finish_reason "length")
        self.in_flight = 0
        self.http_answers = 0     # answers with an HTTP status, any status
        self.ok_answers = 0       # 2xx answers

    @property
    def done(self):
        return self.answered + self.failed

    def add(self, **counts):
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)


class Settings(object):
    """Everything a worker needs besides the row."""

    def __init__(self, url, headers, model, sampling, extra_body, system_override,
                 retries, backoff_base, backoff_cap, key, keep_reasoning=True):
        self.url = url
        self.headers = headers
        self.model = model
        self.sampling = sampling
        self.extra_body = extra_body
        self.system_override = system_override    # applied as the rows are read (pending_rows)
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.key = key
        self.keep_reasoning = keep_reasoning
        self.redactor = Redactor(key)
        # The URL as messages show it: user info (a password) left out.
        self.shown_url = re.sub(r"//[^/@]*@", "//", url)


def ask_row(index_id, system, user, settings, transport, limiter, stats, wait,
            rng=random.random):
    """Ask for one row (``system``: its system prompt as pending_rows chose
    it), retrying what may heal -> (the output line (a dict),
    the refusal it is: (status, message) when it is the server's fixed
    refusal (failures.FirstAnswers), else None), or (None, None) when the
    run was stopped first.  Raises FatalAnswer on 401/403/404, on a redirect
    that was not followed (3xx) and when no request of the run has had any
    answer by the time this row gives up.  Every text quoted from the
    server has the key taken out (``settings.redactor``).

    A 429 pauses every thread (``RateLimiter.throttled``); it does not use up
    one of this row's ``retries`` when another request was answered since
    this row's previous 429 (the server's limit lets the run go on)."""
    data = json.dumps(build_body(settings.model, system, user, settings.sampling,
                                 settings.extra_body), ensure_ascii=False).encode("utf-8")
    attempt = charged = 0
    answered_at_429 = stats.ok_answers
    previous, same = None, 0          # the last 5xx answer (status, body), how often in a row
    while True:
        delay = limiter.reserve()
        if wait(delay):
            return None, None
        stats.add(in_flight=1)
        try:
            answer = transport.post(settings.url, data, settings.headers)
        finally:
            stats.add(in_flight=-1)
        attempt += 1
        charge, delay = True, None
        if answer.status is None:
            problem = answer.failure
        else:
            stats.add(http_answers=1)
            kind = classify_status(answer.status)
            if kind == "ok":
                stats.add(ok_answers=1)
                limiter.answered()
                try:
                    completion = parse_completion(answer.body)
                except ValueError as exc:
                    problem = "HTTP %d but %s" % (answer.status, exc)
                else:
                    return answer_line(index_id, settings, completion, answer, attempt), None
            elif kind == "redirect":
                raise FatalAnswer(redirect_message(answer, settings.url, settings.redactor))
            else:
                message = server_message(answer.body, settings.redactor)
                problem = "HTTP %d: %s" % (answer.status, message)
                if kind == "fatal":
                    raise FatalAnswer(fatal_message(answer.status, message, settings))
                if kind == "row_error":
                    refusal = (None if refuses_the_row(answer.body)
                               else (answer.status, message))
                    return error_line(index_id, settings.model, problem, answer,
                                      attempt), refusal
                if answer.status == 429:
                    delay = limiter.throttled(server_wait(answer.headers))
                    charge = stats.ok_answers == answered_at_429
                    answered_at_429 = stats.ok_answers
                else:
                    delay = server_wait(answer.headers)
                    if delay is not None:
                        limiter.pause(delay)     # every thread holds off, not only this one
                if fixed_answer(answer.status):
                    same = same + 1 if (answer.status, answer.body) == previous else 1
                    previous = (answer.status, answer.body)
                    if same >= SAME_ANSWER_REPEATS:
                        text = "%s (the same answer %d times: not retried)" % (problem, same)
                        return (error_line(index_id, settings.model, text, answer, attempt),
                                (answer.status, message))
        charged += charge
        if charged > settings.retries:
            if answer.status is None and stats.http_answers == 0:
                # Nothing has answered at all: a wrong URL or a server that is
                # down, not one row's bad luck; every row would fail the same way.
                raise FatalAnswer(unreachable_message(answer, attempt, settings))
            text = "%s (gave up after %d attempts)" % (problem, attempt)
            return error_line(index_id, settings.model, text, answer, attempt), None
        stats.add(retries=1)
        if delay is None:
            delay = backoff_delay(charged - 1, settings.backoff_base, settings.backoff_cap, rng)
        if wait(delay):
            return None, None


def fatal_message(status, message, settings):
    """Why a 401, 403 or 404 stops the run: the URL, the status, the server's words."""
    hint = ("is --api_url right, and --model a model it serves?" if status == 404
            else "check the key (--api_key_env) and the account's access")
    return "%s answered HTTP %d: %s (%s)" % (settings.shown_url, status, message, hint)


def unreachable_message(answer, attempts, settings):
    """Why a run stops when no request had any answer."""
    tries = "%d attempt%s, no request of this run answered" % (attempts,
                                                                "" if attempts == 1 else "s")
    if answer.no_connection:         # "cannot connect: REASON", "cannot connect within N s"
        reason = answer.failure[len("cannot connect"):]
        return "cannot connect to %s%s (%s)" % (settings.shown_url, reason, tries)
    return "%s: %s (%s)" % (settings.shown_url, answer.failure, tries)


def refusal_message(stopped, settings):
    """Why a run stops when its first rows were all refused alike."""
    status, message, rows = stopped
    repeated = (" (each asked %d times, the same answer each time)" % SAME_ANSWER_REPEATS
                if status >= 500 else "")
    return ("%s refused the first %s alike%s, HTTP %d: %s; nothing was written: check "
            "--model, --api_url, the API key and --extra_body"
            % (settings.shown_url, "row" if rows == 1 else "%d rows" % rows, repeated, status,
               message))


def answer_line(index_id, settings, completion, answer, attempts):
    """The output line of a 200 answer: a result, or an error line when the
    model's text is empty (a rerun asks again)."""
    line = {OUTPUT_ID: index_id}
    if completion.text.strip():
        line["generate_results"] = completion.text
    else:
        line["error"] = empty_answer_message(completion)
        line["http_status"] = answer.status
    if completion.reasoning is not None and settings.keep_reasoning:
        line["reasoning"] = completion.reasoning
    line.update({"model": completion.model or settings.model,
                 "finish_reason": completion.finish_reason, "usage": completion.usage,
                 "latency_s": round(answer.latency, 3), "attempts": attempts})
    return line


def empty_answer_message(completion):
    if completion.finish_reason == "length":
        text = ("empty answer: the token limit was reached before any answer text "
                "(finish_reason \"length\"); raise --max_tokens")
    else:
        text = "empty answer (finish_reason %s)" % one_line(json.dumps(completion.finish_reason),
                                                            60)
    if completion.reasoning:
        text += " (after %d characters of reasoning)" % len(completion.reasoning)
    return text


def error_line(index_id, model, message, answer, attempts):
    return {OUTPUT_ID: index_id, "error": message, "model": model,
            "http_status": answer.status, "attempts": attempts,
            "latency_s": round(answer.latency, 3)}


WORK_POLL_S = 0.1              # how soon a worker waiting for a row sees a stop


class Run(object):
    """Feeds pending rows through a bounded queue to ``concurrency`` threads that
    ask the model and append each answer to the output file."""

    def __init__(self, settings, transport, writer, concurrency, rate_limit,
                 clock=None, sleep=None, expected=None):
        self.settings = settings
        self.transport = transport
        self.writer = writer
        self.concurrency = concurrency
        self.stats = Stats()
        self.limiter = RateLimiter(rate_limit, clock or time.monotonic, settings.backoff_base,
                                   settings.backoff_cap)
        # the rows this run asks for (None: unknown), for the first answers' check
        self.first_answers = FirstAnswers(FIRST_ANSWERS if expected is None else expected)
        self.stop = threading.Event()
        self.fatal = None
        self.signal = None
        self.sleep = sleep           # tests: a fast sleep instead of waiting on the stop event
        self.work = queue.Queue(maxsize=2 * concurrency)
        self.threads = []

    def wait(self, seconds):
        """Sleep unless stopped -> True when the run is stopping."""
        if seconds > 0:
            if self.sleep is not None:
                self.sleep(seconds)
            else:
                return self.stop.wait(seconds)
        return self.stop.is_set()

    def request_stop(self, signum):
        if self.signal is None:
            self.signal = signum
        self.stop.set()

    def _worker(self):
        try:
            self._ask_until_done()
        finally:         # a worker that asks no more closes its connection
            release = getattr(self.transport, "release", None)
            if release is not None:
                release()

    def _next_item(self):
        """The next row to ask for; None when there is none or the run stops.
        A worker waiting for work sees a stop within WORK_POLL_S, so none is
        left waiting for ever behind a run that ended (in-process: the API, a
        notebook, the tests), its connection open."""
        while not self.stop.is_set():
            try:
                return self.work.get(timeout=WORK_POLL_S)
            except queue.Empty:
                continue
        return None

    def _ask_until_done(self):
        while True:
            item = self._next_item()
            if item is None or self.stop.is_set():
                return
            index_id, system, user = item
            try:
                line, refusal = ask_row(index_id, system, user, self.settings, self.transport,
                                        self.limiter, self.stats, self.wait)
            except FatalAnswer as exc:
                self._stop_with(str(exc))
                return
            except Exception as exc:   # a bug must not hang the run: record, go on
                line, refusal = {OUTPUT_ID: index_id, "model": self.settings.model,
                                 "error": "generate.py failed on this row: %s: %s"
                                 % (type(exc).__name__,
                                    one_line(self.settings.redactor.text(str(exc))))}, None
            if line is None:
                return
            lines = self.first_answers.offer(line, refusal)
            if self.first_answers.stopped is not None:
                self._stop_with(refusal_message(self.first_answers.stopped, self.settings))
                return
            for line in lines:
                if not self._write(line):
                    return

    def _stop_with(self, message):
        if self.fatal is None:
            self.fatal = message
        self.stop.set()

    def _write(self, line):
        """Append one line and count it -> False when the run is to stop."""
        try:
            if not self.writer.write(line):
                return False
        except OSError as exc:      # disk full, file system gone: nothing to go on with
            self._stop_with("cannot write the output file: %s" % (exc.strerror or exc))
            return False
        usage = line.get("usage")
        self.stats.add(answered="error" not in line, failed="error" in line,
                       empty="error" in line and "finish_reason" in line,
                       cut=line.get("finish_reason") == "length",
                       prompt_tokens=token_count(usage, "prompt_tokens"),
                       completion_tokens=token_count(usage, "completion_tokens"),
                       total_tokens=token_count(usage, "total_tokens"))
        return True

    def start(self):
        for number in range(self.concurrency):
            thread = threading.Thread(target=self._worker, name="ask-%d" % number,
                                      daemon=True)
            thread.start()
            self.threads.append(thread)

    def feed(self, items, on_tick=None):
        """Queue (id, system, user) items; blocks while the queue is full.
        -> False when the run stopped before everything was queued."""
        for item in items:
            while True:
                if on_tick:
                    on_tick()
                if self.stop.is_set():
                    return False
                try:
                    self.work.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
        for _ in self.threads:
            while not self.stop.is_set():
                try:
                    self.work.put(None, timeout=0.1)
                    break
                except queue.Full:
                    continue
        return not self.stop.is_set()

    def join(self, on_tick=None):
        """Wait for the threads (or a stop) -> True when every row was handled."""
        for thread in self.threads:
            while thread.is_alive():
                if self.stop.is_set():
                    return False
                thread.join(0.1)
                if on_tick:
                    on_tick()
        return not self.stop.is_set()


class ProgressLine(object):
    """An updating progress line on stderr (only when it is a terminal)."""

    def __init__(self, total, stats, stream, clock=time.monotonic):
        self.total = total
        self.stats = stats
        self.stream = stream
        self.clock = clock
        self.start = clock()
        self.last = None
        self.width = 0

    def tick(self):
        now = self.clock()
        if now - self.start < PROGRESS_DELAY_S:
            return
        if self.last is not None and now - self.last < PROGRESS_INTERVAL_S:
            return
        self.last = now
        text = progress_text(self.stats.done, self.total, self.stats.retries,
                             self.stats.completion_tokens, now - self.start)
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def finish(self):
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


def progress_text(done, total, retries, completion_tokens, elapsed):
    """``  120/1000 rows  12.3 rows/s  ETA 1 min 12 s  retries 3  45 tokens/s``."""
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = format_duration((total - done) / rate) if rate > 0 else "?"
    tokens = completion_tokens / elapsed if elapsed > 0 else 0.0
    return "  %d/%d rows  %.1f rows/s  ETA %s  retries %d  %.0f tokens/s" % (
        done, total, rate, eta, retries, tokens)


def summary_lines(out_path, model, total, skipped, kept_errors, stats, wall, dropped,
                  max_tokens=None):
    """The end-of-run summary (text lines)."""
    asked = stats.done
    rate = asked / wall if wall > 0 else 0.0
    rows = [
        ("rows in input", "%d" % total, ""),
        ("already done", "%d" % skipped, "(skipped)" if skipped else ""),
    ]
    if kept_errors:
        rows.append(("earlier errors kept", "%d" % kept_errors, "(--no_retry_errors)"))
    rows += [
        ("asked this run", "%d" % asked, ""),
        ("answered", "%d" % stats.answered, ""),
        ("failed", "%d" % stats.failed,
         "(\"error\" lines in the output; run the same command to retry them)"
         if stats.failed else ""),
    ]
    if stats.empty:
        rows.append(("empty answers", "%d" % stats.empty,
                     "(no text: failed, asked again by a rerun)"))
    if stats.cut:
        rows.append(("cut by the token limit", "%d" % stats.cut,
                     "(finish_reason \"length\": raise --max_tokens, now %d)" % max_tokens
                     if max_tokens else "(finish_reason \"length\": the server's own limit; "
                     "set --max_tokens higher)"))
    rows += [
        ("retried requests", "%d" % stats.retries, ""),
        ("tokens", "%d" % stats.total_tokens, "(prompt %d, completion %d)"
         % (stats.prompt_tokens, stats.completion_tokens)),
        ("wall time", "%.1f s" % wall, "(%.1f rows/s)" % rate),
    ]
    lines = ["generate.py: %s -> %s" % (model, out_path)]
    for label, value, note in rows:
        lines.append(("  %-22s %10s   %s" % (label, value, note)).rstrip())
    if dropped:
        lines.append("  (%d superseded line%s dropped: one line per id)"
                     % (dropped, "" if dropped == 1 else "s"))
    return lines
