"""The work of make_dataset.py, in tasks a worker process can do alone: a
run of candidate rows of one SFT file in one unit, or a run of corpus
records.  A task's result depends only on the task, the networks and the
settings (every row and record draws from its own sub-seed), so the files
are the same bytes whatever --workers is and whichever process builds them.

The workers are forks (transitlm.evaluation.workers.ForkedWorkers): they inherit
``CONTEXT`` (the networks, units, plan and hold-out) and receive only the
small task tuples.

Standard library only; Python 3.8+.
"""

import itertools
import json

from common import InputError
from transitlm.networks.benchmark_builder import build_row, place_label
from transitlm.datasets import corpus_texts
from transitlm.datasets.audit import CorpusAudit
from transitlm.datasets.release import csv_text
from transitlm.datasets.splits import Origins, TrainCheck, draw_session, route_pair

CONTEXT = None


class Context(object):
    """What every task reads: set in the main process before the workers fork."""

    def __init__(self, nets, units, plan, seed, lang, req_types, services):
        self.nets = nets
        self.services = services        # per network: line name -> service facts (line_service.csv)
        self.units = units
        self.plan = plan
        self.seed = seed
        self.lang = lang
        self.req_types = req_types      # per network: benchmark 2's satisfiable preferences
        # ad_code -> the network its records belong to: its unit's, else the
        # first network naming it (the corpus audit's look-up)
        self.net_of = {u.code: u.net for u in units}
        for net in nets:
            for code in net.city:
                self.net_of.setdefault(code, net)
        self.holdout = None
        self.audit = True               # corpus tasks audit their records (not for --parts runs)


class RecordError(Exception):
    """A corpus text that does not state its record: a defect, never written."""


def stream_name(kind, split, unit):
    """The generator and id stream of a file's rows in a unit."""
    return "%s-%s:%s" % (kind, split, unit.code)


def run_task(task):
    """-> (None, result), or (message, None) for a record that does not state
    its facts (raised again in the main process as a RecordError)."""
    try:
        if task[0] == "rows":
            return None, draw_rows(*task[1:])
        return None, make_records(*task[1:])
    except (RecordError, InputError) as exc:
        return str(exc), None


def draw_rows(kind, split, unit_index, task_id, start, end):
    """Rows ``start``..``end``-1 of a file's unit -> [(row, cells or None, pair,
    origin, destination, draws, refusals)]; train rows are checked against the
    hold-out."""
    ctx = CONTEXT
    unit = ctx.units[unit_index]
    req_types = ctx.req_types[unit.net_index]
    out = []
    for row in range(start, end):
        req_type = req_types[row % len(req_types)] if kind == "b2" else 0
        check = TrainCheck(ctx.holdout) if split == "train" else None
        draws = {}
        built = build_row(unit.net, ctx.seed, kind, task_id, row, ctx.lang, req_type,
                          [unit.district], draws, stream=stream_name(kind, split, unit),
                          accept=check)
        refusals = check.counts if check else {}
        if built is None:
            out.append((row, None, None, None, None, draws, refusals))
            continue
        cells, routes = built
        out.append((row, cells, route_pair(unit.net, routes[0]), routes[0].origin,
                    routes[0].dest, draws, refusals))
    return out


def compact(record):
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def make_records(kind, owner, first, last, number):
    """Corpus records ``first``..``last``-1 of one static run (a network's
    stations or line directions) or one unit's sessions, numbered from
    ``number`` -> (the rows as CSV text, how many, draw counts, sessions not
    found, their audit.CorpusAudit: each row checked as the part holds it; None when
    ``CONTEXT.audit`` is false: a --parts run, whose parts the completing run
    reads back and checks)."""
    rows, counts, missing = _made_records(kind, owner, first, last, number)
    ctx = CONTEXT
    checks = None
    if ctx.audit:
        checks = CorpusAudit()
        if rows:
            part = ctx.plan.part_of(number)
            for row in rows:
                # The texts were checked as they were made (checked_row).
                checks.add(ctx, part, row[0], row[1], row[2], row[3], row[4], check_text=False)
    return csv_text(rows), len(rows), counts, missing, checks


def _made_records(kind, owner, first, last, number):
    ctx = CONTEXT
    rows, counts, missing = [], {}, 0
    if kind in ("station", "line"):
        net = ctx.nets[owner]
        for k, (text, record) in enumerate(static_entries(kind, owner, first, last)):
            index = first + k
            code = net.city[index] if kind == "station" else net.linedirs[index].line.city.code
            rows.append(checked_row(number + k, kind, code, text, record))
        return rows, counts, missing
    unit = ctx.units[owner]
    origins = Origins(ctx.seed)
    for k, local in enumerate(range(first, last)):
        drawn = draw_session(unit, ctx.seed, local, ctx.holdout, origins, counts,
                             ctx.plan.origin_groups[owner])
        if drawn is None:
            missing += 1
            continue
        trip, routes, rng = drawn
        places = (place_label(unit.net, trip.start_access), place_label(unit.net, trip.end_access))
        text, record = corpus_texts.session_entry(unit.net, unit.district.city.name, trip.origin,
                                           trip.dest, routes, rng, ctx.lang, places=places)
        rows.append(checked_row(number + k, "session", unit.code, text, record))
    return rows, counts, missing


_STATIC = {}     # (kind, network) -> [next index, the entries' iterator] (this process's)


def static_entries(kind, owner, first, last):
    """Static entries first..last-1 of a network: the texts' iterator is kept
    between tasks, so consecutive chunks do not start it again (a chunk
    before its position starts a new one)."""
    key = (kind, owner)
    net = CONTEXT.nets[owner]
    state = _STATIC.get(key)
    if state is None or state[0] > first or state[2] is not net or state[3] != CONTEXT.lang:
        if kind == "station":
            entries = corpus_texts.station_entries(net, CONTEXT.lang)
        else:
            entries = corpus_texts.line_entries(net, CONTEXT.lang, service=CONTEXT.services[owner])
        state = _STATIC[key] = [0, entries, net, CONTEXT.lang]
    entries = itertools.islice(state[1], first - state[0], first - state[0] + last - first)
    state[0] = last
    return entries


def checked_row(number, kind, code, text, record):
    ok, reason = corpus_texts.text_states_record(kind, text, record)
    if not ok:
        raise RecordError("corpus record %d (%s): the text %s" % (number, kind, reason))
    return [str(number), kind, code, text, compact(record)]
