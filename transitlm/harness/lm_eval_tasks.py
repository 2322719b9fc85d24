"""The task folder lm-evaluation-harness reads (``--include_path DIR``), written
by ``harness.py lm-eval`` for the user's test files -- the bundled examples
when none is given.

The folder holds, every path in it absolute:

  transitlm_<task>.jsonl   the rows, in the test file's order, as the harness's
                           ``dataset_path: json`` reads them: row (its number in
                           the file), index_id, system_prompt, sft_prompt,
                           sft_label, and req_type for benchmark 2
  transitlm_<task>.yaml    one task: the row's system_prompt as the system
                           message (``description``), its sft_prompt as the user
                           message, greedy decoding, no stop string, a token
                           limit for a reasoning model; process_results and an
                           aggregation per metric (lm_eval_scoring)
  transitlm_all.yaml       the group of the tasks written
  utils.py                 the functions the task files name (lm_eval_utils.py)
  transitlm_tasks.json     the settings utils.py reads: the project's folder,
                           the protocol, the station and line files, the inputs

Every row is read as the evaluator reads it (transitlm.evaluation.inputs) and scored
once with its label as the answer before anything is written: a row the
evaluator could not judge (a broken prompt, label or req_type, a malformed
line) stops the command with one line, rather than becoming a failure the
harness charges to the model.

Standard library only; Python 3.8+.
"""

import json
import os
import re

from common import VERSION, InputError, file_sha256
from transitlm.evaluation.catalog import (BENCHMARK_NAMES, PROJECT_DIR, benchmark_info, benchmark_metrics,
                               line_file, load_benchmark, station_file)
from transitlm.evaluation.engine import Options
from transitlm.io.files import Outputs, overwrite_problem
from transitlm.harness.context_fit import fit_context, prompt_tokens
from transitlm.generate.runner import UsageError, iter_input_rows, scan_input
from transitlm.harness.lm_eval_scoring import aggregation_name, process_name
from transitlm.evaluation.inputs import SampleReader
from transitlm.evaluation.chat_messages import PromptTally, system_prompt_for
from transitlm.evaluation.reports import signature_line
from transitlm.evaluation.network_check import cached_sha256, check_test_file
from transitlm.evaluation.benchmark_check import benchmark_verdict, enforce as enforce_benchmark
from transitlm.reward.scoring import RowDataError, scorer_for

# The task of each benchmark (the catalogue's names) and the group of them all.
TASKS = {"single_route": "transitlm_single_route", "personalized": "transitlm_personalized",
         "diversity": "transitlm_diversity", "general_llm": "transitlm_general"}
# Not "transitlm": lm_eval run from this repository's root, where the folder
# transitlm/ is, warns that "a local directory named 'transitlm' exists".
GROUP = "transitlm_all"
OLD_GROUP_FILES = ("transitlm.yaml",)          # the group file of earlier versions
SETTINGS_FILE = "transitlm_tasks.json"         # the name lm_eval_utils.py reads
UTILS_FILE = "utils.py"
UTILS_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lm_eval_utils.py")

# Generation: greedy, nothing that ends an answer early.  The harness's own
# defaults (a stop at the first blank line, 256 new tokens) cut a reasoning
# model's answer short; 16,384 tokens leave a reasoning model room and still
# fit, with the prompt, a 32k-token context (a server refuses a request whose
# prompt and max_tokens overflow the model's context).
MAX_GEN_TOKS = 16384


def task_file_names(benchmark):
    """(data file, task file) of a benchmark's task."""
    return TASKS[benchmark] + ".jsonl", TASKS[benchmark] + ".yaml"


def folder_names():
    """Every file name a task folder may hold (to replace an old one)."""
    names = [GROUP + ".yaml", UTILS_FILE, SETTINGS_FILE] + list(OLD_GROUP_FILES)
    for benchmark in BENCHMARK_NAMES:
        names.extend(task_file_names(benchmark))
    return names


# ---------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------

def _system_prompts(path):
    """[(index_id, system prompt, sft_prompt)] of each row, as generate.py
    reads them (the system prompt is what it sends), or None when the file
    has no system_prompt column."""
    try:
        if not scan_input(path).has_system_prompt:
            return None
        return [(index_id, system, prompt)
                for _, index_id, system, prompt in iter_input_rows(path)]
    except UsageError as exc:
        raise InputError(str(exc))


def read_rows(path, benchmark, scorer, override=None):
    """The rows of a test file as the harness's docs -> (docs, the file's
    SHA-256, the record of their system prompts: transitlm.evaluation.chat_messages, as
    generate.py chooses them; ``override`` the text of --system_prompt_file).
    InputError for a file the evaluator cannot read, or a row it could not
    judge (``scorer`` judges each row's label as its answer)."""
    needs_req_type = scorer.benchmark.needs_req_type
    prompts = _system_prompts(path)
    tally = PromptTally()
    docs = []
    with SampleReader(path, None, need_req_type=needs_req_type) as reader:
        for sample in reader:
            where = "input file %s row %d (index_id %s)" % (path, sample.row, sample.index_id)
            if sample.problem:
                raise InputError("%s: %s" % (where, sample.problem[1]))
            cell = None
            if prompts is not None:
                same = (len(prompts) >= sample.row
                        and prompts[sample.row - 1][0] == sample.index_id
                        and prompts[sample.row - 1][2] == sample.prompt)
                if not same:
                    raise InputError("%s: the file reads differently as a test file and as "
                                     "prompts; is it well-formed CSV?" % where)
                cell = prompts[sample.row - 1][1]
            source, system = system_prompt_for(cell, benchmark, override)
            tally.add(source, system)
            doc = {"row": sample.row, "index_id": sample.index_id, "system_prompt": system,
                   "sft_prompt": sample.prompt, "sft_label": sample.label}
            if needs_req_type:
                doc["req_type"] = sample.req_type
            try:
                scorer.record(sample.label, doc)
            except RowDataError as exc:
                raise InputError("%s: %s" % (where, exc))
            docs.append(doc)
        sha256 = reader.finish()
    if not docs:
        raise InputError("input file %s holds no rows" % path)
    return docs, sha256, tally.record()


def evaluator_signature(benchmark, protocol, rows, hashes, prompt=None):
    """The signature the evaluator prints for answers to a test file
    (``evaluate.py --predictions``, every row): transitlm.evaluation.reports's own
    signature_line over the report fields it reads.  ``hashes``: the SHA-256
    of the input, station_info and line_info files; ``prompt``: the record
    of the prompt the rows are asked with (report.json ``inputs.prompt``)."""
    options = {"protocol": protocol}
    if benchmark == "general_llm":
        options["api_url"] = None                # scored in-process, as the harness scores it
    report = {"version": VERSION, "benchmark": benchmark, "protocol": protocol,
              "counts": {"samples": rows},
              "inputs": {"sha256": hashes, "api_url": None, "prompt": prompt,
                         "options": Options(load_benchmark(benchmark), **options).recorded()}}
    return signature_line(report)


# ---------------------------------------------------------------------------
# The files
# ---------------------------------------------------------------------------

# Characters a YAML stream may not hold raw (YAML 1.1's printable set, as
# PyYAML and libyaml check it), the line breaks a double-quoted scalar would
# fold (\x85, U+2028, U+2029) and the byte-order mark: written as escapes.
_YAML_ESCAPED_RE = re.compile("[^\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd"
                              "\U00010000-\U0010ffff]|[\u2028\u2029\\\\\"]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _yaml_escape(match):
    char = match.group()
    if char in "\\\"":
        return "\\" + char
    code = ord(char)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def _scalar(value):
    """A YAML scalar: JSON's literals; text double-quoted, as UTF-8 (a
    character outside the Basic Multilingual Plane as itself: YAML reads no
    surrogate pair), escaping what YAML may not hold raw.  InputError for a
    lone surrogate -- a byte of a name that is not UTF-8 -- which no YAML
    file can carry."""
    if not isinstance(value, str):
        return json.dumps(value)
    found = _SURROGATE_RE.search(value)
    if found:
        raise InputError("%s holds a byte that is not UTF-8 (\\u%04x here), which a YAML task "
                         "file cannot carry: rename it" % (json.dumps(value)[:200],
                                                          ord(found.group())))
    return '"%s"' % _YAML_ESCAPED_RE.sub(_yaml_escape, value)


def task_yaml(benchmark, data_path, metadata, max_gen_toks):
    """The task file of one benchmark."""
    info = benchmark_info(benchmark)
    lines = [
        "# %s, for lm-evaluation-harness." % info.title,
        "# Written by harness.py lm-eval (transitlm %s): write it again rather than edit it."
        % VERSION,
        "task: " + TASKS[benchmark],
    ]
    if metadata["protocol"] != "reference":
        lines.append("task_alias: " + _scalar("%s (%s protocol)" % (TASKS[benchmark],
                                                                      metadata["protocol"])))
    lines += [
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        "    test: " + _scalar(data_path),
        "test_split: test",
        "output_type: generate_until",
        "num_fewshot: 0",
        "# The row's system_prompt is the system message, its sft_prompt the user message.",
        "description: system_prompt",
        "doc_to_text: sft_prompt",
        "doc_to_target: sft_label",
        "# Greedy; no stop string; room for a reasoning model's thinking.",
        "generation_kwargs:",
        "  until: []",
        "  max_gen_toks: %d" % max_gen_toks,
        "  do_sample: false",
        "  temperature: 0.0",
        "# Each answer scored by the evaluator's rules; each figure its aggregation.",
        "process_results: !function utils." + process_name(benchmark),
        "metric_list:",
    ]
    for metric in benchmark_metrics(benchmark):
        lines += ["  - metric: " + metric.key,
                  "    aggregation: !function utils." + aggregation_name(benchmark, metric.key),
                  "    higher_is_better: " + _scalar(not metric.lower_is_better)]
    lines.append("metadata:")
    lines += ["  %s: %s" % (key, _scalar(value)) for key, value in metadata.items()]
    return "\n".join(lines) + "\n"


def group_yaml(benchmarks):
    """The group file: the tasks written, and no aggregate figure -- TransitLM
    reports each benchmark's figures, and the harness's group aggregate (a
    mean of the tasks' figures) is none of them."""
    lines = ["# The TransitLM tasks, for lm-evaluation-harness (harness.py lm-eval, "
             "transitlm %s)." % VERSION,
             "# No aggregate_metric_list: each benchmark's figures stand alone.",
             "group: " + GROUP,
             "task:"]
    lines += ["  - " + TASKS[benchmark] for benchmark in benchmarks]
    lines += ["metadata:", "  version: " + _scalar(VERSION)]
    return "\n".join(lines) + "\n"


def data_lines(docs):
    return "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs)


def context_fit(task, docs, context_size, max_gen_toks):
    """The task's Fit in the server's context (transitlm.harness.context_fit),
    None without a context size; InputError when no row's prompt fits."""
    if context_size is None:
        return None
    fit = fit_context(docs, context_size, max_gen_toks)
    if fit is None:
        raise InputError("no prompt of %s fits a %d-token context (estimated from its UTF-8 "
                         "bytes, an upper bound; the shortest ~%d tokens): give the server's "
                         "real context size" % (task, context_size,
                                               min(prompt_tokens(doc) for doc in docs)))
    return fit


# ---------------------------------------------------------------------------
# The folder
# ---------------------------------------------------------------------------

def check_out_folder(out, overwrite):
    """A new or empty folder, or one this command wrote (with ``overwrite``)."""
    if not os.path.lexists(out):
        return
    if not os.path.isdir(out):
        raise InputError("--out %s is a file: give a folder" % out)
    try:
        names = os.listdir(out)
    except OSError as exc:
        raise InputError("cannot read --out %s: %s" % (out, exc.strerror or exc))
    if not names:
        return
    if SETTINGS_FILE not in names:
        raise InputError("--out %s holds other files: give a new or empty folder (the harness "
                         "reads every task file in the folder it includes)" % out)
    if not overwrite:
        raise InputError("--out %s holds a task folder already: --overwrite replaces it" % out)


def write_task_folder(out, inputs, protocol="reference", station_info=None, line_info=None,
                      max_gen_toks=MAX_GEN_TOKS, overwrite=False, system_prompt=None,
                      context_size=None, allow_foreign_network=False,
                      allow_other_benchmark=False):
    """Write the task folder ``out`` for ``inputs`` ([(benchmark, test file)],
    one per benchmark) -> the settings written (see SETTINGS_FILE).  Every
    file is written whole, together, never over an input; InputError for a
    problem with the inputs or the folder.  ``context_size``: the server's
    context, which each task's max_gen_toks is fitted into (context_fit).
    A test file plainly another benchmark's (transitlm.evaluation.benchmark_check) is
    refused unless ``allow_other_benchmark``; its task then records that it
    was allowed (``allow_other_benchmark`` in its settings), for the import."""
    out = os.path.abspath(out)
    check_out_folder(out, overwrite)
    station = os.path.abspath(station_file(station_info))
    if not os.path.isfile(station):
        raise InputError("cannot read station file %s: no such file" % station)
    benchmarks = [benchmark for benchmark, _ in inputs]
    line = (os.path.abspath(line_file(line_info, station))
            if "general_llm" in benchmarks else None)
    settings = {"transitlm": VERSION, "project": PROJECT_DIR, "protocol": protocol,
                "station_info": station, "line_info": line,
                "max_gen_toks": max_gen_toks, "tasks": {}}
    inputs = [(benchmark, os.path.abspath(path)) for benchmark, path in inputs]
    names = [GROUP + ".yaml", UTILS_FILE, SETTINGS_FILE]
    for benchmark, _ in inputs:
        names.extend(task_file_names(benchmark))
    problem = overwrite_problem(
        [("", os.path.join(out, name)) for name in names],
        [("the station file", station), ("the line file", line)]
        + [("input file", path) for _, path in inputs])
    if problem:
        raise InputError(problem)
    files = {}
    for benchmark, path in inputs:
        scorer = scorer_for(benchmark, protocol, station, line)
        # The test file on this network (transitlm.evaluation.network_check): refused
        # when most label stations are not in the station file.
        general = benchmark == "general_llm"
        warnings, _ = check_test_file(
            path, scorer.context.network, general, cached_sha256(line) if general else None,
            allow_foreign_network,
            names=scorer.benchmark.label_station_names(scorer.context) if general else None)
        # The test file against its benchmark (transitlm.evaluation.benchmark_check).
        with SampleReader(path, None) as reader:
            head = reader.head()
        other = benchmark_verdict(benchmark, head.header, head.rows, scorer.context.network)
        warnings = enforce_benchmark(other, allow_other_benchmark, "input file %s" % path,
                                     "--allow_other_benchmark",
                                     lambda name: "--benchmark %s" % name) + warnings
        docs, sha256, prompt = read_rows(path, benchmark, scorer, system_prompt)
        data_name, task_name = task_file_names(benchmark)
        metadata = {"version": VERSION, "benchmark": benchmark, "protocol": protocol,
                    "input": path, "input_sha256": sha256, "station_info": station,
                    "station_info_sha256": file_sha256(station), "prompt": prompt}
        if benchmark == "general_llm":
            metadata.update(line_info=line, line_info_sha256=file_sha256(line))
        metadata["signature"] = evaluator_signature(
            benchmark, protocol, len(docs),
            {"input": sha256, "station_info": metadata["station_info_sha256"],
             "line_info": metadata.get("line_info_sha256")}, prompt)
        fit = context_fit(TASKS[benchmark], docs, context_size, max_gen_toks)
        files[data_name] = data_lines(docs)
        files[task_name] = task_yaml(benchmark, os.path.join(out, data_name), metadata,
                                     fit.max_gen_toks if fit else max_gen_toks)
        settings["tasks"][TASKS[benchmark]] = {"benchmark": benchmark, "input": path,
                                               "input_sha256": sha256, "rows": len(docs),
                                               "prompt": prompt, "warnings": warnings}
        if not other.ok:
            settings["tasks"][TASKS[benchmark]]["allow_other_benchmark"] = True
        if fit:
            settings["context_size"] = context_size
            settings["tasks"][TASKS[benchmark]]["context"] = fit.record()
    files[GROUP + ".yaml"] = group_yaml(benchmarks)
    with open(UTILS_SOURCE, encoding="utf-8") as handle:
        files[UTILS_FILE] = handle.read()
    files[SETTINGS_FILE] = json.dumps(settings, ensure_ascii=False, indent=1) + "\n"
    with Outputs() as outputs:
        outputs.make_folders(out, "task folder")
        for name, text in files.items():
            outputs.write(os.path.join(out, name), text)
    for name in set(folder_names()) - set(files):        # an old folder's other tasks
        try:
            os.remove(os.path.join(out, name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise InputError("cannot remove %s: %s" % (os.path.join(out, name),
                                                       exc.strerror or exc))
    return settings
