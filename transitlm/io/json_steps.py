"""JSON decoded in steps: what ``json.loads`` and ``JSONDecoder.raw_decode``
give (the same value, or the same error with the same message and
position), without a long call in C.

A call in C -- ``json.loads``, a regular expression -- never lets the other
threads of the process run: ``json.loads`` of 16 MB takes 20-70 ms, and a
service's ``/healthz`` would wait that long behind one request (issue 38).
Here no step reads more than about ``chunk`` characters in C: the strings
that cross a chunk's end (common.json_outside_strings; every string longer
than a chunk is one) are taken out of the text, each replaced by a short
placeholder, and decoded a piece at a time (``json.decoder.scanstring`` on
pieces cut between escapes, a surrogate pair never split); the rest is
decoded by the json module's own Python scanner, a value at a time.  Errors
come in the text's order: a string's error counts only when the decoding
reached the string.  A text of at most AT_ONCE characters is decoded by the
json module in one call (a few milliseconds).

Standard library only; Python 3.8+.
"""

import bisect
import json
import json.decoder
import json.scanner
import re
import secrets

from common import SCAN_CHUNK, json_outside_strings

AT_ONCE = 1 << 20                # characters the json module decodes in one call
# One token of a string's text: a run of characters, or an escape -- a
# surrogate pair's two escapes together, a high surrogate alone only when
# what follows is seen and is not a low one -- so that a piece cut after a
# token decodes as it does within the whole string.
_ESCAPE = (r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
           r"|\\u[dD][89abAB][0-9a-fA-F]{2}(?=[^\\]|\\[^u]|\\u(?:[0-9a-ce-fA-CE-F]|[dD][0-9abAB]))"
           r"|\\u(?![dD][89abAB])[0-9a-fA-F]{4}|\\[^u]")
_STRING_PIECE_RE = re.compile(r"[^\\]*(?:(?:%s)[^\\]*)*" % _ESCAPE, re.DOTALL)
_LONGEST_ESCAPE = 12             # a surrogate pair's two escapes
_UNTERMINATED = "Unterminated string starting at"


class _Pairs(list):
    """An object's (key, value) pairs as decoded, in order (duplicates kept)."""


def loads_in_steps(text, parse_int=None, chunk=SCAN_CHUNK, spans=None):
    """``json.loads(text, parse_int=parse_int)``, in steps.  ``spans``: what
    common.json_outside_strings gave for the text, when it was read already."""
    if len(text) <= AT_ONCE:
        return json.loads(text, parse_int=parse_int)
    return _Steps(text, parse_int, chunk, spans).decode(raw=False)[0]


def raw_decode_in_steps(text, parse_int=None, chunk=SCAN_CHUNK):
    """``json.JSONDecoder(parse_int=parse_int).raw_decode(text)`` -> (value,
    end), in steps."""
    if len(text) <= AT_ONCE:
        return json.JSONDecoder(parse_int=parse_int).raw_decode(text)
    return _Steps(text, parse_int, chunk, None).decode(raw=True)


class _Steps(object):
    """One text's decoding: its skeleton (the long strings replaced) and the
    marks that map the skeleton's positions to the text's."""

    def __init__(self, text, parse_int, chunk, spans):
        self.text, self.parse_int, self.chunk = text, parse_int, chunk
        if spans is None:
            spans = []
            for _ in json_outside_strings(text, chunk, spans):
                pass
        nonce = "\u2063%s-" % secrets.token_hex(8)     # cannot stand in the text by chance
        parts, last, length = [], 0, 0
        self.marks = []              # (skeleton start, skeleton end, text start, text end)
        self.names = []              # each mark's placeholder (None: the string left open)
        for number, (start, end) in enumerate(spans):
            stand_in = '"' if end is None else '"%s%d"' % (nonce, number)
            parts.extend((text[last:start], stand_in))
            length += start - last
            self.marks.append((length, length + len(stand_in), start,
                               len(text) if end is None else end))
            self.names.append(None if end is None else stand_in[1:-1])
            length += len(stand_in)
            last = len(text) if end is None else end
        parts.append(text[last:])
        self.skeleton = "".join(parts)
        self.starts = [mark[0] for mark in self.marks]

    def position(self, skeleton_position):
        """The text's position of a position in the skeleton."""
        index = bisect.bisect_right(self.starts, skeleton_position) - 1
        if index < 0:
            return skeleton_position
        start, end, text_start, text_end = self.marks[index]
        if skeleton_position >= end:
            return skeleton_position - end + text_end
        return text_start + (skeleton_position - start)

    def decode(self, raw):
        decoder = json.JSONDecoder(parse_int=self.parse_int, object_pairs_hook=_Pairs)
        decoder.scan_once = json.scanner.py_make_scanner(decoder)
        error = None
        try:
            if raw:
                value, end = decoder.raw_decode(self.skeleton)
            else:
                value, end = decoder.decode(self.skeleton), len(self.skeleton)
            stop = self.position(end)
        except json.JSONDecodeError as exc:
            error, stop = exc, self.position(exc.pos)
        except ValueError:           # no position (an integer too long for int()): as json says
            if raw:
                return json.JSONDecoder(parse_int=self.parse_int).raw_decode(self.text)
            return json.loads(self.text, parse_int=self.parse_int), len(self.text)
        strings = {}
        for (start, _, text_start, text_end), name in zip(self.marks, self.names):
            reached = text_start < stop or (
                name is None and error is not None and error.msg == _UNTERMINATED
                and stop == text_start)
            if not reached:
                break
            decoded, problem = self.string(text_start, None if name is None else text_end)
            if problem is not None:
                raise json.JSONDecodeError(problem[0], self.text, problem[1])
            strings[name] = decoded
        if error is not None:
            raise json.JSONDecodeError(error.msg, self.text, stop)
        return _put_back(value, strings), stop

    def string(self, start, end):
        """(the string at ``start`` decoded, None), or (None, (message,
        position)) where the json module finds it wrong; ``end`` None: the
        string runs to the end of the text, never closed."""
        text, chunk = self.text, self.chunk
        pieces, position = [], start + 1
        stop = len(text) if end is None else end - 1
        while True:
            final = position + chunk >= stop
            if final:
                cut = stop
            else:
                cut = _STRING_PIECE_RE.match(text, position, position + chunk).end()
                if cut == position:        # an escape that is not JSON's: its error
                    cut = position + _LONGEST_ESCAPE
            piece = '"' + text[position:cut] + ('' if final and end is None else '"')
            try:
                pieces.append(json.decoder.scanstring(piece, 1)[0])
            except json.JSONDecodeError as exc:
                if exc.msg == _UNTERMINATED:
                    return None, (exc.msg, start)
                return None, (exc.msg, position + exc.pos - 1)
            if final:
                return "".join(pieces), None
            position = cut


def _put_back(value, strings):
    """The decoded value with the strings taken out put back (objects made
    from their pairs, in order, as the json module makes them)."""
    if isinstance(value, str):
        return strings.get(value, value)
    if isinstance(value, _Pairs):
        result = {}
        for key, item in value:
            result[strings.get(key, key)] = _put_back(item, strings)
        return result
    if isinstance(value, list):
        return [_put_back(item, strings) for item in value]
    return value
