"""Runs of data/make_dataset.py for the tests: its path, the demo network,
a small run's settings, scratch folders removed when the tests end, the
command run in a process of its own, and the corpus rows of a folder."""

import atexit
import csv
import os
import shutil
import subprocess
import sys
import tempfile

from tests.support import REPO
from transitlm.datasets import release_names as names

csv.field_size_limit(2 ** 31 - 1)

SCRIPT = os.path.join(REPO, "data", "make_dataset.py")
DEMO = os.path.join(REPO, "data")
SMALL = ["--train", "10", "--test", "6", "--corpus", "16", "--part_size", "120"]


def scratch(prefix):
    """A temporary folder removed when the tests end."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def command(*args):
    """make_dataset.py ARGS in a process of its own -> its standard output
    (an AssertionError with its stderr when it fails)."""
    done = subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, encoding="utf-8")
    if done.returncode:
        raise AssertionError("make_dataset.py %s exited %s: %s" % (args, done.returncode, done.stderr))
    return done.stdout


def read_csv(path):
    """(header, rows as dicts) of a CSV file."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def corpus_rows(out):
    """Every corpus row of a release folder, part after part, as dicts."""
    folder = os.path.join(out, names.CORPUS_FOLDER)
    for name in sorted(os.listdir(folder)):
        header, rows = read_csv(os.path.join(folder, name))
        assert header == names.CORPUS_COLUMNS, header
        for row in rows:
            yield row
