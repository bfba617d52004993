"""A signed baseline file of approved pins, for a team to keep in git (sans-IO).

Rules:

1. **Full definitions.** A baseline holds each approved definition, not
   only its digest, so a gateway that imports it can serve the pinned
   definition under ``hold`` before it ever saw the backend.
2. **Portable identity.** A backend is named by what stays the same across
   machines: its configured name, its ``serverInfo.name``, and its URL or
   the base name of its command; never absolute paths, arguments or
   environment.
3. **Ed25519 signatures** (``cryptography``): ``pinning.signing_key_file``
   holds a PEM Ed25519 private key, which signs on export and (through its
   public half) verifies on import; a file with only the public key
   verifies. The signature covers the RFC 8785 canonical form of the
   document without its ``signature`` member, so reformatting the YAML or
   JSON a person reads does not break it, and any edit of a value does.
4. **Import is all or nothing**: a document that does not parse, whose
   signature does not verify, or whose digests do not match their
   definitions is refused as a whole with a typed error.
"""

from __future__ import annotations

import base64
from typing import Any, Final

import msgspec
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gateway.errors import GatewayError
from gateway.pinning.definitions import PinKind, digest

__all__ = [
    "BASELINE_VERSION",
    "BackendIdentity",
    "Baseline",
    "BaselineError",
    "BaselineItem",
    "decode_baseline",
    "encode_baseline",
    "load_signing_key",
]

BASELINE_VERSION: Final = 1


class BaselineError(GatewayError):
    """A baseline file that cannot be trusted or read (rule 4)."""


class BackendIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """Rule 2: who a backend is, portably."""

    name: str
    server_name: str = ""
    url: str = ""
    command: str = ""


class BaselineItem(msgspec.Struct, frozen=True, kw_only=True):
    """One approved definition."""

    backend: str
    kind: PinKind
    name: str
    digest: str
    definition: dict[str, Any]


class Baseline(msgspec.Struct, frozen=True, kw_only=True):
    """The document: version, backends, items, and the signature over the rest."""

    version: int = BASELINE_VERSION
    backends: list[BackendIdentity] = msgspec.field(default_factory=list)
    items: list[BaselineItem] = msgspec.field(default_factory=list)
    signature: str = ""


def load_signing_key(pem: bytes) -> Ed25519PrivateKey | Ed25519PublicKey:
    """The key in ``pinning.signing_key_file``'s text (rule 3).

    Args:
        pem: a PEM Ed25519 private key, or a PEM public key (verify only).

    Returns:
        The key.

    Raises:
        BaselineError: the text is no Ed25519 key.
    """
    try:
        private = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        try:
            public = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError) as exc:
            raise BaselineError("signing key: not a PEM Ed25519 key") from exc
        if not isinstance(public, Ed25519PublicKey):
            raise BaselineError("signing key: not an Ed25519 key") from None
        return public
    if not isinstance(private, Ed25519PrivateKey):
        raise BaselineError("signing key: not an Ed25519 key")
    return private


def _signed_bytes(document: Baseline) -> bytes:
    body = msgspec.to_builtins(msgspec.structs.replace(document, signature=""))
    del body["signature"]
    return rfc8785.dumps(body)


def encode_baseline(document: Baseline, key: Ed25519PrivateKey) -> bytes:
    """Sign ``document`` and encode it as indented JSON (rule 3).

    Args:
        document: the approved pins; its ``signature`` is ignored.
        key: the private signing key.

    Returns:
        The file's bytes.
    """
    unsigned = msgspec.structs.replace(document, signature="")
    signature = base64.b64encode(key.sign(_signed_bytes(unsigned))).decode()
    signed = msgspec.structs.replace(unsigned, signature="ed25519:" + signature)
    return msgspec.json.format(msgspec.json.encode(signed), indent=2) + b"\n"


def decode_baseline(data: bytes, key: Ed25519PrivateKey | Ed25519PublicKey) -> Baseline:
    """Parse and verify a baseline file (rule 4).

    Args:
        data: the file's bytes.
        key: the signing key (its public half verifies).

    Returns:
        The document.

    Raises:
        BaselineError: unparsable, another version, a bad signature, or an
            item whose digest is not its definition's.
    """
    try:
        document = msgspec.json.decode(data, type=Baseline)
    except msgspec.DecodeError as exc:
        raise BaselineError(f"not a baseline: {exc}") from exc
    if document.version != BASELINE_VERSION:
        raise BaselineError(f"baseline version {document.version}: this gateway reads version 1")
    scheme, _, encoded = document.signature.partition(":")
    if scheme != "ed25519" or not encoded:
        raise BaselineError("baseline is not signed (expected an ed25519 signature)")
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    try:
        public.verify(base64.b64decode(encoded, validate=True), _signed_bytes(document))
    except (InvalidSignature, ValueError) as exc:
        raise BaselineError("baseline signature does not verify with the signing key") from exc
    for item in document.items:
        if digest(item.definition) != item.digest:
            raise BaselineError(f"{item.backend} {item.kind} {item.name}: digest does not match")
    return document
