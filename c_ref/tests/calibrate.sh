#!/bin/sh
# calibrate.sh -- the gap model against callgrind: for each workload, the
# trace's total instructions (sum of gaps + memory records) must be within 25%
# of the instructions callgrind counts in the native build's measured phase
# (functions measured*, see workload.c).  Prints one line per workload.
# The listpack lines (hashes of 8-512 fields, sorted sets of 16-128 members: the
# linear field search, ksLpFindPair) must be within 10%.
# Usage: sh tests/calibrate.sh build/kvsim-cref [EXTRA]   (needs valgrind)
# EXTRA (e.g. "--table dict") is appended to every workload's options; the list
# already has the table=dict workloads that exercise the dict.* prefetch and
# iterator sites (the full dict run: sh tests/calibrate.sh B "--table dict").
set -u
B=${1:-build/kvsim-cref}
EXTRA=${2:-}
STAT=$(dirname "$B")/kvt_stat
command -v valgrind >/dev/null || { echo "calibrate: valgrind not found, skipped"; exit 0; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
printf '%-44s %12s %12s %7s\n' workload callgrind_Ir trace_instr ratio
# check LO HI: every workload on stdin within LO..HI
check() {
while read -r w args; do
    [ -z "$w" ] && continue
    args="$args $EXTRA"
    valgrind --tool=callgrind --toggle-collect='measured*' --callgrind-out-file="$T/cg" \
        "$B" native $w $args --json >/dev/null 2>"$T/vg" || { echo "callgrind failed: $w $args"; fail=1; continue; }
    ir=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$T/vg")
    "$B" trace $w -o "$T/t.kvt" $args || { fail=1; continue; }
    ti=$("$STAT" "$T/t.kvt" | sed 's/.*"instructions":\([0-9]*\).*/\1/')
    ratio=$(awk -v a="$ti" -v b="$ir" 'BEGIN{printf "%.3f", a/b}')
    ok=$(awk -v r="$ratio" -v lo="$1" -v hi="$2" 'BEGIN{print (r >= lo && r <= hi) ? "ok" : "FAIL"}')
    [ "$ok" = ok ] || fail=1
    printf '%-44s %12s %12s %7s %s\n' "$w $args" "$ir" "$ti" "$ratio" "$ok"
done
}
check 0.75 1.25 <<'LIST'
pipeline --keys 20000 --ops 20000 --variant naive
pipeline --keys 20000 --ops 20000 --variant lookahead --value-size 256 --depth 10
pipeline --keys 20000 --ops 20000 --variant lookahead --set-ratio 0.5 --cluster
pipeline --keys 20000 --ops 20000 --variant naive --layout legacy --value-size 8
mget --keys 20000 --ops 2000 --keys-per-command 20 --variant none
mget --keys 20000 --ops 2000 --keys-per-command 20 --variant batch
mset --keys 20000 --keys-per-command 50 --variant none
mset --keys 20000 --keys-per-command 50 --variant batch
iterate --keys 20000 --op keys --variant none
iterate --keys 20000 --op keys --variant valkey
iterate --keys 20000 --op save --variant valkey
load --keys 20000 --variant none --value-size 32
load --keys 20000 --variant prefetch-after-key --value-size 4096
load --keys 20000 --variant prefetch-after-key --value-size 8
pipeline --keys 20000 --ops 20000 --variant lookahead --value-size 256 --depth 10 --table dict
pipeline --keys 20000 --ops 20000 --variant lookahead --set-ratio 0.5 --cluster --table dict
mget --keys 20000 --ops 2000 --keys-per-command 20 --variant batch --table dict
mset --keys 20000 --keys-per-command 50 --variant batch --table dict
iterate --keys 20000 --op keys --variant none --table dict
iterate --keys 20000 --op save --variant valkey --rdbchecksum no
load --keys 20000 --variant none --value-size 100 --rdbchecksum no
mset --keys 20000 --mset-keys random --ops 400 --keys-per-command 50 --variant redis-15043 --table dict
mset --keys 20000 --mset-keys random --ops 400 --keys-per-command 50 --variant batch --table dict
hash --keys 2000 --hash-fields 20 --ops 20000 --hash-op hget
hash --keys 2 --hash-fields 5000 --ops 2000 --hash-op hmget --fields-per-command 20
hash --keys 2000 --hash-fields 20 --ops 2000 --hash-op hgetall
hash --keys 2 --hash-fields 2000 --ops 100 --hash-op hgetall --variant getall-14988 --table dict
hash --keys 2 --hash-fields 5000 --ops 20000 --hash-op hget --pipeline-depth 16 --pipeline lookahead --variant nested-3940
mget --keys 20000 --ops 2000 --keys-per-command 100 --variant window-3389
mget --keys 20000 --ops 2000 --keys-per-command 100 --variant redis-14899 --table dict
zscore --keys 300 --zset-members 200 --ops 20000
zscore --keys 300 --zset-members 100 --ops 20000
zmscore --keys 300 --zset-members 200 --ops 2000 --fields-per-command 10 --variant find-batch-4017
LIST
check 0.9 1.1 <<'LIST'
hash --keys 2000 --hash-fields 8 --value-size 16 --ops 20000 --hash-op hget
hash --keys 500 --hash-fields 128 --value-size 16 --ops 20000 --hash-op hget
hash --keys 100 --hash-fields 512 --value-size 16 --ops 20000 --hash-op hget
hash --keys 100 --hash-fields 512 --value-size 16 --ops 2000 --hash-op hmget --fields-per-command 10
hash --keys 100 --hash-fields 512 --value-size 16 --ops 20000 --hash-op hset
zscore --keys 300 --zset-members 16 --ops 20000
zscore --keys 300 --zset-members 128 --ops 20000
LIST
# The server's request code (kvsim-cref serverloop: GETs fed to ksServerSessionFeed, the
# entry point `serve` runs between read and write, c_ref/serverloop.c): the trace's
# instructions per request (its measured phase: DEPTH x N requests) against callgrind's
# per request of ksServerSessionFeed (the native run also feeds the fill and both arms'
# warm-up and segments: 2 x (N + N/8) segments).  Each from two runs, N1 and N2
# iterations: the difference of their counts over the requests between them (what a run
# does once, the fill, the check and close of the server session, drops out).  Within 0.9
# and the line's bound.
# The server's regime, in which results/server-steps-callgrind.json measures the KS_*_WORK
# constants: 256-byte values (RAW objects: objectGetVal and isCopyAvoidPreferred take their
# RAW paths), prefetch-batch-max-size 0 and 16 (the two arms of `kvsim native server`).
# Each line's upper bound is 1.1, at depth 1 1.14: the constants are depth 10's, where a
# read's commands are parsed before the first runs and glibc's tcache bins run dry; at
# depth 1 one command's blocks are live at a time and the tcache serves them, so malloc and
# free cost 88 and 122 instructions per call against KS_ZMALLOC_WORK's and KS_ZFREE_WORK's
# 124 and 146 (results/server-steps-callgrind.json, get-p1 and get-p10): 3 of each per GET,
# 180 of its 4,300 instructions, 0.04 more (c_ref/FIDELITY.md, "The server's work constants").
# MSET of 10 keys over existing keys (the server study's cell: 21 arguments, 10 of them
# 256-byte values swapped into the old values' objects) is checked the same way, within
# 0.9-1.1: its arguments' objects are read and freed more often per request than a GET's.
# collected N: callgrind's count of ksServerSessionFeed in a native serverloop run of N
collected() {
    valgrind --tool=callgrind --toggle-collect=ksServerSessionFeed --callgrind-out-file="$T/cg" \
        "$B" serverloop --command "$c" --mset-keys 10 --depth "$d" --keys 1000 --value-size 256 --batch "$b" \
        --rounds 1 --iters "$1" >/dev/null 2>"$T/vg" && sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$T/vg"
}
# traced N: the trace's instructions (its measured phase: N segments) of the same run
traced() {
    "$B" serverloop --command "$c" --mset-keys 10 --depth "$d" --keys 1000 --value-size 256 --batch "$b" \
        --iters "$1" --trace "$T/t.kvt" && "$STAT" "$T/t.kvt" | sed 's/.*"instructions":\([0-9]*\).*/\1/'
}
check_server() {
while read -r c b d n1 n2 hi; do
    [ -z "$d" ] && continue
    w="serverloop --command $c --batch $b --depth $d"
    ir1=$(collected "$n1") && ir2=$(collected "$n2") || { echo "callgrind failed: $w"; fail=1; continue; }
    ti1=$(traced "$n1") && ti2=$(traced "$n2") || { echo "trace failed: $w"; fail=1; continue; }
    # per request: the differences of the two runs over the requests between them
    cg=$(awk -v a="$ir1" -v b="$ir2" -v d="$d" -v n1="$n1" -v n2="$n2" \
        'BEGIN{printf "%.1f", (b - a) / (2 * ((n2 + int(n2 / 8)) - (n1 + int(n1 / 8))) * d)}')
    tr=$(awk -v a="$ti1" -v b="$ti2" -v d="$d" -v n1="$n1" -v n2="$n2" \
        'BEGIN{printf "%.1f", (b - a) / ((n2 - n1) * d)}')
    ratio=$(awk -v a="$tr" -v b="$cg" 'BEGIN{printf "%.3f", a/b}')
    ok=$(awk -v r="$ratio" -v hi="$hi" 'BEGIN{print (r >= 0.9 && r <= hi) ? "ok" : "FAIL"}')
    [ "$ok" = ok ] || fail=1
    printf '%-44s %12s %12s %7s %s\n' "$w (per request)" "$cg" "$tr" "$ratio" "$ok"
done
}
check_server <<'LIST'
get 0 1 800 2400 1.14
get 0 10 800 2400 1.1
get 16 1 800 2400 1.14
get 16 10 800 2400 1.1
mset 0 1 800 2400 1.1
mset 16 1 800 2400 1.1
LIST
exit $fail
