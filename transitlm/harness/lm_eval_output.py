"""Reading what one ``lm_eval ... --log_samples --output_path X`` run wrote
(lm-evaluation-harness 0.4.x, ``loggers/evaluation_tracker.py``):

    X/<model>/results_<date>.json              X a folder: one model folder per
    X/<model>/samples_<task>_<date>.jsonl      model name, sanitized (org__name)
    X_<date>.json, samples_<task>_<date>.jsonl X a .json file: beside it

``<date>`` is the run's start, ``datetime.now().isoformat()`` with ``:`` as
``-``: it ties a results file to its samples files.  ``find_run`` takes X,
the model folder or the results file; ``read_results`` reads the results
JSON (within a size limit); ``read_samples`` indexes a task's samples file
line by line -- each line's ``doc_id``, ``doc`` (the row as the task folder
holds it) and ``resps`` (the answer) checked -- keeping only where each
line is, so memory stays bounded whatever the file holds.  ``model_record``
is the model as the harness ran it, with every credential left out.

Anything wrong is an InputError (one line, exit status 2).

Standard library only; Python 3.8+.
"""

import os
import re

from common import InputError, type_name
from transitlm.io.bounded_json import loads_bounded
from transitlm.evaluation.provenance import without_credentials

MAX_RESULTS_BYTES = 64 * 1024 * 1024     # a results JSON of hundreds of tasks is a few MB
MAX_RESULTS_VALUES = 5000000
MAX_SAMPLE_LINE_BYTES = 64 * 1024 * 1024  # a line: the row, the prompt, one answer
DATE_RE = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.json$")
# model_args keys that hold a credential: never written to a run folder.
SECRET_KEY_RE = re.compile(r"(?i)(key|token|secret|password|passwd|auth|credential|cookie)")
# The query of a URL (``?api-key=...``): may hold a credential too.
_URL_QUERY_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^?#\s]*)[?#]\S*")


def _safe_value(value):
    """A model argument as recorded: a URL without user information or query."""
    if not isinstance(value, str):
        return value
    return _URL_QUERY_RE.sub(r"\1?<redacted>", without_credentials(value))


class HarnessRun(object):
    """One harness run: its results file and the samples file of each task."""

    def __init__(self, results_path):
        self.results_path = results_path
        self.folder = os.path.dirname(results_path)
        self.date = DATE_RE.search(os.path.basename(results_path)).group(1)

    def samples_path(self, task):
        """The samples file of ``task``, or None when the run logged none."""
        path = os.path.join(self.folder, "samples_%s_%s.jsonl" % (task, self.date))
        return path if os.path.isfile(path) else None


def _results_files(folder):
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise InputError("cannot read %s: %s" % (folder, exc.strerror or exc))
    return [os.path.join(folder, name) for name in names
            if name.endswith(".json") and DATE_RE.search(name)
            and not name.startswith("samples_")
            and os.path.isfile(os.path.join(folder, name))]


def _dated_beside(path):
    """The results files the harness wrote for ``--output_path X.json``:
    X_<date>.json beside it."""
    folder = os.path.dirname(path) or os.curdir
    if not path.endswith(".json") or not os.path.isdir(folder):
        return []
    stem = os.path.basename(path)[:-len(".json")]
    return [item for item in _results_files(folder)
            if os.path.basename(item)[:-len(".json")].rsplit("_", 1)[0] == stem]


def find_run(path):
    """The harness run at ``path`` -- the --output_path folder, the model
    folder in it, or a results file (or ``X.json`` as --output_path named
    it) -> HarnessRun.  InputError when there is
    none, or several (the same --output_path used for several models or runs)."""
    usage = ("give the --output_path of an `lm_eval ... --log_samples` run, the model folder "
             "in it, or its results_<date>.json")
    if os.path.isfile(path):
        if not DATE_RE.search(os.path.basename(path)):
            raise InputError("%s is not a results file of lm-evaluation-harness (results_"
                             "<date>.json): %s" % (path, usage))
        return HarnessRun(os.path.abspath(path))
    if not os.path.isdir(path):
        beside = _dated_beside(path)
        if len(beside) == 1:
            return HarnessRun(os.path.abspath(beside[0]))
        if len(beside) > 1:
            raise InputError("%s holds %d harness runs (%s, ...): give one results file"
                             % (path, len(beside), os.path.basename(beside[0])))
        raise InputError("%s: no such file or folder (%s)" % (path, usage))
    found = _results_files(path)
    if not found:
        try:
            subfolders = sorted(name for name in os.listdir(path)
                                if os.path.isdir(os.path.join(path, name)))
        except OSError as exc:
            raise InputError("cannot read %s: %s" % (path, exc.strerror or exc))
        for name in subfolders:
            found.extend(_results_files(os.path.join(path, name)))
    if not found:
        raise InputError("%s holds no lm-evaluation-harness results (results_<date>.json): %s"
                         % (path, usage))
    if len(found) > 1:
        shown = ", ".join(os.path.relpath(item, path) for item in found[:4])
        raise InputError("%s holds %d harness runs (%s%s): give one results file"
                         % (path, len(found), shown, ", ..." if len(found) > 4 else ""))
    return HarnessRun(os.path.abspath(found[0]))


def read_results(path):
    """The results JSON of a run -> dict; InputError for anything else."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_RESULTS_BYTES + 1)
    except OSError as exc:
        raise InputError("cannot read %s: %s" % (path, exc.strerror or exc))
    if len(data) > MAX_RESULTS_BYTES:
        raise InputError("%s is larger than %d bytes: not a results file of "
                         "lm-evaluation-harness" % (path, MAX_RESULTS_BYTES))
    try:
        value = loads_bounded(data.decode("utf-8"), max_values=MAX_RESULTS_VALUES)
    except UnicodeDecodeError:
        raise InputError("%s is not UTF-8 text" % path)
    except ValueError as exc:
        raise InputError("%s is not JSON: %s" % (path, exc))
    if not isinstance(value, dict) or not isinstance(value.get("configs"), dict) \
            or not isinstance(value.get("results"), dict):
        raise InputError("%s is not a results file of lm-evaluation-harness (no results "
                         "and configs objects)" % path)
    return value


class Samples(object):
    """A task's samples file, indexed: ``lines[doc_id]`` is (byte offset,
    length) of the doc's line; ``docs`` the number of lines."""

    def __init__(self, path, lines):
        self.path = path
        self.lines = lines


def _decode(data, path, where):
    try:
        value = loads_bounded(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("samples file %s line %s is not UTF-8 text" % (path, where))
    except ValueError as exc:
        raise InputError("samples file %s line %s is not JSON: %s" % (path, where, exc))
    if not isinstance(value, dict):
        raise InputError("samples file %s line %s is %s, expected an object"
                         % (path, where, type_name(value)))
    return value


def sample_problem(sample):
    """What is wrong with one logged sample for an import, or None."""
    doc_id, doc, resps = sample.get("doc_id"), sample.get("doc"), sample.get("resps")
    if doc_id.__class__ is not int or doc_id < 0:
        return "doc_id is %s, expected a row number from 0" % type_name(doc_id)
    if not isinstance(doc, dict):
        return "doc is %s, expected the row" % type_name(doc)
    if not (isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list)):
        return "resps is not one request's answers (a list of one list)"
    if len(resps[0]) != 1:
        return ("resps holds %d answers for the row, expected one (the TransitLM tasks ask "
                "once: repeats 1)" % len(resps[0]))
    if not isinstance(resps[0][0], str):
        return "the answer (resps) is %s, expected text" % type_name(resps[0][0])
    return None


def read_samples(path, check):
    """Index a task's samples file -> Samples.  ``check(doc_id, doc)``
    returns what is wrong with a row (another file's row), or None; every
    problem names the file and line (InputError)."""
    lines = {}
    offset = 0
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(
                    MAX_SAMPLE_LINE_BYTES + 1), b""), 1):
                if len(line) > MAX_SAMPLE_LINE_BYTES:
                    raise InputError("samples file %s line %d is longer than %d bytes"
                                     % (path, number, MAX_SAMPLE_LINE_BYTES))
                if line.strip():
                    sample = _decode(line, path, number)
                    problem = sample_problem(sample) or check(sample["doc_id"], sample["doc"])
                    if problem is None and sample["doc_id"] in lines:
                        problem = "doc_id %d is logged twice" % sample["doc_id"]
                    if problem:
                        raise InputError("samples file %s line %d: %s" % (path, number, problem))
                    lines[sample["doc_id"]] = (offset, len(line))
                offset += len(line)
    except OSError as exc:
        raise InputError("cannot read samples file %s: %s" % (path, exc.strerror or exc))
    return Samples(path, lines)


def _model_args(value):
    """model_args as a dict: the harness records a dict, or the command
    line's ``a=b,c=d`` text (older releases)."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        pairs = [part.split("=", 1) for part in value.split(",") if part.strip()]
        return {pair[0].strip(): pair[1] if len(pair) > 1 else True for pair in pairs}
    return {}


def model_record(results):
    """The model as the harness ran it: its type, its arguments (every key,
    token, secret or password left out, a URL's user information redacted),
    the harness's version and git hash."""
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    args = _model_args(config.get("model_args"))
    removed = sorted(key for key in args if SECRET_KEY_RE.search(str(key)))
    kept = {key: _safe_value(value) for key, value in args.items() if key not in removed}
    name = results.get("model_name")
    if not isinstance(name, str) or not name.strip():
        name = kept.get("model") or kept.get("pretrained") or config.get("model")
    return {"model": name if isinstance(name, str) else None,
            "model_type": config.get("model"),
            "model_args": kept, "model_args_removed": removed,
            "lm_eval_version": results.get("lm_eval_version"),
            "git_hash": results.get("git_hash"),
            "gen_kwargs": config.get("gen_kwargs"),
            "limit": config.get("limit")}
