"""The layout (issue 21), read from the source: dependencies run one way
(entry scripts and workflow tools -> the transitlm package -> the rules), no
import cycle anywhere, no module too large to read.  And the tests' own
layout: no test module imports another (what they share is in
tests/support/), none is over 800 lines."""

import ast
import os
import sys
import unittest

from tests.support import REPO

# Layers, lowest first: a module may import its own layer or a lower one
# (issue 43: commands -> tools -> evaluation -> io -> common).
RULES, IO, EVALUATION, TOOLS, COMMANDS = 0, 1, 2, 3, 4
LAYER_NAMES = {RULES: "common", IO: "transitlm.io", EVALUATION: "transitlm.evaluation",
               TOOLS: "a tool (transitlm's top and its tool folders)", COMMANDS: "a command"}
MAX_TOP_MODULES = 8              # transitlm/'s own modules, __init__ included
MAX_LINES = 1250                 # "no module over ~1,200 lines"
MAX_COMMON_LINES = 1600
TESTS = os.path.join(REPO, "tests")
MAX_TEST_LINES = 800             # "no test module over ~800 lines"
MAX_SUPPORT_LINES = 600          # issue 43: "no module of tests/support over ~600 lines"
# tests/ beside its test_*.py modules: the shared fixtures (the package
# support/: what a test imports from tests.support) and two tools of their
# own (an independent router, the real GTFS feeds).
TEST_FOLDER_MODULES = ("__init__.py", "real_feeds.py", "route_oracle.py", "support")
SUPPORT = os.path.join(TESTS, "support")
# The one exception to "standard library only" (issue 44): the Ray driver
# imports ray, inside its main() (so --help and --version run without Ray);
# everything else of it lives in transitlm/datasets/distributed.py.
RAY_DRIVER = "data.ray_make_dataset"
ALLOWED_THIRD_PARTY = {RAY_DRIVER: {"ray"}}
DATA_SCRIPT_LINES = 40           # data/*.py: a few lines per documented command
RAY_DRIVER_LINES = 100           # ... the Ray driver: its Ray calls (init, tasks, wait, cancel)


def project_modules():
    """{module name: path} of the project's Python files (tests excluded)."""
    modules = {}
    for folder, dirs, files in os.walk(REPO):
        rel = os.path.relpath(folder, REPO)
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "tests")]
        for name in files:
            if not name.endswith(".py"):
                continue
            parts = [] if rel == "." else rel.split(os.sep)
            stem = name[:-3]
            if stem != "__init__":
                parts = parts + [stem]
            modules[".".join(parts)] = os.path.join(folder, name)
    return modules


SCENARIOS = ("single_route", "personalized", "diversity", "general_llm")


def layer(module):
    parts = module.split(".")
    if module == "common":
        return RULES
    if parts[0] != "transitlm":
        return COMMANDS
    if parts[1:2] == ["io"]:
        return IO
    if parts[1:2] == ["evaluation"]:
        return EVALUATION
    return TOOLS


def upward_arrows(graph):
    """Every import that points to a higher layer, as "a -> b (layer -> layer)"."""
    return ["%s -> %s (%s imports %s)" % (module, target, LAYER_NAMES[layer(module)],
                                          LAYER_NAMES[layer(target)])
            for module, targets in sorted(graph.items())
            for target in sorted(targets) if layer(target) > layer(module)]


def imports_of(path, module, modules):
    """Project modules that ``module`` (at ``path``) imports, at any depth of
    its code (lazy imports count too)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    folder = module.rsplit(".", 1)[0] if "." in module else ""
    found = set()

    def resolve(name):
        # The longest project module that ``name`` names; or, since a data/ or
        # bench/ script puts its own folder on sys.path, a sibling imported by
        # its bare name (never the folder itself).
        for prefix in ("", folder + "." if folder else None):
            if prefix is None:
                continue
            candidate = prefix + name
            while len(candidate) > len(prefix):
                if candidate in modules and candidate != module:
                    return candidate
                candidate = candidate.rsplit(".", 1)[0] if "." in candidate else ""
        return None

    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # "from package import module" depends on the module; on the
            # package itself only for a name that is not a module of it.
            names = ["%s.%s" % (node.module, alias.name) for alias in node.names]
            if any(name not in modules for name in names):
                names.append(node.module)
        for name in names:
            target = resolve(name)
            if target:
                found.add(target)
    return found


def suite_modules():
    """{name: path} of the test modules, tests/test_*.py."""
    return {name[:-3]: os.path.join(TESTS, name) for name in sorted(os.listdir(TESTS))
            if name.startswith("test_") and name.endswith(".py")}


def imported_test_modules(source, names):
    """The modules among ``names`` (test modules) that ``source`` imports, at
    any depth of its code and in any form: tests.test_x, from tests import
    test_x, test_x by its bare name (tests/ on sys.path), from .test_x import y."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = "tests." + base if base else "tests"
            targets = [base] + ["%s.%s" % (base, alias.name) if base else alias.name
                                for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] == "tests":
                parts = parts[1:]
            if parts and parts[0] in names:
                found.add(parts[0])
    return found


class Layout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = project_modules()
        cls.graph = {module: imports_of(path, module, cls.modules)
                     for module, path in cls.modules.items()}

    def test_the_reader_sees_the_project(self):
        for module in ("common", "transitlm.evaluation.engine", "transitlm.cli", "transitlm.pages.maps",
                       "single_route.evaluate", "transitlm.networks.router", "compare",
                       "generate", "data.make_demo"):
            self.assertIn(module, self.modules)
        self.assertIn("common", self.graph["transitlm.evaluation.engine"])
        self.assertIn("transitlm.evaluation.engine", self.graph["single_route.evaluate"])
        self.assertIn("transitlm.networks.router",
                      self.graph["transitlm.networks.benchmark_builder"])
        self.assertIn("transitlm.networks.benchmark_builder", self.graph["data.make_benchmark"])

    def test_the_paths_users_wrote_still_import(self):
        # Issue 43: what docs and trainers' configs name keeps working; the
        # one moved path users may have written (transitlm.evaluation.records, in
        # docs/python-api.md) is an alias of the very module it moved to.
        import importlib
        for path, name in (("transitlm", "evaluate"), ("transitlm.api", "evaluate"),
                           ("transitlm.reward", "score"), ("transitlm.reward.trl", "route_reward"),
                           ("transitlm.reward.verl", "compute_score"),
                           ("transitlm.reward.openrlhf", "reward_func"),
                           ("transitlm.evaluation.records", "aggregate_records"),
                           ("transitlm.evaluation.records", "row_failed")):
            self.assertTrue(callable(getattr(importlib.import_module(path), name)), path)
        import transitlm.evaluation.records
        import transitlm.evaluation.records
        self.assertIs(transitlm.evaluation.records, transitlm.evaluation.records)
        from transitlm.evaluation.records import aggregate_records
        self.assertIs(aggregate_records, transitlm.evaluation.records.aggregate_records)

    def test_no_import_cycle(self):
        state = {}

        def visit(module, path):
            state[module] = "open"
            for target in sorted(self.graph[module]):
                if state.get(target) == "open":
                    cycle = path[path.index(target):] + [target] if target in path else [target]
                    self.fail("import cycle: " + " -> ".join(cycle))
                if target not in state:
                    visit(target, path + [target])
            state[module] = "done"

        for module in sorted(self.graph):
            if module not in state:
                visit(module, [module])

    def test_the_cycle_finder_finds_a_cycle(self):
        saved = self.graph
        try:
            type(self).graph = dict(saved, common=saved["common"] | {"transitlm.cli"})
            with self.assertRaises(AssertionError):
                self.test_no_import_cycle()
        finally:
            type(self).graph = saved

    def test_dependencies_run_one_way(self):
        self.assertEqual(upward_arrows(self.graph), [],
                         "commands -> tools -> evaluation -> io -> common: an arrow points up")

    def test_the_order_check_finds_an_arrow_up(self):
        # Each step down the order, taken upwards, is found.
        for low, high in (("common", "transitlm.io.files"),
                          ("transitlm.io.files", "transitlm.evaluation.engine"),
                          ("transitlm.evaluation.engine", "transitlm.pages.evaluator"),
                          ("transitlm.evaluation.engine", "transitlm.cli"),
                          ("transitlm.networks.router", "data.make_benchmark")):
            graph = dict(self.graph)
            graph[low] = graph[low] | {high}
            self.assertEqual(len(upward_arrows(graph)), 1, (low, high))
        self.assertEqual(layer("transitlm.io.files"), IO)
        self.assertEqual(layer("transitlm.evaluation.inputs"), EVALUATION)
        self.assertEqual(layer("transitlm.api"), TOOLS)
        self.assertEqual(layer("transitlm.reward.trl"), TOOLS)
        self.assertEqual(layer("compare"), COMMANDS)

    def test_every_room_is_named_from_the_tree(self):
        top = sorted(name for name in os.listdir(os.path.join(REPO, "transitlm"))
                     if name.endswith(".py"))
        self.assertLessEqual(len(top), MAX_TOP_MODULES, top)
        for folder in ("evaluation", "io"):
            self.assertIn("transitlm.%s" % folder, self.modules)
        # Each folder's __init__ says what it holds and what it may import.
        for module, path in sorted(self.modules.items()):
            if not path.endswith("__init__.py") or not module.startswith("transitlm."):
                continue
            with open(path, encoding="utf-8") as handle:
                doc = ast.get_docstring(ast.parse(handle.read())) or ""
            lines = doc.strip().splitlines()
            self.assertEqual(len(lines), 2, "%s: two lines, what it holds and what it may "
                                            "import" % path)
            self.assertIn("import", lines[1].lower(), path)

    def test_no_tool_imports_a_scenario_folder(self):
        # The scenario folders sit on top: the machinery and the data tools
        # take the rules from common, never from a scenario's script.
        wrong = ["%s -> %s" % (module, target)
                 for module, targets in sorted(self.graph.items())
                 if module.split(".")[0] in ("transitlm", "data", "common")
                 for target in sorted(targets) if target.split(".")[0] in SCENARIOS]
        self.assertEqual(wrong, [])

    def test_common_holds_only_rules(self):
        self.assertEqual(self.graph["common"], set())
        with open(self.modules["common"], encoding="utf-8") as handle:
            source = handle.read()
        for machinery in ("class SampleReader", "def evaluate_stream", "def build_parser",
                          "class Aggregate", "def report_json", "argparse"):
            self.assertNotIn(machinery, source)
        self.assertLessEqual(source.count("\n"), MAX_COMMON_LINES)

    def test_the_project_imports_only_the_standard_library(self):
        # Standard library only, at run time and in tests; the files other tools
        # read (the harness's utils.py) too.
        if not hasattr(sys, "stdlib_module_names"):
            self.skipTest("Python 3.10 or later lists the standard library's modules")
        paths = dict(self.modules, **{"tests." + name: path
                                      for name, path in suite_modules().items()})
        paths.update({"tests." + name[:-3]: os.path.join(TESTS, name)
                      for name in TEST_FOLDER_MODULES if name.endswith(".py")})
        paths.update({"tests.support." + name[:-3]: os.path.join(SUPPORT, name)
                      for name in os.listdir(SUPPORT) if name.endswith(".py")})
        ours = {name.split(".")[0] for name in paths} | {
            name.split(".")[-1] for name in paths}          # bare sibling imports
        outside = []
        for module, path in sorted(paths.items()):
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module]
                else:
                    continue
                allowed = sys.stdlib_module_names | ours | ALLOWED_THIRD_PARTY.get(module, set())
                outside += ["%s imports %s" % (module, name) for name in names
                            if name.split(".")[0] not in allowed]
        self.assertEqual(outside, [])

    def test_the_ray_driver_imports_ray_only_when_it_runs(self):
        # The one third-party import of the project: inside a function of the
        # Ray driver, never at its top level (nor anywhere else: above).
        with open(self.modules[RAY_DRIVER], encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        top, inside = [], []
        for node in tree.body:
            found = [n for n in ast.walk(node)
                     if isinstance(n, ast.Import) and any(alias.name.split(".")[0] == "ray"
                                                          for alias in n.names)
                     or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "ray"]
            (inside if isinstance(node, ast.FunctionDef) else top).extend(found)
        self.assertEqual((len(top), len(inside)), (0, 1))

    def test_no_module_too_large(self):
        large = []
        for module, path in sorted(self.modules.items()):
            with open(path, encoding="utf-8") as handle:
                count = sum(1 for _ in handle)
            if module != "common" and count > MAX_LINES:
                large.append("%s (%d lines)" % (module, count))
        self.assertEqual(large, [])

    def test_entry_scripts_are_thin(self):
        for script in ("single_route.evaluate", "personalized.evaluate", "diversity.evaluate",
                       "general_llm.evaluate", "compare", "generate", "harness"):
            with open(self.modules[script], encoding="utf-8") as handle:
                count = sum(1 for _ in handle)
            self.assertLessEqual(count, 300, script)

    def test_data_holds_data_and_thin_scripts(self):
        # data/ is the bundled data plus a few lines per documented command;
        # the tools themselves live in transitlm/networks/ and transitlm/datasets/.
        scripts = sorted(m for m in self.modules if m.split(".")[0] == "data")
        self.assertEqual(scripts, ["data.import_gtfs", "data.make_benchmark", "data.make_dataset",
                                   "data.make_demo", RAY_DRIVER])
        for script in scripts:
            with open(self.modules[script], encoding="utf-8") as handle:
                count = sum(1 for _ in handle)
            self.assertLessEqual(count, RAY_DRIVER_LINES if script == RAY_DRIVER
                                 else DATA_SCRIPT_LINES, script)

    def test_no_test_module_imports_another(self):
        # What two test modules share lives in tests/support/, so a test
        # module is read, run and split without the others.
        modules = suite_modules()
        wrong = []
        for name, path in modules.items():
            with open(path, encoding="utf-8") as handle:
                found = imported_test_modules(handle.read(), modules) - {name}
            wrong += ["tests/%s.py -> %s" % (name, other) for other in sorted(found)]
        self.assertEqual(wrong, [], "what test modules share goes to tests/support")

    def test_the_test_import_check_finds_an_import(self):
        names = {"test_a", "test_b"}
        for source in ("from tests.test_b import helper", "import tests.test_b",
                       "from tests import support, test_b", "import test_b as b",
                       "from test_b import helper", "from .test_b import helper",
                       "from . import test_b", "def f():\n    from tests.test_b import x\n"):
            self.assertEqual(imported_test_modules(source, names), {"test_b"}, source)
        self.assertEqual(imported_test_modules(
            "import unittest\nfrom tests import real_feeds, support\n"
            "from tests.support import REPO\nimport tests.support\n", names), set())

    def test_no_test_module_too_large(self):
        large = []
        paths = [os.path.join(TESTS, name) for name in os.listdir(TESTS)]
        paths += [os.path.join(SUPPORT, name) for name in os.listdir(SUPPORT)]
        for path in sorted(paths):
            name = os.path.relpath(path, TESTS)
            if not name.endswith(".py"):
                continue
            with open(path, encoding="utf-8") as handle:
                count = sum(1 for _ in handle)
            limit = (MAX_TEST_LINES if name.startswith("test_") else
                     MAX_SUPPORT_LINES if name.startswith("support" + os.sep) else MAX_LINES)
            if count > limit:
                large.append("tests/%s (%d lines, at most %d)" % (name, count, limit))
        self.assertEqual(large, [])

    def test_shared_fixtures_live_in_support(self):
        others = sorted(name for name in os.listdir(TESTS)
                        if (name.endswith(".py") or os.path.isdir(os.path.join(TESTS, name)))
                        and not name.startswith(("test_", "__pycache__")))
        self.assertEqual(others, sorted(TEST_FOLDER_MODULES),
                         "a fixture two test modules share goes to tests/support")


if __name__ == "__main__":
    unittest.main()
