"""Run one Python fuzz target under atheris: ``atheris_main.py TARGET [libFuzzer flags...]``.

The kvsim modules are imported with atheris's coverage instrumentation, so the fuzzer is
guided by the branches they take (numpy, zstandard and the standard library are not
instrumented). A finding (see ``fuzz_targets``) ends the run with libFuzzer's crash report
and the input saved under ``-artifact_prefix``.
"""

import sys

import atheris

with atheris.instrument_imports(include=["kvsim"]):
    import fuzz_targets


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in fuzz_targets.TARGETS:
        sys.exit(f"atheris_main.py: target must be one of {', '.join(fuzz_targets.TARGETS)}")
    target = fuzz_targets.TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
