"""generate.py: ask a model for every test row through the OpenAI
chat-completions API and write its answers as a predictions file.

``cli`` (the command line), ``runner`` (rows, the output file, the run loop),
``chat`` (one request and its answer, redaction), ``failures`` (what an
answer that is not a model's text means), ``waits`` (backoff, rate limits),
``settings`` (the settings sidecar) and ``resume`` (resuming, --restart,
--adopt).  See docs/model-runner.md.
"""
