"""Run one Python fuzz target under atheris: ``atheris_main.py TARGET [libFuzzer flags...]``.

Every function and method of the kvsim modules a target loads is given atheris's coverage
instrumentation, so the fuzzer is guided by the branches kvsim takes (numpy, zstandard and
the standard library are not instrumented). The functions are instrumented after import
(``atheris.instrument_func``) rather than through ``atheris.instrument_imports``, which skips
modules under a custom loader, as an editable install's are. A finding (see
``fuzz_targets``) ends the run with libFuzzer's crash report and the input saved under
``-artifact_prefix``.
"""

import inspect
import sys
import types

import atheris
import fuzz_targets


def _ours(obj) -> bool:
    return (getattr(obj, "__module__", None) or "").startswith(("kvsim", "fuzz_targets"))


def instrument_kvsim() -> int:
    """Instrument the functions defined in the loaded kvsim modules; how many."""
    done: set[int] = set()
    for name, mod in list(sys.modules.items()):
        if not (name.startswith("kvsim") or name == "fuzz_targets"):
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


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in fuzz_targets.TARGETS:
        sys.exit(f"atheris_main.py: target must be one of {', '.join(fuzz_targets.TARGETS)}")
    target = fuzz_targets.TARGETS[sys.argv[1]]
    # load what the target loads lazily (on a first call), then instrument it all
    try:
        target(b"")
    except Exception:  # noqa: BLE001 -- only to import; the fuzzer finds what fails
        pass
    instrument_kvsim()
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
