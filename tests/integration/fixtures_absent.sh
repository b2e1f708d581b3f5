#!/usr/bin/env bash
# A clone without the fixtures folder: a Check suite skips the tests that need a fixture (a SKIP
# line naming the test, the fixture and where fixtures come from; one line each in
# $LMQ_SKIP_LOG) and passes, a script that needs them skips the same way; under CI=true both fail.
. "$(dirname "$0")/lib.bash"

suite=$(dirname "$LMQ")/tests/test_llama2c # built by make check before the scripts run
[ -x "$suite" ] || fail "$suite is not built"
none=$tmp/no-fixtures
run 0 env -u CI LMQ_FIXTURES="$none" LMQ_SKIP_LOG="$tmp/skip.log" "$suite"
has "SKIP (loads_stories260k): needs fixture stories260K/stories260K.bin; the fixtures folder $none is absent"
has "fixtures are ../shared/fixtures beside the repository"
# Every test of this suite reads stories260K: each is skipped, once.
n=$(grep -c '^SKIP (' "$tmp/out")
[ "$n" -ge 1 ] && [ "$(wc -l <"$tmp/skip.log")" = "$n" ] || fail "$n SKIP lines, $(wc -l <"$tmp/skip.log") logged"
run 1 env CI=true LMQ_FIXTURES="$none" LMQ_SKIP_LOG="$tmp/skip-ci.log" "$suite"
has "the fixtures folder $none is absent, and CI=true wants every test run"
[ ! -e "$tmp/skip-ci.log" ] || fail "CI=true logged a skip"

run 0 env -u CI LMQ_FIXTURES="$none" LMQ_SKIP_LOG="$tmp/skip2.log" LMQ="$LMQ" bash tests/integration/verify.sh
has "SKIP verify.sh: needs the fixtures folder $none"
grep -qx "verify.sh: needs the fixtures folder" "$tmp/skip2.log" || fail "verify.sh's skip is not logged"
run 1 env CI=true LMQ_FIXTURES="$none" LMQ="$LMQ" bash tests/integration/verify.sh
has "the fixtures folder $none is absent, and CI=true wants every test run"
echo "$SCRIPT: ok"
