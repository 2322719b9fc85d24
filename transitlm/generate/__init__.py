"""generate.py: ask a model for every test row through the OpenAI chat-completions API and write its answers as a predictions file (runner, chat, waits, settings, resume); docs/model-runner.md.
May import transitlm.evaluation, transitlm.io and common."""
