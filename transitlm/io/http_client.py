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

Connections that stay open (``KeepAliveClient``, used by generate.py): HTTP/1.1
requests over one persistent connection per thread and origin, reused while
the server keeps it open (it answers without ``Connection: close``) and
opened again when the server has closed it, with the same deadline, redirect
rule and bounds as urllib's path.  A request through a proxy from the
environment (``http_proxy``, ``https_proxy``, ``no_proxy``, as urllib reads
them) goes through urllib on a connection of its own.

    client = KeepAliveClient()
    reply = client.request("POST", url, body, headers, deadline, max_bytes, max_error_bytes)
    reply.status, reply.headers, reply.body

A connection that cannot be made raises ``CannotConnect`` (its ``reason`` the
error), a passed deadline ``socket.timeout``.

Redirects (``SameOriginRedirects``, ``KeepAliveClient``): a 307 or 308 answer
pointing to the same origin (scheme, host and port) as the request is
followed, with the same method, body and headers, under the same deadline, at
most ``MAX_REDIRECTS`` times.  Every other redirect is not followed: 301, 302 and
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
import select
import socket
import threading
import time
import urllib.error
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
    None for anything else (another scheme, user info, an unreadable port or
    one outside 1-65535: ``url_problem`` says which)."""
    try:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port
    except ValueError:
        return None
    if (scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc
            or port == 0):
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def url_problem(url, user_info_hint=""):
    """Why ``origin(url)`` is None -- what is wrong with the URL, in words
    (``user_info_hint`` follows the words on a URL holding user:password@) --
    or None for a URL a request can go to."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        return "it cannot be read as a URL (%s)" % exc
    if parts.scheme.lower() not in DEFAULT_PORTS:
        return "it does not start with http:// or https://"
    if "@" in parts.netloc:
        return "it holds a user name or password (user:password@)" + user_info_hint
    if not parts.hostname:
        return "it names no host"
    try:
        port = parts.port
    except ValueError:
        port = None
        text = parts.netloc.rpartition("]")[2].rpartition(":")[2]
        if not (text.isascii() and text.isdigit()):
            return "its port %r is not a number (a port is 1 to 65535)" % text
        port = int(text)
    if port is not None and not 1 <= port <= 65535:
        return "its port %d is out of range (a port is 1 to 65535)" % port
    return None


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


def followed_redirect(status, request_url, headers, followed):
    """The URL a redirect answer is followed to (a 307/308 to the request's
    own origin, when fewer than MAX_REDIRECTS were ``followed`` before it), or
    None: the answer is not followed."""
    target = redirect_target(request_url, headers)
    if (status not in (307, 308) or target is None or followed >= MAX_REDIRECTS
            or origin(target) is None or origin(target) != origin(request_url)):
        return None
    return target


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
        count = getattr(req, "redirects", 0)
        target = followed_redirect(code, req.full_url, headers, count)
        if target is None:
            return None
        count += 1
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


class _Deadlines(object):
    """What the deadline connections share: a new deadline for each request
    sent over a connection that stays open."""

    def set_deadline(self, deadline):
        self._deadline = deadline
        if isinstance(self.sock, _DeadlineSocket):
            self.sock._deadline = deadline


class _DeadlineHTTPConnection(_Deadlines, http.client.HTTPConnection):
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

_CONNECTIONS = {"http": _DeadlineHTTPConnection}

if hasattr(http.client, "HTTPSConnection"):         # Python built with ssl
    class _DeadlineHTTPSConnection(_Deadlines, http.client.HTTPSConnection):
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
    _CONNECTIONS["https"] = _DeadlineHTTPSConnection


class CannotConnect(OSError):
    """No connection could be made to the server (``reason``: the error:
    refused, unreachable, a name that does not resolve, a certificate that
    does not verify, the deadline)."""

    def __init__(self, reason):
        OSError.__init__(self, str(reason))
        self.reason = reason


class Reply(object):
    """An answer: its status, headers (a dict, names as the server wrote them)
    and body (an error answer's first bytes; none for a redirect)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body


# Errors of a request sent over a connection the server had already closed
# (its idle timeout): the request is sent again once, on a new connection.
_STALE_CONNECTION = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                     http.client.RemoteDisconnected)


def _closed_by_server(connection):
    """Has the server closed (or written to) an idle connection?"""
    sock = connection.sock
    raw = getattr(sock, "_sock", sock)
    if raw is None:
        return True
    try:
        return bool(select.select([raw], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class KeepAliveClient(object):
    """HTTP/1.1 requests over persistent connections: one per thread, kept
    while requests go to the same origin and the server keeps it open.  The
    deadline, redirect and size rules are those of the module's docstring;
    ``close()`` closes every connection."""

    def __init__(self, ssl_context=None, proxies=None):
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open = set()
        self._ssl_context = ssl_context
        self._proxies = urllib.request.getproxies() if proxies is None else proxies
        self._opener = None

    def request(self, method, url, body, headers, deadline, max_bytes, max_error_bytes):
        """-> Reply.  A 3xx that is not followed comes back as it is (see
        ``redirect_problem``).  Raises AnswerTooLarge, CannotConnect,
        socket.timeout, OSError or http.client.HTTPException."""
        if self._through_proxy(url):
            return self._urllib_request(method, url, body, headers, deadline, max_bytes,
                                        max_error_bytes)
        followed = 0
        while True:
            reply = self._exchange(method, url, body, headers, deadline, max_bytes,
                                   max_error_bytes)
            target = (followed_redirect(reply.status, url, reply.headers, followed)
                      if reply.status in REDIRECT_STATUSES else None)
            if target is None:
                return reply
            followed += 1
            url = target

    def close(self):
        """Close every connection (once no thread sends over them any more)."""
        with self._lock:
            connections, self._open = list(self._open), set()
        for connection in connections:
            connection.close()

    def release(self):
        """Close the calling thread's connection (a thread that sends no more)."""
        held = getattr(self._local, "held", None)
        if held is not None:
            self._discard(held[1])

    def _through_proxy(self, url):
        parts = urllib.parse.urlsplit(url)
        if not self._proxies.get(parts.scheme.lower()):
            return False
        return not urllib.request.proxy_bypass(parts.hostname or "")

    def _exchange(self, method, url, body, headers, deadline, max_bytes, max_error_bytes):
        parts = urllib.parse.urlsplit(url)
        selector = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        for last_try in (False, True):
            connection, reused = self._connection(url, deadline)
            try:
                connection.request(method, selector, body=body, headers=headers)
                response = connection.getresponse()
            except _STALE_CONNECTION:
                self._discard(connection)
                if reused and not last_try:
                    continue           # closed by the server while idle: a new connection
                raise
            except BaseException:
                self._discard(connection)
                raise
            try:
                reply = _read_reply(response, deadline, max_bytes, max_error_bytes)
            except BaseException:
                self._discard(connection)
                raise
            if response.will_close or not response.isclosed():
                self._discard(connection)
            return reply

    def _connection(self, url, deadline):
        """-> (this thread's connection to the origin of ``url``, reused?)."""
        key = origin(url)
        held = getattr(self._local, "held", None)
        if held is not None:
            held_key, connection = held
            if held_key == key and not _closed_by_server(connection):
                connection.set_deadline(deadline)
                return connection, True
            self._discard(connection)
        scheme, host, port = key
        options = {"context": self._ssl_context} if scheme == "https" else {}
        connection = _CONNECTIONS[scheme](host, port, deadline=deadline, **options)
        try:
            connection.connect()
        except (OSError, ValueError) as exc:
            connection.close()
            raise CannotConnect(exc)
        self._local.held = (key, connection)
        with self._lock:
            self._open.add(connection)
        return connection, False

    def _discard(self, connection):
        connection.close()
        with self._lock:
            self._open.discard(connection)
        held = getattr(self._local, "held", None)
        if held is not None and held[1] is connection:
            self._local.held = None
        with self._lock:
            self._open.discard(connection)

    def _urllib_request(self, method, url, body, headers, deadline, max_bytes,
                        max_error_bytes):
        if self._opener is None:
            self._opener = deadline_opener()
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        request.deadline = deadline
        try:
            with self._opener.open(request, timeout=_time_left(deadline, None)) as response:
                return Reply(response.status, dict(response.headers.items()),
                             read_body(response, deadline, max_bytes))
        except urllib.error.HTTPError as exc:
            body = b"" if exc.code in REDIRECT_STATUSES \
                else read_error_body(exc, deadline, max_error_bytes)
            reply = Reply(exc.code, dict(exc.headers.items()) if exc.headers else {}, body)
            exc.close()
            return reply
        except urllib.error.URLError as exc:
            reason = exc.reason
            raise reason if isinstance(reason, BaseException) else OSError(str(reason))


def _read_reply(response, deadline, max_bytes, max_error_bytes):
    headers = dict(response.headers.items())
    if 200 <= response.status < 300:
        return Reply(response.status, headers, read_body(response, deadline, max_bytes))
    if response.status in REDIRECT_STATUSES:
        return Reply(response.status, headers, b"")     # never read: the connection goes
    return Reply(response.status, headers, read_error_body(response, deadline, max_error_bytes))
