"""An lm-evaluation-harness run becomes run folders (``harness.py import``).

For each TransitLM task of one ``lm_eval ... --log_samples`` run (the tasks
whose config ``metadata`` names a TransitLM benchmark, as ``harness.py
lm-eval`` writes it), the answers the harness logged (``resps``) are scored
by the evaluator's own engine, as ``evaluate.py --input TEST --predictions
ANSWERS`` scores them, into a run folder named by the task:

    OUT/<task>/report.json, details.jsonl, report.txt, report.html, run.json
    OUT/<task>/predictions.jsonl   the answers, in the test file's order, as a
                                   predictions file (index_id, generate_results),
               predictions.jsonl.settings.json   and its settings sidecar, as
                                   generate.py writes one: run.json's generation

Each answer is joined to its row by the harness's ``doc_id`` (row number - 1)
and checked against the row's ``index_id``; the task folder
(``transitlm_tasks.json`` beside the task's data file) and the task's
metadata say what the rows were scored against: the test file, the station
file and the line file must be there with the hashes they had, or the import
is refused (one line).  A run of the first N rows (``lm_eval --limit N``) is
scored as ``--sample_count N``; other tasks' samples are left alone.
``run.json`` records, under ``generation``, the model as the harness ran it
(``lm_eval_output.model_record``), the task's generation settings, the task
folder, the prompt the rows were asked with and the harness's own figures.

Standard library only; Python 3.8+.
"""

import json
import os

from common import VERSION, InputError, file_sha256
from transitlm.api import write_run_folder
from transitlm.io.bounded_json import finite, loads_bounded
from transitlm.evaluation.catalog import BENCHMARK_NAMES, benchmark_metrics, load_benchmark
from transitlm.evaluation.engine import Options, RowSinks, evaluate_stream
from transitlm.io.files import (RUN_FOLDER_FILES, Outputs, overwrite_problem, settings_path,
                             write_whole)
from transitlm.generate.settings import settings_text
from transitlm.harness.lm_eval_output import (
    find_run, model_record, read_results, read_samples)
from transitlm.harness.lm_eval_tasks import SETTINGS_FILE
from transitlm.evaluation.inputs import SampleReader
from transitlm.evaluation.chat_messages import COLUMN, DEFAULT, PromptTally, valid_record
from transitlm.evaluation.provenance import check_run_folder

PREDICTIONS_FILE = "predictions.jsonl"
MAX_SETTINGS_BYTES = 16 * 1024 * 1024
# The files a task was scored against: (metadata key, what a message calls it).
TASK_FILES = (("input", "test file"), ("station_info", "station file"),
              ("line_info", "line file"))


class TaskImport(object):
    """One TransitLM task of a harness run, checked and ready to score."""

    def __init__(self, task, metadata, folder, settings, samples, index_ids, out):
        self.task = task
        self.metadata = metadata
        self.benchmark = metadata["benchmark"]
        self.protocol = metadata["protocol"]
        self.task_folder = folder
        self.settings = settings
        self.samples = samples
        self.index_ids = index_ids
        self.rows = len(samples.lines)            # scored: the first ``rows`` of the file
        self.file_rows = len(index_ids)
        self.out = os.path.join(out, task)
        self.prompt = None                        # what the rows were asked (PromptFold)


def is_transitlm_task(config):
    """Is a task's config (results ``configs``) one harness.py lm-eval wrote?"""
    metadata = config.get("metadata") if isinstance(config, dict) else None
    return (isinstance(metadata, dict) and metadata.get("benchmark") in BENCHMARK_NAMES
            and isinstance(metadata.get("input_sha256"), str))


def _dict(value):
    """An object of the results JSON, or {} for anything else (a damaged file)."""
    return value if isinstance(value, dict) else {}


class PromptFold(object):
    """The record of the system prompts a task's rows were asked with
    (transitlm.evaluation.chat_messages: {"source", "sha256"}), folded with the project's
    PromptTally from the docs the harness logged -- their ``system_prompt``
    is the system message it sent.  The task folder's own record
    (``prompt`` in the task's metadata) names the source; one that does not
    match the logged prompts is refused.  A task folder of an earlier
    version records only whether the rows had a system_prompt column."""

    def __init__(self, task, metadata, task_settings):
        self.task = task
        self.recorded = valid_record(metadata.get("prompt"))
        self.source = DEFAULT if task_settings.get("system_prompt") == DEFAULT else COLUMN
        self.tally = PromptTally()

    def add(self, doc):
        text = doc.get("system_prompt")
        self.tally.add(self.source, text if isinstance(text, str) else "")

    def record(self):
        folded = self.tally.record()
        if self.recorded is None:
            return folded
        if folded is not None and folded["sha256"] != self.recorded["sha256"]:
            raise InputError("the system prompts the harness logged for %s are not the ones "
                             "its task folder records (SHA-256 %s, logged %s): the task folder "
                             "was written again since?" % (self.task, self.recorded["sha256"][:8],
                                                           folded["sha256"][:8]))
        return self.recorded


def _read_settings(path, task):
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SETTINGS_BYTES + 1)
        settings = loads_bounded(data.decode("utf-8"))
    except FileNotFoundError:
        raise InputError("the task folder of %s is not there any more (no %s): the harness "
                         "ran a task folder that has been moved or removed" % (task, path))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc))
    if not isinstance(settings, dict) or not isinstance(settings.get("tasks"), dict):
        raise InputError("%s is not the settings file of a task folder" % path)
    return settings


def task_folder(task, config):
    """The task folder the harness read a task from (its data file's folder)."""
    data = _dict(_dict(config.get("dataset_kwargs")).get("data_files")).get("test")
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, str) or not os.path.isabs(data):
        raise InputError("task %s names no data file of a task folder (dataset_kwargs."
                         "data_files.test): write the task folder again with harness.py "
                         "lm-eval and run the harness on it" % task)
    return os.path.dirname(data)


def check_files(task, metadata):
    """Every file the task was scored against is there, with its hash."""
    for key, what in TASK_FILES:
        path = metadata.get(key)
        if path is None and key == "line_info":
            continue
        expected = metadata.get(key + "_sha256")
        if not isinstance(path, str) or not isinstance(expected, str):
            raise InputError("task %s's metadata names no %s and its SHA-256" % (task, what))
        try:
            found = file_sha256(path)
        except FileNotFoundError:
            raise InputError("the %s of task %s, %s, is missing: the rows cannot be scored "
                             "against what the harness ran" % (what, task, path))
        except OSError as exc:
            raise InputError("cannot read the %s %s: %s" % (what, path, exc.strerror or exc))
        if found != expected:
            raise InputError("the %s of task %s, %s, has changed since the harness ran "
                             "(SHA-256 %s then, %s now): its figures would not be the "
                             "harness's" % (what, task, path, expected[:8], found[:8]))


def row_ids(path, benchmark):
    """The index_id of every row of a test file, read as the evaluator reads it."""
    with SampleReader(path, None, need_req_type=load_benchmark(benchmark).needs_req_type) \
            as reader:
        ids = [sample.index_id for sample in reader]
        reader.finish()
    return ids


def plan_task(run, results, task, out):
    """Check one TransitLM task of a run -> TaskImport (InputError: refused)."""
    config = results["configs"][task]
    metadata = config["metadata"]
    if metadata.get("protocol") not in ("reference", "paper"):
        raise InputError("task %s's metadata names no known protocol" % task)
    folder = task_folder(task, config)
    settings = _read_settings(os.path.join(folder, SETTINGS_FILE), task)
    task_settings = settings["tasks"].get(task)
    if not isinstance(task_settings, dict) \
            or task_settings.get("input_sha256") != metadata["input_sha256"]:
        raise InputError("the task folder %s holds another %s than the harness ran (written "
                         "again since?)" % (folder, task))
    check_files(task, metadata)
    path = run.samples_path(task)
    if path is None:
        raise InputError("no samples file for task %s beside %s: run lm_eval with "
                         "--log_samples" % (task, run.results_path))
    ids = row_ids(metadata["input"], metadata["benchmark"])

    def check(doc_id, doc):
        if doc_id >= len(ids):
            return "doc_id %d: the test file has %d rows" % (doc_id, len(ids))
        if doc.get("row", doc_id + 1) != doc_id + 1:
            return "doc_id %d is row %s, expected row %d" % (doc_id, doc.get("row"), doc_id + 1)
        if doc.get("index_id") != ids[doc_id]:
            return ("doc_id %d has index_id %s, row %d of %s has %s: another test file's row"
                    % (doc_id, json.dumps(doc.get("index_id"), ensure_ascii=False)[:40],
                       doc_id + 1, metadata["input"], json.dumps(ids[doc_id])[:40]))
        return None

    samples = read_samples(path, check)
    if not samples.lines:
        raise InputError("samples file %s holds no rows" % path)
    count = len(samples.lines)
    if max(samples.lines) != count - 1:
        missing = min(set(range(max(samples.lines) + 1)) - set(samples.lines))
        raise InputError("the harness ran %d rows of task %s but not row %d: only a run of the "
                         "first rows (lm_eval --limit) can be imported" % (count, task,
                                                                          missing + 1))
    effective = _dict(_dict(results.get("n-samples")).get(task)).get("effective")
    if effective is not None and effective != count:
        raise InputError("samples file %s holds %d rows, the results count %d: is it another "
                         "run's?" % (path, count, effective))
    plan = TaskImport(task, metadata, folder, task_settings, samples, ids, out)
    fold = PromptFold(task, metadata, task_settings)
    for _, sample in logged_samples(plan):
        fold.add(sample["doc"])
    plan.prompt = fold.record()
    return plan


def logged_samples(plan):
    """The logged samples of a task in row order (each line read again: the
    index keeps only where it is)."""
    with open(plan.samples.path, "rb") as source:
        for doc_id in range(plan.rows):
            offset, length = plan.samples.lines[doc_id]
            source.seek(offset)
            yield doc_id, json.loads(source.read(length).decode("utf-8"))


def write_predictions(plan, handle):
    """The answers as a predictions file, in the test file's order."""
    for doc_id, sample in logged_samples(plan):
        line = {"index_id": plan.index_ids[doc_id], "generate_results": sample["resps"][0][0]}
        try:
            data = json.dumps(line, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:                   # a lone surrogate: as its escape
            data = json.dumps(line).encode("ascii")
        handle.write(data + b"\n")


def harness_figures(results, plan):
    """The harness's own figures of the task: {metric: value}."""
    entry = _dict(results["results"].get(plan.task))
    return {metric.key: entry.get(metric.key + ",none")
            for metric in benchmark_metrics(plan.benchmark)}


def generation_record(run, results, plan):
    """run.json's ``generation`` (and the predictions' settings sidecar): who
    answered, how they were asked."""
    record = {"tool": "lm-evaluation-harness", "version": VERSION}
    record.update(model_record(results))
    config = results["configs"][plan.task]
    record.update({
        "results": run.results_path, "samples": plan.samples.path,
        "samples_sha256": file_sha256(plan.samples.path),
        "task": plan.task, "task_folder": plan.task_folder,
        "generation_kwargs": config.get("generation_kwargs"),
        "num_fewshot": _dict(results.get("n-shot")).get(plan.task),
        "system_instruction_sha256": results.get("system_instruction_sha"),
        "chat_template_sha256": results.get("chat_template_sha"),
        "prompt": plan.prompt,
        "rows": {"scored": plan.rows, "in_file": plan.file_rows},
        "harness_figures": harness_figures(results, plan)})
    return finite(record)


def score_task(run, results, plan, overwrite, command):
    """Score the task's answers with the evaluator's engine and write its run
    folder -> (report, generation record)."""
    benchmark = load_benchmark(plan.benchmark)
    final = os.path.join(plan.out, PREDICTIONS_FILE)
    with Outputs() as outputs:
        outputs.make_folders(plan.out, "run folder")
        predictions = outputs.open(final, binary=True)
        write_predictions(plan, predictions.handle)
        generation = generation_record(run, results, plan)
        predictions.handle.flush()
        # The predictions' settings sidecar, as generate.py writes one: the
        # evaluator reads it beside the predictions (run.json's generation).
        sidecar = settings_text(generation)
        outputs.write(settings_path(final), sidecar)
        try:
            write_whole(settings_path(predictions.temp), sidecar)
            report, records, network = evaluate_answers(benchmark, plan, predictions.temp)
        finally:
            try:
                os.remove(settings_path(predictions.temp))
            except OSError:
                pass
        # The answers are read from the folder's predictions file, renamed
        # into place with the run's files.
        report["inputs"]["predictions"] = final
        write_run_folder(plan.out, report, records, overwrite=overwrite, command=command,
                         generation=generation, network=network)
    return report, generation


def evaluate_answers(benchmark, plan, predictions):
    """The evaluator's engine over the test file and the answers, as
    ``evaluate.py --predictions`` runs it -> (report, records, network)."""
    options = {"input": plan.metadata["input"], "predictions": predictions,
               "protocol": plan.protocol, "station_info": plan.metadata["station_info"],
               "sample_count": plan.rows if plan.rows < plan.file_rows else None,
               # a test file of another benchmark, written so on purpose (lm-eval
               # --allow_other_benchmark): scored the same way
               "allow_other_benchmark": plan.settings.get("allow_other_benchmark") is True}
    if plan.benchmark == "general_llm":
        options.update(line_info=plan.metadata.get("line_info"), api_url=None)
    records = []
    report, _, network = evaluate_stream(
        benchmark, Options(benchmark, **options),
        lambda aggregate: RowSinks(aggregate, collect=records))
    return report, records, network


class Imported(object):
    """What an import did: the run, each task's (plan, report, generation),
    the other tasks left alone and their samples."""

    def __init__(self, run, results, tasks, foreign, foreign_samples):
        self.run = run
        self.results = results
        self.tasks = tasks
        self.foreign = foreign
        self.foreign_samples = foreign_samples


def import_run(path, out, overwrite=False, command=None):
    """Import the harness run at ``path`` into run folders under ``out`` ->
    Imported.  Every task is checked before any folder is written."""
    run = find_run(path)
    results = read_results(run.results_path)
    configs = results["configs"]
    ours = sorted((task for task in configs if is_transitlm_task(configs[task])),
                  key=lambda task: (BENCHMARK_NAMES.index(configs[task]["metadata"]["benchmark"]),
                                    task))
    foreign = [task for task in configs if task not in ours]
    if not ours:
        raise InputError("%s holds no TransitLM task (tasks: %s): run the harness on a task "
                         "folder harness.py lm-eval wrote"
                         % (run.results_path, ", ".join(sorted(configs)[:5]) or "none"))
    out = os.path.abspath(out)
    plans = [plan_task(run, results, task, out) for task in ours]
    outputs, inputs = [], [("the results file", run.results_path)]
    for plan in plans:
        check_run_folder(plan.out, overwrite)
        outputs += [("", os.path.join(plan.out, name))
                    for name in RUN_FOLDER_FILES + (PREDICTIONS_FILE,
                                                    settings_path(PREDICTIONS_FILE))]
        inputs += [("the samples file", plan.samples.path)]
        inputs += [("the " + what, plan.metadata.get(key)) for key, what in TASK_FILES]
    problem = overwrite_problem(outputs, inputs)
    if problem:
        raise InputError(problem)
    done = [(plan,) + score_task(run, results, plan, overwrite, command) for plan in plans]
    counts = _dict(results.get("n-samples"))
    foreign_samples = 0
    for task in foreign:
        effective = _dict(counts.get(task)).get("effective")
        foreign_samples += effective if effective.__class__ is int else 0
    return Imported(run, results, done, foreign, foreign_samples)
