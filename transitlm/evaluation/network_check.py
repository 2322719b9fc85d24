"""Does a test file belong to the station network it is scored on?

A benchmark built for one city and scored against another city's station
file gives calm, wrong figures: its labels themselves "fail".  Two checks
say so before a figure is printed, and every tool that scores or prepares
rows calls them (the evaluators through transitlm.evaluation.engine, the harness, the
reward's prepare, generate.py --evaluate):

- the labels' stations: stop ids (benchmarks 1-3) or station names (the
  general LLM, matched by the evaluator's name rules of common.py: the exact
  name, else a name of bigram Jaccard at least MIN_STATION_SIMILARITY) looked
  up in the station file.  ``station_verdict`` turns the counts into a
  Verdict: most missing refuses the run, some missing is a warning;
- the network record: ``data/make_benchmark.py`` writes ``network.json``
  beside the files it builds (the station and line files' SHA-256);
  ``record_verdict`` compares it with the files given.

A refusal is lifted by ``--allow_foreign_network`` (``allow_foreign_network=``
in the Python API); the run then carries the reason among its warnings.

Stations are counted once each, however many labels name them.  An
evaluator reads the labels of the first SAMPLE_HEAD rows and then of one row
in SAMPLE_STRIDE (the check must cost under 2 % of a run); the other tools
read every label.

Standard library only; Python 3.8+.
"""

import collections
import hashlib
import json
import os

from common import (
    BUS_STOP_PREFIX, MIN_STATION_SIMILARITY, ROUTE_KEYS, TRANSFER, InputError, RowError,
    bigram_jaccard, bigrams, decode_json, route_stations, text_list)
from transitlm.evaluation.catalog import STATION_FILE_NAMES

FLAG = "allow_foreign_network"
NETWORK_RECORD = "network.json"          # beside the files make_benchmark.py writes
RECORD_MARKER = "transitlm_network"      # the key that makes a network.json ours
RECORD_SCHEMA = 1
# The key of the labels' stations in an evaluator's tally (a set, merged
# across the worker processes by transitlm.evaluation.engine.Context.count, taken out
# before the tally becomes input_notes).
TALLY_STATIONS = "network_check.label_stations"
SEEN_LIMIT = 1000000                     # distinct entries kept (memory bound)
# A file network.json names is read again, to say whether it changed since
# the benchmark was built, only up to this size (time bound).
RECHECK_BYTES = 4 << 30
# An evaluator looks at the labels of every row up to SAMPLE_HEAD, then of
# one row in SAMPLE_STRIDE (row numbers that are multiples of it): a station
# set costs about a microsecond a label, 2-4 % of a run if every row of a big
# file paid it.  The release's test files are read whole.
SAMPLE_HEAD = 10000
SAMPLE_STRIDE = 10
# General-LLM label names that are not a station's exact name are matched by
# similarity, each in about a millisecond on a 150,000-station network: at
# most this many (the names of a file on its own network are nearly all
# exact; on another network the verdict is clear long before).
FUZZY_LIMIT = 300


class Verdict(object):
    """``level``: "match" (nothing to say), "partial" (a warning) or
    "foreign" (refused unless allowed); ``reason``: an English line."""

    __slots__ = ("level", "reason", "known", "total")

    def __init__(self, level, reason="", known=0, total=0):
        self.level = level
        self.reason = reason
        self.known = known
        self.total = total

    @property
    def ok(self):
        return self.level == "match"

    def as_json(self):
        return {"level": self.level, "label_stations": self.total,
                "in_station_file": self.known}


def station_verdict(known, total, station_path, what="label stations"):
    """The labels' stations found in the station file -> Verdict (``what``
    names the stations counted)."""
    if not total or known >= total:
        return Verdict("match", "", known, total)
    if known * 2 < total:
        return Verdict("foreign", "%d of %d %s are in %s: is --station_info the network this "
                       "file was built on?" % (known, total, what, station_path), known, total)
    return Verdict("partial", "%d of %d %s are not in %s: routes through them are judged "
                   "on a network that lacks them" % (total - known, total, what, station_path),
                   known, total)


def enforce(verdict, allowed, flag="--" + FLAG):
    """A Verdict -> the warnings it leaves ([] or [its reason]); InputError
    (one line) when it refuses the run and ``allowed`` is false."""
    if verdict.ok:
        return []
    if verdict.level == "foreign" and not allowed:
        raise InputError("%s (%s overrides this)" % (verdict.reason, flag))
    if verdict.level == "foreign":
        return ["%s given: %s" % (flag, verdict.reason)]
    return [verdict.reason]


# ---------------------------------------------------------------------------
# The labels' stations
# ---------------------------------------------------------------------------

def label_entries(label):
    """The distinct stations (ids or names, stripped) of a decoded label: one
    route, or the first/second/third routes of benchmark 3.  Parts that are
    not a route are left out (the evaluator reports them)."""
    if not isinstance(label, dict):
        return set()
    routes = [label] if "station_sequence" in label else [
        label[key] for key in ROUTE_KEYS if isinstance(label.get(key), dict)]
    entries = set()
    for route in routes:
        try:
            entries.update(entry.strip() for entry in route_stations(
                text_list(route, "station_sequence")))
        except RowError:
            continue
    return entries


class NameIndex(object):
    """Station names of a network, matched as the route-eval check matches a
    name on a line (general_llm/route_eval.match_station, common's rules):
    the exact name, else a name whose ``common.bigram_jaccard`` with the
    query is at least MIN_STATION_SIMILARITY.  Only existence is asked, so
    only the names that can reach the bound are scored: those sharing a
    bigram with the query (found through an index of bigrams), and the
    names the rule compares by their characters (fewer than 2 characters on
    either side: a query of one character against names of at most two
    distinct characters, a longer query against names of one character).
    For two names of 2 or more characters the Jaccard of their bigram sets
    is taken from the counts of the index (the bigrams they share over the
    bigrams of both), the same number ``bigram_jaccard`` computes.  At most
    FUZZY_LIMIT queries are matched by similarity; later ones that are not
    an exact name are not found (``unsure`` counts them)."""

    def __init__(self, names):
        self.names = [name.strip() for name in names if name and name.strip()]
        self.exact = frozenset(self.names)
        self._postings = None
        self._sizes = None
        self.fuzzy_left = FUZZY_LIMIT
        self.unsure = 0

    def _index(self):
        postings = collections.defaultdict(list)
        sizes = []
        for number, name in enumerate(self.names):
            grams = bigrams(name)
            sizes.append(len(grams))
            for gram in grams:
                postings[gram].append(number)
        self._postings, self._sizes = postings, sizes
        # Compared by their characters: one character (against a longer
        # query), at most two distinct ones (against a query of one).
        self._one_character = [name for name in self.names if len(name) < 2]
        self._two_characters = [name for name in self.names if len(set(name)) <= 2]

    def __contains__(self, query):
        if query in self.exact:
            return True
        if self.fuzzy_left <= 0:
            self.unsure += 1
            return False
        self.fuzzy_left -= 1
        if self._postings is None:
            self._index()
        if len(query) < 2:
            return any(bigram_jaccard(query, name) >= MIN_STATION_SIMILARITY
                       for name in self._two_characters)
        if any(bigram_jaccard(query, name) >= MIN_STATION_SIMILARITY
               for name in self._one_character):
            return True
        grams = bigrams(query)
        shared = collections.Counter()
        for gram in grams:
            shared.update(self._postings.get(gram, ()))
        size, sizes = len(grams), self._sizes
        for number, count in shared.items():
            # Jaccard = count / (size + sizes[number] - count)
            if count >= MIN_STATION_SIMILARITY * (size + sizes[number] - count):
                return True
        return False


class LabelStations(object):
    """The distinct stations of the labels, then how many are in a network.

    ``add`` runs for every row an evaluator reads, so it only puts a label's
    station_sequence into a set (one call in C); the entries are cleaned
    (stripped, 【换乘】 and empty ones left out) and looked up once each, at
    the end (``verdict``).  ``by_name``: the labels name stations (the
    general LLM), looked up among the station file's station_name column;
    else they are stop ids.  With ``tally`` (a transitlm.evaluation.engine.Context) the
    set is kept in its tally, which worker processes send back and the
    parent merges (Context.count); else here."""

    def __init__(self, network, by_name=False, tally=None, names=None):
        self.network = network
        self.by_name = by_name
        self.tally = tally
        self._own = set()
        # The names a label's names are matched against: those of the line
        # file the evaluator matches them on (Benchmark.label_station_names),
        # else the station file's station_name column.  A station file
        # without names (and no line file) cannot be asked: nothing is counted.
        self._names = names
        self._index = None
        self.usable = not by_name or names is not None or network.has_names()

    def _seen(self):
        if self.tally is None:
            return self._own
        tally = self.tally.tally
        seen = tally.get(TALLY_STATIONS)
        if seen is None:
            seen = tally[TALLY_STATIONS] = set()
        return seen

    def add(self, label):
        """Note one decoded label's stations."""
        seen = self._seen()
        if len(seen) >= SEEN_LIMIT or not self.usable:
            return
        try:
            sequence = label.get("station_sequence")
            if type(sequence) is list:
                seen.update(sequence)
                return
            for key in ROUTE_KEYS:
                route = label.get(key)
                if type(route) is dict:
                    sequence = route.get("station_sequence")
                    if type(sequence) is list:
                        seen.update(sequence)
        except (AttributeError, TypeError):    # not an object; an entry that is not text
            seen.update(label_entries(label))

    def add_text(self, text):
        """Note the stations of a label cell (text not JSON is left out)."""
        try:
            self.add(decode_json(text, "sft_label", code="invalid_label"))
        except RowError:
            pass

    def counts(self, seen=None):
        """(stations in the network, distinct label stations) of the labels
        noted (or of the set ``seen``)."""
        entries = {entry.strip() for entry in (self._own if seen is None else seen)
                   if isinstance(entry, str)} - _NOT_STATIONS
        if self.by_name:
            if self._index is None and entries:
                self._index = NameIndex(self.network.names() if self._names is None
                                        else self._names)
            names = self._index
            known = sum(1 for entry in sorted(entries) if entry in names)
        else:
            network = self.network
            known = sum(1 for entry in entries if entry in network)
        return known, len(entries)

    def verdict(self, station_path, seen=None):
        known, total = self.counts(seen)
        return station_verdict(known, total, station_path)


_NOT_STATIONS = frozenset(("", TRANSFER))


def line_file_verdict(stop_ids, network, line_path):
    """The stop ids a line file lists (an iterable, one per station of a
    line) against the station file -> Verdict: the route-eval service's own
    pair of files, checked at start-up."""
    ids = {stop for stop in stop_ids if isinstance(stop, str) and stop}
    # as the check looks a stop up: as it is, else with the dataset's prefix
    known = sum(1 for stop in ids if stop in network or BUS_STOP_PREFIX + stop in network)
    return station_verdict(known, len(ids), network.path,
                           "stop ids of line file %s" % line_path)


# ---------------------------------------------------------------------------
# The network record (network.json) and the files' SHA-256
# ---------------------------------------------------------------------------

_HASHES = {}


def cached_sha256(path):
    """SHA-256 of a file, computed once per process for the same file (its
    real path, modification time and size)."""
    real = os.path.realpath(path)
    try:
        state = os.stat(real)
    except OSError as exc:
        raise InputError("cannot read %s: %s" % (path, exc.strerror or exc))
    key = (real, state.st_mtime_ns, state.st_size)
    digest = _HASHES.get(key)
    if digest is None:
        sha = hashlib.sha256()
        try:
            with open(real, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
        except OSError as exc:
            raise InputError("cannot read %s: %s" % (path, exc.strerror or exc))
        digest = _HASHES[key] = sha.hexdigest()
    return digest


def network_record(station_path, line_path=None, folder=None, beside=False):
    """The text of network.json for the files a benchmark was built on.
    ``beside``: the files lie in the folder network.json is written to (a
    release's): each is named by its file name, read against that folder, so
    the record is the same wherever the folder is built or moved; otherwise
    by its absolute path."""
    def where(path):
        return os.path.basename(path) if beside else os.path.abspath(path)

    record = {RECORD_MARKER: RECORD_SCHEMA, "network": folder,
              "station_info": {"path": where(station_path),
                               "sha256": cached_sha256(station_path)}}
    if line_path and os.path.exists(line_path):
        record["line_info"] = {"path": where(line_path),
                               "sha256": cached_sha256(line_path)}
    return json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def read_record(test_path):
    """The network record beside a test file -> dict, or None when there is
    none (or the file there is not one of ours, or cannot be read as one)."""
    if not test_path or test_path == "-":
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(test_path)), NETWORK_RECORD)
    try:
        if os.path.getsize(path) > 1 << 20:
            return None
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get(RECORD_MARKER) != RECORD_SCHEMA:
        return None
    record["_path"] = path
    for role in ("station_info", "line_info"):
        entry = record.get(role)
        named = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(named, str) and named and not os.path.isabs(named):
            entry["path"] = os.path.join(os.path.dirname(path), named)    # a release's: beside it
    return record


def _recorded(record, role):
    entry = record.get(role)
    if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
        return entry
    return None


def recorded_file(record, entry):
    """The file a record names, as a message gives it: the file of that name
    beside network.json when it has the recorded SHA-256 (a release folder,
    also once moved or copied elsewhere), else the recorded path."""
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        return path
    beside = os.path.join(os.path.dirname(record["_path"]), os.path.basename(path))
    try:
        if os.path.isfile(beside) and cached_sha256(beside) == entry["sha256"]:
            return beside
    except InputError:
        pass
    return path


def record_verdict(test_path, station_sha, line_sha=None):
    """The network record beside ``test_path`` against the station (and line)
    file's SHA-256 -> Verdict ("match" without a record)."""
    record = read_record(test_path)
    if record is None:
        return Verdict("match")
    for role, sha, option in (("station_info", station_sha, "--station_info"),
                              ("line_info", line_sha, "--line_info")):
        entry = _recorded(record, role)
        if entry is None or sha is None or entry["sha256"] == sha:
            continue
        return Verdict("foreign", _record_mismatch(
            record, os.path.basename(test_path), "station" if role == "station_info" else "line",
            entry, sha, option))
    return Verdict("match")


def _record_mismatch(record, test_name, kind, entry, sha, option):
    """Why the file given is not the one network.json records, in one line.
    The recorded path is looked at again: when it holds the file given now
    (or something else again), that file changed since the benchmark was
    built, and naming the path would only send the user round in a circle."""
    recorded = entry.get("path")
    beside = recorded_file(record, entry)
    # A data folder (a release's) holds the file it was built on beside
    # network.json, perhaps moved or copied since: its station file is found
    # by TRANSITLM_DATA too.
    folder = os.path.dirname(record["_path"])
    also = (" (or TRANSITLM_DATA=%s)" % folder
            if kind == "station" and isinstance(beside, str)
            and os.path.basename(beside) in STATION_FILE_NAMES
            and os.path.dirname(os.path.abspath(beside)) == os.path.abspath(folder) else "")
    if beside != recorded:
        return ("%s says %s was built on the %s file %s (SHA-256 %s), not on the one given "
                "(SHA-256 %s): give %s %s%s" % (record["_path"], test_name, kind, beside,
                                                 entry["sha256"][:12], sha[:12], option, beside,
                                                 also))
    said = "%s says %s was built on the %s file %s (SHA-256 %s)" % (
        record["_path"], test_name, kind, recorded, entry["sha256"][:12])
    now = _sha_now(recorded)
    if now is None:
        return ("%s, which is no longer there; the one given has SHA-256 %s: give %s the file "
                "it was built on, or build the benchmark again on this one (make_benchmark.py)"
                % (said, sha[:12], option))
    if now == entry["sha256"] or not now:
        return "%s, not on the one given (SHA-256 %s): give %s %s%s" % (
            said, sha[:12], option, recorded, also)
    if now == sha:
        return ("%s; the file at that path has changed since the benchmark was built (SHA-256 "
                "now %s): restore the file it was built on, or build the benchmark again on "
                "this one (make_benchmark.py)" % (said, sha[:12]))
    return ("%s, not on the one given (SHA-256 %s), and the file at that path has changed since "
            "the benchmark was built (SHA-256 now %s): give %s the file it was built on, or "
            "build the benchmark again (make_benchmark.py)" % (said, sha[:12], now[:12], option))


def _sha_now(path):
    """SHA-256 of the file at a recorded path now, or None when there is no
    regular file there (or it cannot be read)."""
    if not isinstance(path, str) or not path or not os.path.isfile(path):
        return None
    try:
        if os.path.getsize(path) > RECHECK_BYTES:
            return ""                      # not read: neither the built-on file nor this one
        return cached_sha256(path)
    except (OSError, InputError):
        return None


def test_file_verdicts(path, network, by_name=False, line_sha=None, names=None):
    """Both checks of a whole test file (its label column, read as the
    evaluator reads it) on ``network`` (general-LLM labels: ``names``, as
    LabelStations) -> (the network record's Verdict, the labels' stations'
    Verdict); InputError only when the file cannot be read."""
    from transitlm.evaluation.inputs import SampleReader
    record = record_verdict(path, network.sha256, line_sha)
    stations = LabelStations(network, by_name, names=names)
    with SampleReader(path, None) as reader:
        for sample in reader:
            if not sample.problem:
                stations.add_text(sample.label)
    return record, stations.verdict(network.path)


def check_test_file(path, network, by_name=False, line_sha=None, allowed=False,
                    flag="--" + FLAG, names=None):
    """test_file_verdicts enforced -> (the warnings they leave, the station
    Verdict); InputError when one refuses the file (or it cannot be read)."""
    record, stations = test_file_verdicts(path, network, by_name, line_sha, names)
    warnings = enforce(record, allowed, flag)
    return warnings + enforce(stations, allowed, flag), stations
