#!/usr/bin/env bash
# Install goagent-py for development from the committed locks (scripts/lock.sh writes them):
#
#     bash scripts/install.sh                # .venv: every extra CI installs, dev tools included
#     bash scripts/install.sh --core DIR     # DIR: only the core and the dev extra
#
# Every package comes pinned with its hash (pip --require-hashes), then the project itself goes
# in editable without touching them (--no-deps). The first install builds llama-cpp-python from
# source, a few minutes on 2 cores; its build requirements are pinned too (requirements-build.txt:
# pip reads PIP_CONSTRAINT in the build's own install).
set -euo pipefail
cd "$(dirname "$0")/.."

lock=requirements-lock.txt
if [ "${1:-}" = --core ]; then
    lock=requirements-core-lock.txt
    shift
fi
venv=${1:-.venv}

python3 -m venv "$venv"
PIP_CONSTRAINT="$PWD/requirements-build.txt" \
    "$venv/bin/python" -m pip install --quiet --require-hashes -r "$lock"
"$venv/bin/python" -m pip install --quiet --no-deps -e .
"$venv/bin/python" -m pip check
