"""The CLI's bad-input matrix: every subcommand that reads a file, given each kind of bad file;
every subcommand given invalid option values; output into a directory that cannot be written;
a reader that closes the pipe early. Each cell: a non-zero exit, one line ``kvsim: error: ...``
on stderr, no traceback, and no file left in the output directory."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from kvsim import traces

from .conftest import ROOT, SMALL, run_kvsim


def make_input(kind: str, tmp, small_trace, suffix: str = ".kvt"):
    """A bad input of ``kind`` under ``tmp``; returns its path."""
    p = tmp / f"in{suffix}"
    good = small_trace.read_bytes()
    if kind == "missing":
        return tmp / f"missing{suffix}"
    if kind == "directory":
        p.mkdir()
    elif kind == "unreadable":
        p.write_bytes(good)
        p.chmod(0)
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "truncated":
        p.write_bytes(good[: len(good) // 2])
    elif kind == "corrupted":
        data = bytearray(good)
        data[len(data) // 2] ^= 0x40
        p.write_bytes(bytes(data))
    elif kind == "wrong-format":
        p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    elif kind == "bad-record":
        rec = np.zeros(3, dtype=traces.RECORD_DTYPE)
        rec["size"], rec["kind"][1] = 8, 9
        with traces.Writer(p, {}, validate=False) as w:
            w.write(rec)
    else:
        raise AssertionError(kind)
    return p


INPUT_KINDS = ["missing", "directory", "unreadable", "empty", "truncated", "corrupted",
               "wrong-format", "bad-record"]
# (name, argv with {IN} for the input and {OUT} for a path in the output directory)
TRACE_READERS = [
    ("trace-info", ["trace-info", "{IN}"]),
    ("trace-info-json", ["trace-info", "{IN}", "--json"]),
    ("simulate", ["simulate", "{IN}", "--cpu", "local", "--functional"]),
    ("convert-din", ["convert", "{IN}", "{OUT}/out.din"]),
    ("convert-kvt", ["convert", "{IN}", "{OUT}/out.kvt", "--to", "kvt"]),
    ("convert-champsim", ["convert", "{IN}", "{OUT}/out.champsimtrace.xz"]),
    ("convert-gem5", ["convert", "{IN}", "{OUT}/out.trc.gz"]),
    ("convert-elastic", ["convert", "{IN}", "{OUT}/out.deptrace.proto.gz"]),
]


def assert_clean_failure(res, out_dir=None, needle=None):
    err = res.stderr.decode(errors="replace")
    assert res.returncode != 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("kvsim: error: "), err
    assert "Traceback" not in err
    if needle is not None:
        assert needle in lines[0], (needle, lines[0])
    if out_dir is not None:
        assert sorted(os.listdir(out_dir)) == [], "a partial output file was left"


def _argv(template, inp, out):
    return [a.replace("{IN}", str(inp)).replace("{OUT}", str(out)) for a in template]


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("name,template", TRACE_READERS, ids=[t[0] for t in TRACE_READERS])
def test_bad_trace_input(kind, name, template, tmp_path, small_trace):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    inp = make_input(kind, src, small_trace)
    res = run_kvsim(*_argv(template, inp, out), honour_permissions=True)
    # the message names the file given (or, for a bad record, the record and the field)
    assert_clean_failure(res, out, needle="kind" if kind == "bad-record" else inp.name)


def _foreign(kind: str) -> tuple[str, bytes]:
    """(file name, bytes) of a damaged trace in another tool's format."""
    import gzip
    import lzma
    import struct
    import zipfile

    golden = ROOT / "traces" / "tests" / "data" / "gem5_packet_trace.trc"
    instr = np.zeros(64, dtype=np.uint8)
    instr[0] = 1  # a ChampSim instruction with ip 1
    entries = struct.pack("<HHQ", 25, 0, 6) + struct.pack("<HHQ", 10, 3, 0x400000) * 500
    if kind == "champsim-truncated":
        return "t.champsimtrace", (instr.tobytes() * 3)[:-10]
    if kind == "champsim-xz-corrupt":
        data = bytearray(lzma.compress(bytes(range(256)) * 256))
        data[len(data) // 2] ^= 0xFF
        return "t.champsimtrace.xz", bytes(data)
    if kind == "drmemtrace-truncated":
        return "t.trace.gz", gzip.compress(entries[:-5])
    if kind == "drmemtrace-zip-corrupt":
        import io

        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("chunk.0000", entries)
        data = bytearray(buf.getvalue())
        data[60] ^= 0xFF
        return "t.trace.zip", bytes(data)
    if kind == "gem5-truncated":
        return "t.trc", golden.read_bytes()[:-3]
    if kind == "gem5-gz-corrupt":
        data = bytearray(gzip.compress(golden.read_bytes()))
        data[len(data) // 2] ^= 0xFF
        return "t.trc.gz", bytes(data)
    if kind == "din-bad-line":
        return "t.din", b"r 10 8\nr zz 8\n"
    if kind == "lackey-bad-line":
        return "t.lackey", b"I  00400000,3\n L 1234\n"
    raise AssertionError(kind)


FOREIGN_KINDS = ["champsim-truncated", "champsim-xz-corrupt", "drmemtrace-truncated",
                 "drmemtrace-zip-corrupt", "gem5-truncated", "gem5-gz-corrupt", "din-bad-line",
                 "lackey-bad-line"]


@pytest.mark.parametrize("kind", FOREIGN_KINDS)
def test_bad_foreign_input(kind, tmp_path):
    """Another tool's trace, damaged: one line naming the file, nothing left behind."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    name, data = _foreign(kind)
    (src / name).write_bytes(data)
    res = run_kvsim("convert", src / name, out / "o.kvt")
    assert_clean_failure(res, out, needle=name)


CPU_KINDS = ["missing", "directory", "unreadable", "empty", "truncated", "wrong-format"]


# every subcommand that reads a CPU file ({CPU})
CPU_READERS = [
    ("simulate", ["simulate", "{TRACE}", "--cpu", "{CPU}"]),
    ("compare", ["compare", "pipeline", "--variant", "naive", "--variant", "lookahead",
                 "--cpu", "{CPU}", *SMALL]),
    ("cpus-show", ["cpus", "--show", "{CPU}"]),
]


@pytest.mark.parametrize("kind", CPU_KINDS)
@pytest.mark.parametrize("name,template", CPU_READERS, ids=[c[0] for c in CPU_READERS])
def test_bad_cpu_file(kind, name, template, tmp_path, small_trace):
    p = tmp_path / "cpu.toml"
    if kind == "missing":
        pass
    elif kind == "directory":
        p.mkdir()
    elif kind == "unreadable":
        p.write_text('name = "x"\n[[cache]]\nname = "L1"\nsize = "32KiB"\nways = 8\nline = 64\n')
        p.chmod(0)
    elif kind == "empty":
        p.write_text("")
    elif kind == "truncated":
        p.write_text('name = "x"\n[[cache]]\nname = "L1"\nsize = "32K')
    elif kind == "wrong-format":
        p.write_bytes(small_trace.read_bytes()[:300])
    args = [a.replace("{TRACE}", str(small_trace)).replace("{CPU}", str(p)) for a in template]
    res = run_kvsim(*args, honour_permissions=True)
    assert_clean_failure(res, needle=p.name)


RESULT_KINDS = ["missing", "a-file", "empty", "corrupted", "unreadable"]


@pytest.mark.parametrize("kind", RESULT_KINDS)
def test_bad_results_directory(kind, tmp_path):
    """``kvsim experiment report DIR`` on a directory that holds no readable results."""
    d = tmp_path / "results"
    if kind == "a-file":
        d.write_text("x")
    elif kind != "missing":
        d.mkdir()
    if kind in ("corrupted", "unreadable"):
        f = d / "pipeline" / "pipeline.parquet"
        f.parent.mkdir()
        f.write_bytes(b"PAR1" + bytes(range(256)))
        if kind == "unreadable":
            f.write_bytes(b"")
            f.chmod(0)
    res = run_kvsim("experiment", "report", d, honour_permissions=True)
    assert_clean_failure(res)


BAD_OPTIONS = [
    ["simulate", "{TRACE}", "--cpu", "local", "--threads", "0"],
    ["simulate", "{TRACE}", "--cpu", "local", "--engine", "turbo"],
    ["simulate", "{TRACE}", "--cpu", "no-such-cpu"],
    ["trace", "pipeline", "-o", "{OUT}/t.kvt", "--keys", "0"],
    ["trace", "pipeline", "-o", "{OUT}/t.kvt", "--codec", "lz4"],
    ["trace", "pipeline", "-o", "{OUT}/t.kvt", "--variant", "no-such-variant", *SMALL],
    ["trace", "nosuchworkload", "-o", "{OUT}/t.kvt"],
    ["native", "pipeline", "--repeat", "0"],
    ["convert", "{TRACE}", "{OUT}/x.out", "--to", "bogus"],
    ["convert", "{TRACE}", "{OUT}/x.kvt", "--from", "bogus"],
    ["convert", "{TRACE}", "{OUT}/x.noext"],
    ["experiment", "demo", "--keys", "0", "--out", "{OUT}/demo"],
    ["experiment", "nosuch", "--out", "{OUT}/demo"],
    ["trace-info"],
    ["simulate", "{TRACE}"],
]


@pytest.mark.parametrize("template", BAD_OPTIONS, ids=[" ".join(t[:4]) for t in BAD_OPTIONS])
def test_invalid_option_values(template, tmp_path, small_trace):
    args = [a.replace("{TRACE}", str(small_trace)).replace("{OUT}", str(tmp_path))
            for a in template]
    assert_clean_failure(run_kvsim(*args), tmp_path)


def _unwritable_dirs(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    yield "parent-is-a-file", f / "sub"
    yield "missing-parent", tmp_path / "no" / "such" / "dir"


OUTPUTS = [
    ("trace", ["trace", "pipeline", *SMALL, "-o", "{D}/t.kvt"]),
    ("convert", ["convert", "{TRACE}", "{D}/t.din"]),
    ("convert-kvt", ["convert", "{TRACE}", "{D}/t.kvt", "--to", "kvt"]),
    # refused before any measuring (calibrate) or reading (report)
    ("calibrate", ["calibrate", "--quick", "-o", "{D}/cpu.toml"]),
    ("report", ["experiment", "report", "{TRACE}.d", "-o", "{D}/report.md"]),
]


@pytest.mark.parametrize("where", ["parent-is-a-file", "missing-parent", "read-only"])
@pytest.mark.parametrize("name,template", OUTPUTS, ids=[o[0] for o in OUTPUTS])
def test_unwritable_output(where, name, template, tmp_path, small_trace):
    if where == "read-only":
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
    else:
        d = dict(_unwritable_dirs(tmp_path))[where]
    args = [a.replace("{TRACE}", str(small_trace)).replace("{D}", str(d)) for a in template]
    res = run_kvsim(*args, honour_permissions=True)
    # the message names the path given, not an internal temporary name
    out_arg = next(a for a in args if a.startswith(str(d)))
    assert_clean_failure(res, needle=out_arg)
    assert ".tmp" not in res.stderr.decode(), "names an internal temporary file"
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))


# subcommands writing into an output directory (made with its missing parents)
OUTPUT_DIRS = [
    ("experiment-run", ["experiment", "run", "pipeline", "--only", "sim", "-o", "{D}/res"]),
    ("experiment-demo", ["experiment", "demo", "--out", "{D}/demo"]),
]


@pytest.mark.parametrize("where", ["parent-is-a-file", "read-only"])
@pytest.mark.parametrize("name,template", OUTPUT_DIRS, ids=[o[0] for o in OUTPUT_DIRS])
def test_unwritable_output_directory(where, name, template, tmp_path):
    if where == "read-only":
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
    else:
        d = dict(_unwritable_dirs(tmp_path))[where]
    args = [a.replace("{D}", str(d)) for a in template]
    res = run_kvsim(*args, honour_permissions=True)
    out_arg = next(a for a in args if a.startswith(str(d)))
    assert_clean_failure(res, needle=out_arg)


PIPES = [
    ("trace", ["trace", "pipeline", *SMALL, "-o", "-"]),
    ("convert", ["convert", "{TRACE}", "-", "--to", "dinero"]),
    ("convert-lackey", ["convert", "{TRACE}", "-", "--to", "lackey"]),
    ("convert-champsim", ["convert", "{TRACE}", "-", "--to", "champsim"]),
    ("convert-gem5", ["convert", "{TRACE}", "-", "--to", "gem5"]),
    ("convert-kvt", ["convert", "{TRACE}", "-", "--to", "kvt"]),
    ("trace-info", ["trace-info", "{TRACE}", "--json"]),
    ("cpus", ["cpus", "--json"]),
]
#: Bytes a pipe holds before its writer blocks (Linux's default pipe size).
PIPE_BUFFER = 65536


@pytest.mark.parametrize("name,template", PIPES, ids=[p[0] for p in PIPES])
def test_broken_pipe_downstream(name, template, small_trace):
    """``kvsim ... | head -c 100``: kvsim stops with one line and a non-zero exit (the
    output was cut short), never a traceback. Only an output that fits in the pipe before
    ``head`` exits may end in success."""
    args = " ".join(a.replace("{TRACE}", str(small_trace)) for a in template)
    full = run_kvsim(*(a.replace("{TRACE}", str(small_trace)) for a in template))
    assert full.returncode == 0, full.stderr.decode()
    cmd = f"{sys.executable} -m kvsim.experiments.cli {args} | head -c 100 > /dev/null"
    res = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, cwd=ROOT,
                         timeout=600)
    err = res.stderr.decode(errors="replace")
    assert "Traceback" not in err
    if res.returncode == 0:
        # nothing lost only if the whole output fitted in the pipe before head exited
        assert len(full.stdout) <= 100 + PIPE_BUFFER, (
            f"{len(full.stdout)} bytes of output, cut at 100, yet a success")
        assert err == ""
        return
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kvsim: error: "), err
    assert "pipe" in lines[0]


STDOUT_FORMATS = [("dinero", "out.din"), ("lackey", "out.lackey"),
                  ("champsim", "out.champsimtrace"), ("gem5", "out.trc"), ("kvt", "out.kvt")]


@pytest.mark.parametrize("fmt,name", STDOUT_FORMATS, ids=[f[0] for f in STDOUT_FORMATS])
def test_convert_to_stdout_writes_everything(fmt, name, tmp_path, small_trace):
    """``kvsim convert T - --to FMT`` writes to standard output exactly the bytes it writes
    to an (uncompressed) file of that format."""
    res = run_kvsim("convert", small_trace, "-", "--to", fmt)
    assert res.returncode == 0 and res.stderr == b"", res.stderr.decode()
    assert run_kvsim("convert", small_trace, tmp_path / name, "--to", fmt).returncode == 0
    assert res.stdout == (tmp_path / name).read_bytes()


def test_write_all_surfaces_a_short_write():
    """A buffered stream that takes only part of a write (its pipe closed mid-write) reports
    the short count, not an error; ``write_all`` writes the rest, which raises."""
    from kvsim.traces.writer import write_all

    class Short:
        def __init__(self):
            self.got = b""

        def write(self, b):
            if self.got:
                raise BrokenPipeError(32, "Broken pipe")
            self.got = bytes(b[:10])
            return 10

    with pytest.raises(BrokenPipeError):
        write_all(Short(), b"x" * 100)
    whole = Short()
    whole.write = lambda b: len(b)
    write_all(whole, b"x" * 100)


@pytest.mark.parametrize("dst", ["out.din", "out.kvt"])
def test_sigterm_leaves_no_temporary_file(dst, tmp_path, small_trace):
    """``convert`` stopped by SIGTERM mid-way (its input, a FIFO, stalls after the first
    bytes) exits 128 + 15 with one line and leaves nothing in the output directory."""
    import signal
    import time

    fifo, out = tmp_path / "in.kvt", tmp_path / "out"
    out.mkdir()
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "kvsim.experiments.cli", "convert", str(fifo),
                             str(out / dst), "--to", dst.split(".")[1].replace("din", "dinero")],
                            stderr=subprocess.PIPE, cwd=ROOT, env=env)
    data = small_trace.read_bytes()
    with open(fifo, "wb") as w:
        w.write(data[: len(data) // 2])
        w.flush()
        deadline = time.monotonic() + 60
        while not os.listdir(out) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.listdir(out), "convert never created its temporary file"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.decode().strip() == "kvsim: error: terminated (SIGTERM)"
    assert os.listdir(out) == []


def _inapplicable():
    """(option, a workload that does not use it, a value) from c_ref's option table."""
    from kvsim.experiments import cref

    spec = cref.workload_options()
    for o in spec["options"]:
        others = [w for w in spec["workloads"] if w not in o["workloads"]]
        if others:
            value = [] if o["type"] == "flag" else [str(o["default"] or o["min"])]
            yield o["name"], others[0], value


INAPPLICABLE = list(_inapplicable())


def test_some_options_are_workload_specific():
    assert {"op", "keys-per-command", "batch"} <= {name for name, _, _ in INAPPLICABLE}


@pytest.mark.parametrize("name,workload,value", INAPPLICABLE,
                         ids=[f"{n}-{w}" for n, w, _ in INAPPLICABLE])
def test_option_not_for_this_workload_is_refused(name, workload, value, tmp_path):
    from kvsim.experiments import cref

    res = run_kvsim("trace", workload, f"--{name}", *value, "--keys", "100", "-o",
                    tmp_path / "t.kvt")
    assert_clean_failure(res, tmp_path, needle=f"--{name} does not apply to workload")
    # kvsim-cref, c_ref's own command line, refuses it the same way
    direct = subprocess.run([str(cref.binary()), "trace", workload, f"--{name}", *value,
                             "--keys", "100", "-o", str(tmp_path / "t.kvt")],
                            capture_output=True, timeout=120)
    assert direct.returncode != 0
    assert f"--{name} does not apply to workload '{workload}'" in direct.stderr.decode()
    assert os.listdir(tmp_path) == []
