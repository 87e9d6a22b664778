"""Type-checked, never run: pins the public API's static types (mypy checks this package)."""
