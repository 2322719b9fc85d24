"""How long generate.py waits before a request: its own backoff, what a
server's rate-limit headers ask, and the limiter every worker thread shares.

- ``backoff_delay``: full jitter over ``--backoff`` x 2^n, at most 60 s.
- ``server_wait``: the wait an answer asks for, read from (first found)
  ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date),
  ``llm_provider-retry-after-ms``, ``llm_provider-retry-after`` (LiteLLM
  relays a provider's Retry-After only under these names and answers its own
  rate limits with them), else the longest of the ``x-ratelimit-reset-*``
  family (``x-ratelimit-reset-requests: 1m30s``, ``...-tokens: 20ms``, a
  number of seconds or a Unix time; also with LiteLLM's ``llm_provider-``
  prefix); every wait is capped at ``MAX_SERVER_WAIT_S``.
- ``RateLimiter``: ``--rate_limit`` request starts per second across threads,
  and the pause every thread keeps when a server asks for one: a 429 stops
  all workers together (for as long as the server asks, else for a backoff
  that doubles with each 429 in a row until an answer comes through: half
  to all of ``--backoff`` x 2^n, at most 60 s).

Standard library only; Python 3.8+.
"""

import email.utils
import random
import re
import threading
import time

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
MAX_SERVER_WAIT_S = 600.0      # a server asking for longer than this is waited on this long
# Header names read, in the order they are looked at; the first readable wins.
RETRY_AFTER_HEADERS = (("retry-after-ms", 0.001), ("retry-after", None),
                       ("llm_provider-retry-after-ms", 0.001),
                       ("llm_provider-retry-after", None))
RESET_PREFIXES = ("x-ratelimit-reset", "llm_provider-x-ratelimit-reset")
UNIX_TIME_FROM = 1e9           # a reset "number of seconds" past this is a Unix time
_DURATION_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def backoff_delay(attempt, base=BACKOFF_BASE_S, cap=BACKOFF_CAP_S, rng=random.random):
    """Wait before retry number ``attempt`` (0-based): full jitter over
    [0, min(cap, base * 2**attempt)], so many clients do not retry in step."""
    ceiling = min(cap, base * (2 ** min(attempt, 60)))
    return ceiling * rng()


def _capped(seconds):
    if seconds is None or seconds != seconds:          # NaN
        return None
    return min(max(seconds, 0.0), MAX_SERVER_WAIT_S)


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def parse_retry_after(value, now=None, unit=None):
    """A Retry-After value -> seconds to wait (0 to MAX_SERVER_WAIT_S), or None
    when absent or unreadable.  It is a number of seconds (of ``unit``
    seconds: 0.001 for the ``-ms`` headers) or, without a unit, an HTTP date
    (RFC 9110 section 10.2.3)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 1000:    # not a date, nor a number worth reading
        return None
    seconds = _number(text)
    if seconds is not None:
        return _capped(seconds * (unit or 1.0))
    if unit is not None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
        if when is None:
            return None
        return _capped(when.timestamp() - (time.time() if now is None else now))
    except Exception:  # noqa: BLE001 -- a date out of range (OverflowError...) is unreadable
        return None


def parse_reset(value, now=None):
    """An ``x-ratelimit-reset-*`` value -> seconds to wait, or None: a duration
    as OpenAI-style APIs write it (``6m0s``, ``1m30.5s``, ``20ms``, ``7s``),
    a number of seconds, or a Unix time (a number past 1e9)."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if not text or len(text) > 100:
        return None
    seconds = _number(text)
    if seconds is not None:
        if seconds > UNIX_TIME_FROM:
            seconds -= time.time() if now is None else now
        return _capped(seconds)
    parts = _DURATION_RE.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return _capped(sum(float(number) * _UNIT_S[unit] for number, unit in parts))


def server_wait(headers, now=None):
    """Seconds an answer's headers ask to wait before the next request (see the
    module's docstring), or None when they ask nothing readable."""
    lowered = {}
    for name, value in (headers or {}).items():
        lowered.setdefault(str(name).strip().lower(), value)
    for name, unit in RETRY_AFTER_HEADERS:
        seconds = parse_retry_after(lowered.get(name), now, unit)
        if seconds is not None:
            return seconds
    resets = [parse_reset(value, now) for name, value in lowered.items()
              if name.startswith(RESET_PREFIXES)]
    resets = [seconds for seconds in resets if seconds is not None]
    return max(resets) if resets else None


class RateLimiter(object):
    """At most ``rate`` request starts per second across threads (None: no
    limit), and a pause every thread keeps when a server asks for one."""

    def __init__(self, rate, clock=time.monotonic, base=BACKOFF_BASE_S, cap=BACKOFF_CAP_S,
                 rng=random.random):
        self.interval = 1.0 / rate if rate else 0.0
        self.clock = clock
        self.base = base
        self.cap = cap
        self.rng = rng
        self.lock = threading.Lock()
        self.next_start = 0.0
        self.paused_until = 0.0
        self.throttled_in_a_row = 0     # 429s since the last answer that came through

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

    def throttled(self, asked):
        """A 429: every thread pauses, for ``asked`` seconds when the server said
        how long, else for a backoff that doubles with each 429 in a row (the
        429s of requests sent before the pause began do not double it)
        -> seconds until requests start again."""
        with self.lock:
            now = self.clock()
            if asked is None:
                if now < self.paused_until:
                    return self.paused_until - now
                # Half the backoff at least: the pauses of a run of 429s add up
                # to over a minute before a row gives up (rate windows are a minute).
                ceiling = min(self.cap, self.base * (2 ** min(self.throttled_in_a_row, 60)))
                asked = ceiling * (0.5 + 0.5 * self.rng())
                self.throttled_in_a_row += 1
            if now + asked >= self.paused_until:
                self.paused_until = now + asked
                return asked
            return self.paused_until - now

    def answered(self):
        """An answer came through: the next 429 starts the backoff afresh."""
        with self.lock:
            self.throttled_in_a_row = 0
