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
# # 01 · Anatomy of a trace
#
# A `.kvt` trace of pipelined GETs from the c_ref keyspace, taken apart: which records it
# holds, how much memory each structure touches, how soon lines are reused, how deep the
# pointer chases are, and, for one pipelined batch, when each miss is issued and completes
# in the naive path and in the lookahead (batched prefetch) path.
#
# Everything computed here comes from `kvsim.traces`, `kvsim.sim` and
# `kvsim.experiments.explore` (tested there); this notebook only makes tables and plots.
# The traces are made on first use in `explore.data_dir()`: `KVSIM_NOTEBOOK_DATA` if set, else
# the checkout's `experiments/results/notebooks` (git-ignored), from any current directory.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from kvsim import traces
from kvsim.experiments import explore

DATA = explore.data_dir()  # $KVSIM_NOTEBOOK_DATA, else the checkout's results/
SCALE = dict(keys=50_000, ops=5_000, value_size=64, depth=16, seed=1)
CPU = "graviton3"

naive = explore.workload_trace(DATA, "pipeline", variant="naive", **SCALE)
lookahead = explore.workload_trace(DATA, "pipeline", variant="lookahead", batch=16, **SCALE)
records = traces.read_all(naive)
df = traces.to_dataframe(naive)
df.head(10)

# %% [markdown]
# ## Record mix by kind and structure

# %%
mix = df.groupby(["tag", "kind"], observed=True).size().unstack(fill_value=0)
mix

# %%
ax = mix.plot.barh(stacked=True, figsize=(8, 5))
ax.set_title("Records by structure tag and kind (naive pipelined GETs)")
ax.set_xlabel("records (count)")
ax.set_ylabel("structure tag")
ax.legend(title="record kind")
plt.show()

# %% [markdown]
# ## Footprint per structure
# Distinct 64 B lines and pages each structure touches (a line shared by two structures
# counts for both).

# %%
fp = traces.footprint_by_tag(naive)
fp

# %%
ax = fp.set_index("tag")[["lines", "pages_4k"]].plot.barh(logx=True, figsize=(8, 5))
ax.set_title("Footprint per structure tag")
ax.set_xlabel("distinct 64 B lines / 4 KiB pages (count, log scale)")
ax.set_ylabel("structure tag")
ax.legend(["64 B lines", "4 KiB pages"], title="unit")
plt.show()

# %% [markdown]
# ## Reuse distance per structure
# The LRU stack distance of each line access (distinct other lines touched since the
# previous access to the same line), counted in compiled code; an access hits a fully
# associative LRU cache of C lines when its distance is below C.

# %%
rh = traces.reuse_histogram(naive)
share = rh.pivot_table(index=["bucket", "label"], columns="tag", values="share",
                       fill_value=0.0, observed=True)
share.round(3)

# %%
fig, ax = plt.subplots(figsize=(10, 5))
order = share.index.get_level_values("label")
palette = plt.cm.tab20(range(len(share.columns)))
for tag, color in zip(share.columns, palette, strict=True):
    ax.plot(range(len(order)), share[tag].to_numpy(), marker="o", color=color, label=tag)
ax.set_xticks(range(len(order)), order, rotation=60)
ax.set_title("Reuse-distance histogram per structure tag")
ax.set_xlabel("reuse distance (distinct 64 B lines; 'cold' = first touch)")
ax.set_ylabel("share of the tag's line accesses (fraction)")
ax.legend(title="structure tag", ncol=2, fontsize="small")
plt.show()

# %% [markdown]
# ## Dependency chains
# The depth of a command's longest pointer chase: loads whose address comes from the
# previous load, one memory latency after another whatever the out-of-order window.

# %%
chains = pd.concat({v: traces.command_chains(traces.read_all(p))
                    for v, p in {"naive": naive, "lookahead": lookahead}.items()},
                   names=["variant"]).reset_index(level=0)
chains.groupby("variant")[["loads", "dependent_loads", "max_depth", "mean_depth"]].describe().T

# %%
depths = chains.groupby(["max_depth", "variant"]).size().unstack(fill_value=0)
ax = depths.plot.bar(figsize=(8, 4))
ax.set_title("Longest pointer chase per command")
ax.set_xlabel("pointer-chase depth (records in the longest chain)")
ax.set_ylabel("commands (count)")
ax.legend(title="variant")
plt.show()

# %% [markdown]
# ## One pipelined batch: naive against lookahead
# The same 16 commands (one lookahead batch) simulated on a CPU preset, with the time of
# each record (`sim.simulate(..., timeline=...)`); each bar runs from a miss's issue to its
# completion, so overlapping bars are misses in flight together.

# %%
tl = explore.batch_timelines({"naive": naive, "lookahead": lookahead}, CPU,
                             first_command=1024, commands=16)
summary = tl.groupby("variant").agg(records=("record", "size"),
                                    window_cycles=("retire", "max"))
summary["misses"] = tl[tl.role != "L1"].groupby("variant").size()
summary["miss_cycles"] = tl[tl.role != "L1"].groupby("variant")["latency"].sum()
summary["mean_misses_in_flight"] = summary["miss_cycles"] / summary["window_cycles"]
summary

# %%
levels = [lv for lv in ["L2", "LLC", "DRAM", "dropped"] if lv in set(tl.role)]
colors = dict(zip(levels, plt.cm.viridis([0.2, 0.5, 0.8, 0.95]), strict=False))
fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
for ax, variant in zip(axes, ["naive", "lookahead"], strict=True):
    part = tl[(tl.variant == variant) & (tl.role != "L1")].reset_index(drop=True)
    for role in levels:
        sel = part[part.role == role]
        ax.hlines(sel.index, sel.issue, sel.complete, colors=[colors[role]], linewidth=3,
                  label=f"served by {role}")
    ax.set_title(f"{variant}: misses of commands 1024-1039 on {CPU}")
    ax.set_xlabel("cycles since the window's first dispatch")
    ax.set_ylabel("miss (program order)")
    ax.legend(loc="lower right", fontsize="small")
plt.tight_layout()
plt.show()
