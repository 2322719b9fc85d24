"""The chat-completions API of generate.py: one request and its answer.

Building a row's request body (``--no_thinking`` merged into
``--extra_body``), posting it (``ChatTransport``: a connection kept open
per worker thread, every request bounded by the deadline of
``transitlm.io.http_client``, redirects only to the same origin), and reading
the answer (``parse_completion``: the model's text, and its reasoning when
the server sends it apart) or a server's error message.  ``Redactor`` takes
the API key's text out of whatever a server sent before it is written or
printed.  What a failed answer means is ``transitlm.generate.failures``'s,
how long to wait ``transitlm.generate.waits``'s.

Standard library only; Python 3.8+.
"""

import http.client
import json
import socket
import ssl
import time
import urllib.parse

from transitlm.io.bounded_json import loads_bounded
from transitlm.io.http_client import (AnswerTooLarge, CannotConnect, KeepAliveClient,
                                   redirect_problem)
from transitlm.evaluation.chat_messages import chat_messages

MAX_ANSWER_BYTES = 16 * 1024 * 1024       # a chat answer larger than this is a failure
MAX_ERROR_BYTES = 64 * 1024               # of an error answer's body, quoted in a message
REDACTED = "<redacted>"
USER_AGENT = "transitlm-generate/1"
MESSAGE_LIMIT = 300            # characters of a server's answer quoted in an error
# Where servers put a reasoning model's thinking apart from its answer, in the
# order looked at: DeepSeek, LiteLLM, llama.cpp, SGLang and vLLM before 0.10
# say reasoning_content; vLLM 0.10+, OpenRouter and Ollama say reasoning.
REASONING_FIELDS = ("reasoning_content", "reasoning")
THINKING_OFF = {"chat_template_kwargs": {"enable_thinking": False}}


class FatalAnswer(Exception):
    """An answer that no retry can fix (bad key, unknown model or path, a
    redirect that is not followed, a host that does not resolve)."""


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


def build_body(model, system_prompt, user_prompt, sampling, extra_body):
    """The chat-completions request body of one row.

    ``sampling`` holds temperature and, when given, max_tokens and top_p;
    ``extra_body`` (server-specific fields) is merged last and wins.
    """
    body = {"model": model, "messages": chat_messages(system_prompt, user_prompt),
            "stream": False}
    for key in ("temperature", "max_tokens", "top_p"):
        if sampling.get(key) is not None:
            body[key] = sampling[key]
    body.update(extra_body or {})
    return body


def thinking_off(extra_body):
    """``extra_body`` with ``chat_template_kwargs.enable_thinking`` false merged
    in (the other template arguments kept) -> a new dict; ValueError when
    ``extra_body`` says otherwise."""
    merged = dict(extra_body or {})
    kwargs = merged.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise ValueError("--extra_body's chat_template_kwargs is not an object")
    if kwargs.get("enable_thinking", False) is not False:
        raise ValueError("--extra_body asks for enable_thinking %s and --no_thinking for "
                         "false" % json.dumps(kwargs["enable_thinking"]))
    merged["chat_template_kwargs"] = dict(kwargs, **THINKING_OFF["chat_template_kwargs"])
    return merged


def chat_url(api_url):
    """``http://host:8000/v1`` -> ``http://host:8000/v1/chat/completions`` (a URL
    that already ends with /chat/completions is kept)."""
    url = api_url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    return url + "/chat/completions"


class Completion(object):
    """What a chat-completions answer holds for generate.py: the model's text
    (``""`` for a missing or null content), the reasoning the server sent
    apart from it (None when there is none), finish_reason, usage and the
    model name the server reports (None when it names none)."""

    __slots__ = ("text", "reasoning", "finish_reason", "usage", "model")

    def __init__(self, text, reasoning, finish_reason, usage, model):
        self.text = text
        self.reasoning = reasoning
        self.finish_reason = finish_reason
        self.usage = usage
        self.model = model


def _text_of(value, what):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):         # some servers answer a list of parts: their text
        return "".join(part["text"] for part in value
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    raise ValueError("the answer's %s is not text" % what)


def parse_completion(body):
    """A chat-completions answer -> Completion.

    Raises ValueError when the answer is not a chat completion (not UTF-8
    JSON, nested too deep, too many values: see transitlm.io.bounded_json).
    The reasoning is the first of REASONING_FIELDS that holds text.
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
    text = _text_of(message.get("content"), "content")
    reasoning = None
    for field in REASONING_FIELDS:
        value = message.get(field)
        if isinstance(value, (str, list)) and _text_of(value, field):
            reasoning = _text_of(value, field)
            break
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    model = obj.get("model") if isinstance(obj.get("model"), str) else None
    return Completion(text, reasoning, choice.get("finish_reason"), usage, model)


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
    """One HTTP exchange: status (None for a transport failure), headers, body;
    for a failure its text and whether no connection could be made."""

    __slots__ = ("status", "headers", "body", "failure", "latency", "no_connection")

    def __init__(self, status=None, headers=None, body=b"", failure=None, latency=0.0,
                 no_connection=False):
        self.status = status
        self.headers = headers or {}
        self.body = body
        self.failure = failure       # text of a transport failure (timeout, reset...)
        self.latency = latency
        self.no_connection = no_connection


class ChatTransport(object):
    """POSTs JSON over a connection kept open per worker thread
    (transitlm.io.http_client.KeepAliveClient: HTTP/1.1 keep-alive, https,
    proxies from the environment).

    ``timeout`` bounds the whole request -- connect, send, same-origin
    307/308 redirects and the full answer -- so a server trickling its
    answer cannot hold a row.  Any other redirect comes back as its 3xx
    answer.  An answer's body is read up to MAX_ANSWER_BYTES, an error
    answer's up to MAX_ERROR_BYTES.  A failure's text has the secret of
    ``redactor`` taken out.
    """

    def __init__(self, timeout, clock=time.monotonic, redactor=NO_REDACTION, client=None):
        self.timeout = timeout
        self.clock = clock
        self.redactor = redactor
        self.client = client or KeepAliveClient()

    def post(self, url, data, headers):
        start = self.clock()
        deadline = time.monotonic() + self.timeout
        try:
            reply = self.client.request("POST", url, data, headers, deadline,
                                        MAX_ANSWER_BYTES, MAX_ERROR_BYTES)
        except AnswerTooLarge as exc:
            return Answer(failure=str(exc), latency=self.clock() - start)
        except CannotConnect as exc:
            return self._failure(exc.reason, start, connecting=True, url=url)
        except Exception as exc:  # noqa: BLE001 -- whatever a server does is this row's failure
            # OSError, http.client.HTTPException (a status line, header or chunk
            # that is not HTTP), ValueError (http.client on a garbled chunk size)
            return self._failure(exc, start, url=url)
        return Answer(reply.status, reply.headers, reply.body, latency=self.clock() - start)

    def close(self):
        self.client.close()

    def release(self):
        """Close the calling thread's connection."""
        self.client.release()

    def _failure(self, reason, start, connecting=False, url="the API"):
        # DNS failures, certificate errors and unsupported URLs do not heal by
        # retrying: they stop the run like a 404 would.
        if isinstance(reason, (socket.gaierror, ssl.SSLCertVerificationError)):
            raise FatalAnswer("cannot reach %s: %s"
                              % (url, one_line(self.redactor.text(str(reason)))))
        if isinstance(reason, (socket.timeout, TimeoutError)):
            text = "no answer within %g s" % self.timeout
            if connecting:
                text = "cannot connect within %g s" % self.timeout
        elif isinstance(reason, http.client.RemoteDisconnected):
            text = "connection closed without an answer"
        else:
            text = one_line(self.redactor.text(str(reason))) or type(reason).__name__
            if isinstance(reason, http.client.HTTPException) and type(reason).__name__ \
                    not in text:
                text = "%s: %s" % (type(reason).__name__, text)
            if connecting:
                text = "cannot connect: " + text
        return Answer(failure=text, latency=self.clock() - start, no_connection=connecting)


def redirect_message(answer, url, redactor=NO_REDACTION):
    """Why a 3xx answer stopped the run (one line, the secret taken out)."""
    return one_line(redactor.text(redirect_problem(answer.status, url, answer.headers))
                    + "; set --api_url to the address that answers")
