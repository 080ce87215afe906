"""The trace intake under its old name: :mod:`kvsim.traces._intake` is the module (the
decoder is the trace layer's compiled piece). This name is the same module object, so
``kvsim.sim._intake.chunks`` and a test's monkeypatch of it are the traces module's."""

import sys

from kvsim.traces import _intake

sys.modules[__name__] = _intake
