#!/usr/bin/env bash
# Install goagent-py for development from the committed locks (scripts/lock.sh writes them):
#
#     bash scripts/install.sh                # .venv: every extra CI installs, dev tools included
#     bash scripts/install.sh --core DIR     # DIR: only the core and the dev extra
#
# Every package comes pinned with its hash (pip --require-hashes), then the project itself goes
# in editable without touching them (--no-deps). What pip builds is built with pinned tools
# (requirements-build.txt): the project, and llama-cpp-python, which has no wheel for Linux and
# is built from source on the first install (a few minutes on 2 cores; pip caches the wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

lock=requirements-lock.txt
if [ "${1:-}" = --core ]; then
    lock=requirements-core-lock.txt
    shift
fi
venv=${1:-.venv}

python3 -m venv "$venv"
py="$venv/bin/python"
# First pip itself, at the version and hash the full lock gives it: the pip a new virtualenv
# comes with may be too old for --build-constraint.
pip_pin=$(mktemp)
trap 'rm -f "$pip_pin"' EXIT
awk '/^pip==/ { on = 1 } on { print; if ($0 !~ /\\$/) exit }' requirements-lock.txt >"$pip_pin"
"$py" -m pip install --quiet --require-hashes --no-deps -r "$pip_pin"
"$py" -m pip install --quiet --require-hashes --build-constraint requirements-build.txt -r "$lock"
"$py" -m pip install --quiet --no-deps --build-constraint requirements-build.txt -e .
"$py" -m pip check
