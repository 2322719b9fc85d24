"""``reward.py prepare``: the rows of a release CSV in a trainer's layout, one
JSON object per line, each one what that trainer's adapter reads back.

Every row becomes a chat ``prompt`` -- its system prompt and its
``sft_prompt`` as the user message, chosen as generate.py and harness.py
lm-eval choose them (transitlm.evaluation.chat_messages: --system_prompt_file, else the
row's ``system_prompt`` cell, else the benchmark's default prompt) -- and
carries the release row the reward scores against: ``index_id``,
``task_id``, ``req_type`` (when the file has it), ``sft_prompt`` and
``sft_label``, with the network it is bound to (transitlm.reward.binding)
and the protocol it is to be scored under (``protocol``,
transitlm.reward.row_protocol).  The summary names the record of the
system prompts (``prompt:SOURCE#HASH``, as a run's signature does).

    trl       {"prompt": [messages], "index_id", "task_id", "req_type",
               "sft_prompt", "sft_label", "network_...", "protocol"}: the
               columns TRL hands to
               transitlm.reward.trl.route_reward
    verl      {"data_source": "transitlm/<benchmark>", "prompt": [messages],
               "ability": "transit_route_planning",
               "reward_model": {"style": "rule", "ground_truth": <the row as JSON text>},
               "extra_info": {"index", "split", "index_id", "task_id", "benchmark"}}:
               what transitlm.reward.verl.compute_score reads
    openrlhf  {"input": [messages], "label": <the row as JSON text>, "index_id"}:
               --data.input_key input --data.label_key label (reward_func's labels)

The benchmark of a row is ``--benchmark``, else its ``task_id``, else the
file's name (transitlm.evaluation.catalog.benchmark_of_task); a row without a task_id
gets the benchmark's name as one, so every adapter scores it by that
benchmark's rules.  A task_id that names another benchmark than
``--benchmark`` (or none at all) is refused, not overwritten.

The protocol: ``--protocol`` (``protocol=``), else reference.  Every label
is judged as its own answer under each protocol; when the protocol was not
chosen and fewer than 90 % of one benchmark's labels pass every check under
reference, the file is refused with the share and the protocol under which
they pass (the general LLM's: paper), unless ``--allow_failing_labels``.

The input is streamed (transitlm.io.csv_rows: a budget per row); the output is
written whole or not at all (transitlm.io.files) and never over the input.
Every problem is an InputError with one line naming the file and row.

Standard library only; Python 3.8+.
"""

import json
import os
import shlex
from contextlib import closing

from common import PROTOCOLS, InputError
from transitlm.evaluation.catalog import (BENCHMARK_NAMES, benchmark_of_task, line_file_beside,
                                          release_file)
from transitlm.io.csv_rows import blank, csv_rows, header_columns
from transitlm.io.files import Outputs, overwrite_problem
from transitlm.evaluation.chat_messages import (DEFAULT, PromptTally, row_messages, signature_part,
                               system_prompt_for)
from transitlm.reward import row_protocol
from transitlm.reward.row_check import label_record
from transitlm.io.terminal import quoted

FORMATS = ("trl", "verl", "openrlhf")
DEFAULT_SPLIT = "train"
DATA_SOURCE_PREFIX = "transitlm/"
ABILITY = "transit_route_planning"
OPENRLHF_INPUT_KEY = "input"
OPENRLHF_LABEL_KEY = "label"
# OpenRLHF groups its evaluation figures by this field of a line
# (openrlhf/datasets/prompts_dataset.py; ppo_trainer.py, compute_eval_metrics).
OPENRLHF_DATASOURCE_KEY = "datasource"
REQUIRED = ("sft_prompt", "sft_label")


def data_source(benchmark):
    """verl's data_source of a benchmark's rows: ``transitlm/single_route``."""
    return DATA_SOURCE_PREFIX + benchmark


def parquet_command(jsonl_path):
    """The one command that turns a prepared verl file into the parquet verl
    reads (it needs ``datasets``, which a verl install has)."""
    stem = jsonl_path[:-len(".jsonl")] if jsonl_path.endswith(".jsonl") else jsonl_path
    code = "import datasets; datasets.Dataset.from_json(%s).to_parquet(%s)" % (
        json.dumps(jsonl_path), json.dumps(stem + ".parquet"))
    return "python -c " + shlex.quote(code)


class Columns(object):
    """Where a release file holds what prepare reads; InputError when it lacks
    a column the reward needs."""

    def __init__(self, records, path):
        header, self.id = header_columns(records, path, REQUIRED)
        self.width = len(header)
        self.prompt = header.index("sft_prompt")
        self.label = header.index("sft_label")
        self.system = header.index("system_prompt") if "system_prompt" in header else None
        self.task = header.index("task_id") if "task_id" in header else None
        self.req_type = header.index("req_type") if "req_type" in header else None


class Preparer(object):
    """Turns the rows of one file into one trainer's layout, counting what it did."""

    def __init__(self, path, layout, benchmark=None, split=None, system_prompt=None,
                 network=None, protocol=None, allow_failing_labels=False):
        self.path = path
        # The protocol the rows are prepared for, and whether it was chosen
        # (--protocol) rather than the default.
        self.explicit = protocol is not None
        self.protocol = protocol if protocol is not None else row_protocol.DEFAULT
        self.allow_failing_labels = allow_failing_labels
        self.labels = row_protocol.LabelShares(self.protocol)
        self.label_warnings = []
        self.system_prompt = system_prompt   # the text of --system_prompt_file, or None
        self.network = network               # a binding.PrepareCheck, or None
        self.layout = layout
        self.benchmark = benchmark
        # a release file is what its name says (transit-lm-benchmark1-train.csv:
        # benchmark 1's training split); verl's split is that split unless given
        self.release = release_file(path)
        self.split = split or (self.release[1] if self.release else DEFAULT_SPLIT)
        self.file_benchmark = benchmark_of_task(os.path.basename(path))
        self.rows = 0
        self.by_benchmark = {}
        self.prompts = PromptTally()     # the rows' system prompts (transitlm.evaluation.chat_messages)

    def benchmark_of(self, task, number):
        """The benchmark of data row ``number`` whose task_id cell is ``task``."""
        own = benchmark_of_task(task) if task.strip() else None
        where = "input file %s row %d" % (self.path, number)
        if task.strip() and own is None:
            raise InputError("%s: task_id %s names no benchmark (%s); leave it empty and give "
                             "--benchmark" % (where, quoted(task), ", ".join(BENCHMARK_NAMES)))
        if self.benchmark is not None:
            if own is not None and own != self.benchmark:
                raise InputError("%s: task_id %s names %s, not --benchmark %s"
                                 % (where, quoted(task), own, self.benchmark))
            return self.benchmark
        if own is not None:
            return own
        if self.file_benchmark is not None:
            return self.file_benchmark
        raise InputError("%s has no task_id and the file's name names no benchmark: give "
                         "--benchmark (%s)" % (where, ", ".join(BENCHMARK_NAMES)))

    def record(self, cells, columns, number):
        """The output object of one data row."""
        task = cells[columns.task] if columns.task is not None else ""
        benchmark = self.benchmark_of(task, number)
        if benchmark == "personalized" and columns.req_type is None:
            raise InputError("input file %s lacks the req_type column that benchmark 2 "
                             "(personalized) rows are scored with" % self.path)
        row = {"index_id": cells[columns.id], "task_id": task if task.strip() else benchmark,
               "req_type": cells[columns.req_type] if columns.req_type is not None else "",
               "sft_prompt": cells[columns.prompt], "sft_label": cells[columns.label]}
        record = label_record(row, benchmark, "input file %s row %d (index_id %s)"
                              % (self.path, number, row["index_id"]),
                              self.network.scorer_of(benchmark) if self.network else None,
                              self.protocol)
        self.labels.add(benchmark, self.label_records(benchmark, row, record))
        system = cells[columns.system] if columns.system is not None else None
        self.prompts.add(*system_prompt_for(system, benchmark, self.system_prompt))
        prompt = row_messages(system, row["sft_prompt"], benchmark, self.system_prompt)
        if self.network is not None:
            self.network.add(benchmark, row, record)   # counted, then bound to its network
        row[row_protocol.KEY] = self.protocol
        self.rows += 1
        self.by_benchmark[benchmark] = self.by_benchmark.get(benchmark, 0) + 1
        if self.layout == "trl":
            return dict({"prompt": prompt}, **row)
        ground_truth = json.dumps(row, ensure_ascii=False)
        if self.layout == "verl":
            return {"data_source": data_source(benchmark), "prompt": prompt, "ability": ABILITY,
                    "reward_model": {"style": "rule", "ground_truth": ground_truth},
                    "extra_info": {"index": number - 1, "split": self.split,
                                   "index_id": row["index_id"], "task_id": row["task_id"],
                                   "benchmark": benchmark}}
        return {OPENRLHF_INPUT_KEY: prompt, OPENRLHF_LABEL_KEY: ground_truth,
                "index_id": row["index_id"], OPENRLHF_DATASOURCE_KEY: data_source(benchmark)}

    def write(self, handle):
        """Read the input and write every row's line to ``handle``."""
        with closing(csv_rows(self.path)) as records:
            columns = Columns(records, self.path)
            number = 0
            for cells in records:
                if blank(cells):
                    continue
                number += 1
                if len(cells) != columns.width:
                    raise InputError("input file %s row %d has %d cell(s) where the header has "
                                     "%d (a stray quote may have joined rows, or the row is cut)"
                                     % (self.path, number, len(cells), columns.width))
                handle.write(json.dumps(self.record(cells, columns, number),
                                        ensure_ascii=False) + "\n")
        if not self.rows:
            raise InputError("input file %s has no rows: nothing to prepare" % self.path)
        if self.network is not None:
            self.network.finish(self.path)           # InputError: another network's file
        problem, self.label_warnings = self.labels.problem(self.path, self.explicit,
                                                           self.allow_failing_labels)
        if problem:
            raise InputError(problem)                # the labels fail under this protocol

    def label_records(self, benchmark, row, record):
        """{protocol: the record of the row's label as its own answer}: the
        one judged under the rows' protocol, ``record``, and the others'
        (None for a row only another protocol's rules cannot read)."""
        records = {self.protocol: record}
        for protocol in sorted(PROTOCOLS):
            if protocol != self.protocol:
                try:
                    records[protocol] = self.scorer(benchmark, protocol).record(
                        row.get("sft_label"), row)
                except ValueError:              # RowDataError
                    records[protocol] = None
        return records

    def scorer(self, benchmark, protocol):
        """The Scorer of a benchmark under a protocol, on the rows' network."""
        from transitlm.reward.scoring import scorer_for
        if self.network is None:
            return scorer_for(benchmark, protocol)
        return scorer_for(benchmark, protocol, self.network.station_path,
                          self.network.line_path)


def prepare(path, layout, out, benchmark=None, split=None, system_prompt=None,
            station_info=None, line_info=None, protocol=None,
            allow_foreign_network=False, allow_failing_labels=False):
    """Write the rows of the release file ``path`` in ``layout`` to ``out``
    (whole or not at all) -> the Preparer, with its counts and the record
    of the system prompts (``system_prompt``: the text of
    --system_prompt_file, or None).  ``split``: verl's extra_info split
    (default: the release file's split by its name, else DEFAULT_SPLIT).
    Every row is bound to the station (and line) file
    (transitlm.reward.binding): the given one, else the reward's default;
    and to ``protocol`` (None: not chosen, reference -- then a file whose
    labels mostly fail under it is refused unless ``allow_failing_labels``:
    transitlm.reward.row_protocol)."""
    if layout not in FORMATS:
        raise InputError("unknown format %r (known: %s)" % (layout, ", ".join(FORMATS)))
    problem = overwrite_problem([("--out", out)], [("--input", path)])
    if problem:
        raise InputError(problem)
    if os.path.isdir(path):
        raise InputError("cannot read input file %s: it is a folder" % path)
    if protocol is not None and protocol not in PROTOCOLS:
        raise InputError("unknown protocol %r (known: %s)"
                         % (protocol, ", ".join(sorted(PROTOCOLS))))
    chosen = protocol if protocol is not None else row_protocol.DEFAULT
    preparer = Preparer(path, layout, benchmark, split, system_prompt,
                        network_binding(station_info, line_info, chosen, allow_foreign_network),
                        protocol, allow_failing_labels)
    with Outputs() as outputs:
        outputs.make_folders(os.path.dirname(os.path.abspath(out)))
        preparer.write(outputs.open(out))
    return preparer


def network_binding(station_info, line_info, protocol, allowed):
    """prepare's binding.PrepareCheck on the reward's station and line files."""
    from transitlm.reward.binding import PrepareCheck
    from transitlm.reward.scoring import network_files, scorer_for
    station, line = network_files(station_info, line_info)
    if not os.path.isfile(station):
        raise InputError("cannot read station file %s: no such file" % station)
    if line is None:
        line = line_file_beside(station)
    return PrepareCheck(lambda name: scorer_for(name, protocol, station, line),
                        station, line, allowed, protocol)


def summary_lines(preparer, out):
    """What prepare did and what to run next, for the terminal."""
    lines = ["prepared %d row%s of %s for %s: %s"
             % (preparer.rows, "" if preparer.rows == 1 else "s", preparer.path,
                preparer.layout, out)]
    for name in BENCHMARK_NAMES:
        if name in preparer.by_benchmark:
            lines.append("  %-14s %8d rows" % (name, preparer.by_benchmark[name]))
    if preparer.release:
        benchmark, split = preparer.release
        lines.append("  the release's %s split of %s%s"
                     % (split, benchmark, "" if split == "train" else
                        ": a validation set for the trainer (verl data.val_files), not "
                        "rows to train on"))
    check = preparer.network
    if check is not None:
        lines.append("  bound to the station file %s (SHA-256 %s)"
                     % (check.station_path, check.fields["network_station_sha256"][:12]))
        lines.append("  %d of %d label%s pass every check of their benchmark under the %s "
                     "protocol (docs/reward.md)" % (check.passing, check.labels,
                                                    "" if check.labels == 1 else "s",
                                                    check.protocol))
        lines += ["  WARNING: " + warning for warning in check.warnings]
    labels = preparer.labels
    for protocol in sorted(set(PROTOCOLS) - {preparer.protocol}):
        lines.append("  %d of %d would pass under the %s protocol"
                     % (sum(labels.count(name, protocol) for name in labels.totals),
                        sum(labels.totals.values()), protocol))
    lines.append("  every row is to be scored under the %s protocol (its \"%s\" field; a "
                 "protocol set in the reward overrides it)" % (preparer.protocol,
                                                               row_protocol.KEY))
    lines += ["  WARNING: " + warning for warning in preparer.label_warnings]
    lines.append("  system prompts: %s (docs/reward.md)"
                 % signature_part(preparer.prompts.record()))
    defaults = preparer.prompts.counts.get(DEFAULT, 0)
    if defaults:
        lines.append("  %d row%s had no system prompt: given the benchmark's own"
                     % (defaults, "" if defaults == 1 else "s"))
    here = os.path.dirname(os.path.abspath(__file__))
    if preparer.layout == "verl":
        lines += ["next, the parquet verl reads (needs datasets, which verl installs):",
                  "  " + parquet_command(out),
                  "then: reward.custom_reward_function.path=%s"
                  % os.path.join(here, "verl.py"),
                  "      reward.custom_reward_function.name=compute_score"]
    elif preparer.layout == "openrlhf":
        lines += ["train with: --data.input_key %s --data.label_key %s --data.apply_chat_template"
                  % (OPENRLHF_INPUT_KEY, OPENRLHF_LABEL_KEY),
                  "            --reward.remote_url %s (or http://HOST:PORT/get_reward from "
                  "reward.py serve)" % os.path.join(here, "openrlhf.py")]
    else:
        lines += ["train with: datasets.load_dataset(\"json\", data_files=%s, split=\"train\")"
                  % json.dumps(out),
                  "            GRPOTrainer(..., reward_funcs=[transitlm.reward.trl.route_reward])",
                  "            (or trl grpo --reward_funcs transitlm.reward.trl.route_reward), "
                  "with PYTHONPATH=%s" % os.path.dirname(os.path.dirname(here))]
    return lines
