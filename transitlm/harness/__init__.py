"""harness.py: TransitLM inside lm-evaluation-harness: the task folder for --include_path, what the harness calls to score, and its runs imported as run folders; docs/harness.md.
May import transitlm.api, transitlm.generate, transitlm.reward, transitlm.evaluation, transitlm.io and common."""
