"""pytest plugin: fixtures that property-test a batched path (:mod:`kvsim.model.check`).

Installing kvsim registers this module as a pytest plugin (the ``pytest11`` entry point
``kvsim``), so any project's tests can ask for these fixtures without a conftest:

``check_batched(python=None, cref_variant=(), options="", **kw)``
    :func:`kvsim.model.check.check_batched` with the run's example count.
``check_variant(variant, options="", **kw)``
    the same for one or more c_ref variant strings.

The module is private (it imports pytest, which a base install of kvsim does not need);
its fixtures are the public part. ``pytest --kvsim-max-examples N`` sets the example count
(default 30); an explicit ``max_examples=`` in a call wins. ``pytest -p no:kvsim`` turns
the plugin off.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

DEFAULT_MAX_EXAMPLES = 30


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvsim", "kvsim batched-path property tests")
    group.addoption("--kvsim-max-examples", type=int, default=None, metavar="N",
                    help="Hypothesis examples per check_batched / check_variant call "
                         f"(default {DEFAULT_MAX_EXAMPLES})")


def _examples(config: pytest.Config) -> int:
    n = config.getoption("--kvsim-max-examples", default=None)
    return DEFAULT_MAX_EXAMPLES if n is None else n


@pytest.fixture
def check_batched(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``check_batched(python={"mget": fn}, cref_variant=..., options=...)``: assert each
    batched path equals naive execution and the model (kvsim.model.check)."""
    from kvsim.model.check import check_batched as run_check

    def run(python=None, cref_variant=(), options: str = "", **kw) -> None:
        kw.setdefault("max_examples", _examples(request.config))
        run_check(python, cref_variant, options, **kw)

    return run


@pytest.fixture
def check_variant(check_batched: Callable[..., None]) -> Callable[..., None]:
    """``check_variant(variant, options="", **kw)``: assert a c_ref variant (or a list of
    them) equals naive execution and the model."""

    def run(variant, options: str = "", **kw) -> None:
        check_batched(cref_variant=variant, options=options, **kw)

    return run
