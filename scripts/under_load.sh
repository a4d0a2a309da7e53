#!/usr/bin/env bash
# Runs a command with every core of the machine kept busy by other processes, as on a shared
# or loaded machine, and returns its exit status. Results must not change with load (a
# greedy reply, a logit, a test's verdict): CI runs the golden and CLI tests this way.
#
#   scripts/under_load.sh COMMAND [ARGS...]
#   HOGS=N   busy processes beside the command (default: one per core, nproc)
#
# The busy processes are plain shell loops; they are ended by their process ids when the
# command finishes or the script is interrupted.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/under_load.sh COMMAND [ARGS...]" >&2; exit 2; }
n="${HOGS:-$(nproc)}"
hogs=()
stop_hogs() {
  [ ${#hogs[@]} -eq 0 ] && return 0
  kill "${hogs[@]}" 2>/dev/null || true
  wait "${hogs[@]}" 2>/dev/null || true
  hogs=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
for ((i = 0; i < n; ++i)); do
  (while :; do :; done) &
  hogs+=($!)
done
echo "under_load.sh: ${n} busy processes (${hogs[*]}) beside: $*"
status=0
"$@" || status=$?
stop_hogs
exit "$status"
