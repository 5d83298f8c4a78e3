"""What other packages use of the local runner beyond its public names.

The compat, testing and flink packages import these from here, never from ``local._*`` modules
themselves (``tests/test_layers.py`` checks).
"""

from ._progress import bar_size
from ._records import check_records

__all__ = ["bar_size", "check_records"]
