"""Outputs that are streams, made by the tests themselves (issue 39): a FIFO
read by a thread, a character device that is a twin of /dev/null (the real
one is never touched), a pipe named as /dev/fd/N, and the targets an output
refuses (a socket, a block device node).  Nodes need root (mknod): the tests
that need one skip where it is not permitted."""

import os
import socket
import stat
import threading
import unittest

NULL_DEVICE = (1, 3)             # Linux's /dev/null: what is written vanishes
UNUSED_BLOCK_DEVICE = (7, 250)   # a loop device number: never opened by a test


def device_node(path, block=False, numbers=NULL_DEVICE):
    """A device node at ``path`` (a twin of /dev/null by default) -> path;
    SkipTest where this process may not make one."""
    kind = stat.S_IFBLK if block else stat.S_IFCHR
    try:
        os.mknod(path, kind | 0o666, os.makedev(*numbers))
    except (OSError, AttributeError) as exc:
        raise unittest.SkipTest("cannot make a device node here: %s" % exc)
    return path


def is_device(path, block=False):
    mode = os.lstat(path).st_mode
    return stat.S_ISBLK(mode) if block else stat.S_ISCHR(mode)


def unix_socket(path):
    """A bound Unix socket at ``path`` -> the socket (close it); SkipTest
    where there are none."""
    if not hasattr(socket, "AF_UNIX"):
        raise unittest.SkipTest("no Unix sockets here")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    return sock


class _Drained(object):
    """A thread reading ``source`` (a path or a descriptor, as open() takes
    it) to its end, started on entering; ``data`` holds the bytes read once
    ``_finish`` has joined it."""

    def __init__(self, source):
        self.source = source
        self.chunks = []
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _read(self):
        with open(self.source, "rb") as handle:
            for chunk in iter(lambda: handle.read(65536), b""):
                self.chunks.append(chunk)

    def __enter__(self):
        self.thread.start()
        return self

    def _finish(self):
        self.thread.join(60)
        self.data = b"".join(self.chunks)
        return False

    def text(self):
        return self.data.decode("utf-8")


class FifoReader(_Drained):
    """A FIFO at ``path`` and a thread reading what one writer sends, until
    that writer closes it.  As a context manager: on leaving, a writer that
    never came is stood in for (the thread is never left waiting), and
    ``data`` holds the bytes read."""

    def __init__(self, path):
        if not hasattr(os, "mkfifo"):
            raise unittest.SkipTest("no FIFOs here")
        self.path = path
        os.mkfifo(path)
        _Drained.__init__(self, path)

    def __exit__(self, *exc):
        if self.thread.is_alive():
            try:                       # the reader may still wait in open(): release it
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass                   # it is reading: a writer has it open
        return self._finish()


class PipeReader(_Drained):
    """An os.pipe whose write end is named as /dev/fd/N (``path``) and whose
    read end a thread drains.  On leaving, ``data`` holds the bytes read."""

    def __init__(self):
        self.read_end, self.write_end = os.pipe()
        self.path = "/dev/fd/%d" % self.write_end
        _Drained.__init__(self, self.read_end)

    def __exit__(self, *exc):
        os.close(self.write_end)
        return self._finish()
