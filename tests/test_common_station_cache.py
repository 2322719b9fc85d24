"""The station cache: every stop of a large station file decoded once, kept in
the user's cache folder, never trusted blindly."""

import os
import shutil
import tempfile
import unittest
from unittest import mock

from tests.support import REPO, common
from tests.support.evaluator_rows import evaluate_to_files
from single_route.evaluate import SingleRoute

BUNDLED = os.path.join(REPO, "data")
STATIONS = os.path.join(BUNDLED, "station_info.csv")


class StationCache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.folder = os.path.join(self.tmp.name, "cache")
        # The bundled network is small: lower the size from which a cache is made.
        patcher = mock.patch.object(common, "STATION_CACHE_MIN_STOPS", 1)
        patcher.start()
        self.addCleanup(patcher.stop)

    def tearDown(self):
        self.tmp.cleanup()

    def every_stop(self, network):
        """{stop: (next hops, point)} decoded one by one, as without a cache."""
        return {stop: (network.next_hops(stop), network.coords(stop))
                for stop in network._lookup.ids()}

    def cache_files(self):
        return sorted(name for name in os.listdir(self.folder) if name.startswith("stations-"))

    def test_built_then_loaded_with_the_same_stops(self):
        plain = self.every_stop(common.StationNetwork.load(STATIONS))
        first = common.StationNetwork.load(STATIONS)
        self.assertEqual(first.use_cache(self.folder), "built")
        self.assertEqual(len(self.cache_files()), 1)
        second = common.StationNetwork.load(STATIONS)
        self.assertEqual(second.use_cache(self.folder), "loaded")
        self.assertEqual(len(second._hops), len(second))
        self.assertEqual(self.every_stop(second), plain)

    def test_outputs_equal_with_and_without_cache(self):
        argv = ["--input", os.path.join(BUNDLED, "benchmark1_single_route_example.csv"),
                "--station_info", STATIONS]
        results = []
        for setting in ("off", self.folder, self.folder):      # none, built, loaded
            with mock.patch.dict(os.environ, {"TRANSITLM_CACHE_DIR": setting}):
                with tempfile.TemporaryDirectory() as out:
                    report, details, stdout = evaluate_to_files(SingleRoute(), argv, out)
            results.append((report["counts"], report["rounds"], report["metrics"], details,
                            stdout))
        self.assertEqual(len(self.cache_files()), 1)
        self.assertEqual(results[0], results[1])
        self.assertEqual(results[0], results[2])

    def test_a_damaged_cache_is_made_again(self):
        common.StationNetwork.load(STATIONS).use_cache(self.folder)
        path = os.path.join(self.folder, self.cache_files()[0])
        with open(path, "rb") as handle:
            data = bytearray(handle.read())
        for damage in ("flip a payload byte", "cut short", "not a cache", "empty"):
            with self.subTest(damage=damage):
                broken = bytearray(data)
                if damage == "flip a payload byte":
                    broken[-10] ^= 0x55
                elif damage == "cut short":
                    broken = broken[:len(broken) // 2]
                elif damage == "not a cache":
                    broken = b"hello\n" + broken
                else:
                    broken = b""
                with open(path, "wb") as handle:
                    handle.write(broken)
                network = common.StationNetwork.load(STATIONS)
                self.assertEqual(network.use_cache(self.folder), "built")
                with open(path, "rb") as handle:
                    self.assertEqual(handle.read(), bytes(data))

    def test_a_cache_of_the_wrong_shape_is_made_again(self):
        # Its payload hash checks out, but what it holds does not fit together.
        import hashlib
        import marshal
        network = common.StationNetwork.load(STATIONS)
        network.use_cache(self.folder)
        path = os.path.join(self.folder, self.cache_files()[0])
        with open(path, "rb") as handle:
            good = handle.read()
        head = len(common._STATION_CACHE_MAGIC)
        content = list(marshal.loads(good[head + 65:]))
        shapes = {"a point missing": (4, content[4][:-1]),
                  "hops not a list": (3, tuple(content[3])),
                  "an older format": (0, 2)}
        for shape, (index, value) in shapes.items():
            with self.subTest(shape=shape):
                changed = list(content)
                changed[index] = value
                payload = marshal.dumps(tuple(changed), 4)
                with open(path, "wb") as handle:
                    handle.write(common._STATION_CACHE_MAGIC
                                 + hashlib.sha256(payload).hexdigest().encode() + b"\n"
                                 + payload)
                self.assertEqual(common.StationNetwork.load(STATIONS).use_cache(self.folder),
                                 "built")
                with open(path, "rb") as handle:
                    self.assertEqual(handle.read(), good)

    def test_another_files_cache_is_not_used(self):
        # A cache that checks out by itself but was made from other content.
        other = os.path.join(self.tmp.name, "other.csv")
        with open(STATIONS, "rb") as handle:
            data = handle.read()
        with open(other, "wb") as handle:
            handle.write(data.replace(b"\n", b"\r\n"))
        common.StationNetwork.load(other).use_cache(self.folder)
        wrong = os.path.join(self.folder, self.cache_files()[0])
        network = common.StationNetwork.load(STATIONS)
        shutil.copy(wrong, os.path.join(self.folder, "stations-%s.v%d" % (
            network.sha256, common.STATION_CACHE_FORMAT)))
        self.assertEqual(network.use_cache(self.folder), "built")

    def test_no_cache_for_a_small_network_or_no_folder(self):
        network = common.StationNetwork.load(STATIONS)
        with mock.patch.object(common, "STATION_CACHE_MIN_STOPS", len(network) + 1):
            self.assertIsNone(network.use_cache(self.folder))
        self.assertFalse(os.path.exists(self.folder))
        self.assertIsNone(network.use_cache(None))
        # A folder that cannot be made (a file is in the way): no cache, no error.
        blocked = os.path.join(self.tmp.name, "file")
        with open(blocked, "w") as handle:
            handle.write("x")
        self.assertIsNone(common.StationNetwork.load(STATIONS).use_cache(blocked))

    def test_folder_setting(self):
        with mock.patch.dict(os.environ, {"TRANSITLM_CACHE_DIR": "off"}):
            self.assertIsNone(common.station_cache_folder())
        with mock.patch.dict(os.environ, {"TRANSITLM_CACHE_DIR": " "}):
            self.assertIsNone(common.station_cache_folder())
        with mock.patch.dict(os.environ, {"TRANSITLM_CACHE_DIR": "/x/y"}):
            self.assertEqual(common.station_cache_folder(), "/x/y")
        environ = {key: value for key, value in os.environ.items()
                   if key not in ("TRANSITLM_CACHE_DIR", "XDG_CACHE_HOME")}
        with mock.patch.dict(os.environ, environ, clear=True):
            os.environ["XDG_CACHE_HOME"] = "/c"
            self.assertEqual(common.station_cache_folder(), os.path.join("/c", "transitlm"))

    def test_only_the_newest_caches_are_kept(self):
        with mock.patch.object(common, "STATION_CACHE_KEEP", 3):
            for number in range(5):
                common._write_station_cache(os.path.join(self.folder, "stations-%d.v1" % number),
                                            "%064d" % number, {"A": ("A",)}, {"A": (1.0, 2.0)})
                os.utime(os.path.join(self.folder, "stations-%d.v1" % number),
                         (number, number))
        self.assertEqual(self.cache_files(), ["stations-2.v1", "stations-3.v1",
                                              "stations-4.v1"])

    def test_a_malformed_stop_is_still_reported_when_touched(self):
        # A line with too few cells is left out of the cache; a route through
        # it stops the run with the same message as without a cache.
        bad = os.path.join(self.tmp.name, "stations.csv")
        with open(STATIONS, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        stop = lines[5].split(",")[0]
        lines[5] = stop + ",010"
        with open(bad, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines))
        self.assertEqual(common.StationNetwork.load(bad).use_cache(self.folder), "built")
        network = common.StationNetwork.load(bad)
        self.assertEqual(network.use_cache(self.folder), "loaded")
        with self.assertRaises(common.InputError) as cached:
            network.next_hops(stop)
        with self.assertRaises(common.InputError) as plain:
            common.StationNetwork.load(bad).next_hops(stop)
        self.assertEqual(str(cached.exception), str(plain.exception))
        self.assertIn("line 6", str(plain.exception))


    def malformed_file(self, line_number, text):
        """The bundled station file with line ``line_number`` replaced by
        ``text(stop)`` -> (path, that stop)."""
        bad = os.path.join(self.tmp.name, "stations-%d.csv" % line_number)
        with open(STATIONS, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        stop = lines[line_number - 1].split(",")[0]
        lines[line_number - 1] = text(stop)
        with open(bad, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write("\n".join(lines))     # "\udcff" is written as the byte 0xff
        return bad, stop

    def test_loaded_with_the_file_indexed_only_when_needed(self):
        plain = common.StationNetwork.load(STATIONS)
        self.assertIsNone(plain.cache_state)
        built = common.StationNetwork.load(STATIONS, self.folder)
        self.assertEqual(built.cache_state, "built")
        network = common.StationNetwork.load(STATIONS, self.folder)
        self.assertEqual(network.cache_state, "loaded")
        stops = list(plain._lookup.ids())
        # Every lookup a run makes is answered without indexing the file.
        self.assertEqual(len(network), len(plain))
        self.assertIn(stops[0], network)
        self.assertNotIn("no-such-stop", network)
        self.assertIsNone(network.next_hops("no-such-stop"))
        self.assertIsNone(network.coords("no-such-stop"))
        self.assertEqual(self.every_stop_of(network, stops), self.every_stop_of(plain, stops))
        self.assertIsNone(network._lookup._lookup, "the file was indexed")
        # A name is read from the file's line: now it is indexed.
        self.assertEqual(network.name(stops[0]), plain.name(stops[0]))
        self.assertIsNotNone(network._lookup._lookup)

    def every_stop_of(self, network, stops):
        return {stop: (network.next_hops(stop), network.coords(stop)) for stop in stops}

    def test_loaded_lazily_reports_malformed_stops_the_same(self):
        # (stop_id, ad_code, coord_x, coord_y, next_hop_stations, station_name)
        cases = (("too few cells", 6, lambda stop: stop + ",010", "too few columns"),
                 ("bad next hops", 7, lambda stop: stop + ',010,116.3,39.9,"[1, 2",X',
                  "next_hop_stations"),
                 ("bad latitude", 8, lambda stop: stop + ',010,116.3,139.9,"[]",X',
                  "coord_x/coord_y"),
                 ("not UTF-8", 9, lambda stop: stop + ',010,116.3,39.9,"[]",X\udcff',
                  "not UTF-8 text"))
        for name, line_number, text, message in cases:
            with self.subTest(case=name):
                bad, stop = self.malformed_file(line_number, text)
                with self.assertRaises(common.InputError) as plain:
                    network = common.StationNetwork.load(bad)
                    network.next_hops(stop), network.coords(stop)
                self.assertIn("line %d" % line_number, str(plain.exception))
                self.assertIn(message, str(plain.exception))
                self.assertEqual(common.StationNetwork.load(bad, self.folder).cache_state,
                                 "built")
                network = common.StationNetwork.load(bad, self.folder)
                self.assertEqual(network.cache_state, "loaded")
                self.assertIn(stop, network)
                with self.assertRaises(common.InputError) as cached:
                    network.next_hops(stop), network.coords(stop)
                self.assertEqual(str(cached.exception), str(plain.exception))

    def test_loaded_lazily_keeps_the_duplicate_warning(self):
        with open(STATIONS, encoding="utf-8") as handle:
            text = handle.read()
        repeated = os.path.join(self.tmp.name, "repeated.csv")
        with open(repeated, "w", encoding="utf-8") as handle:
            handle.write(text + text.split("\n")[3] + "\n")
        plain = common.StationNetwork.load(repeated)
        self.assertEqual(len(plain.warnings), 1)
        common.StationNetwork.load(repeated, self.folder)
        network = common.StationNetwork.load(repeated, self.folder)
        self.assertEqual(network.cache_state, "loaded")
        self.assertEqual(network.warnings, plain.warnings)
        self.assertEqual(len(network), len(plain))


if __name__ == "__main__":
    unittest.main()
