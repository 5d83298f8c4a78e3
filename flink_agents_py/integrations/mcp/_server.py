"""MCP servers as resources: their tools for chat models, their prompts for setups.

Needs the ``mcp`` extra (``pip install 'flink-agents-py[mcp]'``): the official ``mcp`` SDK's
``ClientSession`` over stdio and streamable HTTP (the same calls in its 1.x and 2.x lines).

- ``McpServer`` (``MCP_SERVER``): one server, started as a subprocess (``command=[...]``,
  stdio) or reached at ``url=`` (streamable HTTP). It keeps one session open on a thread of
  its own (its own event loop); other threads' calls are bridged onto it.
- ``McpTool`` (``TOOL``): one tool of a server, offered to chat models under the resource's
  name. Declared explicitly, or registered for every advertised tool when the plan is built.
- ``McpPrompt`` (``PROMPT``): one prompt of a server, usable as a setup's ``prompt``.

An open that fails or times out ends its session and the server process before the error is
raised (``_session``); secrets for a server (``secret_env``, ``secret_headers``) come from
the environment where the operator runs and are masked wherever text leaves the process.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, ClassVar

import orjson
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from ...api import (
    ChatMessage,
    MessageRole,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    ToolMetadata,
)
from ...api import internal as _api
from ...api.internal import RESERVED_TOOL_PREFIX, mask_known_value, scrub_exception
from ..chat_models._common import FreshOnUnpickle, secret_env_values
from ._results import (
    McpToolError,
    _bounded,
    _by_name,
    _clip,
    _prompt_messages,
    _short,
    _tool_items,
    _tool_value,
    tool_errors,
)
from ._session import Connection, list_all, wire

__all__ = ["McpServer", "McpTool", "McpPrompt", "McpToolError"]

log = logging.getLogger("flink_agents_py.mcp")


class McpServer(FreshOnUnpickle, Resource):
    """An MCP server (resource type ``MCP_SERVER``).

    ``ResourceDescriptor(clazz="flink_agents_py.integrations.mcp.McpServer",
    command=["python", "server.py"])`` (stdio) or ``url="http://127.0.0.1:8000/mcp"``
    (streamable HTTP).

    When the plan is built (``AgentPlan.from_agent``) the server is started once and listed:
    a tool it advertises whose name starts with the reserved prefix ``_subagent_`` is a plan
    problem naming the server and the tool; every other tool is registered as a ``TOOL``
    resource of that name (an ``McpTool``), and every prompt as a ``PROMPT`` resource (an
    ``McpPrompt``), unless a resource of that name is declared already (the declared one
    wins). If the server cannot be reached then, a warning is logged, nothing is registered
    (declare ``McpTool``/``McpPrompt`` resources yourself) and the reserved-prefix check
    happens when the server opens (a ``ResourceError`` naming server and tool).

    Attributes:
        command: the command starting a stdio server (program, then arguments).
        url: the endpoint of a streamable-HTTP server.
        env: extra environment variables for a stdio server (the SDK passes a small safe
            default environment, not this process's). Its values are part of the plan:
            put secrets in ``secret_env`` (the value of a variable whose name carries a
            credential, e.g. ``GITHUB_TOKEN``, is masked all the same).
        secret_env: environment variables of a stdio server whose values are secrets:
            ``{server variable: variable of this process}``, e.g. ``{"GITHUB_TOKEN":
            "MY_GH_TOKEN"}``. Read when the server starts (never part of the plan; a
            missing variable is a ``ResourceError`` naming it) and registered as secrets,
            so their values are masked in errors, logs and the event log.
        headers: extra HTTP headers for a streamable-HTTP server (part of the plan: put
            secrets in ``secret_headers``; the value of one whose name carries a credential,
            e.g. ``Authorization``, is masked like a secret header all the same).
        secret_headers: HTTP headers whose values are secrets: ``{header: variable of this
            process}``, e.g. ``{"Authorization": "MCP_AUTH"}`` (the variable holds the whole
            value, ``Bearer ...``). Read when the session starts, registered as secrets.
        cwd: the working directory of a stdio server.
        timeout_s: the most one request (a tool call, a prompt) may take.
        connect_timeout_s: the most connecting (start-up and handshake) may take.
        list_at_plan_build: list the server when the plan is built (see above).
        plan_timeout_s: the most that listing may take.
        register_tools: register advertised tools as ``TOOL`` resources at plan build.
        register_prompts: register advertised prompts as ``PROMPT`` resources at plan build.
        max_result_chars: the longest result (its JSON form) a tool call may return: a
            longer one is a failed tool call naming the bound (an ``McpToolError`` the model
            reads), so a server cannot fill keyed state and checkpoints with what it returns;
            a prompt's messages likewise (a ``ResourceError``) (``None``: no bound).
        max_message_bytes: the longest message the server may send, in bytes (a line on a
            stdio server's stdout; an HTTP answer, or one server-sent event): a longer one
            ends the session (a stdio server is stopped) and fails the requests waiting on
            it (``McpMessageTooLarge``, naming the server and the bound), instead of growing
            one string in this process until memory runs out. Default 64 MiB.
        max_tool_description_chars: the longest tool description offered to a chat model
            (it is sent with every chat): a longer one is cut, its start and end kept around
            a ``[... N of M characters cut ...]`` marker. Default 4,096.
        max_tool_schema_chars: the longest input schema (its JSON form) a tool may have
            (it is sent with every chat too): a tool with a longer one is refused where it
            is opened, a ``ResourceError`` naming the tool, the server and both sizes (a
            schema cut short would describe other arguments). Default 65,536.

    A stdio server that exits (or closes its stdout) while its session is open ends the
    session: the call waiting for an answer fails with ``McpServerExited`` naming the tool,
    the server and its exit code, and the next call starts the server again.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.MCP_SERVER

    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] | None = None
    secret_env: dict[str, str] | None = None
    headers: dict[str, str] | None = None
    secret_headers: dict[str, str] | None = None
    cwd: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    connect_timeout_s: float = Field(default=30.0, gt=0)
    list_at_plan_build: bool = True
    plan_timeout_s: float = Field(default=30.0, gt=0)
    register_tools: bool = True
    register_prompts: bool = True
    max_result_chars: int | None = Field(default=10_000_000, gt=0)
    max_message_bytes: int = Field(default=64 << 20, gt=0)
    max_tool_description_chars: int = Field(default=4_096, gt=0)
    max_tool_schema_chars: int = Field(default=65_536, gt=0)

    _conn: Connection | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _tools: dict[str, dict[str, Any]] | None = PrivateAttr(default=None)
    _prompts: dict[str, dict[str, Any]] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command=[...] (stdio) or url=... (HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program")
        return self

    def server_env(self) -> dict[str, str] | None:
        """A stdio server's extra environment: ``env`` and ``secret_env`` (registered).

        Returns:
            The variables, or ``None`` when there are none.

        Raises:
            MissingApiKeyError: (a ``ResourceError``) when a variable ``secret_env`` names is
                not set.
        """
        env = {**(self.env or {}),
               **secret_env_values(self, self.secret_env, "environment variable")}
        return env or None

    def request_headers(self) -> dict[str, str] | None:
        """An HTTP server's extra headers: ``headers`` and ``secret_headers`` (registered).

        Returns:
            The headers, or ``None`` when there are none.

        Raises:
            MissingApiKeyError: (a ``ResourceError``) when a variable ``secret_headers`` names
                is not set.
        """
        headers = {**(self.headers or {}), **secret_env_values(self, self.secret_headers,
                                                                "header")}
        return headers or None

    @property
    def where(self) -> str:
        """The server as a message names it."""
        label = f"{self.resource_name!r} " if self.resource_name else ""
        return f"{label}({' '.join(self.command) if self.command else self.url})"

    # -- connection ---------------------------------------------------------------------
    def _connection(self) -> Connection:
        with self._lock:
            if self._conn is None or not self._conn.alive:
                if self._conn is not None:
                    self._conn.close(1.0)
                conn = Connection(self, self.resource_name or "server")
                conn.start(self.connect_timeout_s)
                self._conn = conn
            return self._conn

    def _listing(self, conn: Connection, timeout: float
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        tools = self._listed(conn, "tools", timeout)
        prompts: list[dict[str, Any]] = []
        if (conn.init.get("capabilities") or {}).get("prompts") is not None:
            prompts = self._listed(conn, "prompts", timeout)
        return tools, prompts

    def _listed(self, conn: Connection, key: str, timeout: float) -> list[dict[str, Any]]:
        """Every item of ``tools/list`` (``key="tools"``) or ``prompts/list``.

        Returns:
            The items.

        Raises:
            ResourceError: naming the server and the request, when it answered with an error
                or with something that is not MCP (the SDK refused it).
            OSError: when it did not answer within ``timeout`` seconds (``TimeoutError``) or
                the session is gone (``ConnectionError``).
        """
        try:
            return conn.call(lambda s: list_all(s, f"list_{key}", key, self.where), timeout)
        except (ResourceError, OSError):  # (TimeoutError and ConnectionError among them)
            raise
        except ValidationError as e:
            raise ResourceError(f"MCP server {self.where} answered {key}/list with something "
                                f"that is not MCP: {_short(str(e))}") from scrub_exception(e)
        except Exception as e:  # noqa: BLE001 - the server's own error
            raise ResourceError(f"MCP server {self.where} answered {key}/list with an error: "
                                f"{type(e).__name__}: {_short(str(e))}") from scrub_exception(e)

    def open(self) -> None:
        """Connect, list tools and prompts, and reject a tool named with the reserved prefix.

        When any of it fails (no answer within ``connect_timeout_s`` or ``timeout_s``, a
        reserved name...), the session is closed and a stdio server's process ended before
        the error is raised.

        Raises:
            ResourceError: naming the server and the tool, for a reserved name; naming the
                server, when it cannot be reached.
            ImportError: naming the ``mcp`` extra when the SDK is not installed.
        """
        try:
            conn = self._connection()
            tools, prompts = _by_name(*self._listing(conn, self.timeout_s), self.where)
        except ImportError:
            self.close()
            raise
        except ResourceError:
            self.close()
            raise
        except Exception as e:  # noqa: BLE001
            self.close()  # a failed open leaves no session and no server process behind
            raise ResourceError(f"MCP server {self.where} cannot be reached: "
                                f"{type(e).__name__}: {e}") from scrub_exception(e)
        reserved = [n for n in tools if n.startswith(RESERVED_TOOL_PREFIX)]
        if reserved:
            self.close()
            raise ResourceError(
                f"MCP server {self.where} advertises tool {reserved[0]!r}, which starts with "
                f"the reserved prefix {RESERVED_TOOL_PREFIX!r} (that prefix names sub-agent "
                "callables); rename the tool on the server")
        self._tools, self._prompts = tools, prompts

    def close(self) -> None:
        """End the session (a stdio server's process ends with it)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- tools --------------------------------------------------------------------------
    def _opened(self) -> None:
        if self._tools is None:
            self.open()

    def list_tools(self) -> list[ToolMetadata]:
        """The server's tools as chat models are told about them."""
        self._opened()
        assert self._tools is not None
        return [self.tool_metadata(n) for n in self._tools]

    def tool_metadata(self, tool: str, as_name: str | None = None) -> ToolMetadata:
        """One tool's name, description and input schema (offered as ``as_name``).

        Args:
            tool: the tool's name on the server.
            as_name: the name the model sees (default: ``tool``).

        Returns:
            The tool's metadata.

        Raises:
            ResourceError: when the server has no such tool (naming what it has), or when
                its input schema is longer than ``max_tool_schema_chars``.
        """
        self._opened()
        assert self._tools is not None
        spec = self._tools.get(tool)
        if spec is None:
            raise ResourceError(f"MCP server {self.where} has no tool {tool!r} "
                                f"(it has: {', '.join(sorted(self._tools)) or 'none'})")
        schema = spec.get("inputSchema") or {"type": "object", "properties": {}}
        size = len(orjson.dumps(schema))
        if size > self.max_tool_schema_chars:
            raise ResourceError(
                f"MCP server {self.where} advertises tool {tool!r} with an input schema of "
                f"{size:,} characters, over its max_tool_schema_chars "
                f"({self.max_tool_schema_chars:,}); raise the bound or fix the tool")
        description = _clip(spec.get("description") or "", self.max_tool_description_chars)
        return ToolMetadata(name=as_name or tool, description=description, parameters=schema)

    async def acall_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call a tool.

        Args:
            tool: the tool's name on the server.
            arguments: the call's arguments.

        Returns:
            The tool's value (see ``_tool_value``).

        Raises:
            McpToolError: when the tool reports an error, or its result is longer than
                ``max_result_chars``, or with a result that is not MCP (naming what is wrong).
            TimeoutError: when it takes longer than ``timeout_s``.
            McpMessageTooLarge: when the server sent a message over ``max_message_bytes``
                (its session was ended; the next call starts another).
            McpServerExited: when a stdio server exited during the call (naming the tool and
                the exit code; the next call starts the server again).
        """
        if self._tools is None:
            await asyncio.to_thread(self._opened)
        conn = await asyncio.to_thread(self._connection)
        with tool_errors(tool, self.where, conn):
            fut = conn.submit(lambda s: s.call_tool(tool, arguments))
            try:
                result = await asyncio.wait_for(asyncio.wrap_future(fut), self.timeout_s)
            except asyncio.TimeoutError:
                raise TimeoutError(f"MCP tool {tool!r} of {self.where} did not answer within "
                                   f"{self.timeout_s:g} s") from None
        return _tool_value(_bounded(result, tool, self), self._output_schema(tool))

    def _output_schema(self, tool: str) -> dict[str, Any] | None:
        return ((self._tools or {}).get(tool) or {}).get("outputSchema")

    def call_tool(self, tool: str, arguments: dict[str, Any], *,
                  content_items: bool = False) -> Any:
        """Blocking form of ``acall_tool`` (for use outside an agent).

        What it returns and raises is what an agent's tool call would record: an error's
        text is clipped (``runtime``'s ``clip``), and the known secrets in the value and in
        errors are masked.

        Args:
            tool: the tool's name on the server.
            arguments: the call's arguments.
            content_items: return Flink Agents' form instead of the value: a list of one item
                per content block (a text block's text, another block as its wire dict).

        Returns:
            The tool's value (or its content items), its known secrets masked.
        """
        self._opened()
        conn = self._connection()
        with tool_errors(tool, self.where, conn):
            result = conn.call(lambda s: s.call_tool(tool, arguments), self.timeout_s)
        bounded = _bounded(result, tool, self)
        return mask_known_value(_tool_items(bounded) if content_items
                                else _tool_value(bounded, self._output_schema(tool)))

    # -- prompts ------------------------------------------------------------------------
    def list_prompts(self) -> list[dict[str, Any]]:
        """The server's prompts: ``{"name", "description", "arguments": [...]}`` each."""
        self._opened()
        assert self._prompts is not None
        return list(self._prompts.values())

    def get_prompt(self, prompt: str, arguments: dict[str, Any] | None = None) -> list[ChatMessage]:
        """Fetch a prompt, filled with ``arguments`` (the ones it declares, as text).

        Args:
            prompt: the prompt's name on the server.
            arguments: values of its arguments.

        Returns:
            The prompt's messages, the known secrets in their text masked (a server quoting
            one it was given would hand it to the model).

        Raises:
            ResourceError: when the server has no such prompt, or a required argument is
                missing; naming the prompt and the server (its text masked), when the
                server answers with an error, with something that is not MCP, or with
                messages longer than ``max_result_chars`` in their JSON form.
        """
        self._opened()
        assert self._prompts is not None
        spec = self._prompts.get(prompt)
        if spec is None:
            raise ResourceError(f"MCP server {self.where} has no prompt {prompt!r} "
                                f"(it has: {', '.join(sorted(self._prompts)) or 'none'})")
        given = arguments or {}
        args: dict[str, str] = {}
        for a in spec.get("arguments") or []:
            name = a["name"]
            if name in given:
                value = given[name]
                args[name] = value if isinstance(value, str) else orjson.dumps(value).decode()
            elif a.get("required"):
                raise ResourceError(f"prompt {prompt!r} of MCP server {self.where} needs "
                                    f"the argument {name!r}")
        conn = self._connection()
        with tool_errors(prompt, self.where, conn, kind="prompt"):  # a tool's rules
            result = conn.call(lambda s: s.get_prompt(prompt, args or None), self.timeout_s)
        return _prompt_messages(wire(_bounded(result, prompt, self, kind="prompt")))

    # -- plan build ---------------------------------------------------------------------
    def plan_listing(self, name: str
                     ) -> list[tuple[ResourceType, str, ResourceDescriptor | None]] | None:
        """What the plan registers for this server: ``(type, advertised name, descriptor)``.

        Called by ``AgentPlan.from_agent`` with the server's resource name; uses a session
        of its own, closed before returning. The descriptor is ``None`` for a name not to
        register.

        Args:
            name: the server's resource name.

        Returns:
            What to register, or ``None`` (after logging a warning) when listing is switched
            off or the server cannot be reached.

        Raises:
            ImportError: naming the ``mcp`` extra when the SDK is not installed.
            ResourceError: naming the server and the name, when it lists one tool (or prompt) twice.
        """
        if not self.list_at_plan_build:
            return None
        conn = Connection(self, f"{name}-plan")
        try:
            conn.start(self.plan_timeout_s)
            listed = self._listing(conn, self.plan_timeout_s)
        except ImportError:
            raise
        except Exception as e:  # noqa: BLE001 - optional: checked again at open
            log.warning("MCP server %r (%s) could not be listed when the plan was built "
                        "(%s: %s), so it registers no tools or prompts: a setup naming one "
                        "fails to compile unless it is declared as an McpTool (or McpPrompt) "
                        "resource, whose server is checked when it opens", name,
                        " ".join(self.command) if self.command else self.url,
                        type(e).__name__, e)
            return None
        finally:
            conn.close()
        tools, prompts = _by_name(*listed, self.where if self.resource_name  # a name listed
                                  else f"{name!r} {self.where}")  # twice fails the build
        out: list[tuple[ResourceType, str, ResourceDescriptor | None]] = [
            (ResourceType.TOOL, tool, ResourceDescriptor(McpTool, server=name, tool=tool)
             if self.register_tools else None) for tool in tools]
        return out + [(ResourceType.PROMPT, prompt, ResourceDescriptor(
            McpPrompt, server=name, prompt=prompt) if self.register_prompts else None)
            for prompt in prompts]


class McpTool(FreshOnUnpickle, Resource):
    """One tool of an MCP server, offered to chat models as a ``TOOL`` resource.

    The model sees it under the resource's name (so a tool can be renamed, e.g. to keep two
    servers' ``search`` apart) with the server's description and input schema.

    Attributes:
        server: the name of the ``MCP_SERVER`` resource.
        tool: the tool's name on the server (default: the resource's name).
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.TOOL

    server: str
    tool: str = ""

    _metadata: ToolMetadata | None = PrivateAttr(default=None)

    def _server(self) -> McpServer:
        srv = self.get_resource(self.server, ResourceType.MCP_SERVER)
        if not isinstance(srv, McpServer):
            raise ResourceError(f"tool {self.resource_name!r}: resource {self.server!r} is a "
                                f"{type(srv).__name__}, not an McpServer")
        return srv

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.resource_name or self.tool

    def open(self) -> None:
        """Fetch the tool's description and schema from its server (opening the server)."""
        self._metadata = self._server().tool_metadata(self.tool or self.name, self.name)

    @property
    def metadata(self) -> ToolMetadata:
        """Name, description and argument schema for a chat model."""
        if self._metadata is None:
            self.open()
        assert self._metadata is not None
        return self._metadata

    def call(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Call the tool now, in this thread (Apache Flink Agents' ``MCPTool.call``).

        Not a durable call: wrap it in ``ctx.durable_execute`` when a replay must not repeat
        it. An error the tool reports is raised (``McpToolError``), where Flink Agents
        returns an error response.

        Args:
            *args: the arguments as one dict (``add.call({"a": 1, "b": 2})``), when no
                keywords are given.
            **kwargs: the arguments.

        Returns:
            One item per content block of the result: a text block's text (``["3"]``),
            another block as its wire dict.
        """
        arguments = kwargs or (args[0] if args else {})
        return self._server().call_tool(self.tool or self.name, arguments, content_items=True)

    async def acall(self, **arguments: Any) -> Any:
        """Call the tool on its server.

        Args:
            **arguments: the call's arguments.

        Returns:
            The tool's value.

        Raises:
            McpToolError, ValueError: the tool's error, or unreadable arguments (told).
        """
        _api.refuse_unreadable_arguments(self.name, arguments)
        return await self._server().acall_tool(self.tool or self.name, arguments)


class McpPrompt(Prompt):
    """One prompt of an MCP server, usable as a chat model setup's ``prompt``.

    Filled from the request's ``prompt_args`` (the arguments the prompt declares, as text).
    Fetching it is a request to the server, made each time the prompt is used (on the
    operator thread, bounded by the server's ``timeout_s``).

    Attributes:
        server: the name of the ``MCP_SERVER`` resource.
        prompt: the prompt's name on the server (default: the resource's name).
    """

    server: str
    prompt: str = ""

    def _server(self) -> McpServer:
        srv = self.get_resource(self.server, ResourceType.MCP_SERVER)
        if not isinstance(srv, McpServer):
            raise ResourceError(f"prompt {self.resource_name!r}: resource {self.server!r} is "
                                f"a {type(srv).__name__}, not an McpServer")
        return srv

    def format_messages(self, role: MessageRole | str | None = None,
                        **values: Any) -> list[ChatMessage]:
        """The server's messages for ``values``.

        Their roles are the server's: ``role`` is taken for ``Prompt``'s signature and
        changes nothing.

        Returns:
            The messages.
        """
        return self._server().get_prompt(self.prompt or self.resource_name, values)

    def format_string(self, **values: Any) -> str:
        """The server's messages for ``values``, as one text."""
        return "\n".join(m.content for m in self.format_messages(**values))
