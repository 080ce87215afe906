"""The server loop's system calls (sim/calibrate_loop.py): the residue's arithmetic on runs
built by hand, the [syscall] section it gives, and a short real run of c_ref's server under
redis-benchmark counting its calls (the figures themselves are this machine's: not asserted)."""

from __future__ import annotations

import shutil

import pytest

from kvsim.sim import calibrate_loop as cl
from kvsim.sim import calibrate_syscall as cs
from kvsim.sim.config import parse_cpu

ALONE = {"read_ns": 900.0, "read_byte_ns": 0.02, "write_ns": 1000.0, "write_byte_ns": 0.05}


def _run(depth: int, clients: int, extra_per_write: float, sleeps: float = 0.0) -> dict:
    """A run whose system time is the calls alone plus ``extra_per_write`` per write."""
    reads = writes = 1.0 / depth
    rb, wb = 14.0, 7.0
    sys_ns = (reads * ALONE["read_ns"] + rb * ALONE["read_byte_ns"] + writes
              * (ALONE["write_ns"] + extra_per_write) + wb * ALONE["write_byte_ns"])
    return {"depth": depth, "clients": clients, "requests": 1000, "cpu_ns": sys_ns + 300,
            "sys_ns": sys_ns, "user_ns": 300.0, "reads": reads, "writes": writes,
            "read_bytes": rb, "write_bytes": wb, "sleeps": sleeps, "preempted": 0.0}


def test_the_residue_is_what_the_calls_alone_leave_per_write() -> None:
    raw = {"plan": [[1, 50], [10, 50]], "rounds": 3,
           "runs": [_run(1, 50, e) for e in (2000, 2500, 3000)]
           + [_run(10, 50, e, sleeps=0.01) for e in (2400, 2600, 2800)]}
    assert cl.residue(_run(1, 50, 1234.0), ALONE) == pytest.approx(1234.0)
    assert cl.residue(_run(10, 50, 1234.0), ALONE) == pytest.approx(123.4)
    extra, how = cl.loop_cost(raw, ALONE)
    assert extra == pytest.approx(2550.0)  # median of the six runs' residues per write
    cells = cl.by_cell(raw, ALONE)
    assert [c["residue_per_write_ns"] for c in cells] == pytest.approx([2500.0, 2600.0])
    assert cells[1]["residue_per_sleep_ns"] == pytest.approx(260.0 / 0.01)
    assert "residue_per_sleep_ns" not in cells[0] and "depth 10 x 50 clients" in how
    # a loop cheaper than the calls alone adds nothing (never a gain)
    assert cl.loop_cost({**raw, "runs": [_run(1, 50, -500.0)]}, ALONE)[0] == 0.0


def test_a_measured_loop_moves_the_write_cost_and_epoll_wait_into_it() -> None:
    sizes = list(cs.SIZES)
    raw = {"sizes": sizes, "iters": 10, "rounds": 1,
           "read_ns": [900 + 0.02 * s for s in sizes],
           "write_ns": [1000 + 0.05 * s for s in sizes],
           "epoll_wait_ns": [260.0] * len(sizes), "epoll_wait_sleep_ns": 350.0,
           "write_wake_ns": 1800.0}
    plain = cs.section(raw)
    assert plain["write_ns"] == 1800.0 and plain["epoll_wait_ns"] == 350.0
    looped = cs.section({**raw, "loop": {"plan": [[1, 50]], "rounds": 1,
                                         "runs": [_run(1, 50, 3000.0)]}})
    assert looped["write_ns"] == pytest.approx(1000.0 + 3000.0, abs=0.2)
    assert looped["epoll_wait_ns"] == 0.0 and looped["read_ns"] == plain["read_ns"]
    assert "residue" in looped["src"]["write_ns"]
    doc = {"name": "t", "freq_ghz": 2.0, "cache": [{"size": "32KiB", "ways": 8}],
           "syscall": looped}
    assert parse_cpu(doc).syscall.call_ns[1] == looped["write_ns"]


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_a_short_real_loop_counts_a_read_and_a_write_per_round_trip() -> None:
    raw = cl.measure(((1, 5), (10, 5)), rounds=1, requests=(2000, 5000))
    by = {(r["depth"], r["clients"]): r for r in raw["runs"]}
    assert set(by) == {(1, 5), (10, 5)}
    for depth in (1, 10):
        r = by[(depth, 5)]
        # redis-benchmark sends depth PINGs at once: one read and one write of each batch
        assert r["reads"] == pytest.approx(1 / depth, rel=0.05)
        assert r["writes"] == pytest.approx(1 / depth, rel=0.05)
        assert r["read_bytes"] == pytest.approx(14, rel=0.02)  # *1\r\n$4\r\nPING\r\n
        assert r["write_bytes"] == pytest.approx(7, rel=0.02)  # +PONG\r\n
        assert r["cpu_ns"] > 0 and r["sys_ns"] + r["user_ns"] == pytest.approx(r["cpu_ns"])


# --- the tick split's bias, and the method the loop's kernel time is taken by --------------

def _bias(share_over: float, ticks: int = 400) -> list[dict]:
    """sysbias runs whose ticks give the spins' user share plus ``share_over``."""
    out = []
    for spin, cpu in ((0, 60000.0), (10000, 50000.0), (50000, 90000.0)):
        share = spin / cpu + share_over
        out.append({"round": 0, "spin_ns": spin, "spun_ns": float(spin), "cpu_ns": cpu,
                    "ticks": ticks, "user_ticks": round(share * ticks),
                    "tick_user_ns": share * cpu})
    return out


def test_the_tick_split_is_judged_biased_only_beyond_its_interval_and_tolerance() -> None:
    assert not cl.tick_bias(_bias(0.0))["biased"]
    assert not cl.tick_bias(_bias(cl.BIAS_TOLERANCE / 2))["biased"]
    b = cl.tick_bias(_bias(0.05))
    # 5 % over the spin's share: beyond the interval at 0 and 0.2, not near a half, where
    # 400 ticks' interval is some 5 % either way
    assert b["biased"] and [s["biased"] for s in b["spins"]] == [True, True, False]
    assert b["ticks"] == 400 and b["user_share_ci95"][0] > b["spin_share"] + b["tolerance"]
    assert sorted(s["spin_share"] for s in b["spins"]) == pytest.approx([0, 10 / 50, 50 / 90])
    # too few ticks to tell: the same excess is within the interval
    assert not cl.tick_bias(_bias(0.05, ticks=10))["biased"]
    assert not cl.tick_bias([])["biased"]
    # one spin's excess is enough, the others' ticks do not dilute it
    rows = _bias(0.0, ticks=4000)
    rows[0] = _bias(0.05)[0]
    b = cl.tick_bias(rows)
    assert b["biased"] and b["spin_ns"] == 0 and [s["biased"] for s in b["spins"]] == [
        True, False, False]


def test_the_recorded_guest_split_is_biased_and_gives_the_published_residue() -> None:
    """Recorded: server_split's native runs on the Xeon guest (results/server-split.json, its
    tick test in results/server-split-native.json): the test finds the split biased, and
    the whole-CPU method, fed the same runs and predicted PINGs, gives the residue per write
    that result file published."""
    import json
    from pathlib import Path

    from kvsim.experiments import server_split as ss

    native, split = Path("results/server-split-native.json"), Path("results/server-split.json")
    if not (native.is_file() and split.is_file()):
        pytest.skip("no recorded server-split results in this checkout")
    bias, doc = json.loads(native.read_text())["tick_bias"], json.loads(split.read_text())
    assert cl.tick_bias(bias)["biased"]
    loop = ss.loop_measure(doc["runs"], doc["loop"]["ping_predicted"], bias)
    k = cl.kernel_time(loop, doc["loop"]["costs"])
    assert k["method"] == "cpu" and k["bias"]["biased"]
    assert k["residue_per_write_ns"] == pytest.approx(doc["loop"]["residue_per_write_ns"])
    assert len(k["cpu_runs"]) == len(doc["loop"]["runs"])
    assert k["ticks_residue_per_write_ns"] < k["residue_per_write_ns"]  # ticks understate


def _loop(extra: float, hidden: float, bias: list[dict] | None, user: bool = True) -> dict:
    """PING runs whose kernel time beyond the calls is ``extra`` per write, ``hidden`` ns of
    it per request counted by the ticks as user time; user time 300 ns per request."""
    runs = []
    for depth in (1, 10):
        for e in (extra - 100, extra, extra + 100):
            r = _run(depth, 50, e)
            r.update(sys_ns=r["sys_ns"] - hidden, user_ns=r["user_ns"] + hidden)
            runs.append(r)
    loop = {"plan": [[1, 50], [10, 50]], "rounds": 3, "runs": runs}
    if bias is not None:
        loop["tick_bias"] = bias
    if user:
        loop["ping_user_ns"] = [{"depth": 1, "user_ns": 300.0}, {"depth": 10, "user_ns": 300.0}]
    return loop


def test_a_biased_split_takes_the_kernel_time_from_the_whole_cpu_time() -> None:
    k = cl.kernel_time(_loop(4000.0, 150.0, _bias(0.10)), ALONE)
    assert k["method"] == "cpu" and k["residue_per_write_ns"] == pytest.approx(4000.0)
    # the ticks' figure, beside it: 150 ns a request hidden, 150 a write at depth 1 (3750,
    # 3850, 3950), 1500 at depth 10 (2400, 2500, 2600); the median of the six runs
    assert k["ticks_residue_per_write_ns"] == pytest.approx((2600 + 3750) / 2)
    assert [r["residue_per_write_ns"] for r in k["cpu_runs"]] == pytest.approx(
        [3900, 4000, 4100] * 2)
    assert k["ping_user_ns"] == [{"depth": 1, "user_ns": 300.0}, {"depth": 10, "user_ns": 300.0}]


def test_an_unbiased_or_untested_split_keeps_the_ticks() -> None:
    for bias in (_bias(0.0), None):
        k = cl.kernel_time(_loop(4000.0, 150.0, bias), ALONE)
        assert k["method"] == "ticks" and k["residue_per_write_ns"] == pytest.approx(3175.0)
        assert ("bias" in k) == (bias is not None)
        # the whole CPU time's figure beside it, not taken
        assert k["cpu_residue_per_write_ns"] == pytest.approx(4000.0)
        assert "would be 4,000 ns" in cs.loop_src(k)
    # biased, but nothing predicted to take the whole CPU time from: the ticks, said so
    k = cl.kernel_time(_loop(4000.0, 150.0, _bias(0.10), user=False), ALONE)
    assert k["method"] == "ticks" and k["bias"]["biased"] and "cpu_runs" not in k
    assert "no predicted user time" in cs.loop_src(k) and "would be" not in cs.loop_src(k)
    with pytest.raises(ValueError, match="predicted user time"):
        cl.kernel_time(_loop(4000.0, 150.0, None, user=False), ALONE, method="cpu")
    k = cl.kernel_time(_loop(4000.0, 150.0, None), ALONE, method="cpu")  # forced
    assert k["method"] == "cpu" and k["residue_per_write_ns"] == pytest.approx(4000.0)


def _sweep() -> dict:
    sizes = list(cs.SIZES)
    return {"sizes": sizes, "iters": 10, "rounds": 1,
            "read_ns": [900 + 0.02 * s for s in sizes],
            "write_ns": [1000 + 0.05 * s for s in sizes],
            "epoll_wait_ns": [260.0] * len(sizes), "epoll_wait_sleep_ns": 350.0,
            "write_wake_ns": 1800.0}


def test_the_cpu_file_records_the_method_and_its_figures() -> None:
    import tomllib

    from kvsim.sim.calibrate import to_toml

    for bias, method, value in ((_bias(0.10), "cpu", 4000.0), (_bias(0.0), "ticks", 3925.0)):
        raw = {**_sweep(), "loop": _loop(4000.0, 150.0 if method == "cpu" else 0.0, bias)}
        if method == "ticks":  # an unbiased split: the ticks' system time as measured
            raw["loop"]["runs"] = [_run(d, 50, 3925.0) for d in (1, 10)]
        sec, meta = cs.section(raw), cs.loop_meta(raw)
        assert meta["method"] == method
        assert sec["write_ns"] == pytest.approx(1000.0 + value, abs=0.2)
        src = sec["src"]["write_ns"]
        assert f"method {method}" in src and f"{value:,.0f} ns" in src and "sysbias" in src
        assert f"{meta['bias']['spin_share']:.3f}" in src
        if method == "cpu":
            assert "depth 1 300 ns" in src and "6 runs" in src
        doc = {"name": "t", "freq_ghz": 2.0, "cache": [{"size": "32KiB", "ways": 8}],
               "syscall": sec, "meta": {"syscall_loop": meta}}
        back = tomllib.loads(to_toml(doc))  # [meta] holds it as written
        assert back["meta"]["syscall_loop"]["method"] == method
        assert back["meta"]["syscall_loop"]["residue_per_write_ns"] == pytest.approx(value)
        assert parse_cpu(back).syscall.call_ns[1] == sec["write_ns"]


def test_measure_predicts_the_pings_and_the_bias_test_chooses(monkeypatch) -> None:
    """calibrate_syscall.measure with the CPU file being written: the sysbias runs and the
    traced PINGs' prediction (on that file with the ticks' [syscall]) always, the method by
    the bias test; the loop's runs and the prediction faked, the sweep real and tiny."""
    seen: list[dict] = []

    def ping_user(path, log=lambda m: None, requests=None):
        import tomllib
        from pathlib import Path

        seen.append(tomllib.loads(Path(path).read_text()))
        return {1: 300.0, 10: 300.0}

    base = {"name": "t", "freq_ghz": 2.0, "cache": [{"size": "32KiB", "ways": 8}]}
    monkeypatch.setattr(cl, "ping_user", ping_user)
    for bias, method in ((_bias(0.10), "cpu"), (_bias(0.0), "ticks")):
        # kernel time per write far beyond any real call's cost, so the residue stays
        # positive whatever the real sweep measures on the machine at hand
        loop = _loop(200_000.0, 150.0, None, user=False)
        monkeypatch.setattr(cl, "measure", lambda loop=loop, **kw: dict(loop))
        monkeypatch.setattr(cl, "measure_bias", lambda rounds, log, bias=bias, **kw: bias)
        seen.clear()
        raw = cs.measure(quick=True, iters=64, peer=False, cpu_doc=base)
        assert raw["loop"]["tick_bias"] == bias
        assert len(seen) == 1 and cs.loop_meta(raw)["method"] == method
        # the file it was predicted on: this one, with the ticks' [syscall]
        assert seen[0]["name"] == "t" and "method ticks" in seen[0]["syscall"]["src"][
            "write_ns"]
        assert raw["loop"]["ping_user_ns"] == [{"depth": 1, "user_ns": 300.0},
                                               {"depth": 10, "user_ns": 300.0}]
        assert cs.loop_meta(raw)["cpu_residue_per_write_ns"] > 0  # both methods' figures
    assert cs.measure(quick=True, iters=64, peer=False)["loop"].get("ping_user_ns") is None
