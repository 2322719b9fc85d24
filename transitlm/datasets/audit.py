"""The corpus audit: every record of every part checked and counted, the one
rule whether the record is checked where it is made (a worker's task) or read
back from a part another run built.

``CorpusAudit.add(part, number, kind, code, text, record_json, check_text)``
takes one record as it stands in its part's CSV (the record as JSON text):
its text states it (unless ``check_text`` is false: its task checked that as
it made the text), its stops and lines are the network's, a session is not
near a test trip and none of its routes rides a held-out pair; it adds the
record to the statistics and to the tallies of stations and line directions.
Audits merge (``merge``), so the tasks of a part each audit their records and
the run adds their audits in the part's order.  ``finish(nets)`` makes the
checks of the whole corpus (the hold-out broken nowhere; every station and
line direction exactly once).

Standard library only; Python 3.8+.
"""

import collections
import json

from common import InputError
from transitlm.datasets import corpus_texts, statistics
from transitlm.datasets import release_names as names
from transitlm.datasets.splits import label_pair


class CorpusAudit(object):
    """The checks and counts of corpus records (see the module's docstring)."""

    def __init__(self):
        self.records = 0
        self.checked = {"sessions": 0, "routes": 0, "pairs_held": 0, "near": 0}
        self.stations = collections.Counter()
        self.lines = collections.Counter()
        self.stats = statistics.DatasetStatistics()

    def add(self, ctx, part, number, kind, code, text, record_json, check_text=True):
        """One record of corpus part ``part`` (its CSV cells); an InputError
        names the part and the record when a check fails."""
        try:
            record = json.loads(record_json)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise InputError("%s record %s: its record is not a JSON object"
                             % (names.corpus_part(part), number))
        ok, reason = corpus_texts.text_states_record(kind, text, record) if check_text \
            else (True, "")
        if ok:
            net = ctx.net_of.get(code)
            ok, reason = (False, "names ad_code %s, of no network" % code) if net is None \
                else corpus_texts.record_matches_network(kind, record, net)
        if not ok:
            raise InputError("%s record %s: %s" % (names.corpus_part(part), number, reason))
        try:
            self._count(ctx, kind, text, record)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise InputError("%s record %s: the record is not a %s record (%s: %s)"
                             % (names.corpus_part(part), number, kind, type(exc).__name__, exc))

    def _count(self, ctx, kind, text, record):
        # What the counts need, read from the record first (a record that is
        # not one stops the run: add() makes it one line).
        if kind == "station":
            key = record["stop_id"]
        elif kind == "line":
            key = record["line_name"]
        else:
            holdout = ctx.holdout
            start = tuple(float(v) for v in record["start"].split(","))
            end = tuple(float(v) for v in record["end"].split(","))
            near = holdout.near(start, end)
            held = [holdout.held_pair(label_pair(route)) for route in record["routes"]]
        self.stats.add_corpus_record(kind, text, record)
        self.records += 1
        if kind == "station":
            self.stations[key] += 1
        elif kind == "line":
            self.lines[key] += 1
        else:
            checked = self.checked
            checked["sessions"] += 1
            checked["near"] += near
            checked["routes"] += len(held)
            checked["pairs_held"] += sum(held)

    def merge(self, other):
        """Add another audit's checks and counts to these."""
        self.records += other.records
        for key, value in other.checked.items():
            self.checked[key] += value
        self.stations.update(other.stations)
        self.lines.update(other.lines)
        self.stats.merge(other.stats)

    def finish(self, nets):
        """The checks of the whole corpus -> the figures checked; an InputError
        when the hold-out is broken or a station or line direction is not
        there exactly once."""
        checked = self.checked
        if checked["near"] or checked["pairs_held"]:
            raise InputError("the corpus breaks the hold-out (%d sessions near a test trip, %d "
                             "routes with a held-out pair): remove %s and run again"
                             % (checked["near"], checked["pairs_held"], names.CORPUS_FOLDER))
        all_ids = [i for net in nets for i in net.ids]
        if sorted(self.stations) != sorted(all_ids) or any(c != 1 for c in self.stations.values()):
            raise InputError("the corpus does not hold every station exactly once: remove %s and "
                             "run again" % names.CORPUS_FOLDER)
        want_lines = collections.Counter(ld.name for net in nets for ld in net.linedirs)
        if self.lines != want_lines:
            raise InputError("the corpus does not hold every line direction exactly once: remove "
                             "%s and run again" % names.CORPUS_FOLDER)
        return dict(checked)
