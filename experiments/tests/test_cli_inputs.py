"""What the CLI does with the files it is given: ``kvsim simulate`` reads every format
``kvsim convert`` reads (by content, as convert does) and gets the counts the converted .kvt
gets; every reader's error names the file, the line or byte and what was expected; a
missing file reads the same in every subcommand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsim.traces.convert import formats

CPU = "graviton3"


def _levels(res) -> list[tuple[int, int]]:
    return [(lv["demand_accesses"], lv["demand_misses"]) for lv in res["levels"]]


def _simulate(kvsim, path, *extra) -> dict:
    res = kvsim("simulate", path, "--cpu", CPU, "--functional", "--json", *extra)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


@pytest.mark.parametrize("fmt", [f for f in formats.readable()
                                 if f != "kvt" and f in formats.writable()])
def test_simulate_reads_what_convert_reads(fmt: str, kvsim, small_trace: Path,
                                           tmp_path: Path) -> None:
    """A trace in another format, named without its ending (so the content decides), is
    simulated as the .kvt converted from it is."""
    row = formats.FORMATS[fmt]
    foreign = tmp_path / f"t{row.preferred}"
    assert kvsim("convert", small_trace, foreign).returncode == 0
    anonymous = tmp_path / "trace-file"
    anonymous.write_bytes(foreign.read_bytes())
    back = tmp_path / "back.kvt"
    res = kvsim("convert", foreign, back)
    assert res.returncode == 0, res.stderr.decode()
    assert _levels(_simulate(kvsim, anonymous)) == _levels(_simulate(kvsim, back))


def test_simulate_reads_from_stdin_by_content(kvsim, small_trace: Path, tmp_path: Path
                                              ) -> None:
    din = tmp_path / "t.din"
    assert kvsim("convert", small_trace, din).returncode == 0
    res = kvsim("simulate", "-", "--cpu", CPU, "--functional", "--json",
                input=din.read_bytes())
    assert res.returncode == 0, res.stderr.decode()
    assert _levels(json.loads(res.stdout)) == _levels(_simulate(kvsim, din))


def test_gem5_engine_refuses_another_format_naming_it_and_convert(kvsim, small_trace: Path,
                                                                   tmp_path: Path) -> None:
    lk = tmp_path / "t.lackey"
    assert kvsim("convert", small_trace, lk).returncode == 0
    res = kvsim("simulate", lk, "--cpu", CPU, "--engine", "gem5", "--gem5", "/bin/true")
    err = res.stderr.decode()
    assert res.returncode == 1 and res.stdout == b""
    assert err.strip().splitlines() == [
        f"kvsim: error: {lk}: a lackey trace; --engine gem5 replays a .kvt: convert it first "
        f"(kvsim convert {lk} OUT.kvt)"]


def test_gem5_trace_with_cpus_of_different_frequencies_is_refused(kvsim, small_trace: Path,
                                                                  tmp_path: Path) -> None:
    trc = tmp_path / "t.trc"
    assert kvsim("convert", small_trace, trc).returncode == 0
    res = kvsim("simulate", trc, "--cpu", "graviton3", "--cpu", "xeon-8488c")
    err = res.stderr.decode()
    assert res.returncode == 2 and len(err.strip().splitlines()) == 1
    assert "kvsim convert" in err and "frequency" in err


# --- readers' errors: file, where, what was expected ------------------------------------
def _cuts(data: bytes, every: int) -> list[int]:
    return list(range(1, min(len(data), 4000), every))


@pytest.mark.parametrize("fmt", ["lackey", "dinero"])
def test_a_text_trace_cut_anywhere_names_file_line_and_expectation(
        fmt: str, kvsim, small_trace: Path, tmp_path: Path) -> None:
    """Cut at any byte, a text trace either reads (the cut fell at a line end) or fails with
    one line: the file, the line number and what the line should have held, never Python's
    int() message."""
    full = tmp_path / f"full{formats.FORMATS[fmt].suffixes[0]}"
    assert kvsim("convert", small_trace, full).returncode == 0
    data = full.read_bytes()
    from kvsim.traces import convert as conv

    cut = tmp_path / f"cut{formats.FORMATS[fmt].suffixes[0]}"
    failures = 0
    for n in _cuts(data, 7):
        cut.write_bytes(data[:n])
        try:
            conv.convert(str(cut), str(tmp_path / "o.kvt"))
        except ValueError as exc:
            msg = str(exc)
            failures += 1
            assert msg.startswith(f"{cut}: line "), msg
            assert "expected" in msg and "invalid literal" not in msg, msg
            assert "\n" not in msg
    assert failures > 0


def test_lackey_cut_mid_line_in_simulate(kvsim, tmp_path: Path) -> None:
    cut = tmp_path / "cut.lackey"
    cut.write_text("I  04010173,3\n L 04222cac,8\nI  04010176,3\n S 04222c")
    res = kvsim("simulate", cut, "--cpu", CPU)
    assert res.returncode == 1 and res.stdout == b""
    assert res.stderr.decode().strip().splitlines() == [
        f"kvsim: error: {cut}: line 4: expected 'I|L|S|M <hex addr>,<size>': ' S 04222c'"]
    cut.write_text("I  04010173,3\n L 04222cac,")
    res = kvsim("simulate", cut, "--cpu", CPU)
    assert res.stderr.decode().strip() == (
        f"kvsim: error: {cut}: line 2: expected 'I|L|S|M <hex addr>,<size>': the decimal "
        f"size is missing: ' L 04222cac,'")


@pytest.mark.parametrize("fmt", ["champsim", "gem5", "kvt"])
def test_a_binary_trace_cut_names_file_and_byte(fmt: str, kvsim, small_trace: Path,
                                                 tmp_path: Path) -> None:
    row = formats.FORMATS[fmt]
    full = tmp_path / f"full{row.suffixes[0]}"
    assert kvsim("convert", small_trace, full).returncode == 0
    data = full.read_bytes()
    cut = tmp_path / f"cut{row.suffixes[0]}"
    cut.write_bytes(data[:len(data) // 2 + 3])
    res = kvsim("simulate", cut, "--cpu", CPU)
    err = res.stderr.decode().strip()
    assert res.returncode == 1 and len(err.splitlines()) == 1, err
    assert err.startswith(f"kvsim: error: {cut}: ") and "byte" in err, err


# --- a missing file reads the same everywhere --------------------------------------------
def test_missing_files_read_the_same_in_every_subcommand(kvsim, small_trace: Path,
                                                         tmp_path: Path) -> None:
    gone = tmp_path / "nosuch.kvt"
    toml = tmp_path / "nosuch.toml"
    cases = [
        (["simulate", gone, "--cpu", CPU], gone),
        (["simulate", gone, "--cpu", CPU, "--engine", "gem5", "--gem5", "/bin/true"], gone),
        (["simulate", small_trace, "--cpu", toml], toml),
        (["trace-info", gone], gone),
        (["convert", gone, tmp_path / "o.kvt"], gone),
        (["convert", small_trace, tmp_path / "o.trc", "--cpu", toml], toml),
        (["compare", "--trace", f"a={gone}", "--trace", f"b={small_trace}", "--cpu", CPU],
         gone),
        (["calibrate", "--from-raw", toml, "-o", tmp_path / "cpu.toml"], toml),
        (["experiment", "report", tmp_path / "nosuch"], tmp_path / "nosuch"),
    ]
    for args, path in cases:
        res = kvsim(*args)
        assert res.returncode == 1, args
        assert res.stderr.decode().strip() == f"kvsim: error: {path}: no such file", args
        assert res.stdout == b""
