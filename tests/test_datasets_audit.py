"""make_dataset.py's corpus audit (transitlm/datasets/audit.py) and the
corpus at scale (issue 44): the run that builds a part audits its records in
the tasks and does not read the part back; a part built by another run is
read back and audited, and one that is not a part is refused in one line;
records whose fields are not a session's; sessions sharing an origin by the
corpus's density; a signal as a part's temporary is made."""

import collections
import contextlib
import csv
import io
import json
import os
import re
import shutil
import tempfile
import unittest
from unittest import mock

from tests.support.dataset_builds import DEMO, SMALL, command, corpus_rows, scratch
from tests.support.lane import Offloaded
from transitlm.datasets import cli, release_names as names

STOPPED_AS_A_PART_OPENS = Offloaded("tests.support.dataset_interrupts:stopped_as_a_part_opens",
                                    DEMO, os.path.join(scratch("transitlm-dataset-open-"), "release"))


class StoppedAsAPartOpens(unittest.TestCase):
    """SIGINT the moment a corpus part's temporary is made, before its writer
    is handed back: the run stops with 130 and leaves no temporary."""

    def test_no_temporary_left(self):
        outcome = STOPPED_AS_A_PART_OPENS.result()
        self.assertEqual(len(outcome["opened"]), 2)
        self.assertEqual(outcome["status"], 130)
        self.assertEqual([n for n in outcome["names"] if n.startswith(".")], [])


class ReadBack(unittest.TestCase):
    """A part built by another run (another process, another machine) is
    checked in full by the run that completes the folder: a text that no
    longer states its record is refused (the completing run does not check
    again the texts of the parts it built itself; its tasks did)."""

    def part_from_another_run(self):
        """(the completing run's arguments, part 1 built by a --parts run)."""
        tmp = tempfile.mkdtemp(prefix="transitlm-dataset-readback-")
        self.addCleanup(shutil.rmtree, tmp, True)
        out = os.path.join(tmp, "release")
        base = ["--network", DEMO, "--out", out] + SMALL
        command(*(base + ["--parts", "1-1"]))
        return base, os.path.join(out, names.corpus_part(1))

    def test_an_altered_part_is_refused(self):
        base, part = self.part_from_another_run()
        with open(part, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
        number, kind, _, text, record = rows[1]
        stop = json.loads(record)["stop_id"]
        self.assertIn(stop, text)
        rows[1][3] = text.replace(stop, "X" + stop)
        with open(part, "w", encoding="utf-8", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = cli.main(base)
        self.assertEqual(status, 2, err.getvalue())
        self.assertEqual(len(err.getvalue().splitlines()), 1, err.getvalue())
        self.assertIn("record %s" % number, err.getvalue())

    def test_a_broken_part_is_one_line(self):
        base, part = self.part_from_another_run()
        with open(part, "rb") as handle:
            whole = handle.read()

        def cut(rows):
            return [rows[0], rows[1][:4]] + rows[2:]

        def not_json(rows):
            return [rows[0], rows[1][:4] + ["{not json"]] + rows[2:]
        breaks = [("row 1 has 4 cells", cut), ("its record is not a JSON object", not_json),
                  ("cannot be read as a corpus part", None)]
        for words, change in breaks:
            if change is None:
                data = whole[:200] + b"\xff\xfe" + whole[200:]
            else:
                rows = list(csv.reader(io.StringIO(whole.decode("utf-8"), newline="")))
                text = io.StringIO(newline="")
                csv.writer(text).writerows(change(rows))
                data = text.getvalue().encode("utf-8")
            with open(part, "wb") as handle:
                handle.write(data)
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                status = cli.main(base)
            with self.subTest(words):
                self.assertEqual(status, 2, err.getvalue())
                self.assertEqual(len(err.getvalue().splitlines()), 1, err.getvalue())
                self.assertIn(words, err.getvalue())
                self.assertIn(names.corpus_part(1), err.getvalue())


class OriginGroups(unittest.TestCase):
    """Sessions share an origin point in groups: by the corpus's density (20
    to 100) unless --origin_group says; dataset.json says which; a group cut
    by a part boundary gives the same bytes whatever builds the parts."""

    def test_the_density_rule(self):
        from transitlm.datasets.splits import origin_group
        self.assertEqual(origin_group(100000, 977), 20)        # 102 sessions a station
        self.assertEqual(origin_group(200000, 977), 40)
        self.assertEqual(origin_group(1000000, 977), 100)      # capped
        self.assertEqual(origin_group(0, 0), 20)
        self.assertEqual(origin_group(3000000, 30000), 20)

    def test_groups_share_an_origin_and_parts_give_the_same_bytes(self):
        root = tempfile.mkdtemp(prefix="transitlm-dataset-groups-")
        self.addCleanup(shutil.rmtree, root, True)
        out = os.path.join(root, "release")
        base = ["--network", DEMO, "--out", out, "--train", "2", "--test", "2", "--corpus", "40",
                "--part_size", "30", "--origin_group", "7"]
        command(*base)
        with open(os.path.join(out, names.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        self.assertEqual(manifest["settings"]["origin_group"], 7)
        self.assertEqual(set(manifest["origin_groups"].values()), {7})
        starts = collections.defaultdict(collections.Counter)
        for row in corpus_rows(out):
            if row["kind"] == "session":
                record = json.loads(row["record"])
                starts[row["adcode"]][record["start"]] += 1
        for code, counter in starts.items():
            # a group's sessions start at its origin (a session that finds no
            # route from it draws a trip of its own)
            self.assertGreaterEqual(max(counter.values()), 5, code)
            self.assertLess(len(counter), sum(counter.values()) / 3.0, code)
        one = os.path.join(root, "one")
        os.rename(out, one)
        command(*(base + ["--parts", "1-3", "--workers", "2"]))
        command(*(base + ["--workers", "2"]))
        for folder, _, files in os.walk(one):
            rel = os.path.relpath(folder, one)
            for name in files:
                with open(os.path.join(folder, name), "rb") as a, \
                        open(os.path.join(out, rel, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), "%s/%s" % (rel, name))


class AuditOfHostileRecords(unittest.TestCase):
    """A record whose text and network checks pass but whose fields are not
    what a session's are: one line naming the part and the record, never a
    traceback."""

    def test_fields_of_the_wrong_type(self):
        from common import InputError
        from transitlm.datasets import corpus_texts as texts
        from transitlm.datasets.audit import CorpusAudit
        from transitlm.datasets.splits import HoldOut

        class Ctx(object):
            pass
        ctx = Ctx()
        ctx.net_of = {"010": object()}
        ctx.holdout = HoldOut([])
        records = [{"start": 12.5, "end": "1,2", "routes": []},
                   {"start": "1", "end": "1,2", "routes": []},
                   {"start": "1,2", "end": "1,2", "routes": [{"station_sequence": 7}]},
                   {"start": "1,2", "end": "1,2", "routes": [{"station_sequence": ["a", "b"],
                                                              "line_sequence": 3}]},
                   {"start": "1,2", "end": "1,2"}]
        with mock.patch.object(texts, "record_matches_network", return_value=(True, "")):
            for record in records:
                audit = CorpusAudit()
                with self.subTest(record=record), self.assertRaises(InputError) as caught:
                    audit.add(ctx, 4, "77", "session", "010", "text", json.dumps(record),
                              check_text=False)
                message = str(caught.exception)
                self.assertIn("%s record 77: the record is not a session record" % names.corpus_part(4),
                              message)
                self.assertNotIn("\n", message)


class AuditedAsMade(unittest.TestCase):
    """The run that builds a part checks each of its records in the task that
    made it (audit.CorpusAudit, as the part holds it) and does not read the
    part back; a record the audit refuses stops the run: exit 2, one line
    naming the part and the record, no card."""

    def run_builder(self, argv):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = cli.main(argv)
        return status, err.getvalue()

    def test_built_parts_are_not_read_back(self):
        from transitlm.datasets import release
        tmp = tempfile.mkdtemp(prefix="transitlm-dataset-audit-")
        self.addCleanup(shutil.rmtree, tmp, True)
        out = os.path.join(tmp, "release")
        with mock.patch.object(release, "read_csv_rows",
                               side_effect=AssertionError("a part read back")):
            status, err = self.run_builder(["--network", DEMO, "--out", out] + SMALL)
        self.assertEqual(status, 0, err)
        with open(os.path.join(out, names.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        # The figures the tasks' audits gave are those of the parts on disk.
        total = 0
        for rel, entry in manifest["files"].items():
            if rel.startswith(names.CORPUS_FOLDER + "/"):
                with open(os.path.join(out, rel), encoding="utf-8", newline="") as handle:
                    self.assertEqual(entry["rows"], sum(1 for _ in csv.reader(handle)) - 1, rel)
                total += entry["rows"]
        self.assertEqual(manifest["statistics"]["corpus"]["records"], total)

    def test_a_record_the_audit_refuses_stops_the_run(self):
        from transitlm.datasets import corpus_texts as texts
        tmp = tempfile.mkdtemp(prefix="transitlm-dataset-audit-")
        self.addCleanup(shutil.rmtree, tmp, True)
        out = os.path.join(tmp, "release")
        real, seen = texts.record_matches_network, []

        def off_network(kind, record, net):
            seen.append(kind)
            if kind == "session" and seen.count("session") == 3:
                return False, "stop X is not a station of the network"
            return real(kind, record, net)
        with mock.patch.object(texts, "record_matches_network", off_network):
            status, err = self.run_builder(["--network", DEMO, "--out", out] + SMALL)
        self.assertEqual(status, 2, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, r"%s record \d+: stop X is not" % re.escape(names.corpus_part(999)).replace("999", r"\d+"))
        self.assertFalse(os.path.exists(os.path.join(out, names.CARD)))


class HoldOutCache(unittest.TestCase):
    """A --parts run reads the test trips an earlier --parts run of the same
    settings drew (a dot-file keyed by the settings and version) instead of
    drawing the four test files again; a cache that is not one is ignored;
    the folder the completing run leaves is the bytes of one run, cache-free."""

    def test_parts_runs_share_the_hold_out(self):
        root = tempfile.mkdtemp(prefix="transitlm-dataset-holdout-")
        self.addCleanup(shutil.rmtree, root, True)
        out = os.path.join(root, "release")
        base = ["--network", DEMO, "--out", out] + SMALL
        command(*base)
        one = os.path.join(root, "one")
        os.rename(out, one)

        first = command(*(base + ["--parts", "1-1"]))
        self.assertNotIn("earlier --parts run", first)
        caches = [n for n in os.listdir(out) if n.startswith(".transitlm-holdout-")]
        self.assertEqual(len(caches), 1, os.listdir(out))
        second = command(*(base + ["--parts", "2-2"]))
        self.assertRegex(second, r"hold-out +\d+ test trips \(\d+ pairs\), as an earlier --parts run")
        self.assertNotIn("-test.csv", second)          # no test file drawn

        # A cache that is not one (cut short) is ignored: the run draws.
        cache = os.path.join(out, caches[0])
        with open(cache, "rb") as handle:
            whole = handle.read()
        with open(cache, "wb") as handle:
            handle.write(whole[:len(whole) // 2])
        third = command(*(base + ["--parts", "3-3"]))
        self.assertNotIn("earlier --parts run", third)
        self.assertIn("-test.csv", third)

        command(*base)
        self.assertEqual([n for n in os.listdir(out) if n.startswith(".")], [])
        for folder, _, files in os.walk(one):
            rel = os.path.relpath(folder, one)
            for name in files:        # both built at the same --out path
                with open(os.path.join(folder, name), "rb") as a, \
                        open(os.path.join(out, rel, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), "%s/%s" % (rel, name))

    def test_another_key_is_not_read(self):
        from transitlm.datasets import release
        root = tempfile.mkdtemp(prefix="transitlm-dataset-holdout-")
        self.addCleanup(shutil.rmtree, root, True)
        entries = [(("a", "b"), (1.0, 2.0), (3.0, 4.5))]
        key = release.holdout_key({"seed": 1})
        release.write_holdout_cache(root, key, entries)
        self.assertEqual(release.read_holdout_cache(root, key), entries)
        self.assertIsNone(release.read_holdout_cache(root, release.holdout_key({"seed": 2})))
        # the same name (a key's first 32 digits) but not the whole key
        name = [n for n in os.listdir(root)][0]
        with open(os.path.join(root, name), encoding="utf-8") as handle:
            data = json.load(handle)
        data["key"] = key[:32] + "0" * 32
        with open(os.path.join(root, name), "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        self.assertIsNone(release.read_holdout_cache(root, key))
