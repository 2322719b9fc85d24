"""transitlm/datasets/card.py: the dataset card's YAML configs name the
release's files (read back by the card's own stdlib reader, and resolved to
files in a folder), outside text cannot break the header or the Markdown, and
the prose states the leakage rules, the counts checked, the statistics and the
cost factor."""

import fnmatch
import json
import os
import tempfile
import unittest

from tests import support  # noqa: F401  (puts the repository on sys.path)
from transitlm.datasets import card
from transitlm.datasets.statistics import DatasetStatistics

SFT_FILES = ["transit-lm-benchmark%d-%s.csv" % (n, split) for n in (1, 2, 3) for split in ("train", "test")]
GENERAL = "transit-lm-general-benchmark1-test.csv"
PARTS = ["transit-lm-cpt-corpus/transit-lm-cpt-corpus-part%03d.csv" % n for n in (1, 2, 3)]
EXPECTED = {
    "benchmark1": [("train", "transit-lm-benchmark1-train.csv"), ("test", "transit-lm-benchmark1-test.csv")],
    "benchmark2": [("train", "transit-lm-benchmark2-train.csv"), ("test", "transit-lm-benchmark2-test.csv")],
    "benchmark3": [("train", "transit-lm-benchmark3-train.csv"), ("test", "transit-lm-benchmark3-test.csv")],
    "general": [("test", GENERAL)],
    "cpt": [("train", "transit-lm-cpt-corpus/*.csv")],
}


def manifest(files=None, city="New York", lang="zh"):
    stats = DatasetStatistics()
    stats.add_sft_row("benchmark1-train", 0, {"line_sequence": ["地铁A(x--y)"], "total_distance": "12.3公里"})
    stats.add_sft_row("benchmark2-train", 5, {"line_sequence": ["M15(a--b)"], "total_distance": "850米"})
    stats.add_corpus_record("station", "站点：x", {})
    stats.add_corpus_record("session", "城市：y", {"routes": [{"line_sequence": ["M15(a--b)"]}] * 3})
    stats.add_network(city, "0", 496, 50)
    stats.set_leakage({"test_pairs_held_out": 4321, "train_draws_refused": 17})
    names = SFT_FILES + [GENERAL] + PARTS + ["transit-lm-station-info.csv"] if files is None else files
    return {"transitlm_dataset": 1, "version": "9.9.9",
            "settings": {"train": 30000, "test": 10000, "corpus": 5000, "part_size": 100000, "seed": 7,
                         "lang": lang},
            "networks": [{"city": city, "adcode": "0", "station_info_sha256": "ab" * 32,
                          "line_info_sha256": "cd" * 32}],
            "files": {name: {"rows": 10 + n, "sha256": "%064x" % n} for n, name in enumerate(names)},
            "statistics": stats.as_json(), "leakage": stats.as_json()["leakage"],
            "candidate_cost_factor": 1.5}


def configs_by_name(text):
    return {c["config_name"]: [(f["split"], f["path"]) for f in c["data_files"]]
            for c in card.parse_card_configs(text)}


class CardConfigsTest(unittest.TestCase):

    def test_configs_name_the_release_files(self):
        text = card.card_text(manifest())
        self.assertEqual(configs_by_name(text), EXPECTED)
        configs = card.parse_card_configs(text)
        self.assertEqual([c["config_name"] for c in configs if c.get("default")], ["benchmark1"])
        for config in configs:
            columns = [f["name"] for f in config["features"]]
            if config["config_name"] == "cpt":
                self.assertEqual(columns, ["id", "kind", "adcode", "text", "record"])
            else:
                self.assertEqual(columns, ["task_id", "req_type", "adcode", "indexid", "system_prompt",
                                           "sft_prompt", "sft_label"])
            self.assertEqual(dict((f["name"], f["dtype"]) for f in config["features"])["adcode"], "string")
            self.assertIs(config["na_filter"], False)

    def test_configs_resolve_to_files_in_a_folder(self):
        """Every split's path (the corpus's a glob) matches files that exist, and
        every data file of the folder belongs to exactly one split."""
        with tempfile.TemporaryDirectory() as out:
            data = SFT_FILES + [GENERAL] + PARTS
            for name in data + ["transit-lm-station-info.csv", "dataset.json"]:
                os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
                with open(os.path.join(out, name), "w") as handle:
                    handle.write("x\n")
            existing = sorted(os.path.relpath(os.path.join(r, f), out).replace(os.sep, "/")
                              for r, _, fs in os.walk(out) for f in fs)
            claimed = []
            for config in card.parse_card_configs(card.card_text(manifest())):
                for item in config["data_files"]:
                    matched = [f for f in existing if fnmatch.fnmatch(f, item["path"])]
                    self.assertTrue(matched, item)
                    claimed += matched
            self.assertEqual(sorted(claimed), sorted(data))

    def test_only_listed_files_get_a_config(self):
        text = card.card_text(manifest(files=["transit-lm-benchmark2-train.csv", GENERAL]))
        self.assertEqual(configs_by_name(text), {"benchmark2": [("train", "transit-lm-benchmark2-train.csv")],
                                                 "general": [("test", GENERAL)]})
        self.assertEqual([c["config_name"] for c in card.parse_card_configs(text) if c.get("default")],
                         ["benchmark2"])
        self.assertEqual(configs_by_name(card.card_text(manifest(files=[]))), EXPECTED)

    def test_deterministic(self):
        self.assertEqual(card.card_text(manifest()), card.card_text(manifest()))

    def test_outside_text_cannot_break_the_header_or_the_page(self):
        city = 'Springfield"\n---\nconfigs:\n- config_name: evil | *x* <b>\u2028'
        text = card.card_text(manifest(city=city))
        self.assertEqual(configs_by_name(text), EXPECTED)
        header = card.header_lines(text)
        pretty = [line for line in header if line.startswith("pretty_name: ")]
        self.assertEqual(len(pretty), 1)
        self.assertIn(city, json.loads(pretty[0][len("pretty_name: "):]))
        title = [line for line in text.split("\n") if line.startswith("# ")]
        self.assertEqual(len(title), 1)
        self.assertNotIn("<b>", title[0])
        self.assertIn("\\|", title[0])
        self.assertNotIn("\u2028", text.split("\n---\n", 1)[1])

    def test_the_reader_refuses_what_the_writer_never_writes(self):
        good = card.card_text(manifest())
        bad = [("no header", "# title\n"),
               ("unclosed", "---\nconfigs:\n- config_name: a\n"),
               ("no configs", "---\nlicense: other\n---\n"),
               ("stray line", good.replace("  data_files:\n", "  data_files:\n  oops: 1\n", 1)),
               ("split without path", good.replace('    path: "transit-lm-benchmark1-train.csv"\n', "", 1)),
               ("bad quoting", good.replace('"transit-lm-benchmark1-test.csv"', '"transit-lm-b', 1)),
               ("feature without dtype", good.replace("    dtype: int64\n", "", 1))]
        for what, text in bad:
            with self.assertRaises(card.CardError, msg=what):
                card.parse_card_configs(text)


class CardProseTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.text = card.card_text(manifest())

    def test_states_the_leakage_rules_and_counts(self):
        for rule in card.LEAKAGE_RULES:
            self.assertIn(rule, self.text)
        self.assertIn("500 m", self.text)
        self.assertIn("| test\\_pairs\\_held\\_out | 4321 |", self.text)
        self.assertIn("| train\\_draws\\_refused | 17 |", self.text)

    def test_states_the_statistics_settings_and_cost_factor(self):
        for fact in ("496 stations, 50 line directions, 2 SFT rows", "| benchmark1-train | 1 | subway: 1 (100%)",
                     "5: 1 (100%)", "| session | 1 |", "| all | 2 |", "3: 1 (100%)", "1.5 times the best",
                     "| seed | 7 |", "| part\\_size | 100000 |", "| New York | 0 | 496 | 50 | abababababababab |",
                     "TransitLM evaluator 9.9.9", card.LICENCE_NOTE, 'load_dataset("path/to/folder", "cpt")'):
            self.assertIn(fact, self.text)

    def test_lists_every_file_with_rows_and_hash(self):
        for name, entry in manifest()["files"].items():
            self.assertIn("| `%s` | %d | %s |" % (name, entry["rows"], entry["sha256"][:16]), self.text)

    def test_language_in_the_header(self):
        self.assertIn('language:\n- "en"', card.card_text(manifest(lang="en")))
        self.assertIn('language:\n- "zh"', self.text)


if __name__ == "__main__":
    unittest.main()
