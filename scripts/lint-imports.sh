#!/usr/bin/env bash
# Run import-linter on a merged view of every distribution's `lovia` portion
# (grimp cannot see a namespace package split across src/ directories).
set -euo pipefail
cd "$(dirname "$0")/.."
merged=$(mktemp -d)
trap 'rm -rf "$merged"' EXIT
python scripts/merged_tree.py "$merged" >/dev/null
PYTHONPATH="$merged" uv run --no-sync lint-imports --no-cache "$@"
