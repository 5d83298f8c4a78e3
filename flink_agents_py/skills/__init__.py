"""Agent skills (agentskills.io format): folders with ``SKILL.md``, offered to chat models.

- ``LoadSkillTool`` (``load_skill``): lists the skills in its description; loads a skill's
  instructions or one of its files on demand.
- ``RunSkillCommandTool`` (``run_skill_command``): runs the commands a skill's instructions
  give, parsed (never a shell), only ``allowed_commands``, in a bubblewrap sandbox showing
  the skill's files (no network, no host secrets, resource limits), with a timeout that
  kills every process the command started and a streamed output cap.
- ``skill_tools(paths, allowed_commands=...)``: both, ready to declare as ``TOOL`` resources.

See ``docs/how-to/skills.md``.
"""

from ._commands import (
    SHELL_EQUIVALENT_COMMANDS,
    CommandRefusedError,
    RunSkillCommandTool,
    ShellEquivalentCommandWarning,
    parse_command,
)
from ._sandbox import PROBE_RETRY_S, SandboxUnavailableError, bubblewrap_problem
from ._skills import (
    MAX_DESCRIPTION_CHARS,
    MAX_FILE_BYTES,
    MAX_FILE_CHARS,
    MAX_LISTED_FILES,
    MAX_SKILLS,
    MAX_WALKED_ENTRIES,
    LoadSkillTool,
    Skill,
    SkillError,
    load_skills,
)
from ._special import MAX_CHECKED_ENTRIES

__all__ = ["CommandRefusedError", "LoadSkillTool", "MAX_CHECKED_ENTRIES",
           "MAX_DESCRIPTION_CHARS", "MAX_FILE_BYTES",
           "MAX_FILE_CHARS",
           "MAX_LISTED_FILES", "MAX_SKILLS", "MAX_WALKED_ENTRIES", "PROBE_RETRY_S",
           "RunSkillCommandTool",
           "SHELL_EQUIVALENT_COMMANDS", "SandboxUnavailableError",
           "ShellEquivalentCommandWarning", "Skill", "SkillError", "bubblewrap_problem",
           "load_skills", "parse_command", "skill_tools"]


def skill_tools(paths: list[str], allowed_commands: list[str] | None = None,
                **command_options: object) -> list[LoadSkillTool | RunSkillCommandTool]:
    """The skill tools for ``paths``.

    ``load_skill``, and ``run_skill_command`` when ``allowed_commands`` is given.

    Args:
        paths: skill folders, or folders of skill folders.
        allowed_commands: the programs the skills' commands may run (bare names).
        **command_options: the other fields of ``RunSkillCommandTool`` (``sandbox``,
            ``writable_skills``, ``timeout_s``, ``max_output_chars``, the ``max_*`` limits).

    Returns:
        The tools; declare each as a ``TOOL`` resource under its ``name`` (or pass them to
        ``ReActAgent(tools=...)``).

    Raises:
        SkillError: for a folder without ``SKILL.md`` or bad front matter (at once).
    """
    tools: list[LoadSkillTool | RunSkillCommandTool] = [LoadSkillTool(paths=list(paths))]
    if allowed_commands:
        tools.append(RunSkillCommandTool(paths=list(paths), allowed_commands=allowed_commands,
                                         **command_options))  # type: ignore[arg-type]
    return tools
