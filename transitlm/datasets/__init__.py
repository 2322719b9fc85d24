"""The training-data release (make_dataset.py): SFT splits, the pre-training corpus, the card.
May import transitlm's evaluation core and plumbing, transitlm.networks and common; nothing imports it but commands."""
