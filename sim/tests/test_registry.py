"""The engine's policy and prefetcher tables (sim/_engine/policy_factory.c, prefetch_factory.c)
are the one list of names: configuration validation, the Python reference and the CLI read
them through the binding, and a table changed in C is what every one of them then sees."""

from __future__ import annotations

import ctypes as C
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.sim import _binding as B
from kvsim.sim import reference

ENGINE_SRC = Path(B.__file__).resolve().parent / "_engine"
HEADER = Path(sim.__file__).resolve().parents[1] / "traces" / "trace_format.h"


def one_level(policy: str, ways: int = 4) -> dict:
    return {"name": "t", "cache": [{"name": "L1", "size": 4 * ways * 64, "ways": ways,
                                    "line": 64, "replacement": policy}]}


def test_reference_implements_exactly_the_engine_registry():
    assert B.policy_names(), "the engine registers no policy"
    assert sorted(reference.POLICY_CLASSES) == sorted(B.policy_names())
    assert sorted(reference.PREFETCHER_CLASSES) == sorted(B.prefetcher_names())


def test_registry_names_are_unique_and_fit_the_config_field():
    for names in (B.policy_names(), B.prefetcher_names()):
        assert len(set(names)) == len(names)
        for n in names:
            assert 0 < len(n.encode()) < B.NAME_LEN, n


def test_config_accepts_every_registered_policy_and_lists_them_on_error():
    for p in B.policies():
        cpu = sim.parse_cpu(one_level(p.name, 4))
        assert cpu.caches[0].replacement == p.name
    with pytest.raises(sim.ConfigError) as e:
        sim.parse_cpu(one_level("no-such-policy"))
    assert str(e.value).endswith(f"(valid: {', '.join(B.policy_names())})")


def test_default_policy_is_the_registry_first():
    doc = one_level("lru")
    del doc["cache"][0]["replacement"]
    assert sim.parse_cpu(doc).caches[0].replacement == B.policy_names()[0]


def test_config_accepts_every_registered_prefetcher_and_lists_them_on_error():
    for kind in B.prefetcher_names():
        doc = one_level("lru") | {"prefetcher": [{"level": "L1", "kind": kind}]}
        assert sim.parse_cpu(doc).prefetchers[0].kind == kind
    doc = one_level("lru") | {"prefetcher": [{"level": "L1", "kind": "no-such"}]}
    with pytest.raises(sim.ConfigError) as e:
        sim.parse_cpu(doc)
    assert str(e.value).endswith(f"(valid: {', '.join(B.prefetcher_names())})")


def _engine_accepts(policy: str, ways: int) -> bool:
    ec = B.EngineConfig()
    ec.nlevels, ec.line_bits = 1, 6
    ec.level[0].sets, ec.level[0].ways, ec.level[0].latency = 4, ways, 1
    ec.level[0].policy = policy.encode()
    try:
        B.Engine(ec).close()
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("policy", [p.name for p in B.policies()])
def test_ways_rule_agrees_with_the_engine(policy):
    """The exported ways constraint is the one kvsimCreate enforces, way count by way count."""
    for ways in range(1, 70):
        try:
            sim.parse_cpu(one_level(policy, ways))
            python_ok = True
        except sim.ConfigError as e:
            assert "ways" in str(e) and policy in str(e)
            python_ok = False
        assert python_ok == _engine_accepts(policy, ways), (policy, ways)


def test_access_kinds_and_inclusions_come_from_the_engine():
    assert len(B.access_kind_names()) == B.NKINDS
    cpu = sim.parse_cpu(one_level("lru"))
    res = sim.simulate(np.array([(0, 0, 0, 8, 0, 0, 0, 0)], dtype=traces.RECORD_DTYPE), cpu,
                       functional=True)
    assert list(res["levels"][0]["by_kind"]) == list(B.access_kind_names())
    for incl in B.inclusion_names():
        ec = sim.parse_cpu({"name": "t", "cache": [
            {"name": "L1", "size": 1024, "ways": 4},
            {"name": "L2", "size": 4096, "ways": 4, "inclusion": incl}]}).to_engine(timing=False)
        assert B.inclusion_names()[ec.level[1].inclusion] == incl
    doc = one_level("lru")
    doc["cache"][0]["inclusion"] = "sometimes"
    with pytest.raises(sim.ConfigError) as e:
        sim.parse_cpu(doc)
    assert str(e.value).endswith(f"(valid: {', '.join(B.inclusion_names())})")


def test_kvsim_cpus_lists_the_registry():
    out = subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", "cpus"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert f"replacement policies: {', '.join(B.policy_names())}" in out
    assert f"hardware prefetchers: {', '.join(B.prefetcher_names())}" in out


PROBE = r"""
import json, sys
import numpy as np
from kvsim import sim, traces
from kvsim.sim import _binding as B
out = {"policies": list(B.policy_names()), "prefetchers": list(B.prefetcher_names()),
       "kinds": list(B.access_kind_names())}
doc = {"name": "t", "cache": [{"name": "L1", "size": 1024, "ways": 4, "replacement": "coinflip"}],
       "prefetcher": [{"level": "L1", "kind": "streamer"}]}
cpu = sim.parse_cpu(doc)
out["accepted"] = cpu.caches[0].replacement
res = sim.simulate(np.array([(0, 0, 0, 8, 0, 0, 0, 0)], dtype=traces.RECORD_DTYPE), cpu,
                       functional=True)
out["by_kind"] = list(res["levels"][0]["by_kind"])
doc["cache"][0]["replacement"] = "random"
try:
    sim.parse_cpu(doc)
except sim.ConfigError as e:
    out["error"] = str(e)
try:
    from kvsim.sim import reference
    out["reference"] = sorted(reference.POLICY_CLASSES) == sorted(B.policy_names())
except ValueError as e:
    out["reference"] = str(e)
print(json.dumps(out))
"""


def test_a_policy_renamed_in_the_c_table_is_what_python_sees(tmp_path):
    """Build the engine with "random" renamed "coinflip", "stream" renamed "streamer" and
    the access kind "victim" renamed "evicted": validation, error messages, the result's
    keys and the CLI follow; the reference refuses a registry it does not cover."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "sim" / "_engine"
    shutil.copytree(ENGINE_SRC, src, ignore=shutil.ignore_patterns("build", "tests", "bench"))
    (tmp_path / "traces").mkdir()
    shutil.copy(HEADER, tmp_path / "traces")
    for name, old, new in (("policy_random.c", '"random"', '"coinflip"'),
                           ("prefetch_stream.c", '"stream"', '"streamer"'),
                           ("engine.h", '"victim"', '"evicted"')):
        text = (src / name).read_text()
        assert text.count(old) == 1, name
        (src / name).write_text(text.replace(old, new))
    lib = tmp_path / "libkvsim_sim.so"
    subprocess.run([cc, "-std=c11", "-D_DEFAULT_SOURCE", "-O0", "-fPIC", "-shared", "-o",
                    str(lib), *map(str, sorted(src.glob("*.c"))), "-pthread"],
                   check=True, timeout=300)
    assert C.CDLL(str(lib)).kvsimPolicyCount() == len(B.policy_names())
    env = dict(os.environ, KVSIM_ENGINE_LIB=str(lib))
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["policies"] == [("coinflip" if n == "random" else n) for n in B.policy_names()]
    assert "streamer" in out["prefetchers"] and "stream" not in out["prefetchers"]
    assert out["accepted"] == "coinflip"
    assert "unknown policy 'random'" in out["error"] and "coinflip" in out["error"]
    assert out["kinds"] == [("evicted" if n == "victim" else n)
                            for n in B.access_kind_names()]
    assert out["by_kind"] == out["kinds"]
    assert "victim" in out["reference"]  # the reference names the kind it cannot find
    cpus = subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", "cpus"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert cpus.returncode == 0, cpus.stderr
    assert "coinflip" in cpus.stdout and "streamer" in cpus.stdout


DOCS = Path(sim.__file__).resolve().parent


def test_the_docs_name_exactly_the_registry() -> None:
    """PRESETS.md's schema comments and MODEL.md's table of policies list the engine's
    registry, in its order: a policy or prefetcher added in C shows up as a failure here
    until the docs say what it does."""
    import re

    presets = (DOCS / "PRESETS.md").read_text()
    m = re.search(r'^replacement = "\w+"\s+# (.+)$', presets, re.M)
    assert m and m.group(1).split(" | ") == list(B.policy_names())
    m = re.search(r'^kind = "\w+"\s+# (.+)$', presets, re.M)
    assert m and m.group(1).split(" | ") == list(B.prefetcher_names())
    assert f"(valid: {', '.join(B.policy_names())})" in presets
    model = (DOCS / "MODEL.md").read_text()
    start = model.index("**Replacement policies**")
    rows = re.findall(r"^\| `([\w-]+)` \|", model[start:model.index("\n\n", model.index(
        "| name | rule |", start))], re.M)
    assert rows == list(B.policy_names())
    prefetchers = model[model.index("**Hardware prefetchers**"):]
    for kind in B.prefetcher_names():
        assert f"`{kind}`" in prefetchers, kind
