"""A row of a file checked before a trainer or the harness gets it: judged
once by the evaluator with its own label as the answer, so that a row nothing
can be scored against (a prompt or label that is not JSON, nested too deep,
empty; a req_type that is not a whole number) stops the command that writes
it with one line, rather than failing every completion during training.

Standard library only; Python 3.8+.
"""

from common import InputError
from transitlm.reward.rows import RowDataError
from transitlm.reward.scoring import scorer_for


def label_record(row, benchmark, where, scorer=None, protocol="reference", station_info=None,
                 line_info=None):
    """The record of ``row`` (a dict of the release's cells) judged with its
    own ``sft_label`` as the answer, by ``scorer`` or the Scorer of these
    settings -> the record (its verdicts say what the label passes).
    InputError "<where>: <the field and why>" for a row that cannot be scored
    against."""
    if scorer is None:
        scorer = scorer_for(benchmark, protocol, station_info, line_info)
    try:
        return scorer.record(row.get("sft_label"), row)
    except RowDataError as exc:
        raise InputError("%s: %s" % (where, exc))
