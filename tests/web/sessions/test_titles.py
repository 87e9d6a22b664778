"""Titles: provisional at once, a cleaned model title later, and a manual rename wins."""

from __future__ import annotations

import pytest
from lovia.testing import ScriptedProvider, text
from lovia.web.titles import TITLE_CHARS, clean_title, generate_title, provisional_title


def test_the_provisional_title_is_the_first_message_on_one_line() -> None:
    assert provisional_title("  hello\n\n  world\t") == "hello world"
    long = provisional_title("word " * 40)
    assert len(long) == TITLE_CHARS and long.endswith("…")
    assert provisional_title(" \n ") == "New chat"


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Paris weather", "Paris weather"),
        ('"Paris weather"', "Paris weather"),
        ("Title: Paris weather.", "Paris weather"),
        ("**Title:** “Paris weather”", "Paris weather"),
        ("# Paris weather", "Paris weather"),
        ("<think>the user asks about\nweather</think>\n\nParis weather", "Paris weather"),
        ("\n\n  `Paris weather`  \nsecond line", "Paris weather"),
        ("Chat title - Trip planning", "Trip planning"),
        ("「東京の天気」", "東京の天気"),
        ("Bell\x07 and\x00 NUL", "Bell and NUL"),
        ("", ""),
        ("   \n ", ""),
        ('""', ""),
        ("**", ""),
    ],
)
def test_model_decorations_are_cleaned(raw: str, title: str) -> None:
    assert clean_title(raw) == title


def test_a_long_model_title_is_cut() -> None:
    cut = clean_title("x" * 500)
    assert len(cut) == TITLE_CHARS and cut.endswith("…")


async def test_generate_title_asks_the_model_with_the_exchange() -> None:
    provider = ScriptedProvider([text("Title: “Packing for Lisbon”")])
    title = await generate_title(provider, "What should I pack for Lisbon?", "A light jacket.")
    assert title == "Packing for Lisbon"
    sent = provider.calls[0][-1].content
    assert "What should I pack for Lisbon?" in sent and "A light jacket." in sent


async def test_a_blank_model_answer_gives_no_title() -> None:
    assert await generate_title(ScriptedProvider([text("  ")]), "hi") == ""
