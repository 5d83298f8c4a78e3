"""What hosts and tools use of the runtime's private modules, beyond its public names.

The flink, local, io, observability, compat and testing packages import these from here, never
from ``runtime._*`` modules themselves (``tests/test_layers.py`` checks).
"""

from ..api.internal import key_from_json, key_json
from ._budgets import spend_adopter
from ._failures import clip, failure_text
from ._gauges import live_gauges
from ._keys import REJECTED_MARK, key_text
from ._records import loads_record
from ._serde import dumps
from ._terminal import escape_controls
from ._typed_fields import holds_model
from ._unread import UnreadErrors, error_line
from .core._commands import CallCommand
from .core._damaged import stored_run
from .core._observer import event_parent
from .core._results import UnreadableRecord, bad_line
from .recorder._binding import shape_parts

__all__ = ["REJECTED_MARK", "CallCommand", "UnreadErrors", "UnreadableRecord", "bad_line",
           "clip", "dumps", "error_line", "escape_controls", "event_parent", "failure_text",
           "holds_model",
           "key_from_json", "key_json", "key_text", "live_gauges", "loads_record", "shape_parts",
           "spend_adopter", "stored_run"]
