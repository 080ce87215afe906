"""Converters between kvsim traces and other simulators' trace formats.

One module per foreign format, each documenting its mapping and what is lost:

* :mod:`traces.convert.dinero`   DineroIV din text (read and write)
* :mod:`traces.convert.gem5`     gem5 protobuf packet traces (read and write, byte-exact)
* :mod:`traces.convert.lackey`   Valgrind lackey ``--trace-mem=yes`` text (read and write)
* :mod:`traces.convert.champsim` ChampSim ``input_instr`` binary traces (write, read back)

Import the module you need, e.g. ``from traces.convert.dinero import din_to_records``.
"""

__all__ = ["champsim", "dinero", "gem5", "lackey"]
