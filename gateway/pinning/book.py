"""The pin records of every backend, kept in the state store and in step across replicas.

Rules:

1. **The store is the truth; memory is its copy.** :meth:`PinBook.load`
   reads every record once; the gate decides synchronously on the copy
   (the catalog's publish path does not await); what changed is written
   back by compare-and-set, so two replicas that both saw a change store
   it once.
2. **A lost race reloads.** When a compare-and-set fails, another replica
   wrote first: the record is read again and the copy takes the store's.
3. **Decisions travel.** An approval or rejection is written, then
   announced on the ``pins`` channel; every replica (this one included)
   re-reads the record and re-publishes that backend's listing, so hosts
   everywhere get ``list_changed`` with the approved definition.
4. Keys: ``pins:{backend}:{kind}:{name}``; values msgspec JSON of
   :class:`~gateway.pinning.ledger.PinRecord`. Pins never expire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from gateway.pinning.gate import PinKey, pin_key
from gateway.pinning.ledger import PinRecord, approve, reject

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, Callable
    from contextlib import AbstractAsyncContextManager

    from gateway.pinning.definitions import PinKind

__all__ = ["CHANNEL", "PREFIX", "PinBook", "RecordStore", "record_key"]

PREFIX: Final = "pins:"
#: Where decisions are announced (rule 3).
CHANNEL: Final = "pins"
#: Records read at start; a gateway with more pins than this reads the rest lazily never:
#: a bound that no team's catalog comes near (10,000 tools and prompts is large).
LOAD_LIMIT: Final = 1_000_000
_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(PinRecord)


def record_key(key: PinKey) -> str:
    """Rule 4's store key of a pin record."""
    backend, kind, name = key
    return f"{PREFIX}{backend}:{kind}:{name}"


class RecordStore(Protocol):
    """What the book needs of the state store (``gateway.store.api.Store`` is one).

    A protocol of its own, so pinning stays below the store in the layers.
    """

    async def get(self, key: str) -> bytes | None:
        """The value at ``key``."""
        ...

    async def swap(self, key: str, expected: bytes | None, new: bytes | None) -> bool:
        """Compare and set."""
        ...

    async def scan(self, prefix: str, *, limit: int = ...) -> list[tuple[str, bytes]]:
        """Live pairs under ``prefix``."""
        ...

    async def publish(self, channel: str, message: bytes) -> None:
        """Tell every replica."""
        ...

    def subscribe(self, channel: str) -> AbstractAsyncContextManager[AsyncIterable[bytes]]:
        """Messages on ``channel``."""
        ...


class PinBook:
    """Rules 1-3 over one store.

    Args:
        store: the state store.
        on_decided: called with a backend's name after a decision on any
            replica reached this one (re-publish its listing).
    """

    def __init__(self, store: RecordStore, on_decided: Callable[[str], None] | None = None) -> None:
        self._store = store
        self._on_decided = on_decided
        self.records: dict[PinKey, PinRecord] = {}
        # What the store held when this replica last read or wrote each key.
        self._stored: dict[PinKey, bytes] = {}

    async def load(self) -> int:
        """Read every record (rule 1); returns how many."""
        for _, value in await self._store.scan(PREFIX, limit=LOAD_LIMIT):
            record = _DECODER.decode(value)
            key = pin_key(record.backend, record.kind, record.name)
            self.records[key] = record
            self._stored[key] = value
        return len(self.records)

    async def _refresh(self, key: PinKey) -> PinRecord | None:
        value = await self._store.get(record_key(key))
        if value is None:
            self.records.pop(key, None)
            self._stored.pop(key, None)
            return None
        record = _DECODER.decode(value)
        self.records[key] = record
        self._stored[key] = value
        return record

    async def save(self, records: list[PinRecord]) -> None:
        """Write what the gate changed (rules 1-2)."""
        for record in records:
            key = pin_key(record.backend, record.kind, record.name)
            value = _ENCODER.encode(record)
            if await self._store.swap(record_key(key), self._stored.get(key), value):
                self.records[key] = record
                self._stored[key] = value
            else:
                await self._refresh(key)

    def pending(self, backend: str | None = None) -> list[PinRecord]:
        """Records with a change waiting, of one backend or all, sorted by key."""
        return [
            self.records[key]
            for key in sorted(self.records)
            if self.records[key].pending is not None and (backend is None or key[0] == backend)
        ]

    async def decide(
        self, backend: str, kind: PinKind, name: str, *, approved: bool, by: str, now: float
    ) -> PinRecord | None:
        """Approve or reject one item's pending change (rule 3).

        Returns:
            The new record; None when there was nothing pending.
        """
        key = pin_key(backend, kind, name)
        for _ in range(5):  # rule 2: another replica may write in between
            record = await self._refresh(key)
            if record is None or record.pending is None:
                return None
            decided = approve(record, by=by, now=now) if approved else reject(record)
            value = _ENCODER.encode(decided)
            if await self._store.swap(record_key(key), self._stored.get(key), value):
                self.records[key] = decided
                self._stored[key] = value
                await self._store.publish(CHANNEL, record_key(key).encode())
                return decided
        return None

    async def heard(self, message: bytes) -> None:
        """A decision announced on the channel (rule 3): re-read it, tell the owner."""
        text = message.decode(errors="replace")
        if not text.startswith(PREFIX):
            return
        backend, _, rest = text[len(PREFIX) :].partition(":")
        kind, _, name = rest.partition(":")
        if kind not in ("tool", "prompt", "resource_template", "skill"):
            return
        await self._refresh((backend, kind, name))
        if self._on_decided is not None:
            self._on_decided(backend)

    async def run(self) -> None:
        """Listen for decisions of every replica until cancelled (rule 3)."""
        async with self._store.subscribe(CHANNEL) as messages:
            async for message in messages:
                await self.heard(message)
