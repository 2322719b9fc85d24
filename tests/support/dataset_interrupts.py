"""make_dataset.py stopped at the worst instant for a corpus part, in a
process of its own (for tests/test_datasets_release.py through
tests.support.Offloaded): a fresh interpreter has one thread, so a signal sent
to it meets the masks of that thread alone.

``stopped_as_a_part_opens(network, out)`` builds a small release into ``out``
and sends SIGINT the moment the temporary of the second corpus part exists
(its file made, the writer not yet handed back) -> {"status": the command's
exit status, or "escaped" when KeyboardInterrupt left it; "names": what
the corpus folder and the release folder hold then}."""

import contextlib
import io
import os
import signal

from transitlm.datasets import cli, release
from transitlm.datasets import release_names as names
from transitlm.io.exit_status import run_command


def stopped_as_a_part_opens(network, out):
    opened = []
    make = release.PartWriter.__init__

    def opening(self, path, number):
        make(self, path, number)
        opened.append(number)
        if len(opened) == 2:
            os.kill(os.getpid(), signal.SIGINT)     # the temporary exists now
    release.PartWriter.__init__ = opening
    argv = ["--network", network, "--out", out, "--train", "2", "--test", "2",
            "--corpus", "90", "--part_size", "40"]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            status = run_command(cli.main, argv)
    except KeyboardInterrupt:
        status = "escaped"
    corpus = os.path.join(out, names.CORPUS_FOLDER)
    held = []
    for folder in (corpus, out):
        if os.path.isdir(folder):
            held += sorted(os.listdir(folder))
    return {"status": status, "names": held, "opened": opened}
