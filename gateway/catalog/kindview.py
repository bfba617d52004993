"""One kind's public items, sorted by key, as a persistent chunked sequence.

Rules / theory of operation:

1. A ``KindView`` is immutable. ``edited`` returns a new view that shares
   every chunk the edit did not touch with the old one, so a snapshot taken
   before a change and the one after it hold the same chunk objects for the
   rest of the catalog (issue 17's scale row: one backend's change costs
   that backend, not the catalog).
2. The entries are cut into chunks of at most ``CHUNK_SIZE`` entries; every
   chunk but a lone one holds at least ``CHUNK_MIN`` (an edit that leaves a
   chunk smaller merges it with a neighbour), so the chunk index stays
   about ``N / CHUNK_SIZE`` long however the view was edited.
3. Chunk ``i`` holds exactly the keys in ``[firsts[i], firsts[i + 1])``:
   a key is found, and an edit placed, by one bisection over the chunks'
   first keys, then the chunk's own dict or keys.
4. An edit copies the chunk index (``O(N / CHUNK_SIZE)``, C-level slice
   copies) and rebuilds only the chunks that hold an edited key. A
   prefixed backend's keys are contiguous in key order, so its change
   touches one or a few chunks.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

#: Most entries in one chunk: an edit rebuilds a chunk (a dict and two
#: tuples) of about this size, and the chunk index is ``N / CHUNK_SIZE`` long
#: (about 200 at 100,000 tools); at 512 both stay small next to encoding a
#: 100-tool backend's items (docs/performance.md, "The catalog rows").
CHUNK_SIZE: Final = 512
#: Fewest entries in a chunk that is not alone (rule 2).
CHUNK_MIN: Final = CHUNK_SIZE // 4
#: Keys a repr shows: a view can hold 100,000.
REPR_KEYS: Final = 8

_key: Final = attrgetter("key")
_entries: Final = attrgetter("entries")
_encoded: Final = attrgetter("encoded")
_backend: Final = attrgetter("backend")


@dataclass(frozen=True, slots=True)
class Entry:
    """One public item: where it came from and its encoded public form."""

    key: str
    backend: str
    original: str
    encoded: bytes


class _Chunk:
    """A sorted run of entries with its keys and a dict by key (never empty).

    Immutable once built; the two figures the gauges read after every change
    (bytes of encoded items, items per backend) are computed on first use
    and kept with the chunk, which later snapshots share.
    """

    __slots__ = ("_counts", "_size", "by_key", "entries", "first", "keys", "length")

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries: tuple[Entry, ...] = tuple(entries)
        self.keys: tuple[str, ...] = tuple(map(_key, self.entries))
        self.by_key: dict[str, Entry] = dict(zip(self.keys, self.entries, strict=True))
        self.first: str = self.keys[0]
        self.length: int = len(self.keys)
        self._size: int | None = None
        self._counts: Counter[str] | None = None

    def size(self) -> int:
        """The bytes of the chunk's encoded items."""
        if self._size is None:
            self._size = sum(map(len, map(_encoded, self.entries)))
        return self._size

    def counts(self) -> Counter[str]:
        """The chunk's items per backend."""
        if self._counts is None:
            self._counts = Counter(map(_backend, self.entries))
        return self._counts


_chunk: Final = _Chunk


class _Index:
    """A chunk index being built: the chunks and their columns, side by side.

    Kept as columns so that an edit copies the untouched runs of the old
    view's columns with slices (C-level) instead of reading each chunk's
    attributes again (rule 4).
    """

    __slots__ = ("chunks", "dicts", "firsts", "lengths")

    def __init__(self) -> None:
        self.chunks: list[_Chunk] = []
        self.firsts: list[str] = []
        self.dicts: list[dict[str, Entry]] = []
        self.lengths: list[int] = []

    def keep(self, view: KindView, start: int, stop: int) -> None:
        """Take the old view's chunks ``start`` to ``stop`` as they are."""
        self.chunks += view._chunks[start:stop]
        self.firsts += view._firsts[start:stop]
        self.dicts += view._dicts[start:stop]
        self.lengths += view._lengths[start:stop]

    def cut(self, entries: Sequence[Entry]) -> None:
        """Add ``entries`` as chunks of near-equal size, none over ``CHUNK_SIZE``."""
        total = len(entries)
        pieces = -(-total // CHUNK_SIZE)
        for index in range(pieces):
            chunk = _chunk(entries[index * total // pieces : (index + 1) * total // pieces])
            self.chunks.append(chunk)
            self.firsts.append(chunk.first)
            self.dicts.append(chunk.by_key)
            self.lengths.append(chunk.length)

    def pop(self) -> _Chunk:
        """Take the last chunk back out (to merge a small remainder into it)."""
        self.firsts.pop()
        self.dicts.pop()
        self.lengths.pop()
        return self.chunks.pop()


class KindView:
    """All public items of one kind, sorted by public key.

    The public surface is small on purpose: look up by key (``get``, ``in``),
    page by index (``after``, ``slice``), count and iterate. Nothing hands out
    a catalog-sized tuple, so nothing on a change or a call pays for one.
    """

    __slots__ = ("_chunks", "_dicts", "_firsts", "_lengths", "_offsets")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        """Build a view of ``entries``, which must be sorted by key with no key twice.

        Args:
            entries: the view's entries in key order.
        """
        index = _Index()
        index.cut(tuple(entries))
        self._set(index)

    def _set(self, index: _Index) -> None:
        self._chunks: tuple[_Chunk, ...] = tuple(index.chunks)
        self._firsts: tuple[str, ...] = tuple(index.firsts)
        # The chunks' dicts side by side: ``get`` is on every call's path.
        self._dicts: tuple[dict[str, Entry], ...] = tuple(index.dicts)
        self._lengths: tuple[int, ...] = tuple(index.lengths)
        # offsets[i] is the index of chunk i's first entry; the last is the length.
        self._offsets: tuple[int, ...] = (0, *itertools.accumulate(self._lengths))

    @classmethod
    def _of_index(cls, index: _Index) -> KindView:
        view = cls.__new__(cls)
        view._set(index)
        return view

    def __len__(self) -> int:
        """How many entries the view holds."""
        return self._offsets[-1]

    def __iter__(self) -> Iterator[Entry]:
        """The entries in key order."""
        return itertools.chain.from_iterable(map(_entries, self._chunks))

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` names an entry."""
        return isinstance(key, str) and self.get(key) is not None

    def __eq__(self, other: object) -> bool:
        """Same entries in the same order.

        A chunk both views hold at the same index is equal by identity, so two
        snapshots one change apart compare in the chunk index plus the
        entries the change touched, not the catalog (profiles compare their
        views after every change).
        """
        if not isinstance(other, KindView):
            return NotImplemented
        if self is other:
            return True
        total = len(self)
        if total != len(other):
            return False
        mine = {id(chunk): start for chunk, start in zip(self._chunks, self._offsets, strict=False)}
        compared = 0  # entries before this index are known equal
        for chunk, start in zip(other._chunks, other._offsets, strict=False):
            if mine.get(id(chunk)) == start:
                if self.slice(compared, start) != other.slice(compared, start):
                    return False
                compared = start + chunk.length
        return self.slice(compared, total) == other.slice(compared, total)

    __hash__ = None  # type: ignore[assignment]  # equal views may differ in chunking

    def __repr__(self) -> str:
        """A short form for test failures: the length and the first keys."""
        shown = list(itertools.islice(self.keys(), REPR_KEYS))
        more = ", ..." if len(self) > REPR_KEYS else ""
        return f"KindView({len(self)}: {shown!r}{more})"

    def get(self, key: str) -> Entry | None:
        """The entry whose public key is ``key``, or None (on every call's path)."""
        index = bisect.bisect_right(self._firsts, key)
        return self._dicts[index - 1].get(key) if index else None

    def after(self, key: str | None) -> int:
        """Index of the first entry strictly after ``key`` (keyset paging)."""
        if key is None:
            return 0
        index = bisect.bisect_right(self._firsts, key) - 1
        if index < 0:
            return 0
        return self._offsets[index] + bisect.bisect_right(self._chunks[index].keys, key)

    def slice(self, start: int, stop: int) -> tuple[Entry, ...]:
        """The entries at indices ``start`` to ``stop`` (clamped, as a slice is)."""
        total = len(self)
        start, stop = max(0, min(start, total)), max(0, min(stop, total))
        if start >= stop:
            return ()
        offsets = self._offsets
        index = bisect.bisect_right(offsets, start) - 1
        first = self._chunks[index]
        base = offsets[index]
        if stop <= base + first.length:
            return first.entries[start - base : stop - base]
        out = list(first.entries[start - base :])
        index += 1
        while offsets[index + 1] < stop:
            out += self._chunks[index].entries
            index += 1
        out += self._chunks[index].entries[: stop - offsets[index]]
        return tuple(out)

    def keys(self) -> tuple[str, ...]:
        """Every key in order: a catalog-sized copy, for tests and whole-view tools."""
        return tuple(itertools.chain.from_iterable(c.keys for c in self._chunks))

    def backends(self) -> frozenset[str]:
        """Names of backends contributing at least one item."""
        return frozenset(self.backend_counts())

    def backend_counts(self) -> Counter[str]:
        """Items per backend (the ``catalog_items`` gauge, refreshed after every change).

        Summed from per-chunk counts that chunks keep, so after one change
        only the new chunks are counted.
        """
        total: Counter[str] = Counter()
        for chunk in self._chunks:
            total.update(chunk.counts())
        return total

    def encoded_size(self) -> int:
        """The bytes of every entry's encoded item (a profile's ``tools/list`` budget)."""
        return sum(chunk.size() for chunk in self._chunks)

    def edited(self, removed: Iterable[str], put: Mapping[str, Entry]) -> KindView:
        """A new view without the keys ``removed``, with ``put`` added or replaced.

        Args:
            removed: keys to take out (unknown keys are ignored).
            put: key -> entry to add, or to replace the entry of that key;
                applied after ``removed``.

        Returns:
            The edited view, sharing every untouched chunk with this one
            (rules 1 and 4); this view itself when there is nothing to do.
        """
        firsts = self._firsts
        if not firsts:
            return KindView(put[key] for key in sorted(put))
        edits: dict[int, tuple[list[str], list[str]]] = {}
        for key in removed:
            edits.setdefault(max(0, bisect.bisect_right(firsts, key) - 1), ([], []))[0].append(key)
        for key in put:
            edits.setdefault(max(0, bisect.bisect_right(firsts, key) - 1), ([], []))[1].append(key)
        if not edits:
            return self
        chunks = self._chunks
        out = _Index()
        # Entries not cut into chunks yet: an edited chunk left below CHUNK_MIN
        # waits here for its next neighbour (rule 2).
        pending: list[Entry] = []
        done = 0  # chunks[:done] are in ``out`` or ``pending``
        for index in sorted(edits):
            if pending and index > done:
                pending += chunks[done].entries
                done += 1
                out.cut(pending)
                pending = []
            out.keep(self, done, index)
            gone, came = edits[index]
            found = dict(chunks[index].by_key)
            for key in gone:
                found.pop(key, None)
            for key in came:
                found[key] = put[key]
            pending += [found[key] for key in sorted(found)]
            done = index + 1
            if len(pending) >= CHUNK_MIN:
                out.cut(pending)
                pending = []
        if pending and done < len(chunks):
            pending += chunks[done].entries
            done += 1
        elif pending and out.chunks:
            pending[:0] = out.pop().entries
        out.cut(pending)
        out.keep(self, done, len(chunks))
        return KindView._of_index(out)


EMPTY_VIEW: Final = KindView()
