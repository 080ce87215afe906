"""Progress bars: drawn on stderr when it is a terminal, silent when piped or with --quiet,
and stdout is byte-identical in every case."""

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios

import pytest

from .conftest import ROOT, SMALL, run_kvsim


def run_with_tty_stderr(*args):
    """Run kvsim with stderr on a pseudo-terminal and stdout on a pipe: (rc, stdout, stderr).

    The parent keeps the terminal's slave end open until the child has exited and the master
    is drained: Linux drops unread pty output once the last slave descriptor closes.
    """
    master, slave = pty.openpty()
    # a new pty is 0 x 0 characters, and tqdm draws nothing 0 columns wide: size it
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "kvsim.experiments.cli", *map(str, args)],
                                stdout=out, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env=env)
        err = bytearray()
        try:
            while True:
                done = proc.poll() is not None
                while select.select([master], [], [], 0 if done else 0.05)[0]:
                    err += os.read(master, 65536)
                if done:
                    break
        finally:
            os.close(slave)
            os.close(master)
        out.seek(0)
        return proc.returncode, out.read(), bytes(err)


def commands(tmp_path, small_trace):
    return {
        "simulate": ["simulate", small_trace, "--cpu", "graviton3", "--json"],
        "trace": ["trace", "pipeline", "-o", "-", *SMALL],
        "convert": ["convert", small_trace, "-"],
        "native": ["native", "pipeline", *SMALL, "--repeat", "2", "--json"],
    }


@pytest.mark.parametrize("name, needle", [("simulate", b"simulate"), ("trace", b"trace"),
                                          ("convert", b"convert"), ("native", b"native")])
def test_bar_on_a_terminal_silence_otherwise_same_stdout(name, needle, tmp_path, small_trace):
    args = commands(tmp_path, small_trace)[name]
    rc, tty_out, tty_err = run_with_tty_stderr(*args)
    assert rc == 0, tty_err.decode(errors="replace")
    assert needle in tty_err and b"\r" in tty_err, tty_err  # tqdm redraws with \r

    piped = run_kvsim(*args)
    assert piped.returncode == 0 and piped.stderr == b"", piped.stderr.decode()

    rc_q, quiet_out, quiet_err = run_with_tty_stderr("--quiet", *args)
    assert rc_q == 0 and quiet_err == b"", quiet_err

    if name == "native":  # timings differ from run to run; the JSON's keys do not
        import json

        keys = [sorted(json.loads(o)) for o in (tty_out, piped.stdout, quiet_out)]
        assert keys[0] == keys[1] == keys[2]
    else:
        assert tty_out == piped.stdout == quiet_out
        assert len(tty_out) > 0


def test_simulate_bar_knows_the_total(small_trace):
    from kvsim import traces
    from kvsim.experiments import progress

    with traces.open(small_trace) as r:
        n = sum(len(c) for c in r)
    assert progress.trace_total_records(small_trace) == n
    rc, _, err = run_with_tty_stderr("simulate", small_trace, "--cpu", "graviton3", "--json")
    assert rc == 0
    assert f"/{n}".encode() in err or f"/{n / 1000:.1f}k".encode() in err, err


def test_total_is_none_for_stdin_and_damaged_files(tmp_path, small_trace):
    from kvsim.experiments import progress

    assert progress.trace_total_records("-") is None
    bad = tmp_path / "cut.kvt"
    bad.write_bytes(small_trace.read_bytes()[:-3])
    assert progress.trace_total_records(bad) is None
    assert progress.trace_total_records(tmp_path / "missing.kvt") is None


def test_convert_progress_counts_every_input_byte(tmp_path, small_trace):
    from kvsim.traces import convert

    seen = []
    convert.convert(str(small_trace), str(tmp_path / "o.din"), progress=seen.append)
    assert sum(seen) == small_trace.stat().st_size
    plain = tmp_path / "plain.din"
    convert.convert(str(small_trace), str(plain))
    assert plain.read_bytes() == (tmp_path / "o.din").read_bytes()


def test_convert_progress_from_stdin(tmp_path, small_trace, monkeypatch):
    import io

    from kvsim.traces import convert

    class Stdin:
        buffer = io.BytesIO(small_trace.read_bytes())
        buffer.name = "<stdin>"

    monkeypatch.setattr(sys, "stdin", Stdin)
    seen = []
    convert.convert("-", str(tmp_path / "o.kvt"), progress=seen.append)
    assert sum(seen) == small_trace.stat().st_size
