"""Rows for the evaluators: a toy network on the equator, route objects, prompts, station and sample files, an evaluator run in-process."""

import contextlib
import io
import json
import os

from tests.support import common


# On the equator one degree of longitude is 2*pi*6371/360 = 111.19 km.
KM_PER_DEGREE = 2 * 3.141592653589793 * common.EARTH_RADIUS_KM / 360.0


def east(km):
    """Longitude of a point `km` east of (0, 0) on the equator."""
    return km / KM_PER_DEGREE


def route(**fields):
    """A route object with sensible defaults (A -> D on one line)."""
    base = {"station_sequence": ["A", "B", "C", "D"], "line_sequence": ["地铁1号线(A--D)"],
            "total_distance": "3.0公里", "total_time": "20分钟", "total_fare": "3",
            "start_transfer_mode": "步行", "end_transfer_mode": "步行",
            "start_transfer_distance": "", "end_transfer_distance": ""}
    base.update(fields)
    return base


def prompt(start=(0.0, 0.0), end=None, city="北京"):
    end = end if end is not None else (east(3), 0.0)
    return json.dumps({"query": "从甲到乙怎么走", "start": "%f,%f" % start,
                       "end": "%f,%f" % end, "city": city}, ensure_ascii=False)


TOY_STATIONS = [
    # stop_id, lng, lat, next hops
    ("A", east(0), 0.0, ["B"]),
    ("B", east(1), 0.0, ["A", "C"]),
    ("C", east(2), 0.0, ["B", "D"]),
    ("D", east(3), 0.0, ["C"]),
    ("E", east(10), 0.0, []),
]


def write_station_file(path, stations=TOY_STATIONS):
    import csv
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stop_id", "ad_code", "coord_x", "coord_y", "next_hop_stations",
                         "station_name"])
        for stop, lng, lat, hops in stations:
            writer.writerow([stop, "010", "%.9f" % lng, "%.9f" % lat,
                             json.dumps(hops), "站" + stop])


def write_samples(path, rows, columns=("index_id", "sft_prompt", "sft_label",
                                       "generate_results")):
    """rows: dicts; values that are not text are JSON-encoded."""
    import csv
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([value if isinstance(value, str) else
                             json.dumps(value, ensure_ascii=False)
                             for value in (row.get(col, "") for col in columns)])


def run_in_process(function, *args):
    """A command's function called in this process (from the main thread:
    the streams are swapped for the whole process) -> (exit status, stdout,
    stderr); argparse's usage errors (SystemExit) give their status."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = function(*args)
        except SystemExit as exc:
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def run_evaluator(benchmark, argv):
    """Run an evaluator in-process -> (exit status, stdout, stderr)."""
    import transitlm.cli
    return run_in_process(transitlm.cli.run, benchmark, argv)


def evaluate_to_files(benchmark, argv, folder):
    """Run an evaluator with --json and --details written into `folder`.

    -> (report dict, list of details rows, stdout); a non-zero exit fails.
    """
    report_path = os.path.join(folder, "report.json")
    details_path = os.path.join(folder, "details.jsonl")
    status, stdout, stderr = run_evaluator(
        benchmark, list(argv) + ["--json", report_path, "--details", details_path])
    if status != 0:
        raise AssertionError("exit status %s: %s" % (status, stderr))
    with open(report_path, encoding="utf-8") as handle:
        report = json.load(handle)
    with open(details_path, encoding="utf-8") as handle:
        details = [json.loads(line) for line in handle]
    return report, details, stdout


class RefusalAssertions(object):
    """A test case mix-in: a run refused as a whole-file problem is exit 2 and
    one line on stderr naming ``words``, never a traceback."""

    def assert_refused(self, status, err, *words):
        self.assertEqual(status, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        for word in words:
            self.assertIn(word, err)
