#!/bin/sh
# bench.sh -- native benchmarks of the prefetch variants (prints figures; not a
# pass/fail test).  Each line: median wall seconds, median and minimum process
# CPU seconds (robust when the machine is shared) of the baseline and the
# variant, and the speedup (baseline / variant) for each statistic.  Sizes follow the issue's targets; SCALE=0.1
# runs everything at a tenth of the keys.
# Usage: sh bench/bench.sh build/kvsim-cref
set -u
B=${1:-build/kvsim-cref}
SCALE=${SCALE:-1}
R=${REPEAT:-3}
n() { awk -v a="$1" -v s="$SCALE" 'BEGIN{printf "%d", a*s}'; }
field() { sed "s/.*\"$1\":\([0-9.e+-]*\).*/\1/"; }
cpumin() { sed 's/.*"cpu_runs_s":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | sort -g | head -1; }

run() { # label baseline-variant variant workload args...
    label=$1; base=$2; var=$3; shift 3
    bj=$("$B" native "$@" --variant "$base" --repeat "$R" --json) || return
    vj=$("$B" native "$@" --variant "$var" --repeat "$R" --json) || return
    bw=$(echo "$bj" | field median_s); bc=$(echo "$bj" | field cpu_median_s); bm=$(echo "$bj" | cpumin)
    vw=$(echo "$vj" | field median_s); vc=$(echo "$vj" | field cpu_median_s); vm=$(echo "$vj" | cpumin)
    awk -v l="$label" -v b="$base" -v v="$var" -v bw="$bw" -v bc="$bc" -v vw="$vw" -v vc="$vc" -v bm="$bm" -v vm="$vm" 'BEGIN{
        printf "%-44s %-26s wall %7.3f -> %7.3f s (x%.2f)  cpu med %7.3f -> %7.3f (x%.2f)  cpu min %7.3f -> %7.3f (x%.3f)\n",
               l, b "->" v, bw, vw, bw/vw, bc, vc, bc/vc, bm, vm, bm/vm }'
}

echo "# kvsim-cref native benchmarks (SCALE=$SCALE, repeat $R, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
run "KEYS, $(n 5000000) keys, 100 B" none valkey iterate --op keys --keys "$(n 5000000)" --value-size 100
run "KEYS, $(n 5000000) keys, 100 B" none next-bucket iterate --op keys --keys "$(n 5000000)" --value-size 100
run "SAVE, $(n 2000000) keys, 100 B" none valkey iterate --op save --keys "$(n 2000000)" --value-size 100
run "pipeline GET, $(n 3000000) keys, 256 B, depth 10, b16" naive lookahead pipeline --keys "$(n 3000000)" --ops "$(n 2000000)" --value-size 256 --depth 10 --batch 16
# snapshot load: variants interleaved, warm (no page faults timed), see load_sweep.sh
CASES="$(n 4000000):8 $(n 4000000):32 $(n 4000000):256 $(n 1000000):4096 $(n 250000):16384" \
    REPEAT=${LOAD_REPEAT:-5} sh "$(dirname "$0")/load_sweep.sh" "$B"
run "mset, $(n 5000000) keys, 50 keys/cmd, 100 B" none batch mset --keys "$(n 5000000)" --keys-per-command 50 --value-size 100
run "mget, $(n 3000000) keys, 50 keys/cmd, 100 B" none batch mget --keys "$(n 3000000)" --ops "$(n 40000)" --keys-per-command 50 --value-size 100

# memory: unified vs legacy, 16 B keys, 8 B values
u=$("$B" native pipeline --keys "$(n 2000000)" --ops 1 --value-size 8 --key-size 16 --layout unified --json | field memory_bytes)
l=$("$B" native pipeline --keys "$(n 2000000)" --ops 1 --value-size 8 --key-size 16 --layout legacy --json | field memory_bytes)
awk -v u="$u" -v l="$l" -v k="$(n 2000000)" 'BEGIN{printf "memory, %d keys, 16 B keys, 8 B values: unified %d B, legacy %d B, ratio %.3f\n", k, u, l, u/l}'

# tracing throughput (records per wall second and per process-CPU second of the measured phase)
t=$(KVSIM_CREF_STATS=1 "$B" trace pipeline --keys "$(n 1000000)" --ops "$(n 2000000)" -o /dev/null 2>&1 >/dev/null)
echo "tracing, pipeline GET $(n 2000000) ops: $t"
