#!/usr/bin/env bash
# Run the live tests (`-m live_provider`) against the local mock servers, once per wire
# format (OpenAI Chat Completions, Anthropic Messages), so they are never dead code.
#
# aimock (npm, tests/core/providers/aimock) answers the scripted prompts in
# tests/live_mocks/fixtures and checks the API key; whatever it has no fixture for it
# forwards to llmock (PyPI), which answers like a generic model, reports usage and rejects
# prompts over its --context-window, as a real endpoint does. Both bind 127.0.0.1 on a port
# the OS picks. Fails when a test failed or when a pass ran no test. Extra arguments go to
# the main pass's pytest (e.g. -k tool -x). See docs/live-tests.md.
set -euo pipefail
cd "$(dirname "$0")/.."

AIMOCK_CLI=tests/core/providers/aimock/node_modules/@copilotkit/aimock/dist/cli.js
WINDOW=4000                  # llmock's context window (tokens), told to the tests
KEY=lovia-live-mock-key      # the only key aimock accepts
MODELS=("openai:gpt-4o-mini" "anthropic:claude-sonnet-4-5")

if [ ! -f "$AIMOCK_CLI" ]; then
  echo "aimock is not installed: run \`npm ci\` in tests/core/providers/aimock" >&2
  exit 1
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# wait_for LOG PATTERN: print the first line of LOG matching PATTERN (60 s deadline).
wait_for() {
  local deadline=$((SECONDS + 60))
  until grep -m1 -E "$2" "$1" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "server did not start; its log:" >&2
      cat "$1" >&2
      return 1
    fi
    sleep 0.2
  done
}
port_in() { grep -oE '127\.0\.0\.1:[0-9]+' | head -1 | cut -d: -f2; }

uv run --no-sync llmock serve --host 127.0.0.1 --port 0 --response-style static --tool-mode off \
  --context-window "$WINDOW" --log-level info >"$work/llmock.log" 2>&1 &
pids+=($!)
llmock_port=$(wait_for "$work/llmock.log" "Uvicorn running on" | port_in)

AIMOCK_API_KEYS="$KEY" AIMOCK_PROVIDER_OPENAI_KEY="$KEY" AIMOCK_PROVIDER_ANTHROPIC_KEY="$KEY" \
  node "$AIMOCK_CLI" -h 127.0.0.1 -p 0 -f tests/live_mocks/fixtures --log-level info \
  --proxy-only --provider-openai "http://127.0.0.1:$llmock_port" \
  --provider-anthropic "http://127.0.0.1:$llmock_port/anthropic" >"$work/aimock.log" 2>&1 &
pids+=($!)
aimock_port=$(wait_for "$work/aimock.log" "listening on" | port_in)
echo "llmock on 127.0.0.1:$llmock_port, aimock on 127.0.0.1:$aimock_port"

# run_pass LABEL OPENAI_BASE ANTHROPIC_BASE MODEL [VAR=VALUE...] -- [PYTEST ARGS...]
# One `pytest -m live_provider` run; fails the script when a test fails or none passes.
status=0
run_pass() {
  local label=$1 openai_base=$2 anthropic_base=$3 model=$4
  shift 4
  local extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do extra+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  printf '\n== live tests, %s, %s ==\n' "$model" "$label"
  local report="$work/report.xml" rc=0
  # Every variable the tests read is set here, so a developer's .env cannot leak in.
  env LOVIA_LIVE_TESTS=1 LOVIA_LIVE_REASONING=1 LOVIA_LIVE_OVERFLOW_TESTS=0 \
    LOVIA_LIVE_CONTEXT_WINDOW="$WINDOW" \
    LOVIA_LIVE_MODEL="$model" OPENAI_API_KEY="$KEY" OPENAI_BASE_URL="$openai_base" \
    ANTHROPIC_API_KEY="$KEY" ANTHROPIC_BASE_URL="$anthropic_base" "${extra[@]}" \
    uv run --no-sync pytest -m live_provider -p no:cacheprovider --junitxml="$report" "$@" \
    || rc=$?
  local counts passed skipped failed
  counts=$(uv run --no-sync python - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET

suite = ET.parse(sys.argv[1]).getroot().find("testsuite")
tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
print(tests - failed - skipped, skipped, failed)
PY
)
  read -r passed skipped failed <<<"$counts"
  summary+=("$model, $label: $passed passed, $skipped skipped, $failed failed (pytest exit $rc)")
  if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    status=1
  fi
}

summary=()
chain_openai="http://127.0.0.1:$aimock_port/v1" chain_anthropic="http://127.0.0.1:$aimock_port"
llmock_openai="http://127.0.0.1:$llmock_port/v1"
llmock_anthropic="http://127.0.0.1:$llmock_port/anthropic"
for model in "${MODELS[@]}"; do
  # Every live test against aimock in front of llmock (the overflow probe stays off: aimock
  # relays an upstream rejection as HTTP 502, which no real endpoint sends for an overflow).
  run_pass "aimock in front of llmock" "$chain_openai" "$chain_anthropic" "$model" -- "$@"
  # The overflow probe against llmock itself, whose --context-window rejects for real.
  run_pass "overflow probe on llmock" "$llmock_openai" "$llmock_anthropic" "$model" \
    LOVIA_LIVE_OVERFLOW_TESTS=1 -- -k overflow
done
printf '\n== summary ==\n'
printf '%s\n' "${summary[@]}"
exit $status
