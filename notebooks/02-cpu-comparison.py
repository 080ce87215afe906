# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · One workload on every CPU
#
# The naive pipelined-GET trace simulated on each seed CPU preset: misses per level and
# structure, miss-level parallelism (MLP), cycles and stall causes, and the preset
# parameters behind the differences (cache sizes and latencies, miss buffers, ROB).
# `local` (this machine) is left out: its model depends on its calibration.
#
# Computed by `kvsim.experiments.explore` and `kvsim.sim.dataframes` (tested there).

# %%
import matplotlib.pyplot as plt

from kvsim.experiments import explore

DATA = explore.data_dir()  # $KVSIM_NOTEBOOK_DATA, else the checkout's results/
SCALE = dict(keys=50_000, ops=5_000, value_size=64, depth=16, seed=1)
CPUS = explore.seed_presets()

trace = explore.workload_trace(DATA, "pipeline", variant="naive", **SCALE)
frames = explore.cpu_comparison(trace, CPUS)
list(frames)

# %% [markdown]
# ## What sets the CPUs apart

# %%
presets = explore.preset_table(CPUS)
presets.pivot_table(index="cpu", columns="role",
                    values=["size_kib", "latency_ns", "mshrs"], sort=False)

# %%
presets.groupby("cpu")[["freq_ghz", "width", "rob"]].first()

# %%
lat = presets.pivot_table(index="role", columns="cpu", values="latency_ns", sort=False)
ax = lat.loc[[r for r in ["L1", "L2", "LLC", "DRAM"] if r in lat.index]].plot.bar(
    logy=True, figsize=(9, 4))
ax.set_title("Load-to-use latency per level")
ax.set_xlabel("level (role)")
ax.set_ylabel("latency (ns, log scale)")
ax.legend(title="CPU preset", fontsize="small")
plt.show()

# %% [markdown]
# ## Misses per level and structure
# Demand misses (loads and stores) per structure tag at each level.

# %%
bt = frames["by_tag"]
demand = bt[bt.kind.isin(["load", "store"])]
misses = demand.pivot_table(index="tag_name", columns=["role", "cpu"], values="misses",
                            aggfunc="sum", fill_value=0)
misses

# %%
roles = [r for r in ["L1", "L2", "LLC"] if r in misses.columns.get_level_values("role")]
fig, axes = plt.subplots(1, len(roles), figsize=(15, 5), sharey=True)
for ax, role in zip(axes, roles, strict=True):
    misses[role].plot.barh(ax=ax, legend=False)
    ax.set_title(f"{role} demand misses")
    ax.set_xlabel("misses (count)")
    ax.set_ylabel("structure tag")
axes[0].legend(title="CPU preset", fontsize="small")
fig.suptitle("Demand misses per structure tag and level")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Cycles, MLP and stall causes

# %%
timing = frames["timing"].set_index("cpu")[["cycles", "ipc", "mlp", "avg_l1_miss_cycles",
                                            "avg_load_latency_cycles"]]
timing

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
timing["cycles"].plot.bar(ax=axes[0], color="tab:blue", label="cycles")
axes[0].set_title("Simulated cycles")
axes[0].set_xlabel("CPU preset")
axes[0].set_ylabel("cycles (count)")
axes[0].legend()
timing["mlp"].plot.bar(ax=axes[1], color="tab:orange", label="MLP")
axes[1].set_title("Miss-level parallelism")
axes[1].set_xlabel("CPU preset")
axes[1].set_ylabel("L1 misses in flight (mean, count)")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Stall causes overlap (a cycle can wait for several things), so they do not add up to the
# cycle count; `rob_full:<level>` is dispatch blocked by a full reorder buffer whose oldest
# record waits for that level.

# %%
stalls = frames["stalls"].pivot_table(index="cpu", columns="cause", values="cycles",
                                      fill_value=0.0)
stalls = stalls.loc[:, stalls.sum() > 0]
stalls.round(0)

# %%
ax = stalls.plot.barh(stacked=True, figsize=(10, 5))
ax.set_title("Stall cycles by cause (overlapping)")
ax.set_xlabel("stall cycles (count)")
ax.set_ylabel("CPU preset")
ax.legend(title="cause", fontsize="small", bbox_to_anchor=(1.0, 1.0))
plt.show()
