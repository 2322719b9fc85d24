"""The corpus texts, the statistics and the card that make_dataset.py uses:
the "corpus" helper's modules (corpus_texts.py, statistics.py, card.py), or,
until they are merged, the interim stand-in (interim.py).  The one place
that chooses; delete the fallback with interim.py.

Standard library only; Python 3.8+.
"""

try:
    from transitlm.datasets.corpus_texts import (line_entries, read_line_service,
                                                 record_matches_network, session_entry,
                                                 station_entries, text_states_record)
except ImportError:
    from transitlm.datasets.interim import (line_entries, read_line_service,
                                            record_matches_network, session_entry,
                                            station_entries, text_states_record)
try:
    from transitlm.datasets.statistics import DatasetStatistics
except ImportError:
    from transitlm.datasets.interim import DatasetStatistics
try:
    from transitlm.datasets.card import card_text, parse_card_configs
except ImportError:
    from transitlm.datasets.interim import card_text, parse_card_configs

__all__ = ["line_entries", "read_line_service", "record_matches_network", "session_entry",
           "station_entries",
           "text_states_record", "DatasetStatistics", "card_text", "parse_card_configs"]
