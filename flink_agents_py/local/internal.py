"""What other packages use of the local runner beyond its public names.

The compat and testing packages import these from here, never from ``local._*`` modules
themselves (``tests/test_layers.py`` checks).
"""

from ._records import check_records

__all__ = ["check_records"]
