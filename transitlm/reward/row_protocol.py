"""The protocol a training row is scored under: the one ``reward.py prepare``
recorded in it, unless the reward's configuration names one.

``prepare`` writes the protocol it judged the labels by into every row, as
it writes the network (transitlm.reward.binding): the key ``protocol``,
text, in every layout (TRL's columns, verl's ground truth, OpenRLHF's
label), so a dataset mixing the four benchmarks can carry the general LLM
under ``paper`` and the others under ``reference``.

The reward (every adapter and the service: they call
transitlm.reward.scoring.score) scores a row under

1. the configured protocol -- a keyword (verl's ``reward_kwargs``,
   ``make_reward``, score()'s ``protocol=``), ``reward.py serve
   --protocol``, or ``$TRANSITLM_REWARD_PROTOCOL`` -- when there is one; a
   row that names another is said once per process and pair in the log
   (the logger ``transitlm.reward``; without logging set up, one line on
   stderr), not once per row;
2. else the row's own ``protocol``;
3. else (a row prepared by an earlier version, or a release CSV row)
   ``DEFAULT``, reference, as before.

A row whose ``protocol`` names no protocol, used because nothing is
configured, is the user's data that cannot be scored: RowDataError.

``LabelShares`` is prepare's side: how many labels of each benchmark pass
every check under each protocol, and the refusal of a file whose labels
mostly fail under the protocol chosen (docs/reward.md).

Standard library only; Python 3.8+.
"""

import logging
import threading

from common import PROTOCOLS
from transitlm.reward.rows import RowDataError, text_cell
from transitlm.io.terminal import quoted

KEY = "protocol"
DEFAULT = "reference"
# A file whose labels pass every check under the chosen protocol less often
# than this (per cent, for one of its benchmarks) is refused unless the
# protocol was chosen on the command line or --allow_failing_labels is given.
MIN_PASSING_PERCENT = 90
ALLOW_FLAG = "--allow_failing_labels"

LOG = logging.getLogger("transitlm.reward")
_NOTED = set()
_NOTING = threading.Lock()


def own_protocol(row):
    """The protocol ``row`` (a dict) names, stripped text; "" for none (no
    key, an empty or missing cell)."""
    value = row.get(KEY)
    if value is None:
        return ""
    if not isinstance(value, str):
        value = text_cell(value)        # NaN, pandas' NA: "", bytes as text
    return value.strip()


def chosen(row, configured=None):
    """The protocol to score ``row`` under: ``configured`` when given (a row
    naming another is noted once), else the row's own, else DEFAULT.
    RowDataError for a row's own value that names no protocol."""
    own = own_protocol(row) if KEY in row else ""
    if configured is not None:
        if own and own != configured:
            note_override(configured, own)
        return configured
    if not own:
        return DEFAULT
    if own not in PROTOCOLS:
        raise RowDataError("the row's %s %s names no protocol (%s)"
                           % (KEY, quoted(own), ", ".join(sorted(PROTOCOLS))))
    return own


def note_override(configured, own):
    """Say once per process, for this pair, that rows prepared for ``own``
    are scored under ``configured``."""
    pair = (configured, own)
    if pair in _NOTED:
        return
    with _NOTING:
        if pair in _NOTED:
            return
        _NOTED.add(pair)
    LOG.warning("transitlm reward: rows prepared for the %s protocol are scored under %s, "
                "the protocol configured (a keyword, --protocol or "
                "$TRANSITLM_REWARD_PROTOCOL); said once per process",
                quoted(own) if own not in PROTOCOLS else own, configured)


# ---------------------------------------------------------------------------
# prepare: the labels that pass under each protocol
# ---------------------------------------------------------------------------

def passes(record):
    """Does a label judged as its own answer pass every check?"""
    return bool(record) and record.get("status") == "evaluated" \
        and not record.get("failure_codes")


def enough(passing, total):
    """Do ``passing`` of ``total`` labels make MIN_PASSING_PERCENT (in whole numbers:
    63 of 70 is 90 %)?"""
    return 100 * passing >= MIN_PASSING_PERCENT * total


def share_text(passing, total):
    return "%d of %d (%d %%)" % (passing, total, (100 * passing) // total if total else 0)


class LabelShares(object):
    """How many labels of each benchmark pass every check, under each
    protocol (each label judged once per protocol as its own answer)."""

    def __init__(self, protocol):
        self.protocol = protocol            # the one the rows are prepared for
        self.totals = {}                    # benchmark -> labels
        self.passing = {}                   # (benchmark, protocol) -> labels passing

    def add(self, benchmark, records):
        """One label: ``records`` {protocol: its record, or None when it
        could not be judged}."""
        self.totals[benchmark] = self.totals.get(benchmark, 0) + 1
        for protocol, record in records.items():
            key = (benchmark, protocol)
            self.passing[key] = self.passing.get(key, 0) + int(passes(record))

    def count(self, benchmark, protocol):
        return self.passing.get((benchmark, protocol), 0)

    def short(self):
        """-> [(benchmark, others)]: the benchmarks whose labels pass under
        the chosen protocol less often than MIN_PASSING_PERCENT, each with
        the other protocols and their counts, the best first."""
        found = []
        for benchmark in sorted(self.totals):
            total = self.totals[benchmark]
            if enough(self.count(benchmark, self.protocol), total):
                continue
            others = sorted(((self.count(benchmark, protocol), protocol)
                             for (name, protocol) in self.passing
                             if name == benchmark and protocol != self.protocol),
                            key=lambda item: (-item[0], item[1]))
            found.append((benchmark, others))
        return found

    def problem(self, path, explicit=False, allowed=False):
        """-> (the line that refuses the file, or None; warnings).  A file
        whose labels of one benchmark pass under the chosen protocol less
        often than MIN_PASSING_PERCENT is refused unless the protocol was
        chosen (``explicit``) or failing labels are ``allowed``; then each
        such benchmark is a warning."""
        warnings = []
        least = "fewer than %d %%" % MIN_PASSING_PERCENT
        for benchmark, others in self.short():
            total = self.totals[benchmark]
            said = "%s %s labels pass every check under the %s protocol, %s" % (
                share_text(self.count(benchmark, self.protocol), total), benchmark,
                self.protocol, least)
            elsewhere = "".join("; under %s %s" % (protocol, share_text(count, total))
                                for count, protocol in others)
            if explicit or allowed:
                warnings.append(said + elsewhere)
                continue
            better = [protocol for count, protocol in others if enough(count, total)]
            if better:
                return ("input file %s: %s%s pass: give --protocol %s (or --protocol %s, "
                        "or %s, to prepare them under %s anyway)"
                        % (path, said, elsewhere, better[0], self.protocol, ALLOW_FLAG,
                           self.protocol)), []
            return ("input file %s: %s%s: is the station file the one the file was built "
                    "on? (%s, or --protocol %s, prepares them anyway)"
                    % (path, said, elsewhere, ALLOW_FLAG, self.protocol)), []
        return None, warnings
