"""Property-test your own batched path against naive execution and the model.

A batched path (a prefetching MGET, a pipelined lookahead, an MSET that works in chunks) must
never change what the keyspace answers or stores. :func:`check_batched` proves it the way
kvsim proves its own variants: a Hypothesis state machine (:mod:`kvsim.model.harness`)
feeds the same bytes (pipelines, pipelines cut mid-command, malformed input, clock jumps,
keys expiring in the middle of a batch, KEYS, SCAN, snapshots) to every backend in lockstep
and fails, with a minimal program that replays the difference, when a reply, a consumed byte
count, DBSIZE or the stored content differs.

Two kinds of batched path take part:

* **a Python function** per command, ``fn(ks, argv, batch) -> reply bytes``
  (:data:`BatchedCommand`), run inside the model (:class:`PythonBackend`); ``ks`` is a
  :class:`kvsim.model.Keyspace` whose primitives (``lookup_key``, ``set_key``,
  ``db_delete``, ``expire_if_needed``, ``set_expire``) are the ones Valkey's ``db.c`` names;
  ``batch`` is the batch size the machine drew for this call (1..128);
* **a c_ref variant string**, such as ``"multikey=batch batch={batch}"`` (``{batch}`` is
  replaced per call), run by the c_ref library.

Any other object with the :class:`kvsim.model.harness.Backend` methods joins through
``extra_backends``. In pytest, the ``check_batched`` and ``check_variant`` fixtures
(:mod:`kvsim.model._pytest_plugin`, loaded in every project that installs kvsim) call
:func:`check_batched` with the run's example count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import HealthCheck, settings

from kvsim.model import cref_binding as cref
from kvsim.model.harness import (
    Backend,
    LockstepConfig,
    Mismatch,
    ModelBackend,
    make_lockstep_machine,
    probe_crossslot,
    run_state_machine_as_test,
)
from kvsim.model.keyspace import Keyspace

__all__ = ["BatchedCommand", "Backend", "Mismatch", "PythonBackend", "check_batched"]

#: A batched implementation of one command: ``fn(ks, argv, batch) -> reply bytes``, where
#: ``argv[0]`` is the command name as sent, ``argv[1:]`` its arguments (arity is checked
#: before the call) and ``batch`` the batch size drawn for this call.
BatchedCommand = Callable[[Keyspace, list[bytes], int], bytes]


class PythonBackend(ModelBackend):
    """The model with some commands replaced by a user's batched Python functions.

    ``commands`` maps a command name (``"mget"``, case-insensitive) to a
    :data:`BatchedCommand`; every other command runs the model's naive code.
    """

    def __init__(self, commands: Mapping[str, BatchedCommand], options: str = "",
                 crossslot: bool = False, name: str = "python"):
        super().__init__(options, crossslot, name)
        self.batch = 16
        for cmd, fn in commands.items():
            key = cmd.lower().encode()
            if key not in self.ks.commands:
                known = ", ".join(sorted(c.decode() for c in self.ks.commands))
                raise ValueError(f"check_batched: unknown command {cmd!r} (known: {known})")
            label, arity, _ = self.ks.commands[key]
            self.ks.commands[key] = (label, arity,
                                     lambda argv, fn=fn: fn(self.ks, argv, self.batch))

    def execute(self, query: bytes, batch: int) -> tuple[bytes, int]:
        self.batch = batch
        return self.ks.execute(query)


def check_batched(
    python: Mapping[str, BatchedCommand] | None = None,
    cref_variant: str | Sequence[str] = (),
    options: str = "",
    *,
    max_examples: int = 50,
    stateful_step_count: int = 25,
    extra_backends: Sequence[Callable[[], Backend]] = (),
    hypothesis_settings: settings | None = None,
) -> None:
    """Raise :class:`~kvsim.model.harness.Mismatch` (through Hypothesis, with a minimal
    failing program) unless every batched path given behaves as naive execution.

    ``python``: command name -> :data:`BatchedCommand`, run in the model;
    ``cref_variant``: one c_ref variant string or several (``{batch}`` replaced per call);
    ``options``: c_ref's ``ksCreate`` options (``table=dict``, ``cluster=1``, ``seed=N``,
    ...), which also set the model's cluster mode. The model's naive execution always takes
    part; c_ref's naive execution takes part when the c_ref library is found (always when a
    c_ref variant is given), so a pure-Python check runs without any build.
    """
    variants = [cref_variant] if isinstance(cref_variant, str) else list(cref_variant)
    if not python and not variants and not extra_backends:
        raise ValueError("check_batched: nothing to check (give python=, cref_variant= or "
                         "extra_backends=)")
    with_cref = bool(variants) or cref.library_available()
    # the model and the Python backend reply CROSSSLOT where c_ref does
    crossslot = probe_crossslot(options) if with_cref else False
    backends = list(extra_backends)
    if python:
        commands = dict(python)
        PythonBackend(commands, options)  # an unknown command name fails here, not mid-run
        backends.insert(0, lambda: PythonBackend(commands, options, crossslot=crossslot))
    cfg = LockstepConfig(options=options, variants=variants, with_cref_naive=with_cref,
                         extra_backends=backends, crossslot=crossslot)
    machine = make_lockstep_machine(cfg)
    s = hypothesis_settings or settings(max_examples=max_examples,
                                        stateful_step_count=stateful_step_count,
                                        deadline=None, suppress_health_check=list(HealthCheck))
    run_state_machine_as_test(machine, settings=s)
