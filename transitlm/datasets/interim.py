"""INTERIM stand-in for the "corpus" helper's modules (corpus_texts.py,
statistics.py, card.py; see the helpers' contract), so make_dataset.py runs
and is tested before they are merged.  corpus.py imports the real modules
when they exist and this one only otherwise; delete this file once they are
merged.  Same functions and signatures as the contract; plain texts.

Standard library only; Python 3.8+.
"""

import json

from transitlm.networks.benchmark_builder import with_plausible_access
from transitlm.networks.router import route_json


class _Ends(object):
    def __init__(self, origin, dest):
        self.origin, self.dest = origin, dest


def _point(point):
    return "%.6f,%.6f" % point


# --- corpus_texts ----------------------------------------------------------

def session_entry(net, city, origin, dest, routes, rng, lang="zh", places=None):
    labels = [with_plausible_access(net, _Ends(origin, dest), r, route_json(net, r, rng, tag=True))
              for r in routes]
    record = {"city": city, "start": _point(origin), "end": _point(dest), "routes": labels}
    lines = ["%s %s -> %s" % (city, record["start"], record["end"])]
    for k, (route, label) in enumerate(zip(routes, labels)):
        lines.append("route %d %s %s" % (k + 1, label["route_tag"], json.dumps(label, ensure_ascii=False)))
        for ld_id, i, j in route.legs:
            ld = net.linedirs[ld_id]
            for s in (ld.stops[i], ld.stops[j]):
                lines.append("  %s %s %.6f,%.6f" % (net.ids[s], net.names[s], net.lng[s], net.lat[s]))
    return "\n".join(lines), record


def read_line_service(folder):
    return {}


def line_entries(net, lang="zh", service=None):
    for ld in net.linedirs:
        ids = [net.ids[s] for s in ld.stops]
        text = "%s: %s" % (ld.name, " ".join("%s %s" % (net.ids[s], net.names[s]) for s in ld.stops))
        yield text, {"line_name": ld.name, "station_ids": ids}


def station_entries(net, lang):
    serving = {}
    for ld in net.linedirs:
        for s in ld.stops:
            serving.setdefault(s, []).append(ld.name)
    for s, stop_id in enumerate(net.ids):
        lines = serving.get(s, [])
        text = "%s %s %.6f,%.6f: %s" % (stop_id, net.names[s], net.lng[s], net.lat[s], ", ".join(lines))
        yield text, {"stop_id": stop_id, "station_name": net.names[s], "lines": lines}


def text_states_record(kind, text, record):
    if kind == "session":
        wanted = [record["start"], record["end"]]
        for route in record["routes"]:
            wanted += route["line_sequence"] + [s for s in route["station_sequence"] if s != "【换乘】"]
    elif kind == "line":
        wanted = [record["line_name"]] + record["station_ids"]
    else:
        wanted = [record["stop_id"], record["station_name"]] + record["lines"]
    missing = [w for w in wanted if w not in text]
    return (not missing, "states its record" if not missing else "does not state %s" % missing[0])


def record_matches_network(kind, record, net):
    return True, "the record agrees with the network"


# --- statistics ------------------------------------------------------------

class DatasetStatistics(object):
    def __init__(self):
        self.rows = {}
        self.records = {}
        self.characters = 0
        self.leakage = {}

    def add_sft_row(self, task, req_type, label):
        self.rows[task] = self.rows.get(task, 0) + 1

    def add_corpus_record(self, kind, text, record):
        self.records[kind] = self.records.get(kind, 0) + 1
        self.characters += len(text)

    def add_network(self, city, adcode, stations, lines):
        pass

    def set_leakage(self, figures):
        self.leakage = figures

    def as_json(self):
        return {"rows": dict(sorted(self.rows.items())),
                "corpus_records": dict(sorted(self.records.items())),
                "corpus_characters": self.characters, "leakage": self.leakage}


# --- card ------------------------------------------------------------------

CONFIGS = (("benchmark1", (("train", "transit-lm-benchmark1-train.csv"),
                           ("test", "transit-lm-benchmark1-test.csv"))),
           ("benchmark2", (("train", "transit-lm-benchmark2-train.csv"),
                           ("test", "transit-lm-benchmark2-test.csv"))),
           ("benchmark3", (("train", "transit-lm-benchmark3-train.csv"),
                           ("test", "transit-lm-benchmark3-test.csv"))),
           ("general", (("test", "transit-lm-general-benchmark1-test.csv"),)),
           ("cpt", (("train", "transit-lm-cpt-corpus/*.csv"),)))


def card_text(manifest):
    lines = ["---", "configs:"]
    for name, files in CONFIGS:
        lines += ["- config_name: %s" % name, "  data_files:"]
        for split, path in files:
            lines += ["  - split: %s" % split, "    path: %s" % path]
    lines += ["---", "", "# TransitLM training data", "",
              "```json", json.dumps(manifest.get("statistics", {}), indent=1, sort_keys=True),
              "```", ""]
    return "\n".join(lines)


def parse_card_configs(text):
    configs = []
    body = text.split("---\n")[1]
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("- config_name:"):
            configs.append({"config_name": line.split(":", 1)[1].strip(), "data_files": []})
        elif line.startswith("- split:"):
            configs[-1]["data_files"].append({"split": line.split(":", 1)[1].strip()})
        elif line.startswith("path:"):
            configs[-1]["data_files"][-1]["path"] = line.split(":", 1)[1].strip()
    return configs
