"""The sequences the loop hands out as views, without copying the transcript.

``LiveView`` is what the context policy receives: a read-only window onto the live
transcript (O(1) to build, C-speed to iterate, no mutating methods). ``ViewWithTail`` is a
policy's view plus view-injector entries, pinned to the base's length when it is built, so
a recorded view keeps saying what was sent even as the transcript grows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from ..transcript import TranscriptEntry

__all__ = ["LiveView", "ViewWithTail"]


class LiveView(Sequence[TranscriptEntry]):
    """A read-only window onto the live transcript, handed to the context policy.

    O(1) to build and C-speed to iterate, yet it has no mutating methods: a policy that
    tries to edit its request fails loudly instead of corrupting the record.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: list[TranscriptEntry]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> TranscriptEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[TranscriptEntry]: ...

    def __getitem__(self, index: int | slice) -> TranscriptEntry | list[TranscriptEntry]:
        return self._entries[index]

    def __iter__(self) -> Iterator[TranscriptEntry]:
        return iter(self._entries)

    def __reversed__(self) -> Iterator[TranscriptEntry]:
        return reversed(self._entries)

    def __repr__(self) -> str:
        return f"LiveView({len(self._entries)} entries)"


class ViewWithTail(Sequence[TranscriptEntry]):
    """A view plus injected entries, built in O(1) without copying the view.

    It pins the base's current length: the base may be the live transcript, which grows
    after the call, and a view must keep saying what was sent.
    """

    __slots__ = ("_base", "_size", "_tail")

    def __init__(self, base: Sequence[TranscriptEntry], tail: tuple[TranscriptEntry, ...]) -> None:
        self._base = base
        self._size = len(base)
        self._tail = tail

    def __len__(self) -> int:
        return self._size + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> TranscriptEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[TranscriptEntry]: ...

    def __getitem__(self, index: int | slice) -> TranscriptEntry | list[TranscriptEntry]:
        if isinstance(index, slice):
            return list(self)[index]
        size = self._size
        if index < 0:
            index += len(self)
        if 0 <= index < size:
            return self._base[index]
        if size <= index < len(self):
            return self._tail[index - size]
        raise IndexError(index)

    def __iter__(self) -> Iterator[TranscriptEntry]:
        base = self._base
        for i in range(self._size):
            yield base[i]
        yield from self._tail
