"""What produced a run: the run folder's ``run.json`` and the rules that keep
one run folder from silently replacing another.

``report.json`` holds the figures and is byte-deterministic (the same inputs
give the same bytes); ``run.json`` beside it says who made the run: when,
with which command, project version and Python, and (when the predictions
came from generate.py) the model and the settings that shaped its answers,
copied from the predictions file's settings sidecar (``PATH.settings.json``).

Standard library only; Python 3.8+.
"""

import datetime
import json
import platform
import re
import sys

from common import VERSION, InputError
from transitlm.io.bounded_json import loads_bounded
from transitlm.io.files import RUN_FOLDER_FILES, check_not_held, held_files, settings_path

RUN_SCHEMA = 1
MAX_SETTINGS_BYTES = 1 << 20            # a sidecar larger than this is not read


def read_generation(predictions_path):
    """The settings generate.py recorded for a predictions file -> dict or None
    (no sidecar).  A sidecar that cannot be read as a JSON object is an
    InputError: a run must not silently lose what made its predictions."""
    if not predictions_path or predictions_path == "-":
        return None
    path = settings_path(predictions_path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError("cannot read %s: %s" % (path, exc.strerror or exc))
    if len(data) > MAX_SETTINGS_BYTES:
        raise InputError("%s is larger than %d bytes: not a settings file of generate.py"
                         % (path, MAX_SETTINGS_BYTES))
    try:
        value = loads_bounded(data, strict=True)
    except ValueError as exc:
        raise InputError("%s is not valid JSON: %s (the settings generate.py recorded for %s)"
                         % (path, exc, predictions_path))
    if not isinstance(value, dict):
        raise InputError("%s is not a JSON object (the settings generate.py recorded for %s)"
                         % (path, predictions_path))
    return value


def run_record(report, command, generation=None, now=None):
    """The run.json dict of a run: provenance, not figures."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    inputs = report.get("inputs") or {}
    record = {"run_schema": RUN_SCHEMA,
              "created": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
              "version": VERSION,
              "command": list(command),
              "python": platform.python_version(),
              "benchmark": report.get("benchmark"),
              "protocol": report.get("protocol"),
              "generation": generation,
              # The labels' stations in the station file, and whether the run
              # was scored anyway on another network (transitlm.evaluation.network_check).
              "network_check": inputs.get("network_check")}
    # A test file that looked like another benchmark's, scored anyway
    # (transitlm.evaluation.benchmark_check): only then (a run of a file that fits its
    # evaluator has no such key, here or in report.json).
    if inputs.get("benchmark_check") is not None:
        record["benchmark_check"] = inputs["benchmark_check"]
    return record


def run_json(record):
    """run.json's text: strict JSON (what it copies from a settings file was
    read strictly, so no NaN or Infinity can reach it)."""
    return json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True,
                      allow_nan=False) + "\n"


# The user information of a URL (``http://user:secret@host``): credentials,
# never written to a run folder.
_URL_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")


def command_line(argv=None):
    """The command as typed: the script path as given, then its arguments,
    with the user information of any URL (credentials) redacted."""
    argv = sys.argv if argv is None else argv
    return [without_credentials(str(part)) for part in argv]


def without_credentials(text):
    """``text`` with the user information of any URL in it redacted."""
    return _URL_USERINFO_RE.sub(r"\1<redacted>@", text) if text else text


def held_run_files(folder):
    """The run-folder files ``folder`` already holds (empty when none or no folder)."""
    return held_files(folder, RUN_FOLDER_FILES)


def check_run_folder(folder, overwrite, api=False):
    """InputError when ``folder`` already holds a run and ``overwrite`` is off
    (``api``: the message names the Python API's arguments)."""
    check_not_held(folder, RUN_FOLDER_FILES, overwrite, "a run", folder_what="run folder",
                   overwrite_flag="overwrite=True" if api else "--overwrite",
                   out_flag="out=" if api else "--out")
