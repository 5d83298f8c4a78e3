"""``python -m flink_agents_py``: the ``flink-agents-py`` command (``trace``, ``new``).

The same as the console script, for a venv whose ``bin/`` is not on ``PATH``: the docs say
to run ``.venv/bin/python`` instead of activating the venv.
"""

import sys

from flink_agents_py.cli import main

sys.exit(main())
