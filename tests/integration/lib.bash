# What every end-to-end script starts with (sourced, not run: make check runs *.sh only).
#   LMQ        the command under test (default build/lmq); FIX the fixtures folder
#   tmp        a fresh folder for this script's files, removed on exit
#   fail MSG   stops the script, naming it
#   run STATUS CMD...   runs CMD with its output in $tmp/out; fails unless it exits with STATUS
#   has TEXT   fails unless $tmp/out holds TEXT
set -euo pipefail

LMQ=${LMQ:-build/lmq}
FIX=${LMQ_FIXTURES:-../shared/fixtures}
SCRIPT=$(basename "$0")
tmp=$(mktemp -d "/tmp/lmq-${SCRIPT%.sh}-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() { echo "$SCRIPT: FAIL: $*" >&2; exit 1; }

run() {
    local want=$1 got=0
    shift
    "$@" >"$tmp/out" 2>&1 || got=$?
    [ "$got" = "$want" ] || { cat "$tmp/out" >&2; fail "'$*' exited $got, expected $want"; }
}
has() { grep -qF -- "$1" "$tmp/out" || { cat "$tmp/out" >&2; fail "output lacks: $1"; }; }
