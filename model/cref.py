"""Old import path of the ctypes binding to c_ref's shared library, kept for one release: the
module is :mod:`kvsim.model.cref_binding` ("cref" alone named both this binding and the
runner of c_ref's CLI, :mod:`kvsim.experiments.cref`). This name is the same module object."""

import sys

from kvsim.model import cref_binding

sys.modules[__name__] = cref_binding
