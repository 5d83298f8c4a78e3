"""``python -m jobs.review_analysis``: run the job (see ``cli``)."""

import sys

from .cli import main

sys.exit(main())
