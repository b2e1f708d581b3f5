#!/usr/bin/env bash
# lmq verify --html end to end, in a headless browser: a report of three stories260K artefacts
# (one named with HTML's special characters) is rendered by Chromium; the screenshot must be a
# PNG of the window's size whose pixels are not all alike (a blank page is checked to fail that
# test), and the DOM Chromium parsed must hold every table row, the plots and the escaped name
# as text. Without Chromium the script skips, except under CI=true, where it fails.
# With arguments, PAGE.html PNG [WIDTH,HEIGHT], it renders that page to PNG instead, with the same
# checks on the screenshot (the README's docs/demo-report.png is out/demo/report.html so rendered).
. "$(dirname "$0")/lib.bash"
need_fixtures

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    [ "${CI:-}" = true ] && fail "chromium is not installed (.ci/run installs it)"
    echo "html_report.sh: SKIP: chromium not found (apt-get install chromium)"
    exit 0
fi
# One headless run: no network, no profile left behind, no GPU.
chrome() {
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$tmp/profile-XXXXXX")" \
        "$@" 2>>"$tmp/chrome.log"
}

# png_pixels FILE: "WIDTH HEIGHT DISTINCT": the IHDR size, and how many distinct byte values the
# decompressed scanlines hold (a uniform image has a handful: filter bytes and one colour). The
# IDAT chunks' zlib stream is inflated by gzip behind a gzip header (its missing trailer makes
# gzip complain after writing everything); its length must be the scanlines' exact size.
png_pixels() {
    local f=$1 off=8 size len type w h depth ctype
    [ "$(od -An -tx1 -N8 "$f" | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "not a PNG"; return; }
    size=$(stat -c %s "$f")
    w=$((16#$(od -An -tx1 -j16 -N4 "$f" | tr -d ' \n')))
    h=$((16#$(od -An -tx1 -j20 -N4 "$f" | tr -d ' \n')))
    depth=$((16#$(od -An -tx1 -j24 -N1 "$f" | tr -d ' \n')))
    ctype=$((16#$(od -An -tx1 -j25 -N1 "$f" | tr -d ' \n')))
    local channels=([0]=1 [2]=3 [4]=2 [6]=4)
    : >"$tmp/idat"
    while [ "$off" -lt "$size" ]; do
        len=$((16#$(od -An -tx1 -j"$off" -N4 "$f" | tr -d ' \n')))
        type=$(dd if="$f" bs=1 skip=$((off + 4)) count=4 2>/dev/null)
        [ "$type" = IDAT ] && tail -c +$((off + 9)) "$f" | head -c "$len" >>"$tmp/idat"
        off=$((off + 12 + len))
    done
    { printf '\037\213\010\000\000\000\000\000\000\003'; tail -c +3 "$tmp/idat"; } | gzip -dc 2>/dev/null >"$tmp/raw" || true
    local want=$((h * (1 + w * ${channels[$ctype]:-0} * depth / 8)))
    [ "$(stat -c %s "$tmp/raw")" = "$want" ] || { echo "scanlines: $(stat -c %s "$tmp/raw") bytes, want $want"; return; }
    echo "$w $h $(od -An -v -tu1 -w1 "$tmp/raw" | sort -u | wc -l)"
}

# shot PAGE PNG WIDTH HEIGHT: a screenshot of the page, checked to be of that size and not blank.
shot() {
    chrome --screenshot="$2" --window-size="$3,$4" "file://$(realpath "$1")" >/dev/null
    local w h distinct
    read -r w h distinct <<<"$(png_pixels "$2")"
    [ "$w $h" = "$3 $4" ] || fail "screenshot of $1: $w $h $distinct"
    [ "$distinct" -ge 64 ] || fail "screenshot of $1 looks blank: $distinct distinct byte values"
}
if [ $# -gt 0 ]; then
    size=${3:-1400,1800}
    shot "$1" "$2" "${size%,*}" "${size#*,}"
    echo "html_report.sh: $2 written"
    exit 0
fi

"$LMQ" convert "$FIX/stories260K/stories260K.bin" -o "$tmp/s.lmq" >/dev/null
odd='a<b>&"c'"'"'d'
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int4-g32.yaml -o "$tmp/s-int4.lmq" >/dev/null
"$LMQ" quantize "$tmp/s.lmq" --recipe recipes/int8-channel.yaml -o "$tmp/$odd.lmq" >/dev/null
head -c 40000 "$FIX/text/tinystories-valid.txt" >"$tmp/text.txt"
"$LMQ" verify "$tmp/s.lmq" "$tmp/s-int4.lmq" "$tmp/$odd.lmq" --text "$tmp/text.txt" --bandwidth 10 \
    --html "$tmp/report.html" >/dev/null
page="$tmp/report.html"

# Self-contained: no script, nothing fetched; the odd name only as escaped text.
! grep -qiE '<script|<link|src=|href=|url\(' "$page" || fail "the page refers to something outside it"
grep -qF 'a&lt;b&gt;&amp;&quot;c&#39;d.lmq' "$page" || fail "odd name not escaped"
! grep -qF '<b>&' "$page" || fail "odd name written raw"

start=$(date +%s.%N)
shot "$page" "$tmp/shot.png" 1280 1600
# The check itself: a page with nothing on it must fail it.
echo '<!DOCTYPE html><html><body style="background:#fff"></body></html>' >"$tmp/blank.html"
chrome --screenshot="$tmp/blank.png" --window-size=320,200 "file://$tmp/blank.html" >/dev/null
read -r bw bh bdistinct <<<"$(png_pixels "$tmp/blank.png")"
[ "$bw $bh" = "320 200" ] && [ "$bdistinct" -lt 8 ] || fail "blank page: $bw $bh $bdistinct"

# The DOM as Chromium parsed it: the heading and three rows of the main table, two candidates
# in the KL table, the plots, and the odd name as text (not as a <b> element).
chrome --dump-dom "file://$page" >"$tmp/dom.html"
rows=$(grep -o "<tr>" "$tmp/dom.html" | wc -l)
[ "$rows" = 7 ] || fail "DOM: $rows table rows, want 7 (2 headings, 3 + 2 rows)"
svgs=$(grep -o '<svg' "$tmp/dom.html" | wc -l)
[ "$svgs" = 7 ] || fail "DOM: $svgs svg elements, want 7 (4 quality plots, KL distribution, 2 error plots)"
grep -qF '<td>a&lt;b&gt;&amp;"c'"'"'d.lmq</td>' "$tmp/dom.html" || fail "DOM: odd name not text"
! grep -q '<b>' "$tmp/dom.html" || fail "DOM: the odd name became markup"
echo "html_report.sh: ok (chromium $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s)"
