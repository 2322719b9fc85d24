"""Decoding JSON that a server or an old file sent, within limits.

``json.loads`` recurses once per nesting level (100,000 levels raise
RecursionError, which is not a ValueError), builds one Python object per
value (a few megabytes of ``[[],[],...]`` become hundreds of megabytes of
lists) and, before Python 3.11, converts a number of millions of digits in
time that grows with its square.  ``loads_bounded`` refuses the first two
before decoding and reads a number longer than 4,000 digits as a float
(infinite): every problem is a ValueError with an English reason.
``json_shape_problem`` is the scan a service makes of a request body before
decoding it (transitlm.io.json_service).

JSON has no NaN or Infinity, though ``json`` reads and writes them.
``loads_bounded(..., strict=True)`` refuses ``NaN``, ``Infinity``,
``-Infinity`` and numbers too large for a float (``1e999``), so what is read
can be written back as JSON; ``finite`` turns such values of an object read
leniently into ``null`` before it is written.

Standard library only; Python 3.8+.
"""

import json
import re

from common import MAX_JSON_DEPTH, count_of, json_outside_strings, json_too_deep

MAX_JSON_VALUES = 200000        # JSON values (counted by their separators) decoded at most
MAX_INT_DIGITS = 4000
# The tokens of the shape scan, read outside strings (common.json_outside_strings:
# linear whatever the text holds, so brackets and commas inside strings do not count).
_SHAPE_TOKEN_RE = re.compile(r"[\[\]{},]")


def parse_int(digits):
    """A JSON integer as Python reads it, except that one too long for
    ``int()`` (Python 3.11+ refuses over 4,300 digits) becomes a float (inf):
    only the value that holds it is wrong, not the whole text."""
    return int(digits) if len(digits) <= MAX_INT_DIGITS else float(digits)


def value_count_over(text, limit, outside=None):
    """Do the commas, ``[`` and ``{`` of ``text`` outside its strings (about
    one per value) number more than ``limit``?  Answered by three counts when
    the whole text has fewer.  ``outside``: the text's pieces outside its
    strings when they were read already (json_outside_strings)."""
    if outside is None and count_of(text, ",[{") <= limit:
        return False
    count = 0
    for bare in json_outside_strings(text) if outside is None else outside:
        count += bare.count(",") + bare.count("[") + bare.count("{")
    return count > limit


def _no_constant(name):
    raise ValueError("%s is not a JSON value" % name)


def _finite_float(text):
    value = float(text)
    if value in (_INF, -_INF):
        raise ValueError("the number %s is too large" % (text if len(text) <= 20
                                                         else text[:20] + "..."))
    return value


def _finite_int(digits):
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError("a number of more than %d digits" % MAX_INT_DIGITS)
    return int(digits)


_INF = float("inf")


def finite(value):
    """A JSON value with every NaN or infinite float replaced by None (the
    same object where there is none)."""
    if isinstance(value, float):
        return value if value - value == 0 else None
    if isinstance(value, dict):
        items = {key: finite(item) for key, item in value.items()}
        return value if all(items[key] is value[key] for key in value) else items
    if isinstance(value, list):
        items = [finite(item) for item in value]
        return value if all(new is old for new, old in zip(items, value)) else items
    return value


def loads_bounded(text, max_depth=MAX_JSON_DEPTH, max_values=MAX_JSON_VALUES, strict=False):
    """json.loads of ``text`` (str or bytes, UTF-8), or ValueError with a reason
    when it is not UTF-8, not JSON, nested more than ``max_depth`` levels or
    holding more than about ``max_values`` values; with ``strict``, also when
    it holds NaN, Infinity or a number too large for a float."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text")
    if json_too_deep(text, max_depth):
        raise ValueError("JSON nested more than %d levels deep" % max_depth)
    if value_count_over(text, max_values):
        raise ValueError("JSON holding more than %d values" % max_values)
    options = ({"parse_constant": _no_constant, "parse_float": _finite_float,
                "parse_int": _finite_int} if strict else {"parse_int": parse_int})
    try:
        return json.loads(text, **options)
    except RecursionError:          # not expected after the depth check; never a crash
        raise ValueError("JSON nested too deep to decode")
    except ValueError as exc:
        raise ValueError("not JSON (%s)" % (getattr(exc, "msg", None) or exc))


def json_shape_problem(text, max_items=None, max_depth=MAX_JSON_DEPTH, outside=None):
    """Scan JSON text, without decoding it, for what would make decoding costly.

    Returns ("too_long", message) when some array holds more than
    ``max_items`` items (None: no limit), ("too_deep", message) when arrays
    and objects nest more than ``max_depth`` levels (the json module recurses
    per level), else None.  Brackets and commas inside strings do not count.
    The scan stops at the first excess: a 10 MB text of five million tiny
    items is refused after ``max_items`` steps.  Invalid JSON is not judged
    here (decoding reports it).  ``outside``: as value_count_over's.
    """
    few_commas = max_items is None or count_of(text, ",") < max_items
    if outside is None and few_commas and count_of(text, "[{") <= max_depth:
        return None                      # no array can be too long, nor nesting too deep
    commas = []                          # per open container: commas so far (None: object)
    for char in _structure(json_outside_strings(text) if outside is None else outside):
        if char == ",":
            if max_items is not None and commas and commas[-1] is not None:
                commas[-1] += 1
                if commas[-1] >= max_items:
                    return "too_long", "a list holds more than %d items" % max_items
        elif char == "[" or char == "{":
            commas.append(0 if char == "[" else None)
            if len(commas) > max_depth:
                return "too_deep", "nested more than %d levels deep" % max_depth
        elif commas:
            commas.pop()
    return None


def _structure(outside):
    """The brackets and commas of JSON text outside its strings, one at a time."""
    for piece in outside:
        for char in _SHAPE_TOKEN_RE.findall(piece):
            yield char

