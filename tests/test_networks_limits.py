"""The data tools (import_gtfs.py, make_benchmark.py, make_demo.py) on hostile
inputs: every input the tests build themselves, small and in temporary folders.
Each class of damage gives one line and exit status 2 (or a counted skip), never a
traceback or a hang; limits are refused by name; text reaches the terminal escaped."""

import contextlib
import csv
import datetime
import io
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "data")
IMPORTER = os.path.join(DATA, "import_gtfs.py")
BUILDER = os.path.join(DATA, "make_benchmark.py")
DEMO = os.path.join(DATA, "make_demo.py")
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import common  # noqa: E402
from transitlm.networks import benchmark_builder as mb  # noqa: E402
from transitlm.networks import gtfs_import as gtfs  # noqa: E402
from transitlm.networks import limits  # noqa: E402
from transitlm.networks.demo import build as make_demo  # noqa: E402
from tests.support.evaluator_rows import run_in_process  # noqa: E402
from tests.support.gtfs_feeds import BASE_FEED, write_feed  # noqa: E402
from tests.support.streams import unix_socket  # noqa: E402


def run(script, *args, timeout=60):
    done = subprocess.run([sys.executable, script] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


class VersionTest(unittest.TestCase):
    def test_each_tool_prints_the_project_version(self):
        for script in (IMPORTER, BUILDER, DEMO):
            status, out, err = run(script, "--version")
            self.assertEqual((status, out, err), (0, "transitlm %s\n" % common.VERSION, ""), script)


HOPS = "line_name,from_stop_id,to_stop_id,run_min,dwell_min,trips,pickup,drop_off\n"     # hop_times.csv's header


def in_process(main, *args):
    """(status, stdout, stderr) of a tool's main() run in this process (fast)."""
    return run_in_process(main, list(args))


def zip_bytes(files, method=zipfile.ZIP_DEFLATED):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return bytearray(buffer.getvalue())


def patch_headers(data, name, central=None, local=None):
    """Overwrite header fields of one zip entry: {offset: (struct format, value)}
    in its central directory record and in its local header."""
    encoded = name.encode("utf-8")
    for signature, fields, fixed in ((b"PK\x01\x02", central, 46), (b"PK\x03\x04", local, 30)):
        start = data.find(signature)
        while start >= 0:
            if data[start + fixed:start + fixed + len(encoded)] == encoded:
                for offset, (fmt, value) in (fields or {}).items():
                    struct.pack_into(fmt, data, start + offset, value)
            start = data.find(signature, start + 4)
    return data


class ImportCase(unittest.TestCase):
    """Helpers: a feed (BASE_FEED with changes) in a temporary folder, imported."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def feed(self, **changes):
        files = dict(BASE_FEED)
        for name, text in changes.items():
            name = name.replace("_txt", ".txt")
            if text is None:
                files.pop(name, None)
            else:
                files[name] = text
        return write_feed(tempfile.mkdtemp(dir=self.dir), files)

    def zip_feed(self, data):
        path = os.path.join(self.dir, "feed.zip")
        with open(path, "wb") as handle:
            handle.write(bytes(data))
        return path

    def refused(self, feed, *expected, extra=()):
        self.out = os.path.join(tempfile.mkdtemp(dir=self.dir), "out")
        status, out, err = in_process(gtfs.main, feed, "--city", "Testville", "--out", self.out, *extra)
        self.assertEqual(status, 2, out + err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("import_gtfs.py: "), err)
        self.assertLess(len(err), limits.MESSAGE_CHARS + 40, err)
        self.assertNotIn("\x1b", err)
        for text in expected:
            self.assertIn(text, err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "station_info.csv")))
        return err

    def imported(self, feed, *extra):
        self.out = os.path.join(tempfile.mkdtemp(dir=self.dir), "out")
        status, out, err = in_process(gtfs.main, feed, "--city", "Testville", "--out", self.out, *extra)
        self.assertEqual((status, err), (0, ""), err)
        return out


def replaced(name, old, new):
    text = BASE_FEED[name]
    assert old in text, (name, old)
    return text.replace(old, new, 1)


class FeedNumbersTest(ImportCase):
    """Numbers outside any sane range, in every column the importer reads."""

    def test_out_of_range_values_name_file_line_and_column(self):
        transfers = "from_stop_id,to_stop_id,transfer_type,min_transfer_time\nA,D,2,%s\n"
        frequencies = "trip_id,start_time,end_time,headway_secs\nm1,%s,%s,%s\n"
        fares = "fare_id,price\nF,%s\n"
        cases = [
            ({"calendar_txt": replaced("calendar.txt", "20240107\nSAT", "99991231\nSAT")},
             "calendar.txt line 2: end_date '99991231' is outside 19000101 to 21991231"),
            ({"calendar_txt": replaced("calendar.txt", "20240101", "00000101")},
             "calendar.txt line 2: start_date '00000101' is not a calendar date"),
            ({"calendar_dates_txt": "service_id,date,exception_type\nWK,21000229,1\n"},
             "calendar_dates.txt line 2: date '21000229' is not a calendar date"),
            ({"calendar_dates_txt": "service_id,date,exception_type\nWK,18991231,1\n"},
             "calendar_dates.txt line 2: date '18991231' is outside"),
            ({"stop_times_txt": replaced("stop_times.txt", "08:05:00,08:05:00", "08:05:00,999999:10:00")},
             "stop_times.txt line 4: time '999999:10:00' is past the limit of 167:59:59 "
             "(column departure_time)"),
            ({"stop_times_txt": replaced("stop_times.txt", "08:05:00,08:05:00", "168:00:00,")},
             "stop_times.txt line 4: time '168:00:00' is past the limit of 167:59:59 "
             "(column arrival_time)"),
            ({"stop_times_txt": replaced("stop_times.txt", "B1,2\n", "B1,3000000000\n")},
             "stop_times.txt line 3: stop_sequence '3000000000' is outside 0 to 2,147,483,647"),
            ({"stop_times_txt": replaced("stop_times.txt", "B1,2\n", "B1,-2\n")},
             "stop_times.txt line 3: stop_sequence '-2' is outside 0"),
            ({"stop_times_txt": replaced("stop_times.txt", "B1,2\n", "B1,1e3\n")},
             "stop_times.txt line 3: stop_sequence '1e3' is not a whole number"),
            ({"transfers_txt": transfers % "inf"}, "transfers.txt line 2: min_transfer_time 'inf' "
                                                   "is not a finite number"),
            ({"transfers_txt": transfers % "nan"}, "min_transfer_time 'nan' is not a finite number"),
            ({"transfers_txt": transfers % "1e400"}, "min_transfer_time '1e400' is not a finite"),
            ({"transfers_txt": transfers % "-60"}, "min_transfer_time '-60' is outside 0 to 86400"),
            ({"routes_txt": replaced("routes.txt", "M,1,,1", "M,1,,99999")},
             "routes.txt line 2: route_type '99999' is outside 0 to 1,799"),
            ({"routes_txt": replaced("routes.txt", "M,1,,1", "M,1,,-1")},
             "routes.txt line 2: route_type '-1' is outside"),
            ({"frequencies_txt": frequencies % ("08:00:00", "09:00:00", "0")},
             "frequencies.txt line 2: headway_secs '0' is outside 1 to 604,800"),
            ({"frequencies_txt": frequencies % ("08:00:00", "09:00:00", "9" * 30)},
             "frequencies.txt line 2: headway_secs '999999999999999999999999999999' is outside"),
            ({"frequencies_txt": frequencies % ("08:00:00", "4000000:00:00", "600")},
             "frequencies.txt line 2: end_time '4000000:00:00' is past the limit"),
            ({"fare_attributes_txt": fares % "nan"}, "fare_attributes.txt line 2: price 'nan' is "
                                                     "not a finite number"),
            ({"fare_attributes_txt": fares % "-1"}, "fare_attributes.txt line 2: price '-1' is outside"),
            ({"fare_attributes_txt": fares % "1e300"}, "price '1e300' is outside 0 to 1e+06"),
        ]
        for changes, expected in cases:
            with self.subTest(expected=expected):
                self.refused(self.feed(**changes), expected)

    def test_date_argument_out_of_range_is_a_usage_error(self):
        self.refused(self.feed(), "--date", "'99991231' is outside 19000101 to 21991231",
                     extra=("--date", "99991231"))

    def test_coordinates_out_of_range_make_a_stop_without_coordinates(self):
        stops = replaced("stops.txt", "D,Delta,40.030,-73.000", "D,Delta,nan,inf")
        out = self.imported(self.feed(stops_txt=stops))
        self.assertIn("1 trips calling at a stop without coordinates", out)

    def test_a_blank_time_is_a_missing_time(self):
        # a time of spaces used to reach the integer arrays as None (a TypeError)
        times = replaced("stop_times.txt", "m2,,,B1,2", "m2, , ,B1,2")
        self.imported(self.feed(stop_times_txt=times))

    def test_calendar_over_three_centuries_finishes(self):
        # 300 services over 1900-2199 (the day-by-day walk took minutes): the
        # busiest day is found from the range boundaries.
        rows = ["service_id,monday,tuesday,wednesday,thursday,friday,saturday,sunday,"
                "start_date,end_date"]
        for k in range(300):
            rows.append("S%d,1,1,1,1,1,1,1,%04d0101,21991231" % (k, 1900 + k % 290))
        rows.append("WK,1,1,1,1,1,0,0,19000101,21991231")
        rows.append("SAT,0,0,0,0,0,1,0,19000101,21991231")
        calendar = "\n".join(rows) + "\n"
        started = datetime.datetime.now()
        out = self.imported(self.feed(calendar_txt=calendar))
        self.assertLess((datetime.datetime.now() - started).total_seconds(), 5)
        self.assertIn("service day    19000101", out)      # a Monday: WK's 4 trips
        # eleven centuries: the dates are refused, by file, line and column
        self.refused(self.feed(calendar_txt=calendar.replace("21991231", "30001231")),
                     "calendar.txt line 2: end_date '30001231' is outside")

    def test_busiest_date_from_boundaries(self):
        # A: weekdays 2024-2199, 2 trips; B: every day 1-9 March 2150, 1 trip
        # (1 March 2150 is a Sunday); A removed on Wednesday 4 March; C (3
        # trips) added on Sunday 8 March.
        calendar = {"A": (datetime.date(2024, 1, 1), datetime.date(2199, 12, 31),
                          (True,) * 5 + (False, False)),
                    "B": (datetime.date(2150, 3, 1), datetime.date(2150, 3, 9), (True,) * 7)}
        exceptions = {("A", datetime.date(2150, 3, 4)): "2", ("C", datetime.date(2150, 3, 8)): "1"}
        trips = {"A": 2, "B": 1, "C": 3}
        # Monday 2 March 2150: A + B = 3, the first day with 3 (8 March: B + C = 4)
        self.assertEqual(gtfs.busiest_date(trips, calendar, exceptions),
                         (datetime.date(2150, 3, 8), 4))
        trips["C"] = 2            # 8 March: 3, a tie with 2 March, the earlier day wins
        self.assertEqual(gtfs.busiest_date(trips, calendar, exceptions),
                         (datetime.date(2150, 3, 2), 3))
        del calendar["B"]         # A alone: its first day, Monday 1 January 2024
        self.assertEqual(gtfs.busiest_date(trips, calendar, exceptions),
                         (datetime.date(2024, 1, 1), 2))
        self.assertEqual(gtfs.busiest_date({}, calendar, {}), (None, 0))

    def test_busiest_date_agrees_with_a_day_by_day_walk(self):
        import random
        rng = random.Random(7)
        first = datetime.date(2024, 1, 1)

        def walk(trips, calendar, exceptions):
            days = {d for d in (first + datetime.timedelta(n) for n in range(-10, 120))}
            best = (None, 0)
            for day in sorted(days):
                total = sum(trips.get(s, 0) for s in gtfs.active_services(day, calendar, exceptions))
                if total > best[1]:
                    best = (day, total)
            return best

        for _ in range(300):
            services = ["s%d" % k for k in range(rng.randint(1, 6))]
            calendar = {}
            for s in services[:rng.randint(0, len(services))]:
                start = first + datetime.timedelta(rng.randint(0, 60))
                calendar[s] = (start, start + datetime.timedelta(rng.randint(-3, 40)),
                               tuple(rng.random() < 0.5 for _ in range(7)))
            exceptions = {(rng.choice(services), first + datetime.timedelta(rng.randint(-5, 100))):
                          rng.choice("123") for _ in range(rng.randint(0, 6))}
            trips = {s: rng.randint(0, 5) for s in services}
            self.assertEqual(gtfs.busiest_date(trips, calendar, exceptions),
                             walk(trips, calendar, exceptions), (trips, calendar, exceptions))



class FeedFilesTest(ImportCase):
    """Damaged, encrypted, unsupported and oversized zip entries; devices, pipes and
    oversized files in a folder feed; huge fields; escapes; outputs over inputs."""

    def test_zip_entries_checked_before_and_while_unpacking(self):
        files = dict(BASE_FEED)
        cases = []
        # a zip bomb: 8 MB of one byte packs into a few KB
        bomb = dict(files, **{"stop_times.txt": files["stop_times.txt"] + "0" * 8000000})
        cases.append((zip_bytes(bomb), "stop_times.txt unpacks to 8,000,"
                                       "", "refused as a zip bomb"))
        # a declared size over the file's limit (no bytes needed to claim it)
        cases.append((patch_headers(zip_bytes(files), "stops.txt", central={24: ("<I", 2 ** 31)}),
                      "stops.txt unpacks to 2,147,483,648 bytes, over the limit of 256 MiB"))
        # encrypted (the flag bit), bzip2 and LZMA entries
        cases.append((patch_headers(zip_bytes(files), "trips.txt", central={8: ("<H", 1)},
                                    local={6: ("<H", 1)}), "trips.txt is encrypted"))
        cases.append((zip_bytes(files, zipfile.ZIP_BZIP2),
                      "uses compression method bzip2; only stored and deflate entries are read"))
        cases.append((zip_bytes(files, zipfile.ZIP_LZMA), "uses compression method LZMA"))
        cases.append((patch_headers(zip_bytes(files), "routes.txt", central={10: ("<H", 99)},
                                    local={8: ("<H", 99)}), "routes.txt uses compression method AES"))
        # a wrong CRC (stored data changed) and deflate data that is not deflate
        stored = zip_bytes(files, zipfile.ZIP_STORED)
        at = stored.find(b"Alpha")
        stored[at] = ord("a")
        cases.append((stored, "stops.txt: damaged zip entry (Bad CRC-32"))
        broken = zip_bytes(files)
        info = zipfile.ZipFile(io.BytesIO(bytes(broken))).getinfo("stop_times.txt")
        start = info.header_offset + 30 + len("stop_times.txt")
        broken[start:start + info.compress_size] = b"\xff" * info.compress_size
        cases.append((broken, "stop_times.txt: damaged zip entry"))
        # a central directory claiming more entries than the limit
        many = zip_bytes(files)
        end = many.rfind(b"PK\x05\x06")
        struct.pack_into("<HH", many, end + 8, 60000, 60000)
        cases.append((many, "has 60,000 entries, over the limit of 10,000"))
        # a local header that does not match the directory
        mismatch = patch_headers(zip_bytes(files), "routes.txt", local={0: ("<I", 0)})
        cases.append((mismatch, "routes.txt: damaged zip entry"))
        for data, *expected in cases:
            with self.subTest(expected=expected):
                self.refused(self.zip_feed(data), *expected)

    def test_truncated_zip_and_not_a_zip(self):
        data = zip_bytes(BASE_FEED)
        self.refused(self.zip_feed(data[:len(data) // 2]), "neither a zip file nor a folder")
        self.refused(self.zip_feed(b"\x1b[31mnot a zip"), "neither a zip file nor a folder")

    def test_folder_feed_devices_pipes_and_oversized_files_are_refused_by_name(self):
        if os.path.exists("/dev/zero"):
            feed = self.feed()
            os.remove(os.path.join(feed, "stop_times.txt"))
            os.symlink("/dev/zero", os.path.join(feed, "stop_times.txt"))
            self.refused(feed, "stop_times.txt is not a regular file")
        if hasattr(os, "mkfifo"):
            feed = self.feed()
            os.remove(os.path.join(feed, "stops.txt"))
            os.mkfifo(os.path.join(feed, "stops.txt"))      # no writer: an open would wait
            self.refused(feed, "stops.txt is not a regular file")
            status, _, err = run(IMPORTER, os.path.join(feed, "stops.txt"), "--city", "X",
                                 "--out", self.dir, timeout=30)
            self.assertEqual(status, 2, err)
            self.assertIn("neither a zip file nor a folder", err)
        feed = self.feed()
        with open(os.path.join(feed, "trips.txt"), "r+b") as handle:
            handle.truncate(limits.GTFS_FILE_BYTES + 1)          # sparse: no disk used
        self.refused(feed, "trips.txt is 268,435,457 bytes, over the limit of 256 MiB")

    def test_endless_rows_and_huge_fields_stop_at_the_row_limit(self):
        feed = self.feed()
        with open(os.path.join(feed, "stop_times.txt"), "ab") as handle:
            handle.write(b"\0" * (limits.GTFS_ROW_BYTES + 200000))     # zeros, no line end
        self.refused(feed, "stop_times.txt line 15: a row is longer than 1 MiB (the limit)")
        huge = "x" * 3000000                                        # a 3 MB stop name
        err = self.refused(self.feed(stops_txt=BASE_FEED["stops.txt"] + "E,%s,1,1,,\n" % huge),
                           "stops.txt line 8: a row is longer than 1 MiB")
        self.assertNotIn("xxxxxxxxxx", err)
        quoted = BASE_FEED["stops.txt"] + 'E,"%s' % ("a\n" * 800000)   # a quote never closed
        self.refused(self.feed(stops_txt=quoted), "stops.txt line ", ": a row is longer than 1 MiB")
        # a long value within the row limit is quoted clipped
        times = replaced("stop_times.txt", "B1,2\n", "B1,%s\n" % ("7" * 500000))
        err = self.refused(self.feed(stop_times_txt=times),
                           "stop_times.txt line 3: stop_sequence '777", "(500,000 characters)")
        self.assertLess(len(err), 200)

    def test_the_streaming_cap_counts_every_byte(self):
        reader = limits.CappedReader(io.BytesIO(b"a,b\n" * 100), "x.txt", 50, 1000)
        with self.assertRaises(limits.LimitError) as caught:
            limits.capped_text(reader).read()
        self.assertEqual(str(caught.exception), "x.txt is longer than 50 bytes (the limit)")
        reader = limits.CappedReader(io.BytesIO(b"a,b\n" * 100), "x.txt", 400, 1000)
        self.assertEqual(limits.capped_text(reader).read(), "a,b\n" * 100)

    def test_escape_sequences_from_the_feed_reach_the_terminal_escaped(self):
        agency = "agency_id,agency_name,agency_url,agency_timezone\nX,T,http://x,Evil/\x1b[2J\x1b]0;owned\x07\n"
        trips = replaced("trips.txt", "BUS,WK,b1,0", "BUS,WK,b\x1b[31m1,0")
        times = BASE_FEED["stop_times.txt"].replace("b1,", "b\x1b[31m1,")
        times += "b\x1b[31m1,10:20:00,10:20:00,A,0\n"           # runs backwards: a skip line
        out = self.imported(self.feed(agency_txt=agency, trips_txt=trips, stop_times_txt=times))
        self.assertNotIn("\x1b", out)
        self.assertNotIn("\x07", out)
        self.assertIn("trip b\\x1b[31m1", out)
        self.assertIn("city, adcode   Evil\\x1b[2J, 0", in_process(
            gtfs.main, self.feed(), "--city", "Evil\x1b[2J", "--out", self.out + "2")[1])
        # Without --city the hint names the feed's agencies, escaped too.
        status, _, err = in_process(gtfs.main, self.feed(agency_txt=agency.replace(
            ",T,", ",T\x1b[2J,")), "--out", self.out + "3")
        self.assertEqual(status, 2)
        self.assertNotIn("\x1b", err)
        self.assertIn("T\\u001b[2J", err)
        stops = replaced("stops.txt", "A,Alpha,40.000,-73.000", "A,Alpha,40.000,-73.000")
        err = self.refused(self.feed(stops_txt=stops, routes_txt=replaced(
            "routes.txt", "M,1,,1", "M,1,,\x1b[31m\r\nbad")), "route_type '\\x1b[31m")
        self.assertNotIn("\r", err)

    def test_outputs_never_overwrite_inputs(self):
        feed = self.feed()
        os.symlink(os.path.join(feed, "stops.txt"), os.path.join(feed, "station_info.csv"))
        with open(os.path.join(feed, "stops.txt"), "rb") as handle:
            before = handle.read()
        err = self.refused(feed, "would overwrite the input", extra=("--out", feed))
        self.assertIn("stops.txt", err)
        with open(os.path.join(feed, "stops.txt"), "rb") as handle:
            self.assertEqual(handle.read(), before)
        feed = self.feed()
        out = os.path.join(self.dir, "hard")
        os.makedirs(out)
        os.link(os.path.join(feed, "trips.txt"), os.path.join(out, "line_info.csv"))
        self.refused(feed, "line_info.csv would overwrite the input", extra=("--out", out))
        archive = self.zip_feed(zip_bytes(BASE_FEED))
        self.refused(archive, "is not a folder", extra=("--out", archive))
        # A FIFO or a device is written through (tests/test_outputs_streams.py);
        # a socket can be neither written through nor replaced.
        out = os.path.join(self.dir, "socket_out")
        os.makedirs(out)
        with contextlib.closing(unix_socket(os.path.join(out, "hop_times.csv"))):
            self.refused(self.feed(), "hop_times.csv is a socket", extra=("--out", out))

    def test_a_link_planted_under_an_output_name_is_replaced_not_written_through(self):
        # A symlink where an output goes, pointing at a file no run reads: an
        # output the folder holds, refused without --overwrite (issue 46.4);
        # with it, the import replaces the link with its file and never
        # writes the target.
        victim = os.path.join(self.dir, "victim.txt")
        with open(victim, "w") as handle:
            handle.write("keep me")
        out = os.path.join(self.dir, "planted")
        os.makedirs(out)
        os.symlink(victim, os.path.join(out, "line_info.csv"))
        status, _, err = in_process(gtfs.main, self.feed(), "--city", "Testville", "--out", out)
        self.assertEqual(status, 2, err)
        self.assertIn("already holds a network (line_info.csv); pass --overwrite", err)
        self.assertTrue(os.path.islink(os.path.join(out, "line_info.csv")))
        self.imported(self.feed(), "--out", out, "--overwrite")
        with open(victim) as handle:
            self.assertEqual(handle.read(), "keep me")
        self.assertFalse(os.path.islink(os.path.join(out, "line_info.csv")))



class FeedSizeLimitsTest(ImportCase):
    """The counts that bound memory, each refused by name (limits made small here)."""

    def test_each_count_limit(self):
        cases = [
            (limits, "GTFS_TABLE_ROWS", 12, "the feed's files other than stop_times.txt have more "
                                            "than 12 lines together (the limit), reached in"),
            (gtfs, "MAX_DAY_STOP_TIMES", 5, "stop_times.txt: more than 5 stop times on the service "
                                            "day (the limit)"),
            (gtfs, "MAX_LINE_STOPS", 4, "call at 8 stops in all, over the limit of 4"),
            (gtfs, "MAX_TRANSFER_LINKS", 1, "link more than 1 pairs of stops (the limit)"),
        ]
        for module, name, value, expected in cases:
            with self.subTest(name=name), mock.patch.object(module, name, value):
                self.refused(self.feed(), expected)

    def test_a_trip_over_the_stop_limit_is_skipped_and_counted(self):
        with mock.patch.object(gtfs, "MAX_STOPS_PER_TRIP", 2):
            out = self.imported(self.feed())
        self.assertIn("trips with more than 2 stop times", out)
        # (sequence, stop * 4 + rule bits, arrival, departure) per stop time
        values = [k for n in range(3) for k in (n, 4 * n, 60 * n, 60 * n)]
        self.assertEqual(gtfs.trip_pattern(values)[0], (0, 1, 2))
        self.assertEqual(gtfs.trip_pattern(values)[2:], ([0, 60, 120], [0, 60, 120]))

    def test_unique_names_stay_linear(self):
        wanted = [("B", "x", "y", False, "R")] * 3000
        names = gtfs.unique_names(wanted)
        self.assertEqual(names[:3], ["B(x--y)", "B/R(x--y)", "B/R#2(x--y)"])
        self.assertEqual(len(set(names)), 3000)



def read_table(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def write_table(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)


class NetworkCase(unittest.TestCase):
    """A copy of the bundled demo network, changed, in a temporary folder."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def network(self, stations=None, lines=None, files=None):
        """stations/lines: {(row, column name): new text} (row 1 = first data row);
        files: {name: text} written as they are."""
        folder = tempfile.mkdtemp(dir=self.dir)
        for name, changes in (("station_info.csv", stations), ("line_info.csv", lines)):
            rows = read_table(os.path.join(DATA, name))
            for (row, column), text in (changes or {}).items():
                rows[row][rows[0].index(column)] = text
            write_table(os.path.join(folder, name), rows)
        for name, text in (files or {}).items():
            with open(os.path.join(folder, name), "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        return folder

    def build(self, network, *extra, samples="2", seed="5"):
        out = os.path.join(tempfile.mkdtemp(dir=self.dir), "bench")
        status, stdout, err = in_process(mb.main, "--network", network, "--out", out,
                                         "--samples", samples, "--seed", seed, *extra)
        return status, stdout, err, out

    def refused(self, network, *expected, extra=()):
        status, stdout, err, out = self.build(network, *extra)
        self.assertEqual(status, 2, stdout + err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("make_benchmark.py: "), err)
        self.assertLess(len(err), limits.MESSAGE_CHARS + 40, err)
        self.assertNotIn("\x1b", err)
        for text in expected:
            self.assertIn(text, err)
        return err


class NetworkInputTest(NetworkCase):
    """make_benchmark.py on odd networks: every bad value refused by file, line and column."""

    def test_odd_values_are_refused(self):
        deep = "[" * 60000 + "]" * 60000
        cases = [
            ({"stations": {(1, "next_hop_stations"): '[["bus-100002"]]'}},
             "station_info.csv line 2: next_hop_stations of stop 'bus-100001' is not a list of stop ids"),
            ({"stations": {(3, "next_hop_stations"): "7"}},
             "station_info.csv line 4: next_hop_stations of stop 'bus-100003' is not a list"),
            ({"stations": {(2, "next_hop_stations"): '{"a": 1}'}}, "is not a list of stop ids"),
            ({"stations": {(1, "next_hop_stations"): deep}},
             "station_info.csv line 2: next_hop_stations is nested more than 100 levels deep"),
            ({"stations": {(1, "next_hop_stations"): "[\"a\""}}, "next_hop_stations '[\"a\"' is not JSON"),
            ({"lines": {(1, "station_list"): deep}},
             "line_info.csv line 2: station_list is nested more than 100 levels deep"),
            ({"lines": {(2, "station_list"): '[["bus-100001"]]'}},
             "line_info.csv line 3: station_list of ", 'is not a list of objects with a "stop_id"'),
            ({"lines": {(2, "station_list"): '[{"stop_id": 5}]'}}, 'with a "stop_id"'),
            ({"lines": {(2, "station_list"): "12"}}, "line_info.csv line 3: station_list of"),
            ({"lines": {(2, "station_list"): '[{"stop_id": "nowhere"}]'}},
             "line_info.csv line 3: station_list of", "names unknown stops"),
            ({"stations": {(4, "coord_x"): "nan"}},
             "station_info.csv line 5: coord_x 'nan' is not a finite number"),
            ({"stations": {(4, "coord_y"): "-inf"}}, "coord_y '-inf' is not a finite number"),
            ({"stations": {(4, "coord_y"): "1e400"}}, "coord_y '1e400' is not a finite number"),
            ({"stations": {(4, "coord_x"): "200"}}, "coord_x '200' is outside -180 to 180"),
            ({"stations": {(4, "coord_y"): ""}}, "station_info.csv line 5: coord_y '' is not a number"),
            ({"stations": {(1, "ad_code"): "0755"}},
             "station_info.csv line 2: next hop 'bus-100002' of stop 'bus-100001' joins stops "
             "of ad_code '010' and '0755'"),
            ({"stations": {(1, "ad_code"): "0755", (1, "next_hop_stations"): "[]",
                           (2, "next_hop_stations"): '["bus-100003"]'}},
             "line_info.csv line 2: line ", "joins stops of ad_code '010' and '0755'"),
            ({"files": {"city.json": "[" * 30000 + "]" * 30000}},
             "city.json is nested more than 100 levels deep"),
            ({"files": {"city.json": deep}}, "city.json is nested more than 100 levels deep"),
            ({"files": {"city.json": " " * (limits.MIB + 1)}},
             "city.json is 1,048,577 bytes, over the limit of 1 MiB"),
            ({"files": {"city.json": '{"adcode": ["010"], "city": "X"}'}},
             '"adcode" must be text or a whole number'),
            ({"files": {"city.json": "[1, 2]"}}, 'needs a JSON object with "adcode" and "city"'),
            ({"files": {"city.json": "{"}}, "city.json is not JSON"),
            ({"files": {"hop_times.csv": HOPS + "L,a,b,-5,0,1,1,1\n"}},
             "hop_times.csv line 2: run_min '-5' is outside 0 to 10080"),
            ({"files": {"hop_times.csv": HOPS + ",a,b,nan,,,,\n"}},
             "hop_times.csv line 2: run_min 'nan' is not a finite number"),
            ({"files": {"hop_times.csv": HOPS + "L,a,b,inf,0,1,1,1\n"}},
             "run_min 'inf' is not a finite number"),
            ({"files": {"hop_times.csv": HOPS + "L,a,b,3,-1,1,1,1\n"}},
             "hop_times.csv line 2: dwell_min '-1' is outside 0 to 10080"),
            ({"files": {"hop_times.csv": HOPS + "L,a\n"}},
             "hop_times.csv line 2: run_min '' is not a number"),
            ({"files": {"line_service.csv": "line_name,route_id,headway_min,fare\nL,R,5,-3\n"}},
             "line_service.csv line 2: fare '-3' is outside 0 to 1e+06"),
            ({"files": {"line_service.csv": "line_name,route_id,headway_min,fare\nL,R,nan,\n"}},
             "line_service.csv line 2: headway_min 'nan' is not a finite number"),
        ]
        for changes, *expected in cases:
            with self.subTest(expected=expected):
                self.refused(self.network(**changes), *expected)

    def test_devices_pipes_and_long_rows_are_refused_by_name(self):
        network = self.network()
        if os.path.exists("/dev/zero"):
            os.symlink("/dev/zero", os.path.join(network, "hop_times.csv"))
            self.refused(network, "hop_times.csv is not a regular file")
            os.remove(os.path.join(network, "hop_times.csv"))
        if hasattr(os, "mkfifo"):
            os.mkfifo(os.path.join(network, "line_service.csv"))
            self.refused(network, "line_service.csv is not a regular file")
            os.remove(os.path.join(network, "line_service.csv"))
        with mock.patch.object(limits, "NETWORK_ROW_BYTES", 1000):
            long_row = self.network(stations={(3, "station_name"): "x" * 300000})
            err = self.refused(long_row, "station_info.csv line 4: a row is longer than 1,000 bytes")
        self.assertNotIn("xxxxxxxxxx", err)
        with mock.patch.object(limits, "NETWORK_ROWS", 100):
            self.refused(self.network(), "the network's files have more than 100 lines together")

    def test_escape_sequences_in_messages_are_escaped(self):
        err = self.refused(self.network(stations={(1, "stop_id"): "\x1b[2Jevil",
                                                  (1, "next_hop_stations"): "[[1]]"}),
                           "stop '\\x1b[2Jevil'")
        self.assertNotIn("\x1b", err)

    def test_outputs_never_overwrite_inputs(self):
        network = self.network()
        os.symlink(os.path.join(network, "station_info.csv"),
                   os.path.join(network, "benchmark1_single_route.csv"))
        with open(os.path.join(network, "station_info.csv"), "rb") as handle:
            before = handle.read()
        status, _, err = in_process(mb.main, "--network", network, "--out", network,
                                    "--samples", "1")
        self.assertEqual(status, 2, err)
        self.assertIn("benchmark1_single_route.csv would overwrite the input", err)
        self.assertIn("station_info.csv", err)
        with open(os.path.join(network, "station_info.csv"), "rb") as handle:
            self.assertEqual(handle.read(), before)
        status, _, err = in_process(mb.main, "--network", network, "--out",
                                    os.path.join(network, "line_info.csv"), "--samples", "1")
        self.assertEqual(status, 2, err)
        self.assertIn("is not a folder", err)
        out = os.path.join(self.dir, "socket_out")
        os.makedirs(out)
        with contextlib.closing(unix_socket(os.path.join(out, "general_llm.csv"))):
            status, _, err = in_process(mb.main, "--network", network, "--out", out,
                                        "--samples", "1")
        self.assertEqual(status, 2, err)
        self.assertIn("general_llm.csv is a socket", err)

    def test_a_link_planted_under_an_output_name_is_replaced_not_written_through(self):
        victim = os.path.join(self.dir, "victim.csv")
        with open(victim, "w") as handle:
            handle.write("keep me")
        out = os.path.join(self.dir, "planted")
        os.makedirs(out)
        os.symlink(victim, os.path.join(out, "benchmark3_diversity.csv"))
        status, _, err = in_process(mb.main, "--network", DATA, "--out", out, "--samples", "1")
        self.assertEqual(status, 2, err)       # an output it holds (issue 46.4)
        self.assertIn("already holds a benchmark (benchmark3_diversity.csv)", err)
        self.assertTrue(os.path.islink(os.path.join(out, "benchmark3_diversity.csv")))
        status, _, err = in_process(mb.main, "--network", DATA, "--out", out, "--samples", "1",
                                    "--overwrite")
        self.assertEqual(status, 0, err)
        with open(victim) as handle:
            self.assertEqual(handle.read(), "keep me")
        self.assertFalse(os.path.islink(os.path.join(out, "benchmark3_diversity.csv")))

    def test_argument_limits(self):
        for args, expected in ((("--samples", "1000000"), "'1000000' is outside 1 to 100,000"),
                               (("--samples", "0"), "outside 1"),
                               (("--samples", "9" * 5000), "is not a whole number"),
                               (("--seed", "9" * 5000), "at most 40 digits")):
            status, _, err = in_process(mb.main, "--network", DATA, "--out", self.dir, *args)
            self.assertEqual((status, len(err.splitlines())), (2, 1), err)
            self.assertIn(expected, err)
            self.assertLess(len(err), 300)


class RowIdTest(NetworkCase):
    """Issue 22, ids: from the network's identity, the seed, the benchmark and the row."""

    def ids(self, network, seed="5"):
        status, _, err, out = self.build(network, samples="3", seed=seed)
        self.assertEqual(status, 0, err)
        ids = []
        for filename in ("benchmark1_single_route.csv", "benchmark2_personalized.csv",
                         "benchmark3_diversity.csv", "general_llm.csv"):
            rows = read_table(os.path.join(out, filename))
            ids.extend(row[rows[0].index("indexid")] for row in rows[1:])
        self.assertEqual(len(ids), 12)
        return ids

    def test_two_networks_share_no_id_and_one_network_always_gives_the_same(self):
        first = self.ids(DATA)
        self.assertEqual(len(set(first)), 12)
        self.assertEqual(self.ids(DATA), first)
        self.assertEqual(self.ids(self.network()), first)     # the same files elsewhere
        # the same stations and lines with a city.json: another network
        other = self.ids(self.network(files={"city.json": '{"adcode": "010", "city": "X"}'}))
        self.assertEqual(set(first) & set(other), set())
        moved = self.ids(self.network(stations={(1, "coord_x"): "116.476126"}))
        self.assertEqual(set(first) & set(moved), set())
        self.assertEqual(set(first) & set(self.ids(DATA, seed="6")), set())

    def test_identity_is_the_files_hash(self):
        network = self.network()
        identity = mb.network_identity(network)
        self.assertEqual(identity, mb.network_identity(DATA))
        with open(os.path.join(network, "line_info.csv"), "a", encoding="utf-8") as handle:
            handle.write("\n")
        self.assertNotEqual(mb.network_identity(network), identity)


class DemoArgumentsTest(unittest.TestCase):
    def test_scale_options_are_bounded(self):
        for args, expected in ((("--stations", "99999999"), "outside 0 to 1,000,000"),
                               (("--samples", "-1"), "outside 0 to 1,000,000"),
                               (("--workers", "1000"), "outside 0 to 64"),
                               (("--seed", "1" * 100), "at most 40 digits")):
            status, _, err = in_process(make_demo.main, *args)
            self.assertEqual((status, len(err.splitlines())), (2, 1), err)
            self.assertIn(expected, err)
        with tempfile.NamedTemporaryFile() as handle:
            status, _, err = in_process(make_demo.main, "--out", handle.name)
        self.assertEqual(status, 2)
        self.assertIn("is not a folder", err)
        with tempfile.TemporaryDirectory() as out:
            os.mkdir(os.path.join(out, "line_info.csv"))
            status, _, err = in_process(make_demo.main, "--out", out)
        self.assertEqual(status, 2)
        self.assertIn("line_info.csv is a folder", err)


if __name__ == "__main__":
    unittest.main()
