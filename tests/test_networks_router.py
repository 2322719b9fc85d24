"""The router of transitlm/networks/router.py is exact under its documented rules: on random
small networks (seeded) its itinerary is legal and costs exactly what an
exhaustive enumeration of all legal itineraries finds cheapest."""

import math
import os
import unittest

from transitlm.networks import benchmark_builder as mb
from transitlm.networks import bound_tables
from transitlm.networks import gtfs_fares as fares
from transitlm.networks import router as routing
from tests import route_oracle as oracle
from tests.support.lane import Offloaded
from tests.support.random_networks import (CANDIDATES, CASES, DESTINATIONS, FACTOR, LAT0, LNG0,
                                           SEARCH_CASES, random_case)

# The router against the exhaustive search on every case, started as the
# module loads, in a process of its own beside the suite
# (tests/support/random_networks.py; tests.support.Offloaded).
EXHAUSTIVE = Offloaded("tests.support.random_networks:router_against_exhaustive", CASES)
# OriginSearch (several destinations per search, routes and candidates) likewise.
ORIGIN_SEARCHES = Offloaded("tests.support.random_networks:origin_search_against_exhaustive",
                            SEARCH_CASES)


class ExhaustiveSearchTest(unittest.TestCase):
    def test_router_matches_exhaustive_search(self):
        """The router's itinerary is legal and no legal itinerary is cheaper (an
        exhaustive search bounded by its cost finds none); no itinerary at all
        when the router finds none."""
        results = EXHAUSTIVE.result()
        self.assertEqual([r["case"] for r in results], list(range(CASES)))
        multi_leg = shared = 0
        for result in results:
            where = "case %d" % result["case"]
            if not result["found"]:
                self.assertIsNone(result["exhaustive"], where)
                continue
            self.assertIsNone(result["illegal"], where)
            self.assertIsNone(result["cheaper"], "%s: router %.6f, exhaustive %s"
                              % (where, result["cost"], result["cheaper"]))
            multi_leg += result["legs"] > 1
            # A* bounded by a table of lower bounds (bound_tables) is as exact.
            for cells, found, illegal, cost in result["tables"]:
                self.assertTrue(found, where)
                self.assertIsNone(illegal, where)
                self.assertAlmostEqual(cost, result["cost"], places=9, msg="%s, %d cells" % (where, cells))
                shared += cells < result["stops"]
        self.assertGreater(multi_leg, CASES // 10)
        self.assertGreater(shared, CASES // 4)          # tables whose cells hold several stops

    def test_a_ceiling_only_cuts_what_costs_more(self):
        # find_route(ceiling=C): the same itinerary (ties too) when it costs
        # less than C, None when it does not; with a bound table as well.
        checked = 0
        for case in range(0, CASES, 4):
            net, district, prefs, origin, dest = random_case(case)
            for table in (None, bound_tables.build(net, *bound_tables.weights_of(prefs))):
                route = routing.find_route(net, district, origin, dest, prefs, table=table)
                if route is None:
                    continue
                cost = oracle.route_cost(net, route, prefs)
                above = routing.find_route(net, district, origin, dest, prefs, table=table,
                                           ceiling=cost + 1e-6)
                self.assertEqual((above.legs, above.start.mode, above.end.mode),
                                 (route.legs, route.start.mode, route.end.mode), "case %d" % case)
                self.assertIsNone(routing.find_route(net, district, origin, dest, prefs, table=table,
                                                     ceiling=cost - 1e-6), "case %d" % case)
                checked += 1
        self.assertGreater(checked, CASES // 8)

    def test_dijkstra_agrees_with_the_router(self):
        # The textbook search the real-feed tests use, checked where the router
        # has just been proved exact.
        for case in range(0, CASES, 3):
            net, district, prefs, origin, dest = random_case(case)
            route = routing.find_route(net, district, origin, dest, prefs)
            got = oracle.dijkstra_best(net, district, origin, dest, prefs)
            if route is None:
                self.assertIsNone(got, "case %d" % case)
            else:
                self.assertAlmostEqual(got, oracle.route_cost(net, route, prefs), places=9,
                                       msg="case %d" % case)

    def test_the_line_just_left(self):
        # A reaches C cheaply by line X, dearly by line Y; only X continues to D,
        # and X may not be re-boarded at C: the cheapest legal way is Y then X.
        net = routing.Network(0.0)
        city = mb.City("X", "0")
        district = routing.District(0, city, LNG0, LAT0)
        net.districts.append(district)
        for k in range(4):
            district.stops.append(net.add_stop("s%d" % k, "S%d" % k, LNG0 + 0.03 * k, LAT0, "0"))
        x = routing.Line(0, city, routing.KIND_BUS, "X", [0, 2], district)
        y = routing.Line(1, city, routing.KIND_BUS, "Y", [0, 2], district)
        net.lines.extend([x, y])
        flat = ((float("inf"), 1.0),)
        net.add_linedir(routing.LineDir(0, x, "X1", [0, 2], [0.0, 5.0], [0.0, 5.0], 2.0, flat, math.inf))
        net.add_linedir(routing.LineDir(1, y, "Y1", [0, 2], [0.0, 5.0], [0.0, 9.0], 2.0, flat, math.inf))
        net.add_linedir(routing.LineDir(2, x, "X2", [2, 3], [0.0, 2.0], [0.0, 2.0], 2.0, flat, math.inf))
        net.min_minutes_per_km = mb.fastest_minutes_per_km(net)
        district.lines = list(net.lines)
        net.finish()
        prefs = routing.Prefs()
        origin, dest = (net.lng[0], net.lat[0]), (net.lng[3], net.lat[3])
        route = routing.find_route(net, district, origin, dest, prefs)
        self.assertEqual([ld for ld, _, _ in route.legs], [1, 2])
        self.assertAlmostEqual(oracle.route_cost(net, route, prefs),
                               oracle.exhaustive_best(net, district, origin, dest, prefs))


class OriginSearchTest(unittest.TestCase):
    def test_routes_and_candidates_match_exhaustive_search(self):
        """For each destination in turn, OriginSearch.route_to's itinerary is legal
        and optimal (as find_route's); candidates_to's are legal, best first,
        ordered by cost, of distinct line sets, within the factor, each the
        cheapest itinerary whose last ride is its line alighting at its stop, and
        none is missing: with fewer than asked, every such ending within the
        factor is matched by a candidate no dearer that rides its line."""
        results = ORIGIN_SEARCHES.result()
        self.assertEqual(len(results), SEARCH_CASES * DESTINATIONS)
        several = 0
        for result in results:
            where = "case %d destination %d" % (result["case"], result["dest"])
            if not result["found"]:
                self.assertIsNone(result["exhaustive"], where)
                self.assertEqual(result["candidates"], 0, where)
                continue
            self.assertIsNone(result["illegal"], where)
            self.assertIsNone(result["cheaper"], where)
            picks = result["candidates"]
            self.assertTrue(1 <= len(picks) <= CANDIDATES, where)
            self.assertAlmostEqual(picks[0]["cost"], result["cost"], places=9, msg=where)
            self.assertEqual(len({tuple(p["lines"]) for p in picks}), len(picks), where)
            for before, after in zip(picks, picks[1:]):
                self.assertLessEqual(before["cost"], after["cost"] + 1e-9, where)
            limit = FACTOR * result["cost"] + 1e-9
            for pick in picks:
                self.assertIsNone(pick["illegal"], where)
                self.assertLessEqual(pick["cost"], limit, where)
                self.assertIsNotNone(pick["ending"], where)
                self.assertAlmostEqual(pick["cost"], pick["ending"], places=9, msg=where)
            if len(picks) < CANDIDATES:
                for line, stop, cost in result["endings"]:
                    self.assertTrue(any(p["cost"] <= cost + 1e-9 and line in p["line_ids"]
                                        for p in picks), "%s: ending %s" % (where, (line, stop)))
            several += len(picks) >= 3
        self.assertGreater(several, SEARCH_CASES // 10)

    def test_route_to_agrees_with_find_route(self):
        for case in range(0, CASES, 2):
            net, district, prefs, origin, dest = random_case(case)
            route = routing.find_route(net, district, origin, dest, prefs)
            got = routing.OriginSearch(net, district, origin, prefs).route_to(dest)
            if route is None:
                self.assertIsNone(got, "case %d" % case)
            else:
                self.assertAlmostEqual(oracle.route_cost(net, got, prefs),
                                       oracle.route_cost(net, route, prefs), places=9,
                                       msg="case %d" % case)


class OriginSearchNetworkTest(unittest.TestCase):
    def test_bundled_network_several_destinations_an_origin(self):
        """On the bundled demo network (280 stops, both districts), one search an
        origin answers each destination as find_route does (its cost), and the
        candidates are best first, ordered, of distinct line sets, within the
        factor; a search asked for candidates first answers route_to the same."""
        data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
        net = mb.load_network(data)
        rng = routing.sub_rng(11, "origin search test")
        asked = 0
        for district in mb.usable_districts(net):
            for k in range(3):
                trips = [routing.draw_od(net, rng, district, *mb.TRIP_KM) for _ in range(5)]
                origin = next(od[0] for od in trips if od)
                search = routing.OriginSearch(net, district, origin, routing.Prefs())
                for dest in [od[1] for od in trips if od]:
                    where = "district %d origin %d destination %s" % (district.index, k, dest)
                    picks = search.candidates_to(dest, 5, 1.5) if k % 2 else []
                    route = search.route_to(dest)
                    best = routing.find_route(net, district, origin, dest, routing.Prefs())
                    self.assertEqual(route is None, best is None, where)
                    if best is None:
                        continue
                    asked += 1
                    prefs = routing.Prefs()
                    cost = oracle.route_cost(net, best, prefs)
                    self.assertAlmostEqual(oracle.route_cost(net, route, prefs), cost, places=9, msg=where)
                    picks = picks or search.candidates_to(dest, 5, 1.5)
                    costs = [oracle.route_cost(net, p, prefs) for p in picks]
                    self.assertAlmostEqual(costs[0], cost, places=9, msg=where)
                    self.assertEqual(costs, sorted(costs), where)
                    self.assertLessEqual(costs[-1], 1.5 * cost + 1e-9, where)
                    sets = [frozenset(net.linedirs[ld].name for ld, _, _ in p.legs) for p in picks]
                    self.assertEqual(len(set(sets)), len(sets), where)
                    for p in picks:
                        self.assertIsNone(oracle.illegal(net, p.legs, prefs), where)
        self.assertGreater(asked, 15)

    def test_candidates_kept_by_a_test(self):
        # keep= filters before line sets are counted: one-ride candidates only,
        # still distinct, ordered and within the factor of the best of all.
        data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
        net = mb.load_network(data)
        rng = routing.sub_rng(12, "origin search keep")
        district = mb.usable_districts(net)[0]
        checked = 0
        for _ in range(8):
            od = routing.draw_od(net, rng, district, *mb.TRIP_KM)
            if od is None:
                continue
            search = routing.OriginSearch(net, district, od[0], routing.Prefs())
            every = search.candidates_to(od[1], 50, 2.0)
            if not every:
                continue
            kept = search.candidates_to(od[1], 50, 2.0, keep=lambda r: len(r.legs) == 1)
            prefs = routing.Prefs()
            limit = 2.0 * oracle.route_cost(net, every[0], prefs) + 1e-9
            def lines(route):
                return frozenset(net.linedirs[ld].name for ld, _, _ in route.legs)
            self.assertTrue(all(len(r.legs) == 1 for r in kept))
            self.assertEqual(len({lines(r) for r in kept}), len(kept))
            self.assertLessEqual({lines(r) for r in every if len(r.legs) == 1}, {lines(r) for r in kept})
            costs = [oracle.route_cost(net, r, prefs) for r in kept]
            self.assertEqual(costs, sorted(costs))
            self.assertTrue(all(c <= limit for c in costs))
            checked += bool(kept)
        self.assertGreater(checked, 2)


class HelperTest(unittest.TestCase):
    def test_bound_tables_only_where_they_bound(self):
        net, _, _, _, _ = random_case(3)
        table = bound_tables.table_for(net, routing.Prefs())
        self.assertIsNotNone(table)
        self.assertIs(bound_tables.table_for(net, routing.Prefs().without_lines([0])), table)
        self.assertIsNot(bound_tables.table_for(net, routing.prefs_for_req(8)), table)
        self.assertIsNone(bound_tables.build(net, 0.2, 1.0, 1.0, max_work=1))     # too large
        # a negative penalty, or a ride back in time, is not bounded by the relaxation
        self.assertIsNone(bound_tables.table_for(net, routing.Prefs().penalised([0], -1.0)))
        ld = net.linedirs[0]
        ld.cumarr[1] = ld.cumtime[0] - 1.0
        net.bound_tables = {}
        self.assertFalse(bound_tables.relaxable(net))
        self.assertIsNone(bound_tables.table_for(net, routing.Prefs()))

    def test_stop_grid_answers_as_a_scan_of_every_stop(self):
        # Stops in clusters, across a cell border and far apart; points near and
        # far; and the same across the 180th meridian, where a flat distance is
        # the least to the point or its image a turn away.
        import random

        def on_the_map(lng):
            return lng - 360.0 if lng > 180.0 else lng + 360.0 if lng < -180.0 else lng

        for lng0 in (LNG0, 179.98, -179.85):
            rng = random.Random(7)
            net = routing.Network(0.0)
            district = routing.District(0, mb.City("X", "0"), lng0, LAT0)
            for k in range(300):
                lng = on_the_map(lng0 + rng.choice((0.0, 0.01, 0.5)) + rng.uniform(-0.02, 0.02))
                district.stops.append(net.add_stop("s%d" % k, "S", lng, LAT0 + rng.uniform(-0.05, 0.05), "0"))
            district.stops.append(net.add_stop("twin", "S", net.lng[0], net.lat[0], "0"))   # a tie
            grid = routing.stop_grid(net, district)
            across = 0
            for _ in range(300):
                point = (on_the_map(lng0 + rng.uniform(-0.3, 0.8)), LAT0 + rng.uniform(-0.3, 0.3))
                kx = routing.KM_PER_DEG * math.cos(math.radians(point[1]))
                flat = [(routing.flat_km(net, s, point, kx), s) for s in district.stops]
                self.assertEqual(grid.nearest(point, kx), min(flat))
                radius = rng.choice((0.5, 2.05, 4.5, 9.05, 60.0))
                found = grid.within(point, kx, radius)
                self.assertEqual([(s, f) for _, s, f in found],
                                 [(s, f) for f, s in flat if f <= radius], lng0)
                across += any((net.lng[s] > 0) != (point[0] > 0) for _, s, _ in found)
            if lng0 != LNG0:
                self.assertGreater(across, 0, "no stop found across the meridian")
        # the flat distance across the meridian is the short way round
        net = routing.Network(0.0)
        east = net.add_stop("e", "E", -179.995, LAT0, "0")
        kx = routing.KM_PER_DEG * math.cos(math.radians(LAT0))
        self.assertLess(routing.flat_km(net, east, (179.995, LAT0), kx), 1.0)

    def test_zone_runs_and_line_fares(self):
        self.assertEqual(fares.zone_runs([]), [])
        self.assertEqual(fares.zone_runs(["1", "1", "2", "1"]), [0, 0, 1, 2])
        table = fares.FareTable({"A": 2.0, "B": 3.0, "C": 1.0},
                                [("A", "", "1", "1", ""), ("B", "", "1", "2", ""),
                                 ("B", "", "2", "1", ""), ("A", "", "2", "2", ""),
                                 ("C", "R9", "", "", "")])
        self.assertEqual(fares.line_fares(table, "R1", ["1", "1"]), (2.0, None))
        self.assertEqual(fares.line_fares(table, "R1", ["1", "2"]),
                         (None, [[2.0, 3.0], [None, 2.0]]))
        self.assertEqual(fares.line_fares(table, "R9", ["1", "2"]), (1.0, None))  # cheapest applies
        self.assertEqual(fares.line_fares(table, "R1", ["3", "3"]), (None, None))

    def test_contains_and_rule_free_fares(self):
        table = fares.FareTable({"Z": 4.0}, [("Z", "", "", "", "5"), ("Z", "", "", "", "6")])
        self.assertEqual(table.ride_fare("R", ["5", "6"]), 4.0)
        self.assertIsNone(table.ride_fare("R", ["5"]))          # must pass exactly 5 and 6
        self.assertIsNone(table.ride_fare("R", ["5", "6", "7"]))
        agency = fares.FareTable({"F": 2.5}, [], {"F": "AG"}, {"F": ""})
        self.assertEqual(agency.ride_fare("R", [""], "AG"), 2.5)
        self.assertIsNone(agency.ride_fare("R", [""], "OTHER"))
        self.assertEqual(agency.transfer_fares(), ["F"])
        self.assertEqual(fares.FareTable({"F": 1.0}, [], transfers={"F": "0"}).transfer_fares(), [])

    def test_expert_score_and_out_and_back(self):
        net = routing.Network(0.0)
        city = mb.City("X", "0")
        for k in range(3):
            net.add_stop("s%d" % k, "S%d" % k, LNG0 + 0.01 * k, LAT0, "0")
        line = routing.Line(0, city, routing.KIND_BUS, "1", [0, 1, 0], None)
        net.add_linedir(routing.LineDir(0, line, "1", [0, 1, 0], [0.0, 1.0, 2.0], [0.0, 10.0, 20.0],
                                        5.0, ((float("inf"), 2.0),), math.inf))
        net.link(1, 2)
        net.finish()
        loop = routing.make_route(net, (LNG0, LAT0), (LNG0, LAT0), [(0, 0, 2)], "walk", "walk")
        self.assertTrue(routing.ends_where_it_boarded(net, loop))
        out = routing.make_route(net, (LNG0, LAT0), (LNG0 + 0.01, LAT0), [(0, 0, 1)], "walk", "bike")
        self.assertFalse(routing.ends_where_it_boarded(net, out))
        # 5 min wait + 10 min ride + bike access minutes; 1 line + 1 cycling; fare 2 + 1.5
        self.assertAlmostEqual(routing.expert_score(out),
                               out.minutes * 0.2 + 2 + 2.0 + routing.BIKE_FARE)
        self.assertAlmostEqual(out.minutes, 15.0 + out.start.minutes + out.end.minutes)


if __name__ == "__main__":
    unittest.main()
