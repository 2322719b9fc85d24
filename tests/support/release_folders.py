"""A folder laid out as the TransitLM release (and as data/make_dataset.py
writes it), made from the bundled examples: the tools that read a release
folder are tested on it.

Its files carry the release's names and columns (task_id, req_type, adcode,
indexid, system_prompt, sft_prompt, sft_label); the station and line files
are the bundled ones joined with a second, small network (the joint files of
a dataset built on several networks), so they differ from the bundled files:
a tool that reads them rather than the bundled ones is told apart.
``network.json`` names them, as the builder writes it.  The release's names
are hard-coded here on purpose: the tests hold the code to them.
"""

import csv
import json
import os

from tests.support import REPO

DATA = os.path.join(REPO, "data")
COLUMNS = ("task_id", "req_type", "adcode", "indexid", "system_prompt", "sft_prompt",
           "sft_label")
B1, B2, B3 = ("benchmark1_single_route_example.csv", "benchmark2_personalized_example.csv",
              "benchmark3_diversity_example.csv")
# (release file, task_id, bundled example) of every SFT file of the release.
SFT_FILES = (
    ("transit-lm-benchmark1-train.csv", "benchmark1-train", B1),
    ("transit-lm-benchmark1-test.csv", "benchmark1-test", B1),
    ("transit-lm-benchmark2-train.csv", "benchmark2-train", B2),
    ("transit-lm-benchmark2-test.csv", "benchmark2-test", B2),
    ("transit-lm-benchmark3-train.csv", "benchmark3-train", B3),
    ("transit-lm-benchmark3-test.csv", "benchmark3-test", B3),
    ("transit-lm-general-benchmark1-test.csv", "general-benchmark1-test",
     "general_llm_example.csv"),
)
# The test file of each benchmark, the catalogue's names.
TEST_FILES = {"single_route": "transit-lm-benchmark1-test.csv",
              "personalized": "transit-lm-benchmark2-test.csv",
              "diversity": "transit-lm-benchmark3-test.csv",
              "general_llm": "transit-lm-general-benchmark1-test.csv"}
STATION_FILE = "transit-lm-station-info.csv"
LINE_FILE = "transit-lm-line-info.csv"
ADCODE = "110000"
# The second network of the joint files: three stops on one line, far away.
SECOND_CITY = "440300"
SECOND_STOPS = (("sz-1", 114.05, 22.54, "福田口"), ("sz-2", 114.06, 22.54, "会展北"),
                ("sz-3", 114.07, 22.54, "岗厦东"))


def _rows(example):
    with open(os.path.join(DATA, example), encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def write_sft_file(path, task_id, example):
    """The bundled example ``example`` in the release's columns, each indexid
    made unique across the folder by its task id."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for row in _rows(example):
            writer.writerow([task_id, row.get("req_type") or "0", ADCODE,
                             "%s-%s" % (task_id, row["index_id"]), row["system_prompt"],
                             row["sft_prompt"], row["sft_label"]])


def _joint_files(folder):
    """The bundled station and line files with a second network after them."""
    station = os.path.join(folder, STATION_FILE)
    with open(os.path.join(DATA, "station_info.csv"), encoding="utf-8", newline="") as src:
        text = src.read()
    with open(station, "w", encoding="utf-8", newline="") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")
        writer = csv.writer(handle, lineterminator="\n")
        for index, (stop, lng, lat, name) in enumerate(SECOND_STOPS):
            hops = [other[0] for other in SECOND_STOPS[max(index - 1, 0):index + 2]
                    if other[0] != stop]
            writer.writerow([stop, SECOND_CITY, "%.6f" % lng, "%.6f" % lat,
                             json.dumps(hops), name])
    line = os.path.join(folder, LINE_FILE)
    with open(os.path.join(DATA, "line_info.csv"), encoding="utf-8", newline="") as src:
        text = src.read()
    with open(line, "w", encoding="utf-8", newline="") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")
        stops = [{"station_name": name, "stop_id": stop, "x": lng, "y": lat,
                  "station_id": stop[3:]} for stop, lng, lat, name in SECOND_STOPS]
        csv.writer(handle, lineterminator="\n").writerow(
            [SECOND_CITY, "地铁2号线(福田口--岗厦东)", json.dumps(stops, ensure_ascii=False)])
    return station, line


def make_release_folder(folder, files=None, record=True):
    """Write a release-like folder into ``folder`` (created if missing):
    the SFT files named in ``files`` (default: all seven), the joint station
    and line files, and (``record``) network.json naming them -> folder."""
    from transitlm.evaluation.network_check import NETWORK_RECORD, network_record
    os.makedirs(folder, exist_ok=True)
    for name, task_id, example in SFT_FILES:
        if files is None or name in files:
            write_sft_file(os.path.join(folder, name), task_id, example)
    station, line = _joint_files(folder)
    if record:
        with open(os.path.join(folder, NETWORK_RECORD), "w", encoding="utf-8") as handle:
            handle.write(network_record(station, line))
    return folder
