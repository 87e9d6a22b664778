"""enable_logging: configures only the ``lovia`` logger, idempotently, colour when it should."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from lovia.log import enable_logging

RED = "\x1b[31m"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_lovia_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    logger = logging.getLogger("lovia")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    yield
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


def test_records_from_lovia_loggers_reach_the_stream() -> None:
    out = io.StringIO()
    enable_logging("DEBUG", stream=out, format="%(levelname)s %(name)s %(message)s")
    logging.getLogger("lovia.runtime").debug("run.start agent=%s", "a")
    assert out.getvalue() == "DEBUG lovia.runtime run.start agent=a\n"


def test_level_filters_lower_records() -> None:
    out = io.StringIO()
    enable_logging("warning", stream=out, format="%(message)s")
    logging.getLogger("lovia.x").info("hidden")
    logging.getLogger("lovia.x").warning("shown")
    assert out.getvalue() == "shown\n"


def test_calling_twice_replaces_the_handler_instead_of_adding_one() -> None:
    first, second = io.StringIO(), io.StringIO()
    old = enable_logging(stream=first, format="%(message)s")
    new = enable_logging(stream=second, format="%(message)s")
    logger = logging.getLogger("lovia")
    assert old not in logger.handlers and new in logger.handlers
    logging.getLogger("lovia").info("once")
    assert (first.getvalue(), second.getvalue()) == ("", "once\n")


def test_foreign_handlers_on_the_lovia_logger_are_kept() -> None:
    foreign = logging.NullHandler()
    logging.getLogger("lovia").addHandler(foreign)
    enable_logging(stream=io.StringIO())
    enable_logging(stream=io.StringIO())
    assert foreign in logging.getLogger("lovia").handlers


def test_propagate_is_off_by_default_and_can_be_enabled() -> None:
    enable_logging(stream=io.StringIO())
    assert logging.getLogger("lovia").propagate is False
    enable_logging(stream=io.StringIO(), propagate=True)
    assert logging.getLogger("lovia").propagate is True


def test_datefmt_is_applied() -> None:
    out = io.StringIO()
    enable_logging(stream=out, format="%(asctime)s|%(message)s", datefmt="DATE")
    logging.getLogger("lovia").info("x")
    assert out.getvalue() == "DATE|x\n"


def test_colour_is_used_on_a_terminal() -> None:
    out = Terminal()
    enable_logging(stream=out, format="%(message)s")
    logging.getLogger("lovia").error("bad")
    assert out.getvalue() == f"{RED}bad\x1b[0m\n"


@pytest.mark.parametrize(
    ("env", "value"), [("NO_COLOR", "1"), ("TERM", "dumb")], ids=["no-color", "dumb-term"]
)
def test_environment_turns_colour_off_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    monkeypatch.setenv(env, value)
    out = Terminal()
    enable_logging(stream=out, format="%(message)s")
    logging.getLogger("lovia").error("bad")
    assert out.getvalue() == "bad\n"


def test_no_colour_when_not_a_terminal() -> None:
    out = io.StringIO()
    enable_logging(stream=out, format="%(message)s")
    logging.getLogger("lovia").error("bad")
    assert out.getvalue() == "bad\n"


@pytest.mark.parametrize(
    ("color", "stream", "expected"),
    [(True, io.StringIO, f"{RED}bad\x1b[0m\n"), (False, Terminal, "bad\n")],
    ids=["forced-on", "forced-off"],
)
def test_color_argument_overrides_detection(
    color: bool, stream: type[io.StringIO], expected: str
) -> None:
    out = stream()
    enable_logging(stream=out, format="%(message)s", color=color)
    logging.getLogger("lovia").error("bad")
    assert out.getvalue() == expected


def test_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    enable_logging(format="%(message)s")
    logging.getLogger("lovia").warning("to stderr")
    assert capsys.readouterr().err == "to stderr\n"


def test_root_logger_is_untouched() -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    enable_logging("DEBUG", stream=io.StringIO())
    assert (list(root.handlers), root.level) == before


def test_an_unknown_level_raises_and_leaves_logging_as_it_was() -> None:
    logger = logging.getLogger("lovia")
    out = io.StringIO()
    enable_logging("INFO", stream=out, format="%(message)s")
    before = (list(logger.handlers), logger.level)
    with pytest.raises(ValueError, match="unknown logging level 'LOUD'"):
        enable_logging("LOUD", stream=io.StringIO())
    assert (list(logger.handlers), logger.level) == before
    logger.info("still here")
    assert out.getvalue() == "still here\n"


def test_the_lovia_logger_ships_a_null_handler() -> None:
    import lovia

    assert lovia.__name__ == "lovia"
    assert any(type(h) is logging.NullHandler for h in logging.getLogger("lovia").handlers)
