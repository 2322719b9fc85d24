"""data/import_gtfs.py and its machinery, transitlm/networks/gtfs_import.py: helpers,
hand-made (damaged) feeds and the real MTA feeds."""

import csv
import datetime
import json
import os
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "data")
SHARED_GTFS = os.path.join(REPO, "..", "shared", "gtfs")

import common  # noqa: E402
from transitlm.networks import gtfs_import as gtfs  # noqa: E402
from tests import real_feeds  # noqa: E402
from tests.support.evaluator_rows import run_in_process
from tests.support.gtfs_feeds import BASE_FEED, network_file_with_prefix, write_feed

csv.field_size_limit(2 ** 31 - 1)


def run_import(feed, out, *extra, city="Test City"):
    """Run the importer's command line in-process (with --city unless city is
    None or --city is in extra) -> .returncode, .stdout, .stderr.  The
    program itself runs in tests/real_feeds.py and test_provenance."""
    args = [feed, "--out", out] + list(extra)
    if city is not None and "--city" not in extra:
        args += ["--city", city]
    status, stdout, stderr = run_in_process(gtfs.main, args)
    return types.SimpleNamespace(returncode=status, stdout=stdout, stderr=stderr)


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


class HelperTest(unittest.TestCase):
    def test_parse_time_past_midnight_and_empty(self):
        self.assertEqual(gtfs.parse_time("25:03:10"), 25 * 3600 + 190)
        self.assertEqual(gtfs.parse_time(" 7:00:00"), 7 * 3600)
        self.assertIsNone(gtfs.parse_time(""))
        for bad in ("7:00", "a:00:00", "07:61:00"):
            with self.assertRaises(ValueError):
                gtfs.parse_time(bad)

    def test_is_rail(self):
        self.assertEqual([t for t in (0, 1, 2, 3, 4, 100, 199, 200, 400, 499, 700) if gtfs.is_rail(t)],
                         [1, 2, 100, 199, 400, 499])

    def test_line_names_rail_and_defused(self):
        self.assertEqual(gtfs.line_base_name("A", "8 Av", "A", True), "地铁A")
        self.assertEqual(gtfs.line_base_name("", "地铁2号线", "x", True), "地铁2号线")
        self.assertEqual(gtfs.line_base_name("", "", "R9", False), "R9")
        self.assertEqual(gtfs.line_base_name("", "环城地铁号线", "x", False), "环城地·铁号·线")
        self.assertEqual(gtfs.line_name("12", "X地铁站", "Y", False), "12(X地·铁站--Y)")
        self.assertEqual(gtfs.line_name("地铁A", "X地铁站", "Y", True), "地铁A(X地铁站--Y)")

    def test_unique_names(self):
        wanted = [("地铁S", "A", "B", True, "GS"), ("地铁S", "A", "B", True, "FS"),
                  ("地铁S", "A", "B", True, "FS")]
        self.assertEqual(gtfs.unique_names(wanted),
                         ["地铁S(A--B)", "地铁S/FS(A--B)", "地铁S/FS#2(A--B)"])
        self.assertEqual(gtfs.unique_names([]), [])

    def test_trip_pattern_sorts_and_rejects(self):
        # (sequence, stop * 4 + rule bits, arrival, departure) in file order; unsorted is fine.
        def call(seq, stop, arr, dep=None, rules=0):
            return [seq, stop * 4 + rules, arr, arr if dep is None else dep]
        first, last = gtfs.NO_DROP_OFF, gtfs.NO_PICKUP
        self.assertEqual(gtfs.trip_pattern(call(3, 7, 300) + call(1, 5, 0) + call(2, 6, 100, 130)),
                         ((5, 6, 7), (first, 0, last), [0, 100, 300], [0, 130, 300]))
        self.assertEqual(gtfs.trip_pattern(call(1, 5, 0) + call(1, 6, 60)), "trips with a repeated stop_sequence")
        self.assertEqual(gtfs.trip_pattern(call(1, 5, 100) + call(2, 6, 50)), "trips whose times run backwards")
        self.assertEqual(gtfs.trip_pattern(call(1, 5, 0) + call(2, 6, 60, 50)),
                         "trips whose times run backwards")          # departs before it arrives
        self.assertEqual(gtfs.trip_pattern(call(1, 5, 0)), "trips with fewer than 2 stop times")
        self.assertEqual(gtfs.trip_pattern(call(1, 5, 0) + call(2, 5, 60)),
                         "trips with fewer than 2 distinct stops where riders get on or off")
        self.assertEqual(gtfs.trip_pattern(call(1, 5, -1) + call(2, 6, 60)), "trips without a first or last time")

    def test_trip_pattern_interpolates_and_drops_pass_through(self):
        def call(seq, stop, arr, dep=None, rules=0):
            return [seq, stop * 4 + rules, arr, arr if dep is None else dep]
        # blank times between the departure before (100) and the arrival after (400)
        stops, rules, arr, dep = gtfs.trip_pattern(call(1, 5, 0, 100) + call(2, 6, -1) + call(3, 7, -1)
                                                   + call(4, 8, 400))
        self.assertEqual((arr, dep), ([0, 200, 300, 400], [100, 200, 300, 400]))
        # a pass-through call (no pickup, no drop-off) is left out: its time is running time;
        # a stop repeated back to back is one call, from the first arrival to the last departure
        stops, rules, arr, dep = gtfs.trip_pattern(
            call(1, 5, 0) + call(2, 6, 60, rules=gtfs.PASS_THROUGH) + call(3, 7, 120, rules=gtfs.NO_PICKUP)
            + call(4, 7, 150, rules=gtfs.NO_DROP_OFF) + call(5, 8, 300, rules=gtfs.NO_PICKUP))
        self.assertEqual(stops, (5, 7, 8))
        self.assertEqual(rules, (gtfs.NO_DROP_OFF, 0, gtfs.NO_PICKUP))   # 7: either call allows
        self.assertEqual((arr, dep), ([0, 120, 300], [0, 150, 300]))
        stops, rules, _, _ = gtfs.trip_pattern(call(1, 5, 0, rules=gtfs.NO_PICKUP) + call(2, 6, 60)
                                               + call(3, 7, 90, rules=gtfs.NO_DROP_OFF))
        self.assertEqual(rules, (gtfs.PASS_THROUGH, 0, gtfs.PASS_THROUGH))

    def test_calendar(self):
        monday = datetime.date(2024, 1, 1)
        calendar = {"WK": (monday, datetime.date(2024, 1, 7), (True,) * 5 + (False, False))}
        exceptions = {("WK", monday): "2", ("X", datetime.date(2024, 1, 6)): "1"}
        self.assertEqual(gtfs.active_services(monday, calendar, exceptions), set())
        self.assertEqual(gtfs.active_services(datetime.date(2024, 1, 2), calendar, exceptions), {"WK"})
        day, trips = gtfs.busiest_date({"WK": 3, "X": 5}, calendar, exceptions)
        self.assertEqual((day, trips), (datetime.date(2024, 1, 6), 5))
        self.assertEqual(gtfs.busiest_date({}, {}, {}), (None, 0))

    def test_city_hint_names_the_agencies(self):
        self.assertIn("--city", gtfs.city_hint("/nonexistent.zip"))
        self.assertNotIn("agencies", gtfs.city_hint("/nonexistent.zip"))

    def test_headway(self):
        p = gtfs.Pattern("R", "0", (1, 2))
        self.assertIsNone(p.headway_min())
        for start in (0, 600, 1200):
            p.add([start, start + 60], [start, start + 60], None)
        self.assertEqual(p.headway_min(), 10.0)
        self.assertEqual(p.hop_minutes(), [1.0])
        q = gtfs.Pattern("R", "0", (1, 2))
        q.add([0, 120], [0, 120], [(0, 3600, 300)])          # 12 runs every 5 minutes
        self.assertEqual((q.trips, q.headway_min(), q.hop_minutes()), (12, 5.0, [2.0]))

    def test_run_times_and_dwells(self):
        p = gtfs.Pattern("R", "0", (1, 2, 3))
        p.add([0, 600, 900], [60, 720, 900], None)     # runs 9 and 3 min; dwells 2 and 0 min
        p.add([0, 660, 960], [0, 780, 960], None)      # runs 11 and 3 min; dwells 2 and 0 min
        self.assertEqual((p.hop_minutes(), p.dwell_minutes()), ([10.0, 3.0], [2.0, 0.0]))
        self.assertEqual([p.can_board(k) for k in range(3)], [True, True, False])
        self.assertEqual([p.can_alight(k) for k in range(3)], [False, True, True])

    def test_transfer_links(self):
        stops = {"P": ["P", 0, 0, "1", ""], "a": ["a", 0, 0, "0", "P"], "b": ["b", 0, 0, "0", "P"],
                 "c": ["c", 0, 0, "0", ""], "d": ["d", 0, 0, "0", ""]}
        kept = {"a", "b", "c", "d"}
        links = gtfs.transfer_links(stops, kept, [("P", "c", "2", 3.0), ("c", "d", "3", None),
                                                  ("d", "c", "", None)])
        self.assertEqual(links, {("a", "b"): None, ("b", "a"): None, ("a", "c"): 3.0,
                                 ("b", "c"): 3.0, ("d", "c"): None})
        self.assertEqual(gtfs.transfer_links(stops, set(), []), {})
        self.assertEqual(gtfs.transfer_minutes(None, 0.0), gtfs.MIN_TRANSFER_MIN)
        self.assertAlmostEqual(gtfs.transfer_minutes(None, 1.0), 1.2 / 5 * 60)
        self.assertEqual(gtfs.transfer_minutes(4.0, 5.0), 4.0)


class SmallFeedTest(unittest.TestCase):
    def import_ok(self, files, *extra, **kw):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        feed = write_feed(tmp.name, files, **kw)
        out = os.path.join(tmp.name, "out")
        done = run_import(feed, out, *extra)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")
        return out, done.stdout

    def import_fails(self, files, *extra):
        with tempfile.TemporaryDirectory() as tmp:
            done = run_import(write_feed(tmp, files), os.path.join(tmp, "out"), *extra)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        return done.stderr

    def test_the_summary_names_rail_lines_only_where_there_are(self):
        # Issue 39.5: a bus-only feed is not announced as "0 rail-bound, named 地铁...".
        _, stdout = self.import_ok(BASE_FEED, "--route_types", "3")
        line = [text for text in stdout.splitlines() if text.startswith("lines ")][0]
        self.assertRegex(line, r"^lines +1 \(no rail-bound line: all buses\)$")
        _, stdout = self.import_ok(BASE_FEED)
        line = [text for text in stdout.splitlines() if text.startswith("lines ")][0]
        self.assertRegex(line, r"^lines +3 \(2 rail-bound, named 地铁\.\.\.\)$")

    def test_network_of_the_small_feed(self):
        out, stdout = self.import_ok(BASE_FEED)
        header, stations = read_csv(os.path.join(out, "station_info.csv"))
        self.assertEqual(header, ["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations",
                                  "station_name"])
        hops = {r["stop_id"]: json.loads(r["next_hop_stations"]) for r in stations}
        # Busiest day is a weekday: the Saturday-only trip s1 (A-D) is not in the network.
        self.assertEqual(hops, {"A": ["B1"], "B1": ["C", "B2"], "C": ["B2", "D"], "B2": ["A", "B1"],
                                "D": []})
        self.assertEqual({r["ad_code"] for r in stations}, {"0"})
        header, lines = read_csv(os.path.join(out, "line_info.csv"))
        self.assertEqual(header, ["citycode", "line_name", "station_list"])
        names = [r["line_name"] for r in lines]
        self.assertEqual(names, ["地铁1(Alpha--Gamma 地铁站)", "地铁1(Gamma 地铁站--Alpha)",
                                 "Crosstown 号·线(Gamma 地·铁站--Delta)"])
        first = json.loads(lines[0]["station_list"])
        self.assertEqual([s["stop_id"] for s in first], ["A", "B1", "C"])
        self.assertEqual(first[0], {"station_name": "Alpha", "stop_id": "A", "x": -73.0, "y": 40.0,
                                    "station_id": "A"})
        _, hop_rows = read_csv(os.path.join(out, "hop_times.csv"))
        on_line = [(r["from_stop_id"], r["to_stop_id"], r["run_min"], r["trips"])
                   for r in hop_rows if r["line_name"] == names[0]]
        self.assertEqual([(r["dwell_min"], r["pickup"], r["drop_off"]) for r in hop_rows
                          if r["line_name"] == names[0]], [("0.25", "1", "1"), ("", "1", "1")])
        # runs: m1 2 (arrival 08:02) then 2.5 min (departure 08:02:30); m2 3 + 3 (B1
        # interpolated) -> means 2.5, 2.75; dwell at B1: m1 0.5, m2 0 -> 0.25
        self.assertEqual(on_line, [("A", "B1", "2.50", "2"), ("B1", "C", "2.75", "2")])
        walks = [(r["from_stop_id"], r["to_stop_id"], r["run_min"]) for r in hop_rows if not r["line_name"]]
        self.assertEqual(walks, [("B1", "B2", "2.00"), ("B2", "B1", "2.00")])
        _, service = read_csv(os.path.join(out, "line_service.csv"))
        self.assertEqual([(r["rail"], r["trips"], r["headway_min"]) for r in service],
                         [("1", "2", "60.0"), ("1", "1", ""), ("0", "1", "")])
        # service hours: the first and last departure from the first stop (GTFS hours past 24 kept)
        self.assertEqual([(r["first_departure"], r["last_departure"]) for r in service],
                         [("08:00", "09:00"), ("25:00", "25:00"), ("10:00", "10:00")])
        with open(os.path.join(out, "city.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["city"], "Test City")
        self.assertIn("service day    20240101", stdout)
        self.assertIn("skipped        nothing", stdout)

    def test_service_hours_of_frequency_based_trips(self):
        """A frequencies.txt window's runs leave at its start and every headway
        after (10:00-12:00 every 30 min: the last at 11:30), beside the plain
        trips of the same pattern (09:00)."""
        files = dict(BASE_FEED)
        files["frequencies.txt"] = "trip_id,start_time,end_time,headway_secs\nm1,10:00:00,12:00:00,1800\n"
        out, _ = self.import_ok(files)
        _, service = read_csv(os.path.join(out, "line_service.csv"))
        self.assertEqual((service[0]["trips"], service[0]["first_departure"], service[0]["last_departure"]),
                         ("5", "09:00", "11:30"))

    def test_zip_with_bom_and_quoted_fields_gives_the_same_network(self):
        folder_out, _ = self.import_ok(BASE_FEED)
        files = dict(BASE_FEED)
        files["stops.txt"] = files["stops.txt"].replace("Alpha", '"Alpha"')
        zip_out, _ = self.import_ok(files, as_zip=True, bom=True)
        for name in ("station_info.csv", "line_info.csv", "hop_times.csv", "line_service.csv"):
            with open(os.path.join(folder_out, name), "rb") as a, open(os.path.join(zip_out, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_city_is_required(self):
        with tempfile.TemporaryDirectory() as tmp:
            for extra in ((), ("--city", "  ")):
                done = run_import(write_feed(tmp, BASE_FEED), os.path.join(tmp, "out"), *extra, city=None)
                self.assertEqual(done.returncode, 2)
                self.assertEqual(done.stderr.count("\n"), 1, done.stderr)
                self.assertIn("--city is required", done.stderr)
                self.assertIn('agencies in this feed: "Test Transit"', done.stderr)
                self.assertFalse(os.path.exists(os.path.join(tmp, "out")))

    def test_stop_rules_dwells_and_zone_fares(self):
        files = dict(BASE_FEED)
        files["stops.txt"] = ("stop_id,stop_name,stop_lat,stop_lon,location_type,parent_station,zone_id\n"
                              "A,Alpha,40.000,-73.000,,,z1\nS_B,Beta,40.010,-73.000,1,,\n"
                              "B1,Beta,40.010,-73.000,0,S_B,z1\nB2,Beta,40.0101,-73.000,0,S_B,z1\n"
                              "C,Gamma,40.020,-73.000,,,z2\nD,Delta,40.030,-73.000,,,z2\n")
        files["trips.txt"] = "route_id,service_id,trip_id,direction_id\nBUS,WK,b1,0\nBUS,WK,b2,0\n"
        # both trips: A, then B1 passed through, C dwelling 5 min (set-down only), D
        files["stop_times.txt"] = (
            "trip_id,arrival_time,departure_time,stop_id,stop_sequence,pickup_type,drop_off_type\n"
            "b1,10:00:00,10:00:00,A,1,0,1\nb1,10:04:00,10:04:00,B1,2,1,1\n"
            "b1,10:10:00,10:15:00,C,3,1,0\nb1,10:20:00,10:20:00,D,4,1,0\n"
            "b2,11:00:00,11:00:00,A,1,,\nb2,,,B1,2,1,1\n"
            "b2,11:12:00,11:17:00,C,3,1,\nb2,11:24:00,11:24:00,D,4,,\n")
        files["fare_attributes.txt"] = ("fare_id,price,currency_type,payment_method,transfers\n"
                                        "F1,2.5,USD,0,\nF2,4,USD,0,\n")
        files["fare_rules.txt"] = ("fare_id,route_id,origin_id,destination_id\n"
                                   "F1,,z1,z1\nF1,,z2,z2\nF2,,z1,z2\n")
        out, stdout = self.import_ok(files)
        _, lines = read_csv(os.path.join(out, "line_info.csv"))
        self.assertEqual([s["stop_id"] for s in json.loads(lines[0]["station_list"])], ["A", "C", "D"])
        _, hop_rows = read_csv(os.path.join(out, "hop_times.csv"))
        self.assertEqual([(r["run_min"], r["dwell_min"], r["pickup"], r["drop_off"]) for r in hop_rows],
                         [("11.00", "5.00", "1", "1"), ("6.00", "", "0", "1")])
        _, service = read_csv(os.path.join(out, "line_service.csv"))
        self.assertEqual(service[0]["fare"], "")
        self.assertEqual(json.loads(service[0]["zone_fares"]),
                         {"zones": ["z1", "z2", "z2"], "fares": [[2.5, 4.0], [None, 2.5]]})
        self.assertIn("fare transfers not applied", service[0]["fare_note"])
        self.assertIn("stop rules     2 pass-through stop times left out; on the lines 1 stops without "
                      "boarding, 0 without alighting", stdout)
        self.assertIn("fares          per ride: 0 lines flat, 1 by zone; fare transfers not applied "
                      "(2 fares allow them): each ride pays its fare", stdout)

    def test_date_route_types_city_and_adcode(self):
        out, stdout = self.import_ok(BASE_FEED, "--date", "20240106", "--city", "Gotham",
                                     "--adcode", "999")
        _, lines = read_csv(os.path.join(out, "line_info.csv"))
        self.assertEqual([r["line_name"] for r in lines], ["地铁1(Alpha--Delta)"])
        self.assertEqual(lines[0]["citycode"], "999")
        out, _ = self.import_ok(BASE_FEED, "--route_types", "3")
        _, lines = read_csv(os.path.join(out, "line_info.csv"))
        self.assertEqual(len(lines), 1)

    def test_damaged_rows_are_skipped_and_counted(self):
        files = dict(BASE_FEED)
        files["stops.txt"] += "E,Nowhere,,,,\n"
        files["trips.txt"] += "M,WK,m4,0\nM,WK,m5,0\nM,WK,m6,0\n"
        files["stop_times.txt"] += ("ghost,08:00:00,08:00:00,A,1\n"
                                    "m4,08:00:00,08:00:00,A,1\nm4,08:03:00,08:03:00,E,2\n"
                                    "m5,08:00:00,08:00:00,A,1\nm5,08:03:00,08:03:00,ZZ,2\n"
                                    "m6,08:09:00,08:09:00,A,1\nm6,08:03:00,08:03:00,B1,2\n")
        out, stdout = self.import_ok(files)
        self.assertIn("1 stop times of trips not in trips.txt (first: stop_times.txt line 15)", stdout)
        self.assertIn("1 trips calling at a stop without coordinates", stdout)
        self.assertIn("1 trips calling at an unknown stop", stdout)
        self.assertIn("1 trips whose times run backwards", stdout)
        _, stations = read_csv(os.path.join(out, "station_info.csv"))
        self.assertNotIn("E", [r["stop_id"] for r in stations])

    def test_an_out_holding_a_network_is_replaced_only_with_overwrite(self):
        # Issue 46.4: a second import into the same --out is refused (exit 2,
        # one line, nothing touched) unless --overwrite, as the evaluators do.
        out, _ = self.import_ok(BASE_FEED)
        feed = write_feed(os.path.dirname(out), BASE_FEED)

        def contents():
            found = {}
            for name in gtfs.OUTPUT_FILES:
                with open(os.path.join(out, name), "rb") as handle:
                    found[name] = handle.read()
            return found

        before = contents()
        done = run_import(feed, out, "--adcode", "999")
        self.assertEqual((done.returncode, done.stdout), (2, ""))
        self.assertEqual(done.stderr, "import_gtfs.py: --out %s already holds a network "
                         "(station_info.csv, line_info.csv, hop_times.csv, line_service.csv, "
                         "city.json); pass --overwrite to replace it, or choose another --out\n"
                         % out)
        self.assertEqual(contents(), before)
        # one of its files is enough
        for name in gtfs.OUTPUT_FILES[1:]:
            os.remove(os.path.join(out, name))
        done = run_import(feed, out, "--adcode", "999")
        self.assertEqual(done.returncode, 2)
        self.assertIn("already holds a network (station_info.csv)", done.stderr)
        done = run_import(feed, out, "--adcode", "999", "--overwrite")
        self.assertEqual(done.returncode, 0, done.stderr)
        _, stations = read_csv(os.path.join(out, "station_info.csv"))
        self.assertEqual({r["ad_code"] for r in stations}, {"999"})
        self.assertEqual(sorted(os.listdir(out)), sorted(gtfs.OUTPUT_FILES))
        # a folder holding other files (a benchmark built beside the network) is fine
        other = os.path.join(os.path.dirname(out), "other")
        os.mkdir(other)
        with open(os.path.join(other, "benchmark1_single_route.csv"), "w") as handle:
            handle.write("x\n")
        self.assertEqual(run_import(feed, other).returncode, 0)

    def test_id_prefix_goes_before_every_stop_id(self):
        # Issue 45.4: --id_prefix P writes P + the feed's id wherever a stop id
        # is written; everything else is the unprefixed network's, byte for byte.
        files = dict(BASE_FEED)
        # no direction_id on one route: its direction is named by its end stops
        files["trips.txt"] = files["trips.txt"].replace("\nBUS,WK,b1,0\n", "\nBUS,WK,b1,\n")
        self.assertIn("BUS,WK,b1,\n", files["trips.txt"])
        plain, _ = self.import_ok(files)
        prefixed, stdout = self.import_ok(files, "--id_prefix", "ny:")
        self.assertIn('stop ids written as "ny:" + the feed\'s', stdout)
        expected = {name: network_file_with_prefix(plain, name, "ny:")
                    for name in gtfs.OUTPUT_FILES if name != "city.json"}
        for name, rows in expected.items():
            self.assertEqual(read_csv(os.path.join(prefixed, name)), rows, name)
        _, service = read_csv(os.path.join(prefixed, "line_service.csv"))
        self.assertIn("ny:C>ny:D", [r["direction"] for r in service])
        with open(os.path.join(prefixed, "city.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["id_prefix"], "ny:")
        with open(os.path.join(plain, "city.json"), encoding="utf-8") as handle:
            self.assertNotIn("id_prefix", json.load(handle))

    def test_two_feeds_with_the_same_ids_combine_once_prefixed(self):
        # Two feeds whose stop ids overlap (here the same feed twice): their
        # station files together repeat every id; prefixed, none.
        files = dict(BASE_FEED)
        outs = {}
        for prefix in (None, "a:", "b:"):
            outs[prefix], _ = self.import_ok(files, *(("--id_prefix", prefix) if prefix else ()))

        def combined(*folders):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "station_info.csv")
                with open(path, "w", encoding="utf-8", newline="") as handle:
                    for k, folder in enumerate(folders):
                        with open(os.path.join(folder, "station_info.csv"), encoding="utf-8",
                                  newline="") as part:
                            lines = part.readlines()
                        handle.writelines(lines if k == 0 else lines[1:])
                network = common.StationNetwork.load(path)
                return network.warnings, sum(1 for _ in read_csv(path)[1])

        warnings, rows = combined(outs[None], outs[None])
        self.assertEqual(rows, 10)
        self.assertEqual(len(warnings), 1)
        self.assertIn("lists 5 stop id(s) more than once", warnings[0])
        warnings, rows = combined(outs["a:"], outs["b:"])
        self.assertEqual((warnings, rows), ([], 10))

    def test_a_bad_id_prefix_is_one_line(self):
        for bad, words in (("", "it is empty"), ("a b", "'a b': use ASCII letters"),
                           ("x" * 17, "is 17 characters long (at most 16)"),
                           ("-x", "use ASCII letters"), ('a"', "use ASCII letters"),
                           ("\u5317:", "use ASCII letters"), ("a,b", "use ASCII letters"),
                           ("bus-", "starts with bus-, the prefix the route-eval rules add")):
            with self.subTest(prefix=bad):
                err = self.import_fails(BASE_FEED, "--id_prefix=" + bad)
                self.assertIn("import_gtfs.py: error: argument --id_prefix: ", err)
                self.assertIn(words, err)
        for good in ("a", "NYC:", "x" * 16, "b.2_-:"):
            self.assertIsNone(gtfs.id_prefix_problem(good), good)

    def test_file_level_problems_exit_2_naming_the_file(self):
        files = dict(BASE_FEED)
        del files["trips.txt"]
        self.assertIn("feed has no trips.txt", self.import_fails(files))
        files = dict(BASE_FEED)
        files["stops.txt"] = files["stops.txt"].replace("stop_lat", "lat")
        self.assertIn("stops.txt: missing column stop_lat", self.import_fails(files))
        files = dict(BASE_FEED)
        files["stop_times.txt"] += "m1,8h,8h,D,4\n"
        self.assertIn("stop_times.txt line 15: time '8h'", self.import_fails(files))
        files = dict(BASE_FEED)
        files["stop_times.txt"] += "m1,08:09:00,08:09:00,D,four\n"
        self.assertIn("stop_times.txt line 15: stop_sequence", self.import_fails(files))
        files = dict(BASE_FEED)
        del files["calendar.txt"]
        self.assertIn("neither calendar.txt nor calendar_dates.txt", self.import_fails(files))
        self.assertIn("no trip of the selected routes runs on 20250101",
                      self.import_fails(BASE_FEED, "--date", "20250101"))
        self.assertIn("--date", self.import_fails(BASE_FEED, "--date", "tomorrow"))
        with tempfile.TemporaryDirectory() as tmp:
            done = run_import(os.path.join(tmp, "missing.zip"), os.path.join(tmp, "out"))
            self.assertEqual((done.returncode, done.stderr.count("\n")), (2, 1))
            self.assertIn("does not exist", done.stderr)


@unittest.skipUnless(os.path.isdir(SHARED_GTFS), "../shared/gtfs is absent")
class RealFeedTest(unittest.TestCase):
    """The real feeds: the network agrees with the feed's own trips, read
    independently (real_feeds.feed_trips_on): stops, boarding and alighting
    rules, run times and dwells."""

    def check_feed(self, name, expected):
        if not real_feeds.available(name):
            self.skipTest("%s is absent" % name)
        out, _ = real_feeds.imported(name)
        _, stations = read_csv(os.path.join(out, "station_info.csv"))
        _, lines = read_csv(os.path.join(out, "line_info.csv"))
        _, hop_rows = read_csv(os.path.join(out, "hop_times.csv"))
        _, service = read_csv(os.path.join(out, "line_service.csv"))
        with open(os.path.join(out, "city.json"), encoding="utf-8") as handle:
            info = json.load(handle)
        hops = {r["stop_id"]: set(json.loads(r["next_hop_stations"])) for r in stations}
        if expected is not None:
            self.assertEqual((info["date"], len(stations), len(lines)), expected[:3])
        self.assertEqual(info["city"], real_feeds.city_of(name))
        trips = real_feeds.feed_trips(name)
        by_pattern = {}
        for route_id, calls in trips.values():
            seen = real_feeds.rider_calls(calls)
            key = (route_id, tuple(c[0] for c in seen), tuple(c[1] for c in seen),
                   tuple(c[2] for c in seen))
            by_pattern.setdefault(key, []).append(seen)
        line_hops = {}
        for r in hop_rows:
            line_hops.setdefault(r["line_name"], []).append(r)
        kept_trips = 0
        for line, svc in zip(lines, service):
            where = line["line_name"]
            self.assertEqual(svc["line_name"], where)
            stops = tuple(s["stop_id"] for s in json.loads(line["station_list"]))
            rows = line_hops[where]
            self.assertEqual([(r["from_stop_id"], r["to_stop_id"]) for r in rows],
                             list(zip(stops, stops[1:])), where)
            board = tuple(r["pickup"] == "1" for r in rows) + (False,)
            alight = (False,) + tuple(r["drop_off"] == "1" for r in rows)
            # every line is the stops and rules of trips that run that day, all of them counted ...
            runs = by_pattern.get((svc["route_id"], stops, board, alight))
            self.assertTrue(runs, where)
            self.assertEqual(len(runs), int(svc["trips"]), where)
            kept_trips += len(runs)
            # ... its hops are mean run times (departure to next arrival) and dwells ...
            if all(c[3] is not None and c[4] is not None for run in runs for c in run):
                for k, r in enumerate(rows):
                    run_min = sum(run[k + 1][3] - run[k][4] for run in runs) / len(runs) / 60.0
                    self.assertAlmostEqual(float(r["run_min"]), run_min, delta=0.006, msg=where)
                    if k + 1 < len(rows):
                        dwell = sum(run[k + 1][4] - run[k + 1][3] for run in runs) / len(runs) / 60.0
                        self.assertAlmostEqual(float(r["dwell_min"]), dwell, delta=0.006, msg=where)
            # ... and each of its consecutive stops is a next hop
            for a, b in zip(stops, stops[1:]):
                self.assertIn(b, hops[a], where)
        if expected is not None:
            self.assertEqual(kept_trips, expected[3])
            self.assertEqual(len(trips), expected[4])
        return hops, lines

    def test_nyc_subway(self):
        hops, lines = self.check_feed("nyc-subway.zip", ("20260526", 977, 58, 6598, 8497))
        self.assertTrue(all(line["line_name"].startswith("地铁") for line in lines))
        # platforms of one station are linked both ways (parent_station) ...
        self.assertIn("101S", hops["101N"])
        self.assertIn("101N", hops["101S"])
        # ... and transfers.txt links stations (112 168 St on the 1 -> A09 168 St on the A/C)
        self.assertTrue(hops["112S"] & {"A09N", "A09S"})

    def test_nyc_lirr(self):
        # 2 stations only ever passed through (pickup_type = drop_off_type = 1) are left out
        self.check_feed("nyc-lirr.zip", ("20260923", 112, 24, 332, 961))

    def test_caltrain(self):
        self.check_feed("caltrain.zip", ("20160404", 46, 6, 32, 92))
        out, summary = real_feeds.imported("caltrain.zip")
        self.assertIn("fares          per ride: 0 lines flat, 6 by zone", summary)
        _, service = read_csv(os.path.join(out, "line_service.csv"))
        local = json.loads(service[0]["zone_fares"])
        self.assertEqual(local["fares"][0], [3.75, 5.75, 7.75, 9.75])    # zones 4 -> 4, 3, 2, 1

    def test_cairns(self):
        self.check_feed("cairns.zip", ("20140530", 414, 40, 600, 636))
        _, summary = real_feeds.imported("cairns.zip")
        self.assertIn("stop rules     273 pass-through stop times left out", summary)

    def test_newport(self):
        self.check_feed("newport.zip", ("20230606", 652, 45, 163, 176))

    def test_other_feeds(self):
        for name in real_feeds.other_feeds():
            with self.subTest(feed=name):
                self.check_feed(name, None)

    def test_id_prefix(self):
        # Issue 45.4: a real feed imported with --id_prefix is the network
        # imported without it, with the prefix before every stop id.
        for name, prefix in sorted(real_feeds.PREFIXED.items()):
            with self.subTest(feed=name):
                if not real_feeds.available(name):
                    self.skipTest("%s is absent" % name)
                plain, _ = real_feeds.imported(name)
                prefixed, summary = real_feeds.imported(name, prefix)
                self.assertIn('stop ids written as "%s"' % prefix, summary)
                for output in gtfs.OUTPUT_FILES:
                    if output.endswith(".csv"):
                        self.assertEqual(read_csv(os.path.join(prefixed, output)),
                                         network_file_with_prefix(plain, output, prefix), output)
                _, stations = read_csv(os.path.join(prefixed, "station_info.csv"))
                self.assertTrue(all(r["stop_id"].startswith(prefix) for r in stations))


if __name__ == "__main__":
    unittest.main()
