"""Recorded commands name no machine paths; every published result file's command is clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsim import artifacts, provenance

ROOT = artifacts.source_root()


@pytest.mark.parametrize(("argv", "want"), [
    (["kvsim", "run", "x", "-o", "/tmp/a/b"], "kvsim run x -o DIR"),
    (["kvsim", "run", "--output", "/data/r"], "kvsim run --output DIR"),
    (["bench.py", "--out", "/tmp/r.json"], "bench.py --out FILE"),
    (["bench.py", "--out=/tmp/r.json"], "bench.py --out=FILE"),
    (["fidelity.py", "--before-bin", "/opt/b/kvsim-cref"], "fidelity.py --before-bin PATH"),
    (["__main__.py", "simulate", "t.kvt"], "kvsim simulate t.kvt"),
    (["kvsim", "-o", "DIR", "--cpu", "local"], "kvsim -o DIR --cpu local"),
])
def test_scrub_command(argv, want):
    assert provenance.scrub_command(argv, root=Path("/srv/checkout")) == want


def test_scrub_keeps_checkout_and_home_relative():
    root = Path("/srv/checkout")
    assert provenance.scrub_word("/srv/checkout/results/a.json", None, root) == "results/a.json"
    home = Path.home()
    if home != Path("/"):
        assert provenance.scrub_word(str(home / "t.kvt"), "--trace", root) == "~/t.kvt"


@pytest.mark.parametrize(("text", "want"), [("1\n", True), ("0\n", False), (None, None)])
def test_sched_autogroup_read_from_the_kernel_setting(tmp_path, text, want):
    path = tmp_path / "sched_autogroup_enabled"
    if text is not None:
        path.write_text(text)
    assert provenance.sched_autogroup(path) is want
    assert provenance.machine()["sched_autogroup"] is provenance.sched_autogroup()


def test_scrub_is_idempotent():
    line = "kvsim experiment run all -o /tmp/x --out=/var/y.json --before-bin /usr/b"
    once = provenance.scrub_line(line)
    assert "/" not in once.replace("--out=FILE", "")
    assert provenance.scrub_line(once) == once


def test_provenance_records_a_scrubbed_command(monkeypatch):
    monkeypatch.setattr("sys.argv", ["/usr/bin/kvsim", "bench", "-o", "/tmp/out"])
    assert provenance.provenance()["command"] == "kvsim bench -o DIR"


def _result_commands():
    if ROOT is None:
        return []
    out = []
    for path in sorted((ROOT / "results").rglob("*.json")):
        doc = json.loads(path.read_text())
        cmd = (doc.get("provenance") or {}).get("command") if isinstance(doc, dict) else None
        if cmd:
            out.append((path.relative_to(ROOT).as_posix(), cmd))
    return out


@pytest.mark.skipif(ROOT is None, reason="needs a checkout")
@pytest.mark.parametrize(("name", "command"), _result_commands())
def test_published_commands_name_no_machine_paths(name, command):
    assert provenance.scrub_line(command) == command, name


def test_write_atomic_writes_a_pipe_in_place(tmp_path):
    """A result path that is a FIFO (or /dev/null) is written into, not replaced by a file."""
    import os
    import stat
    import threading

    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    provenance.write_atomic(fifo, "{}\n")
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got == ["{}\n"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 7, 3 << 20])
def test_file_sha256_is_the_digest_of_the_whole_file(tmp_path, size):
    """Read in blocks, the digest is hashlib's over the file's bytes at every size (blocks
    of 1 MiB: below, at and across their edge)."""
    import hashlib
    import random

    data = random.Random(size).randbytes(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert provenance.file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert provenance.file_sha256(str(path)) == provenance.file_sha256(path)


def test_file_sha256_of_a_missing_file_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        provenance.file_sha256(tmp_path / "missing")


def test_shown_paths_name_no_machine_folder(tmp_path, monkeypatch):
    """What a result records of a file's path (a validation table's CPU file, a re-measured
    file's source): the checkout's files relative to it, the home directory's as ``~/...``,
    any other the file's name alone; a relative path is taken from the current directory."""
    root = ROOT or tmp_path
    assert provenance.shown_path(str(root / "results" / "x.toml"), root) == "results/x.toml"
    if ROOT is not None:  # by default the checkout kvsim runs from
        assert provenance.shown_path(str(ROOT / "results" / "x.toml")) == "results/x.toml"
    home = Path.home()
    if home != Path("/") and not (ROOT and ROOT.is_relative_to(home / ".cache")):
        assert provenance.shown_path(str(home / ".cache" / "x.toml"), root) == "~/.cache/x.toml"
    # a scratch folder outside both: the file's name alone (its SHA-256 stands beside it)
    scratch = Path("/nonexistent-scratch/local.toml")
    assert provenance.shown_path(str(scratch), Path("/srv/checkout")) == "local.toml"
    monkeypatch.chdir(root)
    assert provenance.shown_path("results/x.toml", root) == "results/x.toml"
    assert provenance.shown_path(Path("results") / "x.toml", root) == "results/x.toml"
    assert provenance.shown_path(None) is None and provenance.shown_path("") == ""
