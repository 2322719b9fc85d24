"""The project's catalogue: where it lives, its benchmarks and its metrics.

One home for each fact several tools need: the repository and data folders;
the four benchmarks (name, titles, the scenario script that judges them, the
bundled example file, the release's task ids); the paper's ten metrics (label,
kind, meaning, which way is better); the network files' names; and the
names of the release's files (the published TransitLM release and the folder
data/make_dataset.py writes), recognised exactly (``release_file``).

Standard library only; Python 3.8+.
"""

import importlib
import os
import re
import sys

from common import InputError

# The repository root: the scenario scripts are loaded from there by name.
PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The bundled data: the demo network and the example test files.
DATA_DIR = os.path.join(PROJECT_DIR, "data")
DATA_ENV = "TRANSITLM_DATA"                  # a folder whose network files replace the bundled ones

# The release's files: the published TransitLM release and the folder
# data/make_dataset.py writes (docs/training-data.md) name them alike.
RELEASE_PREFIX = "transit-lm-"
RELEASE_SUFFIX = ".csv"
RELEASE_SPLITS = ("train", "test")
RELEASE_STATION_FILE = "transit-lm-station-info.csv"
RELEASE_LINE_FILE = "transit-lm-line-info.csv"
# The network files a data folder may hold, the bundled names first; a
# station file's line file is the one named alike (station_info.csv ->
# line_info.csv, transit-lm-station-info.csv -> transit-lm-line-info.csv).
STATION_FILE_NAMES = ("station_info.csv", RELEASE_STATION_FILE)
LINE_FILE_NAMES = ("line_info.csv", RELEASE_LINE_FILE)


def folder_file(folder, names):
    """The first of ``names`` that is a file in ``folder``, or None."""
    for name in names:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def default_data_file(names):
    """A data file from $TRANSITLM_DATA if it holds one, else the bundled one."""
    folder = os.environ.get(DATA_ENV)
    found = folder_file(folder, names) if folder else None
    return found or os.path.join(DATA_DIR, names[0])


def station_file(given=None):
    """The station file of a run: the one given, else $TRANSITLM_DATA's, else the bundled one."""
    return given or default_data_file(STATION_FILE_NAMES)


def partner_line_names(station_path):
    """LINE_FILE_NAMES in the order a line file is looked for beside
    ``station_path``: the one named like the station file first."""
    base = os.path.basename(station_path)
    own = [line for station, line in zip(STATION_FILE_NAMES, LINE_FILE_NAMES) if station == base]
    return tuple(own) + tuple(name for name in LINE_FILE_NAMES if name not in own)


def line_file(given, station_path, flag="--line_info"):
    """The line file of a run: the one given, else the one beside the station
    file in use (a line file belongs to its station file's network: the
    bundled line file is never paired with another network's stations).
    InputError when there is none beside it; ``flag`` names the option."""
    if given:
        return given
    beside = line_file_beside(station_path)
    if beside:
        return beside
    raise InputError("no line file beside the station file %s (looked for %s in its folder): "
                     "a line file belongs to its station file's network; give %s"
                     % (station_path, " and ".join(LINE_FILE_NAMES), flag))


def line_file_beside(station_path):
    """The line file in the station file's folder, the one named alike first
    (partner_line_names), or None."""
    return folder_file(os.path.dirname(os.path.abspath(station_path)),
                       partner_line_names(station_path)) or None


class BenchmarkInfo(object):
    """What the tools know of one benchmark.

    ``name``: the evaluators' name (report.json ``benchmark``, the folder of
    its script); ``title``: the heading of its text report; ``page_title``:
    the heading of its page; ``short_title`` and ``tag``: its column group
    and column tag in a comparison; ``script``/``class_name``: the scenario
    script's module and its Benchmark class; ``default_input``: the bundled
    example test file (in DATA_DIR); ``task_marker``: the release's name of
    the benchmark, which its ``task_id`` and file names hold (``benchmark1``
    in ``benchmark1-test`` and ``transit-lm-benchmark1-test.csv``;
    ``general-benchmark1`` for the general LLM); ``task_id``: the task id
    make_benchmark.py writes (``1``); ``file_kind``: what a message calls
    one of its test files (``a benchmark-1 file``); ``command``: its
    evaluator, as a user runs it (``single_route/evaluate.py``);
    ``release_splits``: the splits the release has a file of.
    """

    def __init__(self, name, title, page_title, short_title, tag, class_name, default_input,
                 task_marker, task_id, file_kind, release_splits=RELEASE_SPLITS):
        self.name = name
        self.title = title
        self.page_title = page_title
        self.short_title = short_title
        self.tag = tag
        self.script = name + ".evaluate"
        self.class_name = class_name
        self.default_input = default_input
        self.task_marker = task_marker
        self.task_id = task_id
        self.release_splits = release_splits
        self.file_kind = file_kind
        self.command = name + "/evaluate.py"

    def release_task_id(self, split):
        """The release's task_id of a split: ``benchmark1-test``."""
        return "%s-%s" % (self.task_marker, split)

    def release_file(self, split):
        """The release's file of a split: ``transit-lm-benchmark1-test.csv``."""
        return RELEASE_PREFIX + self.release_task_id(split) + RELEASE_SUFFIX

    def __repr__(self):
        return "BenchmarkInfo(%r)" % self.name


BENCHMARKS = (
    BenchmarkInfo("single_route", "TransitLM benchmark 1: single route",
                  "TransitLM benchmark 1: single route", "Benchmark 1: single route", "B1",
                  "SingleRoute", "benchmark1_single_route_example.csv", "benchmark1", "1",
                  "benchmark-1"),
    BenchmarkInfo("personalized", "TransitLM benchmark 2: personalized preferences",
                  "TransitLM benchmark 2: personalized preferences", "Benchmark 2: personalized",
                  "B2", "Personalized", "benchmark2_personalized_example.csv", "benchmark2", "2",
                  "benchmark-2"),
    BenchmarkInfo("diversity", "TransitLM benchmark 3: route diversity",
                  "TransitLM benchmark 3: route diversity", "Benchmark 3: diversity", "B3",
                  "Diversity", "benchmark3_diversity_example.csv", "benchmark3", "3",
                  "benchmark-3"),
    BenchmarkInfo("general_llm", "TransitLM general-purpose LLM evaluation",
                  "TransitLM general-purpose LLM", "General LLM", "GL",
                  "GeneralLLM", "general_llm_example.csv", "general-benchmark1", "general",
                  "general-LLM", ("test",)),
)
BENCHMARK_NAMES = tuple(info.name for info in BENCHMARKS)
_BY_NAME = {info.name: info for info in BENCHMARKS}

# The release's SFT files (transit-lm-benchmark1-train.csv, ...,
# transit-lm-general-benchmark1-test.csv), in the catalogue's order, and
# what each is: {file name: (benchmark, split)}.
RELEASE_FILES = {info.release_file(split): (info.name, split)
                 for info in BENCHMARKS for split in info.release_splits}
RELEASE_TEST_FILES = tuple(info.release_file("test") for info in BENCHMARKS)
# What names a benchmark exactly: the release's task ids and file names, the
# task ids make_benchmark.py writes, the evaluators' names.
_EXACT = dict([(info.release_task_id(split), info.name) for info in BENCHMARKS
               for split in info.release_splits]
              + [(name, benchmark) for name, (benchmark, _) in RELEASE_FILES.items()]
              + [(info.task_id, info.name) for info in BENCHMARKS]
              + [(info.name, info.name) for info in BENCHMARKS])


def _word_pattern(word):
    """A benchmark's word as a whole word (not inside a longer one:
    ``benchmark10``), "-", "_" or a space between its parts."""
    parts = re.split(r"[-_]", word)
    return re.compile(r"(?<![a-z0-9])%s(?![a-z0-9])" % "[-_ ]".join(map(re.escape, parts)))


# In any other name, the words that name a benchmark (its release name, its
# evaluator's name, "general"), longest first: "general-benchmark1" is the
# general LLM's before "benchmark1" is looked for.
_WORDS = tuple((_word_pattern(word), name) for word, name in sorted(
    set((word, info.name) for info in BENCHMARKS
        for word in (info.task_marker, info.name, info.name.split("_")[0]) if word != "single"),
    key=lambda pair: (-len(pair[0]), pair[0])))


def release_file(path):
    """(benchmark, split) of a release SFT file by its exact name
    (``transit-lm-general-benchmark1-test.csv`` -> ("general_llm", "test")),
    else None.  Only the release's own names count: nothing is guessed from
    part of a name."""
    return RELEASE_FILES.get(os.path.basename(str(path or "")).lower())


def benchmark_info(name):
    """The BenchmarkInfo of a benchmark name, or None (also for a value that
    is not a name, as a damaged report may hold)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


def release_test_files(folder):
    """[(benchmark, path)] of the release's test files ``folder`` holds, in the
    catalogue's order (transit-lm-benchmark1-test.csv, ...,
    transit-lm-general-benchmark1-test.csv)."""
    found = []
    for info in BENCHMARKS:
        path = os.path.join(folder, info.release_file("test"))
        if os.path.isfile(path):
            found.append((info.name, path))
    return found


def benchmark_of_task(text):
    """The benchmark a release's ``task_id`` (``benchmark2-train``,
    ``general-benchmark1-test``), the task id make_benchmark.py writes (``2``),
    an evaluator's name or a file's name names, or None.

    A release's task id or file name (``transit-lm-benchmark1-test.csv``) is
    recognised exactly.  Any other name (``benchmark1_single_route.csv``,
    ``my_diversity_rows.csv``, verl's ``transitlm/general_llm``) names the
    benchmark whose words it holds as whole words, the longest first --
    ``general-benchmark1`` is the general LLM's, never benchmark 1's -- and
    a name holding two benchmarks' words names none."""
    text = str(text or "").strip().lower()
    exact = _EXACT.get(text) or _EXACT.get(os.path.basename(text))
    if exact:
        return exact
    found = set()
    for pattern, name in _WORDS:
        if pattern.search(text):
            found.add(name)
            text = pattern.sub(" ", text)
    return found.pop() if len(found) == 1 else None


def load_benchmark(name):
    """The Benchmark (scenario script) of a benchmark name; InputError if unknown.

    The scenario scripts sit above the package: they are loaded here by the
    name the catalogue gives, never imported by it."""
    info = _BY_NAME.get(name)
    if info is None:
        raise InputError("unknown benchmark %r (known: %s)" % (name, ", ".join(BENCHMARK_NAMES)))
    if PROJECT_DIR not in sys.path:
        sys.path.insert(0, PROJECT_DIR)
    return getattr(importlib.import_module(info.script), info.class_name)()


class Metric(object):
    """One of the paper's metrics (report.json ``metrics``).

    ``kind``: ``rate`` (a fraction, shown in percent with 1 decimal),
    ``mean`` (a mean in 0..1, shown with 3 decimals) or ``pct`` (already in
    percent, shown with 2 decimals); ``benchmark``: the one benchmark that
    reports it (None: all of them).
    """

    DECIMALS = {"rate": 1, "pct": 2, "mean": 3}

    def __init__(self, key, label, kind, meaning, lower_is_better=False, benchmark=None):
        self.key = key
        self.label = label
        self.kind = kind
        self.meaning = meaning
        self.lower_is_better = lower_is_better
        self.benchmark = benchmark
        self.decimals = self.DECIMALS[kind]

    def text(self, value):
        """The value as the summary line shows it: '97.0%', '0.828', '1.33%'; '-' for None."""
        if value is None:
            return "-"
        if self.kind == "rate":
            return "%.1f%%" % (100.0 * value)
        if self.kind == "pct":
            return "%.2f%%" % value
        return "%.3f" % value

    def __repr__(self):
        return "Metric(%r)" % self.key


# In the paper's order (the summary line's).
METRICS = (
    Metric("conn", "Conn", "rate", "connectivity (Round 1 reachable)"),
    Metric("sg", "SG", "rate", "station grounding"),
    Metric("dp", "DP", "rate", "distance plausibility"),
    Metric("lo", "LO", "mean", "line overlap (mean line IoU)"),
    Metric("sso", "SSO", "mean", "station sequence overlap (mean station IoU)"),
    Metric("rem", "REM", "rate", "route exact match"),
    Metric("ea", "EA", "rate", "estimation accuracy"),
    Metric("mape", "MAPE", "pct", "mean absolute percentage error", lower_is_better=True),
    Metric("pc", "PC", "rate", "preference compliance", benchmark="personalized"),
    Metric("rd", "RD", "mean", "route diversity", benchmark="diversity"),
)
METRIC_KEYS = tuple(metric.key for metric in METRICS)
METRIC = {metric.key: metric for metric in METRICS}
LOWER_IS_BETTER = frozenset(metric.key for metric in METRICS if metric.lower_is_better)


def benchmark_metrics(name):
    """The metrics a benchmark reports (its report.json ``metrics``), in the paper's order."""
    return tuple(metric for metric in METRICS if metric.benchmark in (None, name))
