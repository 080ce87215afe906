#!/bin/sh
# instructions.sh -- engine instructions per record (callgrind: deterministic, unlike
# the machine's timings), functional and with timing, for raw record files.
#
#   sh sim/_engine/bench/instructions.sh BENCH_ENGINE FILE.raw...
#
# BENCH_ENGINE is a build of tests/bench_engine.c (`make -C sim/_engine bench-c`, or the
# same from another commit's tree to compare).  FILE.raw is a kvtRecord array, e.g.
# `python -c "import traces; traces.read_all('t.kvt')[:1000000].tofile('t.raw')"`.
# The setup (allocating and clearing the simulated caches) is measured on a 10-record
# prefix of the first file and subtracted.
set -eu
bin=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 240 "$1" > "$tmp/setup.raw"
refs() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
         sed -n 's/.*I *refs: *//p' | tr -d ,; }
printf '%-28s %10s %12s %12s\n' file records functional timing
s0=$(refs "$tmp/setup.raw" 0)
s1=$(refs "$tmp/setup.raw" 1)
for f in "$@"; do
    n=$(( $(wc -c < "$f") / 24 ))
    f0=$(refs "$f" 0)
    f1=$(refs "$f" 1)
    printf '%-28s %10d %12.1f %12.1f\n' "$(basename "$f")" "$n" \
        "$(echo "($f0 - $s0) / $n" | bc -l)" "$(echo "($f1 - $s1) / $n" | bc -l)"
done
