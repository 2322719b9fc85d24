"""transitlm/reward: each adapter called exactly as its trainer calls it, and
completions of any content never raising.

The calling conventions, as the trainers' sources have them (read 2026-11):
- TRL GRPOTrainer._calculate_rewards (trl/trainer/grpo_trainer.py, v1.9): every
  argument by keyword -- prompts, completions, completion_ids, trainer_state,
  log_extra, log_metric and each dataset column but "prompt" as a list, one
  entry per completion; conversational completions are
  [[{"role": "assistant", "content": text}], ...]; log_metric(name, value) once
  per batch; each function logged under its __name__.
- verl NaiveRewardManager.run_single
  (verl/experimental/reward_loop/reward_manager/naive.py): compute_score(
  data_source=, solution_str=, ground_truth=, extra_info=) with reward_kwargs
  as further keywords; extra_info carries verl's own num_turns and
  rollout_reward_scores; the keys of the first sample's dict are read from every
  other sample.  The legacy BatchRewardManager.verify
  (verl/workers/reward_manager/batch.py): compute_score(data_sources=,
  solution_strs=, ground_truths=, extra_infos=).
- OpenRLHF SingleTurnAgentExecutor.execute (openrlhf/utils/agent.py):
  reward_func([query], [prompt], [label]) -- three positional lists of one
  entry; the query is the templated prompt then the response, decoded with
  its special tokens; extra_logs values become tensors (numbers only); the
  HTTP requests go to several URLs in turn (0.11.2; earlier, the later
  servers got empty lists).
"""

import csv
import json
import math
import os
import random
import time
import unittest

from tests.support import REPO
from transitlm.reward import batch, openrlhf, scoring, settings, trl, verl  # noqa: E402

DATA = os.path.join(REPO, "data")
EXAMPLES = {"single_route": "benchmark1_single_route_example.csv",
            "personalized": "benchmark2_personalized_example.csv",
            "diversity": "benchmark3_diversity_example.csv",
            "general_llm": "general_llm_example.csv"}
TASK_IDS = {"single_route": "benchmark1-test", "personalized": "benchmark2-test",
            "diversity": "benchmark3-test", "general_llm": "general-test"}


def release_rows(benchmark):
    """The bundled example rows as the release has them (with a task_id)."""
    with open(os.path.join(DATA, EXAMPLES[benchmark]), encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["task_id"] = TASK_IDS[benchmark]
    return rows


def direct(completion, row, **options):
    return scoring.score(completion, row, **options)


class TrlTest(unittest.TestCase):
    def call(self, function, completions, rows, **extra):
        columns = {key: [row.get(key, "") for row in rows]
                   for key in ("sft_prompt", "sft_label", "req_type", "task_id", "index_id",
                               "generate_results")}
        prompts = [[{"role": "user", "content": row["sft_prompt"]}] for row in rows]
        return function(prompts=prompts, completions=completions,
                        completion_ids=[[1, 2, 3]] * len(completions), trainer_state=object(),
                        **dict(columns, **extra))

    def test_route_reward_as_grpo_calls_it(self):
        rows = release_rows("personalized")[:8]
        completions = [row["generate_results"] for row in rows]
        logged, extra = [], []
        rewards = self.call(trl.route_reward, completions, rows,
                            log_metric=lambda name, value: logged.append((name, value)),
                            log_extra=lambda column, values: extra.append(column))
        self.assertEqual(len(rewards), len(completions))
        self.assertTrue(all(isinstance(value, float) for value in rewards))
        self.assertEqual(rewards, [direct(c, r)["score"] for c, r in zip(completions, rows)])
        names = dict(logged)
        self.assertEqual(set(names), {"transitlm/" + key for key in scoring.KEYS
                                      if key not in ("error_code", "pred")})
        self.assertAlmostEqual(names["transitlm/pc"],
                               sum(direct(c, r)["pc"] for c, r in zip(completions, rows)) / 8)

    def test_conversational_completions(self):
        rows = release_rows("single_route")[:5]
        plain = self.call(trl.route_reward, [row["generate_results"] for row in rows], rows)
        chat = self.call(trl.route_reward,
                         [[{"role": "assistant", "content": row["generate_results"]}]
                          for row in rows], rows)
        self.assertEqual(plain, chat)

    def test_components_have_their_own_names(self):
        names = [function.__name__ for function in trl.COMPONENTS.values()]
        self.assertEqual(len(set(names + [trl.route_reward.__name__])), len(names) + 1)
        self.assertEqual(set(trl.COMPONENTS), set(("format",) + scoring.TERMS))
        rows = release_rows("diversity")[:6]
        completions = [row["generate_results"] for row in rows]
        for key, function in trl.COMPONENTS.items():
            self.assertEqual(self.call(function, completions, rows),
                             [direct(c, r)[key] for c, r in zip(completions, rows)], key)

    def test_the_component_recipe_logs_every_key_once_per_batch(self):
        rows = release_rows("single_route")[:4]
        completions = [row["generate_results"] + " " for row in rows]    # a batch of its own
        logged = []
        for function in (trl.route_format, trl.route_conn, trl.route_rem, trl.route_ea):
            self.call(function, completions, rows,
                      log_metric=lambda name, value: logged.append((function.__name__, name)))
        names = {"transitlm/" + key for key in scoring.KEYS if key not in ("error_code", "pred")}
        # The first function scored the batch and logged it; the others reused it.
        self.assertEqual(logged, [("route_format", name) for name in sorted(names)])
        # A batch the memo does not keep is logged by each (the same means:
        # TRL averages them).
        logged = []
        odd = [[{"role": "assistant", "content": object()}]] * 4
        for function in (trl.route_format, trl.route_conn):
            self.call(function, odd, rows,
                      log_metric=lambda name, value: logged.append((function.__name__, name)))
        self.assertEqual(len(logged), 2 * len(names))

    def test_make_reward_and_a_missing_column(self):
        rows = release_rows("single_route")[:3]
        gated = trl.make_reward("gated_paper", shaping="gated", protocol="paper")
        self.assertEqual(gated.__name__, "gated_paper")
        completions = [row["generate_results"] for row in rows]
        self.assertEqual(self.call(gated, completions, rows),
                         [direct(c, r, shaping="gated", protocol="paper")["score"]
                          for c, r in zip(completions, rows)])
        with self.assertRaises(ValueError):
            trl.route_reward(prompts=["p"], completions=["c"], sft_prompt=["x"])
        with self.assertRaises(ValueError):
            trl.make_reward("x", shape="dense")


class VerlTest(unittest.TestCase):
    def test_compute_score_as_the_reward_loop_calls_it(self):
        results = []
        for benchmark in EXAMPLES:
            for row in release_rows(benchmark)[:4]:
                result = verl.compute_score(
                    data_source="transitlm/%s" % benchmark, solution_str=row["generate_results"],
                    ground_truth=json.dumps(row, ensure_ascii=False),
                    extra_info={"split": "test", "index": 0, "num_turns": None,
                                "rollout_reward_scores": {}})
                self.assertEqual(result, direct(row["generate_results"], row))
                results.append(result)
        # The same keys, in the same order, for every sample of every benchmark.
        self.assertEqual({tuple(result) for result in results}, {scoring.KEYS})
        self.assertTrue(all(isinstance(result["acc"], float) for result in results))

    def test_reward_kwargs_and_a_label_only_ground_truth(self):
        row = release_rows("single_route")[3]
        extra = {key: row[key] for key in ("sft_prompt", "index_id")}
        result = verl.compute_score(data_source="transitlm/single_route",
                                    solution_str=row["generate_results"],
                                    ground_truth=row["sft_label"], extra_info=extra,
                                    shaping="sparse", failure=-1.0)
        self.assertEqual(result, direct(row["generate_results"], row, shaping="sparse",
                                        benchmark="single_route"))
        self.assertEqual(verl.compute_score(data_source="transitlm/single_route",
                                            solution_str="<think>cut short",
                                            ground_truth=json.dumps(row), failure=-1.0)["score"],
                         -1.0)

    def test_compute_score_batch_as_the_batch_manager_calls_it(self):
        rows = release_rows("diversity")[:5] + release_rows("general_llm")[:3]
        results = verl.compute_score_batch(
            data_sources=tuple("transitlm" for _ in rows),
            solution_strs=[row["generate_results"] for row in rows],
            ground_truths=[json.dumps(row) for row in rows],
            extra_infos=tuple({"rollout_reward_scores": {}} for _ in rows))
        self.assertEqual(results, [direct(row["generate_results"], row) for row in rows])


class OpenRLHFTest(unittest.TestCase):
    PROMPT = "<|im_start|>system\nplan<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n" \
             "<|im_start|>assistant\n"

    def test_reward_func_as_the_agent_calls_it(self):
        for benchmark in EXAMPLES:
            row = release_rows(benchmark)[2]
            prompt = self.PROMPT % row["sft_prompt"]
            query = prompt + "<think>a draft {\"a\": 1}</think>" + row["generate_results"] \
                + "<|im_end|>"
            answer = openrlhf.reward_func([query], [prompt], [json.dumps(row)])
            expected = direct(row["generate_results"], row)
            self.assertEqual(answer["rewards"], [expected["score"]])
            self.assertEqual(answer["scores"], [expected["score"]])
            self.assertEqual(set(answer["extra_logs"]),
                             set(scoring.KEYS) - {"score", "error_code", "pred"})
            for key, values in answer["extra_logs"].items():
                self.assertEqual(values, [expected[key]], key)
                self.assertIsInstance(values[0], float)

    def test_a_left_truncated_prompt_and_empty_lists(self):
        row = release_rows("single_route")[0]
        prompt = self.PROMPT % row["sft_prompt"]
        query = prompt[40:] + row["sft_label"] + "<|im_end|>"      # the prompt's start was cut
        self.assertEqual(openrlhf.reward_func([query], [prompt], [json.dumps(row)])["rewards"],
                         [1.0])
        # The prompt nowhere in the query: the response after the assistant's turn starts.
        query = "<|im_start|>user\nother<|im_end|>\n<|im_start|>assistant\n" + row["sft_label"]
        self.assertEqual(openrlhf.reward_func([query], ["unrelated"], [json.dumps(row)])
                         ["rewards"], [1.0])
        self.assertEqual(openrlhf.reward_func([], [], []),
                         {"rewards": [], "scores": [], "extra_logs": {
                             key: [] for key in openrlhf.LOGGED}})

    def test_scores_stay_in_zero_one_when_rewards_penalise(self):
        row = release_rows("single_route")[0]
        os.environ["TRANSITLM_REWARD_FAILURE"] = "-1"
        try:
            answer = openrlhf.reward_func(["x"], ["y"], [json.dumps(row)])
        finally:
            del os.environ["TRANSITLM_REWARD_FAILURE"]
        self.assertEqual(answer["rewards"], [-1.0])
        self.assertEqual(answer["scores"], [0.0])


class NeverRaisesTest(unittest.TestCase):
    """A completion, whatever it holds, is a score with an error code, in a
    time bounded by its length; the row's own faults raise, naming the field."""

    def test_completions_of_any_content(self):
        row = release_rows("single_route")[0]
        route = json.loads(row["sft_label"])
        long_route = dict(route, station_sequence=["bus-%d" % i for i in range(100000)])
        rng = random.Random(7)
        completions = [None, b"\xff\xfe not utf-8", 12, 3.5, {"x": 1}, [1, 2], [{"role": 5}],
                       {"role": "assistant", "content": [{"type": "text", "text": row["sft_label"]}]},
                       "x" * 1000000, "[" * 100000, "{" * 100000, '{"a": NaN}',
                       '{"total_distance": NaN, "station_sequence": [1, 2]}',
                       json.dumps(dict(route, total_time=float("inf"))),
                       json.dumps(long_route), "\ud800", "<think>" * 1000, "</think>" * 1000]
        completions += ["".join(rng.choice('{}[]":,<>/thinkabc 0.5\n') for _ in range(300))
                        for _ in range(40)]
        for completion in completions:
            started = time.perf_counter()
            result = scoring.score(completion, row, benchmark="single_route")
            self.assertEqual(tuple(result), scoring.KEYS, repr(completion)[:60])
            self.assertTrue(0.0 <= result["score"] <= 1.0)
            self.assertLess(time.perf_counter() - started, 10.0, repr(completion)[:60])
        self.assertEqual(scoring.score(b"\xff", row, benchmark="single_route")["error_code"],
                         "invalid_json")
        self.assertEqual(scoring.score(12, row, benchmark="single_route")["error_code"],
                         "invalid_completion")

    def test_no_adapter_raises_or_gives_nan_for_any_completion(self):
        row = release_rows("single_route")[0]
        deep = []
        for _ in range(5000):
            deep = [deep]

        class Hostile(object):
            """Every method a reader might call raises."""
            def __getattr__(self, name):
                raise RuntimeError(name)

            def __eq__(self, other):
                raise RuntimeError("eq")

            __hash__ = __str__ = __repr__ = None

        class RaisingDict(dict):
            def get(self, *args):
                raise RuntimeError("get")

        completions = [{1: 2, "a": 3}, {(1, 2): "x", "content": row["sft_label"]}, deep,
                       [{"role": "assistant", "content": deep}], b"\xff", object(), Hostile(),
                       10 ** 5000, float("nan"), -float("inf"), RaisingDict(content="x"),
                       [RaisingDict(role="assistant")], {"content": Hostile()}, [{1: 2}]]
        columns = {key: [row[key]] for key in ("sft_prompt", "sft_label", "task_id")}
        label = json.dumps(row, ensure_ascii=False)
        for completion in completions:
            with self.subTest(completion=type(completion).__name__):
                values = [trl.route_reward(prompts=["p"], completions=[completion], **columns),
                          trl.route_rem(prompts=["p"], completions=[completion], **columns),
                          trl.route_format(prompts=["p"], completions=[completion],
                                           **columns)]
                values.append([verl.compute_score("transitlm/single_route", completion, label,
                                                  {})["score"]])
                values.append([result["score"] for result in verl.compute_score_batch(
                    ["transitlm/single_route"], [completion], [label], [None])])
                answer = openrlhf.reward_func([completion], ["p"], [label])
                values += [answer["rewards"], answer["scores"]]
                values += list(answer["extra_logs"].values())
                for value in values:
                    self.assertEqual(len(value), 1)
                    self.assertTrue(math.isfinite(value[0]), value)
        # The label's own text in a dict with other keys is still read as the content.
        self.assertEqual(trl.route_reward(completions=[{1: 2, "content": row["sft_label"]}],
                                          **columns), [1.0])

    def test_the_batch_memo_compares_only_what_it_can(self):
        self.assertEqual(batch.memo_key({"a": [1, 2.0, None]}),
                         ("dict", ("a", ("list", ("int", 1), ("float", 2.0), ("NoneType", None)))))
        self.assertNotEqual(batch.memo_key([1]), batch.memo_key([1.0]))
        self.assertNotEqual(batch.memo_key([1]), batch.memo_key([True]))
        deep = []
        for _ in range(batch.MEMO_DEPTH + 1):
            deep = [deep]
        for value in (deep, [object()], {1j: "x"}, [{"a": set()}]):
            with self.assertRaises(batch.Unkeyable):
                batch.memo_key(value)

    def test_weights_and_failure_give_a_finite_score(self):
        row = release_rows("single_route")[0]
        for weights in ({"rem": 1e308}, {"rem": float("inf")}, {"rem": float("nan")},
                        {"rem": 1e-300}, {"rem": -1}, {"rem": "x"}, {"rem": None},
                        {"rem": True}, {"speed": 1}, [("rem", 1)], "rem=2"):
            with self.subTest(weights=weights):
                with self.assertRaises(ValueError):
                    scoring.weights_of(weights)
                with self.assertRaises(ValueError):
                    settings.settings(weights=weights)
                with self.assertRaises(ValueError):
                    verl.compute_score("transitlm/single_route", "{}", row, None,
                                       weights=weights)
                with self.assertRaises(ValueError):
                    trl.make_reward("weighted", weights=weights)
        for failure in (float("nan"), float("inf"), "-inf", "low"):
            with self.assertRaises(ValueError):
                settings.settings(failure=failure)
        # At the bounds, every key weighed to the largest or smallest allowed:
        # finite, and the same score as unit weights (only ratios count).
        for bound in (scoring.MIN_WEIGHT, scoring.MAX_WEIGHT):
            weights = dict.fromkeys(scoring.WEIGHTED, bound)
            for text in (row["sft_label"], row["generate_results"], "{}", "[1]"):
                got = scoring.score(text, row, weights=weights)["score"]
                self.assertAlmostEqual(got, scoring.score(text, row)["score"], places=9)
        mixed = {"format": scoring.MIN_WEIGHT, "rem": scoring.MAX_WEIGHT, "conn": 0}
        self.assertTrue(math.isfinite(scoring.score(row["sft_label"], row,
                                                    weights=mixed)["score"]))

    def test_a_broken_row_names_its_field(self):
        row = release_rows("single_route")[0]
        for broken, field in ((dict(row, sft_label="{not json"), "sft_label"),
                              (dict(row, sft_prompt="[]"), "sft_prompt"),
                              (dict(row, task_id="unknown"), "task_id")):
            with self.assertRaises(scoring.RowDataError) as caught:
                scoring.score(row["generate_results"], broken)
            self.assertIn(field, str(caught.exception))
        with self.assertRaises(ValueError):
            scoring.score("x", row, shaping="smooth")
        with self.assertRaises(ValueError):
            scoring.score("x", row, weights={"conn": -1})


if __name__ == "__main__":
    unittest.main()
