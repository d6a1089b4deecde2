#!/usr/bin/env bash
# The Lisbon -> Porto conversation of issue 31 in three processes of `goagent-py chat --provider
# local` (the embedded model, a fresh data folder), piped; prints a transcript.
#   bash bench/memory_truth/lisbon_porto.sh > docs/notes/lisbon-porto.txt
#   DECIDER=none bash bench/memory_truth/lisbon_porto.sh   # the behaviour before issue 31
set -euo pipefail
PY=${PY:-python}
DECIDER=${DECIDER:-rules}
HOME_DIR=$(mktemp -d)
export GOAGENT_HOME=$HOME_DIR
run() {  # run SESSION LINE...: one process, one line of input each
    local session=$1
    shift
    echo "\$ goagent-py chat --provider local --session $session --memory-decider $DECIDER"
    for line in "$@"; do echo "> $line"; done
    printf '%s\n' "$@" | "$PY" -m goagent_py chat --provider local --session "$session" \
        --memory-decider "$DECIDER" 2>/dev/null \
        | sed 's/^/  /'
    echo
}
echo "# goagent-py chat --provider local, GOAGENT_HOME a fresh folder, $(date -u +%Y-%m-%d)"
echo
run day1 "I live in Lisbon."
run day2 "I moved to Porto last month."
run day3 "Where do I live?" "Where did I live before?" "/memory" "/memory history"
rm -rf "$HOME_DIR"
