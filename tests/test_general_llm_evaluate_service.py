"""The general-LLM evaluator as a client of the route-eval service: the same
figures through a real server as in-process (parity goldens, both protocols);
a service that is down (exit 3, or counted with --allow_service_errors), one
that fails and recovers, one that always answers 500."""

import json
import os
import socket
import tempfile
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support import PARITY, common
from tests.support.services import send_json, serve_in_background, stop_serving
from tests.support.evaluator_rows import run_evaluator
from tests.support.parity import golden_differences, load_golden, parity_cases
import transitlm.io.exit_status  # noqa: E402
from general_llm import route_eval
from general_llm import server as service
from general_llm.evaluate import GeneralLLM


class ServerThread(object):
    """A route-eval server on a free loopback port, serving in a thread."""

    def __init__(self, server):
        self.server = server
        self.thread = None

    def __enter__(self):
        self.thread = serve_in_background(self.server)
        return self.server

    def __exit__(self, *exc):
        stop_serving(self.server, self.thread)


def route_eval_server(folder):
    lines = route_eval.LineTable.load(os.path.join(folder, "line_info.csv"))
    stations = common.StationNetwork.load(os.path.join(folder, "station_info.csv"))
    return ServerThread(service.make_server(lines, stations, port=0, log=lambda line: None))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FlakyHandler(BaseHTTPRequestHandler):
    """Fails the first `failures` POSTs with 500, then answers like the service."""

    def do_POST(self):
        state = self.server.state
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        state["requests"] += 1
        if state["requests"] <= state["failures"]:
            self.reply(500, {"error": "temporarily broken"})
            return
        cases = json.loads(body.decode("utf-8"))["cases"]
        self.reply(200, {"results": route_eval.evaluate_cases(cases, state["lines"],
                                                               state["stations"])})

    def reply(self, status, payload):
        send_json(self, status, payload)

    def log_message(self, *args):
        pass


@unittest.skipUnless(os.path.isdir(PARITY), "../shared/parity is not available")
class ThroughTheService(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.generated = os.path.join(PARITY, "generated")

    def tearDown(self):
        self.tmp.cleanup()

    def run_general(self, folder, *extra):
        out = os.path.join(self.tmp.name, "r.json")
        status, stdout, stderr = run_evaluator(GeneralLLM(), [
            "--input", os.path.join(folder, "general.csv"),
            "--station_info", os.path.join(folder, "station_info.csv"),
            "--json", out] + list(extra))
        report = None
        if status == 0:
            with open(out, encoding="utf-8") as handle:
                report = json.load(handle)
        return status, report, stdout, stderr

    def test_parity_through_the_server(self):
        cases = parity_cases("golden_general.json", "general.csv")
        self.assertTrue(cases)
        for case, folder in cases:
            with route_eval_server(folder) as server:
                for protocol, golden in (("reference", "golden_general.json"),
                                         ("paper", "golden_paper_general.json")):
                    with self.subTest(case=case, protocol=protocol):
                        status, report, _, err = self.run_general(
                            folder, "--api_url", server.url, "--protocol", protocol,
                            "--batch_size", "7")
                        self.assertEqual(status, 0, err)
                        self.assertIsNone(report["inputs"]["line_info"])
                        self.assertEqual(report["inputs"]["api_url"], server.url)
                        diffs = golden_differences(load_golden(folder, golden), report)
                        self.assertEqual(diffs, [], "\n".join(diffs))

    def test_service_down_stops_with_exit_3(self):
        url = "http://127.0.0.1:%d" % free_port()
        status, _, stdout, err = self.run_general(self.generated, "--api_url", url,
                                                  "--retries", "0")
        self.assertEqual(status, transitlm.io.exit_status.EXIT_SERVICE)
        self.assertIn(url, err)
        self.assertIn("--allow_service_errors", err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(stdout, "")

    def test_service_down_counted_with_allow_service_errors(self):
        url = "http://127.0.0.1:%d" % free_port()
        status, report, stdout, err = self.run_general(
            self.generated, "--api_url", url, "--retries", "0", "--allow_service_errors")
        self.assertEqual(status, 0, err)
        evaluated = report["counts"]["evaluated"]
        self.assertEqual(report["input_notes"]["service_errors"], evaluated)
        self.assertEqual(report["rounds"]["reachability"]["passed"], 0)
        self.assertIn("counted unreachable because the route-eval service failed", stdout)

    def flaky(self, failures):
        server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyHandler)
        server.state = {"requests": 0, "failures": failures,
                        "lines": route_eval.LineTable.load(
                            os.path.join(self.generated, "line_info.csv")),
                        "stations": common.StationNetwork.load(
                            os.path.join(self.generated, "station_info.csv"))}
        return server

    def test_fails_then_recovers(self):
        server = self.flaky(failures=1)
        with ServerThread(server):
            url = "http://127.0.0.1:%d" % server.server_address[1]
            status, report, _, err = self.run_general(self.generated, "--api_url", url,
                                                      "--retries", "1", "--batch_size", "200")
        self.assertEqual(status, 0, err)
        self.assertEqual(server.state["requests"], 2)          # one failure, one retry
        golden = load_golden(self.generated, "golden_general.json")
        self.assertEqual(golden_differences(golden, report), [])

    def test_always_500(self):
        server = self.flaky(failures=10 ** 6)
        with ServerThread(server):
            url = "http://127.0.0.1:%d" % server.server_address[1]
            status, _, _, err = self.run_general(self.generated, "--api_url", url,
                                                 "--retries", "1")
        self.assertEqual(status, transitlm.io.exit_status.EXIT_SERVICE)
        self.assertIn("500", err)
