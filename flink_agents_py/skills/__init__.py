"""Agent skills (agentskills.io format): folders with ``SKILL.md``, offered to chat models.

- ``LoadSkillTool`` (``load_skill``): lists the skills in its description; loads a skill's
  instructions or one of its files on demand.
- ``RunSkillCommandTool`` (``run_skill_command``): runs the commands a skill's instructions
  give, parsed (never a shell), only ``allowed_commands``, in the skill's folder, with a
  timeout and an output cap.
- ``skill_tools(paths, allowed_commands=...)``: both, ready to declare as ``TOOL`` resources.

See ``docs/how-to/skills.md``.
"""

from ._commands import CommandRefusedError, RunSkillCommandTool, parse_command
from ._skills import MAX_FILE_CHARS, LoadSkillTool, Skill, SkillError, load_skills

__all__ = ["CommandRefusedError", "LoadSkillTool", "MAX_FILE_CHARS", "RunSkillCommandTool",
           "Skill", "SkillError", "load_skills", "parse_command", "skill_tools"]


def skill_tools(paths: list[str], allowed_commands: list[str] | None = None,
                **command_options: object) -> list[LoadSkillTool | RunSkillCommandTool]:
    """The skill tools for ``paths``.

    ``load_skill``, and ``run_skill_command`` when ``allowed_commands`` is given.

    Args:
        paths: skill folders, or folders of skill folders.
        allowed_commands: the programs the skills' commands may run (bare names).
        **command_options: ``timeout_s``, ``max_output_chars`` of ``RunSkillCommandTool``.

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
