"""Parity goldens (../shared/parity, see its README): golden figures compared with ours, the case sets."""

import json
import os

from tests.support import PARITY


def golden_differences(golden, ours, path=""):
    """List of human-readable mismatches between a golden and our report."""
    problems = []
    if isinstance(golden, dict):
        if not isinstance(ours, dict):
            return ["%s: expected an object, got %r" % (path or "/", ours)]
        for key, value in golden.items():
            where = "%s/%s" % (path, key)
            if key not in ours:
                problems.append("%s: missing" % where)
            else:
                problems.extend(golden_differences(value, ours[key], where))
        return problems
    if isinstance(golden, list) and len(golden) == 2 and isinstance(golden[1], int) \
            and isinstance(golden[0], (int, float)):
        value, decimals = golden
        if not isinstance(ours, (int, float)) or isinstance(ours, bool):
            return ["%s: expected %s, got %r" % (path, value, ours)]
        if abs(ours - value) > 0.5 * 10 ** -decimals + 1e-12:
            return ["%s: expected %.*f, got %r" % (path, decimals, value, ours)]
        return []
    if golden != ours:
        return ["%s: expected %r, got %r" % (path, golden, ours)]
    return []


def parity_cases(golden_name, sample_name):
    """(case name, folder) of every parity case set with both files."""
    if not os.path.isdir(PARITY):
        return []
    out = []
    for name in sorted(os.listdir(PARITY)):
        folder = os.path.join(PARITY, name)
        if os.path.isfile(os.path.join(folder, golden_name)) and \
                os.path.isfile(os.path.join(folder, sample_name)):
            out.append((name, folder))
    return out


# Each benchmark's test file in a parity case set.
PARITY_FILES = {"single_route": "b1.csv", "personalized": "b2.csv", "diversity": "b3.csv",
                "general_llm": "general.csv"}


def case_sets():
    """(name, folder, {benchmark: test file}) of the bundled data and every
    parity case set (each folder holds its station_info.csv and line_info.csv)."""
    from transitlm.evaluation.catalog import DATA_DIR, benchmark_info
    sets = [("bundled", DATA_DIR, {name: os.path.join(DATA_DIR, benchmark_info(name).default_input)
                                   for name in PARITY_FILES})]
    if os.path.isdir(PARITY):
        for name in sorted(os.listdir(PARITY)):
            folder = os.path.join(PARITY, name)
            files = {bench: os.path.join(folder, short) for bench, short in PARITY_FILES.items()
                     if os.path.isfile(os.path.join(folder, short))}
            if files and os.path.isfile(os.path.join(folder, "station_info.csv")):
                sets.append((name, folder, files))
    return sets


def check_every_case_set(test, check):
    """``check(name, folder, files, protocol)`` -> rows checked, on every case
    set (case_sets) under both protocols, a subTest each -> the rows checked in all."""
    total = 0
    for name, folder, files in case_sets():
        for protocol in ("reference", "paper"):
            with test.subTest(case=name, protocol=protocol):
                total += check(name, folder, files, protocol)
    return total


def load_golden(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as handle:
        return json.load(handle)
