"""transitlm/harness/lm_eval_tasks.py and lm_eval_utils.py: the task folder
lm-evaluation-harness reads.  The rows as the evaluator reads them (the
system prompt as generate.py sends it, a default where the file has none),
the task files naming the functions utils.py provides, utils.py finding the
project from anywhere, a row the evaluator could not judge refused before
anything is written, and the folder's rules (new, empty or its own; never
over an input; an old folder's other tasks removed)."""

import csv
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import prompt, route, write_samples, write_station_file
from common import InputError  # noqa: E402
from transitlm.evaluation.catalog import BENCHMARK_NAMES, DATA_DIR, benchmark_info  # noqa: E402
from transitlm.harness import lm_eval_tasks  # noqa: E402
from transitlm.harness.lm_eval_scoring import task_functions  # noqa: E402
from transitlm.harness.lm_eval_tasks import (  # noqa: E402
    GROUP, SETTINGS_FILE, TASKS, UTILS_FILE, write_task_folder)
from transitlm.evaluation.prompt_texts import system_prompt  # noqa: E402

BUNDLED = [(name, os.path.join(DATA_DIR, benchmark_info(name).default_input))
           for name in BENCHMARK_NAMES]


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def toy_rows(count=3, label=None):
    return [{"index_id": "t%d" % number, "sft_prompt": prompt(),
             "sft_label": route() if label is None else label}
            for number in range(1, count + 1)]


class FolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.out = os.path.join(self.tmp, "tasks")

    def toy_station(self):
        path = os.path.join(self.tmp, "station_info.csv")
        write_station_file(path)
        return path

    def test_the_bundled_examples_make_four_tasks_and_the_group(self):
        settings = write_task_folder(self.out, BUNDLED)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(
            [GROUP + ".yaml", UTILS_FILE, SETTINGS_FILE]
            + [TASKS[name] + ext for name in BENCHMARK_NAMES for ext in (".jsonl", ".yaml")]))
        self.assertEqual(settings["project"], REPO)
        self.assertEqual(json.loads(read_text(os.path.join(self.out, SETTINGS_FILE))), settings)
        group = read_text(os.path.join(self.out, GROUP + ".yaml"))
        self.assertIn("group: transitlm_all\n", group)
        self.assertEqual(re.findall(r"^  - (\S+)$", group, re.M),
                         [TASKS[name] for name in BENCHMARK_NAMES])
        self.assertNotRegex(group, r"(?m)^aggregate_metric_list")
        for benchmark, path in BUNDLED:
            with open(path, encoding="utf-8", newline="") as handle:
                rows = list(csv.DictReader(handle))
            docs = read_jsonl(os.path.join(self.out, TASKS[benchmark] + ".jsonl"))
            self.assertEqual(len(docs), len(rows))
            for number, (doc, row) in enumerate(zip(docs, rows), 1):
                expected = {"row": number, "index_id": row["index_id"],
                            "system_prompt": row["system_prompt"],
                            "sft_prompt": row["sft_prompt"], "sft_label": row["sft_label"]}
                if benchmark == "personalized":
                    expected["req_type"] = row["req_type"]
                self.assertEqual(doc, expected)
            task = read_text(os.path.join(self.out, TASKS[benchmark] + ".yaml"))
            data = json.loads(re.search(r"^    test: (.*)$", task, re.M).group(1))
            self.assertEqual(data, os.path.join(self.out, TASKS[benchmark] + ".jsonl"))
            self.assertTrue(os.path.isabs(data))
            for line in ("task: %s" % TASKS[benchmark], "description: system_prompt",
                         "doc_to_text: sft_prompt", "  until: []", "  max_gen_toks: 16384",
                         "  do_sample: false", "  temperature: 0.0", "output_type: generate_until",
                         '  protocol: "reference"', '  input: %s' % json.dumps(path)):
                self.assertIn(line + "\n", task, benchmark)
            self.assertNotIn("task_alias", task)
            self.assertIn("    higher_is_better: false\n", task)       # MAPE

    def test_utils_gives_every_function_a_task_names_from_any_folder(self):
        write_task_folder(self.out, BUNDLED, protocol="paper")
        named = set()
        for benchmark in BENCHMARK_NAMES:
            named |= set(re.findall(r"!function utils\.(\w+)",
                                    read_text(os.path.join(self.out, TASKS[benchmark] + ".yaml"))))
        expected = task_functions({"protocol": "paper", "station_info": None, "line_info": None})
        self.assertEqual(named, set(expected))
        # As the harness loads it: by its path, under that path's name, its
        # folder not on sys.path -- here in a fresh interpreter elsewhere, so
        # the project is found from the settings alone.
        script = ("import importlib.util, sys\n"
                  "path = sys.argv[1]\n"
                  "spec = importlib.util.spec_from_file_location(path[:-3], path)\n"
                  "module = importlib.util.module_from_spec(spec)\n"
                  "spec.loader.exec_module(module)\n"
                  "names = sorted(n for n in dir(module) if callable(getattr(module, n))\n"
                  "               and n.split('_')[0] in ('process', 'single', 'personalized',\n"
                  "                                       'diversity', 'general'))\n"
                  "import json, os\n"
                  "data = os.path.join(os.path.dirname(path), 'transitlm_diversity.jsonl')\n"
                  "with open(data) as f:\n"
                  "    doc = json.loads(f.readlines()[3])\n"
                  "print(' '.join(names))\n"
                  "conn = module.process_diversity(doc, [doc['sft_label']])['conn']\n"
                  "print(conn['row'], conn['status'], conn['failure_codes'])\n")
        done = subprocess.run([sys.executable, "-I", "-c", script,
                               os.path.join(self.out, UTILS_FILE)],
                              cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        names, codes = done.stdout.splitlines()
        self.assertEqual(set(names.split()), named)
        self.assertEqual(codes, "4 evaluated []")
        # A folder whose project moved says so, in one message.
        settings = json.loads(read_text(os.path.join(self.out, SETTINGS_FILE)))
        settings["project"] = os.path.join(self.tmp, "gone")
        with open(os.path.join(self.out, SETTINGS_FILE), "w", encoding="utf-8") as handle:
            json.dump(settings, handle)
        spec = importlib.util.spec_from_file_location("moved_utils",
                                                      os.path.join(self.out, UTILS_FILE))
        with self.assertRaisesRegex(ImportError, "is not there any more"):
            spec.loader.exec_module(importlib.util.module_from_spec(spec))

    def test_the_paper_protocol_is_named_in_the_tasks_and_settings(self):
        settings = write_task_folder(self.out, BUNDLED[:1], protocol="paper", max_gen_toks=4096)
        self.assertEqual(settings["protocol"], "paper")
        task = read_text(os.path.join(self.out, "transitlm_single_route.yaml"))
        self.assertIn('task_alias: "transitlm_single_route (paper protocol)"\n', task)
        self.assertIn('  protocol: "paper"\n', task)
        self.assertIn("  max_gen_toks: 4096\n", task)

    def test_each_row_sends_its_own_system_prompt(self):
        path = os.path.join(self.tmp, "b1.csv")
        rows = toy_rows()
        for number, row in enumerate(rows):
            row["system_prompt"] = "Plan a route, row %d. {{not a template}}" % number
            row["indexid"] = row["index_id"]
        rows[1]["system_prompt"] = " "        # an empty cell is no cell: the default
        write_samples(path, rows, columns=("indexid", "system_prompt", "sft_prompt",
                                           "sft_label"))
        settings = write_task_folder(self.out, [("single_route", path)],
                                     station_info=self.toy_station())
        self.assertEqual(settings["tasks"]["transitlm_single_route"]["prompt"]["source"],
                         "column+default")
        docs = read_jsonl(os.path.join(self.out, "transitlm_single_route.jsonl"))
        self.assertEqual([doc["system_prompt"] for doc in docs],
                         [rows[0]["system_prompt"], system_prompt("b1", "zh"),
                          rows[2]["system_prompt"]])
        self.assertEqual([doc["index_id"] for doc in docs], ["t1", "t2", "t3"])

    def test_a_file_without_system_prompts_gets_the_default(self):
        path = os.path.join(self.tmp, "b1.csv")
        write_samples(path, toy_rows(), columns=("index_id", "sft_prompt", "sft_label"))
        # (the toy labels name stations the bundled line file lacks, and are
        # stop ids, benchmark 1's: both allowed)
        settings = write_task_folder(self.out, [("general_llm", path)],
                                     station_info=self.toy_station(),
                                     line_info=os.path.join(DATA_DIR, "line_info.csv"),
                                     allow_foreign_network=True, allow_other_benchmark=True)
        default = system_prompt("general", "zh")
        self.assertEqual(settings["tasks"]["transitlm_general"]["prompt"],
                         {"source": "default",
                          "sha256": hashlib.sha256(default.encode("utf-8")).hexdigest()})
        docs = read_jsonl(os.path.join(self.out, "transitlm_general.jsonl"))
        self.assertEqual({doc["system_prompt"] for doc in docs}, {default})
        self.assertEqual([doc["row"] for doc in docs], [1, 2, 3])

    def test_a_row_the_evaluator_could_not_judge_stops_it_before_anything_is_written(self):
        station = self.toy_station()
        cases = {
            "label": (toy_rows() + [{"index_id": "bad", "sft_prompt": prompt(),
                                     "sft_label": "{not json"}], "single_route"),
            "prompt": (toy_rows() + [{"index_id": "bad", "sft_prompt": "[1, 2]",
                                      "sft_label": route()}], "single_route"),
            "req_type": ([dict(row, req_type="2") for row in toy_rows()]
                         + [{"index_id": "bad", "sft_prompt": prompt(),
                             "sft_label": route(), "req_type": "soon"}], "personalized"),
            # Issue 38: nesting too deep is the row's fault, not the answer's.
            "sft_label": (toy_rows() + [{"index_id": "bad", "sft_prompt": prompt(),
                                         "sft_label": "[" * 150 + "]" * 150}], "single_route"),
            "sft_prompt": (toy_rows() + [{"index_id": "bad", "sft_label": route(),
                                          "sft_prompt": '{"start": %s}' % ("[" * 150
                                                                          + "]" * 150)}],
                           "single_route"),
        }
        for name, (rows, benchmark) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.tmp, name + ".csv")
                write_samples(path, rows, columns=("index_id", "sft_prompt", "sft_label",
                                                   "req_type"))
                with self.assertRaisesRegex(InputError, r"row 4 \(index_id bad\)") as caught:
                    write_task_folder(self.out, [(benchmark, path)], station_info=station)
                self.assertIn(name, str(caught.exception))
                self.assertFalse(os.path.exists(self.out))
        path = os.path.join(self.tmp, "short.csv")
        write_samples(path, toy_rows())
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("t9,only two cells\n")
        with self.assertRaisesRegex(InputError, "row 4 .*cell"):
            write_task_folder(self.out, [("single_route", path)], station_info=station)
        path = os.path.join(self.tmp, "empty.csv")
        write_samples(path, [])
        with self.assertRaisesRegex(InputError, "holds no rows"):
            write_task_folder(self.out, [("single_route", path)], station_info=station)
        self.assertFalse(os.path.exists(self.out))

    def test_the_folder_is_new_empty_or_its_own(self):
        os.mkdir(self.out)
        write_task_folder(self.out, BUNDLED)                 # empty: written
        with self.assertRaisesRegex(InputError, "--overwrite replaces it"):
            write_task_folder(self.out, BUNDLED)
        before = read_text(os.path.join(self.out, SETTINGS_FILE))
        with open(os.path.join(self.out, "transitlm.yaml"), "w") as handle:
            handle.write("group: transitlm\n")          # an earlier version's group file
        # Replaced: a single task now; the old folder's other tasks are gone.
        write_task_folder(self.out, BUNDLED[1:2], overwrite=True)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(
            [GROUP + ".yaml", UTILS_FILE, SETTINGS_FILE, "transitlm_personalized.jsonl",
             "transitlm_personalized.yaml"]))
        self.assertNotEqual(read_text(os.path.join(self.out, SETTINGS_FILE)), before)
        self.assertEqual(re.findall(r"^  - (\S+)$", read_text(os.path.join(
            self.out, GROUP + ".yaml")), re.M), ["transitlm_personalized"])
        # Never over an input, however it is named.
        planted = os.path.join(self.out, "transitlm_single_route.jsonl")
        shutil.copy(BUNDLED[0][1], planted)
        with self.assertRaisesRegex(InputError, "an output never replaces an input"):
            write_task_folder(self.out, [("single_route", planted)], overwrite=True)
        self.assertEqual(read_text(planted), read_text(BUNDLED[0][1]))
        # Another folder's files: the harness would read them too.
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        with open(os.path.join(other, "notes.txt"), "w") as handle:
            handle.write("mine\n")
        with self.assertRaisesRegex(InputError, "holds other files"):
            write_task_folder(other, BUNDLED, overwrite=True)
        with self.assertRaisesRegex(InputError, "is a file"):
            write_task_folder(os.path.join(other, "notes.txt"), BUNDLED)
        self.assertEqual(os.listdir(other), ["notes.txt"])

    def test_the_utils_file_reads_the_settings_file_the_folder_holds(self):
        # lm_eval_utils.py cannot import the project before it has read the
        # settings: the one name written twice must agree.
        self.assertIn('"%s"' % SETTINGS_FILE, read_text(lm_eval_tasks.UTILS_SOURCE))


# How lm-eval 0.4.13 reads a task file (lm_eval/tasks/_yaml_loader.py):
# PyYAML's CSafeLoader (FullLoader without libyaml) with a !function tag.
YAML_READER = """
import json, sys, yaml
class Loader(getattr(yaml, "CSafeLoader", yaml.FullLoader)):
    pass
yaml.add_constructor("!function", lambda loader, node: loader.construct_scalar(node),
                     Loader=Loader)
out = {}
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        out[path] = yaml.load(handle, Loader=Loader)
print(json.dumps(out))
"""


def venv_python():
    """The python of $TRANSITLM_LM_EVAL_VENV when it has PyYAML, or None."""
    venv = os.environ.get("TRANSITLM_LM_EVAL_VENV")
    python = os.path.join(venv, "bin", "python") if venv else None
    if not python or not os.access(python, os.X_OK):
        return None
    done = subprocess.run([python, "-c", "import yaml"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=60)
    return python if done.returncode == 0 else None


class NamesTest(unittest.TestCase):
    """Any name works: the task files read back, with lm-eval's YAML loader,
    to the very paths written -- characters outside the BMP, spaces, quotes,
    '#', ':', newlines -- and a name YAML cannot carry is refused."""

    NAME = "out 😀 𠮷 \"q\" 'a' #b: c\nd\te"

    def test_every_path_reads_back_from_the_task_files(self):
        python = venv_python()
        if python is None:
            self.skipTest("no PyYAML: set TRANSITLM_LM_EVAL_VENV to lm-eval's virtual "
                          "environment")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        folder = os.path.join(tmp, self.NAME)
        os.mkdir(folder)
        inputs = []
        for benchmark, path in BUNDLED:
            copy = os.path.join(folder, "%s %s.csv" % (benchmark, self.NAME))
            shutil.copy(path, copy)
            inputs.append((benchmark, copy))
        station = os.path.join(folder, "station_info.csv")
        shutil.copy(os.path.join(DATA_DIR, "station_info.csv"), station)
        shutil.copy(os.path.join(DATA_DIR, "line_info.csv"), os.path.join(folder,
                                                                          "line_info.csv"))
        out = os.path.join(folder, "tasks " + self.NAME)
        write_task_folder(out, inputs, station_info=station)
        files = [os.path.join(out, TASKS[name] + ".yaml") for name in BENCHMARK_NAMES]
        for path in files:
            self.assertNotIn("\\ud83d", read_text(path))        # UTF-8, not surrogate escapes
        done = subprocess.run([python, "-c", YAML_READER] + files + [
            os.path.join(out, GROUP + ".yaml")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr.decode("utf-8", "replace"))
        loaded = json.loads(done.stdout.decode("utf-8"))
        for (benchmark, path), task_file in zip(inputs, files):
            task = loaded[task_file]
            self.assertEqual(task["dataset_kwargs"]["data_files"]["test"],
                             os.path.join(out, TASKS[benchmark] + ".jsonl"))
            self.assertEqual((task["metadata"]["input"], task["metadata"]["station_info"]),
                             (path, station))
            self.assertEqual(task["process_results"], "utils.process_" + benchmark)
        self.assertEqual(loaded[os.path.join(out, GROUP + ".yaml")]["task"],
                         [TASKS[name] for name in BENCHMARK_NAMES])

    def test_a_name_that_is_not_utf8_is_refused(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        out = os.path.join(tmp, os.fsdecode(b"tasks\xff"))
        with self.assertRaisesRegex(InputError, r"holds a byte that is not UTF-8 \(\\udcff "
                                                r"here\), which a YAML task file cannot carry"):
            write_task_folder(out, BUNDLED[:1])
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
