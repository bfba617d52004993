"""A tiny synchronous MCP server over stdio, shared by the bundled demo backends.

The demos ship inside the gateway package and must run on a bare machine (no
node, no network, no extra dependency), so this module uses only the stdlib and
msgspec, and imports nothing else from the gateway: a demo is a *peer* of the
gateway, and sharing code with it would hide wire-level disagreements.

Rules:

* stdout carries protocol messages only: one JSON-RPC object per line, UTF-8,
  flushed after each. Logs go to stderr, and so does a stray ``print()``,
  because :meth:`DemoServer.run` points ``sys.stdout`` at stderr.
* One peer, one thread: requests are answered in arrival order, and anything a
  handler emits (``notify``, ``log``) is written before that request's answer.
* Notifications are never answered, not even unknown ones (JSON-RPC 2.0 §4.1).
* Protocol failures are JSON-RPC errors; a failing *tool* is a result with
  ``isError: true`` so the model can see it (spec: server/tools, Error Handling).
  Tool arguments that fail the tool's ``inputSchema`` count as a tool failure
  too (2025-11-25, SEP-1303), like the official SDKs do.
* The server is lenient about order: it answers requests that arrive before
  ``initialize``, because demos are for poking at by hand.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import signal
import sys
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Final, TypeVar

import msgspec

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from types import FrameType

__all__ = [
    "DemoServer",
    "Param",
    "PromptArg",
    "ResourceInfo",
    "RpcError",
    "InvalidParams",
    "ToolOutput",
    "ResourceOutput",
    "text",
    "resource_link",
    "embedded_text",
    "message",
    "validate",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "LATEST_PROTOCOL_VERSION",
]

SUPPORTED_PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL_VERSION: Final = "2025-11-25"

# JSON-RPC 2.0 error codes, plus MCP's resource-not-found (server/resources, Error Handling).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002

PAGE_SIZE_ENV: Final = "DEMO_PAGE_SIZE"
LOG_LEVEL_ENV: Final = "DEMO_LOG_LEVEL"
# Spec: CompleteResult.completion.values "Must not exceed 100 items".
MAX_COMPLETION_VALUES: Final = 100
# RFC 5424 severities in increasing order, as logging/setLevel names them.
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

ToolOutput = str | list[dict[str, Any]] | dict[str, Any]
"""What a tool handler returns: text, content blocks, or (with an outputSchema) structured data."""
ResourceOutput = str | bytes
"""What a resource handler returns: text, or bytes sent as a base64 blob."""

_Handler = TypeVar("_Handler", bound="Callable[..., Any]")

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder()
_log = logging.getLogger("gateway.demo")


class RpcError(Exception):
    """A failure the client should see as a JSON-RPC error rather than as a result.

    Handlers raise it when the *request* is wrong; a tool whose work fails
    should raise any other exception instead, which becomes ``isError: true``.

    Args:
        code: the JSON-RPC error code.
        message: one sentence naming what was wrong.
        data: optional machine-readable detail.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        """Return the JSON-RPC ``error`` member for this failure."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class InvalidParams(RpcError):
    """The request's params are wrong (-32602); the message says which and how.

    Args:
        message: one sentence naming the offending parameter.
    """

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_PARAMS, message)


# --- content helpers ---------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    """Build a ``text`` content block, the form every client can show."""
    return {"type": "text", "text": value}


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
) -> dict[str, Any]:
    """Build a ``resource_link`` content block, pointing at a resource instead of inlining it.

    Args:
        uri: the resource the client can later ``resources/read``.
        name: the resource's programmatic name.
        title: a display name.
        description: a hint for the model.
        mime_type: the resource's MIME type, when known.

    Returns:
        The content block.
    """
    block: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    if title is not None:
        block["title"] = title
    if description is not None:
        block["description"] = description
    if mime_type is not None:
        block["mimeType"] = mime_type
    return block


def embedded_text(uri: str, value: str, *, mime_type: str) -> dict[str, Any]:
    """Build a ``resource`` content block that carries a text resource inline.

    Args:
        uri: the resource's URI, so the client can tell where the text came from.
        value: the resource's text.
        mime_type: the text's MIME type.

    Returns:
        The content block.
    """
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": value}}


def message(role: str, content: dict[str, Any]) -> dict[str, Any]:
    """Build one prompt message (``role`` is ``user`` or ``assistant``)."""
    return {"role": role, "content": content}


# --- a JSON Schema subset ----------------------------------------------------------------

_PYTHON_TYPES: Final[dict[str, type | tuple[type, ...]]] = {
    "string": str,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    for name, python_type in _PYTHON_TYPES.items():
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def _has_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool):
        return expected == "boolean"
    if expected == "number":
        return isinstance(value, int | float)
    if expected == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    python_type = _PYTHON_TYPES.get(expected)
    return python_type is not None and isinstance(value, python_type)


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def validate(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Check ``value`` against the JSON Schema subset the demos use.

    The demos cannot depend on ``jsonschema``, and their schemas use only
    ``type``, ``properties``, ``required``, ``additionalProperties: false``,
    ``items``, ``enum`` and the length/size bounds, so this covers exactly that.

    Args:
        value: decoded JSON.
        schema: the schema to check against.
        path: where ``value`` sits, for messages (empty at the top).

    Returns:
        One line per problem, each naming its place; empty when ``value`` conforms.
    """
    where = path or "value"
    expected = schema.get("type")
    if expected is not None:
        options = expected if isinstance(expected, list) else [expected]
        if not any(_has_type(value, option) for option in options):
            return [f"{where}: expected {' or '.join(options)}, got {_json_type(value)}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: must be one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{where}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']} characters")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: more than {schema['maxItems']} items")
        if "items" in schema:
            for index, item in enumerate(value):
                problems.extend(validate(item, schema["items"], _child(path, index)))
    elif isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        problems.extend(
            f"{_child(path, name)}: required"
            for name in schema.get("required", ())
            if name not in value
        )
        for key, item in value.items():
            if key in properties:
                problems.extend(validate(item, properties[key], _child(path, key)))
            elif schema.get("additionalProperties", True) is False:
                problems.append(f"{_child(path, key)}: not an accepted argument")
    return problems


# --- declarations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One tool argument: it becomes a property of the tool's ``inputSchema``.

    Args:
        name: the argument name, also the handler's keyword parameter.
        schema: the JSON Schema of the value, e.g. ``{"type": "string"}``.
        title: a display name.
        description: a hint for the model.
        required: whether the call must supply it.
    """

    name: str
    schema: dict[str, Any]
    title: str
    description: str
    required: bool = True


@dataclass(frozen=True)
class PromptArg:
    """One prompt argument (always a string on the wire).

    Args:
        name: the argument name, also the handler's keyword parameter.
        title: a display name.
        description: a hint for the user filling it in.
        required: whether ``prompts/get`` must supply it.
    """

    name: str
    title: str
    description: str
    required: bool = True

    def to_wire(self) -> dict[str, Any]:
        """Return the ``PromptArgument`` object for ``prompts/list``."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "required": self.required,
        }


@dataclass(frozen=True, kw_only=True)
class ResourceInfo:
    """What ``resources/list`` says about one concrete resource.

    Args:
        uri: the resource's URI.
        name: its programmatic name.
        title: a display name.
        description: a hint for the model.
        mime_type: the MIME type of its contents.
    """

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """Return the ``Resource`` object for ``resources/list``."""
        wire: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.title is not None:
            wire["title"] = self.title
        if self.description is not None:
            wire["description"] = self.description
        if self.mime_type is not None:
            wire["mimeType"] = self.mime_type
        return wire


@dataclass(frozen=True, kw_only=True)
class _Tool:
    name: str
    title: str
    description: str
    params: tuple[Param, ...]
    annotations: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    handler: Callable[..., ToolOutput]

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                p.name: {**p.schema, "title": p.title, "description": p.description}
                for p in self.params
            },
            "additionalProperties": False,
        }
        required = [p.name for p in self.params if p.required]
        if required:
            schema["required"] = required
        return schema

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema(),
        }
        if self.output_schema is not None:
            wire["outputSchema"] = self.output_schema
        if self.annotations is not None:
            wire["annotations"] = {"title": self.title, **self.annotations}
        return wire


@dataclass(frozen=True, kw_only=True)
class _Resource:
    info: ResourceInfo
    handler: Callable[[], ResourceOutput]


@dataclass(frozen=True, kw_only=True)
class _Template:
    uri_template: str
    name: str
    title: str
    description: str
    mime_type: str
    variables: tuple[str, ...]
    pattern: re.Pattern[str]
    handler: Callable[..., ResourceOutput]
    lister: Callable[[], Iterable[ResourceInfo]] | None

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        return {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}

    def to_wire(self) -> dict[str, Any]:
        return {
            "uriTemplate": self.uri_template,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
        }


@dataclass(frozen=True, kw_only=True)
class _Prompt:
    name: str
    title: str
    description: str
    arguments: tuple[PromptArg, ...]
    handler: Callable[..., list[dict[str, Any]]]

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "arguments": [argument.to_wire() for argument in self.arguments],
        }


_TEMPLATE_VARIABLE: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _compile_template(uri_template: str) -> tuple[tuple[str, ...], re.Pattern[str]]:
    """Compile a level-1 RFC 6570 template; each variable matches one path segment."""
    variables: list[str] = []
    parts: list[str] = []
    position = 0
    for found in _TEMPLATE_VARIABLE.finditer(uri_template):
        parts.append(re.escape(uri_template[position : found.start()]))
        variables.append(found.group(1))
        parts.append(f"(?P<{found.group(1)}>[^/?#]+)")
        position = found.end()
    parts.append(re.escape(uri_template[position:]))
    return tuple(variables), re.compile("".join(parts))


def _page_size_from_env() -> int:
    raw = os.environ.get(PAGE_SIZE_ENV, "").strip() or "0"
    try:
        size = int(raw)
    except ValueError:
        raise ValueError(f"{PAGE_SIZE_ENV} must be a whole number, got {raw!r}") from None
    if size < 0:
        raise ValueError(f"{PAGE_SIZE_ENV} must not be negative, got {size}")
    return size


def _field(
    params: Mapping[str, Any], key: str, kind: type[str | dict[str, Any]], where: str = "params"
) -> Any:
    """Return ``params[key]``, or raise -32602 naming the field if it is missing or mistyped."""
    if key not in params:
        raise InvalidParams(f"Missing required parameter: {where}.{key}")
    value = params[key]
    if not isinstance(value, kind):
        expected = "string" if kind is str else "object"
        raise InvalidParams(f"Invalid parameter {where}.{key}: expected {expected}")
    return value


def _optional_object(params: Mapping[str, Any], key: str, where: str = "params") -> dict[str, Any]:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParams(f"Invalid parameter {where}.{key}: expected object")
    return value


def _string_map(params: Mapping[str, Any], key: str, where: str = "params") -> dict[str, str]:
    values = _optional_object(params, key, where)
    for name, value in values.items():
        if not isinstance(value, str):
            raise InvalidParams(f"Invalid parameter {where}.{key}.{name}: expected string")
    return values


# --- the server --------------------------------------------------------------------------


class DemoServer:
    """A declarative registry of tools, resources and prompts, served over stdio.

    Demos declare what they offer with the decorators and call :meth:`run`;
    everything about JSON-RPC framing, validation, pagination and errors lives
    here once, so each demo reads as a list of its features.

    Args:
        name: ``serverInfo.name``.
        version: ``serverInfo.version``.
        instructions: the one-sentence ``instructions`` returned by ``initialize``.
        title: ``serverInfo.title``, a display name.
        page_size: items per list page; ``None`` reads ``DEMO_PAGE_SIZE``
            (default 0, meaning everything on one page).
        resources_list_changed: whether the demo's resource list changes at
            run time, so ``notify_resources_changed`` is worth announcing.

    Raises:
        ValueError: ``DEMO_PAGE_SIZE`` is not a whole number >= 0.
    """

    def __init__(
        self,
        name: str,
        version: str,
        *,
        instructions: str,
        title: str | None = None,
        page_size: int | None = None,
        resources_list_changed: bool = False,
    ) -> None:
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.page_size = _page_size_from_env() if page_size is None else page_size
        self.resources_list_changed = resources_list_changed
        self.protocol_version: str | None = None
        self.log_level: str | None = None
        self._out: BinaryIO | None = None
        self._tools: dict[str, _Tool] = {}
        self._resources: dict[str, _Resource] = {}
        self._templates: dict[str, _Template] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._completers: dict[tuple[str, str, str], Callable[[dict[str, str]], Iterable[str]]] = {}
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "initialize": self._initialize,
            "ping": lambda params: {},
            "logging/setLevel": self._set_level,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "resources/list": self._list_resources,
            "resources/read": self._read_resource,
            "resources/templates/list": self._list_templates,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "completion/complete": self._complete,
        }

    # -- declaration ----------------------------------------------------------------------

    def tool(
        self,
        *,
        title: str,
        description: str,
        params: Iterable[Param] = (),
        annotations: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> Callable[[_Handler], _Handler]:
        """Register the decorated function as a tool, named after it unless ``name`` is given.

        The handler is called with the validated arguments as keywords. It
        returns :data:`ToolOutput`; a ``dict`` is structured content and needs
        ``output_schema``. Raising any exception other than :class:`RpcError`
        makes the call a tool failure (``isError: true``) carrying its message.

        Args:
            title: a display name.
            description: what the tool is for, for the model.
            params: the arguments, in order.
            annotations: ``ToolAnnotations`` hints (``readOnlyHint`` and so on).
            output_schema: JSON Schema of the structured result, if any.
            name: the wire name, when it differs from the function's.

        Returns:
            A decorator that registers the handler and returns it unchanged.
        """

        def register(handler: _Handler) -> _Handler:
            tool_name = name or handler.__name__
            self._tools[tool_name] = _Tool(
                name=tool_name,
                title=title,
                description=description,
                params=tuple(params),
                annotations=annotations,
                output_schema=output_schema,
                handler=handler,
            )
            return handler

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str,
        title: str,
        description: str,
        mime_type: str,
    ) -> Callable[[_Handler], _Handler]:
        """Register the decorated zero-argument function as the reader of one fixed resource.

        Args:
            uri: the resource's URI.
            name: its programmatic name.
            title: a display name.
            description: a hint for the model.
            mime_type: the MIME type of what the handler returns.

        Returns:
            A decorator that registers the handler and returns it unchanged.
        """
        info = ResourceInfo(
            uri=uri, name=name, title=title, description=description, mime_type=mime_type
        )

        def register(handler: _Handler) -> _Handler:
            self._resources[uri] = _Resource(info=info, handler=handler)
            return handler

        return register

    def template(
        self,
        uri_template: str,
        *,
        name: str,
        title: str,
        description: str,
        mime_type: str,
        lister: Callable[[], Iterable[ResourceInfo]] | None = None,
    ) -> Callable[[_Handler], _Handler]:
        """Register the decorated function as the reader of every URI matching a template.

        Each ``{variable}`` matches one percent-encoded path segment and is
        passed, decoded, as a keyword. The handler raises ``LookupError``
        (``KeyError`` will do) when nothing exists there, which becomes
        -32002 ``Resource not found``.

        Args:
            uri_template: a level-1 RFC 6570 template, e.g. ``notes://note/{title}``.
            name: the template's programmatic name.
            title: a display name.
            description: a hint for the model.
            mime_type: the MIME type of what the handler returns.
            lister: returns the concrete resources that exist now, so
                ``resources/list`` can include them.

        Returns:
            A decorator that registers the handler and returns it unchanged.
        """
        variables, pattern = _compile_template(uri_template)

        def register(handler: _Handler) -> _Handler:
            self._templates[uri_template] = _Template(
                uri_template=uri_template,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                variables=variables,
                pattern=pattern,
                handler=handler,
                lister=lister,
            )
            return handler

        return register

    def prompt(
        self,
        *,
        title: str,
        description: str,
        arguments: Iterable[PromptArg] = (),
        name: str | None = None,
    ) -> Callable[[_Handler], _Handler]:
        """Register the decorated function as a prompt, named after it unless ``name`` is given.

        The handler gets the supplied arguments as keywords and returns the
        messages (see :func:`message`). It raises :class:`InvalidParams` when an
        argument names something that does not exist.

        Args:
            title: a display name.
            description: what the prompt is for.
            arguments: its arguments, in order.
            name: the wire name, when it differs from the function's.

        Returns:
            A decorator that registers the handler and returns it unchanged.
        """

        def register(handler: _Handler) -> _Handler:
            prompt_name = name or handler.__name__
            self._prompts[prompt_name] = _Prompt(
                name=prompt_name,
                title=title,
                description=description,
                arguments=tuple(arguments),
                handler=handler,
            )
            return handler

        return register

    def completion(
        self,
        argument: str,
        *,
        prompt: str | None = None,
        template: str | None = None,
    ) -> Callable[[_Handler], _Handler]:
        """Register the decorated function as the completer of one prompt or template argument.

        The completer gets the already-resolved arguments (``context.arguments``)
        and returns every candidate; the server keeps those that start with what
        the user typed (ignoring case) and caps them at 100 as the spec requires.

        Args:
            argument: the argument (or template variable) being completed.
            prompt: the prompt's name, for ``ref/prompt``.
            template: the URI template, for ``ref/resource``.

        Returns:
            A decorator that registers the completer and returns it unchanged.

        Raises:
            ValueError: not exactly one of ``prompt`` and ``template`` is given,
                or it is not registered yet, or has no such argument.
        """
        if (prompt is None) == (template is None):
            raise ValueError("give exactly one of prompt= and template=")
        if prompt is not None:
            if prompt not in self._prompts:
                raise ValueError(f"no prompt {prompt!r} registered yet")
            names = [a.name for a in self._prompts[prompt].arguments]
            key = ("ref/prompt", prompt, argument)
        else:
            assert template is not None
            if template not in self._templates:
                raise ValueError(f"no template {template!r} registered yet")
            names = list(self._templates[template].variables)
            key = ("ref/resource", template, argument)
        if argument not in names:
            raise ValueError(f"{key[1]!r} has no argument {argument!r}")

        def register(handler: _Handler) -> _Handler:
            self._completers[key] = handler
            return handler

        return register

    # -- server-initiated messages --------------------------------------------------------

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification now, ahead of the answer to the request being handled.

        Dropped until ``initialize`` has been answered, since a client may not
        expect anything from the server before that.

        Args:
            method: the notification method.
            params: its params, if any.
        """
        if self._out is None or self.protocol_version is None:
            return
        note: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            note["params"] = params
        self._write(note)

    def notify_resources_changed(self) -> None:
        """Tell the client the resource list changed, if the server said it would."""
        if self.resources_list_changed:
            self.notify("notifications/resources/list_changed")

    def log(self, level: str, data: Any) -> None:
        """Send a ``notifications/message`` if the client asked for this level or above.

        Nothing is sent until the client calls ``logging/setLevel``: the spec
        lets a server choose, and silence keeps the demos' streams predictable.

        Args:
            level: an RFC 5424 level name (see ``LOG_LEVELS``).
            data: any JSON value to log.
        """
        if self.log_level is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        self.notify("notifications/message", {"level": level, "logger": self.name, "data": data})

    # -- request handlers -----------------------------------------------------------------

    def _capabilities(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"logging": {}}
        if self._tools:
            capabilities["tools"] = {"listChanged": False}
        if self._resources or self._templates:
            capabilities["resources"] = {
                "listChanged": self.resources_list_changed,
                "subscribe": False,
            }
        if self._prompts:
            capabilities["prompts"] = {"listChanged": False}
        if self._completers:
            capabilities["completions"] = {}
        return capabilities

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = _field(params, "protocolVersion", str)
        _field(params, "capabilities", dict)
        client_info = _field(params, "clientInfo", dict)
        _field(client_info, "name", str, "params.clientInfo")
        _field(client_info, "version", str, "params.clientInfo")
        # Lifecycle, Version Negotiation: echo a version we support, else offer our latest.
        # DEMO_PROTOCOL_VERSION pins the answer, to stand in for an older server.
        pinned = os.environ.get("DEMO_PROTOCOL_VERSION", "")
        negotiated = (
            pinned
            if pinned
            else requested
            if requested in SUPPORTED_PROTOCOL_VERSIONS
            else LATEST_PROTOCOL_VERSION
        )
        self.protocol_version = negotiated
        _log.info(
            "demo.initialize client=%s requested=%s negotiated=%s",
            client_info["name"],
            requested,
            negotiated,
        )
        server_info: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            server_info["title"] = self.title
        return {
            "protocolVersion": negotiated,
            "capabilities": self._capabilities(),
            "serverInfo": server_info,
            "instructions": self.instructions,
        }

    def _set_level(self, params: dict[str, Any]) -> dict[str, Any]:
        level = _field(params, "level", str)
        if level not in LOG_LEVELS:
            raise InvalidParams(
                f"Invalid parameter params.level: {level!r} is not one of {', '.join(LOG_LEVELS)}"
            )
        self.log_level = level
        return {}

    def _require(self, capability: str) -> None:
        if capability not in self._capabilities():
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: this server has no {capability}")

    def _page(
        self, kind: str, items: list[dict[str, Any]], params: dict[str, Any]
    ) -> dict[str, Any]:
        """Cut one page out of ``items``; the cursor is opaque to clients (spec: Pagination)."""
        start = 0
        if params.get("cursor") is not None:
            start = self._decode_cursor(kind, _field(params, "cursor", str))
        end = len(items) if self.page_size == 0 else start + self.page_size
        page: dict[str, Any] = {kind: items[start:end]}
        if end < len(items):
            page["nextCursor"] = self._encode_cursor(kind, end)
        return page

    @staticmethod
    def _encode_cursor(kind: str, offset: int) -> str:
        return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")

    @staticmethod
    def _decode_cursor(kind: str, cursor: str) -> int:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raw = ""
        found = re.fullmatch(rf"{re.escape(kind)}:(0|[1-9][0-9]{{0,8}})", raw)
        if found is None:
            raise InvalidParams(f"Invalid parameter params.cursor: unknown cursor {cursor!r}")
        # A cursor past the end is fine: the list shrank since it was issued.
        return int(found.group(1))

    def _list_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("tools")
        return self._page("tools", [t.to_wire() for t in self._tools.values()], params)

    def _call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("tools")
        name = _field(params, "name", str)
        tool = self._tools.get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name}")
        arguments = _optional_object(params, "arguments")
        problems = validate(arguments, tool.input_schema())
        if problems:
            return _tool_failure(f"Invalid arguments for tool {name}: {'; '.join(problems)}")
        try:
            output = tool.handler(**arguments)
            return _tool_result(tool, output)
        except RpcError:
            raise
        except Exception as exc:
            _log.info("demo.tool.failed tool=%s error=%r", name, exc)
            return _tool_failure(str(exc) or type(exc).__name__)

    def _listed_resources(self) -> list[dict[str, Any]]:
        listed = [r.info.to_wire() for r in self._resources.values()]
        for template in self._templates.values():
            if template.lister is not None:
                listed.extend(info.to_wire() for info in template.lister())
        return listed

    def _list_resources(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("resources")
        return self._page("resources", self._listed_resources(), params)

    def _list_templates(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("resources")
        templates = [t.to_wire() for t in self._templates.values()]
        return self._page("resourceTemplates", templates, params)

    def _read_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("resources")
        uri = _field(params, "uri", str)
        fixed = self._resources.get(uri)
        if fixed is not None:
            assert fixed.info.mime_type is not None
            return {"contents": [_contents(uri, fixed.info.mime_type, fixed.handler())]}
        for template in self._templates.values():
            variables = template.match(uri)
            if variables is None:
                continue
            try:
                output = template.handler(**variables)
            except LookupError:
                break
            return {"contents": [_contents(uri, template.mime_type, output)]}
        raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})

    def _list_prompts(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("prompts")
        return self._page("prompts", [p.to_wire() for p in self._prompts.values()], params)

    def _get_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("prompts")
        name = _field(params, "name", str)
        prompt = self._prompts.get(name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {name}")
        arguments = _string_map(params, "arguments")
        accepted = {a.name for a in prompt.arguments}
        for key in arguments:
            if key not in accepted:
                raise InvalidParams(f"Unknown argument for prompt {name}: {key}")
        for argument in prompt.arguments:
            if argument.required and argument.name not in arguments:
                raise InvalidParams(f"Missing required argument for prompt {name}: {argument.name}")
        return {"description": prompt.description, "messages": prompt.handler(**arguments)}

    def _complete(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require("completions")
        ref = _field(params, "ref", dict)
        ref_type = ref.get("type")
        if ref_type == "ref/prompt":
            target = _field(ref, "name", str, "params.ref")
            if target not in self._prompts:
                raise InvalidParams(f"Unknown prompt: {target}")
        elif ref_type == "ref/resource":
            target = _field(ref, "uri", str, "params.ref")
            if target not in self._templates:
                raise InvalidParams(f"Unknown resource template: {target}")
        else:
            raise InvalidParams(
                "Invalid parameter params.ref.type: expected 'ref/prompt' or 'ref/resource'"
            )
        argument = _field(params, "argument", dict)
        argument_name = _field(argument, "name", str, "params.argument")
        typed = _field(argument, "value", str, "params.argument").casefold()
        context = _string_map(_optional_object(params, "context"), "arguments", "params.context")
        completer = self._completers.get((ref_type, target, argument_name))
        candidates = [] if completer is None else list(completer(context))
        matches = [value for value in candidates if value.casefold().startswith(typed)]
        return {
            "completion": {
                "values": matches[:MAX_COMPLETION_VALUES],
                "total": len(matches),
                "hasMore": len(matches) > MAX_COMPLETION_VALUES,
            }
        }

    # -- the wire -------------------------------------------------------------------------

    def handle_line(self, line: bytes) -> Any:
        """Handle one received line and return what to send back, or ``None``.

        Kept apart from the I/O so a demo's behaviour can be checked without a
        process; the answer is an object for one message, a list for a batch.

        Args:
            line: one line from stdin, without its newline.

        Returns:
            The JSON-RPC response(s) to write, or ``None`` when nothing is owed.
        """
        try:
            received = _DECODER.decode(line)
        except msgspec.DecodeError as exc:
            return _error_response(None, RpcError(PARSE_ERROR, f"Parse error: {exc}"))
        if isinstance(received, list):
            # Batches existed only in 2025-03-26; later revisions removed them.
            if self.protocol_version != "2025-03-26" or not received:
                return _error_response(
                    None, RpcError(INVALID_REQUEST, "Invalid request: batches are not supported")
                )
            answers = [self.handle_message(item) for item in received]
            return [answer for answer in answers if answer is not None] or None
        return self.handle_message(received)

    def handle_message(self, received: Any) -> dict[str, Any] | None:
        """Dispatch one decoded JSON-RPC message.

        Args:
            received: the decoded message.

        Returns:
            The response for a request, or ``None`` for a notification or a
            stray response (the demos never send requests, so none is expected).
        """
        if not isinstance(received, dict) or received.get("jsonrpc") != "2.0":
            return _error_response(
                None, RpcError(INVALID_REQUEST, "Invalid request: expected a JSON-RPC 2.0 object")
            )
        if "method" not in received:
            _log.warning("demo.response.unexpected id=%r", received.get("id"))
            return None
        method = received["method"]
        if "id" not in received:
            _log.debug("demo.notification.ignored method=%r", method)
            return None
        request_id = received["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, int | float | str):
            return _error_response(
                None, RpcError(INVALID_REQUEST, "Invalid request: id must be a string or a number")
            )
        if not isinstance(method, str):
            return _error_response(
                request_id, RpcError(INVALID_REQUEST, "Invalid request: method must be a string")
            )
        handler = self._methods.get(method)
        if handler is None:
            return _error_response(
                request_id, RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            )
        params = received.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error_response(request_id, InvalidParams("Invalid params: expected an object"))
        try:
            result = handler(params)
        except RpcError as exc:
            return _error_response(request_id, exc)
        except Exception as exc:
            _log.exception("demo.request.failed method=%s", method)
            return _error_response(request_id, RpcError(INTERNAL_ERROR, f"Internal error: {exc}"))
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _write(self, outgoing: Any) -> None:
        assert self._out is not None
        self._out.write(_ENCODER.encode(outgoing) + b"\n")
        self._out.flush()

    def serve(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        """Answer messages from ``stdin`` on ``stdout`` until ``stdin`` reaches EOF.

        Args:
            stdin: where newline-delimited JSON-RPC arrives.
            stdout: where answers and notifications go, one per line.
        """
        self._out = stdout
        for raw in iter(stdin.readline, b""):
            # Tolerate CRLF and blank lines from hand-typed input; JSON ignores the whitespace.
            line = raw.strip()
            if not line:
                continue
            answer = self.handle_line(line)
            if answer is not None:
                self._write(answer)

    def run(self) -> int:
        """Serve on this process's stdin/stdout until EOF or SIGTERM.

        Returns:
            The exit status: 0 for every clean ending (EOF, SIGTERM, SIGINT, or
            the client closing our stdout).
        """
        logging.basicConfig(
            stream=sys.stderr,
            level=os.environ.get(LOG_LEVEL_ENV, "INFO").upper(),
            format="%(asctime)s %(levelname)s %(message)s",
        )
        stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
        # A stray print() must not corrupt the protocol stream.
        sys.stdout = sys.stderr
        signal.signal(signal.SIGTERM, _on_sigterm)
        _log.info("demo.started server=%s pid=%d", self.name, os.getpid())
        try:
            self.serve(stdin, stdout)
            _log.info("demo.stopped server=%s reason=eof", self.name)
        except KeyboardInterrupt:
            _log.info("demo.stopped server=%s reason=sigint", self.name)
        except BrokenPipeError:
            _log.info("demo.stopped server=%s reason=stdout-closed", self.name)
            # Point stdout at devnull so the interpreter's final flush cannot fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
            os.close(devnull)
        return 0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Exit right here rather than raise: an exception raised from a signal
    # handler can land anywhere (inside a logging or I/O lock), and a demo
    # that hangs on SIGTERM costs its gateway the SIGKILL grace period. Our
    # state is in memory (or already written per note), so there is nothing
    # left to flush but this line.
    os.write(2, b"demo.stopped reason=sigterm\n")
    os._exit(0)


def _tool_failure(reason: str) -> dict[str, Any]:
    return {"content": [text(reason)], "isError": True}


def _tool_result(tool: _Tool, output: ToolOutput) -> dict[str, Any]:
    if isinstance(output, str):
        return {"content": [text(output)], "isError": False}
    if isinstance(output, list):
        return {"content": output, "isError": False}
    if tool.output_schema is None:
        raise TypeError(f"tool {tool.name} returned structured content without an outputSchema")
    problems = validate(output, tool.output_schema)
    if problems:
        raise ValueError(f"tool {tool.name} broke its outputSchema: {'; '.join(problems)}")
    # Spec: a tool returning structured content SHOULD also return it serialised as text.
    return {
        "content": [text(_ENCODER.encode(output).decode())],
        "structuredContent": output,
        "isError": False,
    }


def _contents(uri: str, mime_type: str, output: ResourceOutput) -> dict[str, Any]:
    if isinstance(output, bytes):
        return {"uri": uri, "mimeType": mime_type, "blob": base64.b64encode(output).decode()}
    return {"uri": uri, "mimeType": mime_type, "text": output}


def _error_response(request_id: Any, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()}
