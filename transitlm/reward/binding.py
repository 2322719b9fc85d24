"""A training row bound to its network: ``reward.py prepare`` writes, in every
row, which station (and line) file the benchmark belongs to and its SHA-256;
the reward scores a bound row on that file when none is configured, and
refuses it (RowDataError, a 422 in the service) when the configured
network's hash differs from the row's.

The row's keys (flat text, the same in every row, so TRL's four files load
as one ``datasets`` dataset):

    network_station_info     the station file's absolute path when prepared
    network_station_sha256   its SHA-256
    network_line_info        the line file's path ("" when none)
    network_line_sha256      its SHA-256 ("" when none)

Functions here return a problem (an English line) or None; the caller
(transitlm.reward.scoring) raises.  The hot path costs a dictionary lookup
for a row without a binding and a string comparison for one with it: the
station file's hash is the one computed when the scorer loaded it, the line
file's is computed once per process.

``PrepareCheck`` is prepare's side: the labels' stations against the network
(transitlm.evaluation.network_check), the network record beside the file, and how many
labels pass every check of their benchmark under the chosen protocol.

Standard library only; Python 3.8+.
"""

import os

from transitlm.evaluation.network_check import (
    FLAG, LabelStations, cached_sha256, enforce, record_verdict, station_verdict)

STATION_PATH = "network_station_info"
STATION_SHA = "network_station_sha256"
LINE_PATH = "network_line_info"
LINE_SHA = "network_line_sha256"
KEYS = (STATION_PATH, STATION_SHA, LINE_PATH, LINE_SHA)

_LINE_HASHES = {}


def row_fields(station_path, line_path=None):
    """The binding keys of a row prepared on these files."""
    fields = {STATION_PATH: os.path.abspath(station_path),
              STATION_SHA: cached_sha256(station_path), LINE_PATH: "", LINE_SHA: ""}
    if line_path:
        fields[LINE_PATH] = os.path.abspath(line_path)
        fields[LINE_SHA] = cached_sha256(line_path)
    return fields


def _text(row, key):
    value = row.get(key)
    return value.strip() if isinstance(value, str) else ""


def bound_files(row, station_info, line_info, configured):
    """The station and line files to score ``row`` on -> (station, line,
    problem).  ``configured``: a station file was set (an argument or the
    environment); then it is used and checked (``mismatch``), else the row's."""
    if not _text(row, STATION_SHA) or configured:
        return station_info, line_info, None
    path = _text(row, STATION_PATH)
    if not path or not os.path.isfile(path):
        return station_info, line_info, (
            "the row is bound to the station file %s (SHA-256 %s), which is not here: "
            "configure the station file it was prepared with (station_info, or $%s)"
            % (path or "(no path)", _text(row, STATION_SHA)[:12], "TRANSITLM_STATION_INFO"))
    line = line_info or _text(row, LINE_PATH) or None
    return path, line, None


def mismatch(row, scorer):
    """Why ``row`` cannot be scored by ``scorer`` (its network differs from
    the one the row was prepared on), or None."""
    sha = _text(row, STATION_SHA)
    if not sha:
        return None
    network = scorer.context.network
    if network.sha256 != sha:
        return ("the row was prepared on the station file %s (SHA-256 %s), not on %s "
                "(SHA-256 %s): score it on its own network"
                % (_text(row, STATION_PATH), sha[:12], network.path,
                   (network.sha256 or "none")[:12]))
    line_sha = _text(row, LINE_SHA)
    line_path = scorer.line_info
    if line_sha and line_path:
        digest = _LINE_HASHES.get(line_path)
        if digest is None:
            digest = _LINE_HASHES[line_path] = cached_sha256(line_path)
        if digest != line_sha:
            return ("the row was prepared on the line file %s (SHA-256 %s), not on %s "
                    "(SHA-256 %s): score it on its own network"
                    % (_text(row, LINE_PATH), line_sha[:12], line_path, digest[:12]))
    return None


class PrepareCheck(object):
    """What prepare learns of its rows' network: the labels' stations in the
    station file, and the labels that pass every check of their benchmark
    (each label judged once as its own answer, under ``protocol``)."""

    def __init__(self, scorer_of, station_path, line_path, allowed=False, protocol="reference"):
        self.protocol = protocol
        self.scorer_of = scorer_of          # benchmark -> its Scorer
        self.station_path = station_path
        self.line_path = line_path
        self.allowed = allowed
        self.fields = row_fields(station_path, line_path)
        self.stations = {}                  # by_name -> LabelStations
        self.labels = 0
        self.passing = 0
        self.warnings = []

    def add(self, benchmark, row, record=None):
        """One prepared row (a dict with sft_prompt, sft_label...): counted,
        then given the binding keys.  ``record``: the row's record with its
        label as the answer, when the caller judged it already (else it is
        judged here)."""
        scorer = self.scorer_of(benchmark)
        by_name = benchmark == "general_llm"
        stations = self.stations.get(by_name)
        if stations is None:
            stations = self.stations[by_name] = LabelStations(
                scorer.context.network, by_name,
                names=scorer.benchmark.label_station_names(scorer.context) if by_name else None)
        stations.add_text(row.get("sft_label"))
        self.labels += 1
        if record is None:
            try:
                record = scorer.record(row.get("sft_label"), row)
            except ValueError:              # RowDataError: a row the reward cannot judge
                record = {}
        if record.get("status") == "evaluated" and not record.get("failure_codes"):
            self.passing += 1
        row.update(self.fields)

    def finish(self, path):
        """After the rows: InputError (one line) when the file is not on this
        network, unless allowed; else the warnings it leaves."""
        flag = "--" + FLAG
        warnings = enforce(record_verdict(path, self.fields[STATION_SHA],
                                          self.fields[LINE_SHA] or None), self.allowed, flag)
        counts = [stations.counts() for stations in self.stations.values()]
        known, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
        warnings += enforce(station_verdict(known, total, self.station_path), self.allowed, flag)
        self.warnings = warnings
        return warnings
