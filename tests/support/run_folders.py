"""Run folders of the four evaluators, for tests/test_api_run_folder.py:
the Python API's and the command line's (in-process), and every case the
failure-code rule is checked on.  The many-case runs are pure computation on
files: tests.support.Offloaded runs them in a process of their own (the
folders in a temporary folder there; the reports and details rows come back
as JSON, just as they are read from the folder)."""

import json
import os
import tempfile

from tests.support import PARITY
from tests.support.evaluator_rows import run_evaluator
import transitlm
from transitlm.evaluation.catalog import load_benchmark

EVALUATORS = {"b1": "single_route", "b2": "personalized", "b3": "diversity",
              "general": "general_llm"}
PROTOCOLS = ("reference", "paper")


def api_to_folder(short, folder, protocol, input_path=None):
    """The Python API's run folder (the same bytes as --out's: test_provenance)
    -> (report, details rows); in-process, so many cases stay fast."""
    options = {"protocol": protocol, "out": folder}
    if input_path:
        data = os.path.dirname(input_path)
        options.update(input=input_path, station_info=os.path.join(data, "station_info.csv"))
        if short == "general":
            options["line_info"] = os.path.join(data, "line_info.csv")
    transitlm.evaluate(EVALUATORS[short], **options)
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    with open(os.path.join(folder, "details.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    return report, rows


def run_to_folder(short, folder, protocol, extra=()):
    """Run an evaluator's command line with --out (in-process: the programs
    themselves run in test_cli and test_provenance) -> (report, details rows,
    text report, stdout)."""
    status, stdout, stderr = run_evaluator(
        load_benchmark(EVALUATORS[short]),
        ["--protocol", protocol, "--out", folder] + list(extra))
    assert status == 0, stderr
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    with open(os.path.join(folder, "details.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    with open(os.path.join(folder, "report.txt"), encoding="utf-8") as handle:
        text = handle.read()
    return report, rows, text, stdout


def cases():
    """(name, short benchmark, input path or None for the bundled one)."""
    out = [("bundled", short, None) for short in EVALUATORS]
    if os.path.isdir(PARITY):
        for case in sorted(os.listdir(PARITY)):
            for short in EVALUATORS:
                path = os.path.join(PARITY, case, short + ".csv")
                if os.path.isfile(path):
                    out.append((case, short, path))
    return out



def every_case_by_the_api():
    """Every case under both protocols by the Python API -> [[case name, short
    benchmark, protocol, report, details rows]]."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, short, path in cases():
            for protocol in PROTOCOLS:
                folder = os.path.join(tmp, "%s-%s-%s" % (name, short, protocol))
                out.append([name, short, protocol] + list(api_to_folder(short, folder, protocol,
                                                                        path)))
    return out


def every_bundled_run_by_the_command():
    """Each bundled example under both protocols by its command line (in that
    process) -> [[short benchmark, protocol, report, details rows]]."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for short in EVALUATORS:
            for protocol in PROTOCOLS:
                report, rows, _, _ = run_to_folder(short, os.path.join(tmp, short + protocol),
                                                   protocol)
                out.append([short, protocol, report, rows])
    return out
