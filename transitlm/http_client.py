"""HTTP requests bounded by a deadline: connect, send, redirects and the whole answer.

urllib's ``timeout`` bounds each socket call, so a server that trickles its
answer a byte at a time holds a client for as long as it likes.  Here every
socket call of a request waits only for what is left before the request's
deadline.  Both HTTP clients of the project use it: the route-eval client
(general_llm/service_client.py) and generate.py (transitlm.generate.chat).

    opener = deadline_opener()
    request = urllib.request.Request(url, data=body, method="POST")
    request.deadline = time.monotonic() + timeout      # read by the handlers
    with opener.open(request, timeout=timeout) as response:
        body = read_body(response, request.deadline, max_bytes)

A passed deadline raises ``socket.timeout``.

Redirects (``SameOriginRedirects``): a 307 or 308 answer pointing to the
same origin (scheme, host and port) as the request is followed, with the same
method, body and headers, under the same deadline, at most
``MAX_REDIRECTS`` times.  Every other redirect is not followed: 301, 302 and
303 (following them would turn the POST into a GET without its body) and
any redirect to another origin (the request's headers, an API key among
them, go to the origin the caller chose and nowhere else).  Such an answer
reaches the caller as an ``urllib.error.HTTPError`` with its 3xx status;
``redirect_problem`` says what happened in one line.

Bounds on what a server can send: the status line and each header line at
most 64 KiB and at most 100 header lines (http.client's limits: more raises
``http.client.HTTPException``), the body at most what the caller passes to
``read_body`` / ``read_error_body``, all of it within the deadline.

Standard library only; Python 3.8+.
"""

import functools
import http.client
import io
import socket
import time
import urllib.parse
import urllib.request

READ_CHUNK = 64 * 1024
MAX_REDIRECTS = 5               # same-origin 307/308 redirects followed per request
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
DEFAULT_PORTS = {"http": 80, "https": 443}


class AnswerTooLarge(Exception):
    """The answer's body is larger than the caller allows."""


def deadline_opener(*handlers):
    """A urllib opener whose HTTP(S) connections honour ``request.deadline``
    and which follows only same-origin 307/308 redirects (``SameOriginRedirects``)."""
    return urllib.request.build_opener(*(DEADLINE_HANDLERS + [SameOriginRedirects]
                                         + list(handlers)))


def read_body(response, deadline, max_bytes):
    """The answer's body, read in chunks until the deadline (socket.timeout) or
    ``max_bytes`` (AnswerTooLarge; at once when Content-Length says so)."""
    declared = getattr(response, "length", None)
    if isinstance(declared, int) and declared > max_bytes:
        raise AnswerTooLarge("answer is larger than %d bytes (Content-Length %d)"
                             % (max_bytes, declared))
    chunks, size = [], 0
    while True:
        if time.monotonic() >= deadline:
            raise socket.timeout("deadline passed while reading the answer")
        chunk = response.read(READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise AnswerTooLarge("answer is larger than %d bytes" % max_bytes)
        chunks.append(chunk)


def read_error_body(error, deadline, max_bytes):
    """What an ``HTTPError`` answer's body holds, at most ``max_bytes`` of it,
    read until the deadline; whatever the server does, never raises (b"" when
    nothing could be read).  The body is only quoted in a message: the
    first ``max_bytes`` are enough."""
    chunks, size = [], 0
    try:
        while size < max_bytes and time.monotonic() < deadline:
            chunk = error.read(min(READ_CHUNK, max_bytes - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except Exception:  # noqa: BLE001 -- a broken error body is just a shorter message
        pass
    return b"".join(chunks)


def origin(url):
    """(scheme, host, port) of an http(s) URL, the default port filled in;
    None for anything else (another scheme, user info, an unreadable port)."""
    try:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def redirect_target(request_url, headers):
    """The absolute URL a redirect answer points to, or None without Location."""
    location = None
    if hasattr(headers, "get_all"):                  # an http.client message
        location = headers.get("Location")
    elif headers:                                    # a dict, names as the server wrote them
        location = next((value for name, value in headers.items()
                         if name.lower() == "location"), None)
    if not isinstance(location, str):
        return None
    return urllib.parse.urljoin(request_url, location.strip())


def redirect_problem(status, request_url, headers):
    """One line on a 3xx answer that was not followed (the caller's error message).

    The Location is the server's text: callers redact and escape it like any
    other text of the server."""
    target = redirect_target(request_url, headers)
    if target is None:
        return "HTTP %d without a Location (redirects are not followed)" % status
    if origin(target) is None or origin(target) != origin(request_url):
        return ("HTTP %d: a redirect to %s, not followed: the request and its key go only "
                "to %s" % (status, target, _origin_text(request_url)))
    if status in (307, 308):
        return "HTTP %d: more than %d redirects, to %s" % (status, MAX_REDIRECTS, target)
    return ("HTTP %d: a redirect to %s, not followed: a POST is never sent again as a GET "
            "(only 307 and 308 redirects keep the POST)" % (status, target))


def _origin_text(url):
    found = origin(url)
    if found is None:
        return url
    scheme, host, port = found
    if ":" in host:
        host = "[%s]" % host
    return "%s://%s:%d" % (scheme, host, port)


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a 307/308 to the request's own origin (method, body, headers and
    deadline kept), at most MAX_REDIRECTS times; returns None for every other
    redirect, which urllib then raises as an HTTPError with the 3xx status.

    The redirect's own body is never read: the connection is closed."""

    def http_error_302(self, req, fp, code, msg, headers):
        target = redirect_target(req.full_url, headers)
        count = getattr(req, "redirects", 0) + 1
        if (code not in (307, 308) or target is None or count > MAX_REDIRECTS
                or origin(target) is None or origin(target) != origin(req.full_url)):
            return None
        new = urllib.request.Request(target, data=req.data,
                                     headers=dict(req.header_items()),
                                     origin_req_host=req.origin_req_host,
                                     method=req.get_method())
        new.redirects = count
        new.deadline = getattr(req, "deadline", None)
        fp.close()
        return self.parent.open(new, timeout=req.timeout)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class _DeadlineSocket(object):
    """A connected socket whose sends and receives all end by ``deadline``.

    http.client sends with ``sendall`` and reads the answer through
    ``makefile("rb")``; both set the socket's timeout to what is left.
    Anything else is the socket's own.
    """

    def __init__(self, sock, deadline):
        self._sock = sock
        self._deadline = deadline

    def arm(self):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")
        self._sock.settimeout(left)

    def sendall(self, data, *flags):
        self.arm()
        return self._sock.sendall(data, *flags)

    def makefile(self, mode="r", buffering=None, **kwargs):
        if "b" not in mode or "w" in mode:
            return self._sock.makefile(mode, buffering, **kwargs)
        return io.BufferedReader(_DeadlineReader(self._sock.makefile("rb", buffering=0),
                                                 self))

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _DeadlineReader(io.RawIOBase):
    """The raw reading side of a ``_DeadlineSocket``."""

    def __init__(self, raw, owner):
        io.RawIOBase.__init__(self)
        self._raw = raw
        self._owner = owner

    def readable(self):
        return True

    def readinto(self, buffer):
        self._owner.arm()
        return self._raw.readinto(buffer)

    def close(self):
        self._raw.close()               # releases the socket (closed when unused)
        io.RawIOBase.close(self)


def _time_left(deadline, timeout):
    """The connect timeout: what is left of the deadline (a redirect's new
    connection gets only that), at most the request's own timeout."""
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("deadline passed before connecting")
    return left if not isinstance(timeout, (int, float)) else min(left, timeout)


class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, **kwargs):
        self._deadline = kwargs.pop("deadline", None)
        http.client.HTTPConnection.__init__(self, *args, **kwargs)

    def connect(self):
        self.timeout = _time_left(self._deadline, self.timeout)
        http.client.HTTPConnection.connect(self)
        if self._deadline is not None:
            self.sock = _DeadlineSocket(self.sock, self._deadline)


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(functools.partial(
            _DeadlineHTTPConnection, deadline=getattr(req, "deadline", None)), req)


DEADLINE_HANDLERS = [_DeadlineHTTPHandler]

if hasattr(http.client, "HTTPSConnection"):         # Python built with ssl
    class _DeadlineHTTPSConnection(http.client.HTTPSConnection):
        def __init__(self, *args, **kwargs):
            self._deadline = kwargs.pop("deadline", None)
            http.client.HTTPSConnection.__init__(self, *args, **kwargs)

        def connect(self):
            self.timeout = _time_left(self._deadline, self.timeout)
            http.client.HTTPSConnection.connect(self)   # TCP and TLS handshake
            if self._deadline is not None:
                self.sock = _DeadlineSocket(self.sock, self._deadline)

    class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(functools.partial(
                _DeadlineHTTPSConnection, deadline=getattr(req, "deadline", None)),
                req, context=self._context)

    DEADLINE_HANDLERS.append(_DeadlineHTTPSHandler)
