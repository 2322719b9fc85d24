"""A CSV input file streamed row by row, within a budget per row: what
generate.py and ``reward.py prepare`` read a test or training file with.

``csv_rows(path)`` opens the file (UTF-8, a byte-order mark skipped) and
yields its records as lists of cells; the lines that make up one record (a
quoted cell may span many) hold at most ``MAX_ROW_CHARS`` characters
together, and no line is read whole past it, so a file with a runaway quote
or a gigabyte line costs a bounded amount of memory.  ``data_rows`` takes the
records after the header: blank lines left out, each padded to the header's
width.  Every problem (the file unreadable, not UTF-8, not CSV, a row over
the budget) is an InputError with a one-line English message.

Standard library only; Python 3.8+.
"""

import csv

from common import InputError, raise_csv_field_limit

ID_COLUMNS = ("index_id", "indexid")     # a row's id, as the release and generate.py name it
# Characters of one input row, its lines together (a row of a test file is a
# few kilobytes): reading never holds more than this of one row.
MAX_ROW_CHARS = 16 * 1024 * 1024

raise_csv_field_limit()      # release cells exceed the csv module's 128 kB default


def open_csv(path):
    """The text handle of a CSV input; InputError when it cannot be opened."""
    try:
        return open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError("cannot read input file %s: %s" % (path, exc.strerror or exc))


class RowLines(object):
    """The lines of a CSV file for csv.reader, with a budget per row: the lines
    that make up one row (a quoted cell may span many) hold at most
    ``limit`` characters together, and no line is read whole past it.
    ``row_done()`` starts the next row's budget."""

    def __init__(self, handle, path, limit=None):
        self.handle = handle
        self.path = path
        self.limit = MAX_ROW_CHARS if limit is None else limit
        self.used = 0
        self.line_no = 0

    def __iter__(self):
        return self

    def __next__(self):
        line = self.handle.readline(self.limit - self.used + 1)
        if not line:
            raise StopIteration
        self.line_no += 1
        self.used += len(line)
        if self.used > self.limit:
            raise InputError("input file %s: the row ending after line %d holds more than "
                             "%d characters (a test file's rows are a few kilobytes); is it "
                             "the right file?" % (self.path, self.line_no, self.limit))
        return line

    def row_done(self):
        self.used = 0


def csv_records(handle, path):
    """csv.reader over ``handle`` with the row budget of RowLines."""
    lines = RowLines(handle, path)
    for cells in csv.reader(lines):
        lines.row_done()
        yield cells


def csv_rows(path):
    """The records of the CSV file at ``path``, streamed (see the module);
    InputError naming the file for any problem."""
    with open_csv(path) as handle:
        try:
            for cells in csv_records(handle, path):
                yield cells
        except UnicodeDecodeError:
            raise InputError("input file %s is not UTF-8 text" % path)
        except csv.Error as exc:
            raise InputError("input file %s is not valid CSV: %s" % (path, exc))


def header_columns(records, path, required):
    """The header of a file's records (cells stripped) and the index of its id
    column; InputError when the file is empty or lacks the id or a
    ``required`` column."""
    header = next(records, None)
    if header is None:
        raise InputError("input file %s is empty" % path)
    header = [cell.strip() for cell in header]
    id_column = next((col for col in ID_COLUMNS if col in header), None)
    missing = [] if id_column else ["index_id (or indexid)"]
    missing += [col for col in required if col not in header]
    if missing:
        raise InputError("input file %s lacks column(s) %s (has: %s)"
                         % (path, ", ".join(missing), ", ".join(header)))
    return header, header.index(id_column)


def blank(cells):
    """Is a record a blank line (which is not a row)?"""
    return not cells or (len(cells) == 1 and not cells[0].strip())


def data_rows(records, width, limit=None):
    """Non-blank records padded to the header's ``width``, at most ``limit``."""
    count = 0
    for cells in records:
        if limit is not None and count >= limit:
            return
        if blank(cells):
            continue
        count += 1
        yield cells + [""] * (width - len(cells))
