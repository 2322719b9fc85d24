"""data/make_dataset.py and transitlm/datasets/ (issue 45): the release's
layout, the hold-out (checked here by brute force, not by the builder's grid),
every label and corpus route scored against itself by the evaluators on the
release's own station file, determinism whatever --workers, parts built apart,
the card's configs resolving to files, candidates, and bad input (exit 2, one
line, nothing written).  On the demo network and on the shared GTFS feeds."""

import contextlib
import csv
import fnmatch
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import evaluator_rows, gtfs_feeds  # noqa: E402
from tests.support.dataset_builds import DEMO, SCRIPT, SMALL, command, corpus_rows, read_csv, scratch
from tests.support import REPO
from tests.support.lane import Background
from tests import real_feeds

import common
import transitlm.evaluation.records
from common import haversine_km
from transitlm.datasets import card, cli, corpus_texts, release_names as names
from transitlm.datasets.candidates import COST_FACTOR, MAX_CANDIDATES, line_set, session_candidates
from transitlm.networks import benchmark_builder as mb
from transitlm.networks.router import Prefs, expert_score

csv.field_size_limit(2 ** 31 - 1)

TRANSFER = "【换乘】"
EVALUATORS = {"b1": "single_route", "b2": "personalized", "b3": "diversity",
              "general": "general_llm"}


def build_demo():
    """The demo release built two ways into two --out paths: one run with one
    process into one/; and into release/, parts 2-3 (one process) and part 1
    (two workers) built at the same time, then the rest (two workers; a
    leftover dot-file to remove)."""
    root = scratch("transitlm-dataset-")
    out = os.path.join(root, "release")
    command(*(["--network", DEMO, "--out", os.path.join(root, "one"), "--workers", "1"] + SMALL))
    base = ["--network", DEMO, "--out", out] + SMALL
    side = [subprocess.Popen([sys.executable, SCRIPT] + base + extra, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True, encoding="utf-8")
            for extra in (["--parts", "2-3", "--workers", "1"], ["--parts", "1-1", "--workers", "2"])]
    for process in side:
        _, err = process.communicate()
        if process.returncode:
            raise AssertionError("a --parts run exited %s: %s" % (process.returncode, err))
    with open(os.path.join(out, names.CORPUS_FOLDER, ".transitlm-left.tmp"), "w") as handle:
        handle.write("half a part")
    summary = command(*(base + ["--workers", "2"]))
    return root, summary


def build_joint():
    """New York's subway and Cairns' buses in one release (own ad_codes)."""
    root = scratch("transitlm-dataset-joint-")
    importer = os.path.join(REPO, "data", "import_gtfs.py")
    folders = []
    for name, city, code in (("nyc-subway.zip", "New York", "3651000"), ("cairns.zip", "Cairns", "3530")):
        folder = os.path.join(root, name + ".net")
        subprocess.run([sys.executable, importer, os.path.join(real_feeds.SHARED_GTFS, name),
                        "--city", city, "--adcode", code, "--out", folder], check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        folders.append(folder)
    out = os.path.join(root, "release")
    args = []
    for folder in folders:
        args += ["--network", folder]
    args += ["--out", out, "--train", "8", "--test", "6", "--corpus", "10", "--part_size", "600",
             "--lang", "en"]
    command(*([a if a != out else os.path.join(root, "one") for a in args] + ["--workers", "2"]))
    command(*(args + ["--parts", "2-3"]))        # the default: one worker per core
    command(*(args + ["--workers", "1"]))
    return root, os.path.join(root, "one")


def build_every_feed():
    """A tiny release of every shared feed but the two JointRelease builds ->
    {feed: problem or None}."""
    problems = {}
    for name in sorted(n for n in real_feeds.CITIES if real_feeds.available(n)
                       and n not in ("nyc-subway.zip", "cairns.zip")) + real_feeds.other_feeds():
        network, _ = real_feeds.imported(name)
        out = tempfile.mkdtemp(prefix="transitlm-dataset-feed-")
        done = subprocess.run([sys.executable, SCRIPT, "--network", network, "--out", out,
                               "--train", "2", "--test", "2", "--corpus", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, encoding="utf-8")
        problems[name] = done.stderr if done.returncode else None
        shutil.rmtree(out, True)
    return problems


def build_interrupted():
    """A demo release stopped by SIGINT once its first session part is written,
    then finished by the same command -> (first status, the folder's names then,
    the rerun's summary, the folder)."""
    import signal
    import time
    root = scratch("transitlm-dataset-stop-")
    out = os.path.join(root, "release")
    argv = [sys.executable, SCRIPT, "--network", DEMO, "--out", out, "--train", "2", "--test", "2",
            "--corpus", "90", "--part_size", "40"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first_session_part = os.path.join(out, names.corpus_part(9))
    deadline = time.time() + 120
    while process.poll() is None and not os.path.exists(first_session_part) and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    process.communicate()
    seen = sorted(os.listdir(os.path.join(out, names.CORPUS_FOLDER))) + sorted(os.listdir(out))
    return process.returncode, seen, command(*argv[2:]), out


DEMO_BUILDS = Background(build_demo)
STOPPED = Background(build_interrupted)
HAVE_FEEDS = real_feeds.available("nyc-subway.zip") and real_feeds.available("cairns.zip")
JOINT = Background(build_joint) if HAVE_FEEDS else None
EVERY_FEED = Background(build_every_feed) if os.path.isdir(real_feeds.SHARED_GTFS) else None


def general_pair(label, code, lines):
    """The (first boarding, last alighting) stop ids of a label naming stations."""
    stations = [s for s in label["station_sequence"]]
    first_line = lines[(code, label["line_sequence"][0])]
    last_line = lines[(code, label["line_sequence"][-1])]
    a = next(s["stop_id"] for s in first_line if s["station_name"] == stations[0])
    b = next(s["stop_id"] for s in reversed(last_line) if s["station_name"] == stations[-1])
    return tuple(sorted((a, b)))


def id_pair(label):
    stops = [s for s in label["station_sequence"] if s != TRANSFER]
    return tuple(sorted((stops[0], stops[-1])))


def points(prompt):
    value = json.loads(prompt)
    return (tuple(float(v) for v in value["start"].split(",")),
            tuple(float(v) for v in value["end"].split(",")))


def near(trip, test):
    (s, e), (ts, te) = trip, test
    for a, b in ((ts, te), (te, ts)):
        if haversine_km(s[0], s[1], a[0], a[1]) <= 0.5 and haversine_km(e[0], e[1], b[0], b[1]) <= 0.5:
            return True
    return False


class ReleaseChecks(object):
    """Checks of a release folder, on the demo and on the joint feeds."""

    def lines_of(self, out):
        _, rows = read_csv(os.path.join(out, names.LINE_INFO))
        return {(r["citycode"], r["line_name"]): json.loads(r["station_list"]) for r in rows}

    def assert_layout(self, out):
        ids = set()
        for kind, name, split, rel in names.split_files():
            header, rows = read_csv(os.path.join(out, rel))
            self.assertEqual(header, names.SFT_COLUMNS, rel)
            self.assertTrue(rows, rel)
            for row in rows:
                self.assertEqual(row["task_id"], names.task_id(name, split))
                self.assertEqual(row["req_type"] != "0", kind == "b2", rel)
                self.assertNotIn(row["indexid"], ids)
                ids.add(row["indexid"])
                self.assertEqual(row["system_prompt"], mb.system_prompt(
                    kind, "en" if "How do I" in row["sft_prompt"] else "zh"))
                self.assertEqual(json.loads(row["sft_prompt"])["city"] and row["adcode"] != "", True)
            if kind != "general":
                with open(os.path.join(out, names.sft_jsonl(name, split)), encoding="utf-8") as handle:
                    lines = [json.loads(line) for line in handle]
                self.assertEqual(len(lines), len(rows))
                for line, row in zip(lines, rows):
                    self.assertEqual(line, {"prompt": [
                        {"role": "system", "content": row["system_prompt"]},
                        {"role": "user", "content": row["sft_prompt"]}],
                        "completion": [{"role": "assistant", "content": row["sft_label"]}]})
        corpus_ids = [row["id"] for row in corpus_rows(out)]
        self.assertEqual(len(corpus_ids), len(set(corpus_ids)))
        with open(os.path.join(out, names.STATION_IDS), encoding="utf-8") as handle:
            vocabulary = json.load(handle)
        _, stations = read_csv(os.path.join(out, names.STATION_INFO))
        self.assertEqual(vocabulary, [r["stop_id"] for r in stations])

    def assert_manifest_and_card(self, out):
        with open(os.path.join(out, names.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        self.assertTrue(manifest["complete"])
        self.assertEqual(manifest["candidate_cost_factor"], COST_FACTOR)
        for rel, entry in manifest["files"].items():
            path = os.path.join(out, rel)
            with open(path, "rb") as handle:
                data = handle.read()
            self.assertEqual(hashlib.sha256(data).hexdigest(), entry["sha256"], rel)
        with open(os.path.join(out, names.CARD), encoding="utf-8") as handle:
            configs = card.parse_card_configs(handle.read())
        wanted = {"benchmark1": {"train", "test"}, "benchmark2": {"train", "test"},
                  "benchmark3": {"train", "test"}, "general": {"test"}, "cpt": {"train"}}
        self.assertEqual({c["config_name"]: {f["split"] for f in c["data_files"]} for c in configs},
                         wanted)
        for config in configs:
            for entry in config["data_files"]:
                folder, pattern = os.path.split(entry["path"])
                found = fnmatch.filter(os.listdir(os.path.join(out, folder)), pattern)
                self.assertTrue(found, entry)
                for name in found:
                    header, _ = read_csv(os.path.join(out, folder, name))
                    self.assertIn(header, (names.SFT_COLUMNS, names.CORPUS_COLUMNS))

    def assert_leakage_free(self, out):
        """Brute force over every test trip: no train row or session shares a
        pair or lies within 500 m at both ends."""
        lines = self.lines_of(out)
        pairs, trips = set(), []
        for kind, name, split, rel in names.split_files():
            if split != "test":
                continue
            for row in read_csv(os.path.join(out, rel))[1]:
                label = json.loads(row["sft_label"])
                label = label["first"] if kind == "b3" else label
                pairs.add(general_pair(label, row["adcode"], lines) if kind == "general"
                          else id_pair(label))
                trips.append(points(row["sft_prompt"]))
        self.assertTrue(pairs)
        checked = 0
        for kind, name, split, rel in names.split_files():
            if split != "train":
                continue
            for row in read_csv(os.path.join(out, rel))[1]:
                label = json.loads(row["sft_label"])
                self.assertNotIn(id_pair(label["first"] if kind == "b3" else label), pairs)
                trip = points(row["sft_prompt"])
                self.assertFalse(any(near(trip, t) for t in trips))
                checked += 1
        for row in corpus_rows(out):
            if row["kind"] != "session":
                continue
            record = json.loads(row["record"])
            trip = tuple(tuple(float(v) for v in record[k].split(",")) for k in ("start", "end"))
            self.assertFalse(any(near(trip, t) for t in trips))
            for route in record["routes"]:
                self.assertNotIn(id_pair(route), pairs)
            checked += 1
        self.assertGreater(checked, 0)

    def assert_corpus_true(self, out):
        """Every record states its facts; every station and line direction once;
        sessions: at most five routes, distinct line sets, best first."""
        _, stations = read_csv(os.path.join(out, names.STATION_INFO))
        seen = {"station": [], "line": []}
        for row in corpus_rows(out):
            record = json.loads(row["record"])
            ok, reason = corpus_texts.text_states_record(row["kind"], row["text"], record)
            self.assertTrue(ok, reason)
            if row["kind"] == "station":
                seen["station"].append(record["stop_id"])
            elif row["kind"] == "line":
                seen["line"].append(record["line_name"])
            else:
                routes = record["routes"]
                self.assertTrue(1 <= len(routes) <= MAX_CANDIDATES)
                sets = [frozenset(r["line_sequence"]) for r in routes]
                self.assertEqual(len(sets), len(set(sets)))
                for route in routes:
                    self.assertIn("route_tag", route)
        self.assertEqual(sorted(seen["station"]), sorted(r["stop_id"] for r in stations))
        self.assertEqual(len(seen["line"]), len(set(seen["line"])))

    def assert_same_files(self, one, other):
        """Two releases built into different --out paths: the same files, byte for byte."""
        for folder, _, files in os.walk(one):
            rel = os.path.relpath(folder, one)
            there = os.path.join(other, rel)
            self.assertEqual(sorted(files), sorted(n for n in os.listdir(there)
                                                   if os.path.isfile(os.path.join(there, n))), rel)
            for name in files:
                with open(os.path.join(folder, name), "rb") as a, \
                        open(os.path.join(there, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), "%s/%s" % (rel, name))

    def assert_scores_perfect(self, out):
        """Every label of every SFT file and every corpus route scores 100 %
        against itself on the release's station (and line) file."""
        station = os.path.join(out, names.STATION_INFO)
        line = os.path.join(out, names.LINE_INFO)
        with tempfile.TemporaryDirectory() as tmp:
            jobs = [(EVALUATORS[kind], os.path.join(out, rel)) for kind, _, _, rel in names.split_files()]
            sessions = os.path.join(tmp, "sessions.csv")
            with open(sessions, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(names.SFT_COLUMNS)
                for row in corpus_rows(out):
                    if row["kind"] != "session":
                        continue
                    record = json.loads(row["record"])
                    prompt = json.dumps({"query": "-", "start": record["start"],
                                         "end": record["end"], "city": record["city"]},
                                        ensure_ascii=False)
                    for k, route in enumerate(record["routes"]):
                        writer.writerow(["benchmark1", "0", row["adcode"], "cpt-%s-%d" % (row["id"], k),
                                         "", prompt, json.dumps(route, ensure_ascii=False)])
            jobs.append(("single_route", sessions))
            for evaluator, path in jobs:
                for protocol in ("reference", "paper"):
                    args = ["--input", path, "--input_field", "sft_label", "--station_info", station,
                            "--protocol", protocol, "--quiet"]
                    if evaluator == "general_llm":
                        args += ["--line_info", line]
                    report, records, _ = evaluator_rows.evaluate_to_files(
                        transitlm.evaluation.records.load_benchmark(evaluator), args, tmp)
                    where = "%s %s %s" % (evaluator, protocol, os.path.basename(path))
                    self.assertEqual(report["counts"]["errors"], 0, where)
                    metrics = report["metrics"]
                    if (evaluator, protocol) != ("general_llm", "reference"):
                        self.assertEqual(metrics["conn"], 1.0, where)
                    for key in ("sg", "dp", "lo", "sso", "rem", "ea"):
                        self.assertEqual(metrics[key], 1.0, "%s %s" % (where, key))
                    if evaluator == "personalized":
                        self.assertEqual(metrics["pc"], 1.0, where)


class DemoRelease(ReleaseChecks, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.root, cls.summary = DEMO_BUILDS.result()
        cls.out = os.path.join(cls.root, "one")

    def test_layout_and_files(self):
        self.assert_layout(self.out)
        self.assert_manifest_and_card(self.out)

    def test_leakage_free(self):
        self.assert_leakage_free(self.out)

    def test_every_fact_true(self):
        self.assert_corpus_true(self.out)
        self.assert_scores_perfect(self.out)

    def test_same_bytes_whatever_workers_and_parts(self):
        self.assert_same_files(os.path.join(self.root, "one"), os.path.join(self.root, "release"))
        self.assertIn("removed 1 unfinished file", self.summary)


class Interrupted(ReleaseChecks, unittest.TestCase):
    """A run stopped in the corpus leaves whole parts and no temporary; the same
    command finishes the folder."""

    def test_stopped_then_finished(self):
        status, seen, summary, out = STOPPED.result()
        self.assertIn(status, (0, 130))
        self.assertEqual([n for n in seen if n.startswith(".")], [])
        if status == 130:
            self.assertNotIn(names.CARD, seen)
            self.assertIn("already there", summary)
        self.assert_manifest_and_card(out)
        self.assert_corpus_true(out)


class HoldOutGrid(unittest.TestCase):
    """The grid's near() says what a scan of every test trip says, at the
    500 m boundary too, at any latitude, and across the 180th meridian."""

    def test_grid_equals_scan(self):
        import math
        import random
        from transitlm.datasets.splits import HoldOut, NEAR_KM

        class Net(object):
            pass
        def wrapped(lng):                   # a longitude in [-180, 180)
            return (lng + 180.0) % 360.0 - 180.0

        for lng0, lat0 in ((10.0, 0.0), (10.0, 40.7), (10.0, -33.9), (10.0, 64.1),
                           (180.0, -17.8), (-180.0, 65.0)):
            net = Net()
            net.lat = [lat0]
            holdout, trips, rng = HoldOut([net]), [], random.Random(lat0)

            def point(lng, lat):
                return (wrapped(lng + rng.uniform(-0.03, 0.03)), lat + rng.uniform(-0.03, 0.03))

            def shifted(p):
                r, a = rng.uniform(0.45, 0.55) / 111.19, rng.uniform(0, 2 * math.pi)
                return (wrapped(p[0] + r * math.cos(a) / math.cos(math.radians(p[1]))),
                        p[1] + r * math.sin(a))
            for _ in range(60):
                trip = (point(lng0, lat0), point(lng0, lat0))
                holdout.add(("a", "b"), *trip)
                trips.append(trip)
            near = 0
            for k in range(600):
                start, end = trips[k % len(trips)]
                start, end = (shifted(start), shifted(end)) if k % 3 else (shifted(end), shifted(start))
                scan = any((haversine_km(start[0], start[1], a[0], a[1]) <= NEAR_KM and
                            haversine_km(end[0], end[1], b[0], b[1]) <= NEAR_KM) or
                           (haversine_km(start[0], start[1], b[0], b[1]) <= NEAR_KM and
                            haversine_km(end[0], end[1], a[0], a[1]) <= NEAR_KM) for a, b in trips)
                self.assertEqual(holdout.near(start, end), scan, (lat0, k))
                near += scan
            self.assertTrue(0 < near < 600)


class Candidates(unittest.TestCase):

    def test_rule(self):
        net = mb.load_network(DEMO)
        district = mb.usable_districts(net)[0]
        rng = mb.sub_rng(7, "candidates")
        seen = 0
        for _ in range(12):
            od = mb.draw_od(net, rng, district, *mb.TRIP_KM)
            if od is None:
                continue
            trip = mb.Trip(net, district, *od)
            routes = session_candidates(trip)
            if not routes:
                continue
            seen += len(routes)
            best = trip.find(Prefs())
            self.assertAlmostEqual(expert_score(routes[0]), expert_score(best), places=9)
            self.assertLessEqual(len(routes), MAX_CANDIDATES)
            scores = [expert_score(r) for r in routes]
            self.assertEqual(scores[1:], sorted(scores[1:]))
            self.assertTrue(all(s <= COST_FACTOR * scores[0] + 1e-9 for s in scores))
            self.assertTrue(all(s >= scores[0] - 1e-9 for s in scores))
            sets = [line_set(net, r) for r in routes]
            self.assertEqual(len(sets), len(set(sets)))
        self.assertGreater(seen, 12)


@unittest.skipUnless(HAVE_FEEDS, "../shared/gtfs feeds absent")
class JointRelease(ReleaseChecks, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.root, cls.out = JOINT.result()

    def test_two_cities(self):
        self.assert_layout(self.out)
        self.assert_manifest_and_card(self.out)
        codes = {row["adcode"] for _, _, _, rel in names.split_files()
                 for row in read_csv(os.path.join(self.out, rel))[1]}
        self.assertEqual(codes, {"3651000", "3530"})

    def test_same_bytes_whatever_workers_and_parts(self):
        self.assert_same_files(self.out, os.path.join(self.root, "release"))

    def test_leakage_and_truth(self):
        self.assert_leakage_free(self.out)
        self.assert_corpus_true(self.out)
        self.assert_scores_perfect(self.out)


@unittest.skipUnless(EVERY_FEED, "../shared/gtfs absent")
class EveryFeed(unittest.TestCase):

    def test_every_shared_feed_builds(self):
        for name, problem in EVERY_FEED.result().items():
            self.assertIsNone(problem, name)


def build_tiny():
    """A release of a two-line, five-stop network (tests.support.BASE_FEED)."""
    tmp = scratch("transitlm-dataset-tiny-")
    feed = gtfs_feeds.write_feed(tmp, gtfs_feeds.BASE_FEED)
    network = os.path.join(tmp, "net")
    subprocess.run([sys.executable, os.path.join(REPO, "data", "import_gtfs.py"), feed,
                    "--out", network, "--city", "Tiny"], check=True, stdout=subprocess.PIPE)
    out = os.path.join(tmp, "release")
    return out, command("--network", network, "--out", out, "--test", "3", "--train", "3",
                        "--corpus", "3")


TINY = Background(build_tiny)


class Shortfall(unittest.TestCase):
    """A network too small for the counts asked gives what it has; the shortfall
    is printed and recorded in dataset.json."""

    def test_tiny_network(self):
        out, summary = TINY.result()
        with open(os.path.join(out, names.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        self.assertEqual(manifest["shortfall"]["transit-lm-benchmark3-test.csv"], 3)
        self.assertIn("3 short", summary)
        _, rows = read_csv(os.path.join(out, "transit-lm-benchmark3-test.csv"))
        self.assertEqual(rows, [])
        _, rows = read_csv(os.path.join(out, "transit-lm-benchmark1-test.csv"))
        self.assertEqual(len(rows), 3)


class BadInput(unittest.TestCase):
    """Exit 2, one line on stderr, nothing written."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="transitlm-dataset-bad-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def refused(self, argv, words):
        out, err = io.StringIO(), io.StringIO()
        before = sorted(os.listdir(self.tmp))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(argv)
        self.assertEqual(status, 2, err.getvalue())
        lines = err.getvalue().splitlines()
        self.assertEqual(len(lines), 1, err.getvalue())
        self.assertIn(words, lines[0])
        self.assertNotIn("Traceback", err.getvalue())
        self.assertEqual(sorted(os.listdir(self.tmp)), before)
        return lines[0]

    def network_copy(self, name, prefix=""):
        folder = os.path.join(self.tmp, name)
        os.mkdir(folder)
        for filename in ("station_info.csv", "line_info.csv"):
            with open(os.path.join(DEMO, filename), encoding="utf-8") as handle:
                text = handle.read()
            if prefix:
                text = text.replace("bus-", prefix + "bus-")
            with open(os.path.join(folder, filename), "w", encoding="utf-8") as handle:
                handle.write(text)
        return folder

    def test_empty_network(self):
        folder = os.path.join(self.tmp, "empty")
        os.mkdir(folder)
        for filename, header in (("station_info.csv", common.STATION_FILE_COLUMNS),
                                 ("line_info.csv", common.LINE_COLUMNS)):
            with open(os.path.join(folder, filename), "w", encoding="utf-8") as handle:
                handle.write(",".join(header) + "\n")
        self.refused(["--network", folder, "--out", os.path.join(self.tmp, "o")], "no line")

    def test_one_line_network(self):
        folder = self.network_copy("one")
        path = os.path.join(folder, "line_info.csv")
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
        with open(path, "w", encoding="utf-8", newline="") as handle:
            csv.writer(handle).writerows(rows[:2])
        self.refused(["--network", folder, "--out", os.path.join(self.tmp, "o")], "has 1 line")

    def test_colliding_stop_ids_and_adcodes(self):
        a, b = self.network_copy("a"), self.network_copy("b")
        out = os.path.join(self.tmp, "o")
        self.refused(["--network", a, "--network", a, "--out", out], "same network")
        with open(os.path.join(b, "city.json"), "w", encoding="utf-8") as handle:
            json.dump({"adcode": "010", "city": "Copy"}, handle)
        self.refused(["--network", a, "--network", b, "--out", out], "--id_prefix")
        c = self.network_copy("c", prefix="x-")
        self.refused(["--network", a, "--network", c, "--out", out], "--adcode")

    def test_out_refused(self):
        self.refused(["--network", DEMO, "--out", "/dev/null"], "not a folder")
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        with open(os.path.join(other, "notes.txt"), "w") as handle:
            handle.write("mine")
        self.refused(["--network", DEMO, "--out", other], "other files")

    def test_parts_outside_plan_and_other_settings(self):
        out = os.path.join(self.tmp, "o")
        self.refused(["--network", DEMO, "--out", out] + SMALL + ["--parts", "9-9"],
                     "outside the plan")
        self.refused(["--network", DEMO, "--out", out] + SMALL + ["--parts", "x"], "--parts")
        os.mkdir(out)
        with open(os.path.join(out, names.MANIFEST), "w") as handle:
            json.dump({names.MANIFEST_MARKER: names.MANIFEST_SCHEMA, "version": common.VERSION,
                       "settings": {"seed": 1}}, handle)
        self.refused(["--network", DEMO, "--out", out] + SMALL + ["--parts", "1-1"],
                     "another dataset")


if __name__ == "__main__":
    unittest.main()
