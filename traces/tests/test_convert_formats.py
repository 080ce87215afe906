"""The converters' table (traces/convert/formats.py) is the one list of formats: a toy
format registered here is read, written, detected, guessed by name, listed in ``kvsim
convert --help``, read by ``kvsim simulate`` and fuzzed, with no other edit; the docs'
table is the table's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from kvsim import traces
from kvsim.traces import convert as conv
from kvsim.traces.convert import formats

DATA = Path(__file__).with_name("data")
CONVERT_MD = Path(traces.__file__).resolve().parent / "CONVERT.md"


def _toy_read(src: Any, opts: formats.ReadOptions) -> tuple[Iterator[np.ndarray], dict]:
    """``TOY <hex addr> <size> <kind> <gap>`` lines, one record each."""
    def gen() -> Iterator[np.ndarray]:
        rows = []
        for lineno, line in enumerate(src, 1):
            parts = line.split()
            if len(parts) != 5 or parts[0] != "TOY":
                raise ValueError(f"{opts.path}: line {lineno}: expected 'TOY <hex addr> "
                                 f"<size> <kind> <gap>'")
            rows.append((int(parts[1], 16), *map(int, parts[2:])))
        rec = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
        if rows:
            cols = np.array(rows, dtype=np.uint64).T
            rec["addr"], rec["size"], rec["kind"], rec["gap"] = cols
        yield rec
    return gen(), {}


def _toy_write(chunks: Any, header: dict, out: Any, opts: formats.WriteOptions) -> int:
    n = 0
    for c in chunks:
        for r in c[c["kind"] != traces.KIND_MARKER]:
            out.write(f"TOY {int(r['addr']):x} {r['size']} {r['kind']} {r['gap']}\n")
            n += 1
    return n


TOY = formats.Format(
    "toy", "a toy text format", (".toy",), ".toy.gz",
    lambda head, compressed: head.startswith(b"TOY "), text=True,
    read=_toy_read, write=_toy_write)


@pytest.fixture
def toy():
    with formats.registered(TOY) as f:
        yield f
    assert "toy" not in formats.FORMATS


def _records() -> np.ndarray:
    from kvsim.traces.convert.dinero import din_to_records

    return din_to_records(DATA / "small_mixed_trace.din")


def test_a_registered_format_is_read_written_detected_and_guessed(toy, tmp_path: Path
                                                                  ) -> None:
    kvt = tmp_path / "a.kvt"
    rec = _records()
    with traces.Writer(kvt, {}) as w:
        w.write(rec)
    assert "toy" in conv.FORMATS_IN and "toy" in conv.FORMATS_OUT
    assert conv.guess_format("x.toy.gz") == "toy"
    res = conv.convert(str(kvt), str(tmp_path / "a.toy.gz"))
    assert res == {"from": "kvt", "to": "toy", "records": rec.size}
    # by content, whatever the name, compressed or not
    plain = tmp_path / "plain.bin"
    conv.convert(str(tmp_path / "a.toy.gz"), str(tmp_path / "p.toy"))
    plain.write_bytes((tmp_path / "p.toy").read_bytes())
    assert conv.detect_format(plain.read_bytes()[:4096]) == "toy"
    conv.convert(str(plain), str(tmp_path / "back.kvt"))
    back = traces.read_all(tmp_path / "back.kvt")
    for f in ("addr", "size", "kind", "gap"):
        np.testing.assert_array_equal(back[f], rec[f])


def test_a_registered_format_is_in_the_help_and_simulated(toy, tmp_path: Path) -> None:
    from kvsim.experiments.cli import cli

    r = CliRunner().invoke(cli, ["convert", "--help"])
    assert r.exit_code == 0 and "a toy text format" in r.output
    assert "lackey, toy)" in " ".join(r.output.split())
    src = tmp_path / "t.toy"
    src.write_text("TOY 1000 8 0 3\nTOY 1040 8 1 0\n")
    r = CliRunner().invoke(cli, ["simulate", str(src), "--cpu", "graviton3", "--json",
                                 "--functional"])
    assert r.exit_code == 0, r.output
    assert '"accesses"' in r.output


def test_a_registered_format_gets_a_fuzz_target(toy) -> None:
    import fuzz_targets

    t = fuzz_targets.targets()
    assert "toy_reader" in t
    t["toy_reader"](b"TOY 40 8 0 1\n")
    t["toy_reader"](b"TOY 40\n")  # refused with its one line: not a finding


def test_names_and_endings_are_unique() -> None:
    ends = [e for f in formats.FORMATS.values() for e in f.suffixes]
    assert len(ends) == len(set(ends))
    for f in formats.FORMATS.values():
        assert f.readable or f.writable, f.name
        assert (f.preferred is None) == (not f.writable), f.name
        assert f.readable == (f.detect is not None), f.name
        assert f.module is None or (Path(conv.__file__).parent / f"{f.module}.py").is_file()


def test_register_refuses_a_name_twice() -> None:
    with pytest.raises(ValueError, match="already registered"):
        formats.register(formats.Format("kvt", "again", (".x",), None, None, module="kvt"))


def test_the_docs_table_is_the_table() -> None:
    text = CONVERT_MD.read_text()
    assert formats.markdown_table() in text, "run python -m kvsim.traces.convert and paste"


def test_unknown_names_list_the_table() -> None:
    with pytest.raises(ValueError, match=r"cannot read format 'elastic' \(readable: kvt, "):
        conv.convert("x.deptrace.proto", "y.kvt", src_format="elastic")
    with pytest.raises(ValueError, match="cannot write format 'drmemtrace'"):
        conv.convert(str(DATA / "small_mixed_trace.din"), "-", dst_format="drmemtrace")


def test_the_text_writer_goes_through_ascii(tmp_path: Path) -> None:
    kvt = tmp_path / "a.kvt"
    with traces.Writer(kvt, {}) as w:
        w.write(_records())
    conv.convert(str(kvt), str(tmp_path / "a.din"))
    assert (tmp_path / "a.din").read_bytes() == (DATA / "small_mixed_trace.din").read_bytes()
