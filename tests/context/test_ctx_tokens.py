from __future__ import annotations

from collections.abc import Sequence

import pytest
from lovia.context import TokenBudget, TokenCounter
from lovia.parts import FilePart, ImagePart, TextPart
from lovia.tools.recall import make_recall_tool
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry

PNG = "iVBORw0KGgo="
PNG_BIG = "AAAA" * 20_000


def test_text_counts_utf8_bytes_so_cjk_is_not_undercounted() -> None:
    assert TokenCounter.count_text("a" * 400) == 100
    # 100 CJK characters are 300 UTF-8 bytes: 75 tokens, not 25.
    assert TokenCounter.count_text("漢" * 100) == 75
    assert TokenCounter.count_text("\ud800abc") >= 1  # lone surrogate does not raise


def test_images_and_files_cost_flat_never_their_base64_length() -> None:
    counter = TokenCounter(image_tokens=1_000, file_tokens=300)
    small = InputEntry("user", (TextPart("hi"), ImagePart(data=PNG, mime_type="image/png")))
    big = InputEntry("user", (TextPart("hi"), ImagePart(data=PNG_BIG, mime_type="image/png")))
    assert counter.count_entry(small) == counter.count_entry(big)
    with_file = ToolResultEntry(
        "c", "[file]", parts=(FilePart(data=PNG, mime_type="application/pdf"),)
    )
    assert (
        counter.count_entry(with_file) - counter.count_entry(ToolResultEntry("c", "[file]")) == 300
    )


def test_entry_counts_are_memoised_by_identity() -> None:
    calls: list[int] = []

    class Estimator:
        def estimate_tokens(self, entries: Sequence[TranscriptEntry]) -> int:
            calls.append(len(entries))
            return 7

    counter = TokenCounter(estimator=Estimator())
    e = InputEntry("user", "hello")
    assert counter.count_entry(e) == 7
    assert counter.count_entry(e) == 7
    assert calls == [1]
    assert counter.count_entry(InputEntry("user", "hello")) == 7  # equal but new: counted again
    assert calls == [1, 1]


def test_broken_estimator_falls_back_to_the_heuristic() -> None:
    class Broken:
        def estimate_tokens(self, entries: Sequence[TranscriptEntry]) -> int:
            raise RuntimeError("boom")

    counter = TokenCounter(estimator=Broken())
    assert counter.count_entry(InputEntry("user", "a" * 40)) == TokenCounter().count_entry(
        InputEntry("user", "a" * 40)
    )


def test_tool_schemas_count_on_the_wire_shape_and_tolerate_other_objects() -> None:
    counter = TokenCounter()
    tool = make_recall_tool(None)
    assert counter.count_tools([tool]) > 20
    assert counter.count_tools([tool, tool]) == 2 * counter.count_tools([tool])
    assert counter.count_tools([{"type": "function", "function": {"name": "x"}}, object()]) > 0


def test_budget_math() -> None:
    b = TokenBudget(100_000, reserve_output_tokens=20_000, compact_at=0.75, compact_to=0.5)
    assert (b.usable, b.trigger_tokens, b.target_tokens, b.tail_tokens) == (
        80_000,
        60_000,
        40_000,
        16_000,
    )
    assert b.pressure(60_000) == 1.0
    absolute = TokenBudget(100_000, reserve_output_tokens=0, compact_at=50_000, compact_to=0.2)
    assert (absolute.trigger_tokens, absolute.target_tokens) == (50_000, 20_000)
    # mixed kinds that cross resolve the target below the trigger
    crossed = TokenBudget(100_000, reserve_output_tokens=0, compact_at=10_000, compact_to=0.9)
    assert crossed.target_tokens < crossed.trigger_tokens
    agg = b.aggressive()
    assert (agg.target_tokens, agg.tail_tokens) == (20_000, 8_000)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": True},
        {"window": 0},
        {"window": 10, "reserve_output_tokens": -1},
        {"window": 10, "compact_at": True},
        {"window": 10, "compact_at": 1.5},
        {"window": 10, "keep_recent_tokens": -3},
    ],
)
def test_budget_validation_rejects_bools_and_bad_counts(kwargs: dict[str, object]) -> None:
    window = kwargs.pop("window")
    with pytest.raises(ValueError):
        TokenBudget(window, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TokenCounter(image_tokens=-1)
