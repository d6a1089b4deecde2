#!/usr/bin/env bash
# Refresh the locks CI and the set-up commands install from, on purpose:
#
#     bash scripts/lock.sh && bash .ci/run
#
# pyproject.toml keeps version ranges (the library's promise); these files pin the whole tree
# that CI installs, with hashes, so a new release of any package, direct or transitive, changes
# nothing until the locks are refreshed here, tested and committed:
#
#   requirements-lock.txt        every package of the extras below (pip install --require-hashes)
#   requirements-core-lock.txt   the core and the dev extra only (the core-only CI job), at the
#                                same versions as the full lock
#   requirements-build.txt       what pip builds with: llama-cpp-python (it ships no wheel for
#                                this machine: pip builds it from source) and the project itself;
#                                versions only (pip's --build-constraint takes no hashes)
#
# Resolved by uv for this interpreter and platform (CPython 3.11, Linux x86_64). torch is the
# CPU build that constraints.txt names; uv finds it in /opt/wheels where it lies on this kind of
# machine (pip, reading /etc/pip.conf, looks there too when it installs the lock).
set -euo pipefail
cd "$(dirname "$0")/.."

# The extras CI installs: every extra but the empty vendor ones and "all".
EXTRAS=(dev vector postgres qdrant chroma tiktoken simd local pdf mcp a2a otel-sdk temporal cli serve tui code docs)
# The [build-system] requires of what pip builds: llama-cpp-python (the only package of the lock
# built from source; scikit-build-core may add cmake and ninja) and this project (hatchling).
BUILD_REQUIRES=("scikit-build-core[pyproject]>=0.9.2" "cmake>=3.21" "ninja>=1.5" "hatchling")
UV_VERSION=0.13.8
PYTHON=${PYTHON:-python3}

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m venv "$tools/venv"
"$tools/venv/bin/python" -m pip install --quiet "uv==$UV_VERSION"
uv=("$tools/venv/bin/uv" pip compile --quiet --python "$PYTHON" --custom-compile-command "bash scripts/lock.sh")
links=()
if [ -d /opt/wheels ]; then links=(--find-links /opt/wheels); fi

extra_args=()
for extra in "${EXTRAS[@]}"; do extra_args+=(--extra "$extra"); done

# pip itself too: scripts/install.sh installs it first, from this lock.
echo pip | "${uv[@]}" pyproject.toml - "${extra_args[@]}" -c constraints.txt "${links[@]}" \
    --generate-hashes -o requirements-lock.txt
# The same versions as the full lock: the core-only job tests what the full job installs.
"${uv[@]}" pyproject.toml --extra dev -c requirements-lock.txt "${links[@]}" \
    --generate-hashes -o requirements-core-lock.txt
printf '%s\n' "${BUILD_REQUIRES[@]}" |
    "${uv[@]}" - -c requirements-lock.txt -o requirements-build.txt

echo "locked $(grep -c '^[a-z0-9]' requirements-lock.txt) packages," \
    "$(grep -c '^[a-z0-9]' requirements-core-lock.txt) for the core-only job;" \
    "now test them: bash .ci/run"
