"""The numpy dtype and Python constants agree with traces/trace_format.h (compiled with cc)."""

from __future__ import annotations

import re
import shutil
import subprocess
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
    assert c_layout["const.KVT_MAGIC_LEN"] == [len(fmt.MAGIC)]
    assert c_layout["magic.ok"] == [1]
    assert fmt.CHUNK_MAGIC.to_bytes(4, "little") == b"KVCK"
    assert fmt.END_MAGIC.to_bytes(4, "little") == b"KVEN"


def _c_enum(name: str) -> dict[str, int]:
    text = HEADER_H.read_text()
    body = re.search(r"enum " + name + r" \{(.*?)\};", text, re.S)
    assert body, name
    out, value = {}, -1
    for m in re.finditer(r"^\s*(KVT_\w+)(?:\s*=\s*(\d+))?,", body.group(1), re.M):
        value = int(m.group(2)) if m.group(2) else value + 1
        out[m.group(1)] = value
    return out


@pytest.mark.parametrize(("enum", "c_prefix", "py_prefix"), [
    ("kvtKind", "KVT_", "KIND_"),
    ("kvtMarker", "KVT_MARK_", "MARK_"),
    ("kvtTag", "KVT_TAG_", "TAG_"),
    ("kvtCodec", "KVT_CODEC_", "CODEC_"),
])
def test_enums_mirror_c(enum: str, c_prefix: str, py_prefix: str) -> None:
    c = _c_enum(enum)
    assert c
    for cname, value in c.items():
        short = cname.removeprefix(c_prefix)
        if short.startswith("NUM_"):
            assert getattr(fmt, short) == value, cname
        else:
            assert getattr(fmt, py_prefix + short) == value, cname
    names = {"kvtKind": fmt.KIND_NAMES, "kvtMarker": fmt.MARKER_NAMES, "kvtTag": fmt.TAG_NAMES}
    if enum in names:
        members = [k for k in c if "NUM_" not in k]
        assert [k.removeprefix(c_prefix).lower() for k in members] == names[enum]


def test_public_constants_exported() -> None:
    for name in ("KIND_LOAD", "KIND_MARKER", "TAG_BUCKET", "TAG_STACK", "MARK_OP", "MARK_BATCH"):
        assert name in traces.__all__
        assert getattr(traces, name) == getattr(fmt, name)
