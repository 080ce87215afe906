"""The server's kind of work (traces/FORMAT.md: kind 6, ``server``): where c_ref's traces
label it, how a CPU file gives its rate, and how ``kvsim calibrate`` measures it with c_ref's
own server (``kvsim-cref serverloop``, c_ref/serverloop.c; sim/calibrate_work.py)."""

from __future__ import annotations

import copy
import json
import subprocess
import tomllib
from pathlib import Path

import numpy as np
import pytest

from kvsim import artifacts, sim, traces
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_work as cw
from kvsim.traces import format as fmt
from kvsim.traces.work import instructions_by_kind

DOC = {
    "name": "t", "freq_ghz": 3.0, "core": {"width": 6, "rob": 256},
    "cache": [{"name": "L1D", "size": 49152, "ways": 12, "line": 64, "latency": 5},
              {"name": "L2", "size": 2097152, "ways": 16, "line": 64, "latency": 16}],
    "dram": {"latency_ns": 100.0},
}
PARSE_SITES = ("resp.parse", "resp.argv", "resp.reply")


def _cref(*args: object) -> str:
    exe = artifacts.path(artifacts.CREF_CLI)
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          check=True).stdout


def _trace(tmp_path: Path, name: str, *args: object) -> tuple[dict, np.ndarray]:
    out = tmp_path / f"{name}.kvt"
    _cref(*args, *(["--trace", out] if args[0] == "serverloop" else ["-o", out]))
    with traces.open(out) as tr:
        header = tr.header
    return header, traces.read_all(out)


def _server_work_sites(header: dict, r: np.ndarray) -> dict[str, int]:
    """{site name: server-kind instructions} the WORK markers of the measured part put
    before each access record's site."""
    srv = header["work_kinds"].index("server")
    marker = r["kind"] == fmt.KIND_MARKER
    access = np.flatnonzero(~marker)
    work = np.flatnonzero(marker & (r["flags"] == fmt.MARK_WORK))
    k = (r["addr"][work] >> np.uint64(fmt.WORK_COUNT_BITS)).astype(np.int64)
    n = (r["addr"][work] & np.uint64((1 << fmt.WORK_COUNT_BITS) - 1)).astype(np.int64)
    nxt = access[np.searchsorted(access, work[k == srv])]
    out: dict[str, int] = {}
    for site, m in zip(r["site"][nxt], n[k == srv], strict=True):
        out[header["sites"][site]] = out.get(header["sites"][site], 0) + int(m)
    return out


@pytest.mark.parametrize("command", ["ping", "get"])
def test_the_servers_parse_sites_carry_the_server_kind(tmp_path, command):
    """c_ref's server labels its request path's work (callpath.c) as ``server``, at the sites
    of its parse and replies (the argv objects, the reply pieces); the same GETs run by the
    in-memory pipeline (no server) carry none of it, and the parse sites' own kind stays
    ``parse`` (the sites are shared with the in-memory workloads)."""
    h, r = _trace(tmp_path, command, "serverloop", "--command", command, "--iters", 40,
                  "--keys", 50)
    assert h["format_version"] == traces.VERSION >= 5
    assert "server" in h["work_kinds"]
    kinds = instructions_by_kind(h, r)
    assert kinds["server"] > 0 and kinds["parse"] > 0
    at = _server_work_sites(h, r)
    assert {"resp.argv", "resp.reply"} <= set(at)  # and where call() precedes the keyspace
    parse = h["work_kinds"].index("parse")
    assert all(h["site_kinds"][h["sites"].index(s)] == parse for s in PARSE_SITES)
    h2, r2 = _trace(tmp_path, "pipeline", "trace", "pipeline", "--keys", 50, "--ops", 40)
    assert instructions_by_kind(h2, r2)["server"] == 0 and _server_work_sites(h2, r2) == {}


def test_the_server_kind_is_per_request(tmp_path):
    """The kind's instructions grow with the requests served, by the same amount each."""
    per = []
    for iters in (20, 60):
        h, r = _trace(tmp_path, f"p{iters}", "serverloop", "--iters", iters)
        per.append(instructions_by_kind(h, r)["server"])
    assert per[1] == 3 * per[0] > 0


def test_a_cpu_file_gives_the_server_rate():
    doc = {**copy.deepcopy(DOC), "work": {"generic": 4.0, "server": 2.0}}
    assert sim.parse_cpu(doc).work_ipc()["server"] == 2.0
    doc["work"] = {"generic": 4.0}
    assert sim.parse_cpu(doc).work_ipc()["server"] == 4.0  # not given: generic's
    for bad, msg in ((7.0, "work.server: at most the width"), (-1.0, "work.server"),
                     ("fast", "work.server")):
        doc["work"] = {"server": bad}
        with pytest.raises(sim.ConfigError, match=msg) as e:
            sim.parse_cpu(doc)
        assert "\n" not in str(e.value)
    doc["work"] = {"servr": 2.0}
    with pytest.raises(sim.ConfigError, match="servr"):
        sim.parse_cpu(doc)


def test_every_preset_gives_the_server_rate_with_its_source():
    checked = 0
    for name in sim.preset_names():
        cpu = sim.load_cpu(name)
        if not cpu.work:  # the uncalibrated `local`: no [work] at all, every kind generic's
            continue
        assert dict(cpu.work).get("server"), name
        src = cpu.provenance["work"]["server"]
        assert src.startswith(("E ", "measured")), name
        checked += 1
    assert checked >= 5


def test_the_server_kernel_runs_and_checks_its_replies():
    out = json.loads(_cref("serverloop", "--command", "get", "--depth", 3, "--iters", 200,
                           "--rounds", 2, "--keys", 20))
    assert (out["command"], out["depth"], out["rounds"]) == ("get", 3, 2)
    for arm in ("none", "loopback"):
        seg, clk = out[f"{arm}_segment_ns"], out[f"{arm}_clock_ns"]
        assert len(seg) == len(clk) == 2 and all(s > c > 0 for s, c in zip(seg, clk, strict=True))
    ns = cw.server_ns_per_request([out])
    pairs = zip(out["loopback_segment_ns"], out["loopback_clock_ns"], strict=True)
    assert ns == min((s - c) / 3 for s, c in pairs)
    bad = subprocess.run([str(artifacts.path(artifacts.CREF_CLI)), "serverloop", "--command",
                          "set"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "--command" in bad.stderr


def _predicted_ns(doc: dict, rates: dict, trace: Path, n: int) -> float:
    d = {**doc, "work": rates}
    return sim.simulate(str(trace), sim.parse_cpu(tomllib.loads(cal.to_toml(d))))[
        "timing"]["time_ns"] / n


def test_the_server_rate_reproduces_the_kernels_time(tmp_path, monkeypatch):
    """A native time made by the simulator at server rate 1.5 gives back 1.5 (every other
    kind fixed); the fit lands in [work] with a measured source and its samples."""
    kernel = {"command": "ping", "depth": 2, "iters": 300}
    trace = tmp_path / "s.kvt"
    _cref("serverloop", *cw._server_args(kernel), "--trace", trace)
    rates = {"generic": 4.0, "parse": 4.0, "hash": 2.5}
    ns = _predicted_ns(DOC, {**rates, "server": 1.5}, trace, 600)
    fit = cw.fit_server(DOC, rates, ns, 6, trace, 600)
    assert fit["bound"] is None and fit["ipc"] == pytest.approx(1.5, rel=0.02)
    assert cw.fit_server(DOC, rates, ns * 1e-3, 6, trace, 600)["bound"] == "width"

    monkeypatch.setattr(cw, "SERVER_KERNEL", kernel)
    run = {"depth": 2, "loopback_segment_ns": [2 * ns + 20, 2 * ns + 30],
           "loopback_clock_ns": [20.0, 20.0], "none_segment_ns": [2 * ns],
           "none_clock_ns": [20.0]}
    doc = {**copy.deepcopy(DOC), "work": dict(rates)}
    cw.add_server(doc, {"server_runs": [run], "server_kernel": kernel})
    assert doc["work"]["server"] == pytest.approx(1.5, rel=0.02)
    assert doc["work"]["src"]["server"].startswith("measured: c_ref's server")
    assert doc["meta"]["raw"]["work_kinds"]["server_runs"] == [run]
    assert sim.parse_cpu(tomllib.loads(cal.to_toml(doc))).work_ipc()["server"] > 0


def test_the_server_kernels_trace_is_deterministic(tmp_path):
    """Same options, same bytes: the traced loop runs without address-space randomisation
    (the libc allocator's addresses are in the trace)."""
    outs = []
    for i in range(2):
        out = tmp_path / f"d{i}.kvt"
        _cref("serverloop", "--command", "get", "--depth", 2, "--iters", 50, "--keys", 20,
              "--trace", out)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
