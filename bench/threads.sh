#!/bin/sh
# threads.sh -- instructions per record on each thread of a threaded engine run
# (callgrind, deterministic, unlike the machine's timings): the busiest thread
# bounds the wall-clock speed, the sum is the work.
#
#   python -m bench threads [-o RESULT.json] BENCH_ENGINE THREADS FILE.raw...
#
# BENCH_ENGINE is a build of tests/bench_engine.c (`make -C sim/_engine bench-c`).  For
# each file, functional and timing: the calling thread's instructions per record (the
# setup, measured on a 10-record prefix of the first file, subtracted) and each
# worker's.  With -o, the figures also go to a result file written by
# kvsim.provenance.write_result (commit, machine, date), through $PYTHON (default:
# python3; it must import kvsim, e.g. PYTHON=.venv/bin/python).
set -eu
cmd="$(basename "$0") $*" # for the result file
out=
if [ "${1:-}" = -o ]; then out=$2; shift 2; fi
bin=$1
threads=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 240 "$1" > "$tmp/setup.raw"
# the per-thread instruction totals of one run, calling thread first
perthread() {
    rm -f "$tmp"/cg*
    KVSIM_THREADS=$threads valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$tmp/cg" "$bin" "$1" "$2" > /dev/null 2>&1
    for f in "$tmp"/cg-*; do sed -n 's/^summary: *//p' "$f"; done | tr '\n' ' '
}
printf '%-24s %9s  %-10s %s\n' file records mode "instructions/record: caller | workers"
s0=$(perthread "$tmp/setup.raw" 0 | cut -d' ' -f1)
s1=$(perthread "$tmp/setup.raw" 1 | cut -d' ' -f1)
for f in "$@"; do
    n=$(( $(wc -c < "$f") / 24 ))
    for mode in 0 1; do
        if [ "$mode" = 0 ]; then s=$s0; m=functional; else s=$s1; m=timing; fi
        set -- $(perthread "$f" $mode)
        line=$(printf '%.1f |' "$(echo "($1 - $s) / $n" | bc -l)")
        shift
        for w in "$@"; do line="$line $(printf '%.1f' "$(echo "$w / $n" | bc -l)")"; done
        printf '%-24s %9d  %-10s %s\n' "$(basename "$f")" "$n" "$m" "$line"
        echo "$(basename "$f") $n $m $line" >> "$tmp/rows"
    done
done
[ -z "$out" ] && exit 0
"${PYTHON:-python3}" - "$out" "$threads" "$s0" "$s1" "$tmp/rows" "$cmd" <<'PY'
import sys
from kvsim import provenance
out, threads, s0, s1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = []
rows_file, cmd = sys.argv[-2:]
sys.argv = cmd.split()  # the command the result file records
for line in open(rows_file).read().splitlines():
    name, n, mode, rest = line.split(None, 3)
    caller, workers = rest.split("|")
    rows.append({"file": name, "records": int(n), "mode": mode, "caller": float(caller),
                 "workers": [float(w) for w in workers.split()]})
provenance.write_result(out, {
    "benchmark": "sim/_engine/bench/threads.sh",
    "units": "instructions per record of the whole file, per thread (callgrind); the "
             "calling thread's with the setup subtracted",
    "threads": threads,
    "setup_instructions": {"functional": s0, "timing": s1},
    "files": rows,
})
print(f"# wrote {out}")
PY
