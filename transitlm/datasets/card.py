"""The dataset card (README.md of a make_dataset.py folder) and a reader of its header.

``card_text(manifest)`` writes the card from the manifest (dataset.json): a
YAML header whose ``configs`` list lets the Hugging Face ``datasets`` library
load the folder by configuration --

    load_dataset(OUT, "benchmark1")  -> train and test splits (likewise benchmark2, benchmark3)
    load_dataset(OUT, "general")     -> test
    load_dataset(OUT, "cpt")         -> train: every corpus part (a glob)

-- then the prose: what the folder holds, how it was built (settings,
networks, the split rule), the leakage rules and the counts checked, the
statistics (transitlm.datasets.statistics), the candidate routes' cost
factor, and the licence note.  A configuration is written only for files the
manifest lists.  Every outside text (city names, settings) is quoted in the
header as a JSON string (YAML reads a double-quoted scalar's JSON escapes) and
escaped in the Markdown.

``parse_card_configs(text)`` reads the header's ``configs`` back with the
standard library -- the subset of YAML card_text writes, nothing more -- for
the tests and for the builder's check that the configs resolve to files.
"""

import json
import re

from transitlm.datasets import release_names as names

# The configurations and their files (names from release_names.py, their one home).
CORPUS_GLOB = names.CORPUS_FOLDER + "/*.csv"
CONFIGS = tuple((name, tuple((split, names.split_file(name, split)) for split in names.SPLITS))
                for _, name in names.TASKS) + (
    ("general", (("test", names.split_file(names.GENERAL[1], "test")),)),
    ("cpt", (("train", CORPUS_GLOB),)),
)
DEFAULT_CONFIG = "benchmark1"
# The files' columns and the types datasets gives them: stated, so that an
# adcode such as "010" stays text (pandas would read it as the number 10).
SFT_FEATURES = (("task_id", "string"), ("req_type", "int64"), ("adcode", "string"), ("indexid", "string"),
                ("system_prompt", "string"), ("sft_prompt", "string"), ("sft_label", "string"))
CORPUS_FEATURES = (("id", "string"), ("kind", "string"), ("adcode", "string"), ("text", "string"),
                   ("record", "string"))
LICENCE_NOTE = (
    "The networks come from their GTFS feeds, and this data is derived from them: it carries "
    "each feed's licence and terms (see the feed publisher's). Check them before you publish "
    "the folder or a model trained on it.")
LEAKAGE_RULES = (
    "The test sets are drawn first; what they hold out is excluded from everything else.",
    "Pairs: the (first boarding station, last alighting station) pair of the first route of every "
    "test label, in either direction, in any of the four test files, is not the pair of any "
    "train row's first route, nor of any route of a corpus session.",
    "Ends: no train row or corpus session starts within 500 m of a test trip's start and ends "
    "within 500 m of its end, in either direction.",
)


class CardError(ValueError):
    """A card header parse_card_configs cannot read (the message says where)."""


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def yaml_string(text):
    """A YAML double-quoted scalar: JSON's escapes are YAML's."""
    return json.dumps(str(text))


def md(text):
    """Outside text for a Markdown table cell or line: one line, Markdown's
    special characters escaped."""
    text = " ".join(str(text).split())
    return re.sub(r"([\\`*_{}\[\]()<>#+!|~])", r"\\\1", text)


def configs_of(files):
    """[(config name, [(split, path)])] of the configurations whose files the
    manifest lists (every one when it lists none)."""
    out = []
    for name, splits in CONFIGS:
        kept = [(split, path) for split, path in splits
                if not files or (path in files if path != CORPUS_GLOB
                                 else any(f.startswith(names.CORPUS_FOLDER + "/") for f in files))]
        if kept:
            out.append((name, kept))
    return out


def header(manifest):
    networks = manifest.get("networks") or []
    cities = ", ".join(str(n.get("city", "")) for n in networks) or "any city"
    lang = (manifest.get("settings") or {}).get("lang", "zh")
    lines = ["---",
             "pretty_name: %s" % yaml_string("TransitLM route planning data (%s)" % cities),
             "language:",
             "- %s" % yaml_string(lang if lang in ("zh", "en") else "zh"),
             "license: other",
             "task_categories:",
             "- text-generation",
             "tags:",
             "- transit",
             "- route-planning",
             "- gtfs",
             "configs:"]
    configs = configs_of(manifest.get("files") or {})
    names = [name for name, _ in configs]
    default = DEFAULT_CONFIG if DEFAULT_CONFIG in names else (names[0] if names else None)
    for name, splits in configs:
        lines.append("- config_name: %s" % name)
        if name == default:
            lines.append("  default: true")
        # an empty cell stays "" (not a missing value); the columns keep their types
        lines.append("  na_filter: false")
        lines.append("  features:")
        for column, dtype in (CORPUS_FEATURES if name == "cpt" else SFT_FEATURES):
            lines.append("  - name: %s" % column)
            lines.append("    dtype: %s" % dtype)
        lines.append("  data_files:")
        for split, path in splits:
            lines.append("  - split: %s" % split)
            lines.append("    path: %s" % yaml_string(path))
    lines.append("---")
    return lines, configs


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    return out


def counts_line(counter):
    total = sum(counter.values())
    parts = ["%s: %d (%.0f%%)" % (md(k), n, 100.0 * n / total) for k, n in counter.items() if n]
    return ", ".join(parts) if parts else "none"


def card_text(manifest):
    """The README.md of a dataset folder, from its manifest (dataset.json's dict)."""
    lines, configs = header(manifest)
    stats = manifest.get("statistics") or {}
    settings = manifest.get("settings") or {}
    networks = manifest.get("networks") or []
    files = manifest.get("files") or {}
    cities = ", ".join(md(n.get("city", "")) for n in networks) or "no network"
    lines += ["", "# TransitLM route planning data: %s" % cities, "",
              "Training and test data for route-planning language models, in the layout of the "
              "TransitLM release, built by `data/make_dataset.py` (TransitLM evaluator %s) from "
              "GTFS networks. The labels come from the builder's exact router, and "
              "every route of every label and corpus session is reachable, grounded and plausible "
              "on this folder's own `transit-lm-station-info.csv`." % md(manifest.get("version", "?")),
              "",
              "- **SFT splits**: `transit-lm-benchmark{1,2,3}-{train,test}.csv` and "
              "`transit-lm-general-benchmark1-test.csv`, the release's seven columns "
              "(`task_id, req_type, adcode, indexid, system_prompt, sft_prompt, sft_label`); "
              "`sft/*.jsonl`, the training rows in TRL's conversational prompt-completion form.",
              "- **Pre-training corpus**: `%s/`, columns `id, kind, adcode, text, record`: trip "
              "sessions (up to five candidate routes, the best first), one record per line "
              "direction and one per station; `record` is the JSON of the facts the text states."
              % names.CORPUS_FOLDER,
              "- **Network and vocabulary**: `transit-lm-station-info.csv`, `transit-lm-line-info.csv`, "
              "`transit-lm-station-ids.json` (every station id, to add to a tokenizer), `network.json`.",
              "- **Manifest**: `dataset.json` (settings, version, each network's hash, each file's "
              "rows and SHA-256).", "",
              "## Loading", "", "```python", "from datasets import load_dataset", ""]
    for name, splits in configs:
        lines.append('load_dataset("path/to/folder", "%s")  # %s' % (name, ", ".join(s for s, _ in splits)))
    lines += ["```", "",
              "Evaluate on the test files with `TRANSITLM_DATA=path/to/folder` or "
              "`--station_info path/to/folder/transit-lm-station-info.csv`; the recipe from "
              "pre-training to comparison is the project's docs/training-data.md.", ""]
    lines += ["## How it was built", ""]
    if settings:
        lines += table(("setting", "value"), [(md(k), md(json.dumps(settings[k], ensure_ascii=False)))
                                             for k in sorted(settings)]) + [""]
    if networks:
        lines += table(("city", "adcode", "stations", "line directions", "station file SHA-256"),
                       [(md(n.get("city", "")), md(n.get("adcode", "")), network_figure(stats, n, "stations"),
                         network_figure(stats, n, "lines"), md(str(n.get("station_info_sha256", ""))[:16]))
                        for n in networks]) + [""]
    if manifest.get("split_rule"):
        lines += ["Rows across cities: %s" % md(manifest["split_rule"]), ""]
    if manifest.get("candidate_cost_factor") is not None:
        lines += ["Candidate routes of a session: the best route (the label of that trip), then "
                  "routes with other line sets, ordered by cost, at most five, none costing more "
                  "than %s times the best (`candidate_cost_factor` in dataset.json)."
                  % md(manifest["candidate_cost_factor"]), ""]
    groups = manifest.get("origin_groups")
    if isinstance(groups, dict) and groups:
        lines += ["Sessions share origin points: in each area, groups of this many sessions "
                  "start from one point, each with a destination of its own "
                  "(`origin_groups` in dataset.json): %s."
                  % ", ".join("%s %s" % (md(code), md(groups[code])) for code in sorted(groups)), ""]
    lines += ["## Leakage", ""] + ["- %s" % rule for rule in LEAKAGE_RULES] + [""]
    leakage = manifest.get("leakage") or stats.get("leakage") or {}
    if leakage:
        lines += table(("checked", "count"), [(md(k), md(leakage[k])) for k in sorted(leakage)]) + [""]
    lines += statistics_lines(stats)
    if files:
        lines += ["## Files", ""] + table(
            ("file", "rows", "SHA-256 (first 16)"),
            [("`%s`" % path.replace("`", ""), files[path].get("rows", ""), md(str(files[path].get("sha256", ""))[:16]))
             for path in sorted(files)]) + [""]
    lines += ["## Licence", "", LICENCE_NOTE, ""]
    return "\n".join(lines)


def network_figure(stats, network, key):
    for entry in stats.get("networks") or ():
        if str(entry.get("adcode")) == str(network.get("adcode")):
            return entry.get(key, "")
    return network.get(key, "")


def statistics_lines(stats):
    if not stats:
        return []
    lines = ["## Statistics", ""]
    lines.append("%s stations, %s line directions, %s SFT rows." % (
        stats.get("stations", 0), stats.get("lines", 0), stats.get("sft_rows", 0)))
    lines.append("")
    sft = stats.get("sft") or {}
    if sft:
        lines += table(("file (task_id)", "rows", "route types", "distance", "transfers"),
                       [(md(task), e["rows"], counts_line(e["route_types"]), counts_line(e["distance_bands"]),
                         counts_line(e["transfers"])) for task, e in sorted(sft.items())]) + [""]
        prefs = {task: e["req_types"] for task, e in sft.items() if set(e["req_types"]) - {"0"}}
        for task in sorted(prefs):
            lines += ["Preferences (req_type) of %s: %s." % (md(task), counts_line(prefs[task])), ""]
    corpus = stats.get("corpus") or {}
    if corpus:
        kinds = corpus.get("kinds") or {}
        lines += table(("corpus records", "records", "characters"),
                       [(md(k), e["records"], e["characters"]) for k, e in kinds.items()]
                       + [("all", corpus.get("records", 0), corpus.get("characters", 0))]) + [""]
        if any(corpus.get("candidates_per_session", {}).values()):
            lines += ["Candidate routes per session: %s. First routes: %s." % (
                counts_line(corpus["candidates_per_session"]),
                counts_line(corpus.get("session_route_types", {}))), ""]
    return lines


# ---------------------------------------------------------------------------
# Reading (the subset card_text writes)
# ---------------------------------------------------------------------------

def scalar(value, where):
    value = value.strip()
    if value.startswith('"'):
        try:
            return json.loads(value)
        except ValueError:
            raise CardError("%s: %s is not a quoted string" % (where, value))
    return value


def header_lines(text):
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        raise CardError("the card does not begin with a YAML header (---)")
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r") == "---":
            return [line.rstrip("\r") for line in lines[1:end]]
    raise CardError("the card's YAML header has no closing ---")


def parse_card_configs(text):
    """The header's configs -> [{"config_name", "data_files": [{"split", "path"}]}]
    (plus "default": True, "na_filter" and "features": [{"name", "dtype"}] where
    the header has them); CardError when the header is not the subset
    card_text writes."""
    lines = header_lines(text)
    try:
        at = lines.index("configs:")
    except ValueError:
        raise CardError("the card's header has no configs")
    configs, current, item, section = [], None, None, None
    for n, line in enumerate(lines[at + 1:], at + 2):
        where = "header line %d" % n
        if not line.startswith(("-", " ")):
            break                                        # the next top-level key
        if line.startswith("- config_name:"):
            current = {"config_name": scalar(line[len("- config_name:"):], where), "data_files": []}
            configs.append(current)
            item = section = None
        elif current is None:
            raise CardError("%s: %r comes before any config_name" % (where, line))
        elif line in ("  data_files:", "  features:"):
            section = line.strip()[:-1]
            current.setdefault(section, [])
            item = None
        elif line.startswith("  default:"):
            current["default"] = scalar(line[len("  default:"):], where) == "true"
        elif line.startswith("  na_filter:"):
            current["na_filter"] = scalar(line[len("  na_filter:"):], where) == "true"
        elif section == "data_files" and line.startswith("  - split:"):
            item = {"split": scalar(line[len("  - split:"):], where)}
            current["data_files"].append(item)
        elif section == "data_files" and line.startswith("    path:") and item is not None and "path" not in item:
            item["path"] = scalar(line[len("    path:"):], where)
        elif section == "features" and line.startswith("  - name:"):
            item = {"name": scalar(line[len("  - name:"):], where)}
            current["features"].append(item)
        elif section == "features" and line.startswith("    dtype:") and item is not None and "dtype" not in item:
            item["dtype"] = scalar(line[len("    dtype:"):], where)
        else:
            raise CardError("%s: %r is not part of a config" % (where, line))
    for config in configs:
        if not config["data_files"] or any("path" not in f for f in config["data_files"]):
            raise CardError("config %r has a split without a path" % config["config_name"])
        if any("dtype" not in f for f in config.get("features", ())):
            raise CardError("config %r has a feature without a dtype" % config["config_name"])
    return configs
