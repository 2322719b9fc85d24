"""transitlm/datasets/corpus_texts.py: the corpus's session, line and station
texts and their records (issue 45 points 1 and 3), on the demo network and,
when ../shared is present, on real feeds.  The check that a text states its
record must pass on every entry, in both languages, and fail when any fact is
removed from the text or altered in it."""

import json
import os
import random
import tempfile
import unittest

from tests import support  # noqa: F401  (puts the repository on sys.path)
from tests.support import REPO
from transitlm.datasets import corpus_texts as ct
from transitlm.networks import benchmark_builder as mb
from transitlm.networks import router

DEMO = os.path.join(REPO, "data")
FACTOR = 1.5
SEED = 11


def sessions(net, count, seed=SEED, tries=400):
    """[(trip, routes, label seed)]: up to ``count`` trips of the network's
    districts, each with its distinct candidate routes (at most five)."""
    rng = random.Random(seed)
    districts = mb.usable_districts(net)
    out = []
    for attempt in range(tries):
        if len(out) >= count:
            break
        district = districts[attempt % len(districts)]
        od = router.draw_od(net, rng, district, *mb.TRIP_KM)
        if od is None:
            continue
        trip = mb.Trip(net, district, od[0], od[1])
        routes = router.distinct_alternatives(trip, router.Prefs(), ct.MAX_CANDIDATES, FACTOR)
        if routes and not router.ends_where_it_boarded(net, routes[0]):
            out.append((trip, routes, attempt))
    return out


def entry(net, trip, routes, label_seed, lang):
    return ct.session_entry(net, trip.district.city.name, trip.origin, trip.dest, routes,
                            random.Random(label_seed), lang)


def alterations(text, value):
    """The text with one occurrence of ``value`` altered, for each occurrence."""
    out, at = [], text.find(value)
    while at >= 0 and value:
        changed = value[:-1] + ("8" if value[-1] == "9" else "9") if value[-1].isdigit() else value + "X"
        out.append(text[:at] + changed + text[at + len(value):])
        at = text.find(value, at + 1)
    return out


class CheckMixin(object):

    def assert_states(self, kind, text, record):
        ok, reason = ct.text_states_record(kind, text, record)
        self.assertTrue(ok, "%s\n%s\n%s" % (reason, text, json.dumps(record, ensure_ascii=False)))

    def assert_fails(self, kind, text, record, what):
        ok, reason = ct.text_states_record(kind, text, record)
        self.assertFalse(ok, "%s: the check passed\n%s" % (what, text))
        self.assertTrue(reason.startswith(("the text", "route", "the record")), reason)

    def assert_every_line_needed(self, kind, text, record):
        lines = text.split("\n")
        for k in range(len(lines)):
            self.assert_fails(kind, "\n".join(lines[:k] + lines[k + 1:]), record, "line %d removed" % k)

    def assert_every_value_needed(self, kind, text, record, values):
        for value in values:
            variants = alterations(text, value)
            self.assertTrue(variants, "%r is not in the text" % value)
            for variant in variants:
                self.assert_fails(kind, variant, record, "%r altered" % value)


def session_values(record):
    """Every fact of a session record the text must state, as text."""
    values = [record["start"], record["end"], record["city"]]
    for label, facts in zip(record["routes"], record["itineraries"]):
        values += [s for s in label["station_sequence"] if s != ct.TRANSFER]
        values += list(label["line_sequence"])
        for ride in facts["rides"]:
            for end in ("board", "alight"):
                values += [ride[end]["station_name"], ride[end]["coord"]]
            values.append(ride["distance"].rstrip(ct.ZH_KM + ct.ZH_M))
        for side in ("access", "egress"):
            values.append(facts[side]["distance"].rstrip(ct.ZH_KM + ct.ZH_M))
        values += [label["total_distance"].lstrip(ct.ZH_ABOUT).rstrip(ct.ZH_KM + ct.ZH_M),
                   label["total_fare"].rstrip(ct.ZH_YUAN)]
    return values


class DemoCorpusTextsTest(CheckMixin, unittest.TestCase):
    """The bundled demo network (two cities, subway and bus lines)."""

    @classmethod
    def setUpClass(cls):
        cls.net = mb.load_network(DEMO)
        cls.sessions = sessions(cls.net, 10)

    def test_sessions_are_drawn(self):
        self.assertEqual(len(self.sessions), 10)
        self.assertTrue(any(len(routes) > 1 for _, routes, _ in self.sessions))
        self.assertTrue(any(len(routes[0].legs) > 1 for _, routes, _ in self.sessions))

    def test_every_session_states_its_record(self):
        for lang in ct.LANGS:
            for trip, routes, seed in self.sessions:
                text, record = entry(self.net, trip, routes, seed, lang)
                self.assert_states("session", text, record)
                self.assertEqual(ct.record_matches_network("session", record, self.net),
                                 (True, "the record agrees with the network"))
                self.assertEqual(len(record["routes"]), len(routes))
                self.assertEqual(record["start"], "%.6f,%.6f" % trip.origin)
                self.assertEqual(record["end"], "%.6f,%.6f" % trip.dest)
                self.assertEqual(record["city"], trip.district.city.name)

    def test_the_record_is_json_and_the_text_its_language(self):
        trip, routes, seed = self.sessions[0]
        zh, record = entry(self.net, trip, routes, seed, "zh")
        en, record_en = entry(self.net, trip, routes, seed, "en")
        self.assertEqual(record, record_en)                  # the facts do not depend on the language
        self.assertEqual(json.loads(json.dumps(record, ensure_ascii=False)), record)
        self.assertTrue(zh.startswith("城市："))
        self.assertTrue(en.startswith("City: "))
        self.assertNotIn("方案", en)
        self.assertNotIn("Route 1", zh)
        self.assertFalse(ct.text_states_record("session", en.replace("City: ", "Town: ", 1), record)[0])

    def test_first_route_is_the_builders_label(self):
        """The session's first route is the label make_benchmark.py's rules give
        that trip from the same generator state (with its route tag)."""
        for trip, routes, seed in self.sessions:
            _, record = entry(self.net, trip, routes, seed, "zh")
            rng = random.Random(seed)
            label = mb.with_plausible_access(self.net, trip, routes[0], router.route_json(self.net, routes[0], rng))
            first = dict(record["routes"][0])
            self.assertEqual(first.pop("route_tag"), router.route_tag(self.net, routes[0]))
            self.assertEqual(first, label)
            best = trip.find(router.Prefs())
            self.assertEqual(best.legs, routes[0].legs)

    def test_place_names_are_the_prompts(self):
        for trip, routes, seed in self.sessions:
            _, record = entry(self.net, trip, routes, seed, "zh")
            self.assertEqual(record["place"], {"start": mb.place_label(self.net, trip.start_access),
                                               "end": mb.place_label(self.net, trip.end_access)})
            given = ct.session_entry(self.net, trip.district.city.name, trip.origin, trip.dest, routes,
                                     random.Random(seed), "zh", places=(record["place"]["start"], "X"))[1]
            self.assertEqual(given["place"], {"start": record["place"]["start"], "end": "X"})
            prompt = json.loads(mb.prompt_json(trip, "zh", ""))
            self.assertEqual((prompt["start"], prompt["end"]), (record["start"], record["end"]))

    def test_a_removed_or_altered_fact_fails_the_check(self):
        trip, routes, seed = max(self.sessions, key=lambda s: (len(s[1]), sum(len(r.legs) for r in s[1])))
        for lang in ct.LANGS:
            text, record = entry(self.net, trip, routes, seed, lang)
            self.assert_states("session", text, record)
            self.assert_every_line_needed("session", text, record)
            self.assert_every_value_needed("session", text, record, session_values(record))
            # every mode the text states, translated or not
            mode = ct.mode_text(record["itineraries"][0]["access"]["mode"], lang)
            self.assert_every_value_needed("session", text, record, [mode])

    def test_an_altered_record_fails_the_check(self):
        trip, routes, seed = self.sessions[0]
        text, record = entry(self.net, trip, routes, seed, "zh")
        edits = [
            lambda r: r.update(start="0.000000,0.000000"),
            lambda r: r["routes"][0].update(total_fare="999"),
            lambda r: r["routes"][0].update(total_time="1"),
            lambda r: r["routes"][0]["station_sequence"].append("nowhere"),
            lambda r: r["routes"][0]["line_sequence"].__setitem__(0, "nowhere"),
            lambda r: r["routes"][0].update(start_transfer_mode=router.MODE_TAXI),
            lambda r: r["routes"][0].update(end_transfer_distance="9.9公里"),
            lambda r: r["itineraries"][0]["rides"][0]["board"].update(coord="1.000000,1.000000"),
            lambda r: r["itineraries"][0]["rides"][-1]["alight"].update(station_name="X"),
            lambda r: r["routes"].append(r["routes"][0]),
            lambda r: r.pop("itineraries"),
            lambda r: r["routes"][0].pop("total_distance"),
        ]
        for n, edit in enumerate(edits):
            changed = json.loads(json.dumps(record))
            edit(changed)
            self.assert_fails("session", text, changed, "edit %d" % n)
        self.assertFalse(ct.text_states_record("station", text, record)[0])
        self.assertFalse(ct.text_states_record("nothing", text, record)[0])
        self.assertFalse(ct.text_states_record("session", None, record)[0])

    def test_more_routes_than_the_record_fails(self):
        trip, routes, seed = next(s for s in self.sessions if len(s[1]) > 1)
        text, record = entry(self.net, trip, routes, seed, "zh")
        fewer = dict(record, routes=record["routes"][:1], itineraries=record["itineraries"][:1])
        self.assertFalse(ct.text_states_record("session", text, fewer)[0])

    def test_a_record_off_the_network_is_found(self):
        trip, routes, seed = self.sessions[0]
        _, record = entry(self.net, trip, routes, seed, "zh")
        ride = record["itineraries"][0]["rides"][0]
        for key, value in (("coord", "0.000000,0.000000"), ("station_name", "X"), ("stop_id", "nowhere")):
            changed = json.loads(json.dumps(record))
            changed["itineraries"][0]["rides"][0]["board"][key] = value
            self.assertFalse(ct.record_matches_network("session", changed, self.net)[0], key)
        backwards = json.loads(json.dumps(record))
        first = backwards["itineraries"][0]["rides"][0]
        first["board"], first["alight"] = ride["alight"], ride["board"]
        self.assertFalse(ct.record_matches_network("session", backwards, self.net)[0])

    def test_session_bounds(self):
        trip, routes, seed = self.sessions[0]
        with self.assertRaises(ValueError):
            entry(self.net, trip, [], seed, "zh")
        with self.assertRaises(ValueError):
            entry(self.net, trip, routes * 6, seed, "zh")
        with self.assertRaises(ValueError):
            entry(self.net, trip, routes, seed, "fr")

    def test_one_static_entry_per_station_and_line_direction(self):
        for lang in ct.LANGS:
            stations = list(ct.station_entries(self.net, lang))
            lines = list(ct.line_entries(self.net, lang))
            self.assertEqual([r["stop_id"] for _, r in stations], self.net.ids)
            self.assertEqual([(r["line_name"], r["station_ids"]) for _, r in lines],
                             [(ld.name, [self.net.ids[s] for s in ld.stops]) for ld in self.net.linedirs])
            for kind, entries in (("station", stations), ("line", lines)):
                for text, record in entries:
                    self.assert_states(kind, text, record)
                    self.assertEqual(ct.record_matches_network(kind, record, self.net)[0], True)

    def test_station_facts(self):
        index = self.net.stop_index()
        for _, record in ct.station_entries(self.net):
            s = index[record["stop_id"]]
            self.assertEqual(record["coord"], "%.6f,%.6f" % (self.net.lng[s], self.net.lat[s]))
            for line, following in zip(record["lines"], record["next_stops"]):
                ld = next(l for l in self.net.linedirs if l.name == line)
                expected = [self.net.ids[ld.stops[k + 1]] for k, t in enumerate(ld.stops[:-1]) if t == s]
                self.assertEqual([t["stop_id"] for t in following], expected)

    def test_a_removed_or_altered_static_fact_fails(self):
        line_text, line = next(iter(ct.line_entries(self.net, "zh")))
        self.assert_every_line_needed("line", line_text, line)
        self.assert_every_value_needed("line", line_text, line, line["station_ids"] + [line["length_km"]])
        station = next((t, r) for t, r in ct.station_entries(self.net, "en") if len(r["lines"]) > 1)
        self.assert_every_line_needed("station", *station)
        record = station[1]
        self.assert_every_value_needed("station", station[0], record, [record["coord"], record["stop_id"]]
                                       + record["lines"] + [t["stop_id"] for f in record["next_stops"] for t in f])

    def test_service_hours_where_the_feed_has_them(self):
        ld = self.net.linedirs[0]
        service = {ld.name: ct.service_facts({"first_departure": "05:30", "last_departure": "23:45:00",
                                              "headway_min": "6.5", "trips": "120"})}
        for lang, words in (("zh", ("首班05:30", "末班23:45:00", "每6.5分钟", "全天120班")),
                            ("en", ("first departure 05:30", "every 6.5 min", "120 trips a day"))):
            text, record = next(iter(ct.line_entries(self.net, lang, service)))
            for word in words:
                self.assertIn(word, text)
            self.assert_states("line", text, record)
            self.assert_every_value_needed("line", text, record, ["05:30", "6.5", "120"])
        self.assertEqual(ct.service_facts({"first_departure": "soon", "headway_min": "-1", "trips": "x",
                                           "last_departure": "25:10"}), {"last_departure": "25:10"})

    def test_read_line_service(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(ct.read_line_service(tmp), {})
            with open(os.path.join(tmp, "line_service.csv"), "w", encoding="utf-8") as handle:
                handle.write("line_name,route_id,headway_min,fare,trips\nA(x--y),R,4.5,,88\nB,R2,,,\n")
            self.assertEqual(ct.read_line_service(tmp), {"A(x--y)": {"headway_min": "4.5", "trips": "88"}})

    def test_quantities_keep_the_labels_digits(self):
        cases = [("distance", "约5.3公里", "约5.3公里", "about 5.3 km"), ("distance", "5.3", "5.3公里", "5.3 km"),
                 ("distance", "850米", "850米", "850 m"), ("time", "45", "45分钟", "45 min"),
                 ("time", "1小时5分钟", "1小时5分钟", "1 h 5 min"), ("time", "2小时", "2小时", "2 h"),
                 ("fare", "4", "4元", "4"), ("fare", "4.0元", "4.0元", "4.0"), ("fare", "?", "?", "?")]
        for what, value, zh, en in cases:
            self.assertEqual((ct.quantity(what, value, "zh"), ct.quantity(what, value, "en")), (zh, en), value)
        self.assertEqual(ct.distance_value(0.0004), "1米")
        self.assertEqual(ct.distance_value(0.9995), "1.0公里")
        self.assertEqual(ct.money(2.75), "2.75")
        self.assertEqual(ct.money(3.0), "3")

    def test_stated_respects_number_edges(self):
        self.assertFalse(ct.stated("用时15分钟", "5分钟"))
        self.assertFalse(ct.stated("bus-1000011", "bus-100001"))
        self.assertTrue(ct.stated("用时5分钟", "5分钟"))
        self.assertTrue(ct.stated("x bus-100001、", "bus-100001"))
        self.assertTrue(ct.stated("15分钟 and 5分钟", "5分钟"))     # a later occurrence
        self.assertTrue(ct.stated("a", ""))
        self.assertFalse(ct.stated("", "a"))

    def test_stated_is_its_rule(self):
        # The rule as a regular expression: the phrase, not preceded (when it
        # begins with a run character) or followed (when it ends with one) by
        # one; over random texts of run and other characters.
        import random
        import re
        run = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._-"
        alphabet = "15a.-_Z 分钟、é٣"
        rng = random.Random(44)
        for _ in range(3000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
            phrase = "".join(rng.choice(alphabet) for _ in range(1 + rng.randrange(3)))
            pattern = ("(?<![%s])" % re.escape(run) if phrase[0] in run else "") + re.escape(phrase) \
                + ("(?![%s])" % re.escape(run) if phrase[-1] in run else "")
            self.assertEqual(ct.stated(text, phrase), re.search(pattern, text) is not None,
                             (text, phrase))

    def test_fares_of_every_kind(self):
        ld = self.net.linedirs[0]
        flat = router.LineDir(0, ld.line, "F", ld.stops, ld.cumdist, ld.cumtime, 3.0, ((float("inf"), 2.75),),
                              float("inf"))
        zones = router.LineDir(0, ld.line, "Z", ld.stops, ld.cumdist, ld.cumtime, 3.0, ld.fare_bands, 1.0,
                               zone_fares=([0] * len(ld.stops), [[1.5]]))
        unpriced = router.LineDir(0, ld.line, "U", ld.stops, ld.cumdist, ld.cumtime, 3.0, ld.fare_bands, 1.0,
                                  zone_fares=([0] * len(ld.stops), [[None]]))
        self.assertEqual(ct.fare_fact(flat), {"kind": "flat", "fare": "2.75"})
        self.assertEqual(ct.fare_fact(zones), {"kind": "zones", "low": "1.5", "high": "1.5"})
        self.assertEqual(ct.fare_fact(unpriced), {"kind": "unknown"})
        self.assertEqual(ct.fare_text(ct.fare_fact(flat), "zh"), "每次乘车2.75元")
        self.assertEqual(ct.fare_text(ct.fare_fact(flat), "en"), "2.75 per ride")


class RealFeedCorpusTextsTest(CheckMixin, unittest.TestCase):
    """Shared GTFS feeds (skipped without ../shared): New York's subway (rail,
    timetabled waits) and Cairns's buses (fares from the feed)."""

    def check_feed(self, name, count):
        from tests import real_feeds
        if not real_feeds.available(name):
            self.skipTest("../shared/gtfs/%s is absent" % name)
        folder, _ = real_feeds.imported(name)
        net = mb.load_network(folder)
        service = ct.read_line_service(folder)
        self.assertTrue(service)
        lines = list(ct.line_entries(net, "zh", service))
        self.assertEqual(len(lines), len(net.linedirs))
        self.assertTrue(any(record["service"] for _, record in lines))
        for kind, entries in (("line", lines), ("station", list(ct.station_entries(net, "en")))):
            for text, record in entries:
                self.assert_states(kind, text, record)
        self.assertEqual(sum(1 for _ in ct.station_entries(net)), len(net.ids))
        drawn = sessions(net, count)
        self.assertEqual(len(drawn), count)
        for lang in ct.LANGS:
            for trip, routes, seed in drawn:
                text, record = entry(net, trip, routes, seed, lang)
                self.assert_states("session", text, record)
                self.assertTrue(ct.record_matches_network("session", record, net)[0])
                self.assertEqual(record["city"], real_feeds.city_of(name))
        return net

    def test_nyc_subway(self):
        self.check_feed("nyc-subway.zip", 4)

    def test_cairns(self):
        self.check_feed("cairns.zip", 4)


if __name__ == "__main__":
    unittest.main()
