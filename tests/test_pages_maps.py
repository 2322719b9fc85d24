"""transitlm.pages.maps: the map geometry (scale bar, projection, legs, valid
points), stops read through the network (malformed ones unknown, the
general-LLM id fallback), map labels placed without overlapping, on
synthetic crowded maps and on a crowded row map, the direction of each route
(an arrow a hop: a reversed route looks different from its label), and the
general-LLM map of a route the route-eval check stopped on."""

import re
import unittest

import common
import transitlm.pages.maps
from tests.support.page_runs import page_network as network, page_route as route


class GeometryTest(unittest.TestCase):
    def test_scale_bar_picks_largest_fitting_length(self):
        self.assertEqual(transitlm.pages.maps.scale_bar_km(10.0, 110), 10)
        self.assertEqual(transitlm.pages.maps.scale_bar_km(10.0, 99), 5)
        self.assertEqual(transitlm.pages.maps.scale_bar_km(1e6, 10), 0.05)   # nothing fits: smallest

    def test_projection_north_up_and_same_scale_both_axes(self):
        # Mean latitude 60: a degree of longitude is cos(60) = half a degree of latitude.
        project = transitlm.pages.maps.Projection([(10.0, 59.5), (12.0, 60.5)])
        west, east = project((10.0, 60.0)), project((12.0, 60.0))
        south, north = project((10.0, 59.5)), project((10.0, 60.5))
        self.assertLess(north[1], south[1])
        self.assertAlmostEqual(east[0] - west[0], south[1] - north[1], delta=0.5)

    def test_projection_of_one_point_or_none(self):
        x, y = transitlm.pages.maps.Projection([(116.0, 40.0)])((116.0, 40.0))
        self.assertTrue(0 < x < transitlm.pages.maps.MAP_WIDTH and 0 < y < transitlm.pages.maps.MAP_HEIGHT)
        transitlm.pages.maps.Projection([])((0.0, 0.0))      # no crash

    def test_split_legs(self):
        split = transitlm.pages.maps.split_legs
        self.assertEqual(split(["a", "b", common.TRANSFER, "c", "d"]),
                         [["a", "b"], ["c", "d"]])
        self.assertEqual(split(["a", "b", "b", "c"]), [["a", "b"], ["b", "c"]])
        self.assertEqual(split(["a", "b"]), [["a", "b"]])
        self.assertEqual(split([]), [])
        self.assertEqual(split([common.TRANSFER]), [])
        # the details' leg sizes win when they fit the stations, else ignored
        self.assertEqual(split(["a", "b", "c", "d"], [1, 3]), [["a"], ["b", "c", "d"]])
        self.assertEqual(split(["a", "b", "b", "c"], [1, 2]), [["a", "b"], ["b", "c"]])
        self.assertEqual(split(["a", "b"], [0, 2]), [["a", "b"]])

    def test_valid_point(self):
        self.assertTrue(transitlm.pages.maps.valid_point([116.0, 39.0]))
        self.assertFalse(transitlm.pages.maps.valid_point([116.0, 99.0]))
        self.assertFalse(transitlm.pages.maps.valid_point(None))
        self.assertFalse(transitlm.pages.maps.valid_point(["x", 1]))
        self.assertFalse(transitlm.pages.maps.valid_point([float("nan"), 1]))


class StopsTest(unittest.TestCase):
    def test_malformed_stop_reads_as_unknown(self):
        class Broken(object):
            def coords(self, stop):
                raise common.InputError("line 3: coord_x/coord_y of stop x is malformed")
            next_hops = name = coords
        stops = transitlm.pages.maps.Stops(Broken())
        self.assertIsNone(stops.coords("x"))
        self.assertIsNone(stops.name("x"))
        self.assertIsNone(stops.connected("x", "y"))

    def test_prefix_fallback_only_for_general_llm(self):
        net = network()
        self.assertIsNone(transitlm.pages.maps.Stops(net).coords("1"))
        fallback = transitlm.pages.maps.Stops(net, prefix_fallback=True)
        self.assertEqual(fallback.coords("1"), (116.30, 39.90))
        self.assertTrue(fallback.connected("1", "2"))
        self.assertFalse(fallback.connected("1", "3"))

    def test_no_network(self):
        self.assertIsNone(transitlm.pages.maps.Stops(None).coords("bus-1"))


# ---------------------------------------------------------------------------
# Label placement on maps
# ---------------------------------------------------------------------------

def overlapping_pairs(boxes):
    """Index pairs of boxes (left, top, width, height) that overlap."""
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if transitlm.pages.maps.boxes_overlap(boxes[i], boxes[j])]


def crowded_map(seed, labels=8, spread=40.0):
    """A synthetic crowded map: ``labels`` labels whose points lie within
    ``spread`` px of one point of a 440 x 300 map, two marker obstacles among
    them.  -> (label requests, obstacles)."""
    import random
    rng = random.Random(seed)
    cx, cy = rng.uniform(60, 380), rng.uniform(50, 250)
    texts = ["origin", "destination", "\u6b65\u884c 1.2 km", "\u6253\u8f66 7.6 km",
             "\u5317\u4eac\u5357\u7ad9", "bus-100022", "a", "\u9a91\u884c 0.4 km"]
    requests = []
    for index in range(labels):
        x, y = cx + rng.uniform(-spread, spread), cy + rng.uniform(-spread, spread)
        width, height = transitlm.pages.maps.text_box_size(texts[index % len(texts)], 11)
        requests.append((x, y, width, height, 9.0))
    obstacles = [(requests[0][0] - 6, requests[0][1] - 6, 12, 12),
                 (requests[1][0] - 6, requests[1][1] - 6, 12, 12)]
    return requests, obstacles


class LabelPlacementTest(unittest.TestCase):
    BOUNDS = (2, 2, 436, 296)

    def test_text_box_size(self):
        size = transitlm.pages.maps.text_box_size
        self.assertEqual(size("ab", 10), (12.4, 12.5))        # 2 x 0.62 em
        self.assertEqual(size("\u5317\u4eac", 10), (20.0, 12.5))  # CJK: 1 em each
        self.assertEqual(size("", 10), (0.0, 12.5))

    def test_boxes_overlap(self):
        overlap = transitlm.pages.maps.boxes_overlap
        self.assertTrue(overlap((0, 0, 10, 10), (5, 5, 10, 10)))
        self.assertFalse(overlap((0, 0, 10, 10), (10, 0, 10, 10)))      # touching
        self.assertTrue(overlap((0, 0, 10, 10), (11, 0, 10, 10), gap=2))
        self.assertFalse(overlap((0, 0, 10, 10), (0, 30, 10, 10)))

    def test_candidates_start_right_of_the_point(self):
        first = transitlm.pages.maps.label_candidates(100, 50, 30, 10, 9)[0]
        self.assertEqual(first, (109, 45.0, 30, 10))
        second = transitlm.pages.maps.label_candidates(100, 50, 30, 10, 9)[1]
        self.assertEqual(second, (61, 45.0, 30, 10))                     # left

    def test_empty_and_single(self):
        place = transitlm.pages.maps.place_labels
        self.assertEqual(place([]), [])
        self.assertEqual(place([(100, 50, 30, 10, 9)]), [(109, 45.0, 30, 10)])

    def test_a_free_label_keeps_its_first_place_and_bounds_are_kept(self):
        place = transitlm.pages.maps.place_labels
        # Near the right edge the label cannot go right: it goes left.
        box = place([(430, 150, 40, 12, 9)], bounds=self.BOUNDS)[0]
        self.assertEqual(box, (381, 144.0, 40, 12))
        # A label whose first place is taken by an obstacle moves.
        box = place([(100, 50, 30, 10, 9)], obstacles=[(105, 40, 50, 20)])[0]
        self.assertEqual(box, (61, 45.0, 30, 10))

    def test_crowded_maps_have_no_overlapping_labels(self):
        place = transitlm.pages.maps.place_labels
        for seed in range(60):
            labels, spread = ((8, 40.0), (16, 10.0), (24, 5.0))[seed % 3]
            with self.subTest(seed=seed, labels=labels, spread=spread):
                requests, obstacles = crowded_map(seed, labels, spread)
                boxes = place(requests, obstacles, self.BOUNDS)
                self.assertEqual(overlapping_pairs(boxes), [])
                for box in boxes:
                    self.assertFalse(any(transitlm.pages.maps.boxes_overlap(box, obstacle)
                                         for obstacle in obstacles))
                    self.assertTrue(transitlm.pages.maps._inside(box, self.BOUNDS))

    def test_the_check_fails_without_placement(self):
        # Every label at its first candidate (no placement): the crowded maps
        # above do have overlapping labels, so the test above can fail.
        candidates = transitlm.pages.maps.label_candidates
        crowded = 0
        for seed in range(60):
            requests, _ = crowded_map(seed)
            naive = [candidates(*request)[0] for request in requests]
            crowded += bool(overlapping_pairs(naive))
        self.assertGreater(crowded, 50)

    def test_labels_of_a_crowded_row_map(self):
        # Origin and destination 150 m apart, both access legs between them:
        # four labels in a few pixels once the map spans 10 km.
        net = common.StationNetwork.from_dict({
            "s1": (116.3000, 39.9000, ["s2"]), "s2": (116.4000, 39.9600, ["s1"])})
        record = {"row": 1, "status": "evaluated", "origin": [116.3001, 39.9001],
                  "destination": [116.3010, 39.9010],
                  "prediction_routes": {"first": route(["s1", "s2"], end="\u6253\u8f66")},
                  "label_routes": None}
        builder_boxes = []
        original = transitlm.pages.maps.MapBuilder._place_labels

        def spy(builder):
            original(builder)
            builder_boxes.extend(builder.label_boxes)
        transitlm.pages.maps.MapBuilder._place_labels = spy
        try:
            svg, _ = transitlm.pages.maps.row_map(record, "single_route",
                                                  transitlm.pages.maps.Stops(net))
        finally:
            transitlm.pages.maps.MapBuilder._place_labels = original
        self.assertEqual(len(builder_boxes), 4)            # origin, destination, 2 access
        self.assertEqual(overlapping_pairs(builder_boxes), [])
        self.assertEqual(len(re.findall(r'<text class="(?:mk|acc)', svg)), 4)


# ---------------------------------------------------------------------------
# Direction, and what a general-LLM map draws
# ---------------------------------------------------------------------------

def arrows(svg, label):
    """Unit directions of the arrowheads of a map (label's or prediction's):
    from the middle of a head's base to its tip (path data: the tip, then
    relative steps to the two corners of the base)."""
    css = "dir lbl" if label else "dir"
    out = []
    for data in re.findall(r'<path class="%s" d="([^"]*)"' % css, svg):
        for _, _, ax, ay, bx, by in re.findall(
                r"M([-\d.]+) ([-\d.]+)l([-\d.]+) ([-\d.]+)l([-\d.]+) ([-\d.]+)z", data):
            dx = -(float(ax) + float(bx) / 2)
            dy = -(float(ay) + float(by) / 2)
            size = (dx * dx + dy * dy) ** 0.5
            out.append((round(dx / size, 1), round(dy / size, 1)))
    return out


def map_of(prediction, label, benchmark="single_route", **extra):
    record = {"row": 1, "status": "evaluated", "origin": [116.299, 39.899],
              "destination": [116.321, 39.912], "reachable": True,
              "prediction_routes": {"first": route(prediction)},
              "label_routes": {"first": route(label)}}
    record.update(extra)
    return transitlm.pages.maps.row_map(record, benchmark, transitlm.pages.maps.Stops(
        network(), prefix_fallback=benchmark == "general_llm"))


class DirectionTest(unittest.TestCase):
    LABEL = ["bus-1", "bus-2", "bus-3", "bus-4"]

    def test_a_reversed_route_looks_different_from_its_label(self):
        svg, notes = map_of(list(reversed(self.LABEL)), self.LABEL)
        label, prediction = arrows(svg, True), arrows(svg, False)
        self.assertGreaterEqual(len(set(label)), 2)         # east, then north
        self.assertEqual(set(prediction), {(-x, -y) for x, y in label})
        self.assertFalse(set(prediction) & set(label))
        self.assertIn("arrows: the direction of travel", notes)
        # the same route as its label: the same directions
        svg, _ = map_of(self.LABEL, self.LABEL)
        self.assertEqual(set(arrows(svg, False)), set(arrows(svg, True)))

    def test_arrows_sit_apart_where_routes_share_a_hop(self):
        svg, _ = map_of(list(reversed(self.LABEL)), self.LABEL)
        tips = re.findall(r"M([-\d.]+) ([-\d.]+)l", " ".join(
            re.findall(r'<path class="dir[^"]*" d="([^"]*)"', svg)))
        self.assertEqual(len(set(tips)), len(tips))

    def test_arrows_along_a_route(self):
        route_arrows = transitlm.pages.maps.route_arrows
        spacing = transitlm.pages.maps.ARROW_SPACING_PX
        long_hop = [("#000", (0.0, 0.0), (10 * spacing, 0.0))]
        self.assertEqual(len(route_arrows(long_hop)), 10)      # one every spacing
        # many short hops: arrows all the same, on the hops long enough
        short = [("#000", (20.0 * i, 0.0), (20.0 * (i + 1), 0.0)) for i in range(10)]
        self.assertGreaterEqual(len(route_arrows(short)), 3)
        # a route too short for the spacing still shows its direction once
        self.assertEqual(len(route_arrows([("#000", (0.0, 0.0), (20.0, 0.0))])), 1)
        self.assertEqual(transitlm.pages.maps.arrow_head((0, 0), (10, 0)), "")

    def test_general_llm_route_the_check_stopped_on_is_drawn(self):
        found = [{"query": "甲", "line_name": "1号线", "name": "甲站", "stop_id": "1"},
                 {"query": "乙", "line_name": "1号线", "name": "乙站", "stop_id": "2"},
                 {"query": "丙", "line_name": "2号线", "name": "丙站", "stop_id": "9"}]
        svg, notes = map_of(["甲", "乙", "丙", "丁"], ["甲", "丁"], "general_llm",
                            reachable=False, match_details=[], names_on_lines=found)
        self.assertEqual(svg.count('<circle class="stop"'), 3)   # each name found
        self.assertEqual(len(arrows(svg, False)), 2)            # 甲 -> 乙 -> 丙, directed
        self.assertIn("not connected", notes)                  # 2 -> 9 is no hop
        self.assertIn("not found on them: <bdi>丁</bdi>", notes)
        # without names_on_lines (a service run): the matched legs, as before
        svg, _ = map_of(["甲", "乙"], ["甲", "丁"], "general_llm", reachable=False,
                        match_details=[])
        self.assertEqual(svg.count('<circle class="stop"'), 0)


if __name__ == "__main__":
    unittest.main()
