"""The prompt a test row is asked with -- one rule for every tool that asks a
model or prepares rows for one (generate.py, harness.py lm-eval, reward.py
prepare) -- and the record of it a run keeps.

A row's system message is, in this order:

1. the text of ``--system_prompt_file`` when one is given (an empty file:
   no system message, for a model trained on ``sft_prompt`` alone);
2. the row's ``system_prompt`` cell, when the file has that column and the
   cell holds more than white space (an empty cell counts as no cell);
3. the benchmark's default system prompt
   (transitlm.evaluation.prompt_texts.benchmark_system_prompt: the task and the
   answer's JSON format, in Chinese like the release's queries).  The
   release's rows carry no system_prompt column (the published evaluator's
   files: index_id, sft_prompt, sft_label), and without one a model is not
   told the answer format the evaluators read.

The user message is the row's ``sft_prompt``.  ``row_messages`` builds the
chat messages: the one function the three tools call.

What a run sent is folded into a record (``PromptTally``, or
``prompt_record`` for a single text): ``{"source": "column" | "file" |
"default" | "column+default", "sha256": ...}``, the SHA-256 of the text when
every row got the same one, else of the rows' texts' SHA-256s in row order.
generate.py keeps it in its settings sidecar (``prompt``), harness.py lm-eval
in the task folder, reward.py prepare in its summary; the evaluators copy it
into report.json (``inputs.prompt``) and name it in the signature
(``signature_part``): ``prompt:column#ab12cd34``, ``prompt:none`` for the
labels scored as answers (no question was asked), ``prompt:unknown`` for
answers whose prompt nothing records.

Standard library only; Python 3.8+.
"""

import hashlib
import re

from common import InputError
from transitlm.io.csv_rows import MAX_ROW_CHARS
from transitlm.evaluation.prompt_texts import benchmark_system_prompt

COLUMN, FILE, DEFAULT = "column", "file", "default"
SOURCES = (COLUMN, FILE, DEFAULT)       # in the order a mixed source names them
NONE = "none"                            # the labels scored: no question asked
UNKNOWN = "unknown"                      # answers whose prompt nothing records
SIGNATURE_PREFIX = "prompt:"
_SHA256_RE = re.compile(r"\A[0-9a-f]{64}\Z")


def text_sha256(text):
    """The SHA-256 of a text's UTF-8 bytes (a lone surrogate kept as it is)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chat_messages(system, user):
    """The chat messages of a system text and a user text; an empty system
    text sends no system message."""
    messages = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    return messages


def system_prompt_for(cell, benchmark, override=None):
    """-> (source, text) of a row's system prompt: ``override`` (the text of
    --system_prompt_file) when given, else the ``system_prompt`` cell (None:
    the file has no such column) when it holds more than white space, else
    the default prompt of ``benchmark`` (its evaluator's name)."""
    if override is not None:
        return FILE, override
    if cell is not None and cell.strip():
        return COLUMN, cell
    return DEFAULT, benchmark_system_prompt(benchmark)


def row_messages(cell, user, benchmark, override=None):
    """The chat messages a row is asked with: its system prompt
    (system_prompt_for) and its ``sft_prompt`` ``user``."""
    return chat_messages(system_prompt_for(cell, benchmark, override)[1], user)


def read_prompt_file(path, flag="--system_prompt_file"):
    """The text of a system prompt file (UTF-8, a BOM dropped, at most
    MAX_ROW_CHARS characters); InputError naming ``flag`` otherwise."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read(MAX_ROW_CHARS + 1)
    except OSError as exc:
        raise InputError("cannot read %s %s: %s" % (flag, path, exc.strerror or exc))
    except UnicodeDecodeError:
        raise InputError("%s %s is not UTF-8 text" % (flag, path))
    if len(text) > MAX_ROW_CHARS:
        raise InputError("%s %s holds more than %d characters" % (flag, path, MAX_ROW_CHARS))
    return text


def prompt_record(source, text):
    """The record of a run whose every row got ``text`` from ``source``
    (column, file or default): {"source": ..., "sha256": ...}."""
    return {"source": source, "sha256": text_sha256(text)}


class PromptTally(object):
    """The system prompts of a run's rows, folded row by row into one record
    (``record()``) in constant memory."""

    def __init__(self):
        self.counts = {}             # rows by source
        self.rows = 0
        self._first = None           # SHA-256 of the first row's text
        self._same = True            # every row's text so far the first one's
        self._digest = hashlib.sha256()
        self._last = (None, None)    # (text, its SHA-256): the default is one object

    def add(self, source, text):
        last_text, sha = self._last
        if text is not last_text:
            sha = text_sha256(text)
            self._last = (text, sha)
        self.counts[source] = self.counts.get(source, 0) + 1
        self.rows += 1
        if self._first is None:
            self._first = sha
        elif sha != self._first:
            self._same = False
        self._digest.update(sha.encode("ascii") + b"\n")

    @property
    def sources(self):
        return set(self.counts)

    def record(self):
        """The record (see the module's text), or None when no row was added."""
        if not self.rows:
            return None
        source = "+".join(name for name in SOURCES if name in self.counts)
        return {"source": source,
                "sha256": self._first if self._same else self._digest.hexdigest()}


def valid_record(value):
    """A record as prompt_record or PromptTally write it -> the record (its
    two keys), else None (not one: a hand-edited or foreign file)."""
    if not isinstance(value, dict):
        return None
    source, sha = value.get("source"), value.get("sha256")
    if not isinstance(source, str) or not isinstance(sha, str) or not _SHA256_RE.match(sha):
        return None
    names = source.split("+")
    if not names or any(name not in SOURCES for name in names) \
            or names != [name for name in SOURCES if name in names]:
        return None
    return {"source": source, "sha256": sha}


def run_prompt(labels, generation):
    """What report.json records of the prompt of a run's answers
    (``inputs.prompt``): the record generate.py kept in the predictions'
    settings sidecar (``generation``, a dict or None); ``{"source": "none"}``
    when the labels are scored (``labels``: no question was asked);
    ``{"source": "unknown"}`` when nothing records it (answers inline in the
    test file, a predictions file without a sidecar)."""
    if labels:
        return {"source": NONE, "sha256": None}
    if isinstance(generation, dict):
        record = valid_record(generation.get("prompt"))
        if record is not None:
            return record
        legacy = generation.get("system_prompt_sha256")      # a sidecar of 1.3.0 and older
        if isinstance(legacy, str) and _SHA256_RE.match(legacy):
            return {"source": FILE, "sha256": legacy}
    return {"source": UNKNOWN, "sha256": None}


def signature_part(record):
    """The signature's name of a run's prompt: ``prompt:column#ab12cd34``,
    ``prompt:none``, ``prompt:unknown``."""
    record = record if isinstance(record, dict) else {}
    source, sha = record.get("source"), record.get("sha256")
    if source in (NONE, UNKNOWN) or not isinstance(sha, str):
        return SIGNATURE_PREFIX + (NONE if source == NONE else UNKNOWN)
    return "%s%s#%s" % (SIGNATURE_PREFIX, source, sha[:8])


def asked(part):
    """Does a signature's prompt part name a prompt (not none, unknown or absent)?"""
    return bool(part) and part not in (SIGNATURE_PREFIX + NONE, SIGNATURE_PREFIX + UNKNOWN)


def describe_source(source, benchmark=None):
    """A record's source in words, for a note: "the file's system_prompt column", ..."""
    words = {COLUMN: "the rows' system_prompt cells", FILE: "--system_prompt_file",
             DEFAULT: "the default system prompt%s" % (" of %s" % benchmark if benchmark else "")}
    return " and ".join(words[name] for name in source.split("+") if name in words)
