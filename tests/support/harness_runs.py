"""An lm-evaluation-harness run written as lm-eval 0.4.13 writes one, for the
import tests that do without the harness itself: a task folder's rows
answered, each answer scored by the task's own functions (the utils.py the
harness calls: transitlm.harness.lm_eval_scoring.task_functions) and each
figure aggregated by them, in the harness's layout
(``OUT/<model>/results_<date>.json``, ``samples_<task>_<date>.jsonl``:
doc_id, doc, target, arguments, resps, filtered_resps, the metric values).
tests/test_harness_lm_eval_run.py checks the real harness's layout."""

import json
import os
import re

from transitlm.evaluation.catalog import benchmark_metrics
from transitlm.harness.lm_eval_scoring import aggregation_name, process_name, task_functions
from transitlm.harness.lm_eval_tasks import SETTINGS_FILE, TASKS

DATE = "2026-11-28T07-03-40.575883"


def task_metadata(task_file):
    """The ``metadata`` of a task file harness.py wrote (its values are JSON scalars)."""
    with open(task_file, encoding="utf-8") as handle:
        text = handle.read()
    block = text.split("\nmetadata:\n", 1)[1]
    return {match.group(1): json.loads(match.group(2))
            for match in re.finditer(r"^  (\w+): (.*)$", block, re.M)}


def harness_output(out, task_folder, answer, model="org/model-a", limit=None,
                   model_args=None, foreign=(), benchmarks=None):
    """Write one harness run of the task folder's tasks into ``out`` ->
    the model folder.  ``answer(benchmark, doc)`` is the model's text;
    ``limit`` the first rows run; ``foreign``: (task, samples) of other tasks."""
    with open(os.path.join(task_folder, SETTINGS_FILE), encoding="utf-8") as handle:
        settings = json.load(handle)
    functions = task_functions(settings)
    args = dict(model_args or {"base_url": "http://127.0.0.1:8000/v1/chat/completions",
                               "model": model})
    folder = os.path.join(out, model.replace("/", "__"))
    os.makedirs(folder, exist_ok=True)
    results = {"results": {}, "group_subtasks": {}, "configs": {}, "versions": {},
               "n-shot": {}, "higher_is_better": {}, "n-samples": {},
               "config": {"model": "local-chat-completions", "model_args": args,
                          "batch_size": 1, "limit": limit, "gen_kwargs": {}},
               "git_hash": "0123abc", "lm_eval_version": "0.4.13", "model_name": model,
               "model_name_sanitized": model.replace("/", "__"),
               "system_instruction": None, "system_instruction_sha": None,
               "chat_template": "", "chat_template_sha": None}
    for benchmark, task in TASKS.items():
        if task not in settings["tasks"] or (benchmarks and benchmark not in benchmarks):
            continue
        data = os.path.join(task_folder, task + ".jsonl")
        with open(data, encoding="utf-8") as handle:
            docs = [json.loads(line) for line in handle]
        run = docs[:limit] if limit else docs
        keys = [metric.key for metric in benchmark_metrics(benchmark)]
        items = {key: [] for key in keys}
        generation = {"until": [], "max_gen_toks": settings["max_gen_toks"],
                      "do_sample": False, "temperature": 0.0}
        with open(os.path.join(folder, "samples_%s_%s.jsonl" % (task, DATE)), "w",
                  encoding="utf-8") as samples:
            for doc_id, doc in enumerate(run):
                text = answer(benchmark, doc)
                values = functions[process_name(benchmark)](doc, [text])
                for key in keys:
                    items[key].append(values[key])
                messages = [{"role": "system", "content": doc["system_prompt"]},
                            {"role": "user", "content": doc["sft_prompt"]}]
                line = {"doc_id": doc_id, "doc": doc, "target": doc["sft_label"],
                        "arguments": {"gen_args_0": {"arg_0": json.dumps(messages),
                                                     "arg_1": generation}},
                        "resps": [[text]], "filtered_resps": [text], "filter": "none",
                        "metrics": keys}
                line.update(values)
                samples.write(json.dumps(line, ensure_ascii=False) + "\n")
        entry = {"alias": task, "sample_len": len(run)}
        for key in keys:
            entry[key + ",none"] = functions[aggregation_name(benchmark, key)](items[key])
            entry[key + "_stderr,none"] = "N/A"
        metadata = task_metadata(os.path.join(task_folder, task + ".yaml"))
        metadata.update(args, config_source=os.path.join(task_folder, task + ".yaml"))
        results["results"][task] = entry
        results["configs"][task] = {"task": task, "dataset_path": "json",
                                    "dataset_kwargs": {"data_files": {"test": data}},
                                    "generation_kwargs": generation, "metadata": metadata}
        results["n-shot"][task] = 0
        results["n-samples"][task] = {"original": len(docs), "effective": len(run)}
    for task, count in foreign:
        results["results"][task] = {"alias": task, "acc,none": 0.5}
        results["configs"][task] = {"task": task, "metadata": {"version": 1.0}}
        results["n-samples"][task] = {"original": count, "effective": count}
        with open(os.path.join(folder, "samples_%s_%s.jsonl" % (task, DATE)), "w") as handle:
            for doc_id in range(count):
                handle.write(json.dumps({"doc_id": doc_id, "doc": {"q": "x"},
                                         "resps": [["y"]], "acc": 0.5}) + "\n")
    with open(os.path.join(folder, "results_%s.json" % DATE), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, ensure_ascii=False)
    return folder
