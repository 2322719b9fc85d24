"""The project's catalogue: where it lives and what its benchmarks are.

One home for each fact that several tools need: the repository and data
folders, and (below) the four benchmarks -- their names, titles, scripts and
default inputs -- and the paper's metrics with their labels and kinds.

Standard library only; Python 3.8+.
"""

import os

# The repository root: the scenario scripts are loaded from there by name.
PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The bundled data: the demo network and the example test files.
DATA_DIR = os.path.join(PROJECT_DIR, "data")
