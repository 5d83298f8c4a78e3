"""``run_skill_command``: runs a command a skill's instructions give, in a sandbox.

The text rules below are a first filter (each refusal is a failed tool call whose reason the
model reads); containment comes from the kernel (``_sandbox.py``: bubblewrap namespaces,
read-only binds, no network, a PID namespace for timeouts, resource limits):

- the command line is split into words by POSIX shell rules (quotes, backslashes, ``#``
  comments; a quoted ``|`` or ``;`` is a word), never given to a shell as text; it
  is a command, or a pipeline of commands joined by ``|`` (run inside the sandbox, so every
  stage reads the whole output of the one before);
- every stage's program must be exactly one of ``allowed_commands``, by bare name (no
  ``/``: ``/bin/sh``, ``./x``, ``../x`` are refused), and is resolved to an absolute path in
  the system directories (never the host ``PATH``, never a skill's folder);
- refused anywhere: ``;``, ``&``, ``&&``, ``||``, redirections (``<``, ``>``, ``>>``...),
  parentheses, ``$`` (variables, ``$(...)``), backticks, newlines, ``VAR=value`` prefixes;
- an argument that is an absolute path, starts with ``~`` or has a ``..`` component is
  refused (an outside path inside an argument, ``-o/tmp/x``, passes this check: the
  sandbox is what keeps it in).

Programs able to run other programs (``find -exec``, sed's ``e``, awk's ``system()``,
``git -c alias.x=!...``, ``xargs``, ``env``, interpreters) make the allow-list equivalent to
a shell; inside the sandbox that shell is contained all the same. Naming one warns once, at
configuration (``ShellEquivalentCommandWarning``).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, model_validator

from ..api import Resource, ResourceType, ToolMetadata, mask_secrets
from ..api.internal import warn_at_user
from ._sandbox import (
    CommandRefusedError,
    Limits,
    bubblewrap_installed,
    resolve_program,
    run_pipeline,
)
from ._skills import Skill, SkillError, load_skills

__all__ = ["CommandRefusedError", "RunSkillCommandTool", "ShellEquivalentCommandWarning",
           "SHELL_EQUIVALENT_COMMANDS", "parse_command"]

_log = logging.getLogger(__name__)
_warned: set[str] = set()

_OPERATOR_CHARS = frozenset(";&|<>()")
_SPLIT_CHARS = frozenset(" \t")
_FORBIDDEN_CHARS = ("$", "`", "\n", "\r", "\x00")
MAX_COMMAND_CHARS = 10_000
"""The longest command line ``run_skill_command`` takes, in characters."""


SHELL_EQUIVALENT_COMMANDS = frozenset({
    "find", "sed", "awk", "gawk", "mawk", "nawk", "busybox", "git", "xargs", "env", "sh",
    "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "perl", "python", "ruby", "node",
    "nodejs", "php", "lua", "tclsh", "expect", "sort", "tar", "zip", "split", "rsync", "ssh",
    "make", "dc", "ed", "ex", "vi", "vim", "less", "more", "man", "m4", "nice", "nohup",
    "timeout", "stdbuf", "setsid", "flock", "watch", "parallel", "script", "strace", "gdb",
    "sudo", "su", "chroot", "unshare", "nsenter", "time", "command", "exec", "ionice", "chrt",
    "taskset", "prlimit", "bwrap", "runuser", "doas", "sg", "socat", "nc", "ncat", "netcat",
    "screen", "tmux", "ltrace", "valgrind", "emacs", "nvim", "scp", "java", "jshell", "julia",
    "Rscript", "pip", "pip3", "npm", "npx", "cargo", "go",
    # run the program named in their arguments (util-linux, coreutils, libcap, the loader...)
    "setpriv", "choom", "setarch", "linux32", "linux64", "i386", "x86_64", "uname26",
    "runcon", "capsh", "numactl", "cgexec", "ld.so", "start-stop-daemon", "ssh-agent",
    "dbus-run-session", "dbus-launch", "systemd-run", "fakeroot", "fakechroot", "eatmydata",
    "faketime", "unbuffer", "cpulimit", "firejail", "proot", "sshpass", "xvfb-run", "perf",
    "lldb", "chpst", "daemonize", "torsocks", "proxychains", "proxychains4", "msgfilter",
    "msgexec", "ip",
    # with a command or escape of their own (sqlite3's .shell, psql's \!, groff -U, gcc's
    # -wrapper, cmake -P's execute_process, pandoc's Lua filters...)
    "sqlite3", "psql", "mysql", "mariadb", "groff", "troff", "gcc", "cc", "g++", "clang",
    "tcc", "cmake", "ctest", "ninja", "pandoc", "latex", "pdflatex", "lualatex", "xelatex",
    "tex", "gnuplot", "octave", "R", "wish", "guile", "luajit", "mono", "dotnet", "deno",
    "bun", "ocaml", "ghci", "racket", "sbcl", "clisp", "swipl", "erl", "elixir", "iex",
    "pwsh", "toybox",
    # run a program or script the model names, found past the lists above: run-parts runs
    # every program of a folder with --arg words, logsave and --strip-program/--diff-program
    # name a program, pdb/pydoc/prove/rename run Python or Perl code, rbash is a shell
    "run-parts", "logsave", "install", "sdiff", "diff3", "pdb", "pydoc", "prove", "rename",
    "file-rename", "prename", "rbash", "scriptlive", "ash", "mksh", "posh", "yash",
    # a file name or option that is a command (ImageMagick's '|cmd' and delegates,
    # Ghostscript's %pipe%, exiftool's Perl -if, erb's Ruby), or an editor or pager by its
    # other names (each has '!'), or a tool running a project's own scripts
    "convert", "magick", "mogrify", "identify", "composite", "montage", "conjure", "gs",
    "ghostscript", "exiftool", "erb", "irb", "perldoc", "view", "rview", "rvim", "vimdiff",
    "editor", "pager", "sensible-editor", "sensible-pager", "info", "w3m", "lynx", "gem",
    "bundle", "rake", "yarn", "pnpm", "uv", "uvx", "pipx", "mvn", "gradle", "ant", "scons",
    "meson", "ghc", "runghc", "scala", "groovy", "kotlin", "apt-get", "apt", "dpkg", "rpm",
    "docker", "podman", "kubectl", "crontab", "at", "batch", "pkexec",
    # an option naming a program to start: wget's --use-askpass, gpg's --agent-program
    # (and --photo-viewer, --exec-path); catchsegv, entr, rlwrap, trickle, newgrp and vipe
    # run a program; browsers, mail readers and editors reached by other names have a
    # shell escape or start a program of their choice
    "wget", "wget2", "gpg", "gpg2", "gpgv", "catchsegv", "entr", "rlwrap", "trickle",
    "newgrp", "vipe", "xdg-open", "sensible-browser", "www-browser", "x-www-browser",
    "links", "links2", "elinks", "mail", "mailx", "mutt", "neomutt", "nano", "pico",
    "joe", "jed", "mcedit", "mc", "pypy", "pypy3", "jython", "ipython", "ipython3",
    "xonsh", "elvish", "nu", "oksh", "loksh", "pdksh", "texlua", "luatex", "php-cgi"})
"""Programs that can run other programs (``find -exec``, sed's ``e``, awk's ``system()``,
``sort --compress-program``...): allowing one is allowing a shell (contained by the
sandbox all the same). Versioned interpreter names (``python3.12``, ``perl5``) count too."""

_VERSIONED = re.compile(r"(python|perl|ruby|node|php|lua|tclsh|wish|pdb|pydoc|ksh)[0-9.]*")


def _shown(text: str, limit: int = 200) -> str:
    """``text`` quoted for an error, its middle cut when it is longer than ``limit``.

    A text cut is masked whole first (``api.mask_secrets``): a secret standing across the
    cut would leave a piece the mask no longer recognises.

    Returns:
        The quoted text.
    """
    if len(text) <= limit:
        return repr(text)
    text = mask_secrets(text)
    return repr(text[:limit // 2]) + f" [... {len(text) - limit} characters] " + repr(
        text[-limit // 2:])


class ShellEquivalentCommandWarning(UserWarning):
    """An allow-list names a program that can run other programs (a shell in effect)."""


class _Operator(str):
    """An unquoted run of ``;&|<>()`` (a quoted one is an ordinary word)."""


def _words(command: str) -> list[str]:
    """Split ``command`` as a POSIX shell does (quotes, backslashes, ``#`` comments).

    A run of ``;&|<>()`` outside quotes is an ``_Operator`` token; quoted or
    backslash-escaped, the same characters are part of a word (``cut -d '|'`` is one
    command). ``#`` starts a comment only at the start of a word (``C#`` is a word), as in
    a shell. ``shlex`` loses both distinctions, so the words are split here.

    Returns:
        The words and operators, in order.

    Raises:
        CommandRefusedError: for an unterminated quote or a trailing backslash.
    """
    tokens: list[str] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(command)

    def end_word() -> None:
        nonlocal in_word
        if in_word:
            tokens.append("".join(word))
            word.clear()
            in_word = False

    while i < n:
        ch = command[i]
        if ch in _SPLIT_CHARS:
            end_word()
            i += 1
        elif ch in _OPERATOR_CHARS:
            end_word()
            j = i
            while j < n and command[j] in _OPERATOR_CHARS:
                j += 1
            tokens.append(_Operator(command[i:j]))
            i = j
        elif ch == "#" and not in_word:
            break  # a comment, to the end of the line
        elif ch == "'":
            j = command.find("'", i + 1)
            if j < 0:
                raise CommandRefusedError("refused: the command cannot be parsed (no closing "
                                          "quotation)")
            word.append(command[i + 1:j])
            in_word, i = True, j + 1
        elif ch == '"':
            i += 1
            while i < n and command[i] != '"':
                if command[i] == "\\" and i + 1 < n and command[i + 1] in '"\\':
                    i += 1
                word.append(command[i])
                i += 1
            if i >= n:
                raise CommandRefusedError("refused: the command cannot be parsed (no closing "
                                          "quotation)")
            in_word, i = True, i + 1
        elif ch == "\\":
            if i + 1 >= n:
                raise CommandRefusedError("refused: the command cannot be parsed (it ends "
                                          "with a backslash)")
            word.append(command[i + 1])
            in_word, i = True, i + 2
        else:
            word.append(ch)
            in_word, i = True, i + 1
    end_word()
    return tokens


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
    if len(command) > MAX_COMMAND_CHARS:
        raise CommandRefusedError(f"refused: the command has {len(command)} characters, more "
                                  f"than {MAX_COMMAND_CHARS}")
    for ch in _FORBIDDEN_CHARS:
        if ch in command:
            shown = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL"}.get(ch, ch)
            raise CommandRefusedError(f"refused: {shown!r} is not allowed (no variables, "
                                      f"command substitution or several lines)")
    tokens = _words(command)
    if not tokens:
        raise CommandRefusedError("refused: the command is empty")
    stages: list[list[str]] = [[]]
    for tok in tokens:
        if isinstance(tok, _Operator):
            if tok != "|":
                raise CommandRefusedError(f"refused: {str(tok)!r} is not allowed (only one "
                                          f"command, or commands joined by '|'; no "
                                          f"redirections)")
            stages.append([])
            continue
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
    """The ``run_skill_command`` tool: runs an allowed command on a skill's files, sandboxed.

    Each command runs in a bubblewrap sandbox (see ``docs/how-to/skills.md``): the skill's
    files read-only in a fresh private working directory, system directories read-only, no
    host ``/etc`` secrets or home, no network, a PID namespace killed whole at the timeout,
    and the resource limits below per process. Bubblewrap is detected when a command runs;
    where it cannot run, the command is refused with what to install.

    Attributes:
        paths: skill folders, or folders of skill folders (as ``LoadSkillTool``).
        skills: the names whose commands may run (``None``: every skill found).
        allowed_commands: the programs that may run, by bare name (``["echo", "bc"]``).
        sandbox: ``"bubblewrap"`` (the default), or ``"none"``: run on the host in the
            skill's folder with your user's rights, trusting the model like a shell user
            (only the text rules, the timeout and the limits apply).
        writable_skills: skills whose real folder is the working directory, read-write
            (the others get a fresh private scratch directory showing the skill's files
            read-only, discarded after each command).
        timeout_s: the longest a command (the whole pipeline) may run, in seconds (wall
            clock); then every process it started is killed.
        max_output_chars: the most characters of output returned (the rest is read, counted
            and dropped; the text says it was cut).
        max_cpu_s: CPU seconds per process.
        max_memory_mb: address space per process, in MiB.
        max_file_mb: the largest file a process may write, in MiB.
        max_processes: processes at once (Linux 5.14+; not enforced for root).
        max_scratch_mb: the size of the private working directory, ``/tmp`` and ``/dev/shm``, in MiB
            each (where the installed bubblewrap supports ``--size``, 0.8+).
        max_total_memory_mb: the memory of all of a command's processes together, what
            they write in the sandbox's tmpfs included, in MiB (a ``memory`` cgroup, for a
            job run as root where one can be made; past it the kernel kills inside the
            command only).
        name: the tool's name.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.TOOL

    paths: list[str]
    skills: list[str] | None = None
    allowed_commands: list[str] = Field(default_factory=list)
    sandbox: Literal["bubblewrap", "none"] = "bubblewrap"
    writable_skills: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=10.0, gt=0)
    max_output_chars: int = Field(default=8_000, ge=1)
    max_cpu_s: int = Field(default=10, ge=1)
    max_memory_mb: int = Field(default=1024, ge=16)
    max_file_mb: int = Field(default=64, ge=1)
    max_processes: int = Field(default=64, ge=1)
    max_scratch_mb: int = Field(default=64, ge=1)
    max_total_memory_mb: int = Field(default=2048, ge=16)
    name: str = "run_skill_command"

    _loaded: dict[str, Skill] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _load(self) -> RunSkillCommandTool:
        bad = [c for c in self.allowed_commands if not c or "/" in c or c != c.strip()]
        if bad:
            raise ValueError(f"allowed_commands are bare program names, not {bad}")
        loaded = load_skills(self.paths)
        for field, names in (("skills", self.skills), ("writable_skills",
                                                      self.writable_skills)):
            missing = [s for s in names or [] if s not in loaded]
            if missing:
                raise SkillError(f"{field}: no skill named {missing} in {self.paths}; found: "
                                 f"{sorted(loaded)}")
        if self.skills is not None:
            loaded = {n: loaded[n] for n in self.skills}
        self._loaded = loaded
        shells = sorted(c for c in self.allowed_commands
                        if c in SHELL_EQUIVALENT_COMMANDS or _VERSIONED.fullmatch(c))
        if shells:
            said = (f"allowed_commands {shells} can run other programs: allowing them is "
                    f"allowing a shell (contained by the sandbox: sandbox={self.sandbox!r})")
            if said not in _warned:  # once per allow-list (and sandbox) in a process
                _warned.add(said)
                warn_at_user(ShellEquivalentCommandWarning(f"{self.name}: {said}"))
        roots = [Path(p).expanduser() for p in self.paths]
        for program in self.allowed_commands:
            try:
                resolve_program(program, roots, self.sandbox == "bubblewrap")
            except CommandRefusedError as e:
                _log.warning("%s: allowed_commands: %s; commands naming it will be refused",
                             self.name, e)
        if self.sandbox == "bubblewrap" and self.allowed_commands and not bubblewrap_installed():
            _log.warning("%s: bubblewrap (bwrap) is not installed: every skill command will "
                         "be refused until it is (apt-get install bubblewrap), or pass "
                         "sandbox='none' to trust the model like a shell user", self.name)
        if self.sandbox == "none":
            _log.warning("%s: sandbox='none': skill commands run on this host with this "
                         "user's rights, trusting the model like a shell user", self.name)
        return self

    @property
    def tool_name(self) -> str:
        """The name the tool is offered under."""
        return self.name

    @property
    def metadata(self) -> ToolMetadata:
        """The tool as a chat model sees it."""
        return ToolMetadata(name=self.name, description=(
            "Run a command a loaded skill's instructions give, on that skill's files (the "
            "working directory). Only these programs run: "
            f"{', '.join(self.allowed_commands) or 'none'}; commands may be joined by '|'; "
            "no shell (no ';', '&&', redirections, variables or substitutions). Commands "
            "run in a sandbox: no network, no files outside the skill, and output longer "
            f"than {self.max_output_chars} characters is cut."),
            parameters={"type": "object", "properties": {
                "skill": {"type": "string", "enum": list(self._loaded),
                          "description": "the skill (may be left out when only one is "
                                         "offered)"},
                "command": {"type": "string", "description": "the command line"}},
                "required": ["command"] if len(self._loaded) == 1 else ["skill", "command"]})

    def run(self, skill: str, command: str) -> dict[str, Any]:
        """Run ``command`` on skill ``skill``'s files (blocking).

        Args:
            skill: the skill's name (may be empty when one skill is offered).
            command: the command line.

        Returns:
            ``{"exit_code", "output"}``: the last stage's exit code and stdout, then any
            stderr, capped at ``max_output_chars``; when it was cut, ``"output_cut"``
            (``kept_characters``, ``bytes_written``), and when a resource limit stopped
            the command, ``"stopped"`` (the reason): fields of their own, so nothing the
            command prints passes for them (the model reads the result as JSON, the
            output one escaped string).

        Raises:
            CommandRefusedError: for an unknown skill, a command the rules refuse, a
                program not installed in the system directories, or a run past
                ``timeout_s`` (every process it started killed).
            SandboxUnavailableError: (a ``CommandRefusedError``) when bubblewrap is missing
                or cannot run here and ``sandbox`` is not ``"none"``.
        """
        if not skill and len(self._loaded) == 1:
            skill = next(iter(self._loaded))
        try:
            return self._run(skill, command)
        except CommandRefusedError as e:  # which skill's command, among many keys' calls
            raise type(e)(f"{self.name}: skill {_shown(skill)}, command {_shown(command)}: "
                          f"{e}") from e

    def _run(self, skill: str, command: str) -> dict[str, Any]:
        if skill not in self._loaded:
            raise CommandRefusedError(f"no skill named {skill!r}; available: "
                                      f"{', '.join(self._loaded)}")
        stages = parse_command(command, set(self.allowed_commands))
        contained = self.sandbox == "bubblewrap"
        roots = [Path(p).expanduser() for p in self.paths]
        resolved = [[resolve_program(argv[0], roots, contained), *argv[1:]] for argv in stages]
        limits = Limits(cpu_s=self.max_cpu_s, memory_mb=self.max_memory_mb,
                        file_mb=self.max_file_mb, processes=self.max_processes,
                        scratch_mb=self.max_scratch_mb,
                        total_memory_mb=self.max_total_memory_mb)
        try:  # the folder loaded, not one swapped in since (by a writable skill's command)
            folder = self._loaded[skill].open_folder()
        except SkillError as e:
            raise CommandRefusedError(str(e)) from e
        try:
            code, text, notes = run_pipeline(resolved, skill_dir=self._loaded[skill].directory,
                                      folder=folder, writable=skill in self.writable_skills,
                                      contained=contained, limits=limits,
                                      timeout_s=self.timeout_s,
                                      max_output_chars=self.max_output_chars)
        finally:
            os.close(folder)
        return {"exit_code": code, "output": text, **notes}

    async def acall(self, skill: str = "", command: str = "", **unexpected: Any) -> Any:
        """Run the command in a worker thread (see ``run``)."""
        import asyncio

        if unexpected:
            raise CommandRefusedError(f"run_skill_command takes 'skill' and 'command', not "
                                      f"{sorted(unexpected)}")
        for arg, value in (("skill", skill), ("command", command)):
            if not isinstance(value, str):
                raise CommandRefusedError(f"run_skill_command: {arg!r} must be a string, got "
                                          f"{type(value).__name__}")
        return await asyncio.to_thread(self.run, skill, command)
