"""general_llm/server.py, the local route-eval HTTP service: its endpoints
and answers, bad requests and bad cases, concurrent batches, the scan of a
body's shape, the size limits, and server.py run as a program (SIGTERM, bad
files, bad options)."""

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from general_llm import server as service  # noqa: E402
from general_llm.route_eval import LineTable, evaluate_cases  # noqa: E402
from tests.support.services import (SHENZHEN, ServerTestCase, fixture_lines, fixture_stations,
                                    sample_cases, service_case as make_case,
                                    write_fixture_files)

SERVER_SCRIPT = os.path.join(REPO, "general_llm", "server.py")
BATCH = service.BATCH_PATH
JSON_TYPE = "application/json; charset=utf-8"


class EndpointTest(ServerTestCase):

    def test_healthz(self):
        status, response, payload = self.request("GET", "/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(response.getheader("Content-Type"), JSON_TYPE)
        self.assertEqual(payload, {"status": "ok", "stations": 5, "lines": 2})

    def test_head_healthz_has_no_body(self):
        status, response, payload = self.request("HEAD", "/healthz")
        self.assertEqual(status, 200)
        self.assertIsNone(payload)

    def test_batch_matches_in_process_results_in_order(self):
        cases = sample_cases()
        status, response, payload = self.request("POST", BATCH, {"cases": cases})
        self.assertEqual(status, 200)
        self.assertEqual(response.getheader("Content-Type"), JSON_TYPE)
        self.assertEqual(payload, {"results": evaluate_cases(cases, self.lines, self.stations)})
        results = payload["results"]
        self.assertEqual([r["reachable"] for r in results],
                         [True, True, False, False, False, False, True])
        self.assertFalse(results[0]["station_grounding"] is None)

    def test_per_case_errors(self):
        cases = [make_case(["地铁1号线"], ["罗湖", "国贸"]), 7, {"city": SHENZHEN}]
        status, _, payload = self.request("POST", BATCH, {"cases": cases})
        self.assertEqual(status, 200)
        ok, number, incomplete = payload["results"]
        self.assertNotIn("error", ok)
        for result in (number, incomplete):
            self.assertFalse(result["reachable"])
            self.assertEqual(result["reachable_reason"], result["error"])
            self.assertEqual(result["match_details"], [])
        self.assertIn("number", number["error"])
        self.assertIn("start", incomplete["error"])

    def test_empty_batch(self):
        self.assertEqual(self.request("POST", BATCH, {"cases": []})[2], {"results": []})

    def test_query_string_is_ignored(self):
        self.assertEqual(self.request("GET", "/healthz?verbose=1")[0], 200)

    def test_keep_alive(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            for _ in range(3):
                status, _, payload = self.request("POST", BATCH, {"cases": sample_cases()},
                                                  connection=conn)
                self.assertEqual(status, 200)
                self.assertEqual(len(payload["results"]), 7)
        finally:
            conn.close()

    def test_one_log_line_per_request(self):
        self.request("POST", BATCH, {"cases": sample_cases()})
        self.request("GET", "/nowhere")
        self.assertEqual(len(self.log), 2)
        self.assertIn("POST %s 200 7 cases" % BATCH, self.log[0])
        self.assertTrue(self.log[0].endswith(" ms"))
        self.assertIn("GET /nowhere 404", self.log[1])


class BadRequestTest(ServerTestCase):

    def assertError(self, result, status, words):
        self.assertEqual(result[0], status, result[2])
        self.assertEqual(result[1].getheader("Content-Type"), JSON_TYPE)
        self.assertEqual(set(result[2]), {"error"})
        for word in words:
            self.assertIn(word, result[2]["error"])

    def test_malformed_json(self):
        self.assertError(self.request("POST", BATCH, b'{"cases": ['), 400, ["not valid JSON"])

    def test_not_utf8(self):
        self.assertError(self.request("POST", BATCH, b'\xff\xfe{}'), 400, ["UTF-8"])

    def test_not_an_object(self):
        self.assertError(self.request("POST", BATCH, [1, 2]), 400, ["JSON object"])

    def test_no_cases(self):
        self.assertError(self.request("POST", BATCH, {"case": []}), 400, ["\"cases\""])

    def test_cases_not_a_list(self):
        self.assertError(self.request("POST", BATCH, {"cases": {"a": 1}}), 400,
                         ["\"cases\" must be a list"])

    def test_unknown_path(self):
        self.assertError(self.request("GET", "/api/eval/route"), 404, ["/api/eval/route"])
        self.assertError(self.request("POST", "/", {"cases": []}), 404, ["no such path"])

    def test_wrong_method(self):
        result = self.request("GET", BATCH)
        self.assertError(result, 405, ["GET", "POST"])
        self.assertEqual(result[1].getheader("Allow"), "POST")
        result = self.request("POST", "/healthz", {"cases": []})
        self.assertError(result, 405, ["POST"])
        self.assertEqual(result[1].getheader("Allow"), "GET")
        self.assertError(self.request("DELETE", BATCH), 405, ["DELETE"])

    def test_unsupported_method_is_json_too(self):
        self.assertError(self.request("BREW", BATCH), 501, ["BREW"])

    def test_body_over_the_limit(self):
        result = self.raw_request("POST", BATCH, {
            "Content-Type": "application/json",
            "Content-Length": str(service.MAX_BODY_BYTES + 1)})
        self.assertError(result, 413, [str(service.MAX_BODY_BYTES + 1), "limit"])

    def test_missing_content_length(self):
        self.assertError(self.raw_request("POST", BATCH, {"Content-Type": "application/json"}),
                         411, ["Content-Length"])

    def test_bad_content_length(self):
        self.assertError(self.raw_request("POST", BATCH, {"Content-Length": "ten"}), 400,
                         ["Content-Length"])

    def test_server_keeps_serving_after_errors(self):
        self.request("POST", BATCH, b"nope")
        self.assertEqual(self.request("GET", "/healthz")[0], 200)


class ConcurrencyTest(ServerTestCase):

    CLIENTS = 20
    REQUESTS = 20

    def test_concurrent_clients(self):
        # Expected answers computed in process on a separate network, so the
        # server's lazily filled caches start cold and are raced.
        lines, stations = fixture_lines(), fixture_stations()
        expected = {seed: evaluate_cases(sample_cases(seed), lines, stations)
                    for seed in range(self.CLIENTS * self.REQUESTS)}
        failures = self.concurrent_posts(
            BATCH, self.CLIENTS, self.REQUESTS,
            lambda number, i: {"cases": sample_cases(number * self.REQUESTS + i)},
            lambda number, i: {"results": expected[number * self.REQUESTS + i]})
        self.assertEqual(failures, [])
        self.assertEqual(len(self.log), self.CLIENTS * self.REQUESTS)


class BadCaseTest(ServerTestCase):
    """One bad case gets its own error result; the rest of the batch is judged."""

    def assertOnlyCaseFails(self, bad_case, words, raw=None):
        good = sample_cases()
        if raw is None:
            body = json.dumps({"cases": good[:3] + [bad_case] + good[3:]}).encode("ascii")
        else:                               # JSON text json.dumps cannot write
            body = ('{"cases": [%s, %s, %s]}' % (json.dumps(good[0]), raw,
                                                 json.dumps(good[1]))).encode("ascii")
            good = good[:2]
        status, response, payload = self.request("POST", BATCH, body)
        self.assertEqual(status, 200, payload)
        results = payload["results"]
        bad_at = 3 if raw is None else 1
        bad = results.pop(bad_at)
        self.assertEqual(results, evaluate_cases(good, self.lines, self.stations))
        self.assertEqual(bad["reachable_code"], "case_error")
        self.assertFalse(bad["reachable"])
        for word in words:
            self.assertIn(word, bad["error"])

    def test_lone_surrogate_in_a_station_name(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线"], ["罗湖", "\ud800"]),
                                 ["station_name entry 2", "lone surrogate"])

    def test_lone_surrogate_in_a_line_name(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线\udc00"], ["罗湖", "国贸"]),
                                 ["line_sequence entry 1", "lone surrogate"])

    def test_latitude_140(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线"], ["罗湖", "国贸"], start=(114.0, 140)),
                                 ["start latitude 140 is outside -90..90"])

    def test_longitude_200(self):
        self.assertOnlyCaseFails(make_case(["地铁1号线"], ["罗湖", "国贸"], end=(200, 22.5)),
                                 ["end longitude 200 is outside -180..180"])

    def test_infinite_and_nan_coordinates(self):
        for raw in ("Infinity", "-Infinity", "NaN", "1e400"):
            with self.subTest(raw=raw):
                case = json.dumps(make_case(["地铁1号线"], ["罗湖", "国贸"]))
                case = case.replace('"start": [114.0, 22.5]', '"start": [%s, 22.5]' % raw)
                self.assertIn(raw, case)
                self.assertOnlyCaseFails(None, ["start is not two finite numbers"], raw=case)

    def test_wrong_types(self):
        self.assertOnlyCaseFails({"city": ["深圳"], "start": [114, 22], "end": [114, 22],
                                  "pred": {"line_sequence": [], "station_name": []}},
                                 ["city is a list"])
        self.assertOnlyCaseFails(None, ["case is null"], raw="null")

    def test_answer_is_ascii_even_for_surrogates_in_the_data(self):
        # A data file may hold a lone surrogate (JSON "\ud800" in line_info):
        # the answer echoes it escaped instead of failing to encode.
        self.server.lines = LineTable.from_rows([("0755", "地铁1号线", [
            {"station_name": "罗湖\ud800", "stop_id": "bus-1"},
            {"station_name": "国贸", "stop_id": "bus-2"}])])
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            body = json.dumps({"cases": [make_case(["地铁1号线"], ["罗湖", "国贸"])]})
            conn.request("POST", BATCH, body=body.encode("ascii"))
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        self.assertEqual(response.status, 200)
        raw.decode("ascii")                     # no UnicodeDecodeError: pure ASCII
        self.assertIn(b"\\ud800", raw)
        result = json.loads(raw.decode("ascii"))["results"][0]
        self.assertTrue(result["reachable"], result)
        self.assertEqual(result["match_details"][0]["boarding_name"], "罗湖\ud800")


class BodyShapeTest(unittest.TestCase):
    """body_shape_problem: the scan before decoding (hand-made texts)."""

    def test_small_bodies_pass(self):
        for text in ("", "{}", '{"cases": []}', '{"cases": [1, 2, 3]}', "[[[]]]", "not json"):
            self.assertIsNone(service.body_shape_problem(text, max_items=3, max_depth=3), text)

    def test_too_many_items_in_any_list(self):
        self.assertEqual(service.body_shape_problem('{"cases": [1, 2, 3, 4]}', 3, 10)[0], 413)
        self.assertIsNone(service.body_shape_problem('{"cases": [1, 2, 3]}', 3, 10))
        # A list inside a case counts too; an object's members do not.
        self.assertEqual(service.body_shape_problem('{"cases": [[1, 2, 3, 4]]}', 3, 10)[0],
                         413)
        self.assertIsNone(service.body_shape_problem('{"a": 1, "b": 2, "c": 3, "d": [1, 2]}',
                                                     3, 10))
        self.assertIsNone(service.body_shape_problem('{"cases": [[1, 2, 3], [4, 5, 6], 7]}',
                                                     3, 10))

    def test_too_deep(self):
        status, message = service.body_shape_problem("[" * 4 + "]" * 4, 3, 3)
        self.assertEqual(status, 400)
        self.assertIn("nested more than 3 levels", message)
        self.assertIsNone(service.body_shape_problem("[" * 3 + "]" * 3, 3, 3))
        self.assertIsNone(service.body_shape_problem('{"a": [{"b": 1}], "c": [{}]}', 3, 3))
        self.assertEqual(service.body_shape_problem('{"a": [{"b": []}]}', 3, 3)[0], 400)

    def test_brackets_and_commas_inside_strings_do_not_count(self):
        text = '{"cases": ["[[[[,,,,", "\\"[{,", "{{{{"]}'
        self.assertIsNone(service.body_shape_problem(text, max_items=3, max_depth=2))
        self.assertEqual(json.loads(text)["cases"][1], '"[{,')

    def test_defaults(self):
        cases = "[%s]" % ",".join(["0"] * service.MAX_CASES)
        self.assertIsNone(service.body_shape_problem('{"cases": %s}' % cases))
        one_more = '{"cases": %s}' % (cases[:-1] + ",0]")
        self.assertEqual(service.body_shape_problem(one_more)[0], 413)


class LimitsTest(ServerTestCase):

    def assertError(self, result, status, words):
        self.assertEqual(result[0], status, result[2])
        self.assertEqual(set(result[2]), {"error"})
        for word in words:
            self.assertIn(word, result[2]["error"])

    def test_body_nested_3000_deep(self):
        body = b'{"cases": ' + b"[" * 3000 + b"]" * 3000 + b"}"
        self.assertError(self.request("POST", BATCH, body), 400,
                         ["nested more than %d levels" % service.MAX_JSON_DEPTH])
        self.assertEqual(self.request("GET", "/healthz")[0], 200)

    def test_nesting_just_over_and_at_the_limit(self):
        depth = service.MAX_JSON_DEPTH
        # {"cases": [ is two levels; the case holds the rest.
        inner = depth - 2
        at_limit = '{"cases": [%s%s]}' % ("[" * inner, "]" * inner)
        status, _, payload = self.request("POST", BATCH, at_limit.encode("ascii"))
        self.assertEqual(status, 200, payload)
        self.assertIn("expected a JSON object", payload["results"][0]["error"])
        over = '{"cases": [{"city": %s%s}]}' % ("[" * inner, "]" * inner)
        self.assertError(self.request("POST", BATCH, over.encode("ascii")), 400,
                         ["nested more than"])

    def test_case_limit(self):
        cases = [make_case(["地铁1号线"], ["罗湖", "国贸"])] * service.MAX_CASES
        status, _, payload = self.request("POST", BATCH, {"cases": cases})
        self.assertEqual(status, 200)
        self.assertEqual(len(payload["results"]), service.MAX_CASES)
        self.assertError(self.request("POST", BATCH, {"cases": cases + [cases[0]]}), 413,
                         ["more than %d" % service.MAX_CASES, "smaller batches"])

    def test_ten_megabytes_of_tiny_cases_are_refused(self):
        count = 5 * 1000 * 1000
        body = b'{"cases": [' + b",".join([b"0"] * count) + b"]}"
        self.assertLessEqual(len(body), service.MAX_BODY_BYTES)
        self.assertError(self.request("POST", BATCH, body), 413, ["at most 1000 cases"])
        self.assertIn("413 - ", self.log[-1])      # refused before decoding: no case count

    def test_huge_integer_fails_its_case_only(self):
        body = ('{"cases": [%s, {"city": "%s", "start": [%s, 22], "end": [114, 22], '
                '"pred": {"line_sequence": [], "station_name": []}}]}'
                % (json.dumps(make_case(["地铁1号线"], ["罗湖", "国贸"])), SHENZHEN,
                   "9" * 5000)).encode("utf-8")
        status, _, payload = self.request("POST", BATCH, body)
        # Python 3.11+ refuses int() of over 4,300 digits: read as a float (inf),
        # it fails its own case only.
        self.assertEqual(status, 200, payload)
        self.assertNotIn("error", payload["results"][0])
        self.assertIn("start is not two finite numbers", payload["results"][1]["error"])


class ScriptTest(unittest.TestCase):
    """server.py run as a program, from another directory."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.station_path, self.line_path = write_fixture_files(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def start(self, *args):
        proc = subprocess.Popen([sys.executable, SERVER_SCRIPT] + list(args),
                                cwd=self.tmp.name, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True,
                                encoding="utf-8")
        # Never hang the test run if the server misbehaves.
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        self.addCleanup(watchdog.cancel)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def test_serve_then_sigterm(self):
        proc = self.start("--station_info", self.station_path, "--line_info", self.line_path,
                          "--port", "0")
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("listening on http://"):
                break
        self.assertTrue(seen and seen[-1].startswith("listening on http://"), seen)
        host_port = seen[-1].strip()[len("listening on http://"):]
        host, port = host_port.rsplit(":", 1)
        self.assertEqual(host, "127.0.0.1")

        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        cases = sample_cases()
        conn.request("POST", BATCH, body=json.dumps({"cases": cases}).encode("utf-8"),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read().decode("utf-8"))
        conn.close()
        self.assertEqual(response.status, 200)
        self.assertEqual(payload["results"],
                         evaluate_cases(cases, fixture_lines(), fixture_stations()))

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 143, err)      # stopped by SIGTERM, as every tool
        self.assertIn("shutting down", err)
        self.assertIn("POST %s 200 7 cases" % BATCH, err)
        self.assertNotIn("Traceback", err)

    def test_missing_file_exits_2_with_one_line(self):
        proc = self.start("--station_info", os.path.join(self.tmp.name, "missing.csv"),
                          "--line_info", self.line_path, "--port", "0")
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("missing.csv", err)

    def test_bad_read_timeout_exits_2_with_one_line(self):
        for value in ("0", "-1", "nan", "inf", "3601"):
            with self.subTest(value=value):
                proc = self.start("--station_info", self.station_path, "--line_info",
                                  self.line_path, "--port", "0", "--read_timeout", value)
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, 2)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn("--read_timeout", err)

    def test_malformed_line_file_exits_2(self):
        bad = os.path.join(self.tmp.name, "bad_lines.csv")
        with open(bad, "w", encoding="utf-8") as handle:
            handle.write("citycode,line_name,station_list\n0755,1路,\"[{\"\"a\"\"\"\n")
        proc = self.start("--station_info", self.station_path, "--line_info", bad,
                          "--port", "0")
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("bad_lines.csv line 2", err)


if __name__ == "__main__":
    unittest.main()
