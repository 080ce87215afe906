"""bench/profile.py (python -m bench profile): callgrind's function names go to the parts of the
model, and bad input is one line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "profile.py"
_spec = importlib.util.spec_from_file_location("engine_profile", _PATH)
profile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(profile)


@pytest.mark.parametrize("name, part", [
    ("sim/_engine/tlb.c:engTlbCode", "tlb"),
    ("/usr/lib/gcc/x86_64-linux-gnu/12/include/emmintrin.h:engTlbCode", "tlb"),
    ("sim/_engine/engine.c:translate", "tlb"),
    ("sim/_engine/timing.h:kvsimRun", "timing model"),  # timing inlined into the loop
    ("sim/_engine/timing.h:dramSlot", "timing model"),
    ("sim/_engine/prefetch_stream.c:stOperate", "hardware prefetchers"),
    ("/usr/lib/gcc/x86_64-linux-gnu/12/include/emmintrin.h:stOperate", "hardware prefetchers"),
    ("sim/_engine/engine.c:runPrefetchers", "hardware prefetchers"),
    ("sim/_engine/engine.c:accessRankIncl.constprop.0", "caches below L1 and prefetch fills"),
    ("sim/_engine/engine.c:cacheAccess'2", "caches below L1 and prefetch fills"),
    ("sim/_engine/policy_lru.h:accessRankExcl", "caches below L1 and prefetch fills"),
    ("sim/_engine/policy_lru.h:accessStampNonIncl", "caches below L1 and prefetch fills"),
    ("sim/_engine/engine.c:kvsimRun", "record loop and L1"),
    ("sim/_engine/engine_impl.h:kvsimRun", "record loop and L1"),
    ("sim/_engine/engine.c:kvsimCreate", "setup"),
    ("./string/../sysdeps/x86_64/multiarch/memset-vec-unaligned-erms.S:"
     "__memset_avx2_unaligned_erms", "setup"),
    ("./elf/./elf/dl-lookup.c:do_lookup_x", "other"),
])
def test_part_of(name, part):
    assert profile.part_of(name) == part


def test_self_costs_reads_the_function_table(tmp_path, monkeypatch):
    text = ("Ir  file:function\n----\n"
            "1,234 (50.0%)  sim/_engine/tlb.c:engTlbCode [/x/bench_engine]\n"
            "  766 (30.0%)  sim/_engine/engine.c:kvsimRun [/x/bench_engine]\n")

    class Done:
        stdout = text

    monkeypatch.setattr(profile.subprocess, "run", lambda *a, **k: Done())
    assert profile.self_costs(tmp_path / "cg") == {"sim/_engine/tlb.c:engTlbCode": 1234,
                                                   "sim/_engine/engine.c:kvsimRun": 766}


def test_an_unknown_preset_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr(profile.bp, "bench_engine_path", lambda: Path("bench_engine"))
    assert profile.main(["--presets", "no-such-cpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["profile.py: --presets: no preset 'no-such-cpu'"]
