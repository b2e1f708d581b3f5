# What every end-to-end script starts with (sourced, not run: make check runs *.sh only).
#   LMQ        the command under test (default build/lmq); FIX the fixtures folder
#   tmp        a fresh folder for this script's files, removed on exit
#   fail MSG   stops the script, naming it
#   run STATUS CMD...   runs CMD with its output in $tmp/out; fails unless it exits with STATUS
#   has TEXT   fails unless $tmp/out holds TEXT
#   need_fixtures   skips the script on a clone without the fixtures folder (fails under CI=true)
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

# Fixtures come from outside the repository. A script that needs them calls this first: without
# the folder it is skipped (a SKIP line, also in $LMQ_SKIP_LOG when set), unless CI=true.
need_fixtures() {
    [ -d "$FIX" ] && return 0
    [ "${CI:-}" != true ] || fail "the fixtures folder $FIX is absent, and CI=true wants every test run"
    echo "SKIP $SCRIPT: needs the fixtures folder $FIX (fixtures are ../shared/fixtures beside the repository, described by its PROVENANCE.md; LMQ_FIXTURES names another place)" >&2
    [ -z "${LMQ_SKIP_LOG:-}" ] || echo "$SCRIPT: needs the fixtures folder" >>"$LMQ_SKIP_LOG"
    exit 0
}
