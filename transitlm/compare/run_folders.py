"""Reading compare.py's inputs: run folders (report.json, details.jsonl and,
when present, run.json) or a details file with its report beside it.  Every
field compare reads is checked by type and range; a run's rows are keyed for
pairing by (index_id, occurrence).

Anything wrong with a file is a CompareError naming the file (and line): one
line on stderr, exit status 2.  Memory stays bounded whatever a file holds: a
details line is read up to MAX_LINE_CHARS, report.json and run.json up to
their size limits, and only the fields compare reads are kept of each line.

Standard library only; Python 3.8+.
"""

import json
import os
import sys

import common
from transitlm.evaluation.catalog import BENCHMARK_NAMES
from transitlm.io.files import DETAILS_JSONL, REPORT_JSON, RUN_FOLDER_FILES, RUN_JSON

STATUSES = ("evaluated", "error", "no_response")
SCORE_BANDS = ("worse", "better", "same")
ROUTE_KEYS = common.ROUTE_KEYS

# Size limits: no real file comes near them (a details line is a few KB).
MAX_LINE_CHARS = 16 * 1024 * 1024
MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_RUN_JSON_BYTES = 1024 * 1024
MAX_SIGNATURE_CHARS = 4096
MAX_MODEL_CHARS = 256
# The largest magnitude accepted for a figure (scores, MAPE percentages): a
# real one is far smaller; a larger one (a 400-digit integer) is damage and
# would overflow a float sum.
FIGURE_LIMIT = 1e15
MAX_ROUTE_COUNT = 1000
MAX_SAMPLES = 10 ** 12

# Keys a details line must hold: always, on reachable funnel rows, on exact
# matches, and per scenario on evaluated rows.
ROW_KEYS = ("index_id", "status", "in_funnel")
REACHABLE_KEYS = ("station_grounding", "distance_plausibility", "line_iou", "station_iou",
                  "station_iou_exact", "exact_match", "score", "label_score",
                  "score_deviation_pct", "score_band")
EXACT_KEYS = ("distance_accurate", "time_accurate", "fare_accurate", "transfer_accurate",
              "overall_accurate", "distance_mape_pct", "time_mape_pct", "fare_mape_pct")
SCENARIO_KEYS = {"personalized": ("compliant", "label_compliant"),
                 "diversity": ("routes", "rd", "route_count", "rd_label", "label_route_count",
                               "all_routes_reachable", "label_first_score", "best_match")}

# What each field compare reads may hold (checked wherever the key is present).
BOOL_KEYS = ("in_funnel", "reachable", "station_grounding", "distance_plausibility",
             "station_iou_exact", "exact_match", "distance_accurate", "time_accurate",
             "fare_accurate", "transfer_accurate", "overall_accurate", "compliant",
             "label_compliant", "all_routes_reachable")
# number or null, in [low, high]
NUMBER_KEYS = (("line_iou", 0.0, 1.0), ("station_iou", 0.0, 1.0), ("rd", 0.0, 1.0),
               ("rd_label", 0.0, 1.0),
               ("score", -FIGURE_LIMIT, FIGURE_LIMIT),
               ("label_score", -FIGURE_LIMIT, FIGURE_LIMIT),
               ("score_deviation_pct", -FIGURE_LIMIT, FIGURE_LIMIT),
               ("label_first_score", -FIGURE_LIMIT, FIGURE_LIMIT),
               ("distance_mape_pct", 0.0, FIGURE_LIMIT), ("time_mape_pct", 0.0, FIGURE_LIMIT),
               ("fare_mape_pct", 0.0, FIGURE_LIMIT))
COUNT_KEYS = ("route_count", "label_route_count")
# Kept of each details line (what the aggregation, the terms and the breakdowns read).
KEPT_KEYS = frozenset(ROW_KEYS + REACHABLE_KEYS + EXACT_KEYS + BOOL_KEYS + COUNT_KEYS
                      + tuple(key for key, _, _ in NUMBER_KEYS)
                      + ("row", "city", "failure_codes", "req_type", "routes", "best_match"))

# Figures of report.json "metrics": fractions 0..1 except MAPE (percent).
FRACTION_METRICS = ("conn", "sg", "dp", "lo", "sso", "rem", "ea", "pc", "rd")
HASH_KEYS = ("input", "station_info", "line_info", "predictions")
_HEX = frozenset("0123456789abcdef")


class CompareError(Exception):
    """A usage or input problem: one line on stderr, exit status 2."""


# ---------------------------------------------------------------------------
# Messages and JSON
# ---------------------------------------------------------------------------

def shown(value, limit=40):
    """A JSON value in a message, cut to about `limit` characters: text and
    numbers as JSON, containers by their kind."""
    if isinstance(value, (list, dict)):
        return common.type_name(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** limit:
        return "a %d-digit number" % len(str(abs(value)))
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _not_a_number(name):
    raise ValueError("%s is not a JSON number" % name)


def _bounded_int(text):
    # Pythons without the int-to-text digit limit (before 3.8.14) would
    # convert a megabyte-long number quadratically.
    if len(text) > 4300:
        raise ValueError("a %d-digit number" % len(text))
    return int(text)


if hasattr(sys, "get_int_max_str_digits"):
    _DECODER = json.JSONDecoder(parse_constant=_not_a_number)
else:  # pragma: no cover (old Python)
    _DECODER = json.JSONDecoder(parse_constant=_not_a_number, parse_int=_bounded_int)


def decode_json(text):
    """JSON text -> value (NaN and Infinity refused); ValueError or RecursionError."""
    return _DECODER.decode(text)


def read_json_file(path, limit, what):
    """A JSON object from a file of at most `limit` bytes; CompareError otherwise."""
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise CompareError("%s: %s is %d bytes, more than the %d a %s may have"
                               % (path, what, size, limit, what))
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise CompareError("%s: cannot read (%s)" % (path, exc.strerror or exc))
    try:
        value = decode_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CompareError("%s: not UTF-8 text" % path)
    except (ValueError, RecursionError) as exc:
        raise CompareError("%s: not a JSON %s (%s)" % (path, what, shown(str(exc), 80)))
    if not isinstance(value, dict):
        raise CompareError("%s: not a JSON %s (expected an object, got %s)"
                           % (path, what, common.type_name(value)))
    return value


def number_problem(name, value, low, high, nullable=True):
    """Why a figure is not a number in [low, high] (or null), or None."""
    if value is None:
        return None if nullable else "%s is null, expected a number" % name
    kind = value.__class__
    if kind is float or kind is int:
        if low <= value <= high:
            return None
        return "%s is %s, out of range (expected %g to %g)" % (name, shown(value), low, high)
    return "%s is %s, expected a number%s" % (name, common.type_name(value),
                                             " or null" if nullable else "")


# ---------------------------------------------------------------------------
# Run folders
# ---------------------------------------------------------------------------

class Run(object):
    """One evaluation run: its report, its details records and their keys.

    ``name`` is set by the command line (--names, the recorded model or the
    folder name); ``model`` is the model run.json records, or None.
    """

    def __init__(self, path, report_path, details_path, run_json_path, report, records,
                 model=None, name=None):
        self.name = name
        self.name_from = None           # "names", "model" or "folder" (run_groups)
        self.path = path
        self.report_path = report_path
        self.details_path = details_path
        self.run_json_path = run_json_path
        self.report = report
        self.records = records
        self.model = model
        self.keys = occurrence_keys(records)
        self.by_key = dict(zip(self.keys, records))

    @property
    def benchmark(self):
        return self.report["benchmark"]

    @property
    def protocol(self):
        return self.report["protocol"]

    @property
    def hashes(self):
        """{input, station_info, line_info, predictions: hex or None}, or None
        when the report records no inputs.sha256."""
        sha = (self.report.get("inputs") or {}).get("sha256")
        if sha is None:
            return None
        return {key: sha.get(key) for key in HASH_KEYS}

    @property
    def input_files(self):
        return [p for p in (self.report_path, self.details_path, self.run_json_path) if p]


def report_beside(details_path):
    """The report JSON next to a details file: NAME.json for NAME.jsonl, the
    name with "details" replaced by "report", else report.json in its folder
    (the first that exists)."""
    folder, base = os.path.split(details_path)
    stem = base[:-len(".jsonl")] if base.endswith(".jsonl") else os.path.splitext(base)[0]
    candidates = [stem + ".json"]
    if "details" in base:
        candidates.append(stem.replace("details", "report") + ".json")
    candidates.append(REPORT_JSON)
    for name in candidates:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.path.abspath(path) != os.path.abspath(details_path):
            return path
    raise CompareError("%s: no report JSON beside it (looked for %s)"
                       % (details_path, ", ".join(candidates)))


def run_argument(path):
    """A RUN as given -> the path compare reads.  A file of a run folder
    (report.json, details.jsonl, run.json, report.txt, report.html) stands
    for its folder; a report JSON given without its run folder is refused
    with a message saying what to give instead (CompareError)."""
    if not os.path.isfile(path):
        return path
    folder, base = os.path.split(path)
    folder = folder or os.curdir
    if base in RUN_FOLDER_FILES:
        missing = [name for name in (REPORT_JSON, DETAILS_JSONL)
                   if not os.path.isfile(os.path.join(folder, name))]
        if not missing:
            return folder
        if base != DETAILS_JSONL:
            raise CompareError("%s is a file of a run folder, but its folder has no %s: give "
                               "a run folder, or a details JSON Lines file with its report "
                               "beside it" % (path, " and no ".join(missing)))
    if _looks_like_a_report(path):
        stem = os.path.splitext(base)[0]
        beside = [name for name in (stem + ".jsonl", stem.replace("report", "details") + ".jsonl")
                  if os.path.isfile(os.path.join(folder, name))]
        raise CompareError("%s is a report JSON, not a details JSON Lines file: give %s "
                           "(compare finds the report beside it)"
                           % (path, "the details file " + os.path.join(folder, beside[0])
                              if beside else "its run folder or its details file"))
    return path


def _looks_like_a_report(path):
    """Is the file a report rather than details: an indented JSON document,
    or a first line that is an object with metrics and no row (index_id)?
    (Anything else is left to read_details, which says what is wrong.)"""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(MAX_LINE_CHARS + 1)
    except OSError:
        return False
    if first.strip() == b"{":
        return True
    try:
        value = decode_json(first.decode("utf-8"))
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "metrics" in value and "index_id" not in value


def run_files(path):
    """RUN argument -> (report path, details path, run.json path or None).

    run.json is read only from a run folder (a details file given alone may
    share its folder with other runs)."""
    if os.path.isdir(path):
        report, details = os.path.join(path, REPORT_JSON), os.path.join(path, DETAILS_JSONL)
        if not os.path.lexists(report) and not os.path.lexists(details):
            problem = not_a_run_folder(path)
            if problem:
                raise CompareError(problem)
        for needed in (report, details):
            if os.path.lexists(needed) and not os.path.isfile(needed):
                raise CompareError("%s: not a regular file" % needed)
            if not os.path.isfile(needed):
                raise CompareError("%s: no %s in this run folder"
                                   % (path, os.path.basename(needed)))
        run_json = os.path.join(path, RUN_JSON)
        if os.path.isfile(run_json):
            return report, details, run_json
        if os.path.lexists(run_json):
            raise CompareError("%s: not a regular file" % run_json)
        return report, details, None
    if os.path.isfile(path):
        return report_beside(path), path, None
    raise CompareError("%s: no such run folder or details file" % path)


# Entries of a folder looked at to say what it is when it holds no run.
MAX_FOLDER_ENTRIES = 1000


def _entries(folder):
    """Up to MAX_FOLDER_ENTRIES names in ``folder``, sorted ([] when unreadable)."""
    try:
        with os.scandir(folder) as found:
            names = []
            for entry in found:
                names.append(entry.name)
                if len(names) >= MAX_FOLDER_ENTRIES:
                    break
    except OSError:
        return []
    return sorted(names)


def not_a_run_folder(path):
    """What a folder given as a RUN is when it holds no report.json nor
    details.jsonl, in one line saying what to give instead -- the folder
    harness.py import wrote (a run folder per task in it), the harness's own
    output (results_<date>.json), a task folder harness.py lm-eval wrote --
    or None (the caller says what is missing)."""
    from transitlm.harness.lm_eval_output import DATE_RE
    names = _entries(path)
    runs = [os.path.join(path, name) for name in names
            if all(os.path.isfile(os.path.join(path, name, needed))
                   for needed in (REPORT_JSON, DETAILS_JSONL))]
    if runs:
        return ("%s is not a run folder (no %s) but holds %d run folder%s, as harness.py "
                "import writes one per task: give %s, e.g. compare.py %s"
                % (path, REPORT_JSON, len(runs), "" if len(runs) == 1 else "s",
                   "it" if len(runs) == 1 else "them", " ".join(runs[:4])))

    def results_in(folder, entries):
        return [name for name in entries if name.endswith(".json") and DATE_RE.search(name)
                and not name.startswith("samples_")]

    harness = results_in(path, names) or [
        name for name in names if os.path.isdir(os.path.join(path, name))
        and results_in(os.path.join(path, name), _entries(os.path.join(path, name)))]
    if harness:
        return ("%s is lm-evaluation-harness output (results_<date>.json), which holds no "
                "row's verdicts: turn it into run folders with python3 harness.py import %s "
                "--out DIR, then compare DIR's folders (one per task)" % (path, path))
    from transitlm.harness.lm_eval_tasks import SETTINGS_FILE
    if SETTINGS_FILE in names:
        return ("%s is a task folder harness.py lm-eval wrote, what the harness is run on: run "
                "lm_eval on it, then harness.py import its output and compare the run folders "
                "that writes" % path)
    return None


def read_report(path):
    """report.json -> dict, every field compare reads checked."""
    report = read_json_file(path, MAX_REPORT_BYTES, "report")
    problem = report_problem(report)
    if problem:
        raise CompareError("%s: %s" % (path, problem))
    return report


def report_problem(report):
    """What is wrong with the fields of a report that compare reads, or None."""
    benchmark, protocol = report.get("benchmark"), report.get("protocol")
    if not isinstance(benchmark, str) or benchmark not in BENCHMARK_NAMES:
        return "unknown benchmark %s (known: %s)" % (shown(benchmark), ", ".join(BENCHMARK_NAMES))
    if not isinstance(protocol, str) or protocol not in common.PROTOCOLS:
        return "unknown protocol %s (known: %s)" % (shown(protocol),
                                                    ", ".join(sorted(common.PROTOCOLS)))
    metrics = report.get("metrics")
    if not isinstance(metrics, dict):
        return "the report has no metrics (metrics is %s)" % common.type_name(metrics)
    for key, value in metrics.items():
        if key in FRACTION_METRICS:
            problem = number_problem("metric " + key, value, 0.0, 1.0)
        else:
            problem = number_problem("metric " + shown(key), value, 0.0 if key == "mape"
                                     else -FIGURE_LIMIT, FIGURE_LIMIT)
        if problem:
            return problem
    counts = report.get("counts")
    if counts is not None:
        if not isinstance(counts, dict):
            return "counts is %s, expected an object" % common.type_name(counts)
        samples = counts.get("samples")
        if samples is not None and (samples.__class__ is not int
                                    or not 0 <= samples <= MAX_SAMPLES):
            return "counts.samples is %s, expected a count" % shown(samples)
    signature = report.get("signature")
    if signature is not None:
        if not isinstance(signature, str):
            return "signature is %s, expected text" % common.type_name(signature)
        if len(signature) > MAX_SIGNATURE_CHARS:
            return "signature is %d characters long (at most %d)" % (len(signature),
                                                                     MAX_SIGNATURE_CHARS)
    inputs = report.get("inputs")
    if inputs is not None:
        if not isinstance(inputs, dict):
            return "inputs is %s, expected an object" % common.type_name(inputs)
        sha = inputs.get("sha256")
        if sha is not None:
            if not isinstance(sha, dict):
                return "inputs.sha256 is %s, expected an object" % common.type_name(sha)
            for key in HASH_KEYS:
                value = sha.get(key)
                if value is not None and not (isinstance(value, str) and len(value) == 64
                                              and _HEX.issuperset(value)):
                    return ("inputs.sha256.%s is %s, expected a SHA-256 digest (64 lowercase "
                            "hex digits)" % (key, shown(value)))
    return None


def read_run_json(path):
    """run.json -> the model it records (generation.model), or None."""
    run = read_json_file(path, MAX_RUN_JSON_BYTES, RUN_JSON)
    generation = run.get("generation")
    if generation is None:
        return None
    if not isinstance(generation, dict):
        raise CompareError("%s: generation is %s, expected an object or null"
                           % (path, common.type_name(generation)))
    model = generation.get("model")
    if model is None:
        return None
    if not isinstance(model, str):
        raise CompareError("%s: generation.model is %s, expected text"
                           % (path, common.type_name(model)))
    if len(model) > MAX_MODEL_CHARS:
        raise CompareError("%s: generation.model is %d characters long (at most %d)"
                           % (path, len(model), MAX_MODEL_CHARS))
    return model.strip() or None


# ---------------------------------------------------------------------------
# Details lines
# ---------------------------------------------------------------------------

def check_record(benchmark, record, needs=()):
    """What is wrong with a details record, in words (the first key it lacks
    or a field of the wrong type or out of range), or None."""
    for key in ROW_KEYS + tuple(needs):
        if key not in record:
            return "no %r key" % key
    problem = field_problem(record)
    if problem:
        return problem
    missing = missing_verdict(benchmark, record)
    return "no %r key" % missing if missing else None


def field_problem(record):
    """The first field of a record that has the wrong type or range, in words."""
    get = record.get
    index_id = record["index_id"]
    if index_id is not None and index_id.__class__ is not str and index_id.__class__ is not int:
        return "index_id is %s, expected text or a whole number" % common.type_name(index_id)
    status = record["status"]
    if status.__class__ is not str or status not in STATUSES:
        return "status %s is not one of %s" % (shown(status), ", ".join(STATUSES))
    for key in BOOL_KEYS:
        value = get(key, False)
        if value.__class__ is not bool:
            return "%s is %s, expected true or false" % (key, shown(value))
    for key, low, high in NUMBER_KEYS:
        value = get(key)
        if value is not None and (value.__class__ is not float or not low <= value <= high):
            problem = number_problem(key, value, low, high)
            if problem:
                return problem
    for key in COUNT_KEYS:
        value = get(key, 0)
        if value.__class__ is not int or not 0 <= value <= MAX_ROUTE_COUNT:
            return "%s is %s, expected a count from 0 to %d" % (key, shown(value),
                                                               MAX_ROUTE_COUNT)
    band = get("score_band", "same")
    if band.__class__ is not str or band not in SCORE_BANDS:
        return "score_band %s is not one of %s" % (shown(band), ", ".join(SCORE_BANDS))
    city = get("city")
    if city is not None and city.__class__ is not str:
        return "city is %s, expected text or null" % common.type_name(city)
    codes = get("failure_codes", ())
    if codes.__class__ is not list and codes != ():
        return "failure_codes is %s, expected a list of texts" % common.type_name(codes)
    for code in codes:
        if code.__class__ is not str:
            return "failure_codes holds %s, expected texts" % common.type_name(code)
    req_type = get("req_type")
    if req_type is not None and (req_type.__class__ is not int
                                 or not -2 ** 31 <= req_type < 2 ** 31):
        return "req_type is %s, expected a whole number or null" % shown(req_type)
    best = get("best_match")
    if best is not None and (best.__class__ is not str or best not in ROUTE_KEYS):
        return "best_match %s is not one of %s or null" % (shown(best), ", ".join(ROUTE_KEYS))
    if "routes" in record:
        return routes_problem(record["routes"])
    return None


def routes_problem(routes):
    if not isinstance(routes, dict):
        return "routes is %s, expected an object" % common.type_name(routes)
    for key, route in routes.items():
        if key not in ROUTE_KEYS:
            return "routes has a route %s, expected %s" % (shown(key), ", ".join(ROUTE_KEYS))
        if not isinstance(route, dict):
            return "routes.%s is %s, expected an object" % (key, common.type_name(route))
        for field in ("reachable", "score"):
            if field not in route:
                return "routes.%s has no %r key" % (key, field)
        if route["reachable"].__class__ is not bool:
            return "routes.%s.reachable is %s, expected true or false" % (
                key, shown(route["reachable"]))
        problem = number_problem("routes.%s.score" % key, route["score"], -FIGURE_LIMIT,
                                 FIGURE_LIMIT)
        if problem:
            return problem
    return None


def missing_verdict(benchmark, record):
    """The first verdict key a record lacks, or None."""
    if benchmark == "personalized" and "req_type" not in record:
        return "req_type"
    if record["in_funnel"] and record.get("reachable"):
        for key in REACHABLE_KEYS:
            if key not in record:
                return key
        if record.get("exact_match"):
            for key in EXACT_KEYS:
                if key not in record:
                    return key
    if record["status"] == "evaluated":
        if "reachable" not in record:
            return "reachable"
        for key in SCENARIO_KEYS.get(benchmark, ()):
            if key not in record:
                return key
    return None


def slim(record):
    """The fields compare reads of a details record (the rest is dropped)."""
    kept = {key: value for key, value in record.items() if key in KEPT_KEYS}
    routes = kept.get("routes")
    if routes:
        kept["routes"] = {key: {"reachable": route["reachable"], "score": route["score"]}
                          for key, route in routes.items()}
    return kept


def read_details(path, benchmark=None, needs=()):
    """details.jsonl -> list of records (the fields compare reads), each line
    checked (check_record) when the benchmark is given; CompareError naming
    the file and line for anything else."""
    records = []
    number = 0
    try:
        with open(path, encoding="utf-8") as handle:
            while True:
                line = handle.readline(MAX_LINE_CHARS + 1)
                if not line:
                    break
                number += 1
                if len(line) > MAX_LINE_CHARS:
                    raise CompareError("%s line %d: longer than %d characters"
                                       % (path, number, MAX_LINE_CHARS))
                if not line.strip():
                    raise CompareError("%s line %d: empty line" % (path, number))
                try:
                    record = _DECODER.decode(line)
                except (ValueError, RecursionError) as exc:
                    raise CompareError("%s line %d: not JSON (%s)"
                                       % (path, number, shown(str(exc), 80)))
                if record.__class__ is not dict:
                    raise CompareError("%s line %d: expected a JSON object, got %s"
                                       % (path, number, common.type_name(record)))
                if benchmark is not None:
                    problem = check_record(benchmark, record, needs)
                    if problem:
                        raise CompareError("%s line %d: %s" % (path, number, problem))
                records.append(slim(record))
    except OSError as exc:
        raise CompareError("%s: cannot read (%s)" % (path, exc.strerror or exc))
    except UnicodeDecodeError:
        raise CompareError("%s: not UTF-8 text (near line %d)" % (path, number + 1))
    return records


def occurrence_keys(records):
    """Pairing keys: (index_id, occurrence), so the k-th row with an id pairs
    with the k-th row with that id in another run."""
    seen, keys = {}, []
    for record in records:
        index_id = record.get("index_id")
        if not isinstance(index_id, (str, int, float, type(None))) or isinstance(index_id, bool):
            index_id = json.dumps(index_id, sort_keys=True)
        occurrence = seen.get(index_id, 0)
        seen[index_id] = occurrence + 1
        keys.append((index_id, occurrence))
    return keys


def load_run(path, needs=(), name=None):
    """A RUN argument -> Run (report, run.json's model, checked details lines)."""
    report_path, details_path, run_json_path = run_files(path)
    report = read_report(report_path)
    model = read_run_json(run_json_path) if run_json_path else None
    records = read_details(details_path, report["benchmark"], needs)
    samples = (report.get("counts") or {}).get("samples")
    if samples is not None and samples != len(records):
        raise CompareError("%s has %d lines but %s counts %d samples: the files do not "
                           "belong together" % (details_path, len(records), report_path,
                                                samples))
    return Run(path, report_path, details_path, run_json_path, report, records, model, name)
