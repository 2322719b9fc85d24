"""generate.py --evaluate: the evaluators read generate.py's output as it is
-- the same figures as the inline predictions, a failed row a no-response
row carrying the generator's error, a result line preferred over an earlier
error line, the evaluator's exit status passed on."""

import json
import os
import tempfile
import unittest

from tests.support import REPO
from tests.support.services import B1, StandIn, answers_from, read_csv, read_lines, run_generate
from tests.support.evaluator_rows import run_evaluator
from transitlm.evaluation.catalog import load_benchmark
from transitlm.generate import runner


def evaluator_run(benchmark, argv, folder):
    """Run an evaluator's command line (in-process) with --out FOLDER ->
    (report, details rows)."""
    status, _, stderr = run_evaluator(load_benchmark(benchmark),
                                      argv + ["--out", folder, "--quiet"])
    if status != 0:
        raise AssertionError("%s exit %s: %s" % (benchmark, status, stderr))
    return read_run(folder)


def read_run(folder):
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    return report, read_lines(os.path.join(folder, "details.jsonl"))


def figures(report):
    return {key: report.get(key) for key in ("counts", "rounds", "metrics", "diversity")}


BUNDLED = (("single_route", "benchmark1_single_route_example.csv"),
           ("personalized", "benchmark2_personalized_example.csv"),
           ("diversity", "benchmark3_diversity_example.csv"),
           ("general_llm", "general_llm_example.csv"))


class EvaluatorOnResults(unittest.TestCase):
    """The evaluators read generate.py's output as it is (--evaluate)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.close()
        self.tmp.cleanup()

    def generate_and_evaluate(self, source, script, *extra):
        out = os.path.join(self.dir, "preds.jsonl")
        status, stdout, stderr = run_generate(
            ["--input", source, "--api_url", self.server.url, "--model", "stand-in-model",
             "--out", out, "--evaluate"] + list(extra))
        return status, stdout, stderr, out

    def test_figures_equal_inline(self):
        for benchmark, name in BUNDLED:
            with self.subTest(benchmark=benchmark):
                source = os.path.join(REPO, "data", name)
                answers = answers_from(source)
                if self.server:
                    self.server.close()
                self.server = StandIn(lambda user, nth: ("ok", answers[user]))
                self.dir = os.path.join(self.tmp.name, benchmark)    # a run of its own
                os.mkdir(self.dir)
                status, stdout, stderr, out = self.generate_and_evaluate(source, None)
                self.assertEqual(status, 0, stderr)
                self.assertIn("evaluating with %s/evaluate.py (from the file name)"
                              % benchmark, stdout)
                self.assertIn("Summary (reference protocol)", stdout)   # its text report
                report, details = read_run(runner.run_dir_for(out))
                inline, inline_details = evaluator_run(
                    benchmark, ["--input", source], os.path.join(self.dir, "inline"))
                self.assertEqual(figures(report), figures(inline))
                self.assertEqual([row["failure_codes"] for row in details],
                                 [row["failure_codes"] for row in inline_details])

    def test_error_line_is_no_response_with_the_generators_error(self):
        source = B1
        answers = answers_from(source)
        refused = read_csv(source)[1]

        def script(user, nth):
            if user == refused["sft_prompt"]:
                return ("status", 400, "prompt is too long", None)
            return ("ok", answers[user])

        self.server = StandIn(script)
        run_dir = os.path.join(self.dir, "run")
        status, _, stderr, out = self.generate_and_evaluate(
            source, script, "--eval_out", run_dir, "--benchmark", "single_route")
        self.assertEqual(status, 0, stderr)
        report, details = read_run(run_dir)
        row = details[1]
        self.assertEqual(row["index_id"], refused["index_id"])
        self.assertEqual(row["status"], "no_response")
        self.assertEqual(row["failure_codes"], ["no_response"])
        self.assertIn("HTTP 400: prompt is too long", row["generator_error"])
        self.assertEqual(report["counts"]["no_response"], 1)

    def test_result_line_preferred_over_error_line(self):
        """A run stopped before compaction leaves an error line and a later result
        line for one id; the evaluator uses the result."""
        rows = read_csv(B1)
        out = os.path.join(self.dir, "preds.jsonl")
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"indexid": rows[0]["index_id"], "error": "HTTP 500"}) + "\n")
            for row in rows:
                handle.write(json.dumps({"indexid": row["index_id"],
                                         "generate_results": row["generate_results"]}) + "\n")
        report, _ = evaluator_run("single_route", ["--input", B1, "--predictions", out],
                                  os.path.join(self.dir, "run"))
        inline, _ = evaluator_run("single_route", ["--input", B1],
                                  os.path.join(self.dir, "inline"))
        self.assertEqual(figures(report), figures(inline))

    def test_evaluator_failure_status_passed_on(self):
        answers = answers_from(B1)
        self.server = StandIn(lambda user, nth: ("ok", answers[user]))
        status, _, stderr, _ = self.generate_and_evaluate(
            B1, None, "--station_info", os.path.join(self.dir, "absent.csv"))
        self.assertEqual(status, 2)
        self.assertIn("generate.py: the evaluator exited with status 2", stderr)

    def test_a_header_without_rows_is_refused_before_anything_is_asked(self):
        # As the evaluators refuse it (issue 46): one line, exit 2, nothing written.
        empty = os.path.join(self.dir, "empty.csv")
        with open(empty, "w", encoding="utf-8") as handle:
            handle.write("index_id,system_prompt,sft_prompt,sft_label\n\n")
        self.server = StandIn(lambda user, nth: ("ok", "{}"))
        status, _, stderr, out = self.generate_and_evaluate(empty, None)
        self.assertEqual(status, 2, stderr)
        self.assertEqual(stderr, "generate.py: input file %s has no row with an id: nothing "
                                 "to ask\n" % empty)
        self.assertEqual(self.server.requests, [])
        self.assertFalse(os.path.exists(out))

    def test_another_benchmarks_file_is_refused_before_anything_is_asked(self):
        # A benchmark-3 file under the release's benchmark-1 name: generate.py
        # infers benchmark 1 from the name, its evaluator would refuse the
        # file (transitlm.evaluation.benchmark_check), so nothing is asked.
        b3 = os.path.join(self.dir, "transit-lm-benchmark1-test.csv")
        with open(os.path.join(REPO, "data", BUNDLED[2][1]), "rb") as source, \
                open(b3, "wb") as target:
            target.write(source.read())
        answers = answers_from(b3)
        self.server = StandIn(lambda user, nth: ("ok", answers[user]))
        status, _, stderr, out = self.generate_and_evaluate(b3, None)
        self.assertEqual(status, 2, stderr)
        self.assertIn("--evaluate: input file %s looks like a benchmark-3 file" % b3, stderr)
        self.assertIn("use --benchmark diversity", stderr)
        self.assertEqual(self.server.requests, [])
        self.assertFalse(os.path.exists(out))
        status, _, stderr, out = self.generate_and_evaluate(b3, None, "--allow_other_benchmark")
        self.assertEqual(status, 0, stderr)
        self.assertIn("note: --allow_other_benchmark given", stderr)
        with open(os.path.join(runner.run_dir_for(out), "run.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["benchmark_check"]["looks_like"], "diversity")


if __name__ == "__main__":
    unittest.main()
