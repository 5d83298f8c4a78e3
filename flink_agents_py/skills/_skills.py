"""Agent skills in the agentskills.io format: a folder with ``SKILL.md`` and its files.

``SKILL.md`` starts with YAML front matter (``name``, ``description``) followed by the
skill's instructions in Markdown. A chat model is offered the skills' names and
descriptions in the ``load_skill`` tool's description; it loads a skill's instructions (or
one of its files) on demand with that tool, and runs the commands the instructions give
with the ``run_skill_command`` tool, which runs only allowed commands (see
``_commands.py``).
"""

from __future__ import annotations

import os
import re
import stat
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import PrivateAttr, model_validator

from ..api import AgentsError, Resource, ResourceType, ToolMetadata, UsageError
from ..api.internal import cut_masked
from ._walk import walk_beneath

__all__ = ["Skill", "SkillError", "load_skills", "LoadSkillTool", "MAX_FILE_BYTES",
           "MAX_FILE_CHARS", "MAX_LISTED_FILES", "MAX_DESCRIPTION_CHARS", "MAX_SKILLS",
           "MAX_WALKED_ENTRIES"]

SKILL_FILE = "SKILL.md"
MAX_FILE_CHARS = 64_000
"""The most characters of a skill file ``load_skill`` returns (the rest is cut, and a field
of the result apart from the text says so: ``cut``)."""
MAX_FILE_BYTES = 4 * MAX_FILE_CHARS
"""The most bytes read from a skill file, ``SKILL.md`` included (never the whole of a big
file: the rest is not read, and a field apart from the text says the file was cut)."""
_MASK_MARGIN = 4_096
"""Bytes read past ``MAX_FILE_BYTES`` so that a text cut there is masked whole first."""
MAX_LISTED_FILES = 1_000
"""The most files of a skill ``load_skill`` lists."""
MAX_WALKED_ENTRIES = 20 * MAX_LISTED_FILES
"""The most entries (files and folders) of a skill's folder ``load_skill`` looks at."""
MAX_DESCRIPTION_CHARS = 1_024
"""The longest ``description`` a skill may have (it is offered with every model request)."""
MAX_SKILLS = 1_000
"""The most skill folders one folder of skills may hold (each is offered to the model)."""
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class SkillError(AgentsError):
    """A skill folder that cannot be loaded (no ``SKILL.md``, bad front matter...)."""


@dataclass(frozen=True)
class Skill:
    """One loaded skill.

    Attributes:
        name: the skill's name (front matter ``name``: lowercase letters, digits, hyphens).
        description: what it does and when to use it (front matter ``description``).
        instructions: the Markdown body of ``SKILL.md``.
        directory: the skill's folder (its files are read from there only).
        identity: the folder's ``(st_dev, st_ino)`` when it was loaded: a folder found at
            ``directory`` later that is not that one (swapped for a symlink or another
            folder, as a writable skill's command can do to a skill inside its folder) is
            refused (``None``: not checked).
        instructions_cut: the size of ``SKILL.md`` in bytes when ``instructions`` is only
            its start (``None``: the whole body).
    """

    name: str
    description: str
    instructions: str
    directory: Path
    identity: tuple[int, int] | None = None
    instructions_cut: int | None = None

    def open_folder(self) -> int:
        """Open the skill's folder, checked to be the folder loaded.

        Returns:
            A read-only fd of the folder (the caller closes it): what is reached through it
            is the loaded folder, whatever its path shows afterwards.

        Raises:
            SkillError: naming the skill, when the folder is gone or is no longer the folder
                loaded.
        """
        try:
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise SkillError(f"skill {self.name!r}: its folder {self.directory} cannot be "
                             f"opened: {e.strerror}") from e
        st = os.fstat(fd)
        if self.identity is not None and (st.st_dev, st.st_ino) != self.identity:
            os.close(fd)
            raise SkillError(f"skill {self.name!r}: {self.directory} is no longer the folder "
                             f"loaded (it was swapped since, for a symlink or another "
                             f"folder): refused, never followed")
        return fd

    def files(self) -> list[str]:
        """The skill's files other than ``SKILL.md``, as paths relative to its folder.

        Returns:
            ``listing()``'s paths (without its note).
        """
        return self.listing()[0]

    def listing(self) -> tuple[list[str], str | None]:
        """The skill's files other than ``SKILL.md``, and whether that is all of them.

        The note is apart from the paths: a file named like it (``[... the listing
        stops ...]``) is one more path, never the framework's word.

        Returns:
            The paths, sorted, relative to the folder; symlinks left out. At most
            ``MAX_LISTED_FILES`` (the first found); the walk looks at most
            ``MAX_WALKED_ENTRIES`` entries (a folder of endless empty folders is not walked
            to its end). Then why the listing stopped early, or ``None`` when it holds
            every file.
        """
        found: list[str] = []
        walked = 0
        folder = self.open_folder()
        try:  # walked through fds from the loaded folder down, following no symlink
            with closing(walk_beneath(folder)) as entries:
                for parts, dir_fd, name, is_dir in entries:
                    if walked == MAX_WALKED_ENTRIES:
                        return sorted(found), (f"the listing stops after "
                                               f"{MAX_WALKED_ENTRIES} entries of the folder")
                    walked += 1
                    if is_dir or (not parts and name == SKILL_FILE):
                        continue
                    try:
                        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                    except OSError:
                        continue  # gone since it was listed
                    if stat.S_ISREG(mode):
                        if len(found) == MAX_LISTED_FILES:
                            return sorted(found), (f"more files: the listing stops at "
                                                   f"{MAX_LISTED_FILES}")
                        found.append("/".join((*parts, name)))
        finally:
            os.close(folder)
        return sorted(found), None

    def read(self, relative: str) -> str:
        """The text of the skill's file ``relative`` (at most ``MAX_FILE_CHARS``).

        Args:
            relative: the file's path, relative to the skill's folder.

        Returns:
            The text (its start only, for a longer file: ``read_file`` says so).

        Raises:
            SkillError: for a path outside the skill's folder, or no such file.
        """
        return str(self.read_file(relative)["text"])

    def read_file(self, relative: str) -> dict[str, Any]:
        """The skill's file ``relative`` as ``load_skill`` returns it.

        Args:
            relative: the file's path, relative to the skill's folder.

        Returns:
            ``{"file", "text"}``: the path asked and the text (at most
            ``MAX_FILE_CHARS``); for a file cut, ``"cut"``: ``kept_characters`` and
            ``file_bytes``, a field apart from the text, so no file's text passes for it.

        Raises:
            SkillError: for a path outside the skill's folder, or no such file.
        """
        if not isinstance(relative, str):
            raise SkillError(f"skill {self.name!r}: 'file' must be a string (a path relative "
                             f"to the skill's folder), got {type(relative).__name__}")
        try:
            root = self.directory.resolve()
            target = (self.directory / relative).resolve()
            found = root in target.parents and target.is_file()
        except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long, a loop
            found = False  # (Python < 3.13 raises RuntimeError for a symlink loop)
        if not found:
            shown = relative if len(relative) <= 200 else cut_masked(relative, 200) + "..."
            raise SkillError(f"skill {self.name!r} has no file {shown!r}; its files: "
                             f"{', '.join(map(_printable, self.files())) or 'none'}")
        # opened from the folder loaded down, one component at a time, never following a
        # symlink: a folder swapped for a symlink after the check (a writable skill's command
        # can do it while this runs) is never followed out of the skill's folder
        text, size = _read_capped(target, _open_beneath(self.open_folder(), root,
                                                        target.relative_to(root).parts))
        read: dict[str, Any] = {"file": relative, "text": text}
        if size is not None:
            read["cut"] = {"kept_characters": len(text), "file_bytes": size}
        return read


def _printable(name: str) -> str:
    """A file name as an error shows it: quoted and escaped when it holds a control character.

    A skill's file names are untrusted: a newline would forge a log line, an escape sequence
    would drive the terminal reading the log.

    Returns:
        ``name``, or its ``repr`` when it is not printable.
    """
    return name if name.isprintable() else repr(name)


_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)  # (Linux; elsewhere a read-only open)


def _open_beneath(fd: int, root: Path, parts: tuple[str, ...]) -> int:
    """Open the file ``parts...`` below folder fd ``fd``, following no symlink below it.

    Every folder is opened relative to its parent's fd with ``O_NOFOLLOW``; so is the file
    (without blocking: a FIFO is opened, never read, see ``_read_capped``).

    Args:
        fd: the skill's folder (``Skill.open_folder``; closed here).
        root: its path (named in errors).
        parts: the file's path below it.

    Returns:
        The file's fd (the caller closes it).

    Raises:
        SkillError: when a component is a symlink, not a folder, or gone.
    """
    try:
        for part in parts[:-1]:
            parent, fd = fd, -1
            try:
                fd = os.open(part, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=parent)
            finally:
                os.close(parent)
        return os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                       dir_fd=fd)
    except OSError as e:
        raise SkillError(f"{root.joinpath(*parts)} cannot be read from inside the skill's "
                         f"folder (a symlink or a changed folder is never followed): "
                         f"{e.strerror}") from e
    finally:
        if fd >= 0:
            os.close(fd)


def _read_capped(path: Path, fd: int | None = None) -> tuple[str, int | None]:
    """The text of ``path``: at most ``MAX_FILE_BYTES`` read, ``MAX_FILE_CHARS`` returned.

    The file is opened without blocking and without following a final symlink, and read only
    when what was opened is a regular file: a FIFO or a device swapped in after the caller
    looked (a writable skill's command can do it) is refused instead of blocking the
    operator's thread or reading without end.

    Args:
        path: the file (named in errors).
        fd: the file opened already (``_open_beneath``; closed here), or ``None`` to open
            ``path``.

    Returns:
        The text, and the file's size in bytes when the text is only its start (``None``:
        the whole file).

    Raises:
        SkillError: when ``path`` is no longer a regular file.
    """
    if fd is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise SkillError(f"{path} cannot be read: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SkillError(f"{path} is not a regular file (a FIFO, device or socket is "
                             f"never read)")
        size = st.st_size
        data = f.read(MAX_FILE_BYTES + _MASK_MARGIN)
    text = data.decode(errors="replace")
    if len(data) > MAX_FILE_BYTES or len(text) > MAX_FILE_CHARS:
        kept = min(MAX_FILE_CHARS, len(data[:MAX_FILE_BYTES].decode(errors="replace")))
        # masked before the cut, a little past it read too: a secret (a key a writable
        # skill's command wrote into a file) standing across the cut leaves no piece behind
        return cut_masked(text, kept), max(size, len(data))
    return text, None


def _front_matter(text: str) -> tuple[str, str] | None:
    """``(front matter, body)``: the lines between a first line ``---`` and the next one.

    Split line by line, in linear time (a backtracking pattern took quadratic time on a
    SKILL.md of many blank lines and no closing line). Trailing whitespace on the dash lines
    is allowed.

    Returns:
        The two texts, or ``None`` when the first line or the closing one is missing.
    """
    lines = text.removeprefix("\ufeff").split("\n")  # a UTF-8 byte order mark aside
    if lines[0].rstrip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1:])
    return None


def _parse(skill_dir: Path) -> Skill:
    path = skill_dir / SKILL_FILE
    if not path.is_file():
        raise SkillError(f"skill folder {skill_dir} has no {SKILL_FILE} (a skill is a folder "
                         f"with {SKILL_FILE}: YAML front matter with name and description, "
                         f"then the instructions)")
    root = skill_dir.resolve()
    if root not in path.resolve().parents:
        raise SkillError(f"{path} is a symlink to a file outside the skill's folder")
    text, cut = _read_capped(path)
    m = _front_matter(text)
    if m is None:
        raise SkillError(f"{path}: no YAML front matter (a first line '---', 'name:' and "
                         f"'description:', then '---')")
    from ..yaml import YamlError, read_yaml  # the loader's budget: a skill folder is untrusted

    try:
        meta = read_yaml(m[0], source=str(path), kind="skill front matter in",
                         first_line=2) or {}  # (it starts after the file's first line)
    except YamlError as e:
        raise SkillError(f"{path}: the front matter is not YAML within its limits: {e}") from e
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: the front matter must be a mapping")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 64:
        raise SkillError(f"{path}: 'name' must be 1-64 lowercase letters, digits and "
                         f"hyphens, got {name!r}")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{path}: 'description' is missing or empty")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:  # sent with every request of every chat
        raise SkillError(f"{path}: 'description' has {len(description)} characters, more "
                         f"than {MAX_DESCRIPTION_CHARS} (the agentskills.io bound): say in "
                         f"it what the skill does and when to use it, the rest in the body")
    st = skill_dir.stat()
    return Skill(name=name, description=description, instructions=m[1].strip(),
                 directory=skill_dir, identity=(st.st_dev, st.st_ino), instructions_cut=cut)


def _skill_folders(root: Path) -> list[Path]:
    """The subfolders of ``root`` (hidden ones aside): at most ``MAX_SKILLS``.

    Returns:
        The folders, sorted.

    Raises:
        SkillError: when there are more, found while listing (before any is read).
    """
    found: list[Path] = []
    for p in root.iterdir():
        if p.is_dir() and not p.name.startswith((".", "_")):
            if len(found) == MAX_SKILLS:
                raise SkillError(f"{root} holds more than {MAX_SKILLS} skill folders (every "
                                 f"skill is listed to the model with each request): split "
                                 f"it, or name the folders wanted in paths")
            found.append(p)
    return sorted(found)


def load_skills(paths: list[str] | list[Path]) -> dict[str, Skill]:
    """Load skills from ``paths``: each a skill folder, or a folder of skill folders.

    Args:
        paths: folders; one holding ``SKILL.md`` is a skill, any other one's subfolders
            (hidden ones aside) must each be a skill.

    Returns:
        Skill name to ``Skill``, in the order found.

    Raises:
        SkillError: naming the folder, for a missing folder, a subfolder without
            ``SKILL.md``, bad front matter, a name given twice, a name that is another
            skill's folder name, or more than ``MAX_SKILLS`` skill folders in one folder.
        UsageError: for one path given instead of a list (its characters would be taken
            as folders).
    """
    if isinstance(paths, (str, Path)):
        raise UsageError(f"load_skills takes a list of folders, got one {type(paths).__name__}: "
                         f"pass load_skills([{str(paths)!r}])")
    found: dict[str, Skill] = {}
    for raw in paths:
        root = Path(raw).expanduser()
        if not root.is_dir():
            raise SkillError(f"skills folder {root} does not exist")
        dirs = [root] if (root / SKILL_FILE).is_file() else _skill_folders(root)
        for d in dirs:
            skill = _parse(d)
            if skill.name in found:
                raise SkillError(f"skill {skill.name!r} is given twice: "
                                 f"{found[skill.name].directory} and {d}")
            found[skill.name] = skill
    folders = {s.directory.name: s for s in found.values()}
    for skill in found.values():
        other = folders.get(skill.name)
        if other is not None and other is not skill:
            raise SkillError(f"{skill.directory / SKILL_FILE}: the skill calls itself "
                             f"{skill.name!r}, the name of another skill's folder "
                             f"({other.directory}, named {other.name!r}): a call or a "
                             f"writable_skills entry for {skill.name!r} would reach this "
                             f"folder instead; name it after its own folder")
    return found


class LoadSkillTool(Resource):
    """The ``load_skill`` tool: offers the skills to a chat model, loads one on demand.

    Its description lists every skill's name and description. Called with ``name`` it
    returns the skill's instructions and the list of its files; with ``file`` too, that
    file's text. Declare it as a ``TOOL`` resource and name it in a setup's ``tools``.

    Attributes:
        paths: skill folders, or folders of skill folders (see ``load_skills``).
        skills: the names offered (``None``: every skill found).
        name: the tool's name.

    Raises:
        SkillError: (wrapped in pydantic's error at construction) for a bad folder.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.TOOL

    paths: list[str]
    skills: list[str] | None = None
    name: str = "load_skill"

    _loaded: dict[str, Skill] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _load(self) -> LoadSkillTool:
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
    def loaded(self) -> dict[str, Skill]:
        """The skills offered, by name."""
        return dict(self._loaded)

    @property
    def tool_name(self) -> str:
        """The name the tool is offered under."""
        return self.name

    @property
    def metadata(self) -> ToolMetadata:
        """The tool as a chat model sees it: the skills are listed in its description."""
        listing = "\n".join(f"- {s.name}: {s.description}" for s in self._loaded.values())
        return ToolMetadata(name=self.name, description=(
            "Load a skill's instructions (and the list of its files) before using it; pass "
            "'file' to read one of its files. Available skills:\n" + listing),
            parameters={"type": "object", "properties": {
                "name": {"type": "string", "enum": list(self._loaded),
                         "description": "the skill's name"},
                "file": {"type": "string", "description": "a file of the skill, relative "
                         "to its folder (optional)"}}, "required": ["name"]})

    def skill(self, name: str) -> Skill:
        """The skill ``name``.

        Args:
            name: the skill's name.

        Returns:
            The skill.

        Raises:
            SkillError: when no such skill is offered (names the ones that are).
        """
        if name not in self._loaded:
            raise SkillError(f"no skill named {name!r}; available: {', '.join(self._loaded)}")
        return self._loaded[name]

    async def acall(self, name: str, file: str | None = None, **unexpected: Any) -> Any:
        """Load skill ``name`` (or its ``file``).

        Args:
            name: the skill's name.
            file: a file of the skill's folder, instead of its ``SKILL.md``.
            **unexpected: refused (named in the error).

        Returns:
            ``{"name", "instructions", "files"}`` (with ``instructions_cut`` and
            ``files_cut`` when they are not whole), or the file's ``read_file``.

        Raises:
            SkillError: for an unknown skill or file, or an unexpected argument.
        """
        if unexpected:
            raise SkillError(f"load_skill takes 'name' and 'file', not {sorted(unexpected)}")
        if not isinstance(name, str):
            raise SkillError(f"load_skill: 'name' must be a string (one of "
                             f"{', '.join(self._loaded)}), got {type(name).__name__}")
        skill = self.skill(name)
        if file is not None and file != "":
            return skill.read_file(file)
        files, stops = skill.listing()
        loaded: dict[str, Any] = {"name": skill.name, "instructions": skill.instructions,
                                  "files": files}
        if skill.instructions_cut is not None:  # fields apart: no file's text passes for them
            loaded["instructions_cut"] = {"kept_characters": len(skill.instructions),
                                          "file_bytes": skill.instructions_cut}
        if stops is not None:
            loaded["files_cut"] = stops
        return loaded
