"""The JSON Schema of agents YAML documents, generated from the models the loader uses.

Regenerate the committed file after changing ``_specs.py``::

    python -m flink_agents_py.yaml.schema > flink_agents_py/yaml/agents.schema.json

(``tests/test_yaml_schema.py`` fails while the file is stale.)
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ._specs import SCHEMA_PATH, DocumentSpec

__all__ = ["SCHEMA_ID", "SCHEMA_PATH", "json_schema", "render"]

SCHEMA_ID = "https://flink-agents-py.invalid/schemas/agents.schema.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a document, from ``DocumentSpec``.

    It is declared draft-07, which editors' YAML language servers read best; it uses only
    draft-07 keywords (pydantic's ``$defs`` are reached by JSON pointer).

    Returns:
        The schema as a JSON-ready dict.
    """
    schema = DocumentSpec.model_json_schema(mode="validation")
    return {"$schema": "http://json-schema.org/draft-07/schema#", "$id": SCHEMA_ID,
            **schema}


def render() -> str:
    """The schema as the committed file holds it (sorted keys, two-space indents)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    import argparse

    # ``--help`` says what this prints (before, any argument was ignored: --help printed the
    # whole schema)
    argparse.ArgumentParser(
        prog="python -m flink_agents_py.yaml.schema",
        description="Print the JSON Schema of agents YAML documents (draft-07), for an "
                    "editor's YAML language server.").parse_args()
    sys.stdout.write(render())
