#!/usr/bin/env bash
# make install into a temporary PREFIX (liblmq.so exporting include/lmq.h's calls only), then, from
# a clean directory, a small C program built against the installed copy with pkg-config alone
# (shared, and with liblmq.a) converts, quantises, verifies, audits and exports a fixture model;
# its perplexities are the lmq command's; its errors are values naming the file; the installed
# man page renders.
. "$(dirname "$0")/lib.bash"
need_fixtures

BUILD=$(dirname "$LMQ")
prefix="$tmp/prefix"
make -s BUILD="$BUILD" ${LMQ_SAN:+SAN=$LMQ_SAN} ${LMQ_SAN:+OPT="$LMQ_OPT"} install PREFIX="$prefix" >"$tmp/make.log" 2>&1 ||
    { cat "$tmp/make.log" >&2; fail "make install"; }
for f in bin/lmq lib/liblmq.a lib/liblmq.so include/lmq.h lib/pkgconfig/lmq.pc share/man/man1/lmq.1; do
    [ -s "$prefix/$f" ] || fail "$f not installed"
done
# The shared library's interface is include/lmq.h's calls, nothing else.
nm -D --defined-only "$prefix/lib/liblmq.so" | awk '{ print $3 }' | sort >"$tmp/exported"
sed -n 's/^LMQ_API .*[ *]\(lmq_[a-z0-9_]*\)(.*/\1/p' include/lmq.h | sort >"$tmp/declared"
[ -s "$tmp/declared" ] || fail "no LMQ_API calls read from include/lmq.h"
diff "$tmp/declared" "$tmp/exported" >"$tmp/exports.diff" ||
    { cat "$tmp/exports.diff" >&2; fail "liblmq.so exports other symbols than include/lmq.h declares"; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists lmq || fail "pkg-config does not find lmq"
[ "$(pkg-config --modversion lmq)" = "$("$prefix/bin/lmq" --help >/dev/null; sed -n 's/.*LMQ_TOOL_VERSION "lmq \(.*\)".*/\1/p' formats/manifest.h)" ] ||
    fail "lmq.pc's version is not the tool's"
pkg-config --static --libs lmq | grep -q -- -lzstd || fail "lmq.pc: no private libraries for static links"

fix=$(cd "$FIX" && pwd)
text="$tmp/text.txt" # a part of the text: the comparison below needs no more
head -c 30000 "$fix/text/tinystories-valid.txt" >"$text"
recipe=$(pwd)/recipes/int4-channel.yaml # per channel: exported groups must divide ffn_down's 172 columns
app="$tmp/app"
mkdir "$app"
cat >"$app/app.c" <<'C'
#include <lmq.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call) do { if ((call) != LMQ_STATUS_OK) { \
    fprintf(stderr, "%s: %s (%s)\n", #call, st.message, lmq_status_name(st.code)); return 1; } } while (0)

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    const char *src = argv[1], *recipe = argv[2], *text = argv[3], *dir = argv[4];
    char fp[1024], q[1024], ct[1024];
    snprintf(fp, sizeof fp, "%s/s.lmq", dir);
    snprintf(q, sizeof q, "%s/q.lmq", dir);
    snprintf(ct, sizeof ct, "%s/ct", dir);
    lmq_status st;
    CHECK(lmq_convert_file(src, fp, NULL, &st));
    CHECK(lmq_quantize_file(fp, recipe, q, &(lmq_quantize_options){ .threads = 1 }, &st));
    lmq_verify_report *r;
    const char *cands[] = { q };
    CHECK(lmq_verify(fp, cands, 1, text, &(lmq_verify_options){ .ctx = 64 }, &r, &st));
    for (int i = 0; i < lmq_verify_rows(r); i++) {
        lmq_verify_row row;
        CHECK(lmq_verify_row_get(r, i, &row));
        printf("row %s ppl %.4f top1 %.4f kl %.3g bpw %.3f scheme %s\n", strrchr(row.path, '/') + 1, row.ppl,
               row.top1, row.kl_mean, row.linear_bpw, row.scheme);
    }
    lmq_verify_free(r);
    lmq_audit_report *a;
    CHECK(lmq_audit(q, &a, &st));
    printf("audit problems %d\n", lmq_audit_problems(a));
    lmq_audit_free(a);
    lmq_artefact *art;
    CHECK(lmq_artefact_open(q, &art, &st));
    size_t n;
    const char *man = lmq_artefact_manifest(art, &n);
    printf("tensors %d manifest %s\n", lmq_artefact_tensors(art), memmem(man, n, "int4", 4) ? "int4" : "?");
    lmq_artefact_close(art);
    CHECK(lmq_export_compressed_tensors(q, ct, &st));
    /* Errors are values: a missing source is reported, named, and nothing is written. */
    int code = lmq_convert_file("/nonexistent/model.bin", fp, NULL, &st);
    printf("missing: code %d %s: %s\n", code, lmq_status_name(st.code), strstr(st.message, "/nonexistent") ? "named" : st.message);
    printf("%s ok\n", lmq_version());
    return 0;
}
C
cd "$app"
san=${LMQ_SAN:+-fsanitize=address,undefined}
# Shared: -llmq finds liblmq.so; static: the archive, with the private libraries it needs.
cc -std=c11 -D_GNU_SOURCE $san -o app-shared app.c $(pkg-config --cflags --libs lmq) -Wl,-rpath,"$prefix/lib" ||
    fail "shared build"
cc -std=c11 -D_GNU_SOURCE $san -o app-static app.c $(pkg-config --cflags lmq) \
    $(pkg-config --static --libs lmq | sed 's/-llmq\b/-l:liblmq.a/') || fail "static build"
ldd app-shared >ldd.txt # (a file: grep -q stopping early could fail the pipe under pipefail)
grep -q "liblmq.so => $prefix/lib/liblmq.so" ldd.txt || fail "app-shared does not load the installed liblmq.so"
ldd app-static | grep -q liblmq && fail "app-static loads liblmq"
for kind in shared static; do
    mkdir "$app/$kind"
    ./app-$kind "$fix/stories260K/stories260K.bin" "$recipe" "$text" "$app/$kind" \
        >"$app/$kind.out" 2>&1 || { cat "$app/$kind.out" >&2; fail "app-$kind"; }
done
cd - >/dev/null
cmp -s "$app/shared.out" "$app/static.out" || { diff "$app/shared.out" "$app/static.out" >&2; fail "shared and static differ"; }
out="$app/shared.out"
grep -qx "audit problems 0" "$out" || fail "audit found problems"
grep -qx "missing: code 1 i/o error: named" "$out" || { cat "$out" >&2; fail "a missing source is not an i/o error naming it"; }
grep -q "^tensors 48 manifest int4$" "$out" || { cat "$out" >&2; fail "artefact handle"; }
[ -s "$app/shared/ct/model.safetensors" ] && grep -qF '"pack-quantized"' "$app/shared/ct/config.json" || fail "export"
# The perplexities are the lmq command's on the same files.
"$LMQ" verify "$app/shared/s.lmq" "$app/shared/q.lmq" --text "$text" --ctx 64 >"$tmp/v"
for f in s q; do # the table's PPL: the field before dPPL %, the first signed number
    want=$(awk -v f=$f.lmq '$1 == f {for (i = 2; i <= NF; i++) if ($i ~ /^[+-][0-9]/) {print $(i - 1); exit}}' "$tmp/v")
    got=$(awk -v f=$f.lmq '$1 == "row" && $2 == f {print $4}' "$out")
    [ -n "$want" ] && [ "$want" = "$got" ] || { cat "$tmp/v" "$out" >&2; fail "$f.lmq: PPL $got, lmq verify says $want"; }
done

# The man page renders, one section per command, without warnings.
MANWIDTH=100 man -l "$prefix/share/man/man1/lmq.1" >"$tmp/man" 2>"$tmp/man.err" || fail "man -l"
[ -s "$tmp/man.err" ] && { cat "$tmp/man.err" >&2; fail "man warns"; }
for c in convert quantize verify audit export; do
    grep -q "^   lmq $c\$" "$tmp/man" || fail "man page has no section for $c"
done
grep -qF -- "--recipe R.yaml" "$tmp/man" || fail "man page lacks quantize's options"
echo "install.sh: ok"
