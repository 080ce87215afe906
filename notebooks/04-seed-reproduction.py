# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Seed tables beside kvsim's numbers
#
# Each seed table (the figure an upstream pull request reported) beside kvsim's simulated
# speedup per CPU preset and the speedup measured natively on this machine, with its 95 %
# interval. The tables come from the experiments framework's Parquet results
# (`kvsim experiment run NAME -o DIR`: `DIR/NAME/NAME.parquet`), run at small scale when
# none exist yet.
#
# Computed by `kvsim.experiments.explore.seed_reproduction` (tested there).

# %%
import matplotlib.pyplot as plt
import numpy as np

from kvsim.experiments import explore

DATA = explore.data_dir()  # $KVSIM_NOTEBOOK_DATA, else the checkout's results/
CPUS = explore.seed_presets()[:2]

tables = explore.seed_reproduction(DATA, ["pipeline"], cpus=CPUS)
list(tables)

# %%
for title, frame in tables.items():
    print(title)
    display(frame)  # noqa: F821 -- IPython's display

# %%
for title, frame in tables.items():
    coords = list(frame.columns[:list(frame.columns).index("seed")])
    labels = frame[coords].astype(str).agg(" / ".join, axis=1)
    native = frame["native_value"] if "native_value" in frame else frame["native"]
    series = {"seed (upstream)": frame["seed"], "native (this machine)": native}
    series |= {c.removeprefix("sim:"): frame[c] for c in frame.columns if c.startswith("sim:")}
    x = np.arange(len(frame))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(frame)), 4))
    for i, (name, values) in enumerate(series.items()):
        values = values.astype(float)
        err = None
        if name.startswith("native") and {"native_low", "native_high"} <= set(frame):
            lo, hi = frame["native_low"].astype(float), frame["native_high"].astype(float)
            err = np.vstack([values - lo, hi - values])
            err = np.where(np.isnan(err), 0.0, err)
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values.fillna(0.0), width,
               yerr=err, capsize=3, label=name if name.startswith(("seed", "native"))
               else f"simulated: {name}")
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_title(title)
    ax.set_xlabel(" / ".join(coords))
    ax.set_ylabel("speedup over the baseline (x)")
    ax.legend(fontsize="small")
    plt.show()
