"""experiments/work_stores.py: the kinds of c_ref's native code, and c_ref's trace header's
``work_stores`` against the published counts."""

from __future__ import annotations

import json
import subprocess

from kvsim import artifacts, traces
from kvsim.experiments import work_stores as ws
from kvsim.traces import format as fmt


def test_the_kinds_are_the_formats():
    assert ws.KINDS + tuple(ws.SHARED) == tuple(fmt.WORK_NAMES)
    assert set(ws.SHARED.values()) <= set(ws.KINDS)


def test_code_goes_to_the_kind_the_traces_give_it():
    assert ws.kind_of("/src/c_ref/siphash.c", "siphash") == "hash"
    assert ws.kind_of("./crc64.c", "crc64") == "crc"
    assert ws.kind_of("resp.c", "ksRespParse") == "parse"
    assert ws.kind_of("callpath.c", "ksCall") == "server"
    assert ws.kind_of("???", "__memmove_avx_unaligned_erms") == "copy"
    assert ws.kind_of("???", "__memcmp_avx2_movbe") == "compare"
    assert ws.kind_of("./malloc/malloc.c", "_int_free") == "server"
    assert ws.kind_of("dict.c", "dictFind") == "generic"
    # a c_ref function whose name merely holds "free" is c_ref's own code
    assert ws.kind_of("./object.c", "freeStringObject") == "generic"


def test_by_kind_adds_each_functions_own_cost():
    prof = {("siphash.c", "a"): {"Ir": 10, "Dw": 1}, ("dict.c", "b"): {"Ir": 5, "Dw": 2},
            ("lib.c", "c"): {"Ir": 7, "Dw": 0}}
    out = ws.by_kind(prof)
    assert out["hash"] == {"Ir": 10, "Dw": 1}
    assert out["generic"] == {"Ir": 12, "Dw": 2}
    assert sum(c["Ir"] for c in out.values()) == 22


def test_c_refs_header_carries_the_published_figures(tmp_path):
    doc = json.loads((artifacts.source_root() / "results" / ws.RESULT_NAME).read_text())
    path = tmp_path / "t.kvt"
    subprocess.run([str(artifacts.path(artifacts.CREF_CLI)), "serverloop", "--command", "get",
                    "--keys", "50", "--iters", "5", "--trace", str(path)],
                   check=True, capture_output=True)
    with traces.open(path) as r:
        header = r.header
    assert header["work_stores"] == ws.stores_per_instruction(doc)
    assert list(header["work_stores"]) == header["work_kinds"]
