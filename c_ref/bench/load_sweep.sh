#!/bin/sh
# load_sweep.sh -- snapshot load variants (Valkey #2311), interleaved and summarised.
#
# For every case KEYS:VALUE_SIZE, ROUNDS rounds; each round runs one invocation
# per variant in turn (A B C A B C ...), each timing REPEAT loads of the same
# snapshot.  Per variant it prints the number of timed loads, the minimum and
# median process CPU seconds and wall seconds over all of them, and the CPU
# gain against `none`: (none - variant) / none, in %, of the minimum and of the
# median (positive = faster, as the PR's "Performance Boost").
#
#   WARM=1     KVSIM_CREF_LOAD_WARM=1: the loads reuse the previous run's pages
#              (one unmeasured load first), so no page faults are timed;
#              WARM=0: a fresh arena per load, every page faulted (a restart).
#   BENCH_LOCK=path   wrap every invocation in `flock path` (no overlapping timing runs)
#   RAW=file   append every timed load to file: keys value_size variant round cpu_s wall_s
#
# Usage: sh bench/load_sweep.sh build/kvsim-cref
#   env: CASES="4000000:8 4000000:32" VARIANTS="none prefetch-after-key" ROUNDS=3 REPEAT=5 WARM=1
set -u
B=${1:-build/kvsim-cref}
CASES=${CASES:-"4000000:8 4000000:32 4000000:256 1000000:4096 250000:16384"}
VARIANTS=${VARIANTS:-"none prefetch-after-key prefetch-rehash"}
ROUNDS=${ROUNDS:-3}
R=${REPEAT:-5}
WARM=${WARM:-1}
LOCK=${BENCH_LOCK:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

runs() { sed "s/.*\"$1\":\[\([^]]*\)\].*/\1/" | tr ',' '\n'; }

echo "# load sweep: $(nproc) cores, WARM=$WARM, $ROUNDS rounds x $R loads per variant, $(date -u +%Y-%m-%dT%H:%MZ)"
for c in $CASES; do
    keys=${c%:*}
    vs=${c#*:}
    : >"$T/all"
    la0=$(cut -d' ' -f1 /proc/loadavg)
    i=0
    while [ "$i" -lt "$ROUNDS" ]; do
        for v in $VARIANTS; do
            if [ -n "$LOCK" ]; then
                j=$(KVSIM_CREF_LOAD_WARM=$WARM flock "$LOCK" "$B" native load --keys "$keys" --value-size "$vs" \
                    --variant "$v" --repeat "$R" --json) || exit 1
            else
                j=$(KVSIM_CREF_LOAD_WARM=$WARM "$B" native load --keys "$keys" --value-size "$vs" \
                    --variant "$v" --repeat "$R" --json) || exit 1
            fi
            echo "$j" | runs cpu_runs_s >"$T/c"
            echo "$j" | runs runs_s >"$T/w"
            paste "$T/c" "$T/w" | sed "s/^/$v /" >>"$T/all"
            [ -n "${RAW:-}" ] && paste "$T/c" "$T/w" | sed "s/^/$keys $vs $v $i /" >>"$RAW"
        done
        i=$((i + 1))
    done
    la1=$(cut -d' ' -f1 /proc/loadavg)
    echo "## $keys keys, $vs B values (load average $la0 -> $la1)"
    printf '%-20s %4s %9s %9s %9s %9s %9s %9s\n' variant n cpu_min cpu_med wall_min wall_med gain_min gain_med
    for v in $VARIANTS; do
        grep "^$v " "$T/all" | awk '{print $2}' | sort -g >"$T/cs"
        grep "^$v " "$T/all" | awk '{print $3}' | sort -g >"$T/ws"
        awk -v v="$v" -v cf="$T/cs" -v wf="$T/ws" -v bf="$T/base" 'BEGIN{
            n = 0; while ((getline x < cf) > 0) c[++n] = x
            m = 0; while ((getline x < wf) > 0) w[++m] = x
            cmed = (n % 2) ? c[(n + 1) / 2] : (c[n / 2] + c[n / 2 + 1]) / 2
            wmed = (m % 2) ? w[(m + 1) / 2] : (w[m / 2] + w[m / 2 + 1]) / 2
            if (v == "none") { print c[1], cmed > bf; close(bf) }
            getline b < bf; split(b, bb, " ")
            printf "%-20s %4d %9.3f %9.3f %9.3f %9.3f %8.1f%% %8.1f%%\n", v, n, c[1], cmed, w[1], wmed,
                   100 * (bb[1] - c[1]) / bb[1], 100 * (bb[2] - cmed) / bb[2] }'
    done
done
