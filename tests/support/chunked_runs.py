"""Evaluator runs of tests/test_workers.py: one file evaluated by one process
and by workers, whole and in chunks of several sizes, and its odd CSV
variants.  The many-run comparisons are pure computation on files:
tests.support.Offloaded runs them in a process of their own while the suite
goes on (the chunk size is set in that process); the outputs (report,
details, stdout) come back as JSON."""

import csv
import os
import tempfile

from tests.support import PARITY
from tests.support.evaluator_rows import run_evaluator
import transitlm.evaluation.inputs
from single_route.evaluate import SingleRoute
from diversity.evaluate import Diversity
from general_llm.evaluate import GeneralLLM

GENERATED = os.path.join(PARITY, "generated")
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "data")
CHUNK_SIZES = (97, 400, 5000, None)     # bytes; None: the default


def write(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def bundled():
    with open(os.path.join(BUNDLED, "benchmark1_single_route_example.csv"), "rb") as handle:
        return handle.read()


def outputs(tmp, sample, workers, chunk_bytes=None, benchmark=None, extra=(), by_rows=False):
    """(report, details, stdout) of a run on ``sample`` with the bundled
    stations (the report's worker count blanked), or (status, stderr) of a
    run that failed; ``by_rows``: one process reading the file row by row
    (not in chunks)."""
    saved = transitlm.evaluation.inputs.CHUNK_BYTES
    if chunk_bytes:
        transitlm.evaluation.inputs.CHUNK_BYTES = chunk_bytes
    header_bytes = transitlm.evaluation.inputs.SampleReader._header_bytes
    if by_rows:
        transitlm.evaluation.inputs.SampleReader._header_bytes = lambda reader: None
    tag = "%s-%s" % (workers, chunk_bytes)
    json_path = os.path.join(tmp, "r%s.json" % tag)
    details = os.path.join(tmp, "d%s.jsonl" % tag)
    try:
        status, stdout, err = run_evaluator(benchmark or SingleRoute(), [
            "--input", sample, "--station_info", os.path.join(BUNDLED, "station_info.csv"),
            "--workers", str(workers), "--json", json_path, "--details", details]
            + list(extra))
    finally:
        transitlm.evaluation.inputs.CHUNK_BYTES = saved
        transitlm.evaluation.inputs.SampleReader._header_bytes = header_bytes
    if status != 0:
        return status, err
    with open(json_path, encoding="utf-8") as a, open(details, encoding="utf-8") as b:
        report = a.read().replace('"workers": %d' % workers, '"workers": N')
        return report, b.read(), stdout


def same_outputs(tmp, data, name="s.csv"):
    """``data`` read row by row in one process; in chunks of CHUNK_SIZES by
    two workers and, as a worker reads them, by one process -> (the first
    outputs, [(chunk size, workers, outputs)])."""
    sample = write(tmp, name, data)
    one = outputs(tmp, sample, 1, by_rows=True)
    return one, [(chunk_bytes, workers, outputs(tmp, sample, workers, chunk_bytes))
                 for chunk_bytes in CHUNK_SIZES for workers in (2, 1)]


def odd_csv_variants():
    """The bundled single-route example made odd in every way a CSV can be."""
    data = bundled()
    header, _, body = data.partition(b"\n")
    lines = body.split(b"\n")
    return {
        "crlf": data.replace(b"\n", b"\r\n"),
        "lone_cr": data.replace(b"\n", b"\r"),
        "bom_and_blank_lines": b"\xef\xbb\xbf" + header + b"\n\n" + b"\n\n".join(lines),
        # A quote inside an unquoted cell: the quote count is off by one
        # from there on, so chunk ends are guessed wrong; and a cell that
        # runs over several lines.
        "literal_quote": header + b"\n" + lines[0].replace(b",", b'x"y,', 1) + b"\n"
        + b"\n".join(lines[1:5]) + b'\nid-q,"{}","multi\nline\ncell",x\n'
        + b"\n".join(lines[5:]),
        "stray_quote": header + b"\n" + b"\n".join(lines[:3]) + b'"\n'
        + b"\n".join(lines[3:]),
        "not_utf8": header + b"\n" + lines[0] + b"\xff\n" + b"\n".join(lines[1:]),
        "no_final_newline": data.rstrip(b"\n"),
        "quoted_header": b'"index_id","sft_prompt",sft_label,generate_results\n' + body,
        "header_only": header + b"\n",
        "empty": b"",
        "blank_lines_only": header + b"\n\n\n  \n",
        # One row far longer than a chunk: the chunk grows to hold it.
        "long_row": header + b"\n" + b"\n".join(lines[:3]) + b'\nid-long,"{}","{}","'
        + b"x" * 20000 + b'"\n' + b"\n".join(lines[3:]),
    }


def odd_csv_runs():
    """{variant: same_outputs of it} for every odd_csv_variants."""
    with tempfile.TemporaryDirectory() as tmp:
        return {name: same_outputs(tmp, variant, name + ".csv")
                for name, variant in odd_csv_variants().items()}


def enlarge(tmp, name, copies=8):
    """The parity sample file repeated (ids made unique): enough rows for workers."""
    source = os.path.join(GENERATED, name)
    target = os.path.join(tmp, name)
    with open(source, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(rows[0])
        for copy in range(copies):
            for row in rows[1:]:
                writer.writerow(["%s-%d" % (row[0], copy)] + row[1:])
    return target


def parity_outputs(tmp, benchmark, sample, workers, extra=()):
    json_path = os.path.join(tmp, "r%s.json" % workers)
    details = os.path.join(tmp, "d%s.jsonl" % workers)
    status, stdout, err = run_evaluator(benchmark, [
        "--input", sample, "--station_info", os.path.join(GENERATED, "station_info.csv"),
        "--workers", str(workers), "--json", json_path, "--details", details] + list(extra))
    if status != 0:
        return status, err
    with open(json_path, encoding="utf-8") as a, open(details, encoding="utf-8") as b:
        return a.read(), b.read(), stdout


def parity_runs_by_one_and_two():
    """The enlarged parity samples of three evaluators, each run by one
    process and by two workers -> [[benchmark, one's outputs, two's]]."""
    line_info = ["--line_info", os.path.join(GENERATED, "line_info.csv")]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for cls, name, extra in ((SingleRoute, "b1.csv", ()), (Diversity, "b3.csv", ()),
                                 (GeneralLLM, "general.csv", line_info)):
            sample = enlarge(tmp, name)
            out.append([cls.name, parity_outputs(tmp, cls(), sample, 1, extra),
                        parity_outputs(tmp, cls(), sample, 2, extra)])
    return out


def every_benchmark_runs():
    """The bundled examples of benchmarks 2, 3 and the general LLM, each read
    row by row in one process and in chunks of 97 and 2000 bytes by two
    workers and by one process -> [[benchmark, the first outputs, [(chunk
    size, workers, outputs)]]]."""
    from personalized.evaluate import Personalized
    cases = ((Personalized(), "benchmark2_personalized_example.csv", ()),
             (Diversity(), "benchmark3_diversity_example.csv", ()),
             (GeneralLLM(), "general_llm_example.csv",
              ("--line_info", os.path.join(BUNDLED, "line_info.csv"))))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for benchmark, name, extra in cases:
            sample = os.path.join(BUNDLED, name)
            one = outputs(tmp, sample, 1, None, benchmark, extra, by_rows=True)
            out.append([benchmark.name, one, [
                (chunk_bytes, workers, outputs(tmp, sample, workers, chunk_bytes, benchmark,
                                               extra))
                for chunk_bytes in (97, 2000) for workers in (2, 1)]])
    return out


def bundled_runs():
    """same_outputs of the bundled single-route example."""
    with tempfile.TemporaryDirectory() as tmp:
        return same_outputs(tmp, bundled())
