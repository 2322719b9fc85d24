"""The plumbing every tool shares: output files, terminal text, exit statuses and signals, the HTTP client, the JSON service, bounded and stepwise JSON, CSV rows.
May import common and the standard library only; nothing else of transitlm."""
