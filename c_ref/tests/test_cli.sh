#!/bin/sh
# test_cli.sh -- the kvsim-cref command-line contract: one-line errors with
# exit status 2 and no partial output, determinism, and every workload and
# variant runnable both native and traced at a tiny size.
# Usage: sh tests/test_cli.sh build/kvsim-cref
set -u
B=${1:-build/kvsim-cref}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { printf '[ ok ] %s\n' "$1"; }
bad() { printf '[FAIL] %s\n' "$1"; fail=1; }

# errors: exit 2, one line "kvsim-cref: ...", no output file
expect_err() {
    desc=$1; shift
    rm -f "$T/out.kvt"
    "$B" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    lines=$(wc -l <"$T/stderr")
    if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q '^kvsim-cref: ' "$T/stderr" && [ ! -e "$T/out.kvt" ] \
        && [ -z "$(ls -A "$T" | grep -v '^std')" ]; then ok "error: $desc"; else bad "error: $desc (rc=$rc, $(cat "$T/stderr"))"; fi
}
expect_err "unknown variant" trace pipeline -o "$T/out.kvt" --keys 10 --variant bogus
expect_err "bad batch" trace pipeline -o "$T/out.kvt" --batch 0
expect_err "bad batch 129" native pipeline --batch 129 --json
expect_err "bad layout" trace pipeline -o "$T/out.kvt" --layout weird
expect_err "bad keys" trace pipeline -o "$T/out.kvt" --keys -3
expect_err "bad set ratio" native pipeline --set-ratio 2
expect_err "unknown option" trace pipeline -o "$T/out.kvt" --frobnicate
expect_err "unknown workload" trace frob -o "$T/out.kvt"
expect_err "key size too small" trace pipeline -o "$T/out.kvt" --keys 1000 --key-size 2
expect_err "missing output dir" trace pipeline -o "$T/nodir/out.kvt" --keys 10
expect_err "options takes only --json" options --frob
expect_err "versus unknown variant" native mget --keys 10 --versus-variant bogus
expect_err "versus unknown pipeline" native mget --keys 10 --versus-pipeline bogus
expect_err "versus pipeline on pipeline" native pipeline --keys 10 --versus-pipeline lookahead
expect_err "versus-first alone" native mget --keys 10 --versus-first b
expect_err "versus when tracing" trace mget -o "$T/out.kvt" --keys 10 --versus-variant batch

# the option table exported as JSON names every workload and option
"$B" options --json >"$T/opts.json" && grep -q '"workloads":\["load","iterate","pipeline","mset","mget","hash","zscore","exists","del","touch","zmscore"\]}$' "$T/opts.json" \
    && grep -q '"name":"keys-per-command"' "$T/opts.json" && ok "options --json" || bad "options --json"

# determinism and stdout == file
"$B" trace pipeline -o "$T/a.kvt" --keys 500 --ops 500 --variant lookahead --seed 5 && \
"$B" trace pipeline -o - --keys 500 --ops 500 --variant lookahead --seed 5 >"$T/b.kvt" && \
cmp -s "$T/a.kvt" "$T/b.kvt" && ok "trace deterministic (file == stdout)" || bad "trace deterministic"
# across processes too (the stack's address moves): the sorted set's score replies,
# TOUCH's batches
for w in "zscore --zset-members 200 --pipeline-depth 16 --pipeline lookahead --variant nested-3940" \
         "zmscore --zset-members 200 --fields-per-command 20 --variant find-batch-4017" \
         "touch --keys-per-command 20 --variant window-3389"; do
    "$B" trace $w -o "$T/d1.kvt" --keys 200 --ops 200 && "$B" trace $w -o "$T/d2.kvt" --keys 200 --ops 200 && \
    cmp -s "$T/d1.kvt" "$T/d2.kvt" && ok "trace deterministic: ${w%% *}" || bad "trace deterministic: $w"
done
KVSIM_GIT_COMMIT=abc123 "$B" trace pipeline -o "$T/c.kvt" --keys 50 --ops 50 && grep -q '"git_commit":"abc123"' "$T/c.kvt" \
    && ok "git commit from KVSIM_GIT_COMMIT" || bad "git commit from KVSIM_GIT_COMMIT"

# KVSIM_CREF_SNAPSHOT_CACHE: a load that builds the cache, one that reads it and one
# without it report the same dataset; a cache of other options or no cache at all is
# refused with one line and exit 2
C=$(mktemp -d)
field() { sed -n "s/.*\"$1\":\([0-9a-z]*\).*/\1/p" "$2"; }
for run in build read none; do
    case $run in none) env_c="" ;; *) env_c="KVSIM_CREF_SNAPSHOT_CACHE=$C/snap" ;; esac
    env $env_c "$B" native load --keys 2000 --value-size 40 --cluster --variant prefetch-rehash \
        --json >"$C/$run.json" 2>"$C/e" || bad "snapshot cache $run: $(cat "$C/e")"
done
same=1
for k in keys memory_bytes reply_crc32; do
    v=$(field $k "$C/read.json")
    [ -n "$v" ] && [ "$(field $k "$C/build.json")" = "$v" ] && [ "$(field $k "$C/none.json")" = "$v" ] \
        || same=0
done
if [ -s "$C/snap" ] && [ -z "$(ls "$C" | grep tmp)" ] && [ $same -eq 1 ]; then
    ok "snapshot cache: built, read, same dataset as without"
else
    bad "snapshot cache: $(cat "$C/build.json" "$C/read.json" "$C/none.json")"
fi
cp "$C/snap" "$C/snap0"
for bad_case in "other options" "not a cache"; do
    [ "$bad_case" = "not a cache" ] && printf 'garbage\n' >"$C/snap"
    KVSIM_CREF_SNAPSHOT_CACHE=$C/snap "$B" native load --keys 2001 --value-size 40 --cluster \
        --json >"$C/o" 2>"$C/e"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$C/e")" -eq 1 ] && grep -q '^kvsim-cref: KVSIM_CREF_SNAPSHOT_CACHE: ' "$C/e" \
        && [ ! -s "$C/o" ]; then ok "snapshot cache refused: $bad_case"; else bad "snapshot cache $bad_case: rc=$rc $(cat "$C/e")"; fi
done
# KVSIM_CREF_REPLY_CHECK=0: no reply pass, reply_crc32 null; the default computes it
KVSIM_CREF_REPLY_CHECK=0 "$B" native mset --keys 500 --json >"$C/r0.json" 2>"$C/e"
"$B" native mset --keys 500 --json >"$C/r1.json" 2>>"$C/e"
if grep -q '"reply_crc32":null' "$C/r0.json" && grep -q '"reply_crc32":[0-9]' "$C/r1.json"; then
    ok "KVSIM_CREF_REPLY_CHECK=0 skips the reply check"
else
    bad "KVSIM_CREF_REPLY_CHECK: $(cat "$C/e")"
fi
rm -rf "$C"

# --versus: R rounds of A and B in one process, in alternating order; each side's
# reply CRC equals that of a process running that side alone (mset random: every run
# writes the same keys and values, so R runs on one server leave what one run leaves;
# mset new: a fresh server per run, with KVSIM_CREF_ARENA_WARM on the previous one's pages;
# iterate: KEYS and SAVE change nothing, so every run's output is the same)
V=$(mktemp -d)
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
for spec in "mget --ops 60 --keys-per-command 9 --table dict|--variant none|--variant chunk-15133" \
            "mset --mset-keys random --ops 60 --keys-per-command 9|--variant none|--variant redis-15043" \
            "mget --ops 60 --pipeline-depth 4|--pipeline naive|--pipeline lookahead" \
            "pipeline --ops 300 --set-ratio 0.3|--variant naive|--variant lookahead" \
            "mset --keys-per-command 9 --table dict|--variant none|--variant redis-15043" \
            "iterate --op keys|--variant none|--variant valkey" \
            "iterate --op save --table dict|--variant none|--variant next-bucket" \
            "load --value-size 300|--variant none|--variant prefetch-rehash"; do
    own=${spec%%|*}; rest=${spec#*|}; a=${rest%%|*}; b=${rest#*|}
    set -- $b
    KVSIM_CREF_ARENA_WARM=1 "$B" native $own --keys 700 $a --versus-${1#--} "$2" --versus-first b --repeat 3 --json \
        >"$V/ab.json" 2>"$V/e" && "$B" native $own --keys 700 $a --json >"$V/a.json" 2>>"$V/e" \
        && "$B" native $own --keys 700 $b --json >"$V/b.json" 2>>"$V/e" || bad "versus $own: $(cat "$V/e")"
    got=$(jget "$V/ab.json" "d['reply_crc32'], d['versus']['reply_crc32'], len(d['cpu_runs_s']), \
                            len(d['versus']['cpu_runs_s']), d['versus']['first'], d['versus']['$(echo ${1#--} | tr - _)']")
    want=$(jget "$V/a.json" "d['reply_crc32']"),\ $(jget "$V/b.json" "d['reply_crc32']")
    if [ "$got" = "($want, 3, 3, 'b', '$2')" ]; then ok "versus $own $a vs $b"; else bad "versus $own: $got, want $want"; fi
done
rm -rf "$V"

# an output that is not a regular file (a pipe here; /dev/null in the tests that only check
# options) is written in place, not replaced by a renamed temporary file
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/from_fifo" &
reader=$!
"$B" trace pipeline -o "$T/fifo" --keys 100 --ops 10 2>"$T/e"
rc=$?
# a reader the trace never reached (it failed, or renamed a file over the pipe) would wait
if [ $rc -ne 0 ] || [ ! -p "$T/fifo" ]; then kill $reader 2>/dev/null; fi
wait $reader
"$B" trace pipeline -o "$T/direct.kvt" --keys 100 --ops 10 2>>"$T/e"
if [ $rc -eq 0 ] && [ -p "$T/fifo" ] && cmp -s "$T/from_fifo" "$T/direct.kvt" \
    && [ -z "$(ls -A "$T" | grep '^\.')" ]; then ok "trace to a pipe"
else bad "trace to a pipe (rc=$rc, $(cat "$T/e"))"; fi
rm -f "$T/fifo" "$T/from_fifo" "$T/direct.kvt" "$T/e"

# every workload x variant, native and traced, tiny, on both tables
for spec in "pipeline naive" "pipeline lookahead" "mget none" "mget batch" "mset none" "mset batch" \
            "iterate none" "iterate next-bucket" "iterate valkey" "load none" "load prefetch-after-key" "load prefetch-rehash" \
            "hash none" "zscore nested-3940" "zmscore find-batch-4017" "touch batch"; do
    set -- $spec
    # only the options the workload uses (kvsim-cref refuses the others)
    case "$1" in
        pipeline) own="--ops 200" ;;
        mget|mset|touch) own="--ops 200 --keys-per-command 7" ;;
        iterate) own="--op save" ;;
        hash) own="--ops 200 --hash-fields 600 --hash-op hmget --pipeline-depth 4" ;;
        zscore) own="--ops 200 --zset-members 150 --pipeline-depth 4 --pipeline lookahead" ;;
        zmscore) own="--ops 200 --zset-members 150 --fields-per-command 20" ;;
        *) own="" ;;
    esac
    for extra in "" "--cluster --layout legacy" "--table dict"; do
        if "$B" native "$1" --keys 300 --variant "$2" $own $extra --repeat 2 --json >"$T/n.json" 2>"$T/e" \
            && grep -q '"median_s"' "$T/n.json" && grep -q '"runs_s":\[' "$T/n.json" \
            && "$B" trace "$1" -o "$T/t.kvt" --keys 300 --variant "$2" $own $extra 2>"$T/e"; then
            ok "$1 $2 $extra"
        else
            bad "$1 $2 $extra: $(cat "$T/e")"
        fi
    done
done
exit $fail
