"""kvsim.artifacts: one lookup order for every compiled artifact, and errors naming each path."""

from __future__ import annotations

import pytest

from kvsim import artifacts

SHIPPED = [artifacts.CREF_CLI, artifacts.CREF_LIB, artifacts.ENGINE_LIB]


@pytest.fixture
def fake_tree(monkeypatch, tmp_path):
    """A source tree and a wheel folder under tmp_path, no environment overrides."""
    for env in artifacts.ENV.values():
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(artifacts, "SOURCE_ROOT", tmp_path / "src")
    monkeypatch.setattr(artifacts, "NATIVE_DIR", tmp_path / "wheel")
    return tmp_path


def _touch(p):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"")
    return p


@pytest.mark.parametrize("name", SHIPPED)
def test_lookup_order_env_then_source_tree_then_wheel(fake_tree, monkeypatch, name):
    wheel = _touch(fake_tree / "wheel" / name)
    assert artifacts.path(name) == wheel
    src = _touch(artifacts.candidates(name)[0])
    assert src.is_relative_to(fake_tree / "src") and artifacts.path(name) == src
    env = _touch(fake_tree / "elsewhere" / name)
    monkeypatch.setenv(artifacts.ENV[name], str(env))
    assert artifacts.path(name) == env


@pytest.mark.parametrize("name", SHIPPED)
def test_missing_artifact_names_every_path_tried(fake_tree, name):
    with pytest.raises(artifacts.ArtifactMissing) as e:
        artifacts.path(name)
    msg = str(e.value)
    assert str(fake_tree / "src") in msg and str(fake_tree / "wheel" / name) in msg


def test_test_only_artifacts_are_never_looked_for_in_a_wheel(fake_tree, monkeypatch):
    monkeypatch.setattr(artifacts, "SOURCE_ROOT", None)
    for name in (artifacts.CREF_TEST_LIB, artifacts.CREF_ASAN_LIB):
        assert artifacts.candidates(name) == []
        with pytest.raises(artifacts.ArtifactMissing, match="source checkout"):
            artifacts.path(name)


def test_the_checkout_finds_every_artifact_make_builds():
    """make build (which make test runs first) leaves every shipped artifact where the
    source-tree lookup expects it."""
    root = artifacts.source_root()
    assert root is not None, "the tests run from a checkout"
    for name in SHIPPED:
        assert artifacts.path(name).is_relative_to(root), name


@pytest.mark.parametrize("name", SHIPPED)
def test_a_built_artifact_names_no_checkout_path(name):
    """Experiment cells are identified by the bytes of the artifacts that compute them
    (kvsim.experiments.cells.inputs_fingerprint), so two checkouts of one commit must build
    the same bytes: the build maps the checkout's path out of the debug info."""
    root = artifacts.source_root()
    try:
        built = artifacts.path(name)
    except artifacts.ArtifactMissing:
        pytest.skip(f"{name} is not built")
    if root is None or not built.is_relative_to(root):
        pytest.skip("an artifact built outside this checkout")
    assert str(root).encode() not in built.read_bytes(), f"{built} holds the path {root}"
