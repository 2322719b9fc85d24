"""The seeded fuzzing of tests/test_cli_fuzz.py: the bundled examples
damaged at the JSON and the CSV level, each run through its evaluator
(in-process, one worker) -> what the test checks of the run.  Pure
computation on files: tests.support.Offloaded runs it in a process of its own
while the suite goes on.  Deterministic: fixed seeds."""

import contextlib
import csv
import io
import json
import os
import random
import tempfile

from tests.support import REPO
import transitlm.cli

from single_route.evaluate import SingleRoute
from personalized.evaluate import Personalized
from diversity.evaluate import Diversity
from general_llm.evaluate import GeneralLLM

BENCHMARKS = [(SingleRoute, "benchmark1_single_route_example.csv"),
              (Personalized, "benchmark2_personalized_example.csv"),
              (Diversity, "benchmark3_diversity_example.csv"),
              (GeneralLLM, "general_llm_example.csv")]
ROUTE_FIELDS = ("station_sequence", "line_sequence", "station_name", "total_distance",
                "total_time", "total_fare", "start_transfer_mode", "end_transfer_mode",
                "start_transfer_distance", "end_transfer_distance")
HOSTILE_VALUES = [None, True, 0, -1, 1e999, -1e999, float("nan"), 10 ** 400, "1e999", "NaN",
                  "Infinity", "\ud800", "\udfff\x1b[31m", [], {}, [[["x"]]], {"a": {"b": 1}},
                  ["A", None, 3, {"x": 1}], "9" * 5000, "公里米小时分钟元"]


def deep(levels, leaf="1"):
    return '{"a":' * levels + leaf + "}" * levels


def read_rows(name):
    with open(os.path.join(REPO, "data", name), encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def write_rows(path, rows, newline="\n", bom=False):
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator=newline).writerows(rows)
    data = buffer.getvalue().encode("utf-8", "surrogatepass")
    with open(path, "wb") as handle:
        handle.write((b"\xef\xbb\xbf" if bom else b"") + data)


def evaluate(cls, path, tmp):
    """One run of the evaluator `cls` on `path`, in-process -> (status,
    stdout, stderr, details path, report path)."""
    details = os.path.join(tmp, "details.jsonl")
    report_path = os.path.join(tmp, "report.json")
    for stale in (details, report_path):
        if os.path.exists(stale):
            os.remove(stale)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = transitlm.cli.run(cls(), ["--input", path, "--details", details,
                                           "--json", report_path, "--workers", "1"])
    return status, out.getvalue(), err.getvalue(), details, report_path


def run(cls, path, tmp, rows_expected, what):
    """A run as the test checks it: {benchmark, what, path, rows_expected,
    status, stderr, details_left, report (or None), rows (the details lines'
    row numbers, or None)}."""
    status, _, err, details, report_path = evaluate(cls, path, tmp)
    found = {"benchmark": cls.name, "what": what, "path": path,
             "rows_expected": rows_expected, "status": status, "stderr": err,
             "details_left": os.path.exists(details), "report": None, "rows": None}
    if os.path.exists(report_path):
        with open(report_path, encoding="utf-8") as handle:
            found["report"] = json.load(handle)
    if found["details_left"]:
        with open(details, encoding="utf-8") as handle:
            found["rows"] = [json.loads(line)["row"] for line in handle]
    return found


def json_level_runs():
    """Every row of each example damaged at the JSON level (deep nesting,
    wrong types, NaN/Infinity/1e999, huge integers, lone surrogates,
    100,000-station routes) -> [run]."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for cls, name in BENCHMARKS:
            rows = read_rows(name)
            header, body = rows[0], rows[1:]
            i_pred = header.index("generate_results")
            i_prompt = header.index("sft_prompt")
            i_label = header.index("sft_label")
            rng = random.Random(name)
            damaged = [header]
            for number, row in enumerate(body):
                row = list(row)
                kind = number % 8
                if kind == 0:
                    row[i_pred] = deep(rng.choice([101, 2000, 5000]))
                elif kind == 1:
                    row[rng.choice([i_prompt, i_label])] = "[" * 3000 + "]" * 3000
                elif kind in (2, 3, 4):
                    try:
                        obj = json.loads(row[i_pred])
                    except ValueError:
                        obj = {}
                    target = obj.get("first", obj) if isinstance(obj, dict) else obj
                    if isinstance(target, dict):
                        for field in rng.sample(ROUTE_FIELDS, 3):
                            target[field] = rng.choice(HOSTILE_VALUES)
                    row[i_pred] = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
                elif kind == 5:
                    prompt = json.loads(row[i_prompt])
                    prompt[rng.choice(["start", "end"])] = rng.choice(
                        ["inf,0", "nan,nan", "10,140", "200,10", "1e999,1", [1, 2, 3], 5])
                    prompt["city"] = rng.choice([None, 3, "\ud800", ["x"]])
                    row[i_prompt] = json.dumps(prompt)
                elif kind == 6:
                    stations = ["s%d" % i for i in range(100000)]
                    route = {"station_sequence": stations, "line_sequence": ["L"] * 100,
                             "station_name": stations[:10]}
                    row[i_pred] = json.dumps({"first": route} if cls is Diversity else route)
                else:
                    row[i_label] = rng.choice(["", "null", "[1,2]", '"text"',
                                               json.dumps({"total_time": 10 ** 400})])
                damaged.append(row)
            path = os.path.join(tmp, "json-" + name)
            write_rows(path, damaged)
            runs.append(run(cls, path, tmp, len(body), cls.name))
    return runs


def csv_level_runs():
    """Each example damaged at the CSV level, one mutation a file -> [run,
    with its mutation]."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        mutations = ["stray_quote", "truncated_quote", "nul", "bom_crlf", "huge_field",
                     "short_row", "long_row", "duplicate_header", "blank_lines", "binary"]
        for cls, name in BENCHMARKS:
            rows = read_rows(name)
            for seed, mutation in enumerate(mutations):
                rng = random.Random("%s-%d" % (name, seed))
                path = os.path.join(tmp, "%s-%s" % (mutation, name))
                expected = None
                body = [list(row) for row in rows[1:]]
                header = list(rows[0])
                if mutation == "bom_crlf":
                    write_rows(path, [header] + body, newline="\r\n", bom=True)
                    expected = len(body)
                elif mutation == "huge_field":
                    body[rng.randrange(len(body))][-1] = "x" * 300000
                    write_rows(path, [header] + body)
                    expected = len(body)
                elif mutation == "short_row":
                    victim = body[rng.randrange(len(body))]
                    del victim[rng.randrange(1, len(victim)):]
                    write_rows(path, [header] + body)
                    expected = len(body)
                elif mutation == "long_row":
                    body[rng.randrange(len(body))].extend(["extra", "cells"])
                    write_rows(path, [header] + body)
                    expected = len(body)
                elif mutation == "duplicate_header":
                    header.append(header[0])
                    for row in body:
                        row.append(row[0])
                    write_rows(path, [header] + body)
                    expected = len(body)
                else:
                    write_rows(path, [header] + body)
                    with open(path, "rb") as handle:
                        data = bytearray(handle.read())
                    lines = data.split(b"\n")
                    at = rng.randrange(1, len(lines) - 1)
                    if mutation == "stray_quote":
                        lines[at] = lines[at] + b',"'
                    elif mutation == "truncated_quote":
                        lines[at] = lines[at][:rng.randrange(1, len(lines[at]))] + b'"'
                    elif mutation == "nul":
                        pos = rng.randrange(len(lines[at]))
                        lines[at] = lines[at][:pos] + b"\x00" + lines[at][pos:]
                    elif mutation == "blank_lines":
                        lines[at:at] = [b"", b"  ", b""]
                        expected = len(body)
                    elif mutation == "binary":
                        lines[at] = bytes(rng.randrange(256) for _ in range(200))
                    with open(path, "wb") as handle:
                        handle.write(b"\n".join(lines))
                runs.append(dict(run(cls, path, tmp, expected, "%s %s" % (cls.name, mutation)),
                                 mutation=mutation))
    return runs
