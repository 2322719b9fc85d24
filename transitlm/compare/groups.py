"""Runs of several benchmarks (issue 24): how runs are named (the name a run
is matched by across benchmarks), grouped by benchmark and protocol, and the
whole comparison (the --json result): one group per benchmark and protocol,
and the main table over them.

Naming, per run, the first that applies:

1. ``--names``: one name per run, in order.  Runs of different benchmarks with
   the same name are the same model; two runs of one group may not share one.
2. The model the run folder records (``run.json`` ``generation.model``).
3. The folder name (for a details file given alone: its name without
   ``.jsonl``).

Within a group, names must differ: runs whose recorded model is the same fall
back to their folder names, then to their paths, then get ``#2``, ``#3``
(always with a note).  Nothing is paired by guessing: runs named by their
folders are matched only when the folder names are equal (runs/b1/qwen and
runs/b2/qwen are; runs/qwen-b1 and runs/qwen-b2 are not -- use --names).

Standard library only; Python 3.8+.
"""

import os

from transitlm.compare.group_figures import SCHEMA_VERSION, compare_group
from transitlm.compare.main_table import main_table
from transitlm.evaluation.catalog import BENCHMARK_NAMES
from transitlm.compare.run_folders import CompareError

# Where a run's name came from.
FROM_NAMES, FROM_MODEL, FROM_FOLDER = "names", "model", "folder"


def default_name(path):
    """The folder name of a run folder; a details file's name without .jsonl."""
    path = os.path.normpath(path)
    if os.path.isdir(path):
        return os.path.basename(os.path.abspath(path))
    base = os.path.basename(path)
    return base[:-len(".jsonl")] if base.endswith(".jsonl") else os.path.splitext(base)[0]


def given_names(names_option, count):
    """--names a,b,... -> list of names; CompareError for a wrong count or an
    empty name."""
    names = [name.strip() for name in names_option.split(",")]
    if len(names) != count:
        raise CompareError("--names gives %d name(s) for %d run(s)" % (len(names), count))
    if any(not name for name in names):
        raise CompareError("--names has an empty name")
    return names


def group_key(run):
    return (run.benchmark, run.protocol)


def group_runs(runs):
    """Runs -> lists of runs of one benchmark and protocol: benchmarks in the
    paper's order, protocols in the order they first appear; runs in the
    order given."""
    groups = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    protocols = []
    for run in runs:
        if run.protocol not in protocols:
            protocols.append(run.protocol)
    order = sorted(groups, key=lambda key: (BENCHMARK_NAMES.index(key[0]), protocols.index(key[1])))
    return [groups[key] for key in order]


def name_runs(runs, names_option=None):
    """Set every run's name (see the module's docstring) -> notes."""
    notes = []
    if names_option is not None:
        for run, name in zip(runs, given_names(names_option, len(runs))):
            run.name, run.name_from = name, FROM_NAMES
        for group in group_runs(runs):
            seen = set()
            for run in group:
                if run.name in seen:
                    raise CompareError("--names repeats %s within benchmark %s (protocol %s): "
                                       "runs of one benchmark need different names"
                                       % (run.name, run.benchmark, run.protocol))
                seen.add(run.name)
        return notes
    for run in runs:
        if run.model is not None:
            run.name, run.name_from = run.model, FROM_MODEL
        else:
            run.name, run.name_from = default_name(run.path), FROM_FOLDER
    for group in group_runs(runs):
        clashing = _clashes(group)
        fallen = [run for run in clashing if run.name_from == FROM_MODEL]
        if fallen:
            notes.append("%s record the same model in run.json (%s): named by their folders"
                         % (", ".join(os.path.normpath(run.path) for run in fallen),
                            ", ".join(sorted({run.name for run in fallen}))))
        for run in fallen:
            run.name, run.name_from = default_name(run.path), FROM_FOLDER
        for run in _clashes(group):
            run.name = os.path.normpath(run.path)
        seen = {}
        for run in group:
            count = seen.get(run.name, 0) + 1
            seen[run.name] = count
            if count > 1:
                suffix = count
                while "%s#%d" % (run.name, suffix) in seen:
                    suffix += 1
                run.name = "%s#%d" % (run.name, suffix)
                seen[run.name] = 1
    return notes


def _clashes(group):
    counts = {}
    for run in group:
        counts[run.name] = counts.get(run.name, 0) + 1
    return [run for run in group if counts[run.name] > 1]


def model_order(runs):
    """Names in the order their runs were given (each once)."""
    names = []
    for run in runs:
        if run.name not in names:
            names.append(run.name)
    return names


def compare(runs, baseline, resamples, seed, confidence, by=(), allow_different=False,
            names_option=None):
    """The whole comparison: the --json result (docs/comparison.md)."""
    notes = name_runs(runs, names_option)
    models = model_order(runs)
    baseline = runs[0].name if baseline is None else baseline
    if baseline not in models:
        raise CompareError("--baseline %s is not one of the runs (%s)"
                           % (baseline, ", ".join(models)))
    groups = group_runs(runs)
    benchmarks = {group[0].benchmark for group in groups}
    if "req_type" in by:
        if "personalized" not in benchmarks:
            raise CompareError("--by req_type needs benchmark 2 (personalized) runs, these are %s"
                               % ", ".join(sorted(benchmarks)))
        if len(benchmarks) > 1:
            notes.append("--by req_type is shown for benchmark 2 (personalized) only: the "
                         "other benchmarks have no preference types")
    if len(groups) > 1 and any(run.name_from == FROM_FOLDER for run in runs):
        notes.append("runs without --names or a model recorded in run.json are named by their "
                     "folders (%s): runs of different benchmarks are matched only when those "
                     "names are equal"
                     % ", ".join(run.name for run in runs if run.name_from == FROM_FOLDER))
    results = []
    for group in groups:
        names = [run.name for run in group]
        results.append(compare_group(group, baseline if baseline in names else None,
                                     resamples, seed, confidence, by, allow_different))
    result = {"schema_version": SCHEMA_VERSION, "confidence": confidence,
              "bootstrap": resamples, "seed": seed, "baseline": baseline, "models": models,
              "allow_different_inputs": bool(allow_different)}
    if len(results) == 1:
        group = dict(results[0])
        group["notes"] = notes + group["notes"]
        del group["baseline"]
        result.update(group)
    else:
        result["notes"] = notes
        result["groups"] = results
    result["main_table"] = main_table(results, models, baseline, confidence)
    return result


def groups_of(result):
    """The groups of a result: its "groups", or the result itself (one group)."""
    groups = result.get("groups")
    return groups if isinstance(groups, list) else [result]
