"""HTTP client of the route-eval service (the transport of the general-LLM evaluator).

    client = RouteEvalClient("http://127.0.0.1:8765")
    results = client.evaluate(cases)            # one result per case, in order

Cases are posted in batches to ``POST /api/eval/route/batch``.  Connection
errors, timeouts and 5xx answers are retried with exponential backoff; a 4xx
answer or a malformed response is not (retrying would get the same answer).
A batch that still fails raises ``ServiceUnavailable``.  The client never
turns a failure into an "unreachable" verdict on its own: with
``on_batch_failure="mark"`` the failed batch's cases get explicit error
results (``"error": "service unavailable: ..."``) and are counted in
``marked_cases``, so the caller decides what they mean.

Standard library only; Python 3.8+.
"""

import http.client
import json
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

from general_llm.route_eval import error_result  # noqa: E402

BATCH_PATH = "/api/eval/route/batch"
USER_AGENT = "TransitLM-evaluator/1.0"
FAILURE_POLICIES = ("raise", "mark")
UNAVAILABLE_PREFIX = "service unavailable: "


class ServiceUnavailable(Exception):
    """A batch failed for good (after the retries, or a non-retryable answer)."""


class _Retryable(Exception):
    """One attempt failed in a way a later attempt may not (network, 5xx)."""


class _Final(Exception):
    """One attempt failed in a way retrying cannot fix (4xx, malformed response)."""


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


class RouteEvalClient(object):
    """Posts cases to the route-eval service in batches.

    ``retries`` is the number of extra attempts after the first one; the
    waits between attempts are ``backoff``, 2 x ``backoff``, 4 x ... seconds,
    spent through ``sleep`` (tests inject a no-op).  After ``evaluate``,
    ``marked_cases`` is how many cases got a "service unavailable" error
    result and ``failures`` the message of each failed batch.
    """

    def __init__(self, api_url, batch_size=50, timeout=30.0, retries=3, backoff=0.5,
                 sleep=time.sleep, opener=None):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be a positive integer, got %r" % (batch_size,))
        if not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be a non-negative integer, got %r" % (retries,))
        self.url = batch_url(api_url)
        self.batch_size = batch_size
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        self._opener = opener or urllib.request.build_opener()
        self.marked_cases = 0
        self.failures = []

    # -- public -----------------------------------------------------------------
    def evaluate(self, cases, progress=None, on_batch_failure="raise"):
        """One result per case, in case order.

        ``progress(n)`` is called after each batch with the number of cases
        it held (answered or marked), so a counter's ``step`` fits.  A batch that
        fails for good raises ``ServiceUnavailable`` (``on_batch_failure=
        "raise"``) or, with ``"mark"``, yields error results for its cases.
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
                results.extend(error_result(UNAVAILABLE_PREFIX + str(exc)) for _ in batch)
            if progress is not None:
                progress(len(batch))
        return results

    def post_batch(self, batch, where="batch"):
        """Results of one batch, retrying transient failures; else ServiceUnavailable."""
        body = json.dumps({"cases": batch}, ensure_ascii=False).encode("utf-8")
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
                raise ServiceUnavailable(
                    "route-eval service %s failed on %s after %d %s: %s (not retryable)"
                    % (self.url, where, attempt + 1, _tries(attempt + 1), exc))
        raise ServiceUnavailable(
            "route-eval service %s failed on %s after %d %s: %s"
            % (self.url, where, attempts, _tries(attempts), last))

    # -- one attempt ------------------------------------------------------------
    def _attempt(self, body, expected):
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json; charset=utf-8",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        })
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            message = "HTTP %d %s" % (exc.code, _error_detail(exc))
            if 500 <= exc.code < 600:
                raise _Retryable(message)
            raise _Final(message)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, socket.timeout):
                raise _Retryable("timed out after %g s" % self.timeout)
            raise _Retryable("cannot connect (%s)" % _describe(reason))
        except socket.timeout:
            raise _Retryable("timed out after %g s" % self.timeout)
        except (http.client.HTTPException, OSError) as exc:
            raise _Retryable("connection failed (%s)" % _describe(exc))
        return _parse_results(raw, expected)


def _parse_results(raw, expected):
    """The ``results`` list of a 200 answer, checked against the batch size."""
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Final("response is not JSON (%s)" % exc)
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, list):
        raise _Final("response has no \"results\" list")
    if len(results) != expected:
        raise _Final("response has %d result(s) for a batch of %d case(s)"
                     % (len(results), expected))
    if not all(isinstance(result, dict) for result in results):
        raise _Final("response results are not all JSON objects")
    return results


def _error_detail(exc):
    """The service's ``{"error": ...}`` message of an HTTP error, else its reason."""
    try:
        payload = json.loads(exc.read().decode("utf-8"))
        if isinstance(payload, dict) and isinstance(payload.get("error"), str):
            return "(%s)" % payload["error"]
    except Exception:  # any unreadable error body: fall back to the status text
        pass
    return "(%s)" % (exc.reason or "no reason given")


def _tries(count):
    return "try" if count == 1 else "tries"


def _describe(exc):
    text = str(exc)
    name = type(exc).__name__
    if not text:
        return name
    return text if name in text else "%s: %s" % (name, text)
