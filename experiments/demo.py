"""Old import path of the pipeline demo, kept for one release: the study is
:mod:`kvsim.experiments.pipeline_demo` (``kvsim experiment pipeline-demo``; ``kvsim
experiment demo`` is its old spelling). "demo" alone now means ``make demo``, the headline
study. This name is the same module object."""

import sys

from kvsim.experiments import pipeline_demo

sys.modules[__name__] = pipeline_demo
