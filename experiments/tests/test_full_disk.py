"""The full-disk cell of the bad-input matrix (test_bad_input.py): trace, convert and
simulate writing where the space runs out give one line ``kvsim: error: ...``, a non-zero
exit, no traceback, and leave no file behind (simulate writes to standard output, which the
shell opened: its file is the shell's).

Two ways to run out of space: a small tmpfs mounted in a private mount namespace
(``unshare``; needs root and a kernel that allows it, else skipped), and a file-size limit
(RLIMIT_FSIZE) on the child, which works anywhere: past it a write fails with EFBIG, as on a
full disk with ENOSPC.
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT, SMALL

LIMIT = 8192  # bytes: smaller than every output below


def _tmpfs_works() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        "d=$(mktemp -d) && mount -t tmpfs -o size=8k tmpfs $d"],
                       capture_output=True, check=False, timeout=60)
    return r.returncode == 0


TMPFS = _tmpfs_works()

# (name, argv after `kvsim`; OUT is the output path, TRACE the input trace)
CASES = [
    ("trace", ["trace", "pipeline", "-o", "OUT/out.kvt", *SMALL]),
    ("convert-din", ["convert", "TRACE", "OUT/out.din"]),
    ("convert-lackey", ["convert", "TRACE", "OUT/out.lackey"]),
    ("simulate", ["simulate", "TRACE", "--cpu", "graviton3", "--json"]),
]


def _run(mode: str, argv: list[str], out_dir, trace) -> tuple[int, str, list[str]]:
    """Run kvsim with its output directory out of space; (exit code, stderr, files left)."""
    args = [a.replace("OUT", str(out_dir)).replace("TRACE", str(trace)) for a in argv]
    cmd = [sys.executable, "-m", "kvsim.experiments.cli", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    stdout = shlex.quote(str(out_dir / "stdout.json"))
    listing = out_dir.parent / "left.txt"  # outside the tmpfs
    if mode == "tmpfs":
        script = (f"mount -t tmpfs -o size={LIMIT} tmpfs {shlex.quote(str(out_dir))} || exit 99;"
                  f" {shlex.join(cmd)} > {stdout}; rc=$?;"
                  f" ls -A {shlex.quote(str(out_dir))} > {shlex.quote(str(listing))}; exit $rc")
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               script], stderr=subprocess.PIPE, env=env, cwd=ROOT,
                              timeout=600, check=False)
        assert proc.returncode != 99, "mounting the tmpfs failed"
        left = listing.read_text().split()
    else:
        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

        with open(out_dir / "stdout.json", "wb") as so:
            proc = subprocess.run(cmd, stdout=so, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                                  preexec_fn=limit, timeout=600, check=False)
        left = os.listdir(out_dir)
    return proc.returncode, proc.stderr.decode(errors="replace"), left


@pytest.mark.parametrize("mode", ["tmpfs", "fsize"])
@pytest.mark.parametrize("name,argv", CASES, ids=[c[0] for c in CASES])
def test_full_disk(mode, name, argv, tmp_path, small_trace):
    if mode == "tmpfs" and not TMPFS:
        pytest.skip("cannot mount a tmpfs in a private mount namespace here")
    out = tmp_path / "out"
    out.mkdir()
    rc, err, left = _run(mode, argv, out, small_trace)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kvsim: error: ") and "Traceback" not in err
    assert "internal error" not in lines[0]
    named = "standard output" if name == "simulate" else str(out)
    assert named in lines[0], lines[0]  # the output the space ran out on
    assert sorted(left) == ["stdout.json"], left  # the shell's file for simulate only
