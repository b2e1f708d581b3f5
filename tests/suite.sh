#!/usr/bin/env bash
# make check's runner for one suite (the Makefile's check section): runs CMD with its output in
# LOG, then prints one line: PASS, or SKIP for exit 77 (a suite with nothing to run here, as
# test_cuda without a device), with the suite's wall and CPU seconds, followed by the SKIP lines
# of single tests the log holds (fixtures absent). On failure it prints the whole log and exits
# with CMD's status.
#   tests/suite.sh NAME LOG CMD...
name=$1 log=$2
shift 2
TIMEFORMAT='%R %U %S'
st=0
t=$({ time "$@" >"$log" 2>&1; } 2>&1) || st=$?
read -r wall user sys <<<"$t"
case $st in
0) verdict=PASS ;;
77) verdict=SKIP ;;
*)
    cat "$log"
    echo "FAIL $name: exit $st after $wall s (its output above and in $log)"
    exit "$st"
    ;;
esac
awk -v v="$verdict" -v n="$name" -v w="$wall" -v u="$user" -v s="$sys" \
    'BEGIN { printf "%s %-26s %7.1f s wall %7.1f s CPU\n", v, n, w, u + s }'
grep -E '^SKIP|: SKIP' "$log" | sed 's/^/    /'
exit 0
