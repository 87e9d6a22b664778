"""Mailbox: FIFO push/drain, withdrawal by token, content validation."""

from __future__ import annotations

import pytest
from lovia.exceptions import UserError
from lovia.parts import ImagePart, TextPart
from lovia.steering import Mailbox


def test_drain_returns_items_oldest_first_and_empties_the_mailbox() -> None:
    box = Mailbox()
    box.push("one")
    box.push("two")
    assert len(box) == 2
    assert box.drain() == ["one", "two"]
    assert (len(box), box.drain()) == (0, [])


def test_push_returns_distinct_tokens() -> None:
    box = Mailbox()
    assert len({box.push("a"), box.push("a"), box.push("a")}) == 3


def test_remove_withdraws_an_undrained_item_only() -> None:
    box = Mailbox()
    first = box.push("first")
    second = box.push("second")
    assert box.remove(first) is True
    assert box.remove(first) is False
    assert box.drain() == ["second"]
    assert box.remove(second) is False  # already drained


def test_remove_of_an_unknown_token_is_false() -> None:
    assert Mailbox().remove(12345) is False


def test_parts_are_stored_as_an_immutable_tuple() -> None:
    box = Mailbox()
    parts: list[TextPart | ImagePart] = [TextPart("look"), ImagePart(url="https://a.test/a.png")]
    box.push(parts)
    parts.append(TextPart("later"))  # the caller's list is not shared
    assert box.drain() == [(TextPart("look"), ImagePart(url="https://a.test/a.png"))]


@pytest.mark.parametrize(
    "content",
    [None, 42, {"text": "hi"}, b"bytes", ["text instead of a part"]],
    ids=["none", "int", "dict", "bytes", "list-of-str"],
)
def test_push_rejects_anything_but_text_or_parts(content: object) -> None:
    box = Mailbox()
    with pytest.raises(UserError) as info:
        box.push(content)  # type: ignore[arg-type]  # the point of the test
    assert info.value.hint == "push a str, or a list of TextPart/ImagePart/FilePart"
    assert len(box) == 0


def test_repr_counts_pending_items() -> None:
    box = Mailbox()
    box.push("x")
    assert repr(box) == "Mailbox(pending=1)"


@pytest.mark.parametrize("content", ["", "  \n\t", []], ids=["empty", "blank", "no-parts"])
def test_push_rejects_an_empty_message(content: object) -> None:
    box = Mailbox()
    with pytest.raises(UserError, match="empty message") as info:
        box.push(content)  # type: ignore[arg-type]  # typed object to mix str and list
    assert info.value.hint == "push some text or at least one content part"
    assert len(box) == 0
