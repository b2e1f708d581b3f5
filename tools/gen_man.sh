#!/usr/bin/env bash
# Writes the lmq(1) man page (roff) on stdout from the command's own help texts, so the page
# lists exactly the options the commands parse: `lmq --help` gives the overview and the list of
# commands, `lmq COMMAND --help` each command's section.
# usage: tools/gen_man.sh LMQ VERSION
set -euo pipefail
lmq=$1 version=$2

# Help text as literal roff: backslashes and hyphens escaped, a control character at the start
# of a line neutralised.
lit() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

overview=$("$lmq" --help)
# Command names: the overview's entries, "  lmq NAME ..." or "  NAME ...".
commands=$(printf '%s\n' "$overview" | sed -n -E 's/^  (lmq )?([a-z][a-z-]*)( .*)?$/\2/p' | awk '!seen[$0]++')
[ -n "$commands" ] || { echo "gen_man.sh: no commands in '$lmq --help'" >&2; exit 1; }

cat <<ROFF
.TH LMQ 1 "" "lmq $version" "User Commands"
.SH NAME
lmq \\- quantise language models and prove what they are worth
.SH SYNOPSIS
.B lmq
.I COMMAND
.RI [ ARGS ]
.br
.B lmq
.I COMMAND
.B \\-\\-help
.SH DESCRIPTION
lmq converts fp32 language-model checkpoints into quantised artefacts, runs them on a CPU
runtime, verifies their quality against a reference (perplexity, top-1 agreement, KL
divergence), audits them and exports them to other runtimes.
.PP
.nf
$(printf '%s\n' "$overview" | lit)
.fi
.SH COMMANDS
ROFF
for c in $commands; do
    printf '.SS lmq %s\n.nf\n' "$c"
    "$lmq" "$c" --help | lit
    printf '.fi\n'
done
cat <<'ROFF'
.SH EXIT STATUS
0 on success, 1 on failure (the message names the file, tensor or line), 2 on a usage error;
.B lmq audit
has one code per failure kind (its section above and the README).
.SH FILES
The library: include/lmq.h, liblmq.a, liblmq.so and lmq.pc
.RB ( "pkg\-config \-\-cflags \-\-libs lmq" ).
.SH SEE ALSO
README.md, recipes/README.md and formats/CONTAINER.md in the source tree.
ROFF
