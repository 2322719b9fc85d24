"""The project's catalogue: where it lives, its benchmarks and its metrics.

One home for each fact several tools need: the repository and data folders;
the four benchmarks (name, titles, the scenario script that judges them, the
bundled example file, the release's task ids); the paper's ten metrics (label,
kind, meaning, which way is better); and the network files' names.

Standard library only; Python 3.8+.
"""

import importlib
import os
import sys

from common import InputError

# The repository root: the scenario scripts are loaded from there by name.
PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The bundled data: the demo network and the example test files.
DATA_DIR = os.path.join(PROJECT_DIR, "data")
DATA_ENV = "TRANSITLM_DATA"                  # a folder whose network files replace the bundled ones
STATION_FILE_NAMES = ("station_info.csv", "transit-lm-station-info.csv")
LINE_FILE_NAMES = ("line_info.csv", "transit-lm-line-info.csv")


def default_data_file(names):
    """A data file from $TRANSITLM_DATA if it holds one, else the bundled one."""
    folder = os.environ.get(DATA_ENV)
    if folder:
        for name in names:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
    return os.path.join(DATA_DIR, names[0])


def station_file(given=None):
    """The station file of a run: the one given, else $TRANSITLM_DATA's, else the bundled one."""
    return given or default_data_file(STATION_FILE_NAMES)


def line_file(given, station_path, flag="--line_info"):
    """The line file of a run: the one given, else the one beside the station
    file in use (a line file belongs to its station file's network: the
    bundled line file is never paired with another network's stations).
    InputError when there is none beside it; ``flag`` names the option."""
    if given:
        return given
    folder = os.path.dirname(os.path.abspath(station_path))
    for name in LINE_FILE_NAMES:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    raise InputError("no line file beside the station file %s (looked for %s in its folder): "
                     "a line file belongs to its station file's network; give %s"
                     % (station_path, " and ".join(LINE_FILE_NAMES), flag))


class BenchmarkInfo(object):
    """What the tools know of one benchmark.

    ``name``: the evaluators' name (report.json ``benchmark``, the folder of
    its script); ``title``: the heading of its text report; ``page_title``:
    the heading of its page; ``short_title`` and ``tag``: its column group
    and column tag in a comparison; ``script``/``class_name``: the scenario
    script's module and its Benchmark class; ``default_input``: the bundled
    example test file (in DATA_DIR); ``task_marker``: what the release's
    ``task_id`` and test file names hold for it (``benchmark1-test``);
    ``task_id``: the task id make_benchmark.py writes (``1``); ``file_kind``:
    what a message calls one of its test files (``a benchmark-1 file``);
    ``command``: its evaluator, as a user runs it (``single_route/evaluate.py``).
    """

    def __init__(self, name, title, page_title, short_title, tag, class_name, default_input,
                 task_marker, task_id, file_kind):
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
        self.file_kind = file_kind
        self.command = name + "/evaluate.py"

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
                  "GeneralLLM", "general_llm_example.csv", "general", "general", "general-LLM"),
)
BENCHMARK_NAMES = tuple(info.name for info in BENCHMARKS)
_BY_NAME = {info.name: info for info in BENCHMARKS}


def benchmark_info(name):
    """The BenchmarkInfo of a benchmark name, or None (also for a value that
    is not a name, as a damaged report may hold)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


def benchmark_of_task(text):
    """The benchmark a release's ``task_id`` (``benchmark2-train``), the task id
    make_benchmark.py writes (``2``) or a test file's name
    (``transit-lm-benchmark1-test.csv``, ``my_diversity_rows.csv``) names, or
    None.  The release's markers are looked for first, then the evaluators'
    names."""
    text = str(text or "").strip().lower()
    for info in BENCHMARKS:
        if text == info.task_id or info.task_marker in text:
            return info.name
    for info in BENCHMARKS:
        if info.name in text:
            return info.name
    return None


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
