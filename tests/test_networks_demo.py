"""data/make_demo.py (transitlm/networks/demo/) and the bundled demo data it writes."""

import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data")
SCRIPT = os.path.join(DATA, "make_demo.py")

TRANSFER = "【换乘】"
STATION_COLUMNS = ["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations", "station_name"]
LINE_COLUMNS = ["citycode", "line_name", "station_list"]
SAMPLE_COLUMNS = ["index_id", "system_prompt", "sft_prompt", "sft_label", "generate_results"]
SAMPLE_FILES = {
    "benchmark1_single_route_example.csv": SAMPLE_COLUMNS,
    "benchmark2_personalized_example.csv": SAMPLE_COLUMNS + ["req_type"],
    "benchmark3_diversity_example.csv": SAMPLE_COLUMNS,
    "general_llm_example.csv": SAMPLE_COLUMNS,
}
NETWORK_FILES = {"station_info.csv": STATION_COLUMNS, "line_info.csv": LINE_COLUMNS}
ALL_FILES = dict(NETWORK_FILES, **SAMPLE_FILES)
ROUTE_KEYS = ("first", "second", "third")

csv.field_size_limit(2 ** 30)


def run_generator(*args):
    subprocess.run([sys.executable, SCRIPT] + list(args), check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def legs(sequence):
    out = [[]]
    for item in sequence:
        if item == TRANSFER:
            out.append([])
        else:
            out[-1].append(item)
    return out


def label_routes(label):
    return [label[k] for k in ROUTE_KEYS if k in label] if "first" in label else [label]


class GeneratorOutputTest(unittest.TestCase):
    def test_default_output_matches_committed_files(self):
        with tempfile.TemporaryDirectory() as out:
            run_generator("--out", out)
            self.assertEqual(sorted(os.listdir(out)), sorted(ALL_FILES))
            for name in sorted(ALL_FILES):
                with open(os.path.join(out, name), "rb") as fresh, \
                        open(os.path.join(DATA, name), "rb") as committed:
                    self.assertTrue(fresh.read() == committed.read(),
                                    "%s differs from a fresh run of make_demo.py" % name)

    def test_scale_options_write_requested_rows(self):
        with tempfile.TemporaryDirectory() as out:
            run_generator("--stations", "2000", "--samples", "50", "--out", out)
            _, stations = read_rows(os.path.join(out, "station_info.csv"))
            self.assertGreater(len(stations), 1500)
            self.assertLess(len(stations), 2500)
            for name, columns in SAMPLE_FILES.items():
                header, rows = read_rows(os.path.join(out, name))
                self.assertEqual(header, columns, name)
                self.assertEqual(len(rows), 50, name)


class BundledDataSanityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = {name: read_rows(os.path.join(DATA, name)) for name in ALL_FILES}
        stations = cls.files["station_info.csv"][1]
        cls.hops = {r["stop_id"]: set(json.loads(r["next_hop_stations"])) for r in stations}
        cls.lines = {}
        for row in cls.files["line_info.csv"][1]:
            cls.lines[(row["citycode"], row["line_name"])] = json.loads(row["station_list"])

    def test_columns(self):
        for name, columns in ALL_FILES.items():
            self.assertEqual(self.files[name][0], columns, name)
            self.assertTrue(self.files[name][1], name)

    def test_every_row_tells_the_model_the_answer_format(self):
        # As the release's files: generate.py sends the system prompt, so a
        # real model knows it must answer with one JSON route of these fields.
        for name in SAMPLE_FILES:
            for row in self.files[name][1]:
                prompt = row["system_prompt"]
                for field in ("JSON", "line_sequence", "station_sequence", "total_distance",
                              "total_time", "total_fare", "start_transfer_mode",
                              "end_transfer_distance", "\u3010\u6362\u4e58\u3011"):
                    self.assertIn(field, prompt, name)
                if name.startswith("benchmark3"):
                    self.assertIn('"first"', prompt)
                if name.startswith("general"):
                    self.assertIn("\u7ad9\u70b9\u540d\u79f0", prompt)   # station names, not ids

    def test_sample_file_sizes(self):
        for name in SAMPLE_FILES:
            self.assertTrue(20 <= len(self.files[name][1]) <= 40, name)

    def test_next_hops_exist_and_are_mutual(self):
        for stop, hops in self.hops.items():
            for other in hops:
                self.assertIn(other, self.hops, "%s -> unknown %s" % (stop, other))
                self.assertIn(stop, self.hops[other], "%s -> %s is one-way" % (stop, other))

    def test_line_stations_follow_next_hops(self):
        for (_, name), stations in self.lines.items():
            ids = [s["stop_id"] for s in stations]
            self.assertEqual(len(ids), len(set(ids)), name)
            for a, b in zip(ids, ids[1:]):
                self.assertIn(b, self.hops[a], name)

    def test_both_transfer_styles_exist(self):
        names = {r["stop_id"]: r["station_name"] for r in self.files["station_info.csv"][1]}
        on_lines = {}
        for stations in self.lines.values():
            for s in stations:
                on_lines.setdefault(s["stop_id"], set()).add(tuple(sorted(x["stop_id"] for x in stations)))
        shared = [s for s, lines in on_lines.items() if len(lines) > 1]
        twins = [(a, b) for a, hops in self.hops.items() for b in hops if a < b and names[a] == names[b]]
        self.assertTrue(shared, "no stop is shared by two lines")
        self.assertTrue(twins, "no walk-linked twin stops")

    def test_labels_decode_and_legs_are_connected(self):
        for name in ("benchmark1_single_route_example.csv", "benchmark2_personalized_example.csv",
                     "benchmark3_diversity_example.csv"):
            for row in self.files[name][1]:
                json.loads(row["sft_prompt"])
                for route in label_routes(json.loads(row["sft_label"])):
                    route_legs = legs(route["station_sequence"])
                    self.assertEqual(len(route_legs), len(route["line_sequence"]), row["index_id"])
                    for leg in route_legs:
                        self.assertGreaterEqual(len(leg), 2, row["index_id"])
                        for a, b in zip(leg, leg[1:]):
                            self.assertIn(b, self.hops[a], row["index_id"])
                    for before, after in zip(route_legs, route_legs[1:]):
                        self.assertTrue(before[-1] == after[0] or after[0] in self.hops[before[-1]],
                                        row["index_id"])

    def test_general_labels_ride_their_lines(self):
        codes = {"北京": "010", "上海": "021", "深圳": "0755", "成都": "028"}
        for row in self.files["general_llm_example.csv"][1]:
            city = codes[json.loads(row["sft_prompt"])["city"]]
            label = json.loads(row["sft_label"])
            for line, leg in zip(label["line_sequence"], legs(label["station_sequence"])):
                names = [s["station_name"] for s in self.lines[(city, line)]]
                start = names.index(leg[0])
                self.assertEqual(names[start:start + len(leg)], leg, row["index_id"])

    def test_prompts_and_index_ids(self):
        for name in SAMPLE_FILES:
            ids = [row["index_id"] for row in self.files[name][1]]
            self.assertEqual(len(ids), len(set(ids)), name)
            for row in self.files[name][1]:
                self.assertRegex(row["index_id"], r"^[0-9a-f]{32}$")
                prompt = json.loads(row["sft_prompt"])
                self.assertIn(prompt["city"], ("北京", "上海", "深圳", "成都"))
                for key in ("start", "end"):
                    self.assertRegex(prompt[key], r"^\d+\.\d{6},\d+\.\d{6}$")


if __name__ == "__main__":
    unittest.main()
