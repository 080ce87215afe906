"""The public API that property-tests a user's batched path (kvsim.model.check and the
pytest plugin): a correct batched MGET passes, broken ones are caught, mistakes in the call
are one clear error."""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from model_helpers import scale

from kvsim.model import resp
from kvsim.model.check import PythonBackend, check_batched


def batched_mget(ks, argv, batch):
    """MGET in batches of ``batch`` keys: expire the batch first, then read it."""
    keys, out = argv[1:], []
    for i in range(0, len(keys), batch):
        chunk = keys[i:i + batch]
        for k in chunk:
            ks.expire_if_needed(k)
        out += [ks.lookup_key(k) for k in chunk]
    return resp.array([resp.NULL_BULK if v is None else resp.bulk(v) for v in out])


def stale_mget(ks, argv, batch):
    """Broken: reads the batch from the table without the expiry check."""
    keys, out = argv[1:], []
    for i in range(0, len(keys), batch):
        out += [ks.data.get(k) for k in keys[i:i + batch]]
    return resp.array([resp.NULL_BULK if v is None else resp.bulk(v) for v in out])


FAST = settings(max_examples=scale(200), stateful_step_count=25, deadline=None,
                phases=[Phase.explicit, Phase.reuse, Phase.generate])


def test_a_correct_python_batched_path_passes():
    check_batched(python={"MGET": batched_mget}, max_examples=scale(20))


def test_a_broken_python_batched_path_is_caught():
    with pytest.raises(AssertionError):
        check_batched(python={"mget": stale_mget}, hypothesis_settings=FAST)


def test_a_c_ref_variant_is_checked_with_the_python_one(cref_lib):
    check_batched(python={"mget": batched_mget}, cref_variant="multikey=batch batch={batch}",
                  options="cluster=1", max_examples=scale(10))


def test_unknown_command_and_nothing_to_check_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown command 'MGETX'"):
        PythonBackend({"MGETX": batched_mget})
    with pytest.raises(ValueError, match="nothing to check"):
        check_batched()


def test_the_plugin_gives_the_fixtures_to_any_project(tmp_path):
    """A project outside the repository, with no conftest: the entry point loads the plugin."""
    import subprocess
    import sys

    (tmp_path / "test_mine.py").write_text(
        "from kvsim.model import resp\n"
        "def mget(ks, argv, batch):\n"
        "    return resp.array([resp.NULL_BULK if (v := ks.lookup_key(k)) is None\n"
        "                       else resp.bulk(v) for k in argv[1:]])\n"
        "def test_mine(check_batched):\n"
        "    check_batched(python={'mget': mget})\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--kvsim-max-examples", "3", "test_mine.py"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
