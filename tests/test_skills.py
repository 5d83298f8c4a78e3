"""Agent skills: loading SKILL.md folders, offering them, and running their commands safely."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
from flink_agents_py.skills import (
    CommandRefusedError,
    LoadSkillTool,
    RunSkillCommandTool,
    SkillError,
    load_skills,
    parse_command,
    skill_tools,
)
from flink_agents_py.testing import ScriptedRequest, model_from_function, tool_call, tool_calls

MATH = """---
name: math-calculator
description: Evaluate arithmetic expressions exactly with the bc calculator.
---
# Math calculator

Run `echo '<expression>' | bc` and answer with its output only.
See reference.md for the operators.
"""


@pytest.fixture()
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "math-calculator").mkdir(parents=True)
    (root / "math-calculator" / "SKILL.md").write_text(MATH)
    (root / "math-calculator" / "reference.md").write_text("+ - * / ^ ( )\n")
    (root / "greeter").mkdir()
    (root / "greeter" / "SKILL.md").write_text(
        "---\nname: greeter\ndescription: Greets people.\n---\nSay hello.\n")
    (tmp_path / "secret.txt").write_text("do not read")
    return root


def test_skills_load_from_a_folder_of_skill_folders(skills_dir):
    skills = load_skills([str(skills_dir)])
    assert list(skills) == ["greeter", "math-calculator"]
    math = skills["math-calculator"]
    assert math.description.startswith("Evaluate arithmetic")
    assert math.instructions.startswith("# Math calculator")
    assert math.files() == ["reference.md"]
    assert list(load_skills([str(skills_dir / "greeter")])) == ["greeter"]  # one skill folder


def test_a_folder_without_skill_md_is_a_named_error(skills_dir):
    (skills_dir / "broken").mkdir()
    with pytest.raises(SkillError, match=r"broken has no SKILL\.md"):
        load_skills([str(skills_dir)])
    with pytest.raises(SkillError, match="broken has no SKILL.md"):
        skill_tools([str(skills_dir)])


@pytest.mark.parametrize("text, problem", [
    ("no front matter\n", "no YAML front matter"),
    ("---\nname: Bad Name\ndescription: x\n---\n", "'name' must be"),
    ("---\nname: ok\n---\nbody", "'description' is missing"),
    ("---\n[unclosed\n---\n", "not YAML"),
])
def test_bad_front_matter_is_a_named_error(tmp_path, text, problem):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text(text)
    with pytest.raises(SkillError, match=problem):
        load_skills([str(tmp_path)])


def test_a_yaml_alias_bomb_in_a_skills_front_matter_is_refused_within_the_budget(tmp_path):
    # a skill folder is untrusted: its front matter is read within the YAML loader's budget
    # (a 640-byte bomb expands to 9**9 strings under an unbounded loader)
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    front = "\n".join(["name: bomb", "description: d", *lines, "payload: *i"])
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text(f"---\n{front}\n---\nbody\n")
    with pytest.raises(SkillError, match=r"SKILL.md: the front matter is not YAML within its"):
        load_skills([str(tmp_path)])


def test_load_skill_offers_the_skills_and_loads_one_on_demand(skills_dir):
    asyncio.run(_load_skill_checks(skills_dir))


async def _load_skill_checks(skills_dir: Path) -> None:
    tool = LoadSkillTool(paths=[str(skills_dir)])
    meta = tool.metadata
    assert meta.name == "load_skill"
    assert "- math-calculator: Evaluate arithmetic" in meta.description
    loaded = await tool.acall(name="math-calculator")
    assert loaded["files"] == ["reference.md"] and "bc" in loaded["instructions"]
    assert await tool.acall(name="math-calculator", file="reference.md") == {
        "file": "reference.md", "text": "+ - * / ^ ( )\n"}
    with pytest.raises(SkillError, match="has no file"):
        await tool.acall(name="math-calculator", file="../../secret.txt")
    with pytest.raises(SkillError, match="no skill named"):
        await tool.acall(name="nope")


INJECTIONS = [
    "echo 1; touch pwned",
    "echo 1 && touch pwned",
    "echo 1 || touch pwned",
    "echo 1 & touch pwned",
    "echo $(touch pwned)",
    "echo `touch pwned`",
    "echo $HOME",
    "echo ${PATH}",
    "echo hi > pwned",
    "echo hi >> pwned",
    "bc < /etc/passwd",
    "echo 1\ntouch pwned",
    "/bin/sh -c 'touch pwned'",
    "./bc",
    "../../usr/bin/touch pwned",
    "sh -c 'touch pwned'",
    "echo 1 | sh",
    "FOO=bar echo 1",
    "cat ../../secret.txt",
    "cat /etc/passwd",
    "cat ~/.bashrc",
    "(touch pwned)",
    "echo 1 |& touch pwned",
    "echo 'unterminated",
    "",
]


@pytest.mark.parametrize("command", INJECTIONS)
def test_injection_strings_are_refused_and_nothing_runs(skills_dir, command):
    tool = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["echo", "bc", "cat"])
    with pytest.raises(CommandRefusedError, match="refused"):
        tool.run("math-calculator", command)
    assert not (skills_dir / "math-calculator" / "pwned").exists()
    assert not Path("pwned").exists()


def test_allowed_commands_and_pipelines_run_on_the_skill_files(skills_dir):
    require_bubblewrap()
    tool = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["echo", "bc", "cat",
                                                                           "pwd", "ls"])
    assert tool.run("math-calculator", "echo '(2+3)*4' | bc") == {"exit_code": 0,
                                                                  "output": "20\n"}
    assert tool.run("math-calculator", "cat reference.md")["output"] == "+ - * / ^ ( )\n"
    # the sandbox's working directory shows the skill's files (and only them)
    assert tool.run("greeter", "pwd")["output"] == "/skill\n"
    assert tool.run("greeter", "ls")["output"] == "SKILL.md\n"
    trusting = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["pwd"],
                                   sandbox="none")
    assert trusting.run("greeter", "pwd")["output"].strip() == str(skills_dir / "greeter")
    assert parse_command("echo 'a;b|c'", {"echo"}) == [["echo", "a;b|c"]]  # quoted: one word


def test_a_command_past_its_timeout_is_stopped(skills_dir):
    require_bubblewrap()
    tool = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["sleep"],
                               timeout_s=0.3)
    with pytest.raises(CommandRefusedError, match="stopped"):
        tool.run("greeter", "sleep 5")


def test_output_is_capped(skills_dir):
    require_bubblewrap()
    tool = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["seq"],
                               max_output_chars=100)
    result = tool.run("greeter", "seq 1 100000")
    out = result["output"]
    assert out.startswith("1\n2\n3\n") and len(out) == 100  # the command's text only
    assert result["output_cut"] == {"kept_characters": 100, "bytes_written": 588895}


def test_bad_allowed_commands_are_rejected(skills_dir):
    with pytest.raises(ValueError, match="bare program names"):
        RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["/bin/sh"])


def math_script(request: ScriptedRequest) -> object:
    """Loads the skill, tries an injection, then runs the skill's command and answers."""
    done = [m for m in request.messages if m.role == "tool"]
    if len(done) == 0:
        return tool_calls(tool_call("load_skill", "c1", name="math-calculator"))
    if len(done) == 1:
        return tool_calls(tool_call("run_skill_command", "c2", skill="math-calculator",
                                    command="echo 1; touch pwned"))
    if len(done) == 2:
        return tool_calls(tool_call("run_skill_command", "c3", skill="math-calculator",
                                    command="echo '(2+3)*4' | bc"))
    return json.dumps({"refusal": done[1].content, "answer": json.loads(done[2].content)})


def test_react_agent_uses_a_skill_and_an_injection_is_reported_to_the_model(skills_dir):
    require_bubblewrap()
    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                       tools=skill_tools([str(skills_dir)], allowed_commands=["echo", "bc"]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(math_script))
    job = AgentsExecutionEnvironment.local().from_list(["What is (2+3)*4?"]).apply(agent)
    outputs = job.collect()
    assert job.result.errors == []
    result = json.loads(outputs[0])
    assert result["refusal"].startswith("Error: ") and "';' is not allowed" in result["refusal"]
    assert result["answer"] == {"exit_code": 0, "output": "20\n"}
    assert not (skills_dir / "math-calculator" / "pwned").exists()


def test_skills_from_a_user_module_outside_the_repository(tmp_path, skills_dir):
    require_bubblewrap()
    work = tmp_path / "user"
    work.mkdir()
    shutil.copytree(skills_dir, work / "skills")
    (work / "my_agent.py").write_text(textwrap.dedent('''
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.agents import ReActAgent
        from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
        from flink_agents_py.skills import skill_tools
        from flink_agents_py.testing import model_from_function, tool_call, tool_calls

        def script(req):
            results = [m for m in req.messages if m.role == "tool"]
            if not results:
                return tool_calls(tool_call("run_skill_command", "c1",
                                            skill="math-calculator", command="echo 2^10 | bc"))
            return results[-1].content

        agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                           tools=skill_tools(["skills"], allowed_commands=["echo", "bc"]))
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           model_from_function(script))
        print(AgentsExecutionEnvironment.local().from_list(["2^10?"]).apply(agent).collect())
    '''))
    proc = subprocess.run([sys.executable, "my_agent.py"], cwd=work, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['{\"exit_code\":0,\"output\":\"1024\\\\n\"}']"


def test_skill_commands_are_replay_safe(skills_dir):
    require_bubblewrap()
    from flink_agents_py.testing import check_replay_safety

    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                       tools=skill_tools([str(skills_dir)], allowed_commands=["echo", "bc"]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(math_script))
    check_replay_safety(agent, ["What is (2+3)*4?"]).assert_ok()


def _flink_style_agent(skills_dir: Path, wanted: list[str]):
    from flink_agents_py.compat import (
        Agent,
        ChatMessage,
        ChatRequestEvent,
        ChatResponseEvent,
        Event,
        EventType,
        InputEvent,
        MessageRole,
        OutputEvent,
        ResourceName,
        RunnerContext,
        Skills,
        action,
        chat_model_setup,
        skills,
    )

    class Math(Agent):
        @skills
        @staticmethod
        def my_skills() -> Skills:
            return Skills.from_local_dir(str(skills_dir))

        @chat_model_setup
        @staticmethod
        def math_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="conn", skills=wanted,
                                      allowed_commands=["echo", "bc"])

        @action(EventType.InputEvent)
        @staticmethod
        def ask(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="math_model", messages=[
                ChatMessage.of(MessageRole.USER, InputEvent.from_event(event).input)]))

        @action(EventType.ChatResponseEvent)
        @staticmethod
        def answer(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event).response.text))

    return Math()


def flink_style_script(request: ScriptedRequest) -> object:
    """Loads the skill, then calls ``bash`` without naming the skill (only one is offered)."""
    done = [m for m in request.messages if m.role == "tool"]
    if not done:
        names = sorted(t.name for t in request.tools)
        assert names == ["bash", "load_skill"], names
        return tool_calls(tool_call("load_skill", "c1", name="math-calculator"))
    if len(done) == 1:
        return tool_calls(tool_call("bash", "c2", command="echo '2^10' | bc"))
    return json.loads(done[-1].content)["output"].strip()


def test_flink_agents_skills_declaration_gets_load_skill_and_bash_tools(skills_dir):
    require_bubblewrap()
    from flink_agents_py.compat import AgentsExecutionEnvironment as FlinkAgentsEnv

    env = FlinkAgentsEnv.get_execution_environment()
    env.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                     model_from_function(flink_style_script))
    out = env.from_list([{"key": "q", "value": "2^10?"}]).apply(
        _flink_style_agent(skills_dir, ["math-calculator"])).to_list()
    env.execute()
    assert out == [{"q": "1024"}]


def test_a_setup_naming_an_unknown_skill_is_a_named_error(skills_dir):
    from flink_agents_py.plan import AgentPlan

    with pytest.raises(SkillError, match=r"no skill named \['nope'\]"):
        AgentPlan.from_agent(_flink_style_agent(skills_dir, ["nope"]))


def test_a_skill_md_linked_outside_its_folder_is_a_named_error(tmp_path):
    (tmp_path / "s").mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("---\nname: s\ndescription: x\n---\nhost file\n")
    (tmp_path / "s" / "SKILL.md").symlink_to(outside)
    with pytest.raises(SkillError, match="symlink to a file outside the skill's folder"):
        load_skills([str(tmp_path / "s")])


def test_load_skill_lists_at_most_its_cap_of_files(skills_dir):
    from flink_agents_py.skills import MAX_LISTED_FILES

    many = skills_dir / "greeter" / "many"
    many.mkdir()
    for i in range(MAX_LISTED_FILES + 5):
        (many / f"f{i:05d}.txt").touch()
    loaded = asyncio.run(LoadSkillTool(paths=[str(skills_dir)]).acall(name="greeter"))
    files = loaded["files"]
    assert len(files) == MAX_LISTED_FILES and all(f.startswith("many/f") for f in files)
    assert loaded["files_cut"] == f"more files: the listing stops at {MAX_LISTED_FILES}"


def test_a_huge_command_line_is_refused(skills_dir):
    with pytest.raises(CommandRefusedError, match="more than 10000"):
        parse_command("echo " + "x" * 20_000, {"echo"})


@pytest.mark.parametrize(("command", "words"), [
    ("cut -d '|' -f1 data.txt", [["cut", "-d", "|", "-f1", "data.txt"]]),
    ("tr ';' ','", [["tr", ";", ","]]),
    ("echo '>' \"&&\" \\( \\;", [["echo", ">", "&&", "(", ";"]]),
    ("echo C# a#b", [["echo", "C#", "a#b"]]),  # '#' in a word is a character
    ("echo a # a comment | cat", [["echo", "a"]]),  # at a word's start it is a comment
    ("echo \"a\\\"b\" '' x", [["echo", 'a"b', "", "x"]]),
    ("echo a\t|\tcut -d '|' -f2", [["echo", "a"], ["cut", "-d", "|", "-f2"]]),
])
def test_quoted_operator_characters_and_hashes_are_words_as_in_a_shell(command, words):
    assert parse_command(command, {"echo", "cut", "tr", "cat"}) == words


@pytest.mark.parametrize("command", ["echo a|touch x", "echo a&&touch x", "echo a>x",
                                     "echo 'a'|'touch' x", "echo a\\", "echo \"a"])
def test_unquoted_operators_next_to_quotes_are_still_operators(command):
    with pytest.raises(CommandRefusedError, match="refused"):
        parse_command(command, {"echo"})


def test_a_quoted_pipe_reaches_the_program_in_the_sandbox(skills_dir):
    require_bubblewrap()
    (skills_dir / "greeter" / "table.txt").write_text("a|b|c\n")
    tool = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["cut", "cat"])
    assert tool.run("greeter", "cut -d '|' -f2 table.txt")["output"] == "b\n"
    assert tool.run("greeter", "cat table.txt | cut -d '|' -f3")["output"] == "c\n"


def test_a_fifo_or_device_swapped_in_after_the_check_is_refused_not_read(tmp_path,
                                                                          monkeypatch):
    """A writable skill's command may swap a file for a FIFO between the check and the read."""
    skill = tmp_path / "swapped"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: swapped\ndescription: d\n---\nhi\n")
    os.mkfifo(skill / "notes.md")
    (skill / "zero").symlink_to("/dev/zero")
    tool = LoadSkillTool(paths=[str(skill)])
    monkeypatch.setattr(Path, "is_file", lambda self: True)  # the check saw a file
    monkeypatch.setattr(Path, "resolve", lambda self, strict=False: Path(os.path.abspath(self)))
    results: dict[str, object] = {}

    def load(name: str) -> None:
        try:
            results[name] = asyncio.run(tool.acall("swapped", name))
        except SkillError as e:
            results[name] = e

    for name in ("notes.md", "zero"):
        worker = threading.Thread(target=load, args=(name,), daemon=True)
        worker.start()
        worker.join(timeout=60)
        assert not worker.is_alive(), f"load_skill blocked on {name}"
        assert isinstance(results[name], SkillError), results[name]
    assert "not a regular file" in str(results["notes.md"])


@pytest.mark.parametrize(("arguments", "said"), [
    ({"name": "greeter", "file": "a\x00b"}, "has no file"),
    ({"name": "greeter", "file": "x" * 5000}, "has no file"),
    ({"name": "greeter", "file": "a/" * 3000}, "has no file"),
    ({"name": "greeter", "file": 123}, "'file' must be a string"),
    ({"name": None}, "'name' must be a string"),
    ({"name": ["greeter"]}, "'name' must be a string"),
])
def test_load_skill_answers_odd_arguments_from_a_model_with_a_skill_error(skills_dir,
                                                                          arguments, said):
    tool = LoadSkillTool(paths=[str(skills_dir)])
    with pytest.raises(SkillError, match=said) as caught:
        asyncio.run(tool.acall(**arguments))
    assert len(str(caught.value)) < 500  # the argument is not echoed whole


@pytest.mark.parametrize("arguments", [{"skill": "greeter", "command": None},
                                       {"skill": "greeter", "command": ["echo", "hi"]},
                                       {"skill": None, "command": "echo hi"}])
def test_run_skill_command_refuses_arguments_that_are_not_strings(skills_dir, arguments):
    tool = RunSkillCommandTool(paths=[str(skills_dir)], allowed_commands=["echo"])
    with pytest.raises(CommandRefusedError, match="must be a string"):
        asyncio.run(tool.acall(**arguments))


def test_a_skill_calling_itself_by_another_skills_folder_name_is_a_named_error(skills_dir):
    """A skill folder whose front matter takes the name of another skill's folder would make
    ``writable_skills=["greeter"]`` (or a model's call for "greeter") reach the other
    folder: refused when the tools are built, naming both folders."""
    (skills_dir / "zz-impostor").mkdir()
    (skills_dir / "zz-impostor" / "SKILL.md").write_text(
        "---\nname: math-calculator\ndescription: x\n---\nx\n")
    (skills_dir / "math-calculator" / "SKILL.md").write_text(
        MATH.replace("name: math-calculator", "name: greeter-too"))
    (skills_dir / "greeter" / "SKILL.md").write_text(
        "---\nname: zz-impostor\ndescription: swapped\n---\nx\n")
    with pytest.raises(SkillError, match=r"greeter.*'zz-impostor'.*folder.*zz-impostor"):
        load_skills([str(skills_dir)])
    with pytest.raises(SkillError, match="the name of another skill's folder"):
        skill_tools([str(skills_dir)], allowed_commands=["cat"],
                    writable_skills=["zz-impostor"])


def test_a_huge_description_is_refused_not_sent_with_every_model_request(tmp_path):
    """Every skill's description is in ``load_skill``'s description, sent with each request
    of every chat: a skill folder cannot make it 50,000 characters (the agentskills.io
    format's bound is 1,024), nor reach it through a YAML alias."""
    (tmp_path / "s").mkdir()
    long = "Reads PDFs. " * 4_000
    (tmp_path / "s" / "SKILL.md").write_text(f"---\nname: big\ndescription: {long}\n---\nx\n")
    with pytest.raises(SkillError, match=r"s/SKILL.md: 'description' has 47999 characters, "
                                         r"more than 1024"):
        load_skills([str(tmp_path)])
    (tmp_path / "s" / "SKILL.md").write_text(
        f"---\nname: big\npad: &p \"{'x' * 2000}\"\ndescription: *p\n---\nx\n")
    with pytest.raises(SkillError, match="more than 1024"):
        skill_tools([str(tmp_path)])
    (tmp_path / "s" / "SKILL.md").write_text(
        f"---\nname: big\ndescription: {'y' * 1024}\n---\nx\n")
    assert load_skills([str(tmp_path)])["big"].description == "y" * 1024


@pytest.mark.parametrize("text", [
    "---" + "\n" * 63_990 + "x",  # no closing line: every split point was tried
    "---\n" + "\n" * 63_990 + "---x",
    "--- " + "\n " * 31_990 + "x",
])
def test_a_skill_md_made_to_backtrack_is_read_in_linear_time(tmp_path, text):
    """Front matter split by a backtracking pattern took 15-40 s of CPU per 64,000-character
    SKILL.md (quadratic): a folder of such skills kept a job from starting."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text(text)
    started = time.monotonic()
    with pytest.raises(SkillError, match="no YAML front matter"):
        load_skills([str(tmp_path)])
    assert time.monotonic() - started < 5, "the front matter was split in quadratic time"


@pytest.mark.parametrize("text, instructions", [
    ("---\nname: a\ndescription: d\n---\nbody\n", "body"),
    ("---  \r\nname: a\r\ndescription: d\r\n--- \r\nbody", "body"),
    ("---\nname: a\ndescription: d\n---", ""),
    ("---\nname: a\ndescription: d\n---\n---\nmore\n", "---\nmore"),
])
def test_front_matter_is_the_lines_between_the_first_two_dash_lines(tmp_path, text,
                                                                    instructions):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_bytes(text.encode())
    assert load_skills([str(tmp_path)])["a"].instructions == instructions


@pytest.mark.parametrize("raw", [
    b"---\nname: a\ndescription: d\x00\n---\nb",  # a NUL
    b"---\nname: a\ndescription: \x1b[31mred\x07\n---\nb",  # terminal escapes, a bell
    b"---\nname: caf\xe9\ndescription: \xff\xfe\n---\nb",  # not UTF-8
])
def test_control_characters_or_bytes_that_are_not_utf8_are_a_named_skill_error(tmp_path,
                                                                               raw):
    """Not an exception of the YAML reader's escaping the loader: the folder is named."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_bytes(raw)
    with pytest.raises(SkillError, match=r"s/SKILL.md"):
        load_skills([str(tmp_path)])


def test_a_folder_of_too_many_skills_is_refused_before_reading_them(tmp_path, monkeypatch):
    """Every skill is listed in ``load_skill``'s description, sent with each model request:
    a folder of endless skill folders is refused after ``MAX_SKILLS`` of its subfolders,
    without reading every SKILL.md (nor listing every entry) first."""
    from flink_agents_py.skills import _skills

    monkeypatch.setattr(_skills, "MAX_SKILLS", 20)
    for i in range(25):
        (tmp_path / f"s{i:02}").mkdir()
        (tmp_path / f"s{i:02}" / "SKILL.md").write_text(
            f"---\nname: s{i:02}\ndescription: d\n---\nx\n")
    read: list[Path] = []
    parse = _skills._parse
    monkeypatch.setattr(_skills, "_parse", lambda d: read.append(d) or parse(d))
    with pytest.raises(SkillError, match=rf"{tmp_path} holds more than 20 skill folders"):
        load_skills([str(tmp_path)])
    assert read == []
    for i in range(20, 25):
        shutil.rmtree(tmp_path / f"s{i:02}")
    assert len(load_skills([str(tmp_path)])) == 20


def test_a_skill_md_starting_with_a_utf8_byte_order_mark_loads(tmp_path):
    """Editors on Windows start UTF-8 files with a byte order mark: the first line is still
    ``---`` (it was refused as having no front matter)."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_bytes(
        "\ufeff---\r\nname: bom\r\ndescription: d\r\n---\r\nbody\r\n".encode())
    assert load_skills([str(tmp_path)])["bom"].instructions == "body"


@pytest.mark.parametrize("value", ["9" * 5000, "0b" + "1" * 20_000, "2001-13-01"])
def test_a_front_matter_value_python_cannot_read_is_a_skill_error(tmp_path, value):
    """An integer Python will not read or write, or a date of month 13, as the name: a
    ``SkillError`` naming the file, not a ``ValueError`` from the reader or its message."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text(f"---\nname: {value}\ndescription: d\n---\n")
    with pytest.raises(SkillError, match=r"SKILL.md: the front matter is not YAML within its"):
        load_skills([str(tmp_path)])
