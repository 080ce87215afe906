#!/usr/bin/env bash
# The system packages `make test` needs beyond python3, a C compiler and make (`make sysdeps`):
#   clang, libclang-rt-14-dev  the libFuzzer targets of fuzz/ (make test replays and smoke-fuzzes)
#   redis-tools                redis-benchmark, the client of the real-server tests
# Installed with apt-get where this runs as root on Debian or Ubuntu; elsewhere one line says
# what to install, and the exit status is non-zero if a required package is missing.
set -u
missing=()
command -v clang >/dev/null 2>&1 || missing+=(clang)
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 \
    || missing+=(libclang-rt-14-dev)
command -v redis-benchmark >/dev/null 2>&1 || command -v valkey-benchmark >/dev/null 2>&1 \
    || missing+=(redis-tools)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "sysdeps: apt-get install ${missing[*]}" >&2
    apt-get update -qq >/dev/null \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
            "${missing[@]}" >/dev/null && exit 0
    echo "sysdeps: apt-get install ${missing[*]} failed" >&2
    exit 1
fi
echo "sysdeps: missing ${missing[*]}; install them (Debian: sudo apt-get install ${missing[*]})" >&2
exit 1
