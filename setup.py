"""Build shim: the compiled parts (c_ref library + CLI, sim engine) are built with make.

`pip install .` on a fresh clone runs `make -C c_ref` and `make -C sim/_engine`, then ships
the resulting shared libraries and binary inside the `model` and `sim` packages
(`model/_native/`, `sim/_native/`). An editable install finds them in the source tree.
"""

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

NATIVE = {
    # source dir -> (package, artifacts)
    "c_ref": ("model", ["build/libkvsim_cref.so", "build/kvsim-cref"]),
    "sim/_engine": ("sim", ["build/libkvsim_sim.so"]),
}


class BuildNative(build_py):
    def run(self):
        for src, (pkg, artifacts) in NATIVE.items():
            subprocess.check_call(["make", "-C", str(ROOT / src), "-s"])
            if getattr(self, "editable_mode", False):
                continue
            dest = Path(self.build_lib) / pkg / "_native"
            dest.mkdir(parents=True, exist_ok=True)
            for art in artifacts:
                shutil.copy2(ROOT / src / art, dest / Path(art).name)
        super().run()


setup(cmdclass={"build_py": BuildNative})
