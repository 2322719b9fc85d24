"""The cyclic garbage an evaluator run leaves, counted in a process of its
own (tests/test_engine_memory.py, through tests.support.Offloaded): in the
suite's process the lane's threads make garbage of their own while a run is
measured (gc.DEBUG_SAVEALL keeps every thread's), so a count made there could
grow with what the lane happened to run."""

import contextlib
import gc
import io
import json
import os
import tempfile

from tests.support import REPO
from tests.support.evaluator_rows import prompt, route, write_samples, write_station_file
import transitlm.cli
import transitlm.evaluation.records

BENCHMARKS = ("single_route", "diversity", "general_llm")


def mixed_rows(count):
    kinds = [route(), route(station_sequence=["A", "C"]), "{not json", route(total_time=[1]),
             route(station_sequence=["A", "B", "X"]), "", route(total_distance="9公里")]
    rows = []
    for number in range(count):
        prediction = kinds[number % len(kinds)]
        rows.append({"index_id": "r%d" % number, "sft_prompt": prompt(),
                     "sft_label": route() if number % 11 else "[broken",
                     "generate_results": prediction})
    return rows


def garbage_after(count, benchmark):
    with tempfile.TemporaryDirectory() as tmp:
        stations = os.path.join(tmp, "st.csv")
        write_station_file(stations)
        path = os.path.join(tmp, "in.csv")
        rows = mixed_rows(count)
        if benchmark == "diversity":
            for row in rows:
                value = row["generate_results"]
                row["generate_results"] = ({"first": value, "second": value}
                                           if isinstance(value, dict) else value)
                if isinstance(row["sft_label"], dict):
                    row["sft_label"] = {"first": row["sft_label"]}
        write_samples(path, rows)
        gc.collect()
        was_enabled = gc.isenabled()
        try:
            # Cyclic garbage is kept (not freed) from here on, whenever found.
            gc.set_debug(gc.DEBUG_SAVEALL)
            with contextlib.redirect_stdout(io.StringIO()):
                # (the general LLM's line file: the bundled one, named, as a
                # line file never silently pairs with another network)
                # Its toy labels name stations the bundled line file
                # lacks: another network's, scored anyway (network_check);
                # and they are single-route rows of stop ids: another
                # benchmark's, scored anyway (benchmark_check).
                line_info = (["--line_info", os.path.join(REPO, "data", "line_info.csv"),
                              "--allow_foreign_network", "--allow_other_benchmark"]
                             if benchmark == "general_llm" else [])
                status = transitlm.cli.run(transitlm.evaluation.records.load_benchmark(benchmark),
                                    ["--input", path, "--station_info", stations,
                                     "--details", os.path.join(tmp, "d.jsonl")] + line_info)
            if status != 0:
                raise AssertionError("the evaluator exited %s" % status)
            gc.collect()
            found = len(gc.garbage)
        finally:
            gc.set_debug(0)
            del gc.garbage[:]
            if was_enabled:
                gc.enable()
        with open(os.path.join(tmp, "d.jsonl"), encoding="utf-8") as handle:
            statuses = {json.loads(line)["status"] for line in handle}
        return found, sorted(statuses)


def garbage_counts(small, large):
    """{benchmark: [[garbage, statuses] after ``small`` rows, the same after ``large``]}."""
    return {benchmark: [list(garbage_after(small, benchmark)), list(garbage_after(large, benchmark))]
            for benchmark in BENCHMARKS}
