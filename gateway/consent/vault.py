"""The token vault's encryption: AES-256-GCM with a key ring, bound to its record (sans-IO).

Rules:

1. **AES-256-GCM** (``cryptography``'s AESGCM): a fresh 96-bit random
   nonce per seal; the tag authenticates the ciphertext and the associated
   data.
2. **Bound to its record.** The associated data names the principal and
   the backend a token belongs to, so a sealed token copied onto another
   person's record (in a store someone can write to) does not open.
3. **A key ring for rotation.** ``consent.vault_key_file`` holds one
   base64 32-byte key per line (``consent.vault_key_env``'s variable the
   same, or separated by commas or spaces); the first seals, every one opens. A sealed
   blob names its key by an 8-byte fingerprint (SHA-256 of the key), so
   opening never tries keys blindly, and a retired key can be removed once
   every record was re-sealed (:meth:`Vault.needs_reseal`).
4. **Typed failures**, never the plaintext or a key in a message.

Layout of a sealed blob: ``b"v1" | fingerprint (8) | nonce (12) | ciphertext+tag``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.errors import GatewayError

__all__ = ["KEY_BYTES", "Vault", "VaultError", "generate_key", "record_binding"]

KEY_BYTES: Final = 32
_VERSION: Final = b"v1"
_FINGERPRINT: Final = 8
_NONCE: Final = 12


class VaultError(GatewayError):
    """A key file that cannot be used, or a sealed token that does not open (rule 4)."""


def generate_key() -> str:
    """A new key, as one line of a vault key file."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def record_binding(principal: str, backend: str) -> bytes:
    """Rule 2's associated data for the token of ``principal`` at ``backend``."""
    return b"consent\x00" + principal.encode() + b"\x00" + backend.encode()


def _fingerprint(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:_FINGERPRINT]


class Vault:
    """Seals and opens tokens with a key ring (module rules).

    Args:
        keys: the ring, newest first (each 32 bytes).

    Raises:
        VaultError: no key, or a key of another length.
    """

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise VaultError("the vault needs at least one key")
        for key in keys:
            if len(key) != KEY_BYTES:
                raise VaultError(f"a vault key must be {KEY_BYTES} bytes, not {len(key)}")
        self._sealing = keys[0]
        self._by_fingerprint = {_fingerprint(k): AESGCM(k) for k in keys}
        self._current = _fingerprint(keys[0])

    @classmethod
    def from_text(cls, text: str, item: str = "vault key file line") -> Vault:
        """A vault from a key file's text (rule 3: one base64 key per line; ``#`` comments).

        Args:
            text: the file's text.
            item: what a message calls one line (``key`` for a variable's words).

        Raises:
            VaultError: a line that is not base64 of 32 bytes (its number, not its text).
        """
        keys: list[bytes] = []
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                key = base64.b64decode(line, validate=True)
            except binascii.Error as exc:
                raise VaultError(f"{item} {number}: not base64") from exc
            if len(key) != KEY_BYTES:
                raise VaultError(f"{item} {number}: {len(key)} bytes, not 32")
            keys.append(key)
        return cls(keys)

    @classmethod
    def from_variable(cls, value: str) -> Vault:
        """A vault from an environment variable's value (rule 3: keys one per line, or
        separated by commas or spaces; no comments).

        Raises:
            VaultError: a word that is not base64 of 32 bytes (its number, not its text).
        """
        return cls.from_text("\n".join(value.replace(",", " ").split()), item="key")

    def seal(self, plaintext: bytes, binding: bytes) -> bytes:
        """Encrypt ``plaintext`` for the record ``binding`` names (rules 1-2)."""
        nonce = os.urandom(_NONCE)
        sealed = self._by_fingerprint[self._current].encrypt(nonce, plaintext, binding)
        return _VERSION + self._current + nonce + sealed

    def open(self, blob: bytes, binding: bytes) -> bytes:
        """Decrypt a sealed blob of the record ``binding`` names.

        Raises:
            VaultError: not a blob of this vault's, its key is not in the ring,
                or it was altered or sealed for another record.
        """
        head = len(_VERSION)
        if len(blob) < head + _FINGERPRINT + _NONCE + 16 or not blob.startswith(_VERSION):
            raise VaultError("not a sealed token")
        fingerprint = blob[head : head + _FINGERPRINT]
        cipher = self._by_fingerprint.get(fingerprint)
        if cipher is None:
            raise VaultError("sealed with a key that is not in the vault key file")
        nonce = blob[head + _FINGERPRINT : head + _FINGERPRINT + _NONCE]
        try:
            return cipher.decrypt(nonce, blob[head + _FINGERPRINT + _NONCE :], binding)
        except InvalidTag as exc:
            raise VaultError("sealed token altered, or sealed for another record") from exc

    def needs_reseal(self, blob: bytes) -> bool:
        """Whether ``blob`` was sealed with a key other than the newest (rule 3)."""
        head = len(_VERSION)
        return blob[head : head + _FINGERPRINT] != self._current
