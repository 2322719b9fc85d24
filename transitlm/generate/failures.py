"""What an answer that is not a model's text means for generate.py: retry it,
record it as the row's error, or stop the run.

- ``classify_status``: 2xx ok; 3xx a redirect that was not followed (stop);
  401, 403, 404 stop at once (bad key, no access, unknown model or path);
  408, 409, 429 and 5xx are retried; any other 4xx is the row's own refusal.
- ``refuses_the_row``: a refusal because of this row's own prompt: over the
  model's context length (OpenAI's ``context_length_exceeded``, vLLM,
  SGLang, llama.cpp's ``exceed_context_size_error``, LiteLLM's
  ``ContextWindowExceededError``...) or stopped by a content filter
  (``content_filter``, ``content_policy_violation``): a row's error,
  whatever the others do.
- A 5xx other than 502/503/504 whose body comes back byte for byte the same
  ``SAME_ANSWER_REPEATS`` times in a row is the server's fixed answer to this
  request (llama-cpp-python answers a field of the wrong type so), not a
  passing fault: it is not retried further.
- ``FirstAnswers``: the first lines of a run are held until they show that
  the server is configured for these requests.  When the first
  ``FIRST_ANSWERS`` rows (fewer when fewer are asked) all end with the same
  such refusal -- the same status and the same message: a non-retryable
  4xx that does not refuse the row for its own prompt, or a 5xx repeated
  as above -- the
  run stops before writing any of them (LiteLLM's "Invalid model name",
  "No connected db." for a wrong key, a proxy's "Internal Server Error").
  Any other first answer lets the held lines through.

Standard library only; Python 3.8+.
"""

import re
import threading

FATAL_STATUSES = frozenset((401, 403, 404))     # bad key, no access, unknown model/path
RETRY_STATUSES = frozenset((408, 409, 429))     # plus every 5xx
PASSING_5XX = frozenset((502, 503, 504))        # a gateway, overload, loading: never "fixed"
SAME_ANSWER_REPEATS = 3
FIRST_ANSWERS = 3
# Read in the error answer's text, its codes and types with it
# (context_length_exceeded, exceed_context_size_error, content_filter...).
_ROW_RE = re.compile(r"context[ _-]?(length|window|size)|maximum context|too many tokens|"
                     r"prompt is too long|reduce the length|max_new_tokens|"
                     r"string_above_max_length|content[ _-]?(filter|policy)|"
                     r"content management policy", re.IGNORECASE)


def classify_status(status):
    """HTTP status -> "ok", "retry" (408, 409, 429, 5xx), "fatal" (401/403/404),
    "redirect" (3xx: one that was not followed) or "row_error" (any other
    status: this row's request is refused)."""
    if 200 <= status < 300:
        return "ok"
    if 300 <= status < 400:
        return "redirect"
    if status in FATAL_STATUSES:
        return "fatal"
    if status in RETRY_STATUSES or status >= 500:
        return "retry"
    return "row_error"


def refuses_the_row(body):
    """Does an error answer refuse the request for its own prompt (over the
    context length, a content filter)?"""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    return bool(_ROW_RE.search(body[:4096]))


def fixed_answer(status):
    """Can a 5xx with this status be the server's fixed answer (same body each time)?"""
    return status >= 500 and status not in PASSING_5XX


class FirstAnswers(object):
    """Holds the first lines of a run until they show whether the server is
    configured for these requests (see the module's docstring).

    ``offer(line, refusal)`` -> the lines to write now; ``refusal`` is
    (status, message) for a line that is the server's fixed refusal, None
    for any other line.  ``stopped`` is then the (status, message, count)
    that stopped the run, or None."""

    def __init__(self, expected):
        self.needed = min(FIRST_ANSWERS, expected)
        self.lock = threading.Lock()
        self.held = []
        self.decided = self.needed <= 0
        self.stopped = None

    def offer(self, line, refusal):
        with self.lock:
            if self.stopped is not None:
                return []
            if self.decided:
                return [line]
            if refusal is None or any(held != refusal for _, held in self.held):
                self.decided = True
                lines = [held for held, _ in self.held] + [line]
                self.held = []
                return lines
            self.held.append((line, refusal))
            if len(self.held) >= self.needed:
                self.stopped = refusal + (len(self.held),)
                self.held = []
            return []
