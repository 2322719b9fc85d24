"""HTTP requests bounded by a deadline: connect, send and the whole answer.

urllib's ``timeout`` bounds each socket call, so a server that trickles its
answer a byte at a time holds a client for as long as it likes.  Here every
socket call of a request waits only for what is left before the request's
deadline.  Both HTTP clients of the project use it: the route-eval client
(general_llm/service_client.py) and generate.py (transitlm.chat).

    opener = deadline_opener()
    request = urllib.request.Request(url, data=body, method="POST")
    request.deadline = time.monotonic() + timeout      # read by the handlers
    with opener.open(request, timeout=timeout) as response:
        body = read_body(response, request.deadline, max_bytes)

A passed deadline raises ``socket.timeout``.  Standard library only.
"""

import functools
import http.client
import io
import socket
import time
import urllib.request

READ_CHUNK = 64 * 1024


class AnswerTooLarge(Exception):
    """The answer's body is larger than the caller allows."""


def deadline_opener(*handlers):
    """A urllib opener whose HTTP(S) connections honour ``request.deadline``."""
    return urllib.request.build_opener(*(DEADLINE_HANDLERS + list(handlers)))


def read_body(response, deadline, max_bytes):
    """The answer's body, read in chunks until the deadline (socket.timeout) or
    ``max_bytes`` (AnswerTooLarge)."""
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


class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, **kwargs):
        self._deadline = kwargs.pop("deadline", None)
        http.client.HTTPConnection.__init__(self, *args, **kwargs)

    def connect(self):
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
            http.client.HTTPSConnection.connect(self)   # TCP and TLS handshake
            if self._deadline is not None:
                self.sock = _DeadlineSocket(self.sock, self._deadline)

    class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(functools.partial(
                _DeadlineHTTPSConnection, deadline=getattr(req, "deadline", None)),
                req, context=self._context)

    DEADLINE_HANDLERS.append(_DeadlineHTTPSHandler)
