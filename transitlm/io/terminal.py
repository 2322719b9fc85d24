"""Text for a terminal: escaping what files and servers wrote, the command
line's usage errors, and the progress line.

Text from outside -- model answers, file and folder names, what a server
sent -- reaches a terminal only through ``printable`` (control characters,
bidirectional-text controls and lone surrogates escaped: no escape sequence
runs, no line is reordered) or, for a message, ``one_line`` (the same, and
line breaks and tabs escaped too, so a message stays on its one line).

Standard library only; Python 3.8+.
"""

import argparse
import re
import sys
import time


def encodable(text):
    # A lone surrogate ("\ud800" from a JSON escape in model output) cannot be
    # written as UTF-8; such text is written with \u escapes instead.
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


# Control characters (C0 but tab and newline, DEL, C1) in model text would
# reach the terminal raw (ANSI escape sequences, OSC 52 clipboard writes), and
# bidirectional-text controls would reorder the line around them (U+202E
# shows "(prediction)" as "(noitciderp)"): everything printed goes through
# printable().
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f%s]" % BIDI_CONTROLS)
# ... and for one line: line breaks of any kind and tabs too.
_LINE_BREAK_RE = re.compile("[\t\n\u2028\u2029]")


def _escape(match):
    code = ord(match.group())
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def printable(text):
    """Text safe to print: control characters as \\x.. escapes, bidirectional
    controls as \\u.... escapes, lone surrogates as \\u...."""
    text = _CONTROL_RE.sub(_escape, str(text))
    if not encodable(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def one_line(text, limit=None):
    """A message for a terminal: printable() and on one line (line breaks and
    tabs escaped); cut to ``limit`` characters, saying how long it was."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = "%s... (%d characters)" % (text[:limit], len(text))
    return _LINE_BREAK_RE.sub(_escape, printable(text))


class CommandParser(argparse.ArgumentParser):
    """argparse as every tool uses it: ``--version`` (``transitlm VERSION``),
    and a usage error as one escaped line on stderr, ``PROG: error: MESSAGE
    (see --help)``, with exit status 2 (the message may quote an argument as
    typed, or a path)."""

    def __init__(self, *args, **kwargs):
        argparse.ArgumentParser.__init__(self, *args, **kwargs)
        from common import VERSION           # the rules, loaded with the command's parser
        self.add_argument("--version", action="version", version="transitlm " + VERSION,
                          help="print the project's version and exit")

    def error(self, message):
        sys.stderr.write(one_line("%s: error: %s (see --help)" % (self.prog, message)) + "\n")
        sys.exit(2)


def _whole_number(text, minimum):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if value < minimum:
        raise argparse.ArgumentTypeError("must be %d or more" % minimum)
    return value


def positive_int(text):
    """An option's type (argparse): a whole number, 1 or more."""
    return _whole_number(text, 1)


def non_negative_int(text):
    """An option's type (argparse): a whole number, 0 or more."""
    return _whole_number(text, 0)


def quoted(value, limit=40):
    """A value from a file or a server, for a message: quoted, cut to about
    ``limit`` characters, escaped for the terminal."""
    text = str(value)
    if len(text) > limit:
        return printable(repr(text[:limit])) + "... (%d characters)" % len(text)
    return printable(repr(text))


class Progress(object):
    """One updating progress line (rows done, rows/s, ETA) for long runs.

    Shown only when enabled (stderr is a terminal and not --quiet), and only
    after DELAY seconds, so short runs print nothing.
    """

    DELAY = 2.0
    INTERVAL = 0.25

    def __init__(self, total, enabled, stream=None, clock=time.time, fraction=None):
        self.total = total              # None when the row count is not known yet
        self.fraction = fraction        # () -> share of the input read, for the ETA
        self.done = 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.clock = clock
        self.start = clock()
        self.last = self.start
        self.shown = False

    def step(self, count=1):
        self.done += count
        if not self.enabled:
            return
        now = self.clock()
        if now - self.start < self.DELAY or now - self.last < self.INTERVAL:
            return
        self.last = now
        rate = self.done / (now - self.start)
        share = self.fraction() if self.fraction else None
        if self.total:
            eta = max(0.0, self.total - self.done) / rate if rate else 0.0
            line = "\r  %d/%d rows  %.0f rows/s  ETA %.0f s " % (self.done, self.total, rate, eta)
        elif share:
            eta = (now - self.start) * (1.0 - share) / share
            line = "\r  %d rows  %.0f%%  %.0f rows/s  ETA %.0f s " % (
                self.done, 100.0 * share, rate, eta)
        else:
            line = "\r  %d rows  %.0f rows/s " % (self.done, rate)
        self.stream.write(line)
        self.stream.flush()
        self.shown = True

    def finish(self):
        if self.shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()
