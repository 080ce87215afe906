#!/bin/sh
# instructions.sh -- engine instructions per record (callgrind: deterministic, unlike
# the machine's timings), functional and with timing, for raw record files.
#
#   python -m bench instructions [-o RESULT.json] BENCH_ENGINE FILE.raw...
#
# BENCH_ENGINE is a build of tests/bench_engine.c (`make -C sim/_engine bench-c`, or the
# same from another commit's tree to compare).  FILE.raw is a kvtRecord array, e.g.
# `python -c "from kvsim import traces; traces.read_all('t.kvt')[:1000000].tofile('t.raw')"`.
# The setup (allocating and clearing the simulated caches) is measured on a 10-record
# prefix of the first file and subtracted.  With -o, the figures also go to a result file
# written by kvsim.provenance.write_result (commit, machine, date), through $PYTHON
# (default: python3; it must import kvsim, e.g. PYTHON=.venv/bin/python).
set -eu
cmd="$(basename "$0") $*" # for the result file
out=
if [ "${1:-}" = -o ]; then out=$2; shift 2; fi
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
    line=$(printf '%-28s %10d %12.1f %12.1f' "$(basename "$f")" "$n" \
        "$(echo "($f0 - $s0) / $n" | bc -l)" "$(echo "($f1 - $s1) / $n" | bc -l)")
    echo "$line"
    echo "$line" >> "$tmp/rows"
done
[ -z "$out" ] && exit 0
"${PYTHON:-python3}" - "$out" "$s0" "$s1" "$tmp/rows" "$cmd" <<'PY'
import sys
from kvsim import provenance
out, s0, s1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
rows_file, cmd = sys.argv[-2:]
sys.argv = cmd.split()  # the command the result file records
for line in open(rows_file).read().splitlines():
    name, n, f, t = line.split()
    rows.append({"file": name, "records": int(n), "functional": float(f), "timing": float(t)})
provenance.write_result(out, {
    "benchmark": "sim/_engine/bench/instructions.sh",
    "units": "instructions per record (callgrind I refs, the setup subtracted), one thread",
    "setup_instructions": {"functional": s0, "timing": s1},
    "files": rows,
})
print(f"# wrote {out}")
PY
