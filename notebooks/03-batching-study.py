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
# # 03 · Batch size and pipeline depth
#
# Pipelined GETs, naive and with lookahead prefetching at several batch sizes, for two
# pipeline depths, on each seed CPU preset: the predicted speedup over the naive path, the
# timeliness of the software prefetches (useful, late, useless, dropped) per cache level,
# and the best batch size per CPU.
#
# Computed by `kvsim.experiments.explore.batching_sweep` and `best_batch` (tested there).

# %%
import matplotlib.pyplot as plt

from kvsim.experiments import explore

DATA = explore.data_dir()  # $KVSIM_NOTEBOOK_DATA, else the checkout's results/
SCALE = dict(keys=50_000, ops=3_000, value_size=64, seed=1)
CPUS = explore.seed_presets()
DEPTHS = [4, 16]
BATCHES = [1, 2, 4, 8, 16]

sweep = explore.batching_sweep(DATA, CPUS, DEPTHS, BATCHES, **SCALE)
speedup = sweep["speedup"]
speedup.pivot_table(index=["depth", "batch"], columns="cpu", values="speedup").round(3)

# %%
fig, axes = plt.subplots(1, len(DEPTHS), figsize=(13, 4), sharey=True)
for ax, depth in zip(axes, DEPTHS, strict=True):
    part = speedup[(speedup.depth == depth) & (speedup.variant == "lookahead")]
    for cpu, g in part.groupby("cpu"):
        ax.plot(g.batch, g.speedup, marker="o", label=cpu)
    ax.axhline(1.0, color="grey", linestyle=":", label="naive")
    ax.set_xscale("log", base=2)
    ax.set_title(f"Lookahead speedup, pipeline depth {depth}")
    ax.set_xlabel("lookahead batch size (commands)")
    ax.set_ylabel("speedup over naive (x)")
axes[-1].legend(title="CPU preset", fontsize="small")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The best batch size per CPU

# %%
best = explore.best_batch(speedup)
best.pivot_table(index="cpu", columns="depth", values=["batch", "speedup"])

# %%
ax = best.pivot_table(index="cpu", columns="depth", values="batch").plot.bar(figsize=(8, 4))
ax.set_title("Best lookahead batch size per CPU")
ax.set_xlabel("CPU preset")
ax.set_ylabel("batch size (commands)")
ax.legend(title="pipeline depth")
plt.show()

# %% [markdown]
# ## Prefetch timeliness
# What became of the software prefetches at each cache level (sim/MODEL.md): `useful`
# (a demand access found the line filled), `late` (still in flight), `useless` (evicted
# unused), `dropped` (no free miss buffer), `redundant` (already there).

# %%
pf = sweep["prefetch"]
sw = pf[(pf.source == "software") & (pf.variant == "lookahead")]
outcomes = ["useful", "late", "useless", "dropped", "redundant"]
sw.groupby(["cpu", "role", "depth", "batch"])[outcomes].sum()

# %%
deep = sw[sw.depth == max(DEPTHS)].groupby(["cpu", "batch"])[outcomes].sum()
share = deep.div(deep.sum(axis=1), axis=0)
fig, axes = plt.subplots(1, len(CPUS), figsize=(16, 4), sharey=True)
for ax, cpu in zip(axes, CPUS, strict=True):
    share.loc[cpu].plot.bar(stacked=True, ax=ax, legend=False)
    ax.set_title(cpu)
    ax.set_xlabel("batch size (commands)")
axes[0].set_ylabel("share of software prefetches (fraction)")
axes[-1].legend(title="outcome", fontsize="small", bbox_to_anchor=(1.0, 1.0))
fig.suptitle(f"Software prefetch outcomes, pipeline depth {max(DEPTHS)}")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Prefetch timeliness per structure
# The engine counts prefetch outcomes per cache level; per structure tag they come from the
# timeline of every record (`explore.prefetch_timeliness_by_tag`): a prefetch is `timely`
# when the next demand access to its line issues after the fill completed, `late` when
# before, `unused` when no demand access to the line follows. One CPU, depth 16, batch 8.

# %%
path = explore.workload_trace(DATA, "pipeline", variant="lookahead", depth=max(DEPTHS), batch=8,
                              **SCALE)
per_tag = explore.prefetch_timeliness_by_tag(path, CPUS[0])
per_tag

# %%
cols = ["timely", "late", "unused", "dropped", "redundant"]
ax = per_tag.set_index("tag")[cols].plot.barh(stacked=True, figsize=(8, 3.5))
ax.set_title(f"Software prefetch outcomes per structure ({CPUS[0]}, depth {max(DEPTHS)}, "
             "batch 8)")
ax.set_xlabel("software prefetches (count)")
ax.set_ylabel("structure tag")
ax.legend(title="outcome", fontsize="small")
plt.show()
