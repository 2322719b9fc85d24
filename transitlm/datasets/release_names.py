"""The names of the training-data release (make_dataset.py): its files, their
columns and task ids -- the one home of these facts (issue 45); the names the
evaluation core reads too (the split files, the network files) come from
transitlm.evaluation.catalog.

Standard library only; Python 3.8+.
"""

from transitlm.evaluation.catalog import (RELEASE_LINE_FILE, RELEASE_PREFIX, RELEASE_SPLITS,
                                          RELEASE_STATION_FILE)

# The SFT splits: (kind, benchmark number) -> file name per split.
TASKS = (("b1", "benchmark1"), ("b2", "benchmark2"), ("b3", "benchmark3"))
GENERAL = ("general", "general-benchmark1")     # the general benchmark: a test file only
SPLITS = RELEASE_SPLITS
PREFIX = RELEASE_PREFIX

SFT_COLUMNS = ["task_id", "req_type", "adcode", "indexid", "system_prompt", "sft_prompt",
               "sft_label"]
CORPUS_COLUMNS = ["id", "kind", "adcode", "text", "record"]
CORPUS_KINDS = ("session", "line", "station")

STATION_INFO = RELEASE_STATION_FILE     # the names the evaluation core knows too
LINE_INFO = RELEASE_LINE_FILE
STATION_IDS = "transit-lm-station-ids.json"
NETWORK_JSON = "network.json"
CORPUS_FOLDER = "transit-lm-cpt-corpus"
CORPUS_PART = "transit-lm-cpt-corpus-part%03d.csv"
MAX_PARTS = 999                                  # three-digit part numbers
SFT_FOLDER = "sft"
CARD = "README.md"
MANIFEST = "dataset.json"
MANIFEST_MARKER = "transitlm_dataset"            # dataset.json's first key; its value the schema
MANIFEST_SCHEMA = 1
TEMP_PREFIX = ".transitlm-"                      # temporaries (transitlm.io.files.TEMP_PREFIX)
HOLDOUT_CACHE_PREFIX = TEMP_PREFIX + "holdout-"  # --parts runs' hold-out ...
HOLDOUT_CACHE = HOLDOUT_CACHE_PREFIX + "%s.json"  # ... named by the settings' key


def task_id(name, split):
    """The task_id column: "benchmark1-train", "general-benchmark1-test"."""
    return "%s-%s" % (name, split)


def split_file(name, split):
    """transit-lm-benchmark1-train.csv, transit-lm-general-benchmark1-test.csv."""
    return "%s%s-%s.csv" % (PREFIX, name, split)


def sft_jsonl(name, split):
    """sft/benchmark1-train.jsonl (a path relative to the release folder)."""
    return "%s/%s-%s.jsonl" % (SFT_FOLDER, name, split)


def corpus_part(number):
    """transit-lm-cpt-corpus/transit-lm-cpt-corpus-part001.csv (number from 1)."""
    return "%s/%s" % (CORPUS_FOLDER, CORPUS_PART % number)


def split_files():
    """(kind, name, split, relative path) of every SFT CSV, in the release's order."""
    out = []
    for kind, name in TASKS:
        for split in SPLITS:
            out.append((kind, name, split, split_file(name, split)))
    out.append((GENERAL[0], GENERAL[1], "test", split_file(GENERAL[1], "test")))
    return out


def top_level_names():
    """Every name the release may hold at its top (files and folders)."""
    names = {path for _, _, _, path in split_files()}
    names.update((STATION_INFO, LINE_INFO, STATION_IDS, NETWORK_JSON, CORPUS_FOLDER,
                  SFT_FOLDER, CARD, MANIFEST))
    return names
