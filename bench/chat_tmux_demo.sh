#!/bin/bash
# Drive `goagent-py chat` on the embedded model in tmux, with a fresh data folder (issue 19's
# "Must show"): arithmetic, time, two facts told, /exit, a new process asked about them.
#   bench/chat_tmux_demo.sh [OUT]   (default docs/notes/recall-tmux.txt; needs tmux)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV_BIN=$(dirname "$(command -v goagent-py || echo /work/main/.venv/bin/goagent-py)")
S=recalldemo
HOME_DIR=$(mktemp -d /tmp/goagent-demo-XXXX)
OUT=${1:-$ROOT/docs/notes/recall-tmux.txt}
tmux kill-session -t $S 2>/dev/null
tmux new-session -d -s $S -x 160 -y 60 "env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u OPENAI_BASE_URL GOAGENT_HOME=$HOME_DIR HF_HUB_OFFLINE=1 PATH=$VENV_BIN:/usr/bin:/bin PYTHONPATH=$ROOT PS1='$ ' bash --norc"
wait_prompt() {  # wait until the last non-empty line is the chat prompt (or the shell's)
  local want=$1
  for _ in $(seq 1 600); do
    last=$(tmux capture-pane -p -t $S | sed -e 's/[[:space:]]*$//' -e '/^$/d' | tail -1)
    [[ "$last" == "$want" ]] && return 0
    sleep 1
  done
  echo "timeout waiting for $want" >&2
}
say() { tmux send-keys -t $S -l "$1"; tmux send-keys -t $S Enter; sleep 1; wait_prompt "you>"; }
wait_prompt '$'
tmux send-keys -t $S "echo data folder: \$GOAGENT_HOME; goagent-py chat --provider local" Enter
sleep 2; wait_prompt "you>"
say "What is 17 * 23 + 4?"
say "What time is it now?"
say "Hello! My name is Priya and I live in Lisbon."
say "I was born in Goa, in India."
tmux send-keys -t $S "/exit" Enter; sleep 1; wait_prompt '$'
tmux send-keys -t $S "goagent-py chat --provider local" Enter
sleep 2; wait_prompt "you>"
say "Where was I born?"
say "Where do I live?"
say "What is my name?"
say "/memory"
tmux send-keys -t $S "/exit" Enter; sleep 1; wait_prompt '$'
tmux capture-pane -p -S - -t $S | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > "$OUT"
tmux kill-session -t $S
rm -rf "$HOME_DIR"
