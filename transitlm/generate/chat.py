"""The chat-completions API of generate.py: one request and its answer.

Building a row's request body, posting it (``UrllibTransport``, bounded by
the deadline of ``transitlm.http_client``, redirects only to the same
origin), classifying the HTTP status, the backoff and Retry-After waits
between attempts, and reading the answer (``parse_completion``) or a
server's error message.  ``Redactor`` takes the API key's text out of
whatever a server sent before it is written or printed.

Standard library only; Python 3.8+.
"""

import email.utils
import http.client
import json
import random
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request

from transitlm.bounded_json import loads_bounded
from transitlm.http_client import (AnswerTooLarge, deadline_opener, read_body,
                                   read_error_body, redirect_problem)

MAX_ANSWER_BYTES = 16 * 1024 * 1024       # a chat answer larger than this is a failure
MAX_ERROR_BYTES = 64 * 1024               # of an error answer's body, quoted in a message
REDACTED = "<redacted>"
USER_AGENT = "transitlm-generate/1"

FATAL_STATUSES = frozenset((401, 403, 404))     # bad key, no access, unknown model/path
RETRY_STATUSES = frozenset((408, 429))          # plus every 5xx
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
RETRY_AFTER_CAP_S = 600.0      # a server asking for longer than this is waited on this long
MESSAGE_LIMIT = 300            # characters of a server's answer quoted in an error


class FatalAnswer(Exception):
    """An answer that no retry can fix (bad key, unknown model or path, a
    redirect that is not followed)."""


def redact(text, secret):
    """``text`` with every occurrence of ``secret`` replaced (nothing to hide: unchanged)."""
    if not secret or not text:
        return text
    return text.replace(secret, REDACTED)


class Redactor(object):
    """Takes a secret's text out of text and of JSON values (strings and keys,
    at any depth).  The forms hidden: the secret as it is and percent-encoded
    (as it would appear echoed in a URL).  Text is redacted before it is cut
    short, so no part of a cut key survives at the cut either.  Without a
    secret it changes nothing (and costs nothing)."""

    def __init__(self, secret=None):
        self.forms = ()
        self.add(secret)

    def add(self, secret):
        """Hide ``secret`` too (None or empty: nothing)."""
        if secret:
            forms = set(self.forms)
            forms.update((secret, urllib.parse.quote(secret, safe=""),
                          urllib.parse.quote_plus(secret)))
            self.forms = tuple(sorted(forms, key=len, reverse=True))

    def __bool__(self):
        return bool(self.forms)

    def text(self, text):
        if not self.forms or not isinstance(text, str):
            return text
        for form in self.forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text

    def value(self, value):
        """A JSON value with the secret taken out of every string (a new value
        where something changed)."""
        if not self.forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(key): self.value(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value


NO_REDACTION = Redactor()


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
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 1000:    # not a date, nor a number worth reading
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
            if when is None:
                return None
            seconds = when.timestamp() - (time.time() if now is None else now)
        except Exception:  # noqa: BLE001 -- a date out of range (OverflowError...) is unreadable
            return None
    if seconds != seconds:       # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def classify_status(status):
    """HTTP status -> "ok", "retry" (429, 408, 5xx), "fatal" (401/403/404),
    "redirect" (3xx: one that was not followed) or "row_error" (any other
    status: this row's request is refused, e.g. too long)."""
    if 200 <= status < 300:
        return "ok"
    if 300 <= status < 400:
        return "redirect"
    if status in FATAL_STATUSES:
        return "fatal"
    if status in RETRY_STATUSES or status >= 500:
        return "retry"
    return "row_error"


def server_message(body, redactor=NO_REDACTION):
    """The error text of a server's answer (OpenAI ``{"error": {"message"}}``,
    ``{"error": "..."}``, FastAPI ``{"detail"}``, ``{"message"}``), else its
    text; the secret of ``redactor`` taken out before it is cut to one line."""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    try:
        obj = loads_bounded(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        for key in ("error", "detail", "message"):
            value = obj.get(key)
            if isinstance(value, dict):
                value = value.get("message", value)
            if value:
                value = redactor.value(value)
                return one_line(value if isinstance(value, str) else json.dumps(value))
    return one_line(redactor.text(body)) or "(empty answer)"


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

    Raises ValueError when the answer is not a chat completion (not UTF-8
    JSON, nested too deep, too many values: see transitlm.bounded_json).  A
    missing or null ``content`` is the empty text (the model said nothing).
    """
    try:
        obj = loads_bounded(body)
    except ValueError as exc:
        raise ValueError("the answer is %s" % one_line(exc, 80))
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
            text = "".join(part["text"] for part in text
                           if isinstance(part, dict) and isinstance(part.get("text"), str))
        else:
            raise ValueError("the answer's content is not text")
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    model = obj.get("model") if isinstance(obj.get("model"), str) else None
    return text, choice.get("finish_reason"), usage, model


def token_count(usage, key):
    value = (usage or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def request_headers(key):
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "User-Agent": USER_AGENT}
    if key:
        headers["Authorization"] = "Bearer " + key
    return headers


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
    """POSTs JSON with urllib (proxies from the environment, https).

    ``timeout`` bounds the whole request -- connect, send, same-origin
    307/308 redirects and the full answer (transitlm.http_client) -- so a
    server trickling its answer cannot hold a row.  Any other redirect comes
    back as its 3xx answer.  An answer's body is read up to MAX_ANSWER_BYTES,
    an error answer's up to MAX_ERROR_BYTES.  A failure's text has the
    secret of ``redactor`` taken out.
    """

    def __init__(self, timeout, clock=time.monotonic, redactor=NO_REDACTION):
        self.timeout = timeout
        self.clock = clock
        self.redactor = redactor
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
            body = read_error_body(exc, request.deadline, MAX_ERROR_BYTES)
            headers = dict(exc.headers.items()) if exc.headers else {}
            exc.close()
            return Answer(exc.code, headers, body, latency=self.clock() - start)
        except urllib.error.URLError as exc:
            return self._failure(exc.reason, start)
        except Exception as exc:  # noqa: BLE001 -- whatever a server does is this row's failure
            # OSError, http.client.HTTPException (a status line, header or chunk
            # that is not HTTP), ValueError (http.client on a garbled chunk size)
            return self._failure(exc, start)

    def _failure(self, reason, start):
        # DNS failures, certificate errors and unsupported URLs do not heal by
        # retrying: they stop the run like a 404 would.
        if isinstance(reason, (socket.gaierror, ssl.SSLCertVerificationError)):
            raise FatalAnswer("cannot reach the API: %s"
                              % one_line(self.redactor.text(str(reason))))
        if isinstance(reason, (socket.timeout, TimeoutError)):
            text = "no answer within %g s" % self.timeout
        elif isinstance(reason, http.client.RemoteDisconnected):
            text = "connection closed without an answer"
        else:
            text = one_line(self.redactor.text(str(reason))) or type(reason).__name__
            if isinstance(reason, http.client.HTTPException) and type(reason).__name__ \
                    not in text:
                text = "%s: %s" % (type(reason).__name__, text)
        return Answer(failure=text, latency=self.clock() - start)


def redirect_message(answer, url, redactor=NO_REDACTION):
    """Why a 3xx answer stopped the run (one line, the secret taken out)."""
    return one_line(redactor.text(redirect_problem(answer.status, url, answer.headers))
                    + "; set --api_url to the address that answers")


def header_value(headers, name):
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None
