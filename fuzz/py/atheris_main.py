"""Run one Python fuzz target under atheris: ``atheris_main.py TARGET [libFuzzer flags...]``.

Every function and method of the kvsim modules a target loads is given atheris's coverage
instrumentation, so the fuzzer is guided by the branches kvsim takes (numpy, zstandard and
the standard library are not instrumented). The functions are instrumented after import
(``atheris.instrument_func``) rather than through ``atheris.instrument_imports``, which skips
modules under a custom loader, as an editable install's are. A finding (see
``fuzz_targets``) ends the run with libFuzzer's crash report and the input saved under
``-artifact_prefix``.

atheris 3.0.0's comparison hook (``atheris._trace_cmp``, which replaces every ``==``, ``<``...
in instrumented code) returns the comparison's result with one reference too many: the
result never dies. For ints and bools that is harmless, but a comparison of numpy arrays
returns a new array, so every instrumented array comparison leaked one (about 12 KiB per
input of ``trace_records``, whose record checks are array comparisons, until libFuzzer's
memory limit stopped the run). :class:`CmpRefFix` measures the extra reference and, where
there is one, wraps the hook to drop it; ``main`` checks it before every input.
"""

import ctypes
import inspect
import sys
import types

import atheris
import fuzz_targets

#: kvsim modules the targets call only to build inputs or check results (writing a trace,
#: ``check_records``), never the parser under test: left uninstrumented, as their coverage
#: guides nothing and each instrumented comparison costs a call into atheris.
UNGUIDED = frozenset({"kvsim.traces.writer", "kvsim.traces.inspect"})


def _ours(obj) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module.startswith(("kvsim", "fuzz_targets")) and module not in UNGUIDED


def instrument_kvsim() -> int:
    """Instrument the functions defined in the loaded kvsim modules; how many."""
    done: set[int] = set()
    for name, mod in list(sys.modules.items()):
        if not (name.startswith("kvsim") or name == "fuzz_targets") or name in UNGUIDED:
            continue
        for obj in list(vars(mod).values()):
            funcs = []
            if isinstance(obj, types.FunctionType) and _ours(obj):
                funcs.append(obj)
            elif inspect.isclass(obj) and _ours(obj):
                for v in vars(obj).values():
                    f = getattr(v, "__func__", v)
                    if isinstance(v, property):
                        funcs += [g for g in (v.fget, v.fset) if g is not None]
                    elif isinstance(f, types.FunctionType):
                        funcs.append(f)
            for f in funcs:
                if id(f.__code__) not in done and _ours(f):
                    atheris.instrument_func(f)
                    done.add(id(f.__code__))
    return len(done)


class _Probe:
    """An object whose ``==`` returns itself, so its reference count shows what the
    comparison hook keeps."""

    def __eq__(self, other):
        return self

    __hash__ = object.__hash__


def _probe_eq(a, b):
    return a == b


_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]
_decref.restype = None


class CmpRefFix:
    """Keeps ``atheris._trace_cmp`` from leaking its result.

    The hook is looked up on the atheris module at every instrumented comparison, and
    ``atheris.Fuzz`` installs its own at the start of fuzzing, so :meth:`ensure` runs before
    every input: when the hook in place is not the one it checked, it measures the hook
    (:meth:`extra_refs`, on a private instrumented copy of a two-line function made before
    fuzzing: nothing can be instrumented once it starts) and, if the hook keeps one
    reference too many, installs a wrapper that drops it."""

    def __init__(self) -> None:
        self._probe = types.FunctionType(_probe_eq.__code__, {}, "_probe_eq")
        atheris.instrument_func(self._probe)
        self._checked = None  # the hook last measured (or the wrapper put in its place)
        self.wrapped = 0  # hooks wrapped so far

    def extra_refs(self) -> int:
        """References the comparison hook in place leaves on a comparison's result."""
        p = _Probe()
        before = sys.getrefcount(p)
        for _ in range(4):
            self._probe(p, 1)
        return (sys.getrefcount(p) - before) // 4

    def ensure(self) -> None:
        hook = atheris._trace_cmp
        if hook is self._checked:
            return
        extra = self.extra_refs()
        if extra == 0:
            self._checked = hook
            return
        if extra != 1:
            raise RuntimeError(f"atheris comparison hook keeps {extra} references")

        def trace_cmp(left, right, opid, idx, left_is_const):
            result = hook(left, right, opid, idx, left_is_const)
            _decref(result)  # the hook's extra reference; `result` still holds one
            return result

        atheris._trace_cmp = trace_cmp
        if self.extra_refs() != 0:
            raise RuntimeError("atheris comparison hook: the reference fix did not hold")
        self._checked = trace_cmp
        self.wrapped += 1


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in fuzz_targets.TARGETS:
        sys.exit(f"atheris_main.py: target must be one of {', '.join(fuzz_targets.TARGETS)}")
    target = fuzz_targets.TARGETS[sys.argv[1]]
    # load what the target loads lazily (on a first call), then instrument it all
    try:
        target(b"")
    except Exception:  # noqa: BLE001 -- only to import; the fuzzer finds what fails
        pass
    fix = CmpRefFix()
    instrument_kvsim()

    def one_input(data: bytes) -> None:
        fix.ensure()
        target(data)

    atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
