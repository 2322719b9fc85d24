"""Compare a report with a parity golden (../shared/parity, see its README).

A golden integer must be equal; a float is stored as [value, decimals] and ours
must round to it (|ours - value| <= 0.5 * 10**-decimals, with a hair of slack
for binary representation).
"""

import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
PARITY = os.path.join(SHARED, "parity")


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


def load_golden(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as handle:
        return json.load(handle)
