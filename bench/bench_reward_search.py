#!/usr/bin/env python3
"""The reward's adversarial search, run long: the search of
tests/test_reward_adversarial.py (tests/support/reward_search.py) over every
bundled row of the four benchmarks, both protocols, every shaping, with
--budget greedy steps a row instead of the suite's 8, from --seed.

    python3 bench/bench_reward_search.py [--budget 400] [--seed 38] [--seeds 1]
                                         [--benchmark NAME ...]

Prints, for each seed: the completions tried, the time, the highest score
of a completion the benchmark does not accept in full (by shaping), and the
findings (a completion above its label's score the evaluator does not judge
at least as well, one at the top score not accepted in full, a route of
fewer than two distinct stations paid more than its format, a pair breaking
monotone credit).  Exits 1 when there is a finding.  Figures go in
docs/reward.md.  Standard library only.
"""

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from tests.support import reward_search  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=400,
                        help="greedy steps a row (the suite: 8)")
    parser.add_argument("--seed", type=int, default=38, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds, from --seed")
    parser.add_argument("--benchmark", action="append", choices=sorted(reward_search.EXAMPLES),
                        help="only this benchmark (repeatable); default: all four")
    args = parser.parse_args(argv)
    if args.budget < 0 or args.seeds < 1:
        parser.error("--budget must be 0 or more and --seeds 1 or more")
    benchmarks = tuple(args.benchmark or reward_search.EXAMPLES)
    found = 0
    for seed in range(args.seed, args.seed + args.seeds):
        search = reward_search.Search(benchmarks=benchmarks, steps=args.budget,
                                      seed=seed).run()
        best = ", ".join("%s %.4f" % (shaping, search.best.get(shaping, 0.0))
                         for shaping in ("dense", "gated", "sparse"))
        print("seed %d, %d greedy steps a row: %d completions in %.1f s (%.0f/s); highest "
              "not accepted: %s; %d findings"
              % (seed, args.budget, search.tried, search.seconds,
                 search.tried / search.seconds if search.seconds else 0.0, best,
                 len(search.findings)))
        for finding in search.findings[:20]:
            print("  " + finding)
        found += len(search.findings)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
