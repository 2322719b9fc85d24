#!/usr/bin/env python3
"""Time to read adversarial text: linear in its length, whatever it holds.

For each pattern of tests/support's READING_PATTERNS (escaped quotes,
unclosed strings, backslash runs, bracket runs, a stringified route repeated,
``{"a":0 `` repeated, reasoning tags, a mix), repeated to each size, prints
the time (best of --repeat) of

- ``read``: transitlm.evaluation.answers.read_answer, as the evaluators read a model's
  answer (a predictions file, the Python API) and the reward reads a
  completion;
- ``score``: transitlm.reward.score against the first bundled benchmark 1 row
  (the scorer made before the clock starts);
- ``body``: transitlm.io.json_service.decode_body of the text as a request body
  (the services' scan before decoding, then json.loads when it passes),

and the ratio of the largest size's time to the smallest's (linear: about
the ratio of the sizes).

    python3 bench/bench_reading.py [--sizes 65536,1048576] [--repeat 3]

Figures go in docs/performance.md.  Standard library only.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from common import RowError  # noqa: E402
from tests.support import READING_PATTERNS, example_rows, reading_text  # noqa: E402
from transitlm.evaluation.answers import read_answer  # noqa: E402
from transitlm.io.json_service import RequestProblem, decode_body  # noqa: E402
from transitlm.reward import score  # noqa: E402


def outcome_of(function):
    """Run ``function`` -> what it gave, in a word (an error's code)."""
    try:
        function()
    except RowError as exc:
        return exc.code
    except RequestProblem as exc:
        return str(exc.status)
    return "read"


def best_time(function, repeat):
    best = None
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="65536,1048576",
                        help="sizes in characters, comma-separated (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="best of (default: %(default)s)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    row = example_rows("single_route")[0]
    score("{}", row, benchmark="single_route")            # the scorer, made once
    readers = (
        ("read", lambda text: outcome_of(lambda: read_answer(text))),
        ("score", lambda text: score(text, row, benchmark="single_route")["error_code"]
         or "scored"),
        ("body", lambda text: outcome_of(lambda: decode_body(text.encode("utf-8"), 2048,
                                                             "items"))),
    )
    header = ["pattern", "reader"] + ["%d KB" % (size // 1024) for size in sizes]
    header += ["ratio", "outcome"]
    print(" | ".join(header))
    worst = 0.0
    for name in READING_PATTERNS:
        texts = [reading_text(name, size) for size in sizes]
        for reader, function in readers:
            times = [best_time(lambda: function(text), args.repeat) for text in texts]
            worst = max(worst, times[-1])
            print(" | ".join([name, reader] + ["%.3f s" % value for value in times]
                             + ["x%.1f" % (times[-1] / max(times[0], 1e-6)),
                                function(texts[-1])]))
    print("slowest at %d KB: %.3f s (size ratio x%.1f)"
          % (sizes[-1] // 1024, worst, sizes[-1] / float(sizes[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
