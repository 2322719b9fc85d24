"""Input limits of the data tools (import_gtfs.py, make_benchmark.py, make_demo.py).

A file is read only when it is a regular file (a device such as /dev/zero, a
FIFO or a socket is refused before it is opened for reading, so nothing waits
on a pipe), and it is read through ``CappedReader``, which counts bytes while
streaming: a file over its size limit, or one CSV record (so any field) over
the row limit, stops the read with a ``LimitError`` naming the file, before
memory runs out.  Zip entries are checked before they are unpacked (method,
encryption, declared size, packing ratio) and while they are (damaged data,
CRC); the zip's central directory is checked before it is loaded.  Numbers
are read by ``parse_int``/``parse_number`` with a range (never NaN or
infinite); text from files reaches a message through ``shown`` (quoted,
clipped) and the terminal through ``one_line``/``terminal_text`` (control
characters escaped).  ``outputs_problem`` keeps every output off every input
(transitlm.io.files.overwrite_problem).

The numbers below are the documented limits (README, "Limits" of each tool).
Standard library only.
"""

import argparse
import io
import math
import os
import stat
import struct
import zipfile
import zlib

from transitlm.io.files import overwrite_problem, unwritable_reason
from transitlm.io.terminal import one_line as terminal_one_line

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# --- GTFS feeds (import_gtfs.py) -------------------------------------------
GTFS_FILE_BYTES = 256 * MIB                        # any feed file but stop_times.txt
GTFS_FILE_BYTES_BY_NAME = {"stop_times.txt": 2 * GIB}
GTFS_ROW_BYTES = 1 * MIB                           # one CSV record, so any field
GTFS_TABLE_ROWS = 5000000        # lines of all files but stop_times.txt together (kept in memory)
ZIP_MAX_ENTRIES = 10000
ZIP_MAX_DIRECTORY_BYTES = 16 * MIB                 # the zip's central directory
ZIP_MAX_RATIO = 200                                # unpacked / packed size of an entry ...
ZIP_RATIO_FROM_BYTES = 1 * MIB                     # ... once it unpacks to more than this
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
ZIP_METHOD_NAMES = {1: "shrink", 6: "implode", 9: "deflate64", 12: "bzip2", 14: "LZMA",
                    93: "Zstandard", 95: "xz", 98: "PPMd", 99: "AES encryption"}

# --- Network folders (make_benchmark.py) -----------------------------------
NETWORK_FILE_BYTES = 512 * MIB                     # station_info, line_info, hop_times, line_service
NETWORK_ROW_BYTES = 16 * MIB                       # one record (a long line's station_list)
NETWORK_ROWS = 2000000                             # lines of the network's files together
CITY_JSON_BYTES = 1 * MIB

# --- Messages -----------------------------------------------------------------
VALUE_CHARS = 60            # a value quoted in a message
MESSAGE_CHARS = 400         # a whole one-line message

# Read-ahead of the text layers above a CappedReader (BufferedReader + the
# TextIOWrapper's chunk): a record is refused once the bytes read since the
# previous record pass the row limit plus this, so no record within the
# limit is ever refused.
READ_BUFFER_BYTES = 64 * KIB
_READ_AHEAD_BYTES = READ_BUFFER_BYTES + 16 * KIB

# What a damaged or unsupported zip entry raises while it is opened or read.
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
              NotImplementedError, RuntimeError, ValueError, OverflowError, struct.error)


class LimitError(Exception):
    """A file over a limit, not a regular file, or a damaged zip entry; the
    message names the file."""


class RowTooLong(LimitError):
    """One CSV record over the row limit; the reader adds the line."""


def fmt_bytes(count):
    """2147483648 -> '2 GiB'; 1500 -> '1,500 bytes'."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if count >= size and count % size == 0:
            return "%d %s" % (count // size, unit)
    return "{:,} bytes".format(count)


def fmt_int(value):
    return "{:,}".format(value)


# ---------------------------------------------------------------------------
# Text for messages and the terminal
# ---------------------------------------------------------------------------

def clip(text, limit):
    """Text cut to ``limit`` characters, saying how long it was."""
    text = str(text)
    if len(text) <= limit:
        return text
    return "%s... (%s characters)" % (text[:limit], fmt_int(len(text)))


def shown(value, limit=VALUE_CHARS):
    """A value from a file, quoted for a message: repr-style, clipped."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return "%r... (%s characters)" % (text[:limit], fmt_int(len(text)))


def terminal_text(text):
    """Text safe on one terminal line (transitlm.io.terminal.one_line)."""
    return terminal_one_line(text)


def one_line(message, limit=MESSAGE_CHARS):
    """A message for stderr: one line, escaped, at most ``limit`` characters."""
    return terminal_one_line(clip(message, limit))


# ---------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------

_MAX_NUMBER_CHARS = 40      # longer number text is refused before it is converted


def parse_int(text, low, high):
    """Whole number text within [low, high] -> int; else ValueError with the reason."""
    text = text.strip()
    if len(text) > _MAX_NUMBER_CHARS:
        raise ValueError("%s is not a whole number" % shown(text))
    try:
        value = int(text)
    except ValueError:
        raise ValueError("%s is not a whole number" % shown(text))
    if not low <= value <= high:
        raise ValueError("%s is outside %s to %s" % (shown(text), fmt_int(low), fmt_int(high)))
    return value


def parse_number(text, low, high):
    """Finite number text within [low, high] -> float; NaN and infinities are refused."""
    text = text.strip()
    if len(text) > _MAX_NUMBER_CHARS:
        raise ValueError("%s is not a number" % shown(text))
    try:
        value = float(text)
    except ValueError:
        raise ValueError("%s is not a number" % shown(text))
    if not math.isfinite(value):
        raise ValueError("%s is not a finite number" % shown(text))
    if not low <= value <= high:
        raise ValueError("%s is outside %g to %g" % (shown(text), low, high))
    return value


def int_arg(low, high):
    """An argparse type: a whole number within [low, high]."""
    def parse(text):
        try:
            return parse_int(text, low, high)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc))
    parse.__name__ = "whole number"
    return parse


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------

def is_regular(path):
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def open_regular(path, name, max_bytes):
    """An unbuffered binary handle on a regular file of at most ``max_bytes``.

    Opened without blocking (a FIFO put in place of the file does not make the
    open wait for a writer), then checked with fstat: anything but a regular
    file, or a file over the limit, is refused by name before a byte is read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise LimitError("%s is not a regular file (a device, pipe or socket is not read)"
                             % name)
        if status.st_size > max_bytes:
            raise LimitError("%s is %s bytes, over the limit of %s"
                             % (name, fmt_int(status.st_size), fmt_bytes(max_bytes)))
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


class CappedReader(io.RawIOBase):
    """The bytes of ``source`` (a binary handle with read(n)), counted while
    streaming: more than ``max_bytes`` in all, or more than ``row_bytes``
    since the consumer last set ``mark = total`` (at each CSV record), raises
    a LimitError.  ``lines``, a LineBudget shared by several files, caps their
    lines together.  Read errors of a zip entry (damaged data, bad CRC) become
    LimitErrors naming the entry; ``digest`` (a hashlib object) sees every byte.
    """

    def __init__(self, source, name, max_bytes, row_bytes, zip_entry=False, digest=None,
                 lines=None):
        io.RawIOBase.__init__(self)
        self.source = source
        self.name = name
        self.max_bytes = max_bytes
        self.row_limit = row_bytes
        self.row_bytes = row_bytes + _READ_AHEAD_BYTES
        self.zip_entry = zip_entry
        self.digest = digest
        self.lines = lines
        self.total = 0
        self.mark = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.zip_entry:
            try:
                data = self.source.read(len(buffer))
            except ZIP_ERRORS as exc:
                raise LimitError("%s: damaged zip entry (%s)" % (self.name, clip(exc, 120)))
        else:
            data = self.source.read(len(buffer))
        count = len(data)
        buffer[:count] = data
        self.total += count
        if self.digest is not None:
            self.digest.update(data)
        if self.lines is not None:
            self.lines.take(data, self.name)
        if self.total > self.max_bytes:
            raise LimitError("%s is longer than %s (the limit)" % (self.name, fmt_bytes(self.max_bytes)))
        if self.total - self.mark > self.row_bytes:
            raise RowTooLong("a row is longer than %s (the limit)" % fmt_bytes(self.row_limit))
        return count

    def close(self):
        if not self.closed:
            try:
                self.source.close()
            finally:
                io.RawIOBase.close(self)


class LineBudget(object):
    """Lines several files may have together (\n, or \r for old Mac files)."""

    def __init__(self, limit, what):
        self.limit = limit
        self.left = limit
        self.what = what

    def take(self, data, name):
        self.left -= max(data.count(b"\n"), data.count(b"\r"))
        if self.left < 0:
            raise LimitError("%s have more than %s lines together (the limit), reached in %s"
                             % (self.what, fmt_int(self.limit), name))


def capped_text(reader):
    """A UTF-8 text handle (BOM skipped, newlines kept for csv) over a CappedReader."""
    return io.TextIOWrapper(io.BufferedReader(reader, READ_BUFFER_BYTES), encoding="utf-8-sig",
                            newline="")


# ---------------------------------------------------------------------------
# Zip files
# ---------------------------------------------------------------------------

def zip_directory_problem(path, label):
    """Why a zip's central directory is refused before zipfile loads it, or None."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:
        return None
    try:
        with open(path, "rb") as handle:
            record = end_record(handle)
    except ZIP_ERRORS as exc:
        return "%s is not a readable zip file (%s)" % (label, clip(exc, 120))
    if not record:
        return "%s is not a readable zip file (no end of central directory)" % label
    entries, size = record[zipfile._ECD_ENTRIES_TOTAL], record[zipfile._ECD_SIZE]
    if entries > ZIP_MAX_ENTRIES:
        return "%s has %s entries, over the limit of %s" % (label, fmt_int(entries),
                                                          fmt_int(ZIP_MAX_ENTRIES))
    if size > ZIP_MAX_DIRECTORY_BYTES:
        return "%s has a central directory of %s bytes, over the limit of %s" % (
            label, fmt_int(size), fmt_bytes(ZIP_MAX_DIRECTORY_BYTES))
    return None


def zip_entry_problem(info, name, max_bytes):
    """Why a zip entry is refused before it is unpacked, or None."""
    if info.flag_bits & 0x1:
        return "%s is encrypted in the zip (not supported)" % name
    if info.compress_type not in ZIP_METHODS:
        method = ZIP_METHOD_NAMES.get(info.compress_type, "number %d" % info.compress_type)
        return ("%s uses compression method %s; only stored and deflate entries are read"
                % (name, method))
    if info.file_size > max_bytes:
        return "%s unpacks to %s bytes, over the limit of %s" % (
            name, fmt_int(info.file_size), fmt_bytes(max_bytes))
    if info.file_size > ZIP_RATIO_FROM_BYTES and \
            info.file_size > ZIP_MAX_RATIO * max(1, info.compress_size):
        return ("%s unpacks to %s bytes from %s (more than %d times its packed size): "
                "refused as a zip bomb" % (name, fmt_int(info.file_size),
                                          fmt_int(info.compress_size), ZIP_MAX_RATIO))
    return None


# ---------------------------------------------------------------------------
# Outputs never overwrite inputs
# ---------------------------------------------------------------------------

def unwritable_output(outputs):
    """Why the first output that can be neither replaced nor written through
    (a folder, a block device, a socket: transitlm.io.files.unwritable_reason)
    cannot be written, or None.  A character device or a FIFO is written
    through, as by every tool."""
    for out in outputs:
        reason = unwritable_reason(out)
        if reason:
            return reason
    return None


def outputs_problem(outputs, inputs):
    """Why the outputs cannot be written (one would overwrite an input, or one
    exists and can be neither replaced nor written through), or None."""
    clash = overwrite_problem([("", out) for out in outputs],
                              [("the input", path) for path in inputs])
    return clash or unwritable_output(outputs)


def seed_int(text, digits):
    """An argparse type's value: a whole number of at most ``digits`` digits."""
    try:
        return parse_int(text, -10 ** digits + 1, 10 ** digits - 1)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of at most %d digits"
                                         % digits)
