#!/usr/bin/env bash
# Which folder depends on which: the #include edges between the folders' sources, and the calls
# between their objects (each object's undefined symbols, resolved to the object defining them),
# each edge with its count; then every edge that points up the floors (docs/ARCHITECTURE.md) or
# sideways to another folder of the same floor. An edge that only ever points down cannot close
# a circle between folders, so none is left to find. Exits 1 when there is such an edge.
#
# usage: tools/deps-graph.sh BUILD FLOORS...
#   BUILD   the build folder whose objects are read (make builds them first)
#   FLOORS  the floors from the bottom, a word each; folders sharing a floor joined by commas
#           (the Makefile's FLOORS: make deps-graph)
# A subfolder is its top folder's (runtime/cuda is runtime's). tests/ is not part of the house.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
shift
dirs=$(echo "$@" | tr ', ' '\n\n')
floors="$*"

# Lines "FILE FROM_DIR TO_DIR WHAT" on stdin: the edge counts, and the edges against the floors
# on stderr.
judge() {
    awk -v floors="$floors" '
        BEGIN { n = split(floors, f, " "); for (i = 1; i <= n; i++) { m = split(f[i], d, ","); for (j = 1; j <= m; j++) fl[d[j]] = i } }
        function top(p) { sub(/\/.*/, "", p); return p }
        { from = top($2); to = top($3) }
        !(from in fl) || !(to in fl) { next }
        { edges[from " -> " to]++ }
        from != to && fl[to] >= fl[from] {
            print "  " $1 ": " $4 " " $5 " (" (fl[to] > fl[from] ? "up" : "sideways") " from " from " to " to ")" > "/dev/stderr"
        }
        END { for (e in edges) printf "  %-28s %4d\n", e, edges[e] | "sort" }'
}

problems=$(mktemp)
trap 'rm -f "$problems"' EXIT

echo "== includes between folders"
srcs=$(for d in $dirs; do if [ -d "$d" ]; then find "$d" -name '*.[ch]' -o -name '*.cu'; fi; done | sort)
grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $srcs |
    sed 's/^\([^:]*\):.*"\([^"]*\)".*/\1 \2/' |
    awk '{ f = $1; d = f; sub(/\/[^\/]*$/, "", d); t = $2; sub(/\/[^\/]*$/, "", t); print f, d, t, "includes " $2 }' |
    judge 2>>"$problems"

echo "== calls between folders (objects in $build)"
objs=$(for d in $dirs; do if [ -d "$build/$d" ]; then find "$build/$d" -name '*.o'; fi; done | sort)
[ -n "$objs" ] || { echo "deps-graph: no objects under $build (make first)" >&2; exit 2; }
# "path.o:[address] type symbol" for every object at once; definitions first, then the uses.
nm -A $objs | awk -v b="$build/" '
    { f = $1; sub(/:.*/, "", f); sub("^" b, "", f); d = f; sub(/\/[^\/]*$/, "", d); sym = $NF; type = $(NF - 1) }
    type ~ /^[TDBR]$/ { def[sym] = d }
    type == "U" { use[++n] = f " " d " " sym }
    END { for (i = 1; i <= n; i++) { split(use[i], u, " "); if (u[3] in def) print u[1], u[2], def[u[3]], "calls " u[3] } }' |
    judge 2>>"$problems"

if [ -s "$problems" ]; then
    echo "== edges against the floors"
    sort -u "$problems"
    exit 1
fi
echo "== every edge points down the floors: $floors"
