#!/usr/bin/env python3
"""Turn a GTFS feed into a TransitLM network folder (station_info.csv, line_info.csv, ...).

    python3 data/import_gtfs.py FEED --out DIR --city NAME [--date YYYYMMDD] ...

The importer is transitlm/networks/gtfs_import.py; `--help` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.networks.gtfs_import import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
