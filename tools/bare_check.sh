#!/usr/bin/env bash
# tools/bare_check.sh: `make test` on a machine that never had clang or redis-tools.
#
# What it verifies: the README's test command (.ci/run, that is `make test`) passes RUNS times
# in a row, each time on a fresh clone, on a bare Debian bookworm that starts with only what a
# new machine has before a session: python3 with pip, venv and its headers, gcc, g++, make,
# git, valgrind, cmake, ninja. Not clang, libclang-rt-14-dev or redis-tools: the first run must
# install them itself (`make sysdeps`); the later runs find them installed, as a machine does.
#
# How: debootstrap into ROOT (a folder outside any git checkout) with the base packages above;
# /proc, /sys, a /dev of its own (tmpfs, device nodes, new devpts, /dev/shm), the host's resolv.conf
# and CA bundle, all mounted in a private mount namespace (so they vanish with it; they are also
# unmounted explicitly), and the host's proxy and CA variables passed on (the network's settings,
# nothing else of its environment); a bare copy of this repository in ROOT/srv, cloned afresh for
# each run inside the chroot (at /srv/kvsim) and checked out at COMMIT; RUNS runs of .ci/run, one
# after another; the processes a run left in the chroot ended; one summary line per run (passed,
# failed, errors and skipped of the pytest runs, the exit status, the duration) appended to RESULT,
# each run's full output beside it (RESULT without .txt, plus .runN.log).
#
# Run as root on Debian or Ubuntu with a Debian mirror and PyPI reachable (each run is the
# whole suite plus a new venv; on two busy cores, budget an hour a run); the exit status is 0
# only if every run passed:
#   sudo tools/bare_check.sh [-r ROOT] [-n RUNS] [-o RESULT] [-m MIRROR] [--reuse-root] [COMMIT]
# COMMIT defaults to HEAD of this checkout (committed state only, never the work tree). An
# existing ROOT is deleted and bootstrapped again, unless --reuse-root (then the header of
# RESULT says which of the three packages were there before run 1).
set -euo pipefail

SUITE=bookworm
BASE_PKGS=ca-certificates,python3,python3-pip,python3-venv,python3-dev,gcc,g++,make,git
BASE_PKGS+=,valgrind,cmake,ninja-build,procps
ROOT=${TMPDIR:-/var/tmp}/kvsim-bare/root
RUNS=3
RESULT=
MIRROR=http://deb.debian.org/debian
REUSE=0
INNER=0
COMMIT=

die() { echo "bare_check: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        -r) ROOT=$2; shift 2 ;;
        -n) RUNS=$2; shift 2 ;;
        -o) RESULT=$2; shift 2 ;;
        -m) MIRROR=$2; shift 2 ;;
        --reuse-root) REUSE=1; shift ;;
        --inner) INNER=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) COMMIT=$1; shift ;;
    esac
done

ROOT=$(realpath -m "$ROOT")
[ -n "$RESULT" ] || RESULT=$(dirname "$ROOT")/bare_check.txt
RESULT=$(realpath -m "$RESULT")
SELF=$(realpath "$0")
SRC=$(git -C "$(dirname "$SELF")" rev-parse --show-toplevel)

# ---- inside the private mount namespace: mounts, runs, teardown ---------------------------
mounted=()
teardown() {
    # end whatever a run left behind in the chroot (servers, workers), then the mounts
    local pid
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$ROOT" ] && kill -KILL "$pid" 2>/dev/null
    done
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true
    done
    mounted=()
}

mnt() {  # mnt TARGET MOUNT-ARGS...
    local target=$1; shift
    mount "$@" "$target"
    mounted+=("$target")
}

counts() {  # the pytest summary lines of a log, summed: "P passed, F failed, ..."
    python3 - "$1" <<'EOF'
import re, sys
tot = {}
for line in open(sys.argv[1], errors="replace"):
    line = line.strip().strip("=").strip()
    if not re.search(r" in [0-9.]+s( \(.*\))?$", line):
        continue
    for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)",
                           line):
        k = "errors" if k.startswith("error") else k
        tot[k] = tot.get(k, 0) + int(n)
keys = ["passed", "failed", "errors", "skipped", "xfailed", "xpassed", "deselected"]
print(", ".join(f"{tot.get(k, 0)} {k}" for k in keys[:4])
      + "".join(f", {tot[k]} {k}" for k in keys[4:] if tot.get(k)))
EOF
}

if [ "$INNER" = 1 ]; then
    trap teardown EXIT
    # ROOT a mount point, as a machine's / is: else `unshare --propagation` in the chroot
    # fails (EINVAL), and the tests that mount a tmpfs in a namespace of their own skip
    mnt "$ROOT" --bind "$ROOT"
    mnt "$ROOT/proc" -t proc proc
    mnt "$ROOT/sys" --bind /sys
    # a /dev of its own (not the host's: a run that replaces /dev/null must not break the
    # host's), with the nodes a machine's has and a new pts instance
    mnt "$ROOT/dev" -t tmpfs -o mode=755,nosuid dev
    local_dev() { mknod -m 666 "$ROOT/dev/$1" c "$2" "$3"; }
    local_dev null 1 3; local_dev zero 1 5; local_dev full 1 7; local_dev random 1 8
    local_dev urandom 1 9; local_dev tty 5 0
    ln -s /proc/self/fd "$ROOT/dev/fd"; ln -s /proc/self/fd/0 "$ROOT/dev/stdin"
    ln -s /proc/self/fd/1 "$ROOT/dev/stdout"; ln -s /proc/self/fd/2 "$ROOT/dev/stderr"
    mkdir "$ROOT/dev/pts" "$ROOT/dev/shm"
    mnt "$ROOT/dev/pts" -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts
    ln -s pts/ptmx "$ROOT/dev/ptmx"
    mnt "$ROOT/dev/shm" -t tmpfs -o mode=1777 shm
    mnt "$ROOT/etc/resolv.conf" --bind /etc/resolv.conf
    # the host's CA bundle: a network whose TLS is re-signed by a local authority reaches
    # PyPI only with it, as every machine on that network does
    mnt "$ROOT/etc/ssl/certs/ca-certificates.crt" --bind -o ro /etc/ssl/certs/ca-certificates.crt
    # the host's network settings (proxies, CA bundles, pip's timeout), nothing else of its
    # environment: the runs see a new machine's
    netenv=()
    for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY SSL_CERT_FILE \
             SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE PIP_CERT GIT_SSL_CAINFO \
             PIP_DEFAULT_TIMEOUT PIP_INDEX_URL; do
        [ -n "${!v:-}" ] && netenv+=("$v=${!v}")
    done
    all_ok=0
    for ((i = 1; i <= RUNS; i++)); do
        log=${RESULT%.txt}.run$i.log
        start=$(date +%s)
        set +e
        chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${netenv[@]}" \
            /bin/bash -c "set -e; rm -rf /srv/kvsim; git clone -q /srv/kvsim.git /srv/kvsim;
                          cd /srv/kvsim; git checkout -q $COMMIT; git log --oneline -1;
                          exec .ci/run" >"$log" 2>&1 </dev/null
        rc=$?
        set -e
        secs=$(( $(date +%s) - start ))
        # end what the run left running before the next one starts
        for pid in $(ls /proc | grep -E '^[0-9]+$'); do
            [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$ROOT" ] \
                && kill -KILL "$pid" 2>/dev/null
        done
        status=passed
        [ $rc -eq 0 ] || { status=FAILED; all_ok=1; }
        where=
        [ $rc -eq 0 ] || where="; $(grep -E '^make(\[[0-9]+\])?: \*\*\*' "$log" | head -1)"
        printf 'run %d: %s (exit %d), pytest %s, %dm%02ds%s; log %s\n' "$i" "$status" "$rc" \
            "$(counts "$log")" $((secs / 60)) $((secs % 60)) "$where" "$(basename "$log")" \
            | tee -a "$RESULT"
    done
    exit $all_ok
fi

# ---- on the host: the root, the commit, then the runs in a private mount namespace ----------
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount)"
case $ROOT in /*/*) ;; *) die "ROOT $ROOT: give a folder at least two levels below /" ;; esac
case $RUNS in ''|*[!0-9]*|0) die "-n wants a positive number, not '$RUNS'" ;; esac
if git -C "$(dirname "$ROOT")" rev-parse --git-dir >/dev/null 2>&1; then
    die "ROOT $ROOT is inside a git checkout; choose a folder outside it (-r)"
fi
COMMIT=$(git -C "$SRC" rev-parse --verify "${COMMIT:-HEAD}^{commit}") \
    || die "no commit ${COMMIT:-HEAD} in $SRC"
grep -q " $ROOT[/ ]" /proc/mounts && die "something is mounted under $ROOT; unmount it first"
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null \
    || die "debootstrap is missing and apt-get could not install it"
mkdir -p "$(dirname "$RESULT")"

if [ "$REUSE" = 0 ] || [ ! -x "$ROOT/usr/bin/python3" ]; then
    rm -rf "$ROOT"
    mkdir -p "$ROOT"
    echo "bare_check: debootstrap $SUITE into $ROOT" >&2
    debootstrap --variant=minbase --include="$BASE_PKGS" "$SUITE" "$ROOT" "$MIRROR" \
        >"${RESULT%.txt}.debootstrap.log" 2>&1 \
        || die "debootstrap failed (${RESULT%.txt}.debootstrap.log)"
fi
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
touch "$ROOT/etc/resolv.conf"
before=$(chroot "$ROOT" /bin/sh -c 'for p in clang libclang-rt-14-dev redis-tools; do
    dpkg-query -W -f "\${Status}" $p 2>/dev/null | grep -q "ok installed" && echo -n "$p "; done' \
    || true)

rm -rf "$ROOT/srv/kvsim.git"
git clone -q --bare --no-local "$SRC" "$ROOT/srv/kvsim.git"
git -C "$ROOT/srv/kvsim.git" cat-file -e "$COMMIT^{commit}" \
    || die "commit $COMMIT is not on a branch of $SRC"

{
    echo "# tools/bare_check.sh: $RUNS runs of .ci/run (make test), each on a fresh clone, in a"
    echo "# debootstrap'd $SUITE chroot;" \
        "commit $(git -C "$SRC" log -1 --format='%h %cI' "$COMMIT");"
    echo "# host $(uname -n), $(nproc) CPUs," \
        "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);"
    echo "# started $(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg);"
    echo "# installed before run 1: ${before:-none of clang, libclang-rt-14-dev, redis-tools}"
} | tee -a "$RESULT"

set +e
unshare --mount --propagation private "$SELF" --inner -r "$ROOT" -n "$RUNS" -o "$RESULT" "$COMMIT"
rc=$?
set -e
if grep -q " $ROOT[/ ]" /proc/mounts; then
    echo "bare_check: mounts left under $ROOT:" >&2
    grep " $ROOT[/ ]" /proc/mounts >&2
    rc=1
fi
echo "# finished $(date -u +%Y-%m-%dT%H:%M:%SZ): $([ $rc = 0 ] && echo "all $RUNS runs passed" \
    || echo "not all runs passed")" | tee -a "$RESULT"
exit $rc
