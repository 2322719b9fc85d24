"""Rows as trainers hold them, made into rows as the release CSV gives them.

A trainer's row has been through pandas, ``datasets`` or parquet: ``req_type``
is the integer 2 or the float 2.0, the JSON columns (``sft_prompt``,
``sft_label``) may already be decoded to dicts and lists, a missing cell is
None or NaN, numbers may be numpy scalars and lists numpy arrays.  The
evaluators read text cells.  ``trainer_row`` turns such a row into the one
its CSV original gives, so that it scores exactly as that original:

- ``sft_prompt``, ``sft_label``: text as it is; bytes as UTF-8; a decoded
  value re-encoded as JSON (compact, its keys in their order), which the
  evaluator decodes back to the same value.  A missing or empty cell, a value JSON
  cannot hold, or JSON nested deeper than the evaluators read
  (common.MAX_JSON_DEPTH) raises RowDataError naming the field.
- ``req_type``: a whole number (2, 2.0, a numpy integer) as its digits; a
  missing cell as the empty cell (the evaluator reads it as 0); anything else
  as its text, which the benchmark that reads req_type refuses (not a whole
  number: RowDataError naming req_type).
- ``index_id``, ``indexid``, ``task_id``, ``system_prompt``: text; a whole
  number as its digits; a missing cell as the empty cell.

Other keys are left as they are.  A row is a dict (or a mapping, or an object
with ``to_dict()`` such as a pandas Series) or its JSON text.

Standard library only; Python 3.8+.
"""

import json
import math
import numbers
from collections.abc import Mapping

from common import MAX_JSON_DEPTH, json_too_deep

JSON_COLUMNS = ("sft_prompt", "sft_label")
TEXT_COLUMNS = ("index_id", "indexid", "task_id", "system_prompt")
REQ_TYPE = "req_type"
# Missing cells of pandas (pd.NA) and of its date columns (pd.NaT), by type name.
MISSING_TYPES = ("NAType", "NaTType")


class RowDataError(ValueError):
    """A row that cannot be scored against (the user's data, not the model's
    completion): names the field."""


def row_dict(row):
    """A row of the release as a dict: a dict as it is, a mapping (or an
    object with ``to_dict()``) as a dict, JSON text decoded."""
    if isinstance(row, dict):
        return row
    if isinstance(row, Mapping):
        return dict(row)
    if isinstance(row, (str, bytes, bytearray)):
        try:
            value = json.loads(row)
        except (ValueError, RecursionError):
            raise RowDataError("the row is text that is not JSON")
        if isinstance(value, dict):
            return value
    elif callable(getattr(row, "to_dict", None)):       # a pandas Series
        try:
            value = row.to_dict()
        except Exception:
            value = None
        if isinstance(value, dict):
            return value
    raise RowDataError("the row is %s, expected a dict with sft_prompt and sft_label (or its "
                       "JSON text)" % type(row).__name__)


def trainer_row(row):
    """The row as its CSV original gives it (see the module's docstring): a
    new dict, or the row itself when it holds nothing to change.
    RowDataError naming the field for a row that cannot be scored against."""
    row = row_dict(row)
    changed = {}
    for field in JSON_COLUMNS:
        value = row.get(field)
        text = json_cell(value, field)
        if text is not value:
            changed[field] = text
    for field in TEXT_COLUMNS:
        if field in row:
            value = row[field]
            if not isinstance(value, str):
                changed[field] = text_cell(value)
    if REQ_TYPE in row and not isinstance(row[REQ_TYPE], str):
        changed[REQ_TYPE] = text_cell(row[REQ_TYPE])
    return dict(row, **changed) if changed else row


def is_missing(value):
    """None, NaN, pandas' NA: a cell with nothing in it."""
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        try:
            return math.isnan(value)         # a float, or numpy's float32 NaN
        except (TypeError, ValueError, OverflowError):
            return False
    return type(value).__name__ in MISSING_TYPES


def plain(value):
    """A numpy scalar or array as the Python value it holds (its tolist());
    any other value as it is."""
    if isinstance(value, (str, bytes, bytearray, dict, list, tuple, numbers.Number)):
        return value
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return tolist()
        except Exception:
            return value
    return value


def text_cell(value):
    """A cell that is text in the CSV: a whole number as its digits (2.0 ->
    "2"), a missing cell empty, bytes as UTF-8, anything else as its text."""
    value = plain(value)
    if is_missing(value):
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, bool):
        return str(value)
    try:
        if isinstance(value, numbers.Integral):
            return str(int(value))
        if isinstance(value, numbers.Real):
            number = float(value)
            if math.isfinite(number) and number.is_integer():
                return str(int(number))
            return repr(number)
        return str(value)
    except Exception:       # an integer too long to write, an object whose str() raises
        return "(%s that cannot be written)" % type(value).__name__


def json_cell(value, field):
    """A JSON column's cell as the JSON text of the CSV (``value`` itself when
    it is text); RowDataError naming ``field`` when nothing can be scored
    against it."""
    if isinstance(value, str):
        text = value
    elif is_missing(value):
        raise RowDataError("the row has no %s" % field)
    elif isinstance(value, (bytes, bytearray)):
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise RowDataError("the row's %s is bytes that are not UTF-8" % field)
    else:
        try:
            text = _ENCODER.encode(plain(value))
        except RecursionError:
            raise RowDataError("the row's %s is nested more than %d levels deep"
                               % (field, MAX_JSON_DEPTH))
        except (TypeError, ValueError) as exc:
            raise RowDataError("the row's %s holds a value JSON cannot hold (%s)"
                               % (field, str(exc)[:200]))
    if not text.strip():
        raise RowDataError("the row's %s is empty" % field)
    if json_too_deep(text):
        raise RowDataError("the row's %s is nested more than %d levels deep"
                           % (field, MAX_JSON_DEPTH))
    return text


def _encodable(value):
    """json's fallback for a value it does not know: a numpy value as the
    Python value it holds."""
    converted = plain(value)
    if converted is value:
        raise TypeError("%s is not JSON" % type(value).__name__)
    return converted


# A decoded column re-encoded: compact, its keys in their order, non-ASCII kept.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_encodable)
