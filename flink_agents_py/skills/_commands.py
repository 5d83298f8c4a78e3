"""``run_skill_command``: runs a command a skill's instructions give, under an allow-list.

Security rules (each refusal is a failed tool call whose reason the model reads):

- the command line is parsed (``shlex``, POSIX rules), never given to a shell; it is a
  command, or a pipeline of commands joined by ``|`` (each stage fed the previous one's
  output by this process, not by a shell);
- every stage's program must be exactly one of ``allowed_commands``, by bare name (no
  ``/``: ``/bin/sh``, ``./x``, ``../x`` are refused);
- refused anywhere: ``;``, ``&``, ``&&``, ``||``, redirections (``<``, ``>``, ``>>``...),
  parentheses, ``$`` (variables, ``$(...)``), backticks, newlines, ``VAR=value`` prefixes;
- arguments may not leave the skill's folder: an absolute path, ``~`` or a ``..`` component
  is refused;
- the working directory is the skill's folder; the environment is ``PATH`` and ``LANG``
  only; each run has a timeout (the process is killed) and its output is capped.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, model_validator

from ..api import AgentsError, Resource, ResourceType, ToolMetadata
from ._skills import Skill, SkillError, load_skills

__all__ = ["CommandRefusedError", "RunSkillCommandTool", "parse_command"]

_OPERATORS = {";", "&", "&&", "||", "<", ">", ">>", "<<", "<<<", ">&", "<&", "&>", ">|",
              "(", ")", ";;", "|&"}
_FORBIDDEN_CHARS = ("$", "`", "\n", "\r", "\x00")


class CommandRefusedError(AgentsError):
    """A command a skill tool refused to run (the reason says which rule)."""


def parse_command(command: str, allowed: list[str] | set[str]) -> list[list[str]]:
    """Parse ``command`` into the argument lists of a pipeline, enforcing the rules above.

    Args:
        command: the command line the model gave.
        allowed: the programs that may run, by bare name.

    Returns:
        One argument list per pipeline stage.

    Raises:
        CommandRefusedError: naming the rule the command breaks.
    """
    for ch in _FORBIDDEN_CHARS:
        if ch in command:
            shown = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL"}.get(ch, ch)
            raise CommandRefusedError(f"refused: {shown!r} is not allowed (no variables, "
                                      f"command substitution or several lines)")
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as e:
        raise CommandRefusedError(f"refused: the command cannot be parsed ({e})") from e
    if not tokens:
        raise CommandRefusedError("refused: the command is empty")
    stages: list[list[str]] = [[]]
    for tok in tokens:
        if tok == "|":
            stages.append([])
            continue
        if tok in _OPERATORS or (tok and set(tok) <= set(";&|<>()")):
            raise CommandRefusedError(f"refused: {tok!r} is not allowed (only one command, "
                                      f"or commands joined by '|'; no redirections)")
        stages[-1].append(tok)
    for argv in stages:
        if not argv:
            raise CommandRefusedError("refused: an empty command in the pipeline")
        program = argv[0]
        if "=" in program and not program.startswith("="):
            raise CommandRefusedError(f"refused: {program!r} sets an environment variable")
        if "/" in program or program not in allowed:
            raise CommandRefusedError(f"refused: {program!r} is not an allowed command; "
                                      f"allowed: {', '.join(sorted(allowed)) or 'none'}")
        for arg in argv[1:]:
            parts = arg.replace("\\", "/").split("/")
            if arg.startswith(("/", "~")) or ".." in parts:
                raise CommandRefusedError(f"refused: argument {arg!r} leaves the skill's "
                                          f"folder")
    return stages


class RunSkillCommandTool(Resource):
    """The ``run_skill_command`` tool: runs an allowed command in a skill's folder.

    Attributes:
        paths: skill folders, or folders of skill folders (as ``LoadSkillTool``).
        skills: the names whose commands may run (``None``: every skill found).
        allowed_commands: the programs that may run, by bare name (``["echo", "bc"]``).
        timeout_s: the longest a command (the whole pipeline) may run, in seconds.
        max_output_chars: the most characters of output returned (the rest is cut, and
            said).
        name: the tool's name.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.TOOL

    paths: list[str]
    skills: list[str] | None = None
    allowed_commands: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=10.0, gt=0)
    max_output_chars: int = Field(default=8_000, ge=1)
    name: str = "run_skill_command"

    _loaded: dict[str, Skill] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _load(self) -> RunSkillCommandTool:
        bad = [c for c in self.allowed_commands if not c or "/" in c or c != c.strip()]
        if bad:
            raise ValueError(f"allowed_commands are bare program names, not {bad}")
        loaded = load_skills(self.paths)
        if self.skills is not None:
            missing = [s for s in self.skills if s not in loaded]
            if missing:
                raise SkillError(f"no skill named {missing} in {self.paths}; found: "
                                 f"{sorted(loaded)}")
            loaded = {n: loaded[n] for n in self.skills}
        self._loaded = loaded
        return self

    @property
    def tool_name(self) -> str:
        """The name the tool is offered under."""
        return self.name

    @property
    def metadata(self) -> ToolMetadata:
        """The tool as a chat model sees it."""
        return ToolMetadata(name=self.name, description=(
            "Run a command a loaded skill's instructions give, in that skill's folder. Only "
            f"these programs run: {', '.join(self.allowed_commands) or 'none'}; commands may "
            "be joined by '|'; no shell (no ';', '&&', redirections, variables or "
            "substitutions)."), parameters={"type": "object", "properties": {
                "skill": {"type": "string", "enum": list(self._loaded),
                          "description": "the skill (may be left out when only one is "
                                         "offered)"},
                "command": {"type": "string", "description": "the command line"}},
                "required": ["command"] if len(self._loaded) == 1 else ["skill", "command"]})

    def run(self, skill: str, command: str) -> dict[str, Any]:
        """Run ``command`` in skill ``skill``'s folder (blocking).

        Args:
            skill: the skill's name (may be empty when one skill is offered).
            command: the command line.

        Returns:
            ``{"exit_code", "output"}``: the last stage's exit code and stdout, then any
            stderr, capped at ``max_output_chars``.

        Raises:
            CommandRefusedError: for an unknown skill, a command the rules refuse, a
                program not found, or a run past ``timeout_s`` (killed).
        """
        if not skill and len(self._loaded) == 1:
            skill = next(iter(self._loaded))
        if skill not in self._loaded:
            raise CommandRefusedError(f"no skill named {skill!r}; available: "
                                      f"{', '.join(self._loaded)}")
        stages = parse_command(command, set(self.allowed_commands))
        cwd = self._loaded[skill].directory
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        deadline = time.monotonic() + self.timeout_s
        data: bytes | None = None
        errors = b""
        code = 0
        for argv in stages:
            left = deadline - time.monotonic()
            try:
                proc = subprocess.run(argv, input=data if data is not None else b"",
                                      capture_output=True, cwd=cwd, env=env,
                                      timeout=max(left, 0.001), check=False, shell=False)
            except subprocess.TimeoutExpired as e:
                raise CommandRefusedError(f"the command ran past {self.timeout_s} s and was "
                                          f"stopped") from e
            except FileNotFoundError as e:
                raise CommandRefusedError(f"{argv[0]!r} is not installed") from e
            data, code = proc.stdout[: self.max_output_chars * 4], proc.returncode
            errors += proc.stderr[: self.max_output_chars * 4]
        text = (data or b"").decode(errors="replace")
        if errors:
            text += ("\n" if text else "") + errors.decode(errors="replace")
        if len(text) > self.max_output_chars:
            cap = self.max_output_chars
            text = text[:cap] + f"\n[... output cut at {cap} characters]"
        return {"exit_code": code, "output": text}

    async def acall(self, skill: str = "", command: str = "", **unexpected: Any) -> Any:
        """Run the command in a worker thread (see ``run``)."""
        import asyncio

        if unexpected:
            raise CommandRefusedError(f"run_skill_command takes 'skill' and 'command', not "
                                      f"{sorted(unexpected)}")
        return await asyncio.to_thread(self.run, skill, command)
