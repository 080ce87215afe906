"""The ``kvsim`` command line.

Every subcommand has ``--help``. Errors (missing or corrupt files, unknown CPUs, invalid option
values) print one line ``kvsim: error: ...`` to stderr, exit with status 2 (usage) or 1 (runtime),
show no traceback and leave no partial output file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
import threading
from pathlib import Path

import click

#: ``kvsim trace``'s codecs (the default first) and format versions, as traces/FORMAT.md
#: names them; spelled here so that the CLI starts without importing kvsim.traces
#: (experiments/tests/test_cli.py checks them against traces.CODEC_NAMES and VERSION)
TRACE_CODECS = ["zstd_planes", "zstd", "raw"]
TRACE_VERSIONS = [1, 2, 3, 4, 5, 6]

# --- workload options: c_ref's table (c_ref/workload.c), read through `kvsim-cref options` ---

def workload_params(spec: dict) -> list[click.Parameter]:
    """The WORKLOAD argument and one click option per c_ref workload option.

    ``spec`` is :func:`kvsim.experiments.cref.workload_options` output. Defaults, ranges and
    choices are kvsim-cref's own (an option without a default, --variant, is left to it).
    """
    params: list[click.Parameter] = [
        click.Argument(["workload"], type=click.Choice(spec["workloads"]))]
    for o in spec["options"]:
        kw: dict = {"default": o["default"], "show_default": o["default"] is not None}
        t = o["type"]
        if t == "int":
            kw["type"] = click.IntRange(o["min"], o["max"])
        elif t == "float":
            kw["type"] = click.FloatRange(o["min"], o["max"])
        elif t == "choice":
            kw["type"] = click.Choice(o["choices"])
        elif t == "flag":
            kw["is_flag"], kw["show_default"] = True, False
        elif t != "string":
            raise ValueError(f"kvsim-cref options: {o['name']}: unknown type {t!r}")
        help_ = o["help"]
        if o["name"] == "variant" and spec.get("variants"):
            help_ += " Variants: " + "; ".join(
                f"{w}: {', '.join(spec['variants'][w])}" for w in o["workloads"]) + "."
        if sorted(o["workloads"]) != sorted(spec["workloads"]):
            help_ += f" (used by {', '.join(o['workloads'])})"
        params.append(click.Option([f"--{o['name']}"], help=help_, **kw))
    return params


class WorkloadCommand(click.Command):
    """A command taking WORKLOAD and c_ref's workload options, read when first needed (so
    other subcommands never run kvsim-cref). ``spec`` overrides the table, for tests."""

    def __init__(self, *args, spec: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._spec = spec
        self._own = list(self.params)
        self._loaded = False

    def workload_spec(self) -> dict:
        if self._spec is None:
            from kvsim.experiments import cref

            self._spec = cref.workload_options()
        return self._spec

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._loaded:
            wp = workload_params(self.workload_spec())
            self.params = wp[:1] + self._own + wp[1:]
            self._loaded = True
        return super().get_params(ctx)

    def workload_keys(self) -> list[str]:
        """The forwarded keyword arguments: the option names with '-' as '_'."""
        return [o["name"].replace("-", "_") for o in self.workload_spec()["options"]]


def _pick(kwargs: dict) -> dict:
    """The workload options to forward to kvsim-cref (None: left to kvsim-cref).

    An option the workload does not use (c_ref's table says which do) is refused when given
    on the command line. Defaults are not forwarded (they are kvsim-cref's own), so that
    kvsim-cref can refuse an option given to variants that ignore it (``--batch`` with
    ``--variant chunk-15133``) and take its default otherwise."""
    ctx = click.get_current_context()
    cmd = ctx.command
    workload = kwargs.get("workload") or ctx.params.get("workload")
    out = {}
    for o in cmd.workload_spec()["options"]:
        k = o["name"].replace("-", "_")
        if kwargs.get(k) is None:
            continue
        src = ctx.get_parameter_source(k)
        if src == click.core.ParameterSource.DEFAULT:
            continue
        if workload not in o["workloads"]:
            if src is not None:
                raise click.UsageError(f"--{o['name']} does not apply to workload "
                                       f"'{workload}' (used by {', '.join(o['workloads'])})")
            continue
        out[k] = kwargs[k]
    return out


def _check_output(path: str) -> None:
    """Refuse an output path whose directory cannot take a new file, naming the path given
    (the writers go through a temporary file beside it, whose name is no use to a user)."""
    if path == "-":
        return
    parent = Path(path).parent
    if Path(path).is_dir():
        raise ValueError(f"{path}: is a directory (expected an output file path)")
    if not parent.exists():
        raise ValueError(f"{path}: cannot write: directory {parent} does not exist")
    if not parent.is_dir():
        raise ValueError(f"{path}: cannot write: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{path}: cannot write: directory {parent} is not writable")


def _check_output_dir(path: str) -> None:
    """Refuse an output directory that cannot be made or written, before any work: an
    existing non-directory, or a nearest existing ancestor that is no writable directory
    (missing parents are made)."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise ValueError(f"{path}: is not a directory (expected an output directory)")
        if not os.access(p, os.W_OK | os.X_OK):
            raise ValueError(f"{path}: cannot write: directory {path} is not writable")
        return
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{path}: cannot create: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{path}: cannot create: directory {parent} is not writable")


def missing_file(path) -> str:
    """How every subcommand says that a file it was given does not exist (the CPU file
    loader, sim.config.load_file, says it the same way)."""
    return f"{os.fspath(path)}: no such file"


def _must_exist(path: str) -> None:
    """FileNotFoundError for a missing ``path``, before work that would name it less well."""
    if path != "-" and not os.path.lexists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _echo_json(obj) -> None:
    _out(json.dumps(obj, indent=2, sort_keys=False, default=_json_default))


# --- writing where space may run out ----------------------------------------------------
# A full disk (ENOSPC) or a file-size limit (EFBIG) must stop a run with one line naming
# the output, never leave a short file behind an exit status of 0: Python's buffered
# standard output drops what a short write() leaves (BufferedWriter.write returns the count,
# TextIOWrapper ignores it), and an OSError from deep inside a writer names no file.
_NO_SPACE = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def _out(text: str) -> None:
    """Print ``text`` and a newline to standard output, every byte or an OSError."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test runner: no fd
        click.echo(text)
        return
    sys.stdout.flush()
    data = memoryview((text + "\n").encode())
    with _writing("standard output"):
        while data:
            data = data[os.write(fd, data):]


class _NoSpace(OSError):
    """Out of space writing an output: ``str()`` is "<output>: <reason>"."""

    def __str__(self) -> str:
        return str(self.strerror)


@contextlib.contextmanager
def _writing(name: str):
    """Name ``name`` in an out-of-space error raised inside (which names no file)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _NO_SPACE and not exc.filename:
            raise _NoSpace(exc.errno, f"{name}: {exc.strerror}") from None
        raise


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kvsim")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress bars (they are drawn on stderr only when it is a terminal).")
def cli(quiet):
    """kvsim: memory behaviour of in-memory key-value stores, traced and simulated."""
    from kvsim.experiments import progress

    progress.set_quiet(quiet)


@cli.command(cls=WorkloadCommand)
@click.option("-o", "--output", "output", required=True,
              help="Output trace path, or - for stdout.")
@click.option("--codec", type=click.Choice(TRACE_CODECS), default=TRACE_CODECS[0],
              show_default=True,
              help="Chunk payload encoding: zstd of the records' byte planes (smaller, "
                   "decodes fastest), zstd of the records, or raw.")
@click.option("--format-version", type=click.IntRange(1, TRACE_VERSIONS[-1]),
              default=TRACE_VERSIONS[-1], show_default=True,
              help="Trace format version to write (1 for readers older than version 2; it "
                   "has no zstd_planes).")
def trace(workload, output, codec, format_version, **kwargs):
    """Trace WORKLOAD with the c_ref keyspace and write a .kvt trace."""
    from kvsim.experiments import cref, progress

    _check_output(output)
    out = sys.stdout.buffer if output == "-" else output
    with progress.bar(f"trace {workload}", unit="B") as bar, \
            _writing("standard output" if output == "-" else output):
        cref.trace(workload, out, _pick(kwargs), codec=codec, version=format_version,
                   progress=bar.update)


class NativeCommand(WorkloadCommand):
    """``kvsim native WORKLOAD``, and ``kvsim native server ...``: c_ref's server against the
    real Valkey (:mod:`kvsim.experiments.server`, an argparse program with its own --help)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] == "server":
            ctx.meta["native_server_args"] = args[1:]
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        if "native_server_args" in ctx.meta:
            from kvsim.experiments import server

            rc = server.main(ctx.meta["native_server_args"], prog="kvsim native server")
            if rc:
                raise SystemExit(rc)  # its one-line error is printed
            return None
        return super().invoke(ctx)


@cli.command(cls=NativeCommand)
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Times the measured phase is run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def native(workload, repeat, as_json, **kwargs):
    """Run WORKLOAD natively (real prefetch instructions) and time it.

    `kvsim native server ...` instead measures c_ref's server against the real Valkey
    server under redis-benchmark (`kvsim native server --help`)."""
    from kvsim.experiments import cref, progress

    # c_ref reports its runs only at the end: the bar shows the elapsed time until then.
    with progress.bar(f"native {workload}", total=repeat, unit="run") as bar:
        res = cref.native(workload, _pick(kwargs), repeat=repeat, waiting=bar.refresh)
        bar.update(repeat)
    if as_json:
        _echo_json(res)
        return
    for key in ("keys", "median_s", "ops_per_s", "memory_bytes"):
        if key in res:
            click.echo(f"{key:>14}: {res[key]}")


@cli.command(name="serve", add_help_option=False,
             context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                               "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def serve(args):
    """c_ref's keyspace behind a RESP2 server: kvsim-cref serve (kvsim serve --help)."""
    from kvsim.experiments import server

    raise SystemExit(server.serve_main(list(args)))


@cli.command("trace-info")
@click.argument("trace_path", metavar="TRACE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def trace_info(trace_path, as_json):
    """Show a trace's header, record counts by kind and tag, and footprint."""
    from kvsim import traces

    info = traces.summarize(sys.stdin.buffer if trace_path == "-" else trace_path)
    if as_json:
        _echo_json(info)
        return
    hdr = info["header"]
    click.echo(f"producer: {hdr.get('producer')}")
    click.echo(f"workload: {json.dumps(hdr.get('workload'), sort_keys=True)}")
    click.echo(f"records:  {info['records']}")
    for section in ("by_kind", "by_tag", "markers"):
        counts = info.get(section) or {}
        if counts:
            click.echo(f"{section}:")
            for name, n in counts.items():
                click.echo(f"  {name:<14} {n}")
    fp = info.get("footprint") or {}
    if fp:
        click.echo("footprint: " + ", ".join(f"{k}={v}" for k, v in fp.items()))


@cli.command()
@click.argument("trace_path", metavar="TRACE|-")
@click.option("--cpu", "cpus_", required=True, multiple=True,
              help="Preset name (see `kvsim cpus`) or a .toml file; repeat it to simulate "
                   "several CPUs in one pass over the trace.")
@click.option("--functional", is_flag=True, help="Counts only, no timing model.")
@click.option("--engine", type=click.Choice(["fast", "reference", "gem5"]), default="fast",
              show_default=True,
              help="Compiled engine, the slow Python oracle, or gem5's classic caches "
                   "(side by side with kvsim's counts; see sim/GEM5.md).")
@click.option("--gem5", "gem5_path", default=None, metavar="PATH",
              help="gem5 binary for --engine gem5 (default: $GEM5).")
@click.option("--threads", type=click.IntRange(1, 8), default=None,
              help="Engine threads (same results for any number; see sim/README.md). "
                   "Default: one per core, at most 2, with one --cpu; 1 with several "
                   "(the CPUs then share the cores).")
@click.option("--warmup", default=None, metavar="N|FRACTION",
              help="For a trace without warm-up markers: its first N records (or the first "
                   "FRACTION, 0-1, of them) warm the caches and are not counted. Default: "
                   "none. Traces with their own warm-up (`kvsim trace ... --warmup-ops N`) "
                   "refuse it.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def simulate(trace_path, cpus_, functional, engine, gem5_path, threads, warmup, as_json):
    """Simulate a trace on a CPU model.

    TRACE is a .kvt or any trace `kvsim convert` reads (DineroIV, lackey,
    gem5, ChampSim, drmemtrace; see `kvsim convert --help`), told apart by
    its content and read as it streams; a gem5 trace's ticks become gaps at
    the --cpu's frequency.

    \b
    The default text shows, per cache level (its preset name and its role:
    L1, L2, ..., LLC for the last one):
      demand accesses/misses/miss%   load and store accesses only: what the
                                     program waits on
      swpf misses    software prefetches (prefetch records) that missed
      hwpf misses    hardware prefetches (the level's [[prefetcher]]) that missed
      writeback in   dirty lines written back into the level from above
      victim in      clean lines offered to an exclusive (victim) level; each
                     counts as a miss there
      all misses     every kind together (the JSON's "misses")
      writebacks out dirty lines the level sent below
    then IPC, MLP (average L1 misses in flight), the structures (trace tags)
    with the most demand misses, ranked by the last level's, and the largest
    stall causes (rob_full:LEVEL is dispatch time lost while the oldest
    instruction waited on LEVEL; the waits are summed over accesses; they
    overlap and do not add up to the cycles).

    \b
    --json prints everything: per level "name", "role", "accesses"/"misses"
    (all kinds), "demand_accesses"/"demand_misses" and "by_kind" (load,
    store, swpf, hwpf, writeback, victim); "by_tag" per level, tag and kind;
    "prefetch" (issued, useful, late, useless per level); "timing" (ipc, mlp,
    stall_cycles). The model is described in sim/MODEL.md.

    \b
    The last line says whether the trace carries its workload's setup as a
    warm-up prefix (c_ref's default, header "setup"), so that the measured
    phase starts warm as natively, or starts cold (--json: "setup", one of
    compact, accesses, none).

    \b
    With several --cpu, the trace is read and decoded once and every CPU
    simulated side by side (one thread per core); the text shows each CPU's
    summary in turn, --json a list with one result per --cpu, in order.
    """
    from kvsim import sim
    from kvsim.experiments import progress, summary
    from kvsim.sim import warmup as wu
    from kvsim.traces import convert as conv

    configs = [_load_cpu(c) for c in cpus_]
    if engine == "gem5":
        if len(configs) != 1:
            raise click.BadParameter("--engine gem5 takes one --cpu", param_hint="--cpu")
        _simulate_gem5(trace_path, configs[0], gem5_path, as_json)
        return
    asked = threads
    if threads is None:
        threads = min(2, os.cpu_count() or 1) if len(configs) == 1 else 1
    for cpu, config in zip(cpus_, configs, strict=True):
        if not functional and not config.timing_capable:
            _warn(_counts_only_warning(cpu, config))
    fmt, freq = _trace_format(trace_path, configs)
    total = progress.trace_total_records(trace_path)
    try:
        rule = wu.parse_warmup(warmup) if warmup is not None else None
        nwarm = wu.warmup_records(rule, total) if rule is not None else None
    except wu.WarmupError as e:
        raise click.BadParameter(str(e), param_hint="'--warmup'") from None
    with conv.open_records(trace_path, fmt, freq_ghz=freq) as reader, \
            progress.bar("simulate", total=total, unit="rec", unit_scale=True) as bar:
        try:
            feed = wu.WarmupPrefix(reader, nwarm) if nwarm is not None else reader
            results = sim.simulate_many(feed, configs, functional=functional, engine=engine,
                                        threads=threads, progress=bar.update)
        except wu.WarmupError as e:
            raise click.ClickException(str(e)) from None
        header = getattr(reader, "header", None)
    from kvsim.sim import local as sim_local

    setup, note = wu.setup_state(header), wu.setup_note(header, rule)
    for res, config in zip(results, configs, strict=True):
        res["cpu_label"] = sim_local.label(config)  # `local (uncalibrated)` where so
        res["setup"] = setup  # how the measured phase starts: the trace's setup, or cold
    for cpu, res in zip(cpus_, results, strict=True):
        if asked is not None and res.get("engine_threads", 1) < asked:
            who = f"{cpu}: " if len(results) > 1 else ""
            _warn(f"{who}--threads {threads}: ran on {res['engine_threads']} (the compiled "
                  "engine shares its work between threads only with every level LRU and "
                  "non-inclusive, no TLB and no hardware prefetchers; otherwise, counting "
                  "only (--functional), a last level that is not inclusive runs on a second "
                  "thread, and a TLB runs on another where most records miss the DTLB; see "
                  "sim/README.md)")
    if len(results) == 1:  # one --cpu: one result, as it always was
        res = results[0]
        if as_json:
            _echo_json(res)
            return
        _out(summary.simulate_text(res) + "\n" + note)
        return
    if as_json:
        _echo_json(results)
        return
    _out("\n\n".join(f"== {res['cpu_label']} ==\n{summary.simulate_text(res)}"
                      for res in results) + "\n\n" + note)


def _trace_format(trace_path: str, configs: list) -> tuple[str, float | None]:
    """(the trace's format, detected from its content as `kvsim convert` does, and the
    frequency that turns gem5 ticks into instruction gaps: the --cpu's)."""
    from kvsim.traces import convert as conv

    fmt = conv.input_format(trace_path)
    if fmt != "gem5":
        return fmt, None
    freqs = sorted({c.freq_ghz for c in configs if c.freq_ghz})
    if len(freqs) > 1:
        raise click.UsageError(
            f"{trace_path}: a gem5 packet trace's ticks become instruction gaps at one "
            f"frequency, and the --cpu's differ ({', '.join(map(str, freqs))} GHz): convert "
            f"it first (kvsim convert {trace_path} OUT.kvt --cpu CPU)")
    return fmt, freqs[0] if freqs else None


# --- warnings: one line on stderr where the run goes on (not silenced by --quiet, which
# is about progress bars) ---------------------------------------------------------------
def _warn(msg: str) -> None:
    click.echo(f"kvsim: warning: {msg}", err=True)


def _counts_only_warning(cpu: str, config) -> str:
    """A CPU without a timing model runs counts-only: say so, and what it ignores."""
    missing = [k for k, v in (("freq_ghz", config.freq_ghz), ("[core] width", config.width),
                              ("[core] rob", config.rob),
                              ("[dram] latency_ns", config.dram_latency_ns)) if v is None]
    msg = (f"{cpu}: no timing model (missing {', '.join(missing)}): counting hits and "
           "misses only, cycles: None")
    ignored = [c.name for c in config.caches if c.mshrs]
    if ignored:
        msg += f"; the mshrs of {', '.join(ignored)} are not used"
    return msg


def _simulate_gem5(trace_path, config, gem5_path, as_json):
    """``simulate --engine gem5``: gem5 and kvsim on the same model, side by side."""
    from kvsim import sim, traces
    from kvsim.sim import gem5 as g5

    if trace_path == "-":
        raise click.BadParameter("--engine gem5 needs a trace file, not -",
                                 param_hint="TRACE")
    fmt = _trace_format(trace_path, [config])[0]
    if fmt != "kvt":
        raise click.ClickException(
            f"{trace_path}: a {fmt} trace; --engine gem5 replays a .kvt: convert it first "
            f"(kvsim convert {trace_path} OUT.kvt)")
    try:
        res = g5.run(trace_path, config, gem5_path)
    except g5.Gem5Error as exc:
        raise click.ClickException(str(exc)) from None
    with traces.open(trace_path) as reader:
        native = sim.simulate(reader, config, functional=True, tlb=False, prefetchers=False,
                              flush=False)
    if as_json:
        _echo_json({"gem5": res, "kvsim": native})
    else:
        click.echo(g5.compare_text(res, native))


class CompareCommand(WorkloadCommand):
    """WorkloadCommand with WORKLOAD optional (traces may be given instead) and --variant
    repeatable."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._loaded:
            super().get_params(ctx)
            ps = []
            for p in self.params:
                if isinstance(p, click.Argument) and p.name == "workload":
                    p = click.Argument(["workload"], type=p.type, required=False)
                elif isinstance(p, click.Option) and p.name == "variant":
                    p = click.Option(
                        ["--variant", "variants"], multiple=True,
                        help=f"{p.help} Repeatable: two or more, the first is the baseline.")
                ps.append(p)
            self.params = ps
        return super().get_params(ctx)

    def workload_keys(self) -> list[str]:
        return [k for k in super().workload_keys() if k != "variant"]


@cli.command(cls=CompareCommand)
@click.option("--cpu", "cpus_", multiple=True, required=True,
              help="Preset name or .toml file (repeatable): one table per CPU.")
@click.option("--trace", "trace_files", multiple=True, metavar="[LABEL=]PATH",
              help="Compare these traces instead of tracing WORKLOAD (repeatable; the first "
                   "is the baseline; the label defaults to the file name).")
@click.option("--keep-traces", type=click.Path(file_okay=False), default=None,
              help="Keep the traces in this directory as WORKLOAD-VARIANT.kvt.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list of rows, one per CPU and variant.")
@click.option("--csv", "as_csv", is_flag=True,
              help="Print CSV, one line per CPU and variant.")
@click.option("--structures", type=click.IntRange(min=1), default=5, show_default=True,
              help="Structures shown per level in the text table and the plot.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also draw speedups and L1 demand misses by structure to this file (PNG).")
def compare(workload, cpus_, trace_files, keep_traces, as_json, as_csv, structures, plot_path,
            variants, **kwargs):
    """Compare variants of WORKLOAD on one or more CPUs.

    Traces WORKLOAD once per --variant, simulates every trace on every --cpu
    and prints one table per CPU, a column per variant: speedup over the first
    variant, cycles per operation, IPC, MLP, demand misses (loads and stores:
    no prefetch, write-back or victim traffic) per level and per structure at
    L1 and the last level, software and hardware prefetches (issued, useful,
    late, useless) and the top stall causes per operation.

    \b
    Example: how much does lookahead help pipelined GETs, on which CPU, and
    which structure's misses does it hide?
      kvsim compare pipeline --variant naive --variant lookahead \\
          --cpu graviton3 --cpu xeon-8488c --cpu epyc-7713 --keys 100000 --ops 10000

    \b
    --json prints a list of rows, one per CPU and variant, with "cpu",
    "variant", "speedup", "cycles_per_op", "ipc", "mlp", "demand_misses"
    (from L1 outward), "levels" (preset names), "roles" (L1, L2, ..., LLC),
    "demand_misses_by_structure", "prefetch" and "stall_cycles".
    """
    from kvsim.experiments import compare as cmp
    from kvsim.experiments import progress

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    if trace_files:
        if workload or variants:
            raise click.UsageError("give either WORKLOAD with --variant, or --trace, not both")
        paths = {}
        for spec in trace_files:
            label, sep, path = spec.partition("=")
            if not sep:
                label, path = Path(spec).stem, spec
            if label in paths:
                raise click.UsageError(f"--trace: label {label!r} given twice")
            paths[label] = path
        steps = len(paths) * len(cpus_)
        with progress.bar("compare", total=steps, unit="step") as bar:
            rows = cmp.simulate_rows(paths, list(cpus_), step=lambda d: (
                bar.set_postfix_str(d), bar.update()))
    else:
        if not workload:
            raise click.UsageError("missing WORKLOAD (or give --trace)")
        if len(variants) < 2:
            raise click.UsageError("give at least two --variant (the first is the baseline)")
        steps = len(variants) * (1 + len(cpus_))
        with progress.bar("compare", total=steps, unit="step") as bar:
            rows = cmp.compare(workload, list(variants), list(cpus_), _pick(kwargs),
                               trace_dir=keep_traces,
                               step=lambda d: (bar.set_postfix_str(d), bar.update()))
    if plot_path is not None:
        cmp.plot(rows, plot_path, structures=structures)
    if as_json:
        _echo_json(rows)
    elif as_csv:
        click.echo(cmp.rows_csv(rows), nl=False)
    else:
        click.echo(cmp.rows_text(rows, structures=structures))


def _load_cpu(cpu: str):
    """sim.load_cpu, with the CPU file named in every error about its content."""
    from kvsim import sim

    try:
        return sim.load_cpu(cpu)
    except (ValueError, sim.ConfigError) as exc:
        if not Path(cpu).is_file():
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, UnicodeDecodeError):
            msg = f"not a UTF-8 TOML file ({msg})"
        if cpu in msg:
            raise
        raise ValueError(f"{cpu}: {msg}") from None


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--show", "show", metavar="NAME", default=None,
              help="Print preset NAME as a TOML file to copy, edit and pass to --cpu "
                   "(schema: sim/PRESETS.md).")
def cpus(as_json, show):
    """List the CPU presets, or print one as TOML (--show).

    \b
    Your own CPU:
      kvsim cpus --show graviton3 > my-cpu.toml    # edit name, sizes, latencies
      kvsim simulate run.kvt --cpu my-cpu.toml
    """
    from kvsim import sim

    if show is not None:
        from kvsim.experiments import cpufile

        click.echo(cpufile.show(show), nl=False)
        return
    presets = sim.list_presets()
    if as_json:
        _echo_json(presets)
        return
    for p in presets:
        click.echo(f"{p['name']:<14} {p.get('description', '')}")
    from kvsim.sim import _binding

    click.echo(f"\nreplacement policies: {', '.join(_binding.policy_names())}")
    click.echo(f"hardware prefetchers: {', '.join(_binding.prefetcher_names())}")


@cli.command()
@click.option("--quick", is_flag=True, help="Fewer sizes and rounds: a minute or two.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the CPU file here instead of the user's cache directory (where "
                   "`--cpu local` finds it).")
@click.option("--max-size", default=None,
              help="Largest working set (e.g. 64MiB; default 1GiB, 256MiB with --quick, at least "
                   "4x (2x with --quick) the last cache level).")
@click.option("--rounds", type=click.IntRange(1, 50), default=None,
              help="Rounds of every measurement, at most (default 5, 3 with --quick; fewer "
                   "when the next round would pass the time budget: 240 s, 40 s with "
                   "--quick).")
@click.option("--from-raw", "from_raw", type=click.Path(dir_okay=False), default=None,
              help="Derive the CPU file again from the raw measurements kept in a CPU file "
                   "written before (its [meta.raw]); measures nothing.")
@click.option("--against", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A calibration of this machine (quick or full) this one must agree with "
                   "within 10 % (default: the cached one of the other kind, if any).")
@click.option("--show-check", is_flag=True,
              help="Print the self-check's table (Markdown) after writing.")
@click.option("--remeasure-syscall", "remeasure", type=click.Path(dir_okay=False),
              default=None, metavar="FILE",
              help="Measure only the [syscall] section's socket calls (read, write, "
                   "epoll_wait: the loopback calls and the server loop under PINGs) of FILE, "
                   "a CPU file `kvsim calibrate` wrote on this machine, again now, and write "
                   "FILE with them to -o (the rest of FILE unchanged; [meta] syscall_sitting "
                   "gives the sitting and what was replaced). Takes --rounds (the loop's).")
def calibrate(quick, output, max_size, rounds, from_raw, against, show_check, remeasure):
    """Measure this machine and write its CPU file (the `local` preset)."""
    from kvsim.sim import calibrate as cal
    from kvsim.sim.config import parse_size

    if remeasure:
        _remeasure_syscall(remeasure, output, rounds,
                           quick or max_size or from_raw or against or show_check)
        return
    max_bytes = parse_size(max_size, "--max-size") if max_size is not None else None
    if from_raw:
        _must_exist(from_raw)
    if output:
        _check_output(output)  # before minutes of measuring
    path = cal.calibrate(Path(output) if output else None, quick=quick, max_bytes=max_bytes,
                         rounds=rounds, log=lambda m: click.echo(f"calibrate: {m}", err=True),
                         from_raw=Path(from_raw) if from_raw else None,
                         against=Path(against) if against else None)
    import tomllib

    from kvsim import sim
    from kvsim.sim import calibrate_check

    cpu = sim.load_cpu(str(path))
    sc = tomllib.loads(path.read_text())["selfcheck"]
    click.echo(f"wrote {path}")
    click.echo(f"  {cpu.freq_ghz} GHz; {cpu.summary()}")
    click.echo(f"  self-check {sc['status']}: {sum(c['ok'] for c in sc['checks'])} of "
               f"{len(sc['checks'])} checks, {len(sc['replay'])} replayed points")
    if show_check:
        click.echo(calibrate_check.table(sc))
    why = calibrate_check.status_line(sc)
    if why is not None:
        raise click.ClickException(f"calibrate: {why} (written marked failed to {path}; "
                                   "`--cpu local` does not use it)")


def _remeasure_syscall(src: str, output: str | None, rounds: int | None, other) -> None:
    """``kvsim calibrate --remeasure-syscall FILE -o OUT`` (sim/calibrate_sitting.py)."""
    from kvsim.sim import calibrate_sitting as sitting

    if other:
        raise click.UsageError("--remeasure-syscall measures only FILE's [syscall] at FILE's "
                               "own sizes: it takes -o and --rounds, no other option")
    if not output:
        raise click.UsageError("--remeasure-syscall writes a new CPU file: give -o OUT")
    _check_output(output)  # before minutes of measuring
    path = sitting.remeasure(Path(src), Path(output), rounds,
                             log=lambda m: click.echo(f"calibrate: {m}", err=True))
    import tomllib

    doc = tomllib.loads(path.read_text())
    click.echo(f"wrote {path}")
    for r in sitting.summary(doc):
        new, old = (_figure(r[k], r["unit"]) for k in ("sitting", "file"))
        click.echo(f"  {r['figure']:<36} {new:>10} {r['unit']:<4} (the file's "
                   f"{old or 'not given'})")


def _figure(v: float | None, unit: str) -> str:
    return "" if v is None else f"{v:,.1f}" if unit == "ns" else f"{v:.4f}"


def _argparse_command(name: str, module: str, summary: str) -> None:
    """Register ``kvsim NAME``: every argument goes to ``MODULE.main`` (``kvsim.sim.MODULE``
    for a bare name; an argparse program with its own --help and one-line errors)."""

    @cli.command(name=name, help=summary, add_help_option=False,
                 context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                   "help_option_names": []})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def run(args):
        import importlib

        path = module if "." in module else f"kvsim.sim.{module}"
        if path.startswith("bench."):
            _checkout_on_path(name)
        rc = importlib.import_module(path).main(list(args), prog=f"kvsim {name}")
        if rc:
            raise SystemExit(rc)  # its one-line error is printed


def _checkout_on_path(name: str) -> None:
    """Make the checkout's bench/ importable (it is not installed with the package)."""
    from kvsim import artifacts

    root = artifacts.source_root()
    if root is None or not (root / "bench" / "__main__.py").is_file():
        raise click.ClickException(
            f"kvsim {name} runs the benchmarks of a kvsim checkout (bench/, which the "
            "package does not install): run it in a clone of the repository")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


_argparse_command("bench", "bench.presets",
                  "Whole-process speed of `kvsim simulate` on every preset (kvsim bench --help).")
_argparse_command("micro", "kvsim.experiments.micro", "Calibrate's pointer chases as "
                  "traces, predicted against native (kvsim micro --help).")
_argparse_command("ablate", "kvsim.experiments.ablation", "One model parameter at a time "
                  "over seed workload pairs, beside native (--help).")


class ConvertCommand(click.Command):
    """``kvsim convert``: the formats in its help come from the converters' table
    (kvsim.traces.convert.formats), read when the help is shown."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from kvsim.traces.convert import formats

        with formatter.indentation():
            formatter.write_paragraph()
            formatter.write_text("\b\nFormats (name, what kvsim does with it, ending to prefer):\n"
                                 + "\n".join(formats.help_lines()))

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        from kvsim.traces.convert import formats

        for p in self.params:
            if p.name == "src_format":
                p.help = (f"Input format ({', '.join(formats.readable())}); read from the "
                          "file's content if omitted, else from its name.")
            elif p.name == "dst_format":
                p.help = (f"Output format ({', '.join(formats.writable())}); guessed from "
                          "the name if omitted.")
        return super().get_params(ctx)


@cli.command(cls=ConvertCommand)
@click.argument("src")
@click.argument("dst")
@click.option("--from", "src_format", default=None, help="Input format (see below).")
@click.option("--to", "dst_format", default=None, help="Output format (see below).")
@click.option("--cpu", default=None,
              help="Preset (or .toml) whose frequency converts gem5 ticks to instruction "
                   "gaps and back (one instruction per cycle); default 4 GHz.")
def convert(src, dst, src_format, dst_format, cpu):
    """Convert a trace between kvt and other simulators' formats.

    \b
    Inputs are read by content (gzip, xz and bzip2 too), outputs written
    by name; an output ending in .gz, .xz or .bz2 is compressed as the
    tools read it (gzip and xz run on every core; a bare .champsimtrace
    is about 64 bytes per instruction, gaps included). A gem5 elastic
    trace's fetch trace is written beside it. A drmemtrace file holds one
    thread. A kvt has no ticks: gem5 ticks become instruction gaps at
    --cpu's frequency and are made again from the gaps on export. Before
    writing more than 1 GiB uncompressed, one warning line says so.
    """
    from kvsim.experiments import progress
    from kvsim.traces import convert as conv

    _check_output(dst)
    freq = None
    if cpu is not None:
        freq = _load_cpu(cpu).freq_ghz
        if freq is None:
            raise click.BadParameter(f"{cpu} has no freq_ghz", param_hint="--cpu")
    total = Path(src).stat().st_size if src != "-" and Path(src).is_file() else None

    def warn(msg: str) -> None:
        if not progress.quiet():
            click.echo(f"kvsim: warning: {msg}", err=True)

    with progress.bar("convert", total=total, unit="B") as bar, \
            _writing("standard output" if dst == "-" else dst):
        conv.convert(src, dst, src_format=src_format, dst_format=dst_format,
                     progress=bar.update, warn=warn, freq_ghz=freq)


@cli.group()
def experiment():
    """Experiments: the seed studies (list, run, report) and the pipeline demo.

    \b
      kvsim experiment list
      kvsim experiment run all --scale small -o results-dir
      kvsim experiment run pipeline --cpu graviton3 --cpu local -o results-dir
      kvsim experiment report results-dir
    """


@experiment.command("pipeline-demo")
@click.option("--out", type=click.Path(file_okay=False), default="experiments/results/demo",
              show_default=True, help="Directory for tables and plots.")
@click.option("--keys", type=click.IntRange(min=1), default=200_000, show_default=True)
@click.option("--ops", type=click.IntRange(min=1), default=20_000, show_default=True)
@click.option("--cpu", "cpus_", multiple=True, help="Presets to simulate (repeatable).")
@click.option("--rounds", type=click.IntRange(min=1), default=9, show_default=True,
              help="Interleaved native rounds (6 or more give a 95 % interval).")
@click.option("--publish", is_flag=True,
              help="Also copy demo.json and demo.png to results/ of the checkout "
                   "(docs/studies/demo.md's figures; render with python -m "
                   "kvsim.experiments.render).")
def experiment_pipeline_demo(out, keys, ops, cpus_, rounds, publish):
    """The pipeline demo: lookahead against naive pipelined GETs, simulated and native."""
    from kvsim.experiments import pipeline_demo

    _check_output_dir(out)
    pipeline_demo.run(Path(out), keys=keys, ops=ops, cpus=list(cpus_) or None,
                      rounds=rounds, publish=publish)


# `kvsim experiment demo`: the pipeline demo's old spelling, the same command ("demo" alone
# is `make demo`, the headline study)
experiment.add_command(click.Command(
    "demo", params=experiment_pipeline_demo.params, callback=experiment_pipeline_demo.callback,
    help="The pipeline demo under its old name (kvsim experiment pipeline-demo)."))


@experiment.command("list")
@click.option("--scale", type=click.Choice(["small", "full"]), default="small",
              show_default=True, help="Scale whose cell counts are shown.")
def experiment_list(scale):
    """List the experiments: name, upstream seed, cells at --scale (every preset)."""
    from kvsim.experiments import framework, runner

    grids = runner.plan(["all"], scale, None)
    for name in framework.names():
        e = framework.get(name)
        kinds: dict[str, int] = {}
        for spec in grids[name]:
            kinds[spec["kind"]] = kinds.get(spec["kind"], 0) + 1
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items())
        click.echo(f"{name:<14} {e.title} ({e.seed}; {counts} cells)")


@experiment.command("run")
@click.argument("names", nargs=-1, required=True, metavar="NAME|all ...")
@click.option("--scale", type=click.Choice(["small", "full", "seed"]), default="small",
              show_default=True,
              help="small: every experiment in a few minutes; full: the seeds' sizes where "
                   "this machine's memory allows; seed (the server study only): its seed "
                   "rows alone, each at its seed's own key count on its own preset.")
@click.option("--cpu", "cpus_", multiple=True,
              help="Presets to simulate (repeatable; default: every preset).")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Run the simulated cells on this dask.distributed scheduler.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local worker processes for the simulated cells (default: one per core).")
@click.option("--only", "kinds", multiple=True, type=click.Choice(["sim", "native", "valkey"]),
              help="Run only cells of this kind (repeatable; default: every kind).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Results directory (one subfolder per experiment); rerun to resume.")
@click.option("--publish", is_flag=True,
              help="Also copy each complete experiment's NAME.json and plots to "
                   "results/experiments/ of the checkout (the documentation's study pages "
                   "render from them).")
@click.option("--publish-as", "publish_as", default=None, metavar="RESULT",
              help="Publish the one experiment run as results/experiments/RESULT.json (and "
                   "RESULT*.png) instead of its own name, e.g. one machine's validation "
                   "beside another's; implies --publish.")
@click.option("--sitting-syscall", "sitting_syscall", is_flag=True,
              help="The server study: before its cells, measure the [syscall] socket calls "
                   "of each CPU file among --cpu again in this run (`kvsim calibrate "
                   "--remeasure-syscall`'s measurement, kept in DIR/server/sitting/ and "
                   "reused on resume) and predict this machine's rows on it, beside native "
                   "cells of the same sitting.")
def experiment_run(names, scale, cpus_, scheduler, workers, kinds, output, publish,
                   publish_as, sitting_syscall):
    """Run experiments NAME ... (or all) into -o DIR, resuming what a previous run did.

    Simulated cells run in parallel (local processes, or a Dask cluster with
    --scheduler); native timing cells run afterwards, one at a time, alone.
    Writes DIR/NAME/NAME.parquet (one row per cell), a PNG per table and
    DIR/NAME/NAME.md; see `kvsim experiment report`.
    """
    from kvsim.experiments import runner

    _check_output_dir(output)
    if sitting_syscall:
        if list(names) != ["server"] or scale == "seed":
            raise click.UsageError("--sitting-syscall: the server study's option for this "
                                   "machine's rows: run `server` alone, at --scale small or "
                                   "full")
        from kvsim.experiments import server_sitting

        cpus_ = server_sitting.sitting_cpus(
            Path(output), list(cpus_), measure=not kinds or "native" in kinds,
            log=lambda m: click.echo(m, err=True))
    res = runner.run(list(names), output, scale=scale, cpus=list(cpus_) or None,
                     scheduler=scheduler, workers=workers,
                     log=lambda m: click.echo(m, err=True), kinds=kinds or None,
                     publish=publish, publish_as=publish_as)
    from kvsim.experiments import progress

    if not progress.quiet():  # the result tables, as DIR/NAME/NAME.md holds them
        from kvsim.experiments import report

        note = report.calibrate_note(list(cpus_) or None)
        if note and res.get("names"):
            click.echo(note + "\n")
        for name in res.get("names", ()):
            md = Path(output) / name / f"{name}.md"
            if md.is_file():
                click.echo(md.read_text().rstrip("\n") + "\n")
    for line in res.get("where", ()):
        click.echo(f"ran {line}")
    click.echo(f"computed {res['computed']} cells ({res['already_done']} of {res['total']} "
               f"already done); results in {output}")
    if res["failed"]:
        n = len(res["failed"])
        raise click.ClickException(f"{n} cell{'s' if n > 1 else ''} failed; first: "
                                   f"{res['failed'][0][1]}")


@experiment.command("report")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Also write the report to this file.")
def experiment_report(directory, output):
    """Print one Markdown summary of every experiment result in DIRECTORY."""
    from kvsim.experiments import report

    if output:
        _check_output(output)
    _must_exist(directory)
    text = report.report(directory)
    if output:
        tmp = Path(output).with_name(Path(output).name + ".tmp")
        tmp.write_text(text)
        tmp.replace(output)
    click.echo(text)


@cli.group()
def notebooks():
    """The notebooks of notebooks/, run headless.

    \b
      kvsim notebooks run -o DIR              # every notebook, executed into DIR
      kvsim notebooks run -o DIR --only 01    # one of them
    """


@notebooks.command("run")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Folder for the executed notebooks (NN-topic.ipynb) and their data "
                   "(DIR/data); nothing is written outside it.")
@click.option("--only", multiple=True, metavar="NAME",
              help="Run only this notebook (its name, such as 01-trace-anatomy, or number; "
                   "repeatable).")
@click.option("--timeout", type=click.IntRange(min=1), default=600, show_default=True,
              help="Seconds a cell may take.")
def notebooks_run(output, only, timeout):
    """Execute every notebook top to bottom in a fresh kernel, into -o DIR."""
    from kvsim.experiments import notebooks_run as nr

    _check_output_dir(output)
    written = nr.run(output, only, timeout, log=lambda m: click.echo(m, err=True))
    click.echo(f"ran {len(written)} notebook{'s' if len(written) != 1 else ''} into {output}")


def _known_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [OSError, ValueError]
    for mod, name in (("kvsim.traces", "TraceError"), ("kvsim.sim", "ConfigError"),
                      ("kvsim.experiments.cref", "CrefError")):
        try:
            errs.append(getattr(__import__(mod, fromlist=[name]), name))
        except (ImportError, AttributeError):
            pass
    return tuple(errs)


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM, so that every ``with``/``finally`` on the way out
    runs: writers remove their temporary files, c_ref children are reaped."""


def _on_sigterm(signum, frame) -> None:
    raise _Terminated()


def _pipe_closed() -> int:
    """The reader of standard output went away: say so once, and keep Python's exit-time
    flush of stdout from printing a second complaint."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    click.echo("kvsim: error: standard output closed by its reader (broken pipe); output cut "
               "short", err=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one-line errors, no tracebacks."""
    # One OpenBLAS thread for this process and the workers it starts, unless the user chose:
    # kvsim does no linear algebra worth a thread, and numpy's OpenBLAS otherwise starts a
    # busy-waiting thread per core at import, CPU taken from the engine and decoder threads.
    # numpy reads the variable at its import: once numpy is loaded it is too late to set.
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=argv, prog_name="kvsim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("kvsim: error: aborted", err=True)
        return 1
    except click.ClickException as exc:
        click.echo(f"kvsim: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except BrokenPipeError:
        return _pipe_closed()
    except SystemExit as exc:
        # click turns a broken pipe into a silent exit 1 after wrapping stdout in its
        # _PacifyFlushWrapper; that wrapper is how it is recognised here
        if type(sys.stdout).__name__ == "_PacifyFlushWrapper":
            return _pipe_closed()
        raise exc
    except KeyboardInterrupt:
        return 130
    except _Terminated:
        click.echo("kvsim: error: terminated (SIGTERM)", err=True)
        return 128 + signal.SIGTERM
    except Exception as exc:  # noqa: BLE001 - the contract is one line, never a traceback
        if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
            return _pipe_closed()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            first = missing_file(exc.filename) if isinstance(exc, FileNotFoundError) else \
                f"{exc.filename}: {exc.strerror[:1].lower()}{exc.strerror[1:]}"
        known = isinstance(exc, _known_errors())
        prefix = "" if known else "internal error: "
        click.echo(f"kvsim: error: {prefix}{first}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
