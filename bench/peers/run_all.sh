#!/usr/bin/env bash
# Run every peer-benchmark script, each in its own virtual environment (created on demand under
# a temporary folder, never in the repository nor as a project dependency), and write
# results.json and RESULTS.md.
#
# Default (PEERBENCH_MODE=interleaved): all scripts start at once as idle workers and
# interleave.py hands them small blocks in turn, so a slow spell of this shared VM falls on every
# framework alike. PEERBENCH_MODE=sequential: each script runs standalone (prints its JSON line),
# one after another, for PEERBENCH_ROUNDS rounds with the order rotated; figures = median of rounds.
#
#   bash bench/peers/run_all.sh                 # all frameworks (+ goagent_py when importable)
#   bash bench/peers/run_all.sh agno langgraph  # only these; their rows are replaced
#   bash bench/peers/run_all.sh agno goagent_py goagent_py_minimal  # goagent_py on both fakes
#
# Environment:
#   PEERBENCH_MODE     interleaved (default) | sequential
#   PEERBENCH_ROUNDS   sequential mode: rounds per framework (default 3)
#   PEERBENCH_BLOCK    interleaved mode: runs per block (default 25)
#   PEERBENCH_VENVS    where the venvs live (default ${TMPDIR:-/tmp}/goagent-peerbench/venvs; never inside the repo)
#   PEERBENCH_UPGRADE  1 = `pip install -U` the specs into existing venvs first
#   PEERBENCH_NETNS    1 (default) = run each script inside an empty network namespace
#                      (`unshare -n`) when that is permitted, so no framework can reach a network
#   PEERBENCH_RUNS / _WARMUP / _CONSTRUCT / _MEM_AGENTS / _IMPORT_REPEATS   see _harness.py
#   GOAGENT_PY_PYTHON  interpreter that can `import goagent_py` (else the goagent_py venv,
#                      built from GOAGENT_PY_SRC when that holds a pyproject.toml)
#   GOAGENT_PY_SRC     goagent-py source tree (default: the checkout this script is in)
#   PEERBENCH_OUT      where results.json and RESULTS.md go (default: $PEERBENCH_VENVS/../out, outside the repo)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENVS="${PEERBENCH_VENVS:-${TMPDIR:-/tmp}/goagent-peerbench/venvs}"
ROUNDS="${PEERBENCH_ROUNDS:-3}"
BASE_PY="${PYTHON:-python3}"
LOGS="$VENVS/logs"
RAW="$(mktemp -d "${TMPDIR:-/tmp}/goagent-peerbench-raw.XXXXXX")"
mkdir -p "$VENVS" "$LOGS"

# Telemetry and tracing off for every framework (the harness sets the same defaults).
export OPENAI_AGENTS_DISABLE_TRACING=1 OPENAI_AGENTS_DONT_LOG_MODEL_DATA=1 OPENAI_AGENTS_DONT_LOG_TOOL_DATA=1
export AGNO_TELEMETRY=false AGNO_DEBUG=false
export LANGCHAIN_TRACING_V2=false LANGCHAIN_TRACING=false LANGSMITH_TRACING=false LANGSMITH_TRACING_V2=false
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1 ANONYMIZED_TELEMETRY=false
export OTEL_SDK_DISABLED=true GOAGENT_PY_TELEMETRY=false
export PIP_DISABLE_PIP_VERSION_CHECK=1

# script name | pip requirement specs (latest that pip resolves)
FRAMEWORKS=(
  "pydantic_ai|pydantic-ai-slim"
  "openai_agents|openai-agents"
  "langgraph|langgraph langchain-core langchain"
  "agno|agno"
  "smolagents|smolagents"
)

ONLY=("$@")
selected() {
  [ "${#ONLY[@]}" -eq 0 ] && return 0
  local n
  for n in "${ONLY[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

record_error() {  # name, message, output file
  "$BASE_PY" - "$1" "$2" > "$3" <<'PY'
import json, sys
print(json.dumps({"framework": sys.argv[1].replace("_", "-") if sys.argv[1] != "goagent_py" else sys.argv[1], "error": sys.argv[2][-1500:]}))
PY
}

ensure_venv() {  # name, specs...
  local name="$1"; shift
  local venv="$VENVS/$name"
  if [ ! -x "$venv/bin/python" ]; then
    echo "== $name: creating $venv and installing: $*" >&2
    "$BASE_PY" -m venv "$venv" || return 1
    "$venv/bin/pip" install -q "$@" > "$LOGS/$name.install.log" 2>&1 || return 1
  elif [ "${PEERBENCH_UPGRADE:-0}" = "1" ]; then
    echo "== $name: upgrading: $*" >&2
    "$venv/bin/pip" install -q -U "$@" > "$LOGS/$name.install.log" 2>&1 || return 1
  fi
}

NETNS=()
if [ "${PEERBENCH_NETNS:-1}" = "1" ] && unshare -n true 2> /dev/null; then
  NETNS=(unshare -n)
  export PEERBENCH_IN_NETNS=1
else
  export PEERBENCH_IN_NETNS=0
fi

run_script() {  # name, python, round
  local name="$1" py="$2" round="$3"
  local out="$RAW/$name.r$round.json" err="$LOGS/$name.r$round.err"
  echo "== round $round: $name ($py)" >&2
  if ${NETNS[@]+"${NETNS[@]}"} "$py" "$HERE/$name.py" > "$RAW/$name.r$round.out" 2> "$err"; then
    tail -n 1 "$RAW/$name.r$round.out" > "$out"
  else
    record_error "$name" "$(tail -n 25 "$err")" "$out"
  fi
}

# 1. environments (and the interpreter for each selected script)
declare -A PY_FOR=()
ORDER=()
for entry in "${FRAMEWORKS[@]}"; do
  name="${entry%%|*}"
  specs="${entry#*|}"
  selected "$name" || continue
  # shellcheck disable=SC2086
  if ensure_venv "$name" $specs; then
    PY_FOR[$name]="$VENVS/$name/bin/python"
    ORDER+=("$name")
  else
    record_error "$name" "install failed: $(tail -n 25 "$LOGS/$name.install.log" 2>/dev/null)" "$RAW/$name.r1.json"
  fi
done

# goagent_py: only when importable; goagent_py_minimal is the same script on the minimal fake
# (PEERBENCH_GOAGENT_PROVIDER=minimal), from the same interpreter.
if selected goagent_py || selected goagent_py_minimal; then
  gpy="${GOAGENT_PY_PYTHON:-}"
  src="${GOAGENT_PY_SRC:-$HERE/../..}"
  if [ -z "$gpy" ] && [ -f "$src/pyproject.toml" ]; then
    if ensure_venv goagent_py "$src"; then
      # a plain (non-editable) install of the current tree, so import time is measured as users get it
      "$VENVS/goagent_py/bin/pip" install -q --no-deps --force-reinstall "$src" >> "$LOGS/goagent_py.install.log" 2>&1
      gpy="$VENVS/goagent_py/bin/python"
    fi
  fi
  gpy="${gpy:-$BASE_PY}"
  if (cd /tmp && "$gpy" -c "import goagent_py, goagent_py.testing") > /dev/null 2>&1; then
    for name in goagent_py goagent_py_minimal; do
      selected "$name" || continue
      PY_FOR[$name]="$gpy"
      ORDER+=("$name")
    done
  else
    echo "== goagent_py: not importable with $gpy; skipped" >&2
    "$BASE_PY" - > "$RAW/goagent_py.r1.json" <<'PY'
import json
print(json.dumps({"framework": "goagent_py", "skipped": "goagent_py is not importable yet (package not built/installed)"}))
PY
  fi
fi

# 2. measure
n="${#ORDER[@]}"
if [ "${PEERBENCH_MODE:-interleaved}" = "interleaved" ]; then
  pairs=()
  for name in "${ORDER[@]}"; do pairs+=("$name=${PY_FOR[$name]}"); done
  if [ "$n" -gt 0 ]; then
    PEERBENCH_LOGS="$LOGS" "$BASE_PY" "$HERE/interleave.py" "$RAW" "${pairs[@]}" || echo "interleave.py failed" >&2
  fi
else
  # rounds, the order rotated by one each round
  for ((r = 1; r <= ROUNDS; r++)); do
    for ((i = 0; i < n; i++)); do
      name="${ORDER[$(((i + r - 1) % n))]}"
      run_script "$name" "${PY_FOR[$name]}" "$r"
    done
  done
fi

OUT="${PEERBENCH_OUT:-$(dirname "$VENVS")/out}"
if ! { mkdir -p "$OUT" && [ -w "$OUT" ]; } 2>/dev/null; then OUT=/tmp/peerbench-out; mkdir -p "$OUT"; fi
"$BASE_PY" "$HERE/report.py" "$RAW" "$OUT/results.json" "$OUT/RESULTS.md"
rc=$?
echo "results in $OUT/RESULTS.md" >&2
rm -rf "$RAW"
exit $rc
