"""Reading input records so that a bad record never costs good ones (no pyflink here).

See ``flink_agents_py.io._lines`` for the rules; ``flink_agents_py.flink.read_lines_file`` and
``flink_agents_py.flink.read_json_topic`` apply the same rules on Flink.
"""

from ._lines import (
    MAX_RECORD_BYTES,
    UTF8_BOM,
    BadRecordError,
    LineResult,
    decode_record,
    excerpt,
    is_blank,
    json_line,
    parse_line_bytes,
    read_json_lines,
    split_lines,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "UTF8_BOM",
    "BadRecordError",
    "LineResult",
    "decode_record",
    "excerpt",
    "is_blank",
    "json_line",
    "parse_line_bytes",
    "read_json_lines",
    "split_lines",
]
