"""The ablation study under its old name: :mod:`kvsim.experiments.ablation` is the module (a
study, so it lives with the studies). This name is the same module object; kept for one
release (the layering contract in pyproject.toml lists it as its one exemption of this
kind)."""

import sys

from kvsim.experiments import ablation

sys.modules[__name__] = ablation
