"""What generate.py may do with its --out: resume it, refuse it, start it over,
and undo what a run that stops before any answer created.

- An output holding answers is resumed only when its settings sidecar
  (transitlm.generate.settings) records the same settings as this
  command; otherwise the run stops before touching anything, naming what
  differs.  An output holding answers but no sidecar (made by generate.py
  before 1.2.0, or by hand) is refused with a clear message: ``--adopt``
  records this command's settings for it, ``--restart`` discards it.
- ``--restart`` removes --out and its sidecar (those two files only) before
  the first request, whatever --out held.
- After a run that wrote lines, the sidecar is written again with what the
  output holds (``record_output``).
- --out's missing parent folders are created.
- A run that stops (fatal answer, signal, error) before writing any line
  removes what it created: the output file, the sidecar (or puts back the
  bytes of one it replaced), the folders.  A file it did not create is left
  as it was.

Standard library only; Python 3.8+.
"""

import os

from common import InputError
from transitlm.generate.settings import (SettingsFileError, differences, read_settings,
                                           write_settings)
from transitlm.io.files import (make_folders, named_descriptor, overwrite_problem, remove_folders,
                             settings_path)
from transitlm.generate.runner import OutputState, UsageError, read_output_state


def check_paths(out, inputs, run_dir=None):
    """No output may overwrite an input: --out, its sidecar and the --evaluate
    run folder against every input file (``inputs``: (flag, path) pairs, path
    None when not given); --out must be a regular file or not exist yet."""
    outputs = [("--out", out), ("the settings file of --out", settings_path(out))]
    if run_dir is not None:
        outputs.append(("the --evaluate run folder", run_dir))
    problem = overwrite_problem(outputs, [("the %s file" % flag, source)
                                          for flag, source in inputs])
    if problem:
        raise UsageError(problem)
    if run_dir is not None and os.path.abspath(run_dir) in (
            os.path.abspath(out), os.path.abspath(settings_path(out))):
        raise UsageError("--eval_out %s is --out or its settings file" % run_dir)
    if os.path.isdir(out):
        raise UsageError("--out %s is a folder" % out)
    if (os.path.exists(out) and not os.path.isfile(out)) or named_descriptor(out) is not None:
        raise UsageError("--out %s is not a regular file (it is read back to resume)" % out)
    if os.path.isdir(settings_path(out)):
        raise UsageError("%s is a folder" % settings_path(out))
    if os.path.exists(settings_path(out)) and not os.path.isfile(settings_path(out)):
        raise UsageError("%s is not a regular file (it is read back to resume)"
                         % settings_path(out))
    folder = os.path.dirname(os.path.abspath(out))
    while not os.path.isdir(folder):
        if os.path.lexists(folder):
            raise UsageError("cannot create the folder of --out: %s is not a folder" % folder)
        folder = os.path.dirname(folder)


class OutputGuard(object):
    """The decisions and the undoing for one run's --out.

    ``check()`` reads only (it is all a --dry_run does) and returns the
    OutputState to resume from; ``prepare()`` makes the changes;
    ``undo_if_empty(lines_written)`` after a run that did not complete."""

    def __init__(self, out, record, restart=False, adopt=False):
        self.out = out
        self.record = record
        self.restart = restart
        self.adopt = adopt
        self.write_sidecar = False
        self.previous_sidecar = None     # bytes of a sidecar this run replaces
        self.out_existed = True
        self.sidecar_written = False
        self.created_folders = []

    def check(self):
        """-> OutputState; UsageError (nothing touched) when the output cannot be
        continued with these settings."""
        sidecar = settings_path(self.out)
        if self.restart:
            self.write_sidecar = True
            return OutputState()
        state = read_output_state(self.out)
        try:
            recorded, data = read_settings(self.out)
        except SettingsFileError as exc:
            raise UsageError("%s; run with --restart to discard %s and start over, or choose "
                             "another --out" % (exc, self.out))
        has_lines = state.lines > 0 or state.partial_bytes > 0
        if not has_lines:
            # Nothing answered yet: a sidecar here describes no answer; replaced.
            self.write_sidecar = True
            self.previous_sidecar = data
            return state
        if recorded is None:
            if self.adopt:
                self.write_sidecar = True
                return state
            raise UsageError(
                "--out %s holds %d line%s but no settings file (%s): it was made by "
                "generate.py before 1.2.0 or by hand, so the settings of its answers are "
                "unknown; run with --adopt to record this command's settings for it and "
                "continue, or --restart to discard it and start over"
                % (self.out, state.lines, "" if state.lines == 1 else "s", sidecar))
        found = differences(recorded, self.record)
        if found:
            raise UsageError(
                "--out %s was made with other settings (%s): %s; run with --restart to "
                "discard it and start over, or choose another --out"
                % (self.out, sidecar, "; ".join(found)))
        return state

    def prepare(self):
        """Remove the old output on --restart, create the folders, write the
        sidecar (before the first line, so a killed run's lines have theirs)."""
        if self.restart:
            for path in (self.out, settings_path(self.out)):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise UsageError("--restart: cannot remove %s: %s"
                                     % (path, exc.strerror or exc))
        self._make_folders(os.path.dirname(os.path.abspath(self.out)))
        self.out_existed = os.path.exists(self.out)
        if self.write_sidecar:
            try:
                write_settings(self.out, self.record)
            except InputError as exc:
                raise UsageError(str(exc))
            self.sidecar_written = True

    def record_output(self, output):
        """Write the sidecar again with what the output now holds (a dict)."""
        try:
            write_settings(self.out, self.record, output)
        except InputError as exc:
            raise UsageError(str(exc))

    def _make_folders(self, folder):
        try:
            make_folders(folder, self.created_folders, what="the folder of --out")
        except InputError as exc:
            raise UsageError(str(exc))

    def undo_if_empty(self, lines_written):
        """After a run that stopped before completing: when it wrote no line,
        remove what it created (and put back a sidecar it replaced); a run with
        lines keeps them, to be resumed."""
        if lines_written:
            return
        if not self.out_existed:
            try:
                if os.path.getsize(self.out) == 0:
                    os.unlink(self.out)
            except OSError:
                pass
        if self.sidecar_written:
            sidecar = settings_path(self.out)
            try:
                if self.previous_sidecar is not None:
                    with open(sidecar, "wb") as handle:
                        handle.write(self.previous_sidecar)
                else:
                    os.unlink(sidecar)
            except OSError:
                pass
        remove_folders(self.created_folders)
