"""OAuth 2.0 Protected Resource Metadata (RFC 9728) and the ``WWW-Authenticate`` challenges.

The gateway is a resource server only: it tells a host which authorization
servers issue tokens for it and which scopes exist, and the host gets its
token there. The metadata lives at ``/.well-known/oauth-protected-resource``
and, per RFC 9728 section 3.1, at that path suffixed with each protected
resource's own path (``/.well-known/oauth-protected-resource/mcp``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


def resource_paths(server_path: str, extra: Iterable[str] = ()) -> list[str]:
    """Every path the gateway serves MCP on, each a protected resource of its own.

    The one list the metadata paths are made from: profile paths
    (``/mcp/{name}``) are passed as ``extra`` when profiles exist.

    Args:
        server_path: ``server.path``.
        extra: more MCP paths (profiles).

    Returns:
        The paths, without trailing slashes, in order, each once.
    """
    seen: list[str] = []
    for path in (server_path, *extra):
        clean = path.rstrip("/") or "/"
        if clean not in seen:
            seen.append(clean)
    return seen


def metadata_paths(resource_path_list: Iterable[str]) -> dict[str, str]:
    """Well-known metadata path → the resource path it describes.

    The bare well-known path describes the first (main) resource.
    """
    mapping: dict[str, str] = {}
    for path in resource_path_list:
        mapping.setdefault(WELL_KNOWN, path)
        mapping[WELL_KNOWN + ("" if path == "/" else path)] = path
    return mapping


def metadata_document(
    resource: str, authorization_servers: Sequence[str], scopes: Sequence[str]
) -> dict[str, Any]:
    """The RFC 9728 document for one resource.

    Args:
        resource: the resource identifier (its public URL).
        authorization_servers: issuer URLs of the authorization servers.
        scopes: the scopes a host may ask for.

    Returns:
        The JSON object.
    """
    document: dict[str, Any] = {
        "resource": resource,
        "bearer_methods_supported": ["header"],
    }
    if authorization_servers:
        document["authorization_servers"] = list(authorization_servers)
    if scopes:
        document["scopes_supported"] = list(scopes)
    return document


def _quoted(value: str) -> str:
    # Header values are latin-1; a quote or backslash would end the string early.
    return '"' + value.replace("\\", "").replace('"', "'")[:200] + '"'


def challenge(
    *,
    metadata_url: str,
    scopes: Sequence[str],
    error: str | None = None,
    description: str | None = None,
) -> bytes:
    """A ``WWW-Authenticate: Bearer ...`` value (RFC 6750 section 3, RFC 9728 section 5.1).

    Args:
        metadata_url: the resource metadata URL ("" leaves it out).
        scopes: the scopes to ask for ("" leaves ``scope`` out).
        error: ``invalid_token`` when a token was sent and failed,
            ``insufficient_scope`` for a 403; None when no token was sent.
        description: why, for a human (never the token).

    Returns:
        The header value.
    """
    parts = ['Bearer realm="mcp-gateway"']
    if metadata_url:
        parts.append(f"resource_metadata={_quoted(metadata_url)}")
    if scopes:
        parts.append(f"scope={_quoted(' '.join(scopes))}")
    if error:
        parts.append(f"error={_quoted(error)}")
    if description:
        parts.append(f"error_description={_quoted(description)}")
    return ", ".join(parts).encode("latin-1", "replace")
