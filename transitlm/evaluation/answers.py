"""A model's answer, read the way a model writes it: the route it holds.

A reasoning model (Qwen3, DeepSeek-R1 and most models compared today) thinks
before it answers, and its text carries that thinking::

    <think> ... {"a": 1} ... a draft route ... </think>
    ```json
    {"station_sequence": [...], ...}
    ```<|im_end|>

``read_answer`` takes such a text to the route:

1. end-of-turn tokens (``<|im_end|>``, ``<|endoftext|>``, ``</s>``, ...) are
   dropped wherever they stand;
2. the answer is the text after the last closing reasoning tag
   (``</think>``, ``</thinking>``, ``</reasoning>``, ...; also when only the
   closing tag is there, as the Qwen3 and DeepSeek-R1 chat templates put the
   opening one in the prompt), or after gpt-oss's final-channel marker; a
   reasoning block opened and never closed (gpt-oss: its analysis channel
   with no final channel after it) is an error (code ``unclosed_reasoning``):
   the model ran out of tokens before it answered;
3. the route is the answer when it is JSON, else the first JSON object in
   it (a ```json fence, a sentence around it).

With ``strict=True`` the text must be JSON, as the published evaluator reads
it (``--strict_json``).  The evaluators (a predictions file, the Python API)
and the reward read answers with this one function.

The reading takes time linear in the text: each candidate object is decoded
from a window of the text that grows only while the object may run past it,
and the total decoded is bounded (READ_BUDGET_FACTOR times the text), so
text made of a million broken objects costs a bounded, linear time and is an
``invalid_json`` error row.  No step is a long call in C (a service's other
threads run between two): the tags are searched a chunk at a time, and a
text over a megabyte is decoded in steps (transitlm.io.json_steps).

Standard library only; Python 3.8+.
"""

import json
import re

from common import (JSON_WHITESPACE, MAX_JSON_DEPTH, SCAN_CHUNK, RowError, decode_json,
                    json_too_deep, loads_stripped)
from transitlm.io.json_steps import AT_ONCE, loads_in_steps, raw_decode_in_steps

# Tokens a chat template ends a turn with; never part of an answer.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>",
                      "<|end|>", "<|return|>", "</s>", "<end_of_turn>",
                      "<\uff5cend\u2581of\u2581sentence\uff5c>")     # DeepSeek's
# Reasoning blocks: (opening tag, closing tag), matched without regard to case.
REASONING_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"),
                  ("<reasoning>", "</reasoning>"), ("<reflection>", "</reflection>"),
                  ("<seed:think>", "</seed:think>"),
                  ("\u25c1think\u25b7", "\u25c1/think\u25b7"))          # Kimi's
# gpt-oss (harmony): the answer follows the last final-channel marker; its
# reasoning (the analysis channel) is a block that only a final channel closes.
FINAL_CHANNEL_MARKERS = ("<|channel|>final<|message|>",)
ANALYSIS_CHANNEL_MARKERS = ("<|channel|>analysis<|message|>",)

READ_WINDOW = 4096             # characters a candidate object is first decoded from
READ_BUDGET_FACTOR = 8         # at most this many times the text is handed to the decoder
READ_BUDGET_MIN = 1 << 20

_OPENINGS = tuple(open_ for open_, _ in REASONING_TAGS) + ANALYSIS_CHANNEL_MARKERS
_CLOSINGS = tuple(close for _, close in REASONING_TAGS) + FINAL_CHANNEL_MARKERS
_OPEN_RE = re.compile("|".join(map(re.escape, _OPENINGS)), re.IGNORECASE)
_CLOSE_RE = re.compile("|".join(map(re.escape, _CLOSINGS)), re.IGNORECASE)
# Characters one search reads at a time (see common.SCAN_CHUNK).
_SEARCH_CHUNK = SCAN_CHUNK
_DECODER = json.JSONDecoder()


class Answer(object):
    """What ``read_answer`` found: ``value`` (the decoded route; for a value
    that was not text, the value itself), ``reasoning`` (the text carried a
    reasoning block, left out) and ``extracted`` (the JSON was cut out of
    surrounding text)."""

    __slots__ = ("value", "reasoning", "extracted")

    def __init__(self, value, reasoning=False, extracted=False):
        self.value = value
        self.reasoning = reasoning
        self.extracted = extracted


def read_answer(text, what="prediction", strict=False):
    """A model's answer -> Answer; RowError (with its failure code) when no
    route can be read.  ``what`` names the text in a message."""
    if not isinstance(text, str):
        return Answer(text)
    if strict:
        return Answer(decode_json(text, what))
    answer, reasoning = answer_text(text, what)
    stripped = answer.strip(JSON_WHITESPACE)
    if not stripped:
        if reasoning:
            raise RowError("%s has no answer after its reasoning" % what, "invalid_json")
        raise RowError("%s is empty" % what, "invalid_json")
    if json_too_deep(stripped):
        raise RowError("%s is nested more than %d levels deep" % (what, MAX_JSON_DEPTH),
                       "too_deep")
    try:
        return Answer(loads_stripped(stripped) if len(stripped) <= AT_ONCE
                      else loads_in_steps(stripped), reasoning)
    except ValueError as exc:
        error = getattr(exc, "msg", None) or str(exc)
    found = first_json_object(stripped)
    if found is None:
        raise RowError("%s is not valid JSON (%s)%s" % (
            what, error, " after its reasoning" if reasoning else ""), "invalid_json")
    return Answer(found, reasoning, extracted=True)


def answer_text(text, what="prediction"):
    """(the answer part of a model's text, whether it carried reasoning):
    end-of-turn tokens dropped, the text after the last closing reasoning tag.
    RowError ``unclosed_reasoning`` when a reasoning block is never closed."""
    if "<" not in text and "\u25c1" not in text:
        # Every token, tag and marker above holds "<" or Kimi's "\u25c1": a
        # text with neither (a bare JSON answer) has none, told by two scans
        # in C instead of nine searches and two regular expressions.
        return text, False
    for token in END_OF_TURN_TOKENS:
        if token in text:
            text = text.replace(token, "")
    last = None
    for last in _matches(_CLOSE_RE, _CLOSINGS, text):
        pass
    reasoning = last is not None
    if reasoning:
        text = text[last.end():]
    opened = next(_matches(_OPEN_RE, _OPENINGS, text), None)
    if opened is not None:
        raise RowError("%s opens a reasoning block (%s) that is never closed: the model "
                       "stopped before it answered" % (what, opened.group(0)),
                       "unclosed_reasoning")
    return text, reasoning


def _matches(pattern, tags, text, chunk=None):
    """The matches of ``pattern`` (the alternatives ``tags``, literal) in
    ``text``, as ``pattern.finditer(text)`` finds them, each search over at
    most ``chunk`` characters (and a tag's length) in C."""
    chunk = chunk or _SEARCH_CHUNK
    if len(text) <= chunk:
        return pattern.finditer(text)
    return _chunked_matches(pattern, tags, text, chunk)


def _chunked_matches(pattern, tags, text, chunk):
    overlap = max(map(len, tags)) - 1
    start, length = 0, len(text)
    while start < length:
        end = min(length, start + chunk + overlap)
        found = pattern.search(text, start, end)
        if found is not None:
            yield found
            start = found.end()
        elif end == length:
            return
        else:
            start = end - overlap        # a tag may begin in the last ``overlap`` characters


def first_json_object(text):
    """The first JSON object in ``text`` that decodes completely, or None.

    Each ``{`` is tried in turn.  A candidate is decoded from a window of the
    text, widened only while the object may run past it; the whole search
    hands at most READ_BUDGET_FACTOR times the text to the decoder (a decode
    error's message counts the lines before it: decoding from the text's
    start each time would cost the square of its length).
    """
    budget = max(READ_BUDGET_MIN, READ_BUDGET_FACTOR * len(text))
    start = text.find("{")
    while start != -1:
        window = READ_WINDOW
        while True:
            end = min(len(text), start + window)
            budget -= end - start
            if budget < 0:
                return None
            candidate = text[start:end]
            try:
                value, _ = (_DECODER.raw_decode(candidate) if len(candidate) <= AT_ONCE
                            else raw_decode_in_steps(candidate))
            except ValueError as exc:
                if end < len(text) and _may_run_past(exc, end - start):
                    window *= 4
                    continue
                break
            if isinstance(value, dict):
                return value
            break
        start = text.find("{", start + 1)
    return None


def _may_run_past(exc, length):
    """Could a decode error of a window of ``length`` characters be only that
    the window ended (the object runs on past it)?"""
    message = getattr(exc, "msg", "")
    position = getattr(exc, "pos", length)
    return position >= length - 1 or message.startswith("Unterminated string")


