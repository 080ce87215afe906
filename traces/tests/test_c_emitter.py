"""Cross-language: a trace written by c_ref's C emitter (emit.c, raw chunks) reads back exactly.

Compiles c_ref/emit.c with a tiny driver. Skipped only when no C compiler (``cc`` or ``gcc``)
is on the PATH; c_ref/emit.c must build on its own (it depends on libc only).
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kvsim import traces

REPO = Path(traces.__file__).resolve().parent.parent
CREF = REPO / "c_ref"

DRIVER = r"""
#include <stdio.h>
#include "emit.h"
int main(void) {
    static char buf[4096] __attribute__((aligned(64)));
    const char *json = "{\"format_version\":@VERSION@,\"producer\":{\"name\":\"driver\"}}";
    ksEmitter *e = ksEmitterOpen(stdout, json, 3);
    if (!e) return 2;
    KS_MARK(KVT_MARK_OP, 7);
    KS_WORK(5);
    ksLoadId a = KS_LOAD(buf + 8, 8, KVT_TAG_BUCKET, 1, 0);
    KS_LOAD(buf + 60, 16, KVT_TAG_KEY, 2, a);          /* crosses a line: two records */
    KS_STORE(buf + 128, 64, KVT_TAG_VALUE, 3, 0);
    KS_PREFETCH(buf + 256, KVT_TAG_BUCKET, 4, 0);
    printf("%s", "");                                  /* stdout stays binary-clean */
    fprintf(stderr, "%llu\n", (unsigned long long)(unsigned long)(void *)buf);
    return ksEmitterClose(e) == 0 ? 0 : 3;
}
""".replace("@VERSION@", str(traces.VERSION))  # the version c_ref's emitter writes


@pytest.fixture(scope="module")
def emitter_output(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: neither cc nor gcc is on the PATH")
    d = tmp_path_factory.mktemp("emit")
    (d / "driver.c").write_text(DRIVER)
    exe = d / "driver"
    res = subprocess.run([cc, "-std=c11", "-O1", "-DKS_TRACE=1", "-I", str(CREF),
                          str(d / "driver.c"), str(CREF / "emit.c"), "-o", str(exe)],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"c_ref/emit.c does not build standalone:\n{res.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, check=True)
    return run.stdout, int(run.stderr.decode().strip())


def test_c_emitter_trace_reads_back(emitter_output: tuple[bytes, int]) -> None:
    data, base = emitter_output
    with traces.open(io.BytesIO(data)) as tr:
        assert tr.header["producer"] == {"name": "driver"}
        chunks = list(tr)
        assert tr.complete and tr.codecs == {"raw": len(chunks)}
    rec = np.concatenate(chunks)
    assert [c.size for c in chunks] == [3, 3]
    assert rec["kind"].tolist() == [3, 0, 0, 0, 1, 2]
    assert rec["addr"].tolist() == [7, base + 8, base + 60, base + 64, base + 128, base + 256]
    assert rec["size"].tolist() == [0, 8, 4, 12, 64, 1]
    assert rec["flags"].tolist() == [traces.MARK_OP, 0, 0, 0, 0, 0]
    assert rec["tag"].tolist()[1:] == [traces.TAG_BUCKET, traces.TAG_KEY, traces.TAG_KEY,
                                       traces.TAG_VALUE, traces.TAG_BUCKET]
    assert rec["site"].tolist()[1:] == [1, 2, 2, 3, 4]
    assert rec["dep"].tolist() == [0, 0, 1, 2, 0, 0]  # both pieces name the first load
    assert rec["gap"][1] >= 5  # KS_WORK(5) plus the site cost


def test_recompress_c_emitter_output(emitter_output: tuple[bytes, int], tmp_path: Path) -> None:
    data, _ = emitter_output
    out = tmp_path / "t.kvt"
    assert traces.recompress(io.BytesIO(data), out) == {"chunks": 1, "records": 6}
    np.testing.assert_array_equal(traces.read_all(out), traces.read_all(io.BytesIO(data)))
    with traces.open(out) as tr:
        list(tr)
        assert tr.codecs == {"zstd_planes": 1}
        assert tr.version == traces.VERSION
        assert tr.header["chunk_records"] == 65536  # the C header did not name it


NAMES_DRIVER = r"""
#include <stdio.h>
#include "emit.h"
int main(void) {
    for (int i = 0; i < KVT_NUM_TAGS; i++) printf("tag %s\n", ksTagName[i]);
    for (int i = 0; i < KVT_NUM_MARKERS; i++) printf("marker %s\n", ksMarkerName[i]);
    return 0;
}
"""


def test_c_ref_names_its_tags_and_markers_as_the_header(tmp_path: Path) -> None:
    """c_ref writes its tag and marker names into every trace header (emit.c); they are the
    header enums' names, the ones kvsim.traces derives from trace_format.h."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: neither cc nor gcc is on the PATH")
    (tmp_path / "names.c").write_text(NAMES_DRIVER)
    exe = tmp_path / "names"
    subprocess.run([cc, "-std=c11", "-DKS_TRACE=1", "-I", str(CREF), str(tmp_path / "names.c"),
                    str(CREF / "emit.c"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got: dict[str, list[str]] = {"tag": [], "marker": []}
    for line in out.splitlines():
        what, name = line.split()
        got[what].append(name)
    assert got == {"tag": traces.TAG_NAMES, "marker": traces.MARKER_NAMES}
