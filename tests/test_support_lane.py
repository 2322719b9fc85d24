"""tests/support/lane.py: a program the lane starts gets the environment the
suite started with, whatever a test has set in os.environ meanwhile (a lane
fixture once inherited TRANSITLM_DATA naming a release folder another test
had made and then deleted, and failed); elsewhere, and where an environment
is given, nothing changes."""

import os
import subprocess
import sys
import threading
import unittest
from unittest import mock

from tests.support import lane

PROBE = "TRANSITLM_LANE_PROBE"
SHOW = [sys.executable, "-c", "import os; print(os.environ.get(%r, 'unset'))" % PROBE]


def shown(env=None):
    return subprocess.run(SHOW, stdout=subprocess.PIPE, universal_newlines=True,
                          env=env, check=True).stdout.strip()


class LaneEnvironmentTest(unittest.TestCase):
    def test_the_lane_starts_programs_in_the_suites_environment(self):
        seen = {}

        def as_the_lane():
            lane._THREAD.in_lane = True
            seen["lane"] = shown()
            seen["lane, given"] = shown(dict(os.environ, **{PROBE: "given"}))

        with mock.patch.dict(os.environ, {PROBE: "set by a test"}):
            thread = threading.Thread(target=as_the_lane)
            thread.start()
            thread.join()
            seen["test"] = shown()
        self.assertEqual(seen, {"lane": lane.SUITE_ENVIRONMENT.get(PROBE, "unset"),
                                "lane, given": "given", "test": "set by a test"})
        self.assertEqual(lane.suite_environment(**{PROBE: "x"})[PROBE], "x")


if __name__ == "__main__":
    unittest.main()
