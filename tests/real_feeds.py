"""The real GTFS feeds of ../shared/gtfs/, imported and turned into benchmarks
once per test run for test_networks_gtfs_import.py and
test_networks_benchmark_builder.py (both import it as tests.real_feeds: one
module, one cache); and the feed's own trips read independently of the
importer (csv over the zip).

The tests' feeds are imported and built by the commands themselves
(data/import_gtfs.py, data/make_benchmark.py) as this module is loaded, in
processes of their own beside the rest of the suite (PREBUILT); anything
else is imported or built in this process when first asked for."""

import atexit
import contextlib
import csv
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "data")
if REPO not in sys.path:
    sys.path.insert(0, REPO)
SHARED_GTFS = os.path.join(REPO, "..", "shared", "gtfs")

from transitlm.networks import benchmark_builder as make_benchmark  # noqa: E402
from transitlm.networks import gtfs_import as import_gtfs  # noqa: E402
from tests.support.lane import Background  # noqa: E402

# feed file -> the city the prompts name (a feed does not say)
CITIES = {"nyc-subway.zip": "New York", "nyc-lirr.zip": "New York", "caltrain.zip": "San Francisco",
          "cairns.zip": "Cairns", "newport.zip": "Newport"}

# The benchmark size the tests build of each feed (CITIES' feeds; others).
SAMPLES, OTHER_SAMPLES = 8, 4

# Feeds also imported with --id_prefix, and built at SAMPLES (the networks
# and labels must be the unprefixed ones' with the prefix before each id).
PREFIXED = {"caltrain.zip": "ct:"}

_TMP = []
_IMPORTED = {}
_BUILT = {}


def available(name):
    return os.path.exists(os.path.join(SHARED_GTFS, name))


def other_feeds():
    """Feeds in ../shared/gtfs/ besides the five above (checked the same way,
    the file name standing for the city)."""
    if not os.path.isdir(SHARED_GTFS):
        return []
    return sorted(n for n in os.listdir(SHARED_GTFS) if n.endswith(".zip") and n not in CITIES)


def city_of(name):
    return CITIES.get(name) or os.path.splitext(name)[0]


def _folder():
    if not _TMP:
        _TMP.append(tempfile.mkdtemp(prefix="transitlm-feeds-"))
        atexit.register(shutil.rmtree, _TMP[0], True)
    return _TMP[0]


def _run(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if status != 0:
        raise AssertionError("%s exited %s: %s" % (argv, status, err.getvalue()))
    return out.getvalue()


def _net_folder(name, id_prefix=None):
    return os.path.join(_folder(), name + (".prefixed" if id_prefix else "") + ".net")


def _prefix_args(id_prefix):
    return ["--id_prefix", id_prefix] if id_prefix else []


def _prebuild():
    """Import every shared feed and build its benchmark of the tests' size
    (and those of PREFIXED with their prefix), each by its command in a
    process of its own -> {feed: problem} (empty when all went well); the
    results fill the caches."""
    problems = {}
    jobs = [(n, None) for n in sorted(n for n in CITIES if available(n)) + other_feeds()]
    jobs += [(n, prefix) for n, prefix in sorted(PREFIXED.items()) if available(n)]
    for name, id_prefix in jobs:
        out = _net_folder(name, id_prefix)
        samples = SAMPLES if name in CITIES else OTHER_SAMPLES
        bench = out[:-len(".net")] + ".bench%d" % samples
        steps = [(os.path.join(DATA, "import_gtfs.py"), os.path.join(SHARED_GTFS, name),
                  "--out", out, "--city", city_of(name)) + tuple(_prefix_args(id_prefix)),
                 (os.path.join(DATA, "make_benchmark.py"), "--network", out, "--out", bench,
                  "--samples", str(samples))]
        outputs = []
        for step in steps:
            done = subprocess.run((sys.executable,) + step, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True,
                                  encoding="utf-8")
            if done.returncode != 0:
                problems[(name, id_prefix)] = "%s exited %s: %s" % (step, done.returncode,
                                                                    done.stderr)
                break
            outputs.append(done.stdout)
        else:
            _IMPORTED[(name, id_prefix)] = (out, outputs[0])
            _BUILT[(name, samples, id_prefix)] = (out, bench, outputs[1])
    return problems


def _from_prebuilt(name, id_prefix=None):
    problem = PREBUILT.result().get((name, id_prefix))
    if problem:
        raise AssertionError(problem)


def imported(name, id_prefix=None):
    """(network folder, importer summary) of a shared feed (with
    --id_prefix when given), imported once."""
    key = (name, id_prefix)
    _from_prebuilt(name, id_prefix)
    if key not in _IMPORTED:
        out = _net_folder(name, id_prefix)
        summary = _run(import_gtfs.main, [os.path.join(SHARED_GTFS, name), "--out", out,
                                          "--city", city_of(name)] + _prefix_args(id_prefix))
        _IMPORTED[key] = (out, summary)
    return _IMPORTED[key]


def built(name, samples, id_prefix=None):
    """(network folder, benchmark folder, builder summary), built once per feed,
    size and --id_prefix."""
    key = (name, samples, id_prefix)
    _from_prebuilt(name, id_prefix)
    if key not in _BUILT:
        network, _ = imported(name, id_prefix)
        bench = network[:-len(".net")] + ".bench%d" % samples
        summary = _run(make_benchmark.main, ["--network", network, "--out", bench,
                                             "--samples", str(samples)])
        _BUILT[key] = (network, bench, summary)
    return _BUILT[key]


_TRIPS = {}


def feed_trips(name):
    """feed_trips_on for a shared feed on the day it was imported for (cached)."""
    if name not in _TRIPS:
        network, _ = imported(name)
        with open(os.path.join(network, "city.json"), encoding="utf-8") as handle:
            day = json.load(handle)["date"]
        _TRIPS[name] = feed_trips_on(os.path.join(SHARED_GTFS, name), day)
    return _TRIPS[name]


def seconds(text):
    h, m, s = text.strip().split(":")
    return int(h) * 3600 + int(m) * 60 + int(s)


def feed_trips_on(zip_path, day):
    """Every trip of a feed running on `day` -> {trip_id: (route_id, calls)}, calls
    [(stop_id, arrival, departure, pickup_type, drop_off_type)] by stop_sequence
    (times as written)."""
    with zipfile.ZipFile(zip_path) as archive:
        def rows(name):
            with archive.open(name) as raw:
                return list(csv.DictReader(line.decode("utf-8-sig") for line in raw))
        names = set(archive.namelist())
        services = set()
        weekday = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                   "sunday")[datetime.datetime.strptime(day, "%Y%m%d").weekday()]
        if "calendar.txt" in names:
            services = {r["service_id"] for r in rows("calendar.txt")
                        if r["start_date"] <= day <= r["end_date"] and r[weekday] == "1"}
        if "calendar_dates.txt" in names:
            for r in rows("calendar_dates.txt"):
                if r["date"] == day:
                    (services.add if r["exception_type"] == "1" else services.discard)(r["service_id"])
        trips = {r["trip_id"]: r["route_id"] for r in rows("trips.txt") if r["service_id"] in services}
        calls = {}
        with archive.open("stop_times.txt") as raw:
            reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", newline=""))
            header = next(reader)
            wanted = ("trip_id", "stop_sequence", "stop_id", "arrival_time", "departure_time",
                      "pickup_type", "drop_off_type")
            index = [header.index(c) if c in header else None for c in wanted]
            i_trip = index[0]
            for row in reader:
                trip = row[i_trip]
                if trip in trips:
                    call = [row[i] if i is not None else "" for i in index[1:]]
                    call[0] = int(call[0])
                    calls.setdefault(trip, []).append(tuple(call))
    return {t: (trips[t], [c[1:] for c in sorted(c)]) for t, c in calls.items()}


def rider_calls(calls):
    """What a rider sees of a trip (the GTFS reference's reading, written here
    from the spec): calls where nobody may get on or off (pickup_type and
    drop_off_type 1) are passed through; a stop repeated back to back is one
    call.  -> [(stop_id, may board, may alight, arrival, departure)], times in
    seconds or None when blank; nobody alights at the first or boards at the last."""
    out = []
    for stop, arr, dep, pickup, drop in calls:
        board, alight = pickup.strip() != "1", drop.strip() != "1"
        if not board and not alight:
            continue
        arr_s = seconds(arr or dep) if (arr or dep).strip() else None
        dep_s = seconds(dep or arr) if (dep or arr).strip() else None
        if out and out[-1][0] == stop:
            last = out[-1]
            out[-1] = (stop, last[1] or board, last[2] or alight, last[3], dep_s)
            continue
        out.append((stop, board, alight, arr_s, dep_s))
    if out:
        out[0] = (out[0][0], out[0][1], False) + out[0][3:]
        out[-1] = (out[-1][0], False) + out[-1][2:]
    return out


# Started as the module loads: the feeds are imported and built while the
# suite goes on (tests.support.Background).
_folder()
PREBUILT = Background(_prebuild)
