#!/usr/bin/env python3
"""Ask a model for every row of a TransitLM test file, through the OpenAI
chat-completions API, and write its answers as a predictions file.

    python3 generate.py --input FILE --api_url URL --model NAME --out preds.jsonl

Each row becomes one non-streaming ``POST {api_url}/chat/completions`` with the
row's ``system_prompt`` (or ``--system_prompt_file``) and ``sft_prompt`` as the
messages.  ``--out`` gets one JSON line per row as answers arrive:

    {"indexid", "generate_results": TEXT, "model", "finish_reason", "usage",
     "latency_s", "attempts"}
    {"indexid", "error": MESSAGE, "model", "http_status", "attempts", "latency_s"}

Running the same command again skips rows that already have a result and asks
again for rows that failed (``--no_retry_errors`` keeps them), so a stopped run
continues where it left off.  At the end of a complete run the file holds one
line per id.  ``--evaluate`` then scores the file with the matching evaluator.

Standard library only.  The API key comes from the environment
(``OPENAI_API_KEY`` or ``--api_key_env NAME``) and is never printed or written.

Exit status: 0 when the run completes (rows that failed for good are listed as
``error`` lines and in the summary), 2 for a usage or input-file problem or a
fatal answer (401, 403, 404, an unknown host, a server that never answered),
130/143 when stopped by SIGINT/SIGTERM, or the evaluator's status when
``--evaluate`` fails.
"""

import argparse
import csv
import email.utils
import http.client
import json
import os
import queue
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

REPO_DIR = os.path.dirname(os.path.abspath(__file__))
if REPO_DIR not in sys.path:
    sys.path.insert(0, REPO_DIR)

from http_deadline import AnswerTooLarge, deadline_opener, read_body  # noqa: E402

MAX_ANSWER_BYTES = 64 * 1024 * 1024       # a chat answer larger than this is a failure
ID_COLUMNS = ("index_id", "indexid")     # accepted in the input and in --out
OUTPUT_ID = "indexid"                     # written to --out, as the release names it
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
USER_AGENT = "transitlm-generate/1"

EXIT_OK = 0
EXIT_USAGE = 2                            # usage or input problem, or a fatal answer
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}

FATAL_STATUSES = frozenset((401, 403, 404))     # bad key, no access, unknown model/path
RETRY_STATUSES = frozenset((408, 429))          # plus every 5xx
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
RETRY_AFTER_CAP_S = 600.0      # a server asking for longer than this is waited on this long
MESSAGE_LIMIT = 300            # characters of a server's answer quoted in an error
BENCHMARKS = ("single_route", "personalized", "diversity", "general_llm")
PERSONALIZED_REQ_TYPES = frozenset((2, 5, 7, 8))
INFER_SCAN_ROWS = 200          # rows looked at to infer the benchmark from the data
PROGRESS_DELAY_S = 2.0         # short runs print no progress line (as the evaluators)
PROGRESS_INTERVAL_S = 0.5


class UsageError(Exception):
    """A usage or input-file problem: one line on stderr, exit 2."""


class FatalAnswer(Exception):
    """An answer that no retry can fix (bad key, unknown model or path)."""


# ---------------------------------------------------------------------------
# Small pure helpers
# ---------------------------------------------------------------------------

def _raise_csv_field_limit():
    # Release cells (prompts, labels) can exceed the csv module's 128 kB default.
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 10


_raise_csv_field_limit()


def redact(text, secret):
    """``text`` with every occurrence of ``secret`` replaced (nothing to hide: unchanged)."""
    if not secret or not text:
        return text
    return text.replace(secret, "<redacted>")


def one_line(text, limit=MESSAGE_LIMIT):
    """Whitespace collapsed to single spaces, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def backoff_delay(attempt, base=BACKOFF_BASE_S, cap=BACKOFF_CAP_S, rng=random.random):
    """Wait before retry number ``attempt`` (0-based): full jitter over
    [0, min(cap, base * 2**attempt)], so many clients do not retry in step."""
    ceiling = min(cap, base * (2 ** min(attempt, 60)))
    return ceiling * rng()


def parse_retry_after(value, now=None):
    """Retry-After header -> seconds to wait (>= 0), or None when absent or unreadable.

    It is either a number of seconds or an HTTP date (RFC 9110 section 10.2.3).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:       # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def classify_status(status):
    """HTTP status -> "ok", "retry" (429, 408, 5xx), "fatal" (401/403/404) or
    "row_error" (any other 4xx: this row's request is refused, e.g. too long)."""
    if 200 <= status < 300:
        return "ok"
    if status in FATAL_STATUSES:
        return "fatal"
    if status in RETRY_STATUSES or status >= 500:
        return "retry"
    return "row_error"


def server_message(body):
    """The error text of a server's answer (OpenAI ``{"error": {"message"}}``,
    ``{"error": "..."}``, FastAPI ``{"detail"}``, ``{"message"}``), else its text."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        for key in ("error", "detail", "message"):
            value = obj.get(key)
            if isinstance(value, dict):
                value = value.get("message", value)
            if value:
                return one_line(value if isinstance(value, str) else json.dumps(value))
    return one_line(body) or "(empty answer)"


def build_messages(system_prompt, user_prompt):
    """Chat messages of one row; an empty system prompt sends no system message."""
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": user_prompt})
    return messages


def build_body(model, system_prompt, user_prompt, sampling, extra_body):
    """The chat-completions request body of one row.

    ``sampling`` holds temperature and, when given, max_tokens and top_p;
    ``extra_body`` (server-specific fields) is merged last and wins.
    """
    body = {"model": model, "messages": build_messages(system_prompt, user_prompt),
            "stream": False}
    for key in ("temperature", "max_tokens", "top_p"):
        if sampling.get(key) is not None:
            body[key] = sampling[key]
    body.update(extra_body or {})
    return body


def chat_url(api_url):
    """``http://host:8000/v1`` -> ``http://host:8000/v1/chat/completions`` (a URL
    that already ends with /chat/completions is kept)."""
    url = api_url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    return url + "/chat/completions"


def parse_completion(body):
    """A chat-completions answer -> (text, finish_reason, usage, model).

    Raises ValueError when the answer is not a chat completion.  A missing or
    null ``content`` is the empty text (the model said nothing).
    """
    try:
        obj = json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError("the answer is not JSON (%s)" % one_line(exc, 80))
    if not isinstance(obj, dict):
        raise ValueError("the answer is not a JSON object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the answer has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ValueError("the answer's first choice has no message")
    text = message.get("content")
    if text is None:
        text = ""
    elif not isinstance(text, str):
        # Some servers answer content as a list of parts: keep their text.
        if isinstance(text, list):
            text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
        else:
            raise ValueError("the answer's content is not text")
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    model = obj.get("model") if isinstance(obj.get("model"), str) else None
    return text, choice.get("finish_reason"), usage, model


def token_count(usage, key):
    value = (usage or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
        self.req_types = set()        # whole-number req_type values of the first rows
        self.label_keys = set()       # keys of the first rows' sft_label objects
        self.label_station_names = False   # a label's stations are names, not stop ids


def _open_csv(path):
    try:
        handle = open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise UsageError("cannot read input file %s: %s" % (path, exc.strerror or exc))
    return handle


def _header_columns(reader, path):
    header = next(reader, None)
    if header is None:
        raise UsageError("input file %s is empty" % path)
    header = [cell.strip() for cell in header]
    id_column = next((col for col in ID_COLUMNS if col in header), None)
    missing = [] if id_column else ["index_id (or indexid)"]
    if "sft_prompt" not in header:
        missing.append("sft_prompt")
    if missing:
        raise UsageError("input file %s lacks column(s) %s (has: %s)"
                         % (path, ", ".join(missing), ", ".join(header)))
    return header, header.index(id_column)


def _data_rows(reader, width, sample_count):
    """Non-blank data rows padded to the header's width, at most ``sample_count``."""
    count = 0
    for cells in reader:
        if sample_count is not None and count >= sample_count:
            return
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue   # a blank line is not a row
        count += 1
        yield cells + [""] * (width - len(cells))


def _whole_number(text):
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def scan_input(path, sample_count=None):
    """First pass over the input CSV -> InputScan (streaming; keeps ids only)."""
    scan = InputScan()
    seen = set()
    handle = _open_csv(path)
    with handle:
        try:
            reader = csv.reader(handle)
            header, i_id = _header_columns(reader, path)
            scan.has_system_prompt = "system_prompt" in header
            scan.has_req_type = "req_type" in header
            i_req = header.index("req_type") if scan.has_req_type else None
            i_label = header.index("sft_label") if "sft_label" in header else None
            for cells in _data_rows(reader, len(header), sample_count):
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
                    if i_req is not None:
                        value = _whole_number(cells[i_req])
                        if value is not None:
                            scan.req_types.add(value)
                    if i_label is not None:
                        keys, names = label_shape(cells[i_label])
                        scan.label_keys.update(keys)
                        scan.label_station_names = scan.label_station_names or names
        except UnicodeDecodeError:
            raise UsageError("input file %s is not UTF-8 text" % path)
        except csv.Error as exc:
            raise UsageError("input file %s is not valid CSV: %s" % (path, exc))
    return scan


TRANSFER_MARK = "\u3010\u6362\u4e58\u3011"   # 【换乘】 between legs of station_sequence


def label_shape(text):
    """A label cell -> (its JSON object's keys, does its station_sequence hold
    station names?).  Stop ids are ASCII (``bus-100022``); the general-LLM
    labels name stations in Chinese.  Not a JSON object: ((), False)."""
    try:
        obj = json.loads(text)
    except ValueError:
        return (), False
    if not isinstance(obj, dict):
        return (), False
    stations = obj.get("station_sequence")
    names = isinstance(stations, list) and any(
        isinstance(item, str) and item != TRANSFER_MARK and not item.isascii()
        for item in stations)
    return tuple(obj), names


def iter_input_rows(path, sample_count=None):
    """Second pass: yield (row number, id, system_prompt or "", sft_prompt), streaming."""
    handle = _open_csv(path)
    with handle:
        try:
            reader = csv.reader(handle)
            header, i_id = _header_columns(reader, path)
            i_system = header.index("system_prompt") if "system_prompt" in header else None
            i_prompt = header.index("sft_prompt")
            for row_no, cells in enumerate(_data_rows(reader, len(header), sample_count), 1):
                system = cells[i_system] if i_system is not None else ""
                yield row_no, cells[i_id], system, cells[i_prompt]
        except UnicodeDecodeError:
            raise UsageError("input file %s is not UTF-8 text" % path)
        except csv.Error as exc:
            raise UsageError("input file %s is not valid CSV: %s" % (path, exc))


def infer_benchmark(input_path, scan):
    """-> (benchmark name, why).  The release's file names first
    (transit-lm-benchmark{1,2,3}-test.csv), then the data: a label with
    first/second/third routes is diversity, one naming stations (station_name,
    or station names instead of stop ids in station_sequence) general_llm,
    a req_type of 2/5/7/8 personalized, anything else single_route."""
    name = os.path.basename(input_path).lower()
    by_name = (("benchmark1", "single_route"), ("benchmark2", "personalized"),
               ("benchmark3", "diversity"), ("general", "general_llm"),
               ("single_route", "single_route"), ("personalized", "personalized"),
               ("diversity", "diversity"))
    for marker, benchmark in by_name:
        if marker in name:
            return benchmark, "from the file name"
    if scan.label_keys & {"first", "second", "third"}:
        return "diversity", "labels hold first/second/third routes"
    if "station_name" in scan.label_keys or scan.label_station_names:
        return "general_llm", "labels name stations instead of stop ids"
    if scan.req_types & PERSONALIZED_REQ_TYPES:
        return "personalized", "req_type column holds preference types"
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


def _whole_lines(handle):
    """Yield (start offset, line bytes with newline) of whole lines; a trailing
    line without its newline (a write cut short) is not yielded."""
    offset = 0
    for line in handle:
        if not line.endswith(b"\n"):
            return
        yield offset, line
        offset += len(line)


def _parse_output_line(line, path, line_no):
    """-> (id, is_result) or None for a blank line; UsageError for a foreign line."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        obj = None
    index_id = _line_id(obj) if isinstance(obj, dict) else None
    if index_id is None or not ("generate_results" in obj or "error" in obj):
        raise UsageError("%s line %d is not a result or error line of generate.py; "
                         "refusing to add to it (choose another --out)" % (path, line_no))
    return index_id, "generate_results" in obj


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
        for line_no, (offset, line) in enumerate(_whole_lines(handle), 1):
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


def compact_output(path):
    """Rewrite ``path`` with exactly one line per id, in file order: an id's first
    result line, else its last error line.  Goes through a temporary file in the
    same folder and an atomic rename, so a kill leaves the old or the new file.
    Returns the number of lines dropped."""
    keep = {}                     # id -> (line number, is_result)
    total = 0
    with open(path, "rb") as handle:
        for line_no, (_, line) in enumerate(_whole_lines(handle), 1):
            parsed = _parse_output_line(line, path, line_no)
            if parsed is None:
                continue
            total += 1
            index_id, is_result = parsed
            kept = keep.get(index_id)
            if kept is None or not kept[1]:      # a result line, once kept, stays
                keep[index_id] = (line_no, is_result)
    chosen = set(line_no for line_no, _ in keep.values())
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                                suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as handle:
            for line_no, (_, line) in enumerate(_whole_lines(handle), 1):
                if line_no in chosen:
                    out.write(line)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.chmod(temp, os.stat(path).st_mode & 0o7777)
        except OSError:
            pass
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return total - len(keep)


class LineWriter(object):
    """Appends whole JSON lines to the output file, one write() each, from any
    thread.  O_APPEND and a single write per line mean a kill never leaves half
    a line behind a whole one; after close() further lines are dropped."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.closed = False
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError("cannot write output file %s: %s" % (path, exc.strerror or exc))

    def write(self, obj):
        data = (json.dumps(obj, ensure_ascii=True) + "\n").encode("ascii")
        with self.lock:
            if self.closed:
                return False
            view = memoryview(data)
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
            return True

    def close(self):
        with self.lock:
            if not self.closed:
                self.closed = True
                os.close(self.fd)


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

class Answer(object):
    """One HTTP exchange: status (None for a transport failure), headers, body."""

    __slots__ = ("status", "headers", "body", "failure", "latency")

    def __init__(self, status=None, headers=None, body=b"", failure=None, latency=0.0):
        self.status = status
        self.headers = headers or {}
        self.body = body
        self.failure = failure       # text of a transport failure (timeout, reset...)
        self.latency = latency


class UrllibTransport(object):
    """POSTs JSON with urllib (proxies from the environment, https, redirects).

    ``timeout`` bounds the whole request -- connect, send and the full answer
    (http_deadline) -- so a server trickling its answer cannot hold a row.
    """

    def __init__(self, timeout, clock=time.monotonic):
        self.timeout = timeout
        self.clock = clock
        self.opener = deadline_opener()

    def post(self, url, data, headers):
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        start = self.clock()
        request.deadline = time.monotonic() + self.timeout
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                body = read_body(response, request.deadline, MAX_ANSWER_BYTES)
                return Answer(response.status, dict(response.headers.items()), body,
                              latency=self.clock() - start)
        except AnswerTooLarge as exc:
            return Answer(failure=str(exc), latency=self.clock() - start)
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read()
            except (OSError, http.client.HTTPException):
                body = b""
            return Answer(exc.code, dict(exc.headers.items()) if exc.headers else {}, body,
                          latency=self.clock() - start)
        except urllib.error.URLError as exc:
            return self._failure(exc.reason, start)
        except (OSError, http.client.HTTPException) as exc:
            return self._failure(exc, start)

    def _failure(self, reason, start):
        # DNS failures, certificate errors and unsupported URLs do not heal by
        # retrying: they stop the run like a 404 would.
        if isinstance(reason, (socket.gaierror, ssl.SSLCertVerificationError)):
            raise FatalAnswer("cannot reach the API: %s" % one_line(reason))
        if isinstance(reason, (socket.timeout, TimeoutError)):
            text = "no answer within %g s" % self.timeout
        elif isinstance(reason, http.client.RemoteDisconnected):
            text = "connection closed without an answer"
        else:
            text = one_line(reason) or type(reason).__name__
        return Answer(failure=text, latency=self.clock() - start)


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

class RateLimiter(object):
    """At most ``rate`` request starts per second across threads (None: no limit),
    and a shared pause after a Retry-After."""

    def __init__(self, rate, clock=time.monotonic):
        self.interval = 1.0 / rate if rate else 0.0
        self.clock = clock
        self.lock = threading.Lock()
        self.next_start = 0.0
        self.paused_until = 0.0

    def reserve(self):
        """Book the next start -> seconds to wait before sending."""
        with self.lock:
            now = self.clock()
            start = max(now, self.next_start, self.paused_until)
            if self.interval:
                self.next_start = start + self.interval
            return start - now

    def pause(self, seconds):
        """No request starts for ``seconds`` (the server asked, Retry-After)."""
        with self.lock:
            self.paused_until = max(self.paused_until, self.clock() + seconds)


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
        self.in_flight = 0
        self.http_answers = 0     # answers with an HTTP status, any status

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
                 retries, backoff_base, backoff_cap, key):
        self.url = url
        self.headers = headers
        self.model = model
        self.sampling = sampling
        self.extra_body = extra_body
        self.system_override = system_override
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.key = key


def ask_row(index_id, system, user, settings, transport, limiter, stats, wait,
            rng=random.random):
    """Ask for one row, retrying what may heal -> the output line (a dict), or
    None when the run was stopped first.  Raises FatalAnswer on 401/403/404."""
    if settings.system_override is not None:
        system = settings.system_override
    data = json.dumps(build_body(settings.model, system, user, settings.sampling,
                                 settings.extra_body), ensure_ascii=False).encode("utf-8")
    attempt = 0
    while True:
        delay = limiter.reserve()
        if wait(delay):
            return None
        stats.add(in_flight=1)
        try:
            answer = transport.post(settings.url, data, settings.headers)
        finally:
            stats.add(in_flight=-1)
        attempt += 1
        retry_after = None
        if answer.status is None:
            problem = answer.failure
        else:
            stats.add(http_answers=1)
            kind = classify_status(answer.status)
            if kind == "ok":
                try:
                    text, finish_reason, usage, model = parse_completion(answer.body)
                except ValueError as exc:
                    problem = "HTTP %d but %s" % (answer.status, exc)
                else:
                    return {OUTPUT_ID: index_id, "generate_results": text,
                            "model": model or settings.model, "finish_reason": finish_reason,
                            "usage": usage, "latency_s": round(answer.latency, 3),
                            "attempts": attempt}
            else:
                message = redact(server_message(answer.body), settings.key)
                problem = "HTTP %d: %s" % (answer.status, message)
                if kind == "fatal":
                    raise FatalAnswer(problem)
                if kind == "row_error":
                    return error_line(index_id, settings.model, problem, answer, attempt)
                retry_after = parse_retry_after(_header(answer.headers, "Retry-After"))
        if attempt > settings.retries:
            if answer.status is None and stats.http_answers == 0:
                # Nothing has answered at all: a wrong URL or a server that is
                # down, not one row's bad luck; every row would fail the same way.
                raise FatalAnswer("cannot reach %s: %s (%d attempt%s, no answer yet in "
                                  "this run)" % (settings.url, problem, attempt,
                                                 "" if attempt == 1 else "s"))
            text = "%s (gave up after %d attempts)" % (problem, attempt)
            return error_line(index_id, settings.model, text, answer, attempt)
        stats.add(retries=1)
        if retry_after is not None:
            limiter.pause(retry_after)     # every thread holds off, not only this one
            delay = retry_after
        else:
            delay = backoff_delay(attempt - 1, settings.backoff_base, settings.backoff_cap, rng)
        if wait(delay):
            return None


def _header(headers, name):
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def error_line(index_id, model, message, answer, attempts):
    return {OUTPUT_ID: index_id, "error": message, "model": model,
            "http_status": answer.status, "attempts": attempts,
            "latency_s": round(answer.latency, 3)}


class Run(object):
    """Feeds pending rows through a bounded queue to ``concurrency`` threads that
    ask the model and append each answer to the output file."""

    def __init__(self, settings, transport, writer, concurrency, rate_limit,
                 clock=time.monotonic, sleep=None):
        self.settings = settings
        self.transport = transport
        self.writer = writer
        self.concurrency = concurrency
        self.stats = Stats()
        self.limiter = RateLimiter(rate_limit, clock)
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
        while True:
            item = self.work.get()
            if item is None or self.stop.is_set():
                return
            index_id, system, user = item
            try:
                line = ask_row(index_id, system, user, self.settings, self.transport,
                               self.limiter, self.stats, self.wait)
            except FatalAnswer as exc:
                if self.fatal is None:
                    self.fatal = str(exc)
                self.stop.set()
                return
            except Exception as exc:   # a bug must not hang the run: record, go on
                line = {OUTPUT_ID: index_id, "model": self.settings.model,
                        "error": "generate.py failed on this row: %s: %s"
                        % (type(exc).__name__, redact(one_line(exc), self.settings.key))}
            if line is None:
                return
            try:
                if not self.writer.write(line):
                    return
            except OSError as exc:      # disk full, file system gone: nothing to go on with
                if self.fatal is None:
                    self.fatal = "cannot write the output file: %s" % (exc.strerror or exc)
                self.stop.set()
                return
            if "error" in line:
                self.stats.add(failed=1)
            else:
                usage = line.get("usage")
                self.stats.add(answered=1, prompt_tokens=token_count(usage, "prompt_tokens"),
                               completion_tokens=token_count(usage, "completion_tokens"),
                               total_tokens=token_count(usage, "total_tokens"))

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


def summary_lines(out_path, model, total, skipped, kept_errors, stats, wall, dropped):
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


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


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


class _Parser(argparse.ArgumentParser):
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
                        help="output file (one JSON line per row; an existing file is "
                             "continued). Required unless --dry_run")
    parser.add_argument("--system_prompt_file", metavar="PATH",
                        help="system prompt for every row instead of the system_prompt "
                             "column (UTF-8 text)")
    parser.add_argument("--temperature", type=_number, default=0.0,
                        help="sampling temperature (default 0)")
    parser.add_argument("--max_tokens", type=_positive_int, metavar="N",
                        help="most tokens per answer (default: the server's)")
    parser.add_argument("--top_p", type=_number, help="nucleus sampling (default: the server's)")
    parser.add_argument("--extra_body", metavar="JSON",
                        help="JSON object merged into every request, for server-specific "
                             "fields, e.g. '{\"chat_template_kwargs\": "
                             "{\"enable_thinking\": false}}'")
    parser.add_argument("--timeout", type=_positive_float, default=600.0, metavar="SECONDS",
                        help="seconds to wait for an answer before retrying (default 600)")
    parser.add_argument("--api_key_env", metavar="NAME",
                        help="environment variable holding the API key (default "
                             "OPENAI_API_KEY; unset = no Authorization header)")
    parser.add_argument("--concurrency", type=_positive_int, default=8, metavar="N",
                        help="requests in flight (default 8)")
    parser.add_argument("--rate_limit", type=_positive_float, metavar="R",
                        help="at most R requests per second (default: no limit)")
    parser.add_argument("--retries", type=_non_negative_int, default=6, metavar="N",
                        help="retries of a request that got 429, 408, 5xx, a timeout or a "
                             "dropped connection (default 6)")
    parser.add_argument("--backoff", type=_positive_float, default=BACKOFF_BASE_S,
                        metavar="SECONDS",
                        help="first retry waits up to this long, doubling each time, "
                             "capped at %g s (default %g); Retry-After wins"
                             % (BACKOFF_CAP_S, BACKOFF_BASE_S))
    parser.add_argument("--no_retry_errors", action="store_true",
                        help="keep rows that failed in an earlier run instead of asking again")
    parser.add_argument("--sample_count", type=_positive_int, metavar="N",
                        help="only the first N rows")
    parser.add_argument("--dry_run", action="store_true",
                        help="print the first request (key hidden) and send nothing")
    parser.add_argument("--evaluate", action="store_true",
                        help="after a complete run, score the output with the matching "
                             "evaluator and write its run folder")
    parser.add_argument("--benchmark", choices=BENCHMARKS,
                        help="evaluator for --evaluate (default: inferred from the file "
                             "name, else the data)")
    parser.add_argument("--eval_out", metavar="DIR",
                        help="run folder of --evaluate (default: OUT without .jsonl + .run)")
    parser.add_argument("--protocol", choices=("reference", "paper"),
                        help="--evaluate: the evaluator's rule set (default: its own)")
    parser.add_argument("--station_info", metavar="CSV",
                        help="--evaluate: station file (default: the evaluator's)")
    return parser


def parse_extra_body(text):
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError("--extra_body is not JSON: %s" % exc)
    if not isinstance(value, dict):
        raise UsageError("--extra_body must be a JSON object")
    if value.get("stream"):
        raise UsageError("--extra_body cannot turn on streaming (generate.py reads whole answers)")
    return value


def read_system_prompt(path):
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError("cannot read --system_prompt_file %s: %s"
                         % (path, exc.strerror or exc))
    except UnicodeDecodeError:
        raise UsageError("--system_prompt_file %s is not UTF-8 text" % path)


def request_headers(key):
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "User-Agent": USER_AGENT}
    if key:
        headers["Authorization"] = "Bearer " + key
    return headers


def pending_rows(input_path, sample_count, state, retry_errors):
    """Rows to ask for: (id, system, user), each id once, none already answered."""
    asked = set()
    for _, index_id, system, user in iter_input_rows(input_path, sample_count):
        if not index_id.strip() or index_id in asked or index_id in state.results:
            continue
        if index_id in state.errors and not retry_errors:
            continue
        asked.add(index_id)
        yield index_id, system, user


def dry_run_text(url, headers, body, key_env, row_text):
    """The first request as text, with the key hidden."""
    lines = ["POST %s" % url]
    for name, value in headers.items():
        if name == "Authorization":
            value = "Bearer <redacted: $%s>" % key_env
        lines.append("%s: %s" % (name, value))
    if "Authorization" not in headers:
        lines.append("(no Authorization header: $%s is not set)" % key_env)
    lines.append("")
    lines.append(json.dumps(body, ensure_ascii=False, indent=2))
    lines.append("")
    lines.append("dry run: nothing sent; " + row_text)
    return "\n".join(lines)


def evaluator_command(benchmark, input_path, out_path, run_dir, args):
    command = [sys.executable, os.path.join(REPO_DIR, benchmark, "evaluate.py"),
               "--input", input_path, "--predictions", out_path, "--out", run_dir, "--quiet"]
    if args.sample_count is not None:
        command += ["--sample_count", str(args.sample_count)]
    if args.protocol:
        command += ["--protocol", args.protocol]
    if args.station_info:
        command += ["--station_info", args.station_info]
    return command


def check_out_path(out, input_path):
    """--out must be a regular file (or not exist yet) in an existing folder."""
    if os.path.exists(out) and os.path.exists(input_path) and os.path.samefile(out, input_path):
        raise UsageError("--out is the input file")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError("folder of --out does not exist: %s" % folder)
    if os.path.isdir(out):
        raise UsageError("--out %s is a folder" % out)
    if os.path.exists(out) and not os.path.isfile(out):
        raise UsageError("--out %s is not a regular file (it is read back to resume)" % out)


def input_notes(scan, has_system_override):
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
    if not has_system_override and not scan.has_system_prompt:
        notes.append("input has no system_prompt column: requests carry only the user "
                     "message (--system_prompt_file sets one)")
    return notes


def run(argv, environ, stdout, stderr, transport=None, sleep=None):
    """The command: -> exit status.  ``transport``/``sleep`` are for tests."""
    args = build_parser().parse_args(argv)
    if args.out is None and not args.dry_run:
        raise UsageError("--out is required (or use --dry_run)")
    key_env = args.api_key_env or DEFAULT_KEY_ENV
    key = environ.get(key_env) or None
    if args.api_key_env and key is None:
        raise UsageError("--api_key_env %s: that environment variable is not set" % key_env)
    if not args.api_url.lower().startswith(("http://", "https://")):
        raise UsageError("--api_url must start with http:// or https:// (got %s)"
                         % redact(args.api_url, key))
    extra_body = parse_extra_body(args.extra_body)
    system_override = (read_system_prompt(args.system_prompt_file)
                       if args.system_prompt_file else None)
    if args.out:
        check_out_path(args.out, args.input)

    scan = scan_input(args.input, args.sample_count)
    state = read_output_state(args.out) if args.out else OutputState()
    for note in input_notes(scan, system_override is not None):
        stderr.write("generate.py: note: %s\n" % note)

    input_ids = set(scan.ids)
    skipped = len(input_ids & state.results)
    kept_errors = 0 if not args.no_retry_errors else len(input_ids & state.errors)
    total = len(scan.ids)
    todo = total - skipped - kept_errors
    settings = Settings(chat_url(args.api_url), request_headers(key), args.model,
                        {"temperature": args.temperature, "max_tokens": args.max_tokens,
                         "top_p": args.top_p},
                        extra_body, system_override, args.retries, args.backoff,
                        BACKOFF_CAP_S, key)

    if args.dry_run:
        first = next(pending_rows(args.input, args.sample_count, state,
                                  not args.no_retry_errors), None)
        if first is None:
            stdout.write("dry run: every one of the %d rows already has a result in %s\n"
                         % (total, args.out))
            return EXIT_OK
        index_id, system, user = first
        body = build_body(args.model, system_override if system_override is not None
                          else system, user, settings.sampling, extra_body)
        row_text = "first of %d row%s to ask (id %s)" % (todo, "" if todo == 1 else "s",
                                                         index_id)
        stdout.write(redact(dry_run_text(settings.url, settings.headers, body, key_env,
                                         row_text), key) + "\n")
        return EXIT_OK

    drop_partial_line(args.out, state)
    writer = LineWriter(args.out)
    run_ = Run(settings, transport or UrllibTransport(args.timeout), writer,
               args.concurrency, args.rate_limit, sleep=sleep)
    progress = ProgressLine(todo, run_.stats, stderr) if stderr.isatty() else None
    previous = _install_signal_handlers(run_)
    try:
        status = _execute(args, run_, writer, progress, state, total, skipped, kept_errors,
                          todo, stdout, stderr)
    finally:
        _restore_signal_handlers(previous)
    if status is not None:
        return status
    if not args.evaluate:
        return EXIT_OK
    benchmark, why = (args.benchmark, "--benchmark") if args.benchmark \
        else infer_benchmark(args.input, scan)
    run_dir = args.eval_out or run_dir_for(args.out)
    stdout.write("\nevaluating with %s/evaluate.py (%s) -> %s\n" % (benchmark, why, run_dir))
    stdout.flush()
    status = run_evaluator(evaluator_command(benchmark, args.input, args.out, run_dir, args),
                           stdout, stderr)
    if status != 0:
        stderr.write("generate.py: the evaluator exited with status %d\n" % status)
    return status


def _execute(args, run_, writer, progress, state, total, skipped, kept_errors, todo,
             stdout, stderr):
    """Ask for the pending rows, then compact and summarise -> exit status when
    the run ends here (stopped, fatal answer), None when it completed."""
    started = time.monotonic()
    try:
        run_.start()
        tick = progress.tick if progress else None
        complete = run_.feed(pending_rows(args.input, args.sample_count, state,
                                          not args.no_retry_errors), tick)
        complete = run_.join(tick) and complete
    finally:
        writer.close()           # waits for a line being written; later ones are dropped
        if progress:
            progress.finish()
    wall = time.monotonic() - started
    if run_.fatal is not None:
        stderr.write("generate.py: stopped: %s\n" % run_.fatal)
        return EXIT_USAGE
    if not complete:
        name = signal.Signals(run_.signal).name if run_.signal else "a stop request"
        stderr.write("generate.py: stopped by %s after %d of %d rows of this run; run the "
                     "same command again to continue\n" % (name, run_.stats.done, todo))
        return SIGNAL_EXIT.get(run_.signal, 1)
    # Signals arriving while compacting only set the flag: the rename completes.
    try:
        dropped = compact_output(args.out) if read_output_state(args.out).needs_compaction else 0
    except OSError as exc:
        raise UsageError("cannot rewrite output file %s with one line per id: %s (its "
                         "lines are all there; the evaluators use an id's result line)"
                         % (args.out, exc.strerror or exc))
    for line in summary_lines(args.out, args.model, total, skipped, kept_errors,
                              run_.stats, wall, dropped):
        stdout.write(line + "\n")
    if run_.signal is not None:
        return SIGNAL_EXIT.get(run_.signal, 1)
    return None


def _has_fd(stream):
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is both
        return False


def run_evaluator(command, stdout, stderr):
    """Run the evaluator; its report goes to our stdout (copied when that stream
    is not a real file, as in tests) -> its exit status."""
    if _has_fd(stdout) and _has_fd(stderr):
        return subprocess.call(command)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
    except KeyboardInterrupt:
        sys.stderr.write("generate.py: stopped by SIGINT\n")
        return SIGNAL_EXIT[signal.SIGINT]
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
