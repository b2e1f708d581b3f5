#!/usr/bin/env bash
# usage: tools/with_method.sh RECIPE METHOD
# Prints a recipes/gguf/ recipe with `method: METHOD` on its rules for the blocks' matrices (the
# rules whose match names blk.*): the same mix by another method (rtn: the recipe as it is).
awk -v m="$2" '/^  - match:/ { blk = /blk\./ } { print } blk && m != "rtn" && /^    scheme:/ { print "    method: " m }' "$1"
