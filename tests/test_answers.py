"""transitlm/evaluation/answers.py: a model's answer read the way a model writes it
(reasoning blocks, end-of-turn tokens, text around the JSON), and the
evaluators reading predictions files and API rows through it."""

import json
import os
import tempfile
import time
import unittest

from tests.support import common
from tests.support.services import example_rows
from tests.support.evaluator_rows import (evaluate_to_files, prompt, route, write_samples,
                                          write_station_file)
from tests.support.hostile_text import READING_PATTERNS, reading_text
from transitlm.evaluation.answers import END_OF_TURN_TOKENS, REASONING_TAGS, read_answer
import transitlm.api  # noqa: E402
import transitlm.evaluation.reports  # noqa: E402
from single_route.evaluate import SingleRoute

ROUTE = {"line_sequence": ["L1"], "station_sequence": ["A", "B", "C"],
         "total_distance": "2公里", "total_time": "10分钟", "total_fare": "2"}
ROUTE_TEXT = json.dumps(ROUTE, ensure_ascii=False)
DRAFT = json.dumps({"line_sequence": ["L9"], "station_sequence": ["X", "Y"]})


def code_of(text, **options):
    try:
        read_answer(text, **options)
    except common.RowError as exc:
        return exc.code
    return None


class ReadingTest(unittest.TestCase):
    def test_the_route_after_the_reasoning(self):
        # Braces, a stray object and a draft route inside the thinking are not the answer.
        for opening, closing in REASONING_TAGS:
            text = "%s let me think {\"a\": 1} ... draft %s ok%s\n%s" % (
                opening, DRAFT, closing, ROUTE_TEXT)
            answer = read_answer(text)
            self.assertEqual(answer.value, ROUTE, opening)
            self.assertTrue(answer.reasoning)
            self.assertFalse(answer.extracted)

    def test_only_the_closing_tag(self):
        # The Qwen3 and DeepSeek-R1 chat templates put <think> in the prompt.
        answer = read_answer("thinking {\"a\": 1} %s</think>\n\n%s" % (DRAFT, ROUTE_TEXT))
        self.assertEqual(answer.value, ROUTE)
        self.assertTrue(answer.reasoning)

    def test_the_last_closing_tag_counts(self):
        text = "<think>a</think> %s <think>b</think>%s" % (DRAFT, ROUTE_TEXT)
        self.assertEqual(read_answer(text).value, ROUTE)

    def test_tags_in_any_case(self):
        self.assertEqual(read_answer("<THINK>x</Think>" + ROUTE_TEXT).value, ROUTE)

    def test_a_fenced_answer_with_end_of_turn_tokens(self):
        for token in END_OF_TURN_TOKENS:
            text = "<think>x</think>\n```json\n%s\n```%s" % (ROUTE_TEXT, token)
            answer = read_answer(text)
            self.assertEqual(answer.value, ROUTE, token)
            self.assertTrue(answer.extracted)

    def test_gpt_oss_final_channel(self):
        text = ("<|channel|>analysis<|message|>draft %s<|end|><|start|>assistant"
                "<|channel|>final<|message|>%s<|return|>" % (DRAFT, ROUTE_TEXT))
        self.assertEqual(read_answer(text).value, ROUTE)

    def test_an_unclosed_block_is_its_own_failure(self):
        for text in ("<think>I will answer %s" % DRAFT,          # cut by the token limit
                     "<think>a</think>%s<think>again" % ROUTE_TEXT,
                     "<reasoning>never closed"):
            self.assertEqual(code_of(text), "unclosed_reasoning", text)

    def test_a_block_cut_off_in_every_format_is_unclosed_reasoning(self):
        # Each format's block opened, a route drafted inside it, and the text
        # cut before the block closes: never read as the answer.
        cut = ["%s I will answer %s" % (opening, ROUTE_TEXT) for opening, _ in REASONING_TAGS]
        cut += ["<THINKING>%s" % ROUTE_TEXT, "<Reasoning>\n%s<|im_end|>" % ROUTE_TEXT]
        # gpt-oss: its analysis channel with no final channel after it.
        analysis = "<|channel|>analysis<|message|>draft %s" % ROUTE_TEXT
        cut += [analysis, analysis + "<|end|>", analysis + "<|end|><|start|>assistant",
                "<|channel|>final<|message|>%s<|end|><|start|>assistant%s"
                % (ROUTE_TEXT, analysis)]
        for text in cut:
            self.assertEqual(code_of(text), "unclosed_reasoning", text)
        for opening, closing in REASONING_TAGS:        # closed: the route after it is read
            answer = read_answer("%s %s %s%s" % (opening, DRAFT, closing, ROUTE_TEXT))
            self.assertEqual(answer.value, ROUTE, opening)
        answer = read_answer(analysis + "<|end|><|start|>assistant<|channel|>final<|message|>"
                             + ROUTE_TEXT + "<|return|>")
        self.assertEqual((answer.value, answer.reasoning), (ROUTE, True))

    def test_no_answer_after_the_reasoning(self):
        self.assertEqual(code_of("<think>all thinking</think>  "), "invalid_json")
        self.assertEqual(code_of(""), "invalid_json")

    def test_plain_answers_are_unchanged(self):
        self.assertEqual(read_answer(ROUTE_TEXT).value, ROUTE)
        self.assertFalse(read_answer(ROUTE_TEXT).reasoning)
        self.assertEqual(read_answer("Here it is: %s. Enjoy." % ROUTE_TEXT).value, ROUTE)
        self.assertEqual(read_answer(ROUTE).value, ROUTE)          # already decoded
        self.assertIsNone(read_answer(None).value)

    def test_every_token_and_tag_holds_a_marker_character(self):
        # answer_text passes over a text holding neither "<" nor U+25C1 (a
        # bare JSON answer): a token, tag or marker without one would be missed.
        from transitlm.evaluation.answers import FINAL_CHANNEL_MARKERS
        for token in (END_OF_TURN_TOKENS + FINAL_CHANNEL_MARKERS
                      + tuple(tag for pair in REASONING_TAGS for tag in pair)):
            with self.subTest(token=token):
                self.assertTrue("<" in token or "\u25c1" in token)
        kimi = "\u25c1think\u25b7x\u25c1/think\u25b7" + ROUTE_TEXT
        self.assertEqual(read_answer(kimi).value, ROUTE)
        self.assertTrue(read_answer(kimi).reasoning)

    def test_strict_reads_as_the_published_evaluator(self):
        for text in ("<think>x</think>" + ROUTE_TEXT, "```json\n%s\n```" % ROUTE_TEXT):
            self.assertEqual(code_of(text, strict=True), "invalid_json")
        self.assertEqual(read_answer(ROUTE_TEXT, strict=True).value, ROUTE)

    def test_deep_json_is_refused(self):
        self.assertEqual(code_of("<think>x</think>" + "[" * 200), "too_deep")

    def test_time_is_linear_in_the_text(self):
        # Each failed "{" used to count lines from the text's start: 1 MB of
        # broken objects took about 14 s.  Now well under a second (a bound
        # far above the real time, so a slow machine does not fail it).
        for text in ('{"a":0 x}' * 110000, "<think>" + '{"a":0 x}' * 100000 + "</think>x",
                     '{"k": "' + "{" * 1000000, "{" * 60 + "x" * 1000000):
            started = time.perf_counter()
            self.assertIsNotNone(code_of(text))
            self.assertLess(time.perf_counter() - started, 5.0)


class LinearTimeTest(unittest.TestCase):
    """Issue 38: every adversarial pattern (tests/support's READING_PATTERNS)
    is read in time linear in its length -- by read_answer (the evaluators
    and the reward), by the reward's score() and by a service's scan of a
    body (common.json_too_deep and json_outside_strings, bounded_json).  The
    pattern at LARGE characters is timed against the pattern at SMALL read
    LARGE / SMALL times over (the same number of characters): linear, the
    two take about the same time; quadratic, the first takes LARGE / SMALL
    times longer (8 here; 3 s at 32 KB for escaped quotes before).  The times
    at 1 MB are bench/bench_reading.py's."""

    SMALL, LARGE = 16 * 1024, 128 * 1024
    SLACK = 3.0                  # a linear reader stays under it, load or not; 8 is quadratic
    NOISE_S = 0.02               # and a spell of a loaded machine (quadratic: seconds, minutes)
    TRIES = 3                    # a pair over the bound is timed again, best of the tries

    def block_time(self, function, text, times):
        started = time.perf_counter()
        for _ in range(times):
            function(text)
        return time.perf_counter() - started

    def test_every_pattern_at_two_sizes(self):
        from transitlm.io.bounded_json import json_shape_problem
        from transitlm.reward import score
        row = example_rows("single_route")[0]
        score("{}", row, benchmark="single_route")     # the scorer, made before the clock
        readers = {"read_answer": code_of,
                   "json_shape_problem": lambda text: json_shape_problem(text, 2048),
                   "score": lambda text: score(text, row, benchmark="single_route")}
        times = self.LARGE // self.SMALL
        for pattern in READING_PATTERNS:
            small, large = reading_text(pattern, self.SMALL), reading_text(pattern, self.LARGE)
            for name, reader in readers.items():
                # Taken in turns, and again while over the bound (best of the
                # tries), so that a spell of load falls on both sizes.
                smalls, larges = [], []
                for _ in range(self.TRIES):
                    smalls.append(self.block_time(reader, small, times))
                    larges.append(self.block_time(reader, large, 1))
                    if min(larges) < self.SLACK * min(smalls) + self.NOISE_S:
                        break
                with self.subTest(pattern=pattern, reader=name):
                    self.assertLess(min(larges), self.SLACK * min(smalls) + self.NOISE_S,
                                    "%.4f s at %d KB, "
                                    "%.4f s for %d times %d KB" % (
                                        min(larges), self.LARGE // 1024, min(smalls), times,
                                        self.SMALL // 1024))


class EvaluatorReadingTest(unittest.TestCase):
    """A predictions file and the API's rows are read through read_answer; the
    figures equal those of the bare routes; the report says how many answers
    carried reasoning."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        self.stations = os.path.join(self.dir, "stations.csv")
        write_station_file(self.stations)
        label = route()
        self.rows = [{"index_id": "r%d" % i, "sft_prompt": prompt(), "sft_label": label}
                     for i in range(4)]
        self.input = os.path.join(self.dir, "test.csv")
        write_samples(self.input, self.rows, columns=("index_id", "sft_prompt", "sft_label"))
        self.answers = [
            "<think>{\"a\": 1} hmm</think>" + json.dumps(label),        # reasoning, then the route
            "thinking %s</think>```json\n%s\n```<|im_end|>" % (DRAFT, json.dumps(label)),
            json.dumps(label),
            "<think>out of tokens " + DRAFT,                          # unclosed
        ]

    def predictions(self, name="p.jsonl"):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8") as handle:
            for row, answer in zip(self.rows, self.answers):
                handle.write(json.dumps({"indexid": row["index_id"],
                                         "generate_results": answer}) + "\n")
        return path

    def run_cli(self, *extra):
        out = tempfile.mkdtemp(dir=self.dir)
        report, records, _ = evaluate_to_files(
            SingleRoute(), ["--input", self.input, "--station_info", self.stations,
                            "--predictions", self.predictions()] + list(extra), out)
        return report, records

    def test_predictions_with_reasoning(self):
        report, records = self.run_cli()
        self.assertEqual([r["status"] for r in records], ["evaluated"] * 3 + ["error"])
        self.assertEqual(records[3]["failure_codes"], ["error.unclosed_reasoning"])
        self.assertEqual([r["exact_match"] for r in records[:3]], [True] * 3)
        # Two were read after their reasoning; the one cut off inside it is
        # counted apart (issue 39.5), not as a route read after reasoning.
        self.assertEqual(report["input_notes"]["reasoning"], 2)
        self.assertEqual(report["input_notes"]["reasoning_unclosed"], 1)
        self.assertEqual(report["input_notes"]["json_extracted"], 1)
        text = transitlm.evaluation.reports.render_text_head(SingleRoute(), report)
        self.assertIn("2 answer(s) carried reasoning", text)
        self.assertIn("1 answer(s) were cut off inside their reasoning", text)

    def test_answers_all_cut_off_are_not_said_to_be_read(self):
        self.answers = ["<think>out of tokens " + DRAFT] * len(self.rows)
        report, records = self.run_cli()
        self.assertEqual(report["input_notes"]["reasoning_unclosed"], 4)
        self.assertNotIn("reasoning", report["input_notes"])
        text = transitlm.evaluation.reports.render_text_head(SingleRoute(), report)
        self.assertNotIn("the route was read after it", text)
        self.assertIn("4 answer(s) were cut off inside their reasoning", text)

    def test_strict_json_keeps_the_published_reading(self):
        report, records = self.run_cli("--strict_json")
        self.assertEqual([r["failure_codes"] for r in records],
                         [["error.invalid_json"]] * 2 + [[]] + [["error.invalid_json"]])
        self.assertNotIn("reasoning", report.get("input_notes", {}))

    def test_the_api_reads_text_as_the_cli_reads_predictions(self):
        rows = [dict(row, generate_results=answer) for row, answer in zip(self.rows, self.answers)]
        report, records = transitlm.api.evaluate("single_route", rows,
                                                 station_info=self.stations)
        cli_report, cli_records = self.run_cli()
        self.assertEqual(report["metrics"], cli_report["metrics"])
        self.assertEqual([r["failure_codes"] for r in records],
                         [r["failure_codes"] for r in cli_records])
        _, strict = transitlm.api.evaluate("single_route", rows, station_info=self.stations,
                                           strict_json=True)
        self.assertEqual(strict[0]["failure_codes"], ["error.invalid_json"])

    def test_api_messages_name_its_arguments(self):
        out = os.path.join(self.dir, "run")
        rows = [dict(self.rows[0], generate_results=json.dumps(route()))]
        transitlm.api.evaluate("single_route", rows, station_info=self.stations, out=out)
        with self.assertRaises(common.InputError) as caught:
            transitlm.api.evaluate("single_route", rows, station_info=self.stations, out=out)
        self.assertIn("overwrite=True", str(caught.exception))
        self.assertNotIn("--", str(caught.exception))
        # The general LLM on rows of stop ids: another benchmark's rows, then
        # (allowed) no line file beside the station file.
        with self.assertRaises(common.InputError) as caught:
            transitlm.api.evaluate("general_llm", rows, station_info=self.stations)
        self.assertIn("allow_other_benchmark=True", str(caught.exception))
        self.assertNotIn("--", str(caught.exception))
        with self.assertRaises(common.InputError) as caught:
            transitlm.api.evaluate("general_llm", rows, station_info=self.stations,
                                   allow_other_benchmark=True)
        self.assertIn("line_info=", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
