"""Reading the inputs: the sample CSV (streamed, chunked for workers, hashed) and
the predictions file joined to it by id.

Standard library only; Python 3.8+.
"""

import csv
import hashlib
import io
import itertools
import json
import os
import stat

from common import InputError, MAX_JSON_DEPTH, UTF8_BOM, json_too_deep, type_name
from transitlm.io.csv_rows import ID_COLUMNS
from transitlm.io.terminal import encodable, quoted

CHUNK_BYTES = 1 << 19          # bytes of the sample file a worker reads per task


class SampleRow(object):
    """One input row: its number, id and the raw cells the evaluators read."""

    __slots__ = ("row", "index_id", "prompt", "label", "prediction", "req_type",
                 "has_prediction", "problem", "generator_error")

    def __init__(self, row, index_id, prompt, label, prediction, req_type=None,
                 has_prediction=True, problem=None):
        self.row = row                    # 1-based data row number (header excluded)
        self.index_id = index_id
        self.prompt = prompt              # raw sft_prompt cell
        self.label = label                # raw sft_label cell
        self.prediction = prediction      # raw text, or an already-decoded object
        self.req_type = req_type          # raw req_type cell or None
        self.has_prediction = has_prediction
        self.problem = problem            # (code, message) when the row itself is malformed
        self.generator_error = None       # a predictions file's "error" for this id

    def state(self):
        """The row as a plain tuple (what is sent to a worker process: cheap to pickle)."""
        return (self.row, self.index_id, self.prompt, self.label, self.prediction,
                self.req_type, self.has_prediction, self.problem, self.generator_error)

    @classmethod
    def from_state(cls, state):
        sample = cls(*state[:8])
        sample.generator_error = state[8]
        return sample


class _HashingReader(io.RawIOBase):
    """A binary file whose bytes are hashed as they are read: an input is read
    once (a pipe or a FIFO works) and its hash is that of what was read."""

    def __init__(self, raw):
        io.RawIOBase.__init__(self)
        self.raw = raw
        self.digest = hashlib.sha256()

    def readable(self):
        return True

    def readinto(self, buffer):
        count = self.raw.readinto(buffer)
        if count:
            self.digest.update(memoryview(buffer)[:count])
        return count

    def close(self):
        self.raw.close()
        io.RawIOBase.close(self)


def _regular_file_identity(raw):
    """(device, inode, size, modification time) of an open regular file, or
    None for anything else (a pipe, a FIFO, a terminal)."""
    try:
        status = os.fstat(raw.fileno())
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def read_span(fd, offset, length):
    """``length`` bytes of an open file from ``offset`` (os.pread: the file's
    position is not touched), fewer only when the file ends before."""
    parts = []
    while length > 0:
        data = os.pread(fd, length, offset)
        if not data:
            break
        parts.append(data)
        offset += len(data)
        length -= len(data)
    return b"".join(parts)


def _open_hashed(path, what):
    """(buffered binary handle, hashing reader) for an input file."""
    try:
        raw = open(path, "rb", buffering=0)
    except OSError as exc:
        raise InputError("cannot read %s %s: %s" % (what, path, exc.strerror or exc))
    if os.path.isdir(path):
        raw.close()
        raise InputError("cannot read %s %s: it is a folder" % (what, path))
    hashed = _HashingReader(raw)
    return io.BufferedReader(hashed, 1 << 16), hashed


def _text_handle(binary):
    # Bytes that are not UTF-8 are kept as surrogate escapes: a row holding
    # them becomes an error row instead of stopping the run.
    return io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape",
                            newline="")


def _open_hashed_text(path, what):
    """(text handle, hashing reader) for a UTF-8 CSV/JSONL input, BOM skipped."""
    binary, hashed = _open_hashed(path, what)
    return _text_handle(binary), hashed


class _Replay(io.RawIOBase):
    """Bytes already read, then the rest of a binary handle: what the csv module
    reads when a file is taken up row by row after part of it was read in bytes."""

    def __init__(self, head, rest):
        io.RawIOBase.__init__(self)
        self.head = memoryview(head)
        self.rest = rest

    def readable(self):
        return True

    def readinto(self, buffer):
        if len(self.head):
            count = min(len(buffer), len(self.head))
            buffer[:count] = self.head[:count]
            self.head = self.head[count:]
            return count
        data = self.rest.read1(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _drain(handle):
    """Read the rest of a text handle (so its hash covers the whole file)."""
    buffer = handle.buffer
    while buffer.read(1 << 20):
        pass


def count_sparse(data, byte, steps=512):
    """data.count(byte), in steps of data.find (memchr, in C) while the byte is
    sparse: a 512 KB chunk of long CSV rows holds a few hundred line breaks,
    and stepping over them costs a tenth of counting every byte.  After
    ``steps`` hits the rest is counted."""
    count, position = 0, data.find(byte)
    while position >= 0:
        count += 1
        if count == steps:
            return count + data.count(byte, position + 1)
        position = data.find(byte, position + 1)
    return count


def lone_returns(data, steps=512):
    """How many \r in ``data`` are not followed by \n (as count_sparse)."""
    lone, hits, position = 0, 0, data.find(b"\r")
    while position >= 0:
        hits += 1
        if hits == steps:
            return lone + data.count(b"\r", position) - data.count(b"\r\n", position)
        if data[position + 1:position + 2] != b"\n":
            lone += 1
        position = data.find(b"\r", position + 1)
    return lone


def csv_lines(data):
    """How many lines the csv module counts in bytes that end with a line break
    (\n, \r\n or a lone \r each end one)."""
    lines = count_sparse(data, b"\n")
    if b"\r" in data:
        lines += lone_returns(data)
    return lines


def record_end(data, start=0):
    """Offset just past the last line break in ``data[start:]`` that an even
    number of quotes precede (counted from ``start``), or -1.

    On CSV written by a CSV writer such a line break ends a record; anything
    else (a quote inside an unquoted cell) is caught by the reader of the
    chunk (see parse_chunk), so this is only ever a guess that is checked.
    """
    position = data.rfind(b"\n", start)
    if position < 0:
        return -1
    parity = data.count(b'"', start, position + 1) & 1
    while parity:
        previous = data.rfind(b"\n", start, position)
        if previous < 0:
            return -1
        parity ^= data.count(b'"', previous + 1, position + 1) & 1
        position = previous
    return position + 1


class SplitRecord(Exception):
    """A chunk of bytes did not end at the end of a CSV record."""


# The whole-file checks read the file's first rows, at most HEAD_ROWS (and
# only those that end within its first CHUNK_BYTES).
HEAD_ROWS = 50
# A file that is not UTF-8: what its first bytes may decode as, tried in
# order -- (Python codec, iconv's name, what a message calls it).  A Chinese
# file that is not UTF-8 is nearly always GBK, which GB18030 extends, or Big5
# (traditional Chinese: Taiwan, Hong Kong).
_GB18030 = ("gb18030", "GB18030", "GB18030 (GBK, the Chinese Windows encoding)")
_BIG5 = ("big5", "BIG5", "Big5 (traditional Chinese)")
_LIKELY_ENCODINGS = (_GB18030,)
# Big5 text decodes as GB18030 too, but its common characters land in GBK's
# rows of symbols: kana, Greek, Cyrillic, pinyin letters, vertical forms, the
# private use area.  A quarter of them says Big5 (Chinese text in GBK has
# almost none).
_GBK_SYMBOL_RANGES = (("\u00c0", "\u024f"), ("\u02c0", "\u02ff"), ("\u0370", "\u04ff"),
                      ("\u2460", "\u27bf"), ("\u3040", "\u30ff"), ("\u3100", "\u312f"),
                      ("\ue000", "\uf8ff"), ("\ufe30", "\ufe4f"))
_UTF16 = ("utf-16", "UTF-16", "UTF-16 (it starts with a UTF-16 byte-order mark)")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class FileHead(object):
    """The first rows of a sample file, read before the run from its first
    bytes (``data``; ``complete``: they are the whole file): ``header`` (the
    stripped cells of its first record), ``rows`` (the next records but blank
    lines, at most HEAD_ROWS, as dicts of column -> cell; the first of a
    repeated column), ``undecodable`` (how many of them hold bytes that are
    not UTF-8) and ``data`` (those bytes, whole records).  A record cut by
    the end of ``data`` (when it is not the whole file), and anything after
    a record the csv module rejects, is left out."""

    def __init__(self, data, complete, limit=HEAD_ROWS):
        start = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
        end = len(data) if complete else record_end(data, start)
        self.data = data[start:end] if end > start else b""
        self.complete = complete
        self.header = []
        self.rows = []
        self.undecodable = 0
        reader = csv.reader(io.StringIO(self.data.decode("utf-8", "surrogateescape"),
                                        newline=""))
        try:
            self.header = [cell.strip() for cell in next(reader, [])]
            names = list(enumerate(self.header))[::-1]          # the first of a name wins
            for cells in reader:
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue
                self.rows.append({name: cells[i] for i, name in names if i < len(cells)})
                if not encodable("".join(cells)):
                    self.undecodable += 1
                if len(self.rows) >= limit:
                    break
        except csv.Error:
            pass

    def problem(self, path):
        """The whole-file problem the first rows show, or "": no row at all
        (the whole file read), or every one of them not UTF-8 (a file in
        another encoding: one whose rows are UTF-8 but a few keeps those few
        as error rows)."""
        if self.complete and not self.rows:
            return no_rows_problem(path)
        if self.rows and self.undecodable == len(self.rows):
            return not_utf8_problem(path, self.data, "none of its first %d rows is"
                                    % len(self.rows) if len(self.rows) > 1
                                    else "its only row read is not")
        return ""


def likely_encoding(data):
    """What bytes that are not UTF-8 decode as: an entry of _LIKELY_ENCODINGS
    (or UTF-16, by its byte-order mark), or None."""
    if data.startswith(_UTF16_BOMS):
        return _UTF16
    if looks_big5(data):
        return _BIG5
    for entry in _LIKELY_ENCODINGS:
        try:
            data.decode(entry[0])
        except UnicodeDecodeError:
            continue
        return entry
    return None


def looks_big5(data):
    """Bytes that are Big5 rather than GBK: they decode as Big5, and read as
    GB18030 a quarter of their characters beyond ASCII are GBK's symbols."""
    try:
        data.decode("big5")
    except UnicodeDecodeError:
        return False
    text = data.decode("gb18030", "replace")
    wide = [ch for ch in text if ch > "\x7f"]
    symbols = sum(1 for ch in wide if any(low <= ch <= high for low, high in _GBK_SYMBOL_RANGES))
    return bool(wide) and 4 * symbols >= len(wide)


def not_utf8_problem(path, data, where):
    """The one line for an input file that is not UTF-8 text (``where``: what
    was found so, "line 1 is not"), naming the encoding it likely is in."""
    encoding = likely_encoding(data)
    if encoding is None:
        return ("input file %s is not UTF-8 text (%s): the evaluators read UTF-8 only; "
                "convert it to UTF-8 first" % (path, where))
    _, iconv, name = encoding
    return ("input file %s is not UTF-8 text (%s); it reads as %s: convert it to UTF-8 "
            "first, e.g. iconv -f %s -t UTF-8 %s > converted.csv"
            % (path, where, name, iconv, path))


def no_rows_problem(path):
    """The one line for a sample file that holds a header and no row (path
    None: the Python API's rows)."""
    if path is None:
        return "rows= holds no row: nothing to evaluate"
    return "input file %s holds no rows (a header only): nothing to evaluate" % path


class SampleReader(object):
    """Streams the sample CSV as SampleRows, hashing it while reading.

    ``prediction_column`` is ``generate_results`` or ``sft_label``, or None
    when predictions come from a separate file.  Accepts ``index_id`` or
    ``indexid``; other columns are ignored.  A row whose cell count differs
    from the header's (a stray quote that swallowed a line break, a cut row)
    is kept as a row with a ``problem``: it becomes an error row.

    ``chunked``: the rows after the header may be handed out as chunks of
    bytes (chunks()) that worker processes parse themselves (parse_chunk), so
    this process only reads and hashes.  A record split between two chunks
    (a line break inside a cell) has the file cut again, by the quote count,
    from the chunk where it was found (recut()); anything more unusual (a
    header over several lines, a quote count that is wrong too) goes back to
    reading row by row from there (rows_from()).
    """

    def __init__(self, path, prediction_column, need_req_type=False, sample_count=None,
                 chunked=False, defer_columns=False):
        self.path = path
        self.sample_count = sample_count
        self.warnings = []
        self.binary, self.hashed = _open_hashed(path, "input file")
        self._identity = _regular_file_identity(self.hashed.raw)
        self._spans = False             # workers read chunks from the file (span_file)
        self.chunked = False
        self.handle = None
        self._head = None               # the file's first bytes, for head() (see FileHead)
        self.missing_columns = []       # with defer_columns: see column_problem
        header = None
        try:
            # The file's first bytes are read first, whatever the reading:
            # the whole-file checks look at them (head()), and the rows are
            # then read from them on.
            try:
                self._unread = self.binary.read(CHUNK_BYTES)   # read but not yet parsed
            except OSError as exc:
                raise InputError("cannot read input file %s: %s" % (path, exc.strerror or exc))
            self._head = (self._unread, len(self._unread) < CHUNK_BYTES)
            if chunked and sample_count is None:
                header = self._header_bytes()
            if header is None:
                self._read_rows_from(self._unread, 1)
                self._unread = b""
                header = self._next()
            if header is None:
                raise InputError("input file %s is empty" % path)
            header = [cell.strip() for cell in header]
            if not encodable("".join(header)):
                raise InputError(not_utf8_problem(path, self.head().data, "line 1 is not"))
            self.header = header
            id_column = next((col for col in ID_COLUMNS if col in header), None)
            required = ["sft_prompt", "sft_label"]
            optional = []
            if prediction_column:
                optional.append(prediction_column)
            if need_req_type:
                optional.append("req_type")
            missing = [col for col in required if col not in header]
            if id_column is None:
                missing.insert(0, "index_id (or indexid)")
            self.missing_columns = [col for col in optional if col not in header]
            if missing or (self.missing_columns and not defer_columns):
                raise InputError(self.column_problem(missing))
        except InputError:
            self.close()
            raise
        if self.missing_columns:
            prediction_column = need_req_type = None      # column_problem() stops the run
        repeated = sorted({col for col in header if col and header.count(col) > 1})
        if repeated:
            self.warnings.append("input file %s repeats column(s) %s; the first of each is used"
                                 % (path, ", ".join(repeated)))
        self.width = len(header)
        self.columns = (header.index(id_column), header.index("sft_prompt"),
                        header.index("sft_label"),
                        header.index(prediction_column) if prediction_column else None,
                        header.index("req_type") if need_req_type else None)

    def column_problem(self, missing=(), hint=""):
        """The message of the columns the file lacks (``missing`` and the
        deferred ``missing_columns``), with ``hint`` after it; "" when none."""
        missing = list(missing) + self.missing_columns
        if not missing:
            return ""
        return ("input file %s lacks column(s) %s (has: %s)%s"
                % (self.path, ", ".join(missing), ", ".join(self.header), hint))

    def head(self):
        """The FileHead of the file's first bytes (read once; the bytes are
        then let go)."""
        if not isinstance(self._head, FileHead):
            self._head = FileHead(*self._head)
        return self._head

    def _header_bytes(self):
        """The header's cells when it is one plain line (chunked reading), else None.
        The bytes read after it wait in ``_unread``."""
        data = self._unread
        start = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
        end = data.find(b"\n", start) + 1
        if end <= 0 or b'"' in data[start:end] or b"\r" in data[start:end - 2]:
            return None                # quoted or unusual: read it with the csv module
        try:
            records = list(csv.reader(io.StringIO(
                data[start:end].decode("utf-8", "surrogateescape"), newline="")))
        except csv.Error:
            return None
        if len(records) != 1:
            return None
        self.chunked = True
        self._unread = data[end:]
        self._next_line = 2
        self._offset = end             # of _unread's first byte in the file
        self._eof = False
        self._count_quotes = False     # see recut
        return records[0]

    def _read_rows_from(self, head, first_line):
        """Read row by row with the csv module from here (``head``: bytes already read)."""
        self.handle = _text_handle(io.BufferedReader(_Replay(head, self.binary), 1 << 16)) \
            if head else _text_handle(self.binary)
        self.reader = csv.reader(self.handle)
        self._line_base = first_line - 1

    def _next(self):
        try:
            return next(self.reader, None)
        except UnicodeDecodeError:
            raise InputError("input file %s line %d is not UTF-8 text"
                             % (self.path, self._line_base + self.reader.line_num + 1))
        except csv.Error as exc:
            raise InputError("input file %s line %d is not valid CSV: %s"
                             % (self.path, self._line_base + self.reader.line_num, exc))

    def close(self):
        if self.handle is not None:
            self.handle.close()
        self.binary.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        # A generator: nothing is read until rows are asked for, so a chunked
        # reader can still hand out chunks after iter().
        yield from self._parsed_chunks() if self.chunked else self._rows(1)

    def _parsed_chunks(self):
        """The rows of a chunked reader, read here as a worker reads them:
        each chunk decoded in one go and split into lines before the csv
        module reads it (parse_chunk; about a tenth faster than the text
        stream of _rows, with no UTF-8 check per row when the chunk is
        valid UTF-8).  When a chunk does not end at a record's end, the file
        is cut again from it as for the workers (recut), and if that was
        done already, read row by row from there (rows_from)."""
        done = 0
        chunks = self.chunks()
        while True:
            chunk = next(chunks, None)
            if chunk is None:
                return
            data, first_line, final, _ = chunk
            try:
                # A whole chunk first: only one read to its end is known to
                # end at a record's end.
                rows = list(parse_chunk(data, first_line, self.path, self.columns,
                                        self.width, final, done + 1))
            except SplitRecord:
                chunks = self.recut([chunk])
                if chunks is None:
                    yield from self.rows_from([chunk], done + 1)
                    return
                continue
            done += len(rows)
            yield from rows

    def _rows(self, first_row):
        return sample_rows(self._next, lambda: self._line_base + self.reader.line_num,
                           self.columns, self.width, first_row, self.sample_count)

    # -- chunked reading ----------------------------------------------------
    def chunks(self):
        """(bytes, first line number, final?, offset in the file) chunks of
        about CHUNK_BYTES, each ending at a line break that is guessed to end
        a record (see recut)."""
        data = self._unread
        while True:
            while not self._eof and len(data) < CHUNK_BYTES:
                more = self.binary.read(CHUNK_BYTES)
                self._eof = not more
                data += more
            if not data:
                break
            if self._eof and len(data) <= CHUNK_BYTES:
                end = len(data)            # the file's last chunk
            else:
                end = record_end(data) if self._count_quotes else data.rfind(b"\n") + 1
                if end <= 0:               # a record longer than what was read
                    if not self._eof:
                        more = self.binary.read(len(data))
                        self._eof = not more
                        data += more
                        continue
                    end = len(data)
            chunk, data = data[:end], data[end:]
            self._unread = data
            first, offset = self._next_line, self._offset
            self._next_line += csv_lines(chunk)
            self._offset += end
            yield chunk, first, self._eof and not data, offset

    def recut(self, chunks):
        """Chunks again from the first of ``chunks`` (handed out by chunks() but
        not evaluated), now cut where the quotes before a line break are even
        (record_end), or None when they already were.

        Cells rarely hold a line break, so chunks are first cut at any line
        break; a worker that finds its chunk ending inside a record (see
        parse_chunk) sends the reading here.  A quote count can still be
        wrong (a quote inside an unquoted cell): then rows_from() it is.
        """
        if self._count_quotes:
            return None
        self._count_quotes = True
        self._next_line, self._offset = chunks[0][1], chunks[0][3]
        self._unread = b"".join([chunk[0] for chunk in chunks] + [self._unread])
        return self.chunks()

    def rows_from(self, chunks, first_row):
        """Go back to reading row by row: ``chunks`` (handed out by chunks() but
        not evaluated; may be empty), what chunks() has read past them, then
        the rest of the file -> SampleRows numbered from ``first_row``."""
        self.chunked = False
        first_line = chunks[0][1] if chunks else self._next_line
        head = b"".join([chunk[0] for chunk in chunks] + [self._unread])
        self._unread = b""
        self._read_rows_from(head, first_line)
        return self._rows(first_row)

    def fraction_read(self):
        """Share of the file read so far (None for a pipe), for the progress line."""
        try:
            size = os.fstat(self.hashed.raw.fileno()).st_size
            return min(1.0, self.hashed.raw.tell() / size) if size else None
        except (OSError, ValueError):
            return None

    def span_file(self):
        """The input's file descriptor, when workers may read their chunks from
        the file themselves instead of being sent them (a regular file), else
        None.  Reading it twice is then checked: finish() refuses a file that
        changed since it was opened."""
        if self._identity is None:
            return None
        self._spans = True
        return self.hashed.raw.fileno()

    def finish(self):
        """Read what is left (--sample_count stops early) and return the file's hash."""
        try:
            while self.binary.read(1 << 20):
                pass
            changed = self._spans and _regular_file_identity(self.hashed.raw) != self._identity
        except OSError as exc:
            raise InputError("cannot read input file %s: %s" % (self.path, exc.strerror or exc))
        if changed:
            raise InputError("input file %s changed while it was evaluated; run again on a "
                             "file that is not being written" % self.path)
        return self.hashed.digest.hexdigest()


def sample_rows(next_cells, line_number, columns, width, first_row=1, limit=None,
                utf8=False):
    """CSV records -> SampleRows numbered from ``first_row``.

    ``next_cells()`` gives the next record (None at the end), ``line_number()``
    the physical line the last one ended on.  A blank line is not a row.
    ``utf8``: the text is known to be valid UTF-8 (no row to check).
    """
    i_id, i_prompt, i_label, i_pred, i_req = columns
    count = first_row - 1
    while limit is None or count < limit:
        start = line_number() + 1
        cells = next_cells()
        if cells is None:
            break
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue   # a blank line is not a row
        count += 1
        problem = None
        if not utf8 and not encodable("".join(cells)):
            problem = ("invalid_encoding", "the row holds bytes that are not UTF-8 text")
        elif len(cells) != width:
            message = "the row has %d cell(s) where the header has %d" % (len(cells), width)
            end = line_number()
            if end > start:
                message += (" (it runs over lines %d-%d: a stray quote may have joined "
                            "rows)" % (start, end))
            problem = ("malformed_row", message)
        if len(cells) < width:
            cells = cells + [""] * (width - len(cells))
        yield SampleRow(count, cells[i_id], cells[i_prompt], cells[i_label],
                        cells[i_pred] if i_pred is not None else None,
                        cells[i_req] if i_req is not None else None,
                        has_prediction=i_pred is not None, problem=problem)


def text_lines(text, any_lone_return=True):
    """The lines of ``text``, each with its line break, as the csv module reads
    them from io.StringIO(text, newline="").  When no line ends with a lone \r
    (``any_lone_return`` False) one split at \n gives the same lines, and the
    csv module reads a list of them faster."""
    if any_lone_return:
        return io.StringIO(text, newline="")
    pieces = text.split("\n")
    last = pieces.pop()
    lines = [piece + "\n" for piece in pieces]
    if last:
        lines.append(last)
    return lines


def parse_chunk(data, first_line, path, columns, width, final, first_row=1):
    """A chunk of the sample file (whole records) -> SampleRows numbered from
    ``first_row``.

    Raises SplitRecord when the chunk does not end at the end of a record
    (unless it is the file's last) and InputError (with the file's line
    numbers) when the csv module rejects it.  Worker processes call this.
    """
    ended = []

    def end_of_chunk():
        ended.append(True)
        return
        yield

    try:
        text, utf8 = data.decode("utf-8"), True
    except UnicodeDecodeError:         # kept as surrogate escapes: those rows are errors
        text, utf8 = data.decode("utf-8", "surrogateescape"), False
    lines = text_lines(text, b"\r" in data and lone_returns(data) > 0)
    reader = csv.reader(itertools.chain(lines, end_of_chunk()))
    base = first_line - 1

    def next_cells():
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise InputError("input file %s line %d is not valid CSV: %s"
                             % (path, base + reader.line_num, exc))
        if ended and cells is not None and not final:
            raise SplitRecord()        # the csv module asked for more: a record runs on
        return cells

    return sample_rows(next_cells, lambda: base + reader.line_num, columns, width, first_row,
                       utf8=utf8)


class RowsSource(object):
    """Sample rows given as dicts (the Python API) instead of a file."""

    def __init__(self, rows, prediction_column, need_req_type=False, sample_count=None):
        self.rows = rows
        self.prediction_column = prediction_column
        self.need_req_type = need_req_type
        self.sample_count = sample_count
        self.warnings = []
        self.missing_columns = []      # a row without a key reads as an empty cell
        self._head = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def fraction_read(self):
        return None

    def column_problem(self, hint=""):
        return ""

    def head(self):
        """The first rows (RowsHead), taken from the rows (an iterator of
        rows is read on from there)."""
        if self._head is None:
            rows = iter(self.rows)
            first = list(itertools.islice(rows, HEAD_ROWS))
            self.rows = itertools.chain(first, rows)
            self._head = RowsHead(first, len(first) < HEAD_ROWS)
        return self._head

    def __iter__(self):
        for number, row in enumerate(self.rows, start=1):
            if self.sample_count is not None and number > self.sample_count:
                break
            if not isinstance(row, dict):
                raise InputError("row %d is %s, expected a dict" % (number, type_name(row)))
            index_id = row.get("index_id", row.get("indexid", ""))
            column = self.prediction_column
            yield SampleRow(number, "" if index_id is None else str(index_id),
                            row.get("sft_prompt"), row.get("sft_label"),
                            row.get(column) if column else None,
                            row.get("req_type") if self.need_req_type else None,
                            has_prediction=column is not None)

    def finish(self):
        return None


class RowsHead(object):
    """The first rows of the Python API's rows, as a FileHead gives a file's."""

    def __init__(self, rows, complete):
        self.empty = complete and not rows
        self.rows = [row for row in rows if isinstance(row, dict)]
        self.complete = complete
        self.header = sorted({key for row in self.rows for key in row if isinstance(key, str)})
        self.undecodable = 0

    def problem(self, path=None):
        return no_rows_problem(None) if self.empty else ""


class PredictionsFile(object):
    """Model outputs keyed by id, from JSON Lines or CSV, read once (hashed while
    read), then joined to the test rows as they stream by.

    Each id's entries are used in file order, results before error lines (a
    generator's failed attempt), so the n-th test row with an id gets that id's
    n-th prediction; what is left over, or missing, is reported.
    """

    def __init__(self, path, entries, sha256):
        self.path = path
        self.sha256 = sha256
        self.read_count = len(entries)
        self.by_id = {}
        for index_id, prediction, line_no, error in entries:
            self.by_id.setdefault(index_id, []).append((error is not None, line_no,
                                                        prediction, error))
        for items in self.by_id.values():
            if len(items) > 1:
                items.sort(key=lambda item: (item[0], item[1]))   # results first, in order
        self.joined = 0
        self.missing = 0
        self.matched = 0               # test rows that found a line (a result or an error)
        self.first_test_id = None
        self.repeated_test_ids = []
        self._seen_test_ids = set()

    @classmethod
    def read(cls, path):
        handle, hashed = _open_hashed_text(path, "predictions file")
        with handle:
            try:
                first = handle.readline()
                while first and not first.strip():
                    first = handle.readline()
                lines = itertools.chain([first], handle)
                if first.lstrip().startswith("{"):
                    entries = _read_predictions_jsonl(lines, path)
                else:
                    entries = _read_predictions_csv(lines, path)
                _drain(handle)
            except UnicodeDecodeError:
                raise InputError("predictions file %s is not UTF-8 text" % path)
            except OSError as exc:
                raise InputError("cannot read predictions file %s: %s"
                                 % (path, exc.strerror or exc))
        return cls(path, entries, hashed.digest.hexdigest())

    def join(self, samples):
        """Attach each test row's prediction (or its absence) as the rows stream by."""
        by_id = self.by_id
        for sample in samples:
            if sample.index_id in self._seen_test_ids:
                if len(self.repeated_test_ids) < 5:
                    self.repeated_test_ids.append(sample.index_id)
                else:
                    self.repeated_test_ids.append(None)
            else:
                self._seen_test_ids.add(sample.index_id)
                if self.first_test_id is None:
                    self.first_test_id = sample.index_id
            items = by_id.get(sample.index_id)
            if items:
                self.matched += 1
                is_error, _, prediction, error = items.pop(0)
                if not items:
                    del by_id[sample.index_id]
                if is_error:
                    sample.has_prediction = False
                    sample.prediction = None
                    sample.generator_error = error
                    self.missing += 1
                else:
                    sample.has_prediction = True
                    sample.prediction = prediction
                    self.joined += 1
            else:
                sample.has_prediction = False
                sample.prediction = None
                self.missing += 1
            yield sample

    def unjoined_problem(self, test_path):
        """Why the predictions cannot belong to the test file -- it holds none,
        or none of its ids is a test row's (another benchmark's answers?) --
        or None (a partial join is only a warning)."""
        if self.first_test_id is None or self.matched:
            return None
        if not self.read_count:
            return "predictions file %s holds no prediction" % self.path
        example = next(iter(self.by_id))
        return ("none of the %d prediction(s) in %s has the id of a row of %s (prediction id "
                "%s, test id %s): are they another benchmark's answers?"
                % (self.read_count, self.path, test_path, quoted(example),
                   quoted(self.first_test_id)))

    def statistics(self):
        """Join statistics: predictions for ids not in the test file, ids given
        more often than the test file has them, test rows without a result."""
        unknown = [i for i in self.by_id if i not in self._seen_test_ids]
        extra = [i for i in self.by_id if i in self._seen_test_ids]
        return {"predictions": self.read_count, "joined": self.joined,
                "missing": self.missing,
                "unknown_ids": sum(len(self.by_id[i]) for i in unknown),
                "unknown_id_examples": unknown[:5],
                "duplicate_ids": sum(len(self.by_id[i]) for i in extra),
                "duplicate_id_examples": extra[:5],
                "repeated_test_ids": len(self.repeated_test_ids),
                "repeated_test_id_examples": [i for i in self.repeated_test_ids if i][:5]}

    def warnings(self):
        stats = self.statistics()
        out = []
        if stats["unknown_ids"]:
            out.append("%d prediction(s) with an id not in the test file, e.g. %s"
                       % (stats["unknown_ids"], ", ".join(stats["unknown_id_examples"])))
        if stats["duplicate_ids"]:
            out.append("%d duplicate prediction(s) left over (an id given more often than the "
                       "test file has it; the first result is used), e.g. %s"
                       % (stats["duplicate_ids"], ", ".join(stats["duplicate_id_examples"])))
        if stats["repeated_test_ids"]:
            out.append("%d test row(s) repeat an earlier row's id; each gets the next "
                       "prediction for that id, e.g. %s"
                       % (stats["repeated_test_ids"],
                          ", ".join(stats["repeated_test_id_examples"])))
        return out


def _read_predictions_jsonl(lines, path):
    entries = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if json_too_deep(line):
            raise InputError("predictions file %s line %d is nested more than %d levels deep"
                             % (path, line_no, MAX_JSON_DEPTH))
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError("predictions file %s line %d is not JSON: %s" % (path, line_no, exc))
        if not isinstance(obj, dict):
            raise InputError("predictions file %s line %d is not a JSON object" % (path, line_no))
        key = next((col for col in ID_COLUMNS if col in obj), None)
        if key is None:
            raise InputError("predictions file %s line %d has no index_id/indexid" % (path, line_no))
        if "generate_results" in obj:
            entries.append((str(obj[key]), obj["generate_results"], line_no, None))
        elif "error" in obj:           # generate.py's line for a row that failed for good
            error = obj["error"]
            entries.append((str(obj[key]), None, line_no,
                            error if isinstance(error, str) else json.dumps(error)))
        else:
            raise InputError("predictions file %s line %d has neither generate_results nor "
                             "error" % (path, line_no))
    return entries


def _read_predictions_csv(lines, path):
    reader = csv.reader(lines)
    try:
        header = [cell.strip() for cell in next(reader, [])]
        id_column = next((col for col in ID_COLUMNS if col in header), None)
        if id_column is None or "generate_results" not in header:
            raise InputError("predictions file %s needs columns index_id (or indexid) and "
                             "generate_results (has: %s)" % (path, ", ".join(header)))
        i_id, i_pred = header.index(id_column), header.index("generate_results")
        entries = []
        for cells in reader:
            if not cells:
                continue
            cells = cells + [""] * (len(header) - len(cells))
            entries.append((cells[i_id], cells[i_pred], reader.line_num, None))
        return entries
    except csv.Error as exc:
        raise InputError("predictions file %s line %d is not valid CSV: %s"
                         % (path, reader.line_num, exc))
