"""Fitting the answers into a server's context (``harness.py lm-eval
--context_size N``).

A server refuses, or mishandles, a request whose prompt and ``max_tokens``
overflow the model's context: vLLM and SGLang answer 400; llama.cpp's
llama-server generates until the context is full; llama-cpp-python lowers
``max_tokens`` silently; a prompt longer than the context alone is a 400
(``exceed_context_size_error``) that lm-eval retries and then ends the whole
run on.  So given the context size, each task's ``max_gen_toks`` is set to
what the task's longest prompt leaves, and the rows whose prompt alone may
not fit are named.

No tokenizer is at hand when the task folder is written, so a prompt's
tokens are estimated from above: one token per UTF-8 byte of the system and
user messages (a token of a byte-level BPE or of SentencePiece with byte
fallback covers at least one byte; a Chinese character is three bytes and
usually one or two tokens), plus CHAT_TEMPLATE_TOKENS for the chat
template's role markers.  The estimate is an upper bound: the answers get
less room than a tokenizer would give them, never more than the context has.

Standard library only; Python 3.8+.
"""

CHAT_TEMPLATE_TOKENS = 64          # role markers, a template's preamble (Llama 3 dates)
MIN_ANSWER_TOKENS = 256            # a route's JSON answer, with no reasoning


def prompt_tokens(doc):
    """The estimated prompt tokens of a row (an upper bound, see above)."""
    return (len(doc.get("system_prompt", "").encode("utf-8", "surrogatepass"))
            + len(doc["sft_prompt"].encode("utf-8", "surrogatepass")) + CHAT_TEMPLATE_TOKENS)


class Fit(object):
    """How a task's rows fit a context: ``max_gen_toks`` for the task,
    ``longest`` the longest prompt that fits (estimated tokens), ``too_long``
    the rows whose prompt alone may not fit: [(row, index_id, estimate)]."""

    def __init__(self, max_gen_toks, longest, too_long):
        self.max_gen_toks = max_gen_toks
        self.longest = longest
        self.too_long = too_long

    @property
    def short(self):
        """Fewer tokens than a route's answer needs?"""
        return self.max_gen_toks < MIN_ANSWER_TOKENS

    def record(self):
        return {"max_gen_toks": self.max_gen_toks, "longest_prompt_tokens": self.longest,
                "rows_too_long": [row for row, _, _ in self.too_long]}


def fit_context(docs, context_size, max_gen_toks):
    """The Fit of ``docs`` in ``context_size`` tokens, ``max_gen_toks`` at
    most -> Fit, or None when no row's prompt fits at all."""
    longest = 0
    too_long = []
    for doc in docs:
        tokens = prompt_tokens(doc)
        if tokens >= context_size:
            too_long.append((doc["row"], doc["index_id"], tokens))
        else:
            longest = max(longest, tokens)
    if len(too_long) == len(docs):
        return None
    return Fit(min(max_gen_toks, context_size - longest), longest, too_long)
