#!/usr/bin/env python3
"""Benchmark 1 — single-route planning: score each predicted route against its label.

Usage: python3 single_route/evaluate.py [--input CSV] [--json PATH] [--details PATH] ...
(`--help` lists every flag.)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

import common  # noqa: E402
import transitlm.cli  # noqa: E402
import transitlm.evaluation.engine  # noqa: E402


class SingleRoute(transitlm.evaluation.engine.Benchmark):
    name = "single_route"

    def evaluate(self, row, context):
        return common.judge_single_route(row, context.protocol, context.network,
                                         context.route_drawings)[0]


if __name__ == "__main__":
    transitlm.cli.script_main(SingleRoute())
