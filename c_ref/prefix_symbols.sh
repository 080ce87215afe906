#!/bin/sh
# prefix_symbols.sh OUT IN.o...: link the objects into one relocatable object OUT with
# every defined global symbol renamed tr_<name>, so the traced build of c_ref links into
# one program beside the native build (used by the Makefile and CMakeLists.txt).
set -eu
out=$1; shift
ld -r -o "$out.raw.o" "$@"
nm -g --defined-only "$out.raw.o" | awk '{print $3" tr_"$3}' > "$out.syms"
objcopy --redefine-syms="$out.syms" "$out.raw.o" "$out"
rm -f "$out.raw.o" "$out.syms"
