"""One-line warnings where a run goes on but does less than asked: a CPU file without a timing
model (counts only; its mshrs unused), and --threads above what the configuration runs on."""

from __future__ import annotations

import json

from .conftest import run_kvsim

CACHES_ONLY = """name = "counts-only"
[[cache]]
name = "L1"
size = "4KiB"
ways = 4
line = 64
mshrs = {mshrs}
"""


def _warnings(stderr: bytes) -> list[str]:
    return [ln for ln in stderr.decode().splitlines() if ln.startswith("kvsim: warning:")]


def test_counts_only_cpu_file_says_so(tmp_path, small_trace):
    for mshrs in (0, 8):
        cpu = tmp_path / f"c{mshrs}.toml"
        cpu.write_text(CACHES_ONLY.format(mshrs=mshrs))
        res = run_kvsim("simulate", small_trace, "--cpu", cpu, "--json")
        assert res.returncode == 0, res.stderr.decode()
        assert json.loads(res.stdout)["cycles"] is None
        (w,) = _warnings(res.stderr)
        assert f"{cpu}: no timing model (missing freq_ghz, [core] width" in w
        assert ("the mshrs of L1 are not used" in w) == (mshrs > 0)
    # asked for counts only: nothing to warn about
    res = run_kvsim("simulate", small_trace, "--cpu", cpu, "--functional")
    assert res.returncode == 0 and _warnings(res.stderr) == []


def test_threads_the_configuration_cannot_use(small_trace):
    # a preset's caches run on one thread, its TLB on a second one only for slices of
    # 65,536 records that miss the DTLB often, none in a trace this short
    res = run_kvsim("simulate", small_trace, "--cpu", "graviton3", "--threads", "3", "--json")
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout)["engine_threads"] == 1
    (w,) = _warnings(res.stderr)
    assert w.startswith("kvsim: warning: --threads 3: ran on 1 ")
    assert "where most records miss the DTLB" in w
    # a preset run as asked (one thread) warns of nothing
    res = run_kvsim("simulate", small_trace, "--cpu", "graviton3", "--json")
    assert res.returncode == 0 and _warnings(res.stderr) == []
