"""What makes the figures of runs comparable (issue 22).

The signature of a report names what its figures depend on: version,
benchmark, protocol, row count, the hashes of the test file and the station
file (and line file), and the prompt the answers were asked with -- not the
predictions.  Reports of an older schema carry a ``predictions:<hash>`` part;
it is left out here, so two models scored on the same test file share one
signature whatever the schema.  Reports of 1.3.0 and older also name the
scored column (``field:<column>``); later ones leave it to
``inputs.input_field`` (provenance, not comparability), so the labels and a
model share a signature too.

The prompt part (transitlm.evaluation.chat_messages.signature_part) is compared between the
runs that name a prompt: ``prompt:none`` (the labels, asked nothing) and
``prompt:unknown`` (answers whose prompt nothing records) agree with any;
runs asked different questions do not share a signature, and a note says so.

Whether runs may be compared at all is decided on the full hashes of their
input files (report.json ``inputs.sha256``), not on the signature's text.

Standard library only; Python 3.8+.
"""

from transitlm.io.files import REPORT_JSON
from transitlm.evaluation.chat_messages import SIGNATURE_PREFIX, asked

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


def prompt_part(signature):
    """(the signature without its prompt part, the prompt part or None)."""
    parts = signature.split("|")
    prompts = [part for part in parts if part.startswith(SIGNATURE_PREFIX)]
    return ("|".join(part for part in parts if not part.startswith(SIGNATURE_PREFIX)),
            prompts[0] if prompts else None)


def shared_signature(runs):
    """The comparable signature every run shares, or None when they differ
    (or a run has none).  Runs that name no prompt (the labels, answers of
    unknown prompt) share it with the runs that do; the signature shown is
    then that of a run that names its prompt."""
    signatures = [comparable_signature(run.report.get("signature")) for run in runs]
    if not signatures or None in signatures:
        return None
    split = [prompt_part(signature) for signature in signatures]
    named = set(prompt for _, prompt in split if asked(prompt))
    if len(set(base for base, _ in split)) != 1 or len(named) > 1:
        return None
    for signature, (_, prompt) in zip(signatures, split):
        if asked(prompt):
            return signature
    return signatures[0]


def prompt_notes(runs):
    """Notes on what the runs were asked: different system prompts (named by
    source and short hash, with their runs), and runs of unknown prompt
    beside runs of a known one."""
    by_prompt = {}
    unknown = []
    for run in runs:
        signature = comparable_signature(run.report.get("signature"))
        prompt = prompt_part(signature)[1] if signature else None
        if asked(prompt):
            by_prompt.setdefault(prompt[len(SIGNATURE_PREFIX):], []).append(run.name)
        elif prompt != SIGNATURE_PREFIX + "none":
            unknown.append(run.name)
    notes = []
    if len(by_prompt) > 1:
        notes.append("the runs were asked different questions (system prompts %s): their "
                     "figures differ by model and prompt together"
                     % ", ".join("%s (%s)" % (prompt, ", ".join(names))
                                 for prompt, names in by_prompt.items()))
    if by_prompt and unknown:
        notes.append("%s record(s) no prompt (predictions without generate.py's settings "
                     "file): not checked that they were asked what the others were"
                     % ", ".join(unknown))
    return notes


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
    if len(runs) > 1:
        notes.extend(prompt_notes(runs))
    if unchecked and len(runs) > 1:
        notes.append("%s record(s) no input hashes (%s inputs.sha256): not checked "
                     "that the runs share their test file and station file"
                     % (", ".join(unchecked), REPORT_JSON))
    return notes, refusal
