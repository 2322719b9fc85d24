"""Former home of the evaluation core's records module (moved in 1.5.0, issue
43), kept for code written against the documented path of aggregate_records
(docs/python-api.md): importing it gives the very same module object."""

import sys

from transitlm.evaluation import records as _records

sys.modules[__name__] = _records
