"""``lovia eval SUITE.py[:NAME]``: run a suite, print its report, gate CI on the outcome.

A suite file is a Python module with an attribute (``suite`` unless ``:NAME`` says
otherwise) holding a ``lovia.eval.Suite``, or a zero-argument function, sync or async,
returning one. Exit codes, so CI can gate on them:

* 0: every case passed, or with ``--baseline``, nothing regressed;
* 1: some case failed (no baseline), or ``compare()`` found a regression;
* 2: a usage error: bad flags, a missing or broken suite file, a missing attribute, a
  corrupt baseline or one with duplicate case names. The message names the problem and no
  traceback is printed;
* 130: interrupted (Ctrl-C).

The report goes to stdout; progress (a live bar on a terminal, plain lines on a pipe) goes
to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from lovia.exceptions import LoviaError, UserError

from .errors import SuiteError
from .progress import auto_progress
from .report import Report
from .runner import Suite

__all__ = ["load_suite", "main"]

_DEFAULT_ATTRIBUTE = "suite"


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run an evaluation suite, print its report and compare it with a baseline.",
        epilog="Exit codes: 0 passed (or no regression), 1 failed (or regressed), 2 usage error.",
    )
    parser.add_argument(
        "suite", metavar="SUITE.py[:NAME]", help="a suite file and its attribute (default: suite)"
    )
    parser.add_argument("--baseline", metavar="FILE", help="a saved report to compare against")
    parser.add_argument("--save", metavar="FILE", help="write this run's report as JSON")
    parser.add_argument(
        "--concurrency", metavar="N", type=_positive, help="cases run at once (default: suite's)"
    )
    parser.add_argument(
        "--samples", metavar="N", type=_positive, help="runs per case, overriding every case"
    )
    parser.add_argument(
        "--fail-fast", action="store_true", help="run cases one by one; stop at the first failure"
    )
    parser.add_argument("--no-progress", action="store_true", help="do not report progress")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def load_suite(spec: str) -> object:
    """Import ``SUITE.py[:NAME]`` and return the attribute; raises ``SuiteError``.

    The value may still be a factory: ``main`` calls it (sync or async) to get the ``Suite``.
    """
    path_text, _, attribute = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not path_text or not attribute.isidentifier():
        path_text, attribute = spec, _DEFAULT_ATTRIBUTE
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise SuiteError(
            f"no suite file at {path_text!r}",
            hint="pass the path of a .py file, optionally followed by :NAME",
        )
    module = _import(path)
    if not hasattr(module, attribute):
        found = [n for n, v in vars(module).items() if isinstance(v, Suite)]
        raise SuiteError(
            f"{path_text} has no attribute {attribute!r}",
            hint=f"suites defined there: {', '.join(found)}"
            if found
            else f"define `{attribute} = Suite(agent=..., cases=[...])` in {path_text}",
        )
    return getattr(module, attribute)


def _import(path: Path) -> ModuleType:
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"_lovia_eval_suite_{digest}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise SuiteError(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered first, as `import` does: dataclasses and pickling look modules up by name.
    sys.modules[name] = module
    sys.path.insert(0, str(resolved.parent))  # so the suite can import its siblings
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any error while importing user code becomes a usage error
        del sys.modules[name]
        raise SuiteError(
            f"importing {str(path)!r} raised {type(exc).__name__}: {exc}",
            hint="run the file with python to see the traceback",
        ) from exc
    finally:
        sys.path.remove(str(resolved.parent))
    return module


async def _resolve(value: object, spec: str) -> Suite:
    if callable(value) and not isinstance(value, Suite):
        try:
            value = value()
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:  # a broken suite factory is a usage error, not a crash
            raise SuiteError(
                f"{spec}: the suite factory raised {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(value, Suite):
        raise SuiteError(
            f"{spec} is a {type(value).__name__}, not a lovia.eval.Suite",
            hint="expose Suite(agent=..., cases=[...]) or a function returning one",
        )
    return value


async def _run(args: argparse.Namespace) -> Report:
    suite = await _resolve(load_suite(args.suite), args.suite)
    overrides: dict[str, object] = {
        "fail_fast": args.fail_fast,
        "samples": args.samples,
        "progress": None if args.no_progress else auto_progress(sys.stderr),
    }
    if args.concurrency is not None:
        overrides["concurrency"] = args.concurrency
    return await suite.evaluate(**overrides)


def _check_save_path(path: Path) -> None:
    if path.is_dir() or not path.parent.is_dir():
        why = "is a folder" if path.is_dir() else f"has no folder {str(path.parent)!r}"
        raise UserError(
            f"--save {str(path)!r} {why}",
            hint="pass a file path in an existing folder, e.g. --save report.json",
        )


def _fail(prog: str, exc: LoviaError | OSError) -> int:
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return 2


def main(argv: Sequence[str], prog: str = "lovia eval") -> int:
    """Run the command with ``argv`` (without the program name); returns the exit code."""
    try:
        args = _parser(prog).parse_args(list(argv))
    except SystemExit as exc:  # argparse exits 0 after --help and 2 on a bad flag
        return exc.code if isinstance(exc.code, int) else 2
    try:
        # Read the baseline and check --save first: fail before any tokens are spent.
        if args.save is not None:
            _check_save_path(Path(args.save))
        baseline = None
        if args.baseline is not None:
            baseline = Report.load(args.baseline)
            baseline.by_name(label=f"baseline {args.baseline!r}")
        report = asyncio.run(_run(args))
    except LoviaError as exc:
        return _fail(prog, exc)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    print(report)
    try:
        if args.save is not None:
            report.save(args.save)
        if baseline is None:
            return 0 if report.passed else 1
        diff = report.compare(baseline)
    except (LoviaError, OSError) as exc:
        return _fail(prog, exc)
    print()
    print(diff)
    return 0 if diff.ok else 1
