"""transitlm/reward/service.py, the reward over HTTP (``reward.py serve``):
POST /get_reward answers what transitlm.reward.openrlhf.reward_func answers
in process, under concurrent load too; hostile bodies get a 4xx JSON error
naming the problem and never stop the service; a broken row is a 422 naming
the row and its field; the HTTP side is the route-eval service's (framing
checked here on the reward's route); reward.py serve as a program (SIGTERM,
SIGINT, settings it refuses).

OpenRLHF's side of the exchange, as its sources have it
(openrlhf/utils/agent.py, SingleTurnAgentExecutor.execute): one POST per
sample, ``{"query": [query], "prompts": [prompt], "labels": [label]}``, the
query being the templated prompt and the response decoded with its special
tokens; given several URLs, 0.11.2 sends each request to the next in turn
(SingleTurnAgentExecutor._fetch_rewards_via_http; 0.11.0 sent the servers
after the first empty lists, still answered); the reply's
``rewards``, ``scores`` and ``extra_logs`` (numbers only) are read
(openrlhf/trainer/ppo_utils/samples_generator.py)."""

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from tests.support import REPO
from tests.support.services import (FramingChecks, ServerTestCase, chatml, example_rows,
                                    run_reward, write_fixture_files)
from tests.support.hostile_text import reading_text
from transitlm.io import json_service  # noqa: E402
from transitlm.reward import openrlhf, service  # noqa: E402
from transitlm.reward.scoring import score  # noqa: E402

REWARD = service.REWARD_PATH
SCRIPT = os.path.join(REPO, "reward.py")
ROW_FIELDS = ("index_id", "task_id", "req_type", "sft_prompt", "sft_label")


def labelled_rows(benchmark, count, task="benchmark%s-train"):
    """(query, prompt, label) of the first ``count`` bundled rows of a
    benchmark, the label as prepare writes it (the row's JSON text), the
    query the prompt and the row's own answer with an end-of-turn token."""
    number = {"single_route": "1", "personalized": "2", "diversity": "3"}.get(benchmark)
    rows = []
    for row in example_rows(benchmark)[:count]:
        row = dict(row, task_id=task % number if number else "general")
        label = json.dumps({key: row[key] for key in ROW_FIELDS if key in row},
                           ensure_ascii=False)
        prompt = chatml([{"role": "system", "content": row["system_prompt"]},
                         {"role": "user", "content": row["sft_prompt"]}])
        rows.append((prompt + row["generate_results"] + "<|im_end|>", prompt, label))
    return rows


def mixed_rows():
    """Rows of every benchmark, as OpenRLHF would send them (14 rows)."""
    return (labelled_rows("single_route", 4) + labelled_rows("personalized", 4)
            + labelled_rows("diversity", 3) + labelled_rows("general_llm", 3))


def body_of(rows):
    queries, prompts, labels = (list(column) for column in zip(*rows)) if rows else ([], [], [])
    return {"query": queries, "prompts": prompts, "labels": labels}


class RewardServerTestCase(ServerTestCase):
    """The reward service on a free loopback port, bundled network."""

    SETTINGS = {}

    def make_server(self):
        self.options = service.checked_settings(**self.SETTINGS)
        return service.make_server(self.options, "127.0.0.1", 0, log=self.log.append,
                                   **self.SERVER_OPTIONS)

    def expected(self, rows):
        body = body_of(rows)
        return openrlhf.reward_func(body["query"], body["prompts"], body["labels"],
                                    **self.options)

    def assertError(self, result, status, words):
        self.assertEqual(result[0], status, result[2])
        self.assertEqual(result[1].getheader("Content-Type"), "application/json; charset=utf-8")
        self.assertEqual(set(result[2]), {"error"})
        for word in words:
            self.assertIn(word, result[2]["error"])


class AnswerTest(RewardServerTestCase):

    def test_answers_what_reward_func_answers(self):
        rows = mixed_rows()
        status, _, payload = self.request("POST", REWARD, body_of(rows))
        self.assertEqual(status, 200, payload)
        self.assertEqual(payload, self.expected(rows))
        # ... which is the score of each row's answer, by its benchmark's rules.
        benchmarks = ["single_route"] * 4 + ["personalized"] * 4 + ["diversity"] * 3 + \
            ["general_llm"] * 3
        for (query, prompt, label), benchmark, reward in zip(rows, benchmarks,
                                                            payload["rewards"]):
            row = json.loads(label)
            self.assertEqual(reward, score(query[len(prompt):], row, benchmark)["score"])
        self.assertEqual(sorted(payload["extra_logs"]), sorted(openrlhf.LOGGED))
        self.assertGreater(sum(payload["extra_logs"]["rem"]), 5)      # not all failures
        self.assertIn("POST %s 200 14 rows" % REWARD, self.log[-1])

    def test_one_row_per_request_as_openrlhf_sends(self):
        for row in mixed_rows()[::4]:
            status, _, payload = self.request("POST", REWARD, body_of([row]))
            self.assertEqual(status, 200, payload)
            self.assertEqual(payload, self.expected([row]))
            self.assertEqual(len(payload["rewards"]), 1)

    def test_empty_lists(self):
        status, _, payload = self.request("POST", REWARD, body_of([]))
        self.assertEqual(status, 200)
        self.assertEqual(payload, {"rewards": [], "scores": [],
                                   "extra_logs": {key: [] for key in openrlhf.LOGGED}})

    def test_labels_as_objects_and_other_keys_ignored(self):
        rows = labelled_rows("single_route", 3)
        body = body_of(rows)
        body["labels"] = [json.loads(label) for label in body["labels"]]
        body["datasource"] = ["x"] * 3
        status, _, payload = self.request("POST", REWARD, body)
        self.assertEqual(status, 200, payload)
        self.assertEqual(payload, self.expected(rows))

    def test_labels_as_a_dataframe_holds_them(self):
        rows = labelled_rows("personalized", 4)
        body = body_of(rows)
        labels = []
        for label in body["labels"]:
            row = json.loads(label)
            labels.append(dict(row, req_type=int(row["req_type"]),
                               sft_label=json.loads(row["sft_label"]),
                               sft_prompt=json.loads(row["sft_prompt"])))
        status, _, payload = self.request("POST", REWARD, dict(body, labels=labels))
        self.assertEqual(status, 200, payload)
        self.assertEqual(payload, self.expected(rows))

    def test_a_completion_never_fails_a_request(self):
        query, prompt, label = labelled_rows("single_route", 1)[0]
        odd = ["", "<think>still thinking", "NaN", '{"a": ' * 5000, "[" * 200000,
               "\ud800 \x1b[2J", "x" * (1 << 20), '["line_sequence"]']
        rows = [(prompt + text, prompt, label) for text in odd]
        status, _, payload = self.request("POST", REWARD,
                                          json.dumps(body_of(rows)).encode("ascii"))
        self.assertEqual(status, 200, payload)
        self.assertEqual(payload, self.expected(rows))
        self.assertEqual(payload["rewards"], [0.0] * len(odd))
        self.assertEqual(payload["extra_logs"]["format"], [0.0] * len(odd))

    def test_healthz_says_the_settings(self):
        status, _, payload = self.request("GET", "/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(payload["status"], "ok")
        self.assertEqual((payload["benchmark"], payload["protocol"], payload["shaping"],
                          payload["failure"]), (None, None, "dense", 0.0))   # protocol: each row's
        status, _, payload = self.request("HEAD", "/healthz")
        self.assertEqual((status, payload), (200, None))

    def test_keep_alive(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            for row in mixed_rows()[:3]:
                status, _, payload = self.request("POST", REWARD, body_of([row]),
                                                  connection=conn)
                self.assertEqual((status, len(payload["rewards"])), (200, 1))
        finally:
            conn.close()


class SettingsTest(RewardServerTestCase):
    """The service's settings are those of every answer."""

    SETTINGS = {"shaping": "gated", "failure": -1.0, "weights": {"rem": 3.0},
                "protocol": "paper"}

    def test_answers_with_the_settings(self):
        rows = mixed_rows()
        rows.append((rows[0][1] + "not an answer", rows[0][1], rows[0][2]))
        payload = self.request("POST", REWARD, body_of(rows))[2]
        self.assertEqual(payload, self.expected(rows))
        self.assertEqual(payload["rewards"][-1], -1.0)          # the failure score
        self.assertEqual(payload["scores"][-1], 0.0)            # scores stay in [0, 1]
        default = openrlhf.reward_func(*body_of(rows).values())
        self.assertNotEqual(payload["rewards"], default["rewards"])
        health = self.request("GET", "/healthz")[2]
        self.assertEqual((health["protocol"], health["shaping"], health["failure"],
                          health["weights"]), ("paper", "gated", -1.0, {"rem": 3.0}))


class StrictJsonTest(RewardServerTestCase):
    """Every answer is strict JSON: the largest weights and failure score
    allowed give finite numbers, and a number that is not finite would be a
    500 naming it, never ``NaN`` in a body."""

    SETTINGS = {"weights": dict.fromkeys(("format", "conn", "sg", "dp", "lo", "sso", "rem",
                                          "ea", "pc", "rd"), 1e6), "failure": -1e300}

    def raw_post(self, rows):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("POST", REWARD, body=json.dumps(body_of(rows)).encode("ascii"))
            response = conn.getresponse()
            return response.status, strict_loads(response.read())
        finally:
            conn.close()

    def test_extreme_settings_give_finite_numbers(self):
        rows = mixed_rows()
        rows.append((rows[0][1] + "{}", rows[0][1], rows[0][2]))
        status, payload = self.raw_post(rows)
        self.assertEqual(status, 200, payload)
        self.assertEqual(payload, self.expected(rows))
        self.assertEqual(payload["rewards"][0], 1.0)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        self.addCleanup(conn.close)
        conn.request("GET", "/healthz")
        self.assertEqual(strict_loads(conn.getresponse().read())["weights"]["rem"], 1e6)

    def test_a_number_that_is_not_finite_is_a_500(self):
        def nan_reward(queries, prompts, labels, **options):
            return {"rewards": [float("nan")], "scores": [0.0], "extra_logs": {}}
        self.addCleanup(setattr, service, "reward_func", service.reward_func)
        service.reward_func = nan_reward
        status, payload = self.raw_post(labelled_rows("single_route", 1))
        self.assertEqual(status, 500)
        self.assertIn("rewards[0] is nan, not a finite number", payload["error"])
        with self.assertRaises(ValueError):
            json_service.encode_json({"x": float("inf")})


class MissingLineFileTest(RewardServerTestCase):
    """A network without a line file: general-LLM rows cannot be scored, the
    others can; said at start-up and in a 500 naming the file."""

    def make_server(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        station, line = write_fixture_files(self.tmp.name)
        os.remove(line)
        self.SETTINGS = {"station_info": station}
        self.notes = service.load_scorers(service.checked_settings(**self.SETTINGS))
        return RewardServerTestCase.make_server(self)

    def test_general_llm_rows_get_a_500(self):
        self.assertIn("general_llm rows cannot be scored: no line file beside the station "
                      "file", self.notes[-1])
        result = self.request("POST", REWARD, body_of(labelled_rows("general_llm", 1)))
        self.assertError(result, 500, ["cannot score these rows", "no line file"])
        status, _, payload = self.request("POST", REWARD,
                                          body_of(labelled_rows("single_route", 1)))
        self.assertEqual(status, 200, payload)


def strict_loads(raw):
    """json.loads refusing NaN and Infinity, as every JSON parser but Python's does."""
    def refuse(constant):
        raise ValueError("not JSON: %s" % constant)
    return json.loads(raw.decode("ascii"), parse_constant=refuse)


class BadRequestTest(RewardServerTestCase):
    """Every bad request: a 4xx JSON error naming the problem, and the service
    answers the next one."""

    def post(self, body):
        return self.request("POST", REWARD, body)

    def test_bodies_of_the_wrong_shape(self):
        rows = body_of(labelled_rows("single_route", 2))
        cases = [
            (b'{"query": [', 400, ["not valid JSON"]),
            (b'\xff\xfe{}', 400, ["UTF-8"]),
            (b'["query"]', 400, ["JSON object", '"query"', '"labels"']),
            (dict(rows, query=None), 400, ['"query" must be a list, not null']),
            (dict(rows, labels="x"), 400, ['"labels" must be a list, not text']),
            ({"query": [], "labels": []}, 400, ['no "prompts" list']),
            (dict(rows, prompts=rows["prompts"][:1]), 400, ["differ in length (2, 1, 2)"]),
            (dict(rows, labels=rows["labels"] * 2), 400, ["differ in length (2, 2, 4)"]),
            (dict(rows, query=[rows["query"][0], 7]), 400, ["query[1] is a number", "text"]),
            (dict(rows, prompts=[None, "p"]), 400, ["prompts[0] is null"]),
            (b'{"query": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400,
             ["nested more than 100 levels"]),
            (b'{"query": [' + b",".join([b'"q"'] * (service.MAX_ROWS + 1)) + b"]}", 413,
             ["at most %d rows per request" % service.MAX_ROWS]),
        ]
        for body, status, words in cases:
            with self.subTest(body=str(body)[:60]):
                self.assertError(self.post(body), status, words)
        self.assertEqual(self.post(rows)[0], 200)

    def test_a_body_over_the_limit(self):
        result = self.raw_request("POST", REWARD, {
            "Content-Length": str(service.MAX_BODY_BYTES + 1)})
        self.assertError(result, 413, [str(service.MAX_BODY_BYTES), "limit"])

    def test_a_broken_row_is_a_422_naming_it(self):
        good = labelled_rows("personalized", 3)
        row = json.loads(good[1][2])
        broken = [("sft_label", dict(row, sft_label="{not json"), "sft_label"),
                  ("sft_prompt", dict(row, sft_prompt='{"query": "q"}'), "sft_prompt"),
                  ("req_type", dict(row, req_type="often"), "req_type"),
                  ("task_id", dict(row, task_id="benchmark9"), "task_id"),
                  ("not a row", 17, "int"),
                  # Issue 38: the row's own faults, never the completion's.
                  ("deep label", dict(row, sft_label="[" * 150 + "]" * 150), "sft_label"),
                  ("deep prompt", dict(row, sft_prompt='{"start": ' + "[" * 150 + "]" * 150 + "}"),
                   "sft_prompt"),
                  ("no label", {k: v for k, v in row.items() if k != "sft_label"},
                   "sft_label"),
                  ("fractional req_type", dict(row, req_type=2.5), "req_type")]
        for name, label, words in broken:
            with self.subTest(name):
                rows = list(good)
                rows[1] = (good[1][0], good[1][1], label)
                result = self.post(body_of(rows))
                self.assertError(result, 422, ["labels[1]: ", words])
        self.assertEqual(self.post(body_of(good))[0], 200)

    def test_unknown_path_and_wrong_method(self):
        self.assertError(self.request("GET", "/reward"), 404,
                         ["no such path: /reward", "POST /get_reward", "GET /healthz"])
        result = self.request("GET", REWARD)
        self.assertError(result, 405, ["GET", "POST"])
        self.assertEqual(result[1].getheader("Allow"), "POST")
        self.assertError(self.request("BREW", REWARD), 501, ["BREW"])
        self.assertError(self.raw_request("POST", REWARD, {}), 411, ["Content-Length"])


class ConcurrencyTest(RewardServerTestCase):
    """8 clients post at once, each on its own keep-alive connection; every
    answer is the in-process one (the scorers are shared between threads)."""

    CLIENTS = 8
    REQUESTS = 6

    def test_concurrent_clients(self):
        rows = mixed_rows()
        batches = {(number, index): rows[(number + index) % len(rows):][:1 + index]
                   for number in range(self.CLIENTS) for index in range(self.REQUESTS)}
        expected = {key: self.expected(batch) for key, batch in batches.items()}
        failures = self.concurrent_posts(
            REWARD, self.CLIENTS, self.REQUESTS,
            lambda number, index: body_of(batches[number, index]),
            lambda number, index: expected[number, index])
        self.assertEqual(failures, [])
        self.assertEqual(len(self.log), self.CLIENTS * self.REQUESTS)


class StallingBodyTest(RewardServerTestCase):
    """Issue 38: one request never holds the others.  While the largest body
    the service accepts, its completion made of the pattern that once took
    minutes (escaped quotes: the reading restarted at every quote), is
    decoded and scored, /healthz answers within HEALTHZ_S (about 40 ms at
    most here): no step of the decoding or the reading runs in C over more
    than a chunk of the text without letting other threads run.  The
    interpreter switches threads as reward.py serve makes it
    (json_service.SWITCH_INTERVAL_S)."""

    HEALTHZ_S = 0.1              # the bound, on every answer but the slowest
    SLOWEST_S = 0.5              # the slowest one, with room for a loaded machine
    # (json.loads of the body in one call made the slowest 60-170 ms)
    MIN_ANSWERS = 3

    def test_healthz_answers_while_the_worst_body_is_scored(self):
        switch = sys.getswitchinterval()
        self.addCleanup(sys.setswitchinterval, switch)
        sys.setswitchinterval(json_service.SWITCH_INTERVAL_S)
        _, prompt, label = labelled_rows("single_route", 1)[0]
        frame = len(json.dumps(body_of([("", prompt, label)])).encode("utf-8"))
        unit = '\\"{'                    # each character escaped in the body: 5 bytes for 3
        query = reading_text("escaped quotes", (service.MAX_BODY_BYTES - frame) * 3 // 5)
        body = json.dumps(body_of([(query, prompt, label)])).encode("utf-8")
        self.assertTrue(query.startswith(unit))
        self.assertLessEqual(len(body), service.MAX_BODY_BYTES)
        self.assertGreater(len(body), service.MAX_BODY_BYTES - 16)
        started, answered, result = threading.Event(), threading.Event(), []
        parse_request = service.parse_request

        def parse_and_tell(raw):
            started.set()
            return parse_request(raw)

        def post():
            try:
                result.append(self.request("POST", REWARD, body))
            finally:
                answered.set()
        with mock.patch.object(service, "parse_request", parse_and_tell):
            poster = threading.Thread(target=post)
            poster.start()
            self.addCleanup(poster.join, 60)
            self.assertTrue(started.wait(60))
            times = []
            while not answered.is_set():
                began = time.perf_counter()
                status = self.request("GET", "/healthz")[0]
                took = time.perf_counter() - began
                self.assertEqual(status, 200)
                if not answered.is_set():       # answered while the body was being scored
                    times.append(took)
            poster.join(60)
        self.assertEqual(result[0][0], 200, result[0][2])
        self.assertEqual((result[0][2]["rewards"], result[0][2]["extra_logs"]["format"]),
                         ([0.0], [0.0]))             # unreadable (too_deep), not an error
        self.assertGreaterEqual(len(times), self.MIN_ANSWERS, times)
        times.sort()
        self.assertLess(times[-1], self.SLOWEST_S, times)
        self.assertLess(times[-2], self.HEALTHZ_S, times)


class FramingTest(FramingChecks, RewardServerTestCase):
    """RFC 9112 framing on the reward's route: the route-eval service's
    machinery (tests/test_general_llm_server_http.py has every case)."""

    PATH = REWARD.encode("ascii")
    BODY = b'{"query": [], "prompts": [], "labels": []}'

    def test_framing_attacks_are_refused(self):
        cases = ((b"Content-Length: +42\r\n", 400, "is not a byte count"),
                 (b"Content-Length: 42\r\nContent-Length: 42\r\n", 400,
                  "2 Content-Length fields"),
                 (b"Transfer-Encoding: chunked\r\nContent-Length: 42\r\n", 400,
                  "both Transfer-Encoding and Content-Length"),
                 (b"Transfer-Encoding: gzip, chunked\r\n", 501, "'gzip' is not supported"),
                 (b"Content-Length: 99999999999\r\n", 413, "exceeds the 16777216-byte limit"),
                 (b"X-Big: " + b"a" * 70000 + b"\r\n", 431, "exceed 65536 bytes"))
        for head, status, words in cases:
            with self.subTest(head[:40]):
                self.assertRefused(head, status, words)

    def test_a_chunked_body_is_read(self):
        body = b"9\r\n" + self.BODY[:9] + b"\r\n" + (b"%x\r\n" % (len(self.BODY) - 9)) + \
            self.BODY[9:] + b"\r\n0\r\n\r\n"
        status, answer = self.exchange(b"Transfer-Encoding: chunked\r\nConnection: close\r\n",
                                       body)
        self.assertEqual(status, 200, answer)
        self.assertIn(b'"rewards": []', answer)


class ScriptTest(unittest.TestCase):
    """reward.py serve as a program, from another directory."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def start(self, *args, **env):
        proc = subprocess.Popen([sys.executable, SCRIPT, "serve", "--port", "0"] + list(args),
                                cwd=self.tmp.name, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True,
                                encoding="utf-8", env=dict(os.environ, **env))
        watchdog = threading.Timer(60, proc.kill)       # never hang the suite
        watchdog.start()
        self.addCleanup(watchdog.cancel)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def listening(self, proc):
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("listening on http://"):
                host, port = line.strip()[len("listening on http://"):].rsplit(":", 1)
                return host, int(port), seen
        self.fail("the service did not start: %s" % "".join(seen))

    def test_serve_then_stop(self):
        for stop, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            with self.subTest(stop=stop):
                proc = self.start("--benchmark", "single_route", "--shaping", "sparse")
                host, port, seen = self.listening(proc)
                self.assertEqual(host, "127.0.0.1")            # loopback by default
                self.assertIn("reward: single_route; protocol each row's own (reference for a "
                              "row without one), shaping sparse", "".join(seen))
                rows = labelled_rows("single_route", 5)
                conn = http.client.HTTPConnection(host, port, timeout=30)
                conn.request("POST", REWARD, body=json.dumps(body_of(rows)).encode("ascii"))
                response = conn.getresponse()
                payload = json.loads(response.read().decode("ascii"))
                conn.close()
                self.assertEqual(response.status, 200)
                body = body_of(rows)
                self.assertEqual(payload, openrlhf.reward_func(
                    body["query"], body["prompts"], body["labels"], shaping="sparse"))
                proc.send_signal(stop)
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, status, err)
                self.assertIn("POST %s 200 5 rows" % REWARD, err)
                self.assertIn("shutting down", err)
                self.assertNotIn("Traceback", err)

    def test_settings_it_refuses_exit_2_with_one_line(self):
        # In process: each is refused before the service listens.
        station, _ = write_fixture_files(self.tmp.name)
        os.remove(os.path.join(self.tmp.name, "line_info.csv"))
        cases = [(["--shaping", "steep"], {}, "invalid choice: 'steep'"),
                 (["--failure", "nan"], {}, "--failure: the failure score must be a finite"),
                 ([], {"TRANSITLM_REWARD_FAILURE": "low"}, "$TRANSITLM_REWARD_FAILURE: "),
                 ([], {"TRANSITLM_REWARD_SHAPING": "steep"}, "$TRANSITLM_REWARD_SHAPING: "),
                 (["--weights", "rem=3,speed=1"], {}, "unknown weight 'speed'"),
                 (["--weights", "rem"], {}, "KEY=NUMBER"),
                 (["--weights", "rem=1e308"], {}, "weight rem must be 0 or a number from"),
                 (["--failure", "inf"], {}, "--failure: the failure score must be a finite"),
                 (["--station_info", "missing.csv"], {}, "missing.csv"),
                 (["--station_info", station, "--benchmark", "general_llm"], {},
                  "no line file beside the station file"),
                 (["--read_timeout", "0"], {}, "--read_timeout must be more than 0"),
                 (["--port", "70000"], {}, "cannot listen on 127.0.0.1:70000")]
        # Were one accepted, the test fails instead of serving for ever.
        self.addCleanup(setattr, service, "serve_until_stopped", service.serve_until_stopped)
        service.serve_until_stopped = lambda server, lines: server.server_close() or "served"
        for args, env, words in cases:
            with self.subTest(args=args, env=env):
                status, out, err = run_reward(["serve", "--port", "0"] + args, env)
                self.assertEqual((status, out), (2, ""), err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(words, err)


if __name__ == "__main__":
    unittest.main()
