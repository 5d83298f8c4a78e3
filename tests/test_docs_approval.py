"""The approval page's "Test it locally" recipes (docs/how-to/wait-for-approval.md), run as written.

Each answer generator (the plain one, and the interleaved one placing answers between the
records) must answer every request, including the one of a key's second record, which comes
out only once the first record's request is answered: a request no one answers times out
silently (the model reads "not approved"), so the tests assert none did.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from support import waits_agents as wa

pytestmark = pytest.mark.timeout(120)

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "how-to" / "wait-for-approval.md"


RECORDS = [
    {"key": "k1", "to": "a@ok.org"},
    {"key": "k1", "to": "b@bad.org"},
    {"key": "k1", "to": "c@ok.org"},
    {"key": "k2", "to": "d@ok.org"},
]


def _recipes() -> list[str]:
    section = PAGE.read_text().split("### Test it locally", 1)[1].split("### On Flink", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)


def _run(*blocks: str) -> Any:
    """Run the page's blocks one after the other, as one script, and return its ``result``."""
    namespace: dict[str, Any] = {"requests": RECORDS, "Support": wa.make_mailer}
    for block in blocks:
        exec(compile(block, f"{PAGE.name} Test it locally", "exec"), namespace)  # noqa: S102
    return namespace["result"]


def test_the_local_approval_recipe_answers_every_request_a_key_makes(tmp_path, monkeypatch):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    result = _run(_recipes()[0])
    assert result.errors == []
    answers = [(o["key"], o["answer"]) for o in result.outputs if "answer" in o]
    assert not [a for a in answers if "not approved" in a[1]], answers  # none timed out
    k1 = [answer for key, answer in answers if key == "k1"]
    assert len(k1) == 3 and "sent to a@ok.org" in k1[0] and "sent to c@ok.org" in k1[2]
    assert "rejected by its reviewer: no" in k1[1]
    assert [answer for key, answer in answers if key == "k2" and "sent to d@ok.org" in answer]
    sent = (tmp_path / "calls.log").read_text().split()
    assert sorted(sent[1::2]) == ["a@ok.org", "c@ok.org", "d@ok.org"]  # approved ones ran


def test_the_interleaved_recipe_answers_every_request_between_the_records(tmp_path, monkeypatch):
    # it answered only the requests out after the first record: the others timed out
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    plain, interleaved = _recipes()[:2]
    assert "interleaved=True" in interleaved and "AfterRecords" in interleaved
    result = _run(plain, interleaved)  # the page's second block uses the first's job
    assert result.errors == []
    answers = [(o["key"], o["answer"]) for o in result.outputs if "answer" in o]
    assert len(answers) == 4 and not [a for a in answers if "not approved" in a[1]], answers
    assert all("sent to" in answer for _, answer in answers), answers  # it approves all
    sent = (tmp_path / "calls.log").read_text().split()
    assert sorted(sent[1::2]) == [
        "a@ok.org",
        "a@ok.org",
        "b@bad.org",
        "c@ok.org",
        "c@ok.org",
        "d@ok.org",
        "d@ok.org",
    ]


@pytest.mark.parametrize("crash_at", [1, 3, 5, 8, 12])
def test_the_restore_recipe_answers_the_requests_out_before_the_crash(
    tmp_path, monkeypatch, crash_at
):
    # the page said only that a snapshot restores waits; the recipe above, restored with its
    # generator reading the new job's outputs, left the requests out before the crash
    # unanswered (they timed out: "not approved") and its first answers were skipped
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    crash = _recipes()[2]
    assert "max_steps=5" in crash and "before=cut.outputs" in crash
    namespace: dict[str, Any] = {"requests": RECORDS, "Support": wa.make_mailer}
    exec(compile(_recipes()[0], PAGE.name, "exec"), namespace)  # noqa: S102
    exec(
        compile(
            crash.replace("max_steps=5", f"max_steps={crash_at}"),  # noqa: S102
            PAGE.name,
            "exec",
        ),
        namespace,
    )
    cut, result = namespace["cut"], namespace["result"]
    assert not cut.completed and cut.errors == [] and result.errors == []
    answers = [(o["key"], o["answer"]) for o in cut.outputs + result.outputs if "answer" in o]
    assert not [a for a in answers if "not approved" in a[1]], answers  # none timed out
    assert sorted(key for key, _ in answers) == ["k1", "k1", "k1", "k2"], answers
    assert len([a for a in answers if "rejected by its reviewer: no" in a[1]]) == 1
    sent = set((tmp_path / "calls.log").read_text().split()[1::2])
    assert sent == {"a@ok.org", "c@ok.org", "d@ok.org"}  # the approved ones ran


def test_the_refusal_the_page_quotes_is_what_the_model_reads(tmp_path, monkeypatch):
    # the page quoted the refusal without the "Error: " a failed tool's result starts with,
    # so a script matching the quoted text (startswith) never matched
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    page = " ".join(PAGE.read_text().split())
    quoted = re.search(r"the model reads `(Error: [^`]*?reviewer: )not this customer`", page)
    assert quoted is not None, "the page no longer quotes the refusal the model reads"
    result = _run(_recipes()[0])
    answers = [o["answer"] for o in result.outputs if o.get("key") == "k1" and "answer" in o]
    assert answers[1] == quoted.group(1) + "no"  # the recipe rejects with "no"
    assert "(or `Error: the call of tool 'send_email' was not approved:" in page
