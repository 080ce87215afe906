"""The lockstep harness on Python backends: a correct batched variant passes, the broken
one (Redis PR #15043's cached slot table) is caught. No C library needed."""

import pytest
from broken_variants import (
    PerBatchSlotTableMset,
    StaleSlotTableMset,
    backend,
)
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from kvsim.model.harness import LockstepConfig, Mismatch, make_lockstep_machine
from kvsim.model.keyspace import ModelError


def machine(extra):
    cfg = LockstepConfig(options="cluster=1", with_cref_naive=False, crossslot=False,
                         extra_backends=[extra])
    return make_lockstep_machine(cfg)


def test_correct_batched_variant_passes():
    run_state_machine_as_test(
        machine(backend(PerBatchSlotTableMset, "per-batch-table")),
        settings=settings(max_examples=40, stateful_step_count=15, deadline=None,
                          suppress_health_check=list(HealthCheck)),
    )


def test_broken_variant_is_caught():
    """Hypothesis must find the stale-slot-table bug (a 16-key batch boundary inside an
    MSET whose first batch deletes the slot's last expired key)."""
    with pytest.raises((Mismatch, ModelError)) as e:
        run_state_machine_as_test(
            machine(backend(StaleSlotTableMset, "stale-slot-table")),
            settings=settings(max_examples=300, stateful_step_count=15, deadline=None,
                              derandomize=True, database=None, print_blob=False,
                              phases=[Phase.generate],  # finding it is the point; no shrink
                              suppress_health_check=list(HealthCheck)),
        )
    assert "stale-slot-table" in str(e.value) or isinstance(e.value, ModelError)
