"""bench/profile.py (python -m bench profile): callgrind's function names go to the parts of the
model, and bad input is one line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
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


def test_self_costs_are_per_file_of_the_code(tmp_path):
    """Inlined code (fi=/fe=) counts for the file it comes from, as callgrind_annotate's
    rows name it; a function's call lines are not its own instructions."""
    out = tmp_path / "cg.out"
    out.write_text("events: Ir\nfl=(1) ./engine.c\nfn=(1) kvsimRun\n10 500\n"
                   "fi=(2) ./timing.h\n+5 266\nfe=(1)\n* 1\ncfn=(2) engTlbCode\n"
                   "calls=3 20\n* 900\nfl=(3) ./tlb.c\nfn=(2)\n20 1234\n")
    assert profile.self_costs(out) == {"./engine.c:kvsimRun": 501,
                                       "./timing.h:kvsimRun": 266,
                                       "./tlb.c:engTlbCode": 1234}


def test_a_broken_profile_is_one_line(tmp_path, capsys, monkeypatch):
    """A callgrind file that breaks the format: one line naming it, exit 1."""
    monkeypatch.setattr(profile.bp, "bench_engine_path", lambda: Path("bench_engine"))
    monkeypatch.setattr(profile.bp, "callgrind_traces",
                        lambda *a: [{"path": str(tmp_path / "t.kvt")}])
    monkeypatch.setattr(profile.traces, "read_all", lambda p: np.zeros(4, np.uint8))
    monkeypatch.setattr(profile._callgrind, "by_function",
                        lambda binary, cfg, raw, out: out.write_text("events: Ir\nfn=f\n1 x\n"))
    assert profile.main(["--presets", profile.sim.preset_names()[0]]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("profile.py: ") and ":3: a cost is not" in err[0]


def test_an_unknown_preset_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr(profile.bp, "bench_engine_path", lambda: Path("bench_engine"))
    assert profile.main(["--presets", "no-such-cpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["profile.py: --presets: no preset 'no-such-cpu'"]
