"""HTTP client of the route-eval service (the transport of the general-LLM evaluator).

    client = RouteEvalClient("http://127.0.0.1:8765")
    results = client.evaluate(cases)            # one result per case, in order

Cases are posted in batches to ``POST /api/eval/route/batch``.  ``timeout``
bounds a whole request (connect, send, redirects and the full answer): every
socket call waits only for what is left of it, so a service that trickles
its answer cannot hold the client longer.  Only a 307/308 redirect to the
same origin is followed (the POST and its body kept); any other redirect
fails the batch without a retry (transitlm.io.http_client).  An answer is read
up to ``MAX_ANSWER_BYTES`` and decoded within the limits of
transitlm.io.bounded_json; an error answer's body up to ``MAX_ERROR_BYTES``.
Text quoted from the service in a message is cut to one line of at most
``MESSAGE_LIMIT`` characters with control characters escaped.  Connection errors, timeouts, 5xx
answers and invalid answers (not JSON, wrong shape, a field of the wrong
type) are retried with exponential backoff; a 4xx answer is not (retrying
would get the same answer).  A batch that still fails raises
``ServiceUnavailable``.  The client never turns a failure into an
"unreachable" verdict on its own: with ``on_batch_failure="mark"`` the failed
batch's cases get explicit error results carrying ``"service_failure": true``
and are counted in ``marked_cases``, so the caller decides what they mean.
A result with an ``error`` text of the service's own (a case it could not
judge) is returned as is.

Standard library only; Python 3.8+.
"""

import json
import math
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from common import type_name  # noqa: E402
from general_llm.route_eval import error_result  # noqa: E402
from transitlm.io.bounded_json import loads_bounded  # noqa: E402
from transitlm.io.http_client import (AnswerTooLarge, deadline_opener, read_body,  # noqa: E402
                                   read_error_body, redirect_problem)
from transitlm.evaluation.provenance import without_credentials  # noqa: E402
from transitlm.io.terminal import printable  # noqa: E402

BATCH_PATH = "/api/eval/route/batch"
USER_AGENT = "TransitLM-evaluator/1.0"
FAILURE_POLICIES = ("raise", "mark")
UNAVAILABLE_PREFIX = "service unavailable: "
# An answer is about 1 KB per case (1,000 cases at most); anything near this is not one.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024      # of an error answer's body, quoted in a message
MESSAGE_LIMIT = 300              # characters of the service's text quoted in a message

# The fields of a match_details leg; each is text or null when present.
LEG_FIELDS = ("line_query", "line_name", "boarding_query", "boarding_name",
              "boarding_stop_id", "alighting_query", "alighting_name", "alighting_stop_id")


class ServiceUnavailable(Exception):
    """A batch failed for good (after the retries, or a non-retryable answer)."""


class _Retryable(Exception):
    """One attempt failed in a way a later attempt may not (network, 5xx, invalid answer)."""


class _Final(Exception):
    """One attempt failed in a way retrying cannot fix (4xx)."""


def batch_url(api_url):
    """Base URL (``http://host:port``) or full batch URL -> the full batch URL."""
    text = (api_url or "").strip()
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("route-eval API URL %r is not an http(s) URL such as "
                         "http://127.0.0.1:8765" % api_url)
    path = parts.path.rstrip("/")
    if not path.endswith(BATCH_PATH):
        path += BATCH_PATH
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class RouteEvalClient(object):
    """Posts cases to the route-eval service in batches.

    ``timeout`` (seconds, finite, > 0) bounds each request as a whole.
    ``retries`` is the number of extra attempts after the first one; the
    waits between attempts are ``backoff``, 2 x ``backoff``, 4 x ... seconds,
    spent through ``sleep`` (tests inject a no-op).  After ``evaluate``,
    ``marked_cases`` is how many cases got a "service unavailable" error
    result and ``failures`` the message of each failed batch.  Bad settings
    raise ``ValueError``.
    """

    def __init__(self, api_url, batch_size=50, timeout=30.0, retries=3, backoff=0.5,
                 sleep=time.sleep, opener=None):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError("batch_size must be a positive integer, got %r" % (batch_size,))
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError("retries must be a non-negative integer, got %r" % (retries,))
        if not _is_number(timeout) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("timeout must be a finite number of seconds above 0, got %r"
                             % (timeout,))
        if not _is_number(backoff) or not math.isfinite(backoff) or backoff < 0:
            raise ValueError("backoff must be a finite number of seconds, 0 or more, got %r"
                             % (backoff,))
        self.url = batch_url(api_url)
        # The URL as messages name it: without credentials (user information).
        self.shown_url = without_credentials(self.url)
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        # The default opener bounds every socket call by the request's deadline;
        # another opener gets the deadline checked between reads of the answer only.
        self._opener = opener or deadline_opener()
        self.marked_cases = 0
        self.failures = []

    # -- public -----------------------------------------------------------------
    def evaluate(self, cases, progress=None, on_batch_failure="raise"):
        """One result per case, in case order.

        ``progress(n)`` is called after each batch with the number of cases
        it held (answered or marked), so a counter's ``step`` fits.  A batch that
        fails for good raises ``ServiceUnavailable`` (``on_batch_failure=
        "raise"``) or, with ``"mark"``, yields error results for its cases,
        each with ``"service_failure": True``.
        """
        if on_batch_failure not in FAILURE_POLICIES:
            raise ValueError("on_batch_failure must be one of %s, got %r"
                             % (", ".join(FAILURE_POLICIES), on_batch_failure))
        cases = list(cases)
        self.marked_cases = 0
        self.failures = []
        results = []
        total = len(cases)
        n_batches = (total + self.batch_size - 1) // self.batch_size
        for number, start in enumerate(range(0, total, self.batch_size), start=1):
            batch = cases[start:start + self.batch_size]
            where = "batch %d/%d (cases %d-%d)" % (number, n_batches, start + 1,
                                                   start + len(batch))
            try:
                results.extend(self.post_batch(batch, where))
            except ServiceUnavailable as exc:
                if on_batch_failure == "raise":
                    raise
                self.failures.append(str(exc))
                self.marked_cases += len(batch)
                results.extend(service_failure_result(str(exc)) for _ in batch)
            if progress is not None:
                progress(len(batch))
        return results

    def post_batch(self, batch, where="batch"):
        """Results of one batch, retrying transient failures; else ServiceUnavailable."""
        # ASCII escapes: a lone surrogate in a case is sent as "\\ud800" (the
        # service refuses that case) instead of failing to encode here.
        body = json.dumps({"cases": batch}, ensure_ascii=True).encode("ascii")
        attempts = self.retries + 1
        last = None
        for attempt in range(attempts):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return self._attempt(body, len(batch))
            except _Retryable as exc:
                last = exc
            except _Final as exc:
                raise ServiceUnavailable(without_credentials(
                    "route-eval service %s failed on %s after %d %s: %s (not retryable)"
                    % (self.shown_url, where, attempt + 1, _tries(attempt + 1), exc)))
        raise ServiceUnavailable(without_credentials(
            "route-eval service %s failed on %s after %d %s: %s"
            % (self.shown_url, where, attempts, _tries(attempts), last)))

    # -- one attempt ------------------------------------------------------------
    def _attempt(self, body, expected):
        deadline = time.monotonic() + self.timeout
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json; charset=utf-8",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        })
        request.deadline = deadline          # read by the deadline handlers
        timed_out = _Retryable("timed out after %g s" % self.timeout)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = read_body(response, deadline, MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                message = _quoted(redirect_problem(exc.code, self.url, exc.headers))
                exc.close()
                raise _Final(message)
            message = "HTTP %d %s" % (exc.code, _error_detail(exc, deadline))
            exc.close()
            if 500 <= exc.code < 600:
                raise _Retryable(message)
            raise _Final(message)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, socket.timeout):
                raise timed_out
            raise _Retryable("cannot connect (%s)" % _describe(reason))
        except socket.timeout:
            raise timed_out
        except AnswerTooLarge as exc:
            raise _Retryable(str(exc))
        except Exception as exc:  # noqa: BLE001 -- whatever the service sends: this try fails
            # http.client.HTTPException (a status line, header or chunk that is
            # not HTTP), OSError, ValueError (http.client on a garbled chunk size)
            raise _Retryable("connection failed (%s)" % _describe(exc))
        return _parse_results(raw, expected)


def service_failure_result(message):
    """The result given to each case of a batch that failed for good ("mark")."""
    result = error_result(UNAVAILABLE_PREFIX + message)
    result["service_failure"] = True
    return result


# ---------------------------------------------------------------------------
# The answer, field by field
# ---------------------------------------------------------------------------

def _parse_results(raw, expected):
    """The ``results`` list of a 200 answer, every field checked; else _Retryable."""
    try:
        payload = loads_bounded(raw)
    except ValueError as exc:
        raise _Retryable("invalid answer: %s" % _quoted(str(exc)))
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, list):
        raise _Retryable("invalid answer: no \"results\" list")
    if len(results) != expected:
        raise _Retryable("invalid answer: %d result(s) for a batch of %d case(s)"
                         % (len(results), expected))
    for number, result in enumerate(results, start=1):
        problem = result_problem(result)
        if problem:
            raise _Retryable("invalid answer: result %d %s" % (number, problem))
    return results


def result_problem(result):
    """What is wrong with one result of an answer, or None.

    An object; ``error`` text or null; without an error text, ``reachable``
    and ``station_grounding`` must be there.  Where present: those two are
    true/false (the text "false" is not), the reasons text, ``match_details``
    a list of objects whose leg fields are text or null, ``reachable_code``
    text or null, ``station_grounding_codes`` a list of text.  Other keys
    are ignored.
    """
    if not isinstance(result, dict):
        return "is %s, expected an object" % type_name(result)
    error = result.get("error")
    if error is not None and not isinstance(error, str):
        return "\"error\" is %s, expected text" % type_name(error)
    for key in ("reachable", "station_grounding"):
        if key not in result:
            if error is None:
                return "has no \"%s\"" % key
        elif not isinstance(result[key], bool):
            return "\"%s\" is %s, expected true or false" % (key, type_name(result[key]))
    for key in ("reachable_reason", "station_grounding_reason"):
        if key in result and not isinstance(result[key], str):
            return "\"%s\" is %s, expected text" % (key, type_name(result[key]))
    code = result.get("reachable_code")
    if code is not None and not isinstance(code, str):
        return "\"reachable_code\" is %s, expected text or null" % type_name(code)
    if "station_grounding_codes" in result:
        codes = result["station_grounding_codes"]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            return "\"station_grounding_codes\" is not a list of text"
    if "match_details" in result:
        details = result["match_details"]
        if not isinstance(details, list):
            return "\"match_details\" is %s, expected a list" % type_name(details)
        for leg_number, leg in enumerate(details, start=1):
            if not isinstance(leg, dict):
                return "match_details leg %d is %s, expected an object" % (
                    leg_number, type_name(leg))
            for field in LEG_FIELDS:
                value = leg.get(field)
                if value is not None and not isinstance(value, str):
                    return "match_details leg %d \"%s\" is %s, expected text or null" % (
                        leg_number, field, type_name(value))
    return None


def _error_detail(exc, deadline):
    """The service's ``{"error": ...}`` message of an HTTP error (its first
    MAX_ERROR_BYTES read), else its reason phrase; quoted (_quoted)."""
    try:
        payload = loads_bounded(read_error_body(exc, deadline, MAX_ERROR_BYTES))
        if isinstance(payload, dict) and isinstance(payload.get("error"), str):
            return "(%s)" % _quoted(payload["error"])
    except ValueError:  # an unreadable error body: fall back to the status text
        pass
    return "(%s)" % _quoted(str(exc.reason or "no reason given"))


def _quoted(text):
    """The service's text in a message: one line, at most MESSAGE_LIMIT
    characters, control characters escaped."""
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "..."


def _tries(count):
    return "try" if count == 1 else "tries"


def _describe(exc):
    text = _quoted(str(exc))
    name = type(exc).__name__
    if not text:
        return name
    return text if name in text else "%s: %s" % (name, text)
