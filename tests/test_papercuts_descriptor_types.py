"""``ResourceDescriptor`` given no class, or something that is not one, says what to write.

``ResourceDescriptor(42)`` raised pydantic's ``ValidationError`` (``clazz: Input should be a
valid string``), and ``ResourceDescriptor(ChatModelSetup(connection="c"))`` (an instance
where its class goes, a common slip) the same, neither saying what a descriptor takes.
"""

from __future__ import annotations

import pytest

from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, UsageError

HOW = (
    "ResourceDescriptor(MyChatModel, model='...') or ResourceDescriptor("
    "clazz='my_app.models.MyChatModel', model='...')"
)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ((42,), "ResourceDescriptor needs the resource's class, got int 42: "),
        ((), "ResourceDescriptor needs the resource's class (none was given): "),
        (("  ",), "ResourceDescriptor needs the resource's class (none was given): "),
    ],
)
def test_a_descriptor_without_a_class_names_what_it_got_and_how_to_write_it(given, says):
    with pytest.raises(UsageError) as raised:
        ResourceDescriptor(*given)
    assert str(raised.value) == says + HOW
    assert isinstance(raised.value, TypeError)  # as a wrong argument type is in Python


def test_an_instance_where_its_class_goes_is_named():
    with pytest.raises(
        UsageError,
        match=r"got an instance of ChatModelSetup: give the class "
        r"ChatModelSetup itself and its fields as keywords",
    ):
        ResourceDescriptor(ChatModelSetup(connection="c"))


def test_the_usual_forms_still_build():
    by_class = ResourceDescriptor(ChatModelSetup, connection="c")
    by_path = ResourceDescriptor(clazz="flink_agents_py.api.ChatModelSetup", connection="c")
    theirs = ResourceDescriptor(
        target_module="flink_agents_py.api",
        target_clazz="ChatModelSetup",
        arguments={"connection": "c"},
    )
    assert by_class.arguments == by_path.arguments == theirs.arguments == {"connection": "c"}
    assert by_path.clazz == theirs.clazz == "flink_agents_py.api.ChatModelSetup"
