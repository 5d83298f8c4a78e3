"""The classes Flink Agents' resource names (``api.ResourceName``) point at.

They take its argument names over ours.

Each class here is a thin subclass of one of ours that only renames arguments (Flink Agents'
``request_timeout`` is our ``timeout_s``...) and routes generation parameters into a setup's
``options``; the work is done by the class it extends. An argument neither takes is
rejected when the plan is built (``AgentPlan.from_agent``), naming the class and what it
takes. An argument Flink Agents' class of that name drops (its resources are pydantic models
that ignore what they do not declare, so a program may pass ``think=False`` to an OpenAI
setup) is taken here too and dropped with a warning naming it and the class.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, SecretStr, model_validator

from ..api import (
    ChatMessage,
    ChatModelSetup,
    ChatResponse,
    EmbeddingModelSetup,
    Resource,
    ResourceError,
    ResourceType,
    register_secret,
)
from ..integrations.chat_models import AnthropicChatModel, OllamaChatModel, OpenAIChatModel
from ..integrations.embedding_models import OllamaEmbeddingModel, OpenAIEmbeddingModel
from ..integrations.mcp import McpServer as _McpServer

__all__ = [
    "AzureOpenAIChatModelConnection",
    "AzureOpenAIChatModelSetup",
    "OllamaChatModelConnection",
    "OllamaChatModelSetup",
    "OpenAIChatModelConnection",
    "OpenAIChatModelSetup",
    "AnthropicChatModelConnection",
    "AnthropicChatModelSetup",
    "TongyiChatModelConnection",
    "TongyiChatModelSetup",
    "OllamaEmbeddingModelConnection",
    "OpenAIEmbeddingModelConnection",
    "OllamaEmbeddingModelSetup",
    "OpenAIEmbeddingModelSetup",
    "McpServer",
    "NotOfferedChatModelConnection",
    "NotOfferedChatModelSetup",
    "NotOfferedEmbeddingModel",
    "NotOfferedVectorStore",
]

log = logging.getLogger(__name__)

_OPTIONS = "options"
_MERGED = "options (merged)"
_DROPPED = "dropped"
_EXTRA_BODY = "extra_body"


class _Renamed:
    """Mixin: ``ARGUMENT_ALIASES`` maps a Flink Agents argument to ours.

    ``"options"`` maps it into the ``options`` dict under its own name (``_EXTRA_BODY``:
    under ``extra_body``), ``_MERGED`` merges its dict into ``options``, ``_DROPPED`` takes
    it and drops it with a warning (an argument Flink Agents' class ignores, or one with no
    counterpart here). Read by the plan's unknown-argument check.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _rename(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        key = data.get("api_key")  # masked before anything can quote it (a validation error)
        if isinstance(key, str):
            register_secret(key, f"the api_key of a {cls.__name__}")
        if "name" in data and "name" not in cls.model_fields:  # type: ignore[attr-defined]
            # Flink Agents 0.1's resources had a ``name`` field; its tests still pass one
            # (``OllamaChatModelConnection(name="ollama", ...)``), which its pydantic models
            # now ignore. The resource's name is the one it is registered under.
            log.debug("%s: argument 'name' (%r) dropped", cls.__name__, data.pop("name"))
        for theirs, ours in cls.ARGUMENT_ALIASES.items():
            if theirs not in data:
                continue
            value = data.pop(theirs)
            if ours == _DROPPED:
                _warn_dropped(cls.__name__, theirs, value)
            elif ours == _MERGED:
                data[_OPTIONS] = {**dict(value or {}), **dict(data.get(_OPTIONS) or {})}
            elif ours in (_OPTIONS, _EXTRA_BODY):
                name = theirs if ours == _OPTIONS else _EXTRA_BODY
                data[_OPTIONS] = {**dict(data.get(_OPTIONS) or {}), name: value}
            else:
                data.setdefault(ours, value)
        return data

    @classmethod
    def note_dropped_arguments(cls, arguments: dict[str, Any]) -> None:
        """Warn of the arguments in ``arguments`` this class drops (called at plan build).

        The plan is built in the program's process, where its user reads the warning; the
        resource itself may be built only in a Flink worker, whose log on a local MiniCluster
        is a file the user never reads (the warning was lost there before).

        Args:
            arguments: a descriptor's arguments for this class.
        """
        for theirs, ours in cls.ARGUMENT_ALIASES.items():
            if ours == _DROPPED and theirs in arguments:
                _warn_dropped(cls.__name__, theirs, arguments[theirs])


_WARNED: set[tuple[str, str, str]] = set()
"""The dropped arguments warned of in this process (class, argument, value's repr)."""


def _warn_dropped(class_name: str, argument: str, value: Any) -> None:
    """Warn once per process that ``class_name`` drops ``argument`` (given ``value``)."""
    seen = (class_name, argument, repr(value))
    if seen in _WARNED:
        return
    _WARNED.add(seen)
    log.warning("%s: argument %r (%r) has no effect here; dropped", class_name, argument,
                value)


class _LiteralKey:
    """Mixin: the key given as Flink Agents' ``api_key`` argument, else ``$api_key_env``'s.

    Flink Agents' connections take the key itself (``api_key=os.environ["..."]``, or a
    literal). Here it is a ``SecretStr`` field (``**********`` in a repr), registered as a
    secret as soon as the descriptor is validated, so it is masked in every record, log
    and trace. It is still part of the plan, which Flink ships to its workers with the job:
    ``api_key_env`` (the variable's name, read on each worker) keeps it out of the plan.
    """

    def _api_key(self) -> str | None:
        given = getattr(self, "api_key", None)
        if isinstance(given, SecretStr) and given.get_secret_value():
            value = given.get_secret_value()
            register_secret(value, f"the api_key of a {type(self).__name__}")
            return value
        found: str | None = super()._api_key()  # type: ignore[misc]
        return found


_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


class _CompatSetup(_Renamed, ChatModelSetup):
    """A ``ChatModelSetup`` taking Flink Agents' setup arguments.

    Attributes:
        extract_reasoning: move a leading ``<think>...</think>`` block of the answer out of
            its text into ``metadata["reasoning"]`` (``extra_args["reasoning"]``); without
            one, the reasoning the provider gave apart (DashScope's and other
            OpenAI-compatible servers' ``reasoning_content``, Ollama's ``thinking``) is
            put there, as Flink Agents' Tongyi setup puts its ``reasoning_content``.
    """

    extract_reasoning: bool = False

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """As ``ChatModelSetup.achat``, then the reasoning moved out when asked."""
        response = await super().achat(messages, **kwargs)
        m = _THINK.match(response.message.content) if self.extract_reasoning else None
        if m is None:
            given = response.message.reasoning_text if self.extract_reasoning else ""
            if not given.strip():
                return response
            return response.model_copy(update={
                "metadata": {**response.metadata, "reasoning": given.strip()}})
        text = response.message.content[m.end():]
        message = response.message.model_copy(update={"content": text})
        return response.model_copy(update={
            "message": message, "metadata": {**response.metadata, "reasoning": m.group(1).strip()}})


class OllamaChatModelConnection(_Renamed, OllamaChatModel):
    """Flink Agents' Ollama connection.

    ``base_url`` is ``host``, ``request_timeout`` is ``timeout_s``, ``model`` is
    ``default_model``.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "base_url": "host", "request_timeout": "timeout_s", "model": "default_model"}


class OllamaChatModelSetup(_CompatSetup):
    """Flink Agents' Ollama setup: generation parameters go into ``options``.

    ``additional_kwargs`` (more Ollama parameters) are merged into ``options``.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        **{k: _OPTIONS for k in ("temperature", "num_ctx", "keep_alive", "think", "top_p",
                                 "top_k", "seed", "max_tokens", "num_predict")},
        "additional_kwargs": _MERGED}


class OpenAIChatModelConnection(_LiteralKey, _Renamed, OpenAIChatModel):
    """Flink Agents' OpenAI connection.

    ``timeout`` / ``request_timeout`` are ``timeout_s``, ``model`` is ``default_model``,
    ``api_base_url`` is ``base_url``, ``default_headers`` is ``headers``; ``reuse_client`` is
    taken and ignored (clients are reused); ``api_key`` is the key itself (else
    ``$api_key_env``'s, see ``_LiteralKey``).
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "timeout": "timeout_s", "request_timeout": "timeout_s", "model": "default_model",
        "api_base_url": "base_url", "default_headers": "headers"}

    api_key: SecretStr | None = None
    reuse_client: bool = True


class OpenAIChatModelSetup(_CompatSetup):
    """Flink Agents' OpenAI setup: generation parameters go into ``options``.

    ``additional_kwargs`` (more request parameters) are merged into ``options``, so they
    are sent as request fields, as Flink Agents sends them. ``strict`` (strict tool schemas)
    is dropped, and so is ``think`` (an Ollama argument, which Flink Agents' OpenAI setup
    ignores).
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        **{k: _OPTIONS for k in ("temperature", "max_tokens", "top_p", "seed", "stop",
                                 "frequency_penalty", "presence_penalty", "reasoning_effort",
                                 "logprobs", "top_logprobs")},
        "additional_kwargs": _MERGED,
        "strict": _DROPPED, "think": _DROPPED}


DASHSCOPE_COMPATIBLE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
"""DashScope's OpenAI-compatible endpoint (Tongyi Qianwen models)."""


class TongyiChatModelConnection(OpenAIChatModelConnection):
    """Flink Agents' Tongyi (DashScope) connection, over DashScope's OpenAI-compatible mode.

    Flink Agents calls DashScope's own SDK; the same models answer at
    ``DASHSCOPE_COMPATIBLE_URL`` in OpenAI's format, so this is our OpenAI connection
    there: ``api_key`` is the key itself, else ``$DASHSCOPE_API_KEY``'s (as in Flink
    Agents), ``request_timeout`` is ``timeout_s`` (60 s), the model ``qwen-plus`` unless
    the setup names one. ``base_url`` (ours) points it elsewhere (a gateway, a test server).
    An assistant message holding tool calls only goes with ``content: ""``, the form
    DashScope's function-calling guide sends back.
    """

    base_url: str | None = DASHSCOPE_COMPATIBLE_URL
    api_key_env: str = "DASHSCOPE_API_KEY"
    default_model: str = "qwen-plus"
    timeout_s: float = Field(default=60.0, gt=0)
    calls_only_content: Literal["auto", "null", "empty"] = "empty"


class TongyiChatModelSetup(_CompatSetup):
    """Flink Agents' Tongyi setup: ``temperature`` goes into ``options``.

    ``additional_kwargs`` (more request parameters) are merged into ``options``.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        **{k: _OPTIONS for k in ("temperature", "max_tokens", "top_p", "seed", "stop")},
        "additional_kwargs": _MERGED}


class AzureOpenAIChatModelConnection(OpenAIChatModelConnection):
    """Flink Agents' Azure OpenAI connection: our OpenAI connection with the SDK's Azure client.

    ``azure_endpoint`` (``https://<resource>.openai.azure.com``; else
    ``$AZURE_OPENAI_ENDPOINT``) and ``api_version`` (else ``$OPENAI_API_VERSION``) as Flink
    Agents takes them; the key is ``api_key``, else ``$AZURE_OPENAI_API_KEY``'s (sent as
    Azure's ``api-key`` header). Requests go to the deployment the setup names
    (``AzureOpenAIChatModelSetup.azure_deployment``).
    """

    api_key_env: str = "AZURE_OPENAI_API_KEY"
    azure_endpoint: str | None = None
    api_version: str | None = None

    def _server_url(self) -> str | None:
        return self.azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None

    def check(self) -> None:
        """Check the endpoint and API version, then the key as the OpenAI connection does.

        Raises:
            ResourceError: naming what is missing (``azure_endpoint``, ``api_version``).
        """
        missing = [what for what, given in (
            ("azure_endpoint (or $AZURE_OPENAI_ENDPOINT)", self._server_url()),
            ("api_version (or $OPENAI_API_VERSION)",
             self.api_version or os.environ.get("OPENAI_API_VERSION"))) if not given]
        if missing:
            raise ResourceError(f"{type(self).__name__} {self.resource_name or ''!r} needs "
                                f"{' and '.join(missing)}")
        super().check()

    def _sdk_client(self, openai: Any, headers: dict[str, str] | None) -> Any:
        from ..api.internal import register_sdk_env_headers
        from ..integrations.internal import answer_bounds

        register_sdk_env_headers("OPENAI_CUSTOM_HEADERS")  # added by the SDK itself
        return openai.AsyncAzureOpenAI(
            azure_endpoint=self._server_url(), api_version=self.api_version,
            api_key=self._api_key() or "unused", timeout=self.timeout_s,
            max_retries=self.max_retries, default_headers=headers,
            http_client=openai.DefaultAsyncHttpxClient(  # an answer read within bounds
                event_hooks=answer_bounds(self.timeout_s, self.max_answer_bytes)))


class AzureOpenAIChatModelSetup(_CompatSetup):
    """Flink Agents' Azure OpenAI setup.

    ``azure_deployment`` is the model each request names (Azure routes by deployment);
    ``model``, the underlying model's name (Flink Agents counts tokens by it), is not sent
    then; without a deployment, ``model`` is (a deployment named after its model, as Flink
    Agents' chat model e2e agent declares it). ``temperature``, ``max_tokens`` and
    ``logprobs`` go into ``options``, ``additional_kwargs`` are merged into them.

    Attributes:
        azure_deployment: the Azure OpenAI deployment to ask (``None``: ``model``).
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        **{k: _OPTIONS for k in ("temperature", "max_tokens", "logprobs")},
        "additional_kwargs": _MERGED}

    azure_deployment: str | None = None

    def _call_options(self, **given: Any) -> dict[str, Any]:
        """The connection call's keywords, the deployment as the model.

        Returns:
            The keywords.

        Raises:
            ResourceError: when neither ``azure_deployment`` nor ``model`` is given.
        """
        deployment = self.azure_deployment or self.model
        if not deployment:
            raise ResourceError(f"{type(self).__name__} {self.resource_name or ''!r} needs "
                                "azure_deployment: the Azure OpenAI deployment to ask")
        return {**super()._call_options(**given), "model": deployment}


class AnthropicChatModelConnection(_LiteralKey, _Renamed, AnthropicChatModel):
    """Flink Agents' Anthropic connection.

    ``timeout`` / ``request_timeout`` are ``timeout_s``, ``model`` is ``default_model``;
    ``api_key`` is the key itself (else ``$api_key_env``'s, see ``_LiteralKey``).
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "timeout": "timeout_s", "request_timeout": "timeout_s", "model": "default_model"}

    api_key: SecretStr | None = None


class AnthropicChatModelSetup(_CompatSetup):
    """Flink Agents' Anthropic setup: generation parameters go into ``options``.

    ``additional_kwargs`` (more request parameters) are merged into ``options``.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        **{k: _OPTIONS for k in ("temperature", "max_tokens", "top_p", "top_k",
                                 "stop_sequences")},
        "additional_kwargs": _MERGED}


class OllamaEmbeddingModelConnection(_Renamed, OllamaEmbeddingModel):
    """Flink Agents' Ollama embedding connection (``request_timeout`` is ``timeout_s``)."""

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "request_timeout": "timeout_s", "model": "default_model"}


class OpenAIEmbeddingModelConnection(_LiteralKey, _Renamed, OpenAIEmbeddingModel):
    """Flink Agents' OpenAI embedding connection.

    ``timeout`` is ``timeout_s``, ``api_base_url`` is ``base_url``; ``api_key`` is the key
    itself (else ``$api_key_env``'s, see ``_LiteralKey``).
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "timeout": "timeout_s", "request_timeout": "timeout_s", "model": "default_model",
        "api_base_url": "base_url"}

    api_key: SecretStr | None = None


class OllamaEmbeddingModelSetup(_Renamed, EmbeddingModelSetup):
    """Flink Agents' Ollama embedding setup over ours.

    ``additional_kwargs`` are model options (merged into ``options``); ``truncate`` and
    ``keep_alive`` are the connection's here (``OllamaEmbeddingModelConnection``), so a
    setup's are dropped, as is ``think``, which Flink Agents' setup ignores.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "additional_kwargs": _MERGED, "truncate": _DROPPED, "keep_alive": _DROPPED,
        "think": _DROPPED}


class OpenAIEmbeddingModelSetup(_Renamed, EmbeddingModelSetup):
    """Flink Agents' OpenAI embedding setup over ours.

    ``dimensions`` and ``user`` go into ``options``, ``additional_kwargs`` is the request's
    ``extra_body``; ``encoding_format`` is dropped (vectors are always asked for as floats).
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {
        "dimensions": _OPTIONS, "user": _OPTIONS, "additional_kwargs": _EXTRA_BODY,
        "encoding_format": _DROPPED}


class McpServer(_Renamed, _McpServer):
    """Flink Agents' MCP server (``ResourceName.MCP_SERVER``).

    ``endpoint`` is ``url``, ``timeout`` is ``timeout_s``.
    """

    ARGUMENT_ALIASES: ClassVar[dict[str, str]] = {"endpoint": "url", "timeout": "timeout_s"}


class _NotOffered(Resource):
    """What a Flink Agents resource name this runtime does not offer points at.

    Declaring one is fine (a program declaring every provider and using one still runs);
    building it (its first use) raises a ``ResourceError`` naming it and what to use.
    """

    model_config = ConfigDict(extra="allow")

    def model_post_init(self, context: Any, /) -> None:
        """Refuse to be built.

        Raises:
            ResourceError: always, naming the resource and what to use instead.
        """
        java = self.__pydantic_extra__.get("java_clazz") if self.__pydantic_extra__ else None
        what = (f"a Java resource ({java}) through Flink Agents' Java wrapper" if java
                else "this provider")
        raise ResourceError(
            f"{type(self).__name__}: {what} is not offered here (a Python-only runtime with "
            f"its own adapters); use {self.INSTEAD}")

    INSTEAD: ClassVar[str] = ""


class NotOfferedChatModelConnection(_NotOffered):
    """A Bedrock, watsonx or Java chat model connection."""

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.CHAT_MODEL_CONNECTION
    INSTEAD: ClassVar[str] = (
        "ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION with base_url= for an "
        "OpenAI-compatible endpoint (DashScope's compatible mode, a gateway), "
        "or OLLAMA_CONNECTION / ANTHROPIC_CONNECTION")


class NotOfferedChatModelSetup(_NotOffered):
    """The setup of a chat model connection that is not offered."""

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.CHAT_MODEL
    INSTEAD: ClassVar[str] = ("ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP (or "
                              "OLLAMA_SETUP / ANTHROPIC_SETUP) over the connection used")


class NotOfferedEmbeddingModel(_NotOffered):
    """A Java embedding model connection or setup (Flink Agents' Java wrapper)."""

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.EMBEDDING_MODEL_CONNECTION
    INSTEAD: ClassVar[str] = ("ResourceName.EmbeddingModel.OLLAMA_CONNECTION / "
                              "OPENAI_CONNECTION with their setups")


class NotOfferedVectorStore(_NotOffered):
    """A Java vector store (Elasticsearch, Milvus... through Flink Agents' Java wrapper)."""

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.VECTOR_STORE
    INSTEAD: ClassVar[str] = "ResourceName.VectorStore.CHROMA_VECTOR_STORE"
