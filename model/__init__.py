"""kvsim model: the Python semantic oracle of the keyspace, models of every batched
prefetch path, the ctypes binding to the c_ref library and the equivalence harness.

See ``model/README.md`` for how to check a new batched variant.
"""

from kvsim.model.keyspace import Keyspace
from kvsim.model.resp import encode_command, parse_replies, split_commands

__all__ = ["Keyspace", "encode_command", "parse_replies", "split_commands"]
