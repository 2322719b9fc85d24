"""What makes the figures of runs comparable (issue 22).

The signature of a report names what its figures depend on: version,
benchmark, protocol, field, row count and the hashes of the test file and the
station file (and line file) -- not the predictions.  Reports of an older
schema carry a ``predictions:<hash>`` part; it is left out here, so two models
scored on the same test file share one signature whatever the schema.

Whether runs may be compared at all is decided on the full hashes of their
input files (report.json ``inputs.sha256``), not on the signature's text.

Standard library only; Python 3.8+.
"""

PREDICTIONS_PART = "predictions:"

# Files whose hashes must agree, with their names in messages.
COMPARED_FILES = (("input", "test file"), ("station_info", "station file"),
                  ("line_info", "line file"))


def comparable_signature(signature):
    """A report's signature without its predictions part; None if it has none."""
    if not isinstance(signature, str):
        return None
    return "|".join(part for part in signature.split("|")
                    if not part.startswith(PREDICTIONS_PART))


def shared_signature(runs):
    """The comparable signature every run shares, or None when they differ
    (or a run has none)."""
    signatures = {comparable_signature(run.report.get("signature")) for run in runs}
    if len(signatures) == 1:
        return signatures.pop()
    return None


def short(digest):
    return digest[:8] if digest else "none"


def input_differences(runs):
    """Input files that differ between runs, by hash:
    [(file label, [(short hash, [run names])...])...]; and the names of runs
    whose report records no hashes (not checked)."""
    known = [run for run in runs if run.hashes is not None]
    unchecked = [run.name for run in runs if run.hashes is None]
    differences = []
    for key, label in COMPARED_FILES:
        by_hash = {}
        for run in known:
            by_hash.setdefault(run.hashes[key], []).append(run.name)
        if len(by_hash) > 1:
            differences.append((label, [(short(digest), names)
                                        for digest, names in by_hash.items()]))
    return differences, unchecked


def describe_difference(label, groups):
    """'test file: 08c86492 (a, c), 1234abcd (b)'"""
    return "%s: %s" % (label, ", ".join("%s (%s)" % (digest, ", ".join(names))
                                        for digest, names in groups))


def comparability_notes(runs, allow_different):
    """Notes on the runs' inputs; CompareError-worthy text when they differ
    and that is not allowed.  -> (notes, refusal or None)."""
    differences, unchecked = input_differences(runs)
    notes = []
    refusal = None
    if differences:
        what = "; ".join(describe_difference(label, groups) for label, groups in differences)
        if allow_different:
            notes.append("NOT COMPARABLE: the runs were scored on different input files (%s); "
                         "compared anyway because of --allow_different_inputs" % what)
        else:
            names = []
            for _, groups in differences:
                for _, group_names in groups:
                    names.extend(n for n in group_names if n not in names)
            refusal = ("runs %s were scored on different input files (%s): their figures are "
                       "not comparable (--allow_different_inputs compares them anyway)"
                       % (", ".join(names), what))
    if unchecked and len(runs) > 1:
        notes.append("%s record(s) no input hashes (report.json inputs.sha256): not checked "
                     "that the runs share their test file and station file"
                     % ", ".join(unchecked))
    return notes, refusal
