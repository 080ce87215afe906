"""The numpy dtype and Python constants agree with traces/trace_format.h (compiled with cc)."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from kvsim import traces
from kvsim.traces import format as fmt

HEADER_H = Path(traces.__file__).with_name("trace_format.h")

C_PROGRAM = r"""
#include <stdio.h>
#include "trace_format.h"
#define F(T, m) printf(#T "." #m " %zu %zu\n", offsetof(T, m), sizeof(((T *)0)->m))
int main(void) {
    printf("sizeof.kvtRecord %zu\nsizeof.kvtChunkHeader %zu\nsizeof.kvtEndChunk %zu\n",
           sizeof(kvtRecord), sizeof(kvtChunkHeader), sizeof(kvtEndChunk));
    F(kvtRecord, addr); F(kvtRecord, gap); F(kvtRecord, dep); F(kvtRecord, size);
    F(kvtRecord, kind); F(kvtRecord, tag); F(kvtRecord, site); F(kvtRecord, flags);
    F(kvtChunkHeader, magic); F(kvtChunkHeader, n_records); F(kvtChunkHeader, stored_bytes);
    F(kvtChunkHeader, codec); F(kvtChunkHeader, reserved); F(kvtChunkHeader, crc32);
    F(kvtEndChunk, magic); F(kvtEndChunk, n_chunks); F(kvtEndChunk, total_records);
    printf("const.KVT_VERSION %d\nconst.KVT_FIXED_HEADER_LEN %d\n", KVT_VERSION,
           KVT_FIXED_HEADER_LEN);
    printf("const.KVT_CHUNK_MAGIC %u\nconst.KVT_END_MAGIC %u\n", KVT_CHUNK_MAGIC, KVT_END_MAGIC);
    printf("const.KVT_DEFAULT_CHUNK_RECORDS %u\nconst.KVT_MAX_CHUNK_RECORDS %u\n",
           KVT_DEFAULT_CHUNK_RECORDS, KVT_MAX_CHUNK_RECORDS);
    printf("const.KVT_DEP_CHECK_WINDOW %u\n", KVT_DEP_CHECK_WINDOW);
    printf("const.KVT_MAGIC_LEN %d\nmagic.ok %d\n", KVT_MAGIC_LEN,
           sizeof(KVT_MAGIC) == 9 && KVT_MAGIC[0] == 'K' && KVT_MAGIC[7] == 0);
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[int]]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("c")
    (d / "layout.c").write_text(C_PROGRAM)
    exe = d / "layout"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", str(HEADER_H.parent),
                    str(d / "layout.c"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: [int(x) for x in v] for k, *v in (line.split() for line in out.splitlines())}


def test_record_dtype_matches_c(c_layout: dict[str, list[int]]) -> None:
    assert c_layout["sizeof.kvtRecord"] == [traces.RECORD_DTYPE.itemsize] == [24]
    for name in traces.RECORD_DTYPE.names:
        dt, off = traces.RECORD_DTYPE.fields[name][:2]
        assert c_layout[f"kvtRecord.{name}"] == [off, dt.itemsize], name
        assert dt.str[0] in "<|", name  # little-endian on every host


def test_record_struct_is_the_dtype() -> None:
    """RECORD_STRUCT (what code without numpy reads) reads a record's fields, in order, as
    RECORD_DTYPE lays them out."""
    import numpy as np

    rec = np.zeros(1, dtype=traces.RECORD_DTYPE)
    values = (2**64 - 3, 2**32 - 5, 7, 65535, 3, 200, 513, 6)
    for name, v in zip(traces.RECORD_DTYPE.names, values, strict=True):
        rec[name] = v
    assert fmt.RECORD_STRUCT.unpack(rec.tobytes()) == values
    assert fmt.RECORD_STRUCT.size == traces.RECORD_DTYPE.itemsize == traces.RECORD_SIZE


def test_chunk_and_end_layout_matches_c(c_layout: dict[str, list[int]]) -> None:
    assert c_layout["sizeof.kvtChunkHeader"] == [fmt.CHUNK_HEADER.size]
    assert c_layout["sizeof.kvtEndChunk"] == [fmt.END_CHUNK.size]
    # struct format "<III B3s I": offsets 0, 4, 8, 12, 13, 16
    assert [c_layout[f"kvtChunkHeader.{m}"][0] for m in
            ("magic", "n_records", "stored_bytes", "codec", "reserved", "crc32")] == \
        [0, 4, 8, 12, 13, 16]
    assert [c_layout[f"kvtEndChunk.{m}"][0] for m in ("magic", "n_chunks", "total_records")] \
        == [0, 4, 8]


def test_constants_match_c(c_layout: dict[str, list[int]]) -> None:
    assert c_layout["const.KVT_VERSION"] == [fmt.VERSION]
    assert c_layout["const.KVT_FIXED_HEADER_LEN"] == [fmt.FIXED_HEADER_LEN]
    assert c_layout["const.KVT_CHUNK_MAGIC"] == [fmt.CHUNK_MAGIC]
    assert c_layout["const.KVT_END_MAGIC"] == [fmt.END_MAGIC]
    assert c_layout["const.KVT_DEFAULT_CHUNK_RECORDS"] == [fmt.DEFAULT_CHUNK_RECORDS]
    assert c_layout["const.KVT_MAX_CHUNK_RECORDS"] == [fmt.MAX_CHUNK_RECORDS]
    assert c_layout["const.KVT_DEP_CHECK_WINDOW"] == [fmt.DEP_CHECK_WINDOW]
    assert c_layout["const.KVT_MAGIC_LEN"] == [len(fmt.MAGIC)]
    assert c_layout["magic.ok"] == [1]
    assert fmt.CHUNK_MAGIC.to_bytes(4, "little") == b"KVCK"
    assert fmt.END_MAGIC.to_bytes(4, "little") == b"KVEN"


def _compile_and_run(tmp_path: Path, program: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "probe.c").write_text(program)
    exe = tmp_path / "probe"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", str(HEADER_H.parent),
                    str(tmp_path / "probe.c"), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_header_parse_agrees_with_the_compiler(tmp_path: Path) -> None:
    """Every #define and enum member format.py read from the header has the value the C
    compiler gives it (a member the parse invented does not compile)."""
    defines, enums = fmt.parse_header(HEADER_H.read_text())
    ints = {k: v for k, v in defines.items() if isinstance(v, int)}
    for members in enums.values():
        ints.update(members)
    assert len(ints) > 30 and "KVT_TAG_STACK" in ints and "KVT_MAX_CHUNK_RECORDS" in ints
    body = "".join(f'    printf("{k} %llu\\n", (unsigned long long)({k}));\n' for k in ints)
    out = _compile_and_run(tmp_path, "#include <stdio.h>\n#include \"trace_format.h\"\n"
                           f"int main(void) {{\n{body}    return 0;\n}}\n")
    assert dict((k, int(v)) for k, v in (ln.split() for ln in out.splitlines())) == ints
    # the sentinels count the members, so a member the parse missed shows up here
    for enum, num in (("kvtKind", "KVT_NUM_KINDS"), ("kvtMarker", "KVT_NUM_MARKERS"),
                      ("kvtTag", "KVT_NUM_TAGS")):
        assert len(enums[enum]) - 1 == ints[num], enum


def test_module_constants_are_the_header_parse() -> None:
    for name, value in fmt.constants_from_header(HEADER_H.read_text()).items():
        assert getattr(fmt, name) == value, name
        assert getattr(traces, name, value) == value, name
    assert fmt.KIND_NAMES[fmt.KIND_MARKER] == "marker"
    assert fmt.TAG_NAMES[fmt.TAG_KEY] == "key"
    assert fmt.MARKER_NAMES[fmt.MARK_BATCH] == "batch"
    assert fmt.MAGIC == b"KVTRACE\x00"


def test_a_header_change_is_what_python_sees() -> None:
    text = HEADER_H.read_text()
    version = f"#define KVT_VERSION {fmt.VERSION} "
    assert text.count("    KVT_NUM_TAGS") == 1 and text.count(version) == 1
    changed = (text.replace("    KVT_NUM_TAGS", "    KVT_TAG_NEW_THING, /* a new tag */\n"
                                                "    KVT_NUM_TAGS")
               .replace(version, f"#define KVT_VERSION {fmt.VERSION + 1} "))
    c = fmt.constants_from_header(changed)
    assert c["TAG_NEW_THING"] == fmt.NUM_TAGS
    assert c["NUM_TAGS"] == fmt.NUM_TAGS + 1
    assert c["TAG_NAMES"] == fmt.TAG_NAMES + ["new_thing"]
    assert c["VERSION"] == fmt.VERSION + 1
    gap = text.replace("KVT_MARK_BATCH = 6", "KVT_MARK_BATCH = 9")
    with pytest.raises(ValueError, match="kvtMarker"):
        fmt.constants_from_header(gap)


def test_wheel_ships_the_header() -> None:
    """format.py reads trace_format.h at import: the wheel must carry it as package data."""
    root = HEADER_H.parents[1]
    assert (root / "pyproject.toml").is_file(), f"the tests run from a checkout, not {root}"
    sk = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["scikit-build"]
    assert sk["wheel"]["packages"]["kvsim/traces"] == "traces"
    target = "kvsim/traces/trace_format.h"
    assert not any(fnmatch.fnmatch(target, pat) for pat in sk["wheel"].get("exclude", []))


def test_public_constants_exported() -> None:
    for name in ("KIND_LOAD", "KIND_MARKER", "TAG_BUCKET", "TAG_STACK", "MARK_OP", "MARK_BATCH"):
        assert name in traces.__all__
        assert getattr(traces, name) == getattr(fmt, name)
