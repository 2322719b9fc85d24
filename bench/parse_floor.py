#!/usr/bin/env python3
"""The parse floor of a sample file: the least any evaluator of this format
does in pure Python, timed by bench/benchmark.py beside every figure.

    python3 bench/parse_floor.py FILE

Reads the CSV with the csv module (UTF-8 text) and decodes the three JSON
cells of every row (sft_prompt, sft_label, generate_results) with json.loads;
a cell that is not JSON is counted and passed over, as an evaluator would.
Nothing else: no check, no output but one line on stderr (rows, cells that
are not JSON).  Standard library only.
"""

import csv
import json
import sys

JSON_COLUMNS = ("sft_prompt", "sft_label", "generate_results")


def parse_floor(path):
    """-> (rows, JSON cells that did not decode)."""
    csv.field_size_limit(1 << 30)
    loads = json.loads
    rows = failed = 0
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        columns = [header.index(name) for name in JSON_COLUMNS]
        for cells in reader:
            rows += 1
            for column in columns:
                try:
                    loads(cells[column])
                except ValueError:
                    failed += 1
    return rows, failed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: parse_floor.py FILE")
    rows, failed = parse_floor(argv[0])
    sys.stderr.write("%d rows, %d JSON cells not JSON\n" % (rows, failed))


if __name__ == "__main__":
    main()
