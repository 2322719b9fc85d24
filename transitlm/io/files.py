"""The files the tools write: the run folder's names, and the one rule every
output follows -- written whole or not at all, never over an input.

An ``OutputFile`` is written to a temporary file beside its path and renamed
over it when the run succeeds (``commit``), so a failed or interrupted run
leaves the old file or none, never half a file, and a link planted under the
output's name is replaced, not written through.  A stream -- an existing
character device such as /dev/null, a FIFO, or a descriptor named as
/dev/stdout, /dev/stderr or /dev/fd/N -- is never replaced: it is written
through as the run goes (no temporary file; what was sent before a failure
stays sent).  Any other existing target that is not a regular file (a
folder, a block device, a socket) is refused.  ``Outputs`` commits several
together, after the last one is complete.  ``overwrite_problem`` refuses an
output that names one of the run's inputs, however the path is spelled (a
symbolic link, a hard link, ``./``), and an output that cannot be written.
``check_not_held`` refuses a folder that already holds a tool's files unless
it is told to overwrite them (the evaluators' and the data tools'
``--overwrite``).  ``make_folders``/``remove_folders``
create an output's missing folders and take them away again when the run
does not succeed.

Used by the evaluators and the Python API, compare.py, generate.py and the
data tools.

Standard library only; Python 3.8+.
"""

import csv
import os
import re
import stat
import sys
import tempfile

from common import InputError
from transitlm.io.exit_status import signals_held

# The files of a run folder (an evaluator's --out), in the order they are listed.
REPORT_JSON = "report.json"
DETAILS_JSONL = "details.jsonl"
REPORT_TXT = "report.txt"
REPORT_HTML = "report.html"
RUN_JSON = "run.json"
RUN_FOLDER_FILES = (REPORT_JSON, DETAILS_JSONL, REPORT_TXT, REPORT_HTML, RUN_JSON)

# generate.py's record of what shaped a predictions file: PATH.settings.json.
SETTINGS_SUFFIX = ".settings.json"

TEMP_PREFIX = ".transitlm-"


def settings_path(predictions_path):
    """The settings sidecar of a predictions file."""
    return predictions_path + SETTINGS_SUFFIX


def _problem(path, exc):
    return "cannot write %s: %s" % (path, getattr(exc, "strerror", None) or exc)


# A descriptor named as a file: written through that descriptor, whatever it is.
_DESCRIPTOR_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
_DESCRIPTOR_PATH = re.compile(r"^/(?:dev|proc/self)/fd/([0-9]{1,9})$")

# File types an output is written through, and those it refuses.
_STREAM_TYPES = (stat.S_ISCHR, stat.S_ISFIFO)
_REFUSED_TYPES = (("a folder", stat.S_ISDIR), ("a block device", stat.S_ISBLK),
                  ("a socket", stat.S_ISSOCK))


def named_descriptor(path):
    """The descriptor that /dev/stdout, /dev/stderr, /dev/fd/N or
    /proc/self/fd/N names, or None."""
    if path in _DESCRIPTOR_NAMES:
        return _DESCRIPTOR_NAMES[path]
    match = _DESCRIPTOR_PATH.match(path or "")
    return int(match.group(1)) if match else None


def _trusted_link(path):
    """A link the output may follow: not a link, or one owned by this user or
    root (as the kernel's protected_symlinks rule would have it).  A link
    someone else planted is replaced, never written through."""
    try:
        status = os.lstat(path)
    except OSError:
        return True
    return not stat.S_ISLNK(status.st_mode) or status.st_uid in (0, os.geteuid())


def is_stream(path):
    """Is ``path`` an output written through rather than replaced: a named
    descriptor (/dev/stdout ...), or an existing character device or FIFO
    (through links this user or root owns)?"""
    if named_descriptor(path) is not None:
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return any(test(mode) for test in _STREAM_TYPES) and _trusted_link(path)


def unwritable_reason(path):
    """Why ``path`` cannot be an output -- it exists and is a folder, a block
    device, a socket or another file that is neither regular nor a stream --
    or None."""
    if not path or is_stream(path):
        return None
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None                    # new, or a link to be replaced
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(os.lstat(path).st_mode) and not _trusted_link(path):
        return None                    # a planted link: replaced, not followed
    what = next((name for name, test in _REFUSED_TYPES if test(mode)),
                "neither a regular file, a character device nor a FIFO")
    return "%s is %s: an output is a file, a device such as /dev/null or a pipe" % (path, what)


class _Transaction(object):
    """As a context manager: commit() when the block ends normally, discard()
    when it raises."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.commit()
        else:
            self.discard()
        return False


class OutputFile(_Transaction):
    """A file written through a temporary name beside it and renamed over
    ``path`` on ``commit()``; ``discard()`` removes the temporary file.

    Text is UTF-8 with ``\\n`` line ends unless ``newline`` says otherwise;
    ``errors="backslashreplace"`` writes a lone surrogate as its escape.  The
    file gets mode 0644, or with ``keep_mode`` the mode of the file it
    replaces; ``durable`` syncs it to disk before the rename.  Every failure
    is an InputError naming the path.  As a context manager it commits when
    the block ends normally and discards otherwise.
    """

    def __init__(self, path, binary=False, errors="strict", newline="\n", keep_mode=False,
                 durable=False):
        self.path = path
        self.keep_mode = keep_mode
        self.durable = durable
        self.temp = None               # a stream is written through, without one
        self.streamed = is_stream(path)
        if self.streamed:
            handle = _open_stream(path)
        else:
            reason = unwritable_reason(path)
            if reason:
                raise InputError("cannot write %s" % reason)
            folder = os.path.dirname(os.path.abspath(path))
            try:
                handle, self.temp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp",
                                                     dir=folder)
            except OSError as exc:
                raise InputError(_problem(path, exc))
        self.handle = os.fdopen(handle, "wb" if binary else "w",
                                **({} if binary else {"encoding": "utf-8", "errors": errors,
                                                      "newline": newline}))

    def write(self, data):
        try:
            self.handle.write(data)
            if self.streamed:          # sent as written: a reader sees it now, and a
                self.handle.flush()    # stream shared with stdout keeps its order
        except OSError as exc:
            raise InputError(_problem(self.path, exc))

    def commit(self):
        if self.streamed:
            try:
                self.handle.close()
            except OSError as exc:
                self.discard()
                raise InputError(_problem(self.path, exc))
            return
        try:
            if self.durable:
                self.handle.flush()
                os.fsync(self.handle.fileno())
            self.handle.close()
            mode = 0o644
            if self.keep_mode:
                try:
                    mode = os.stat(self.path).st_mode & 0o7777
                except OSError:
                    pass
            os.chmod(self.temp, mode)
            os.replace(self.temp, self.path)
        except OSError as exc:
            self.discard()
            raise InputError(_problem(self.path, exc))

    def discard(self):
        try:
            self.handle.close()
        except (OSError, ValueError):
            pass
        if self.temp is None:
            return
        try:
            os.remove(self.temp)
        except OSError:
            pass


def _open_stream(path):
    """A descriptor open for writing on the stream ``path`` (a FIFO waits for
    its reader here, as a shell's redirection would); it is checked once open,
    so a path swapped for a regular file meanwhile is refused, not written."""
    number = named_descriptor(path)
    try:
        if number is not None:
            for stream in (sys.stdout, sys.stderr):   # what was printed comes first
                if stream is not None:
                    stream.flush()
            return os.dup(number)
        handle = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(_problem(path, exc))
    mode = os.fstat(handle).st_mode
    if not any(test(mode) for test in _STREAM_TYPES):
        os.close(handle)
        raise InputError("cannot write %s: it changed while it was opened" % path)
    return handle


class Outputs(_Transaction):
    """The outputs of one run: each written through its own OutputFile, all
    renamed into place together by ``commit()`` once every one is complete,
    with the folders the run made (``make_folders``); ``discard()`` removes
    every file and folder the run began.  A context manager, like OutputFile.

    ``commit()`` is the end of a successful run: it holds SIGINT and SIGTERM
    while the files are renamed, and drops one that arrives meanwhile (the
    run has finished), so a run stopped at any instant leaves either none of
    its outputs or all of them.
    """

    def __init__(self):
        self.files = []
        self.created = []              # folders this run made, deepest last

    def make_folders(self, path, what="output folder"):
        """Create ``path`` (and missing parents), to be removed again by discard()."""
        make_folders(path, self.created, what)

    def open(self, path, **options):
        if is_stream(path):            # a FIFO's open waits for a reader: Ctrl-C still works
            handle = OutputFile(path, **options)
            self.files.append(handle)
            return handle
        with signals_held():           # made and recorded, or neither
            handle = OutputFile(path, **options)
            self.files.append(handle)
        return handle

    def write(self, path, data, **options):
        self.open(path, **options).write(data)

    def commit(self):
        with signals_held(drop=True):
            files, self.files = self.files, []
            try:
                for index, handle in enumerate(files):
                    handle.commit()
            except BaseException:
                for handle in files[index + 1:]:
                    handle.discard()
                raise
            del self.created[:]

    def discard(self):
        files, self.files = self.files, []
        for handle in files:
            handle.discard()
        remove_folders(self.created)


def write_csv(handle, header, rows):
    """A CSV table into an open output (opened with ``newline=""``): csv's
    default dialect, lines ending in \\r\\n like the released files."""
    writer = csv.writer(handle)
    writer.writerow(header)
    writer.writerows(rows)


def write_whole(path, data, **options):
    """Write one output whole (see OutputFile)."""
    with OutputFile(path, **options) as handle:
        handle.write(data)


def same_file(first, second):
    """Do two paths name one file: the same path once links are resolved, or
    one file under two names (a hard link)?"""
    try:
        if os.path.realpath(first) == os.path.realpath(second):
            return True
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False


def overwrite_problem(outputs, inputs):
    """Why an output may not be written -- it names one of the inputs, or the
    same file as another output -- or None.  A stream (a character device, a
    FIFO, /dev/stdout) replaces no file: it is written through, and never
    clashes.  (Whether each output can be written at all: ``unwritable_problem``.)

    ``outputs`` and ``inputs`` are (what, path) pairs, ``what`` as a message
    names the file ("--json", "the station file"; empty: the path alone); a
    path None is left out.
    """
    outputs = [(what, path) for what, path in outputs if path]
    inputs = [(what, path) for what, path in inputs if path]
    outputs = [(what, path) for what, path in outputs if not _streamed_device(path)]
    for index, (what, path) in enumerate(outputs):
        for source_what, source in inputs:
            if same_file(path, source):
                return "%s would overwrite %s: an output never replaces an input" % (
                    _named(what, path), _named(source_what, source))
        for other_what, other in outputs[:index]:
            if same_file(path, other):
                return "%s and %s would both be written to %s" % (other_what or other,
                                                                 what or path, path)
    return None


def unwritable_problem(outputs):
    """The first output file, of (what, path) pairs, that exists and can be
    neither replaced nor written through (``unwritable_reason``), as a line
    naming it; or None."""
    for what, path in outputs:
        reason = unwritable_reason(path)
        if reason:
            return "%s%s" % (what + " " if what else "", reason)
    return None


def _streamed_device(path):
    """A stream that is a device or a FIFO (not a descriptor on a regular
    file: ``--json /dev/stdout >> input.csv`` still clashes)."""
    if not is_stream(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return True
    return any(test(mode) for test in _STREAM_TYPES)


def _named(what, path):
    return "%s %s" % (what, path) if what else path


def held_files(folder, names):
    """The files of ``names`` that ``folder`` already holds, in the order of
    ``names`` (empty when none, or when there is no such folder).  A stream
    (a device such as /dev/null, a FIFO) under one of the names is not held:
    it is written through, and nothing is replaced."""
    try:
        present = set(os.listdir(folder))
    except (OSError, ValueError):
        return []
    return [name for name in names
            if name in present and not is_stream(os.path.join(folder, name))]


def check_not_held(folder, names, overwrite, holds, folder_what="--out",
                   overwrite_flag="--overwrite", out_flag="--out"):
    """InputError (one line) when ``folder`` already holds one of the files
    ``names`` a tool is about to write and ``overwrite`` is off: a run never
    replaces what an earlier one wrote unless asked to.  ``holds`` names what
    those files are ("a run", "a network"); ``folder_what`` how the message
    introduces the folder; the flags are those the message suggests."""
    held = held_files(folder, names)
    if held and not overwrite:
        raise InputError("%s %s already holds %s (%s); pass %s to replace it, or choose "
                         "another %s" % (folder_what, folder, holds, ", ".join(held),
                                         overwrite_flag, out_flag))


def make_folders(path, created, what="run folder"):
    """os.makedirs that appends each folder it creates to ``created`` as soon as
    it exists, deepest last (so a run that fails or is interrupted, even
    half-way through this call, can remove exactly those and nothing it did
    not create).  ``what`` names the folder in an InputError."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        if os.path.lexists(path):
            raise InputError("cannot create %s %s: a file of that name exists" % (what, path))
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        with signals_held():          # made and recorded, or neither
            try:
                os.mkdir(folder)
            except FileExistsError:
                continue
            except OSError as exc:
                raise InputError("cannot create %s %s: %s" % (what, folder, exc.strerror or exc))
            created.append(folder)


def remove_folders(created):
    """Remove folders make_folders created, deepest first, where they are empty;
    forget them."""
    while created:
        folder = created.pop()
        try:
            os.rmdir(folder)
        except OSError:
            pass
