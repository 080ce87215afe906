"""Old import path of the ``cref`` suite, kept for one release: the module is
:mod:`bench.cref_variants` (``python -m bench cref`` is unchanged). This name is the same
module object."""

import sys

from bench import cref_variants

sys.modules[__name__] = cref_variants
