"""The ``kvsim`` command line.

Every subcommand has ``--help``. Errors (missing or corrupt files, unknown CPUs, invalid option
values) print one line ``kvsim: error: ...`` to stderr, exit with status 2 (usage) or 1 (runtime),
show no traceback and leave no partial output file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

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
    """The workload options to forward to kvsim-cref (None: left to kvsim-cref)."""
    keys = click.get_current_context().command.workload_keys()
    return {k: kwargs[k] for k in keys if kwargs.get(k) is not None}


def _echo_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=_json_default))


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
@click.option("--codec", type=click.Choice(["zstd", "raw"]), default="zstd", show_default=True,
              help="Chunk payload encoding.")
def trace(workload, output, codec, **kwargs):
    """Trace WORKLOAD with the c_ref keyspace and write a .kvt trace."""
    from kvsim.experiments import cref, progress

    out = sys.stdout.buffer if output == "-" else output
    with progress.bar(f"trace {workload}", unit="B") as bar:
        cref.trace(workload, out, _pick(kwargs), codec=codec, progress=bar.update)


@cli.command(cls=WorkloadCommand)
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Times the measured phase is run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def native(workload, repeat, as_json, **kwargs):
    """Run WORKLOAD natively (real prefetch instructions) and time it."""
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
@click.option("--cpu", required=True, help="Preset name (see `kvsim cpus`) or a .toml file.")
@click.option("--functional", is_flag=True, help="Counts only, no timing model.")
@click.option("--engine", type=click.Choice(["fast", "reference"]), default="fast",
              show_default=True, help="Compiled engine or the slow Python oracle.")
@click.option("--threads", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Engine threads (same results for any number; see sim/README.md).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def simulate(trace_path, cpu, functional, engine, threads, as_json):
    """Simulate a trace on a CPU model."""
    from kvsim import sim, traces
    from kvsim.experiments import progress

    config = sim.load_cpu(cpu)
    src = sys.stdin.buffer if trace_path == "-" else trace_path
    total = progress.trace_total_records(trace_path)
    with traces.open(src) as reader, \
            progress.bar("simulate", total=total, unit="rec", unit_scale=True) as bar:
        res = sim.simulate(reader, config, functional=functional, engine=engine,
                           threads=threads, progress=bar.update)
    if as_json:
        _echo_json(res)
        return
    click.echo(f"records: {res['records']}  instructions: {res['instructions']}  "
               f"cycles: {res.get('cycles')}")
    click.echo(f"{'level':<6}{'accesses':>12}{'hits':>12}{'misses':>12}{'writebacks':>12}")
    for lv in res["levels"]:
        click.echo(f"{lv['name']:<6}{lv['accesses']:>12}{lv['hits']:>12}{lv['misses']:>12}"
                   f"{lv['writebacks']:>12}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cpus(as_json):
    """List the CPU presets."""
    from kvsim import sim

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
@click.option("--quick", is_flag=True, help="Fewer sizes and rounds: under a minute.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the CPU file here instead of the user's cache directory (where "
                   "`--cpu local` finds it).")
@click.option("--max-size", default=None,
              help="Largest working set (e.g. 64MiB; default 1GiB, 256MiB with --quick).")
@click.option("--rounds", type=click.IntRange(1, 50), default=None,
              help="Rounds of every measurement (default 5, 3 with --quick).")
def calibrate(quick, output, max_size, rounds):
    """Measure this machine and write its CPU file (the `local` preset)."""
    from kvsim.sim import calibrate as cal
    from kvsim.sim.config import parse_size

    max_bytes = parse_size(max_size, "--max-size") if max_size is not None else None
    path = cal.calibrate(Path(output) if output else None, quick=quick, max_bytes=max_bytes,
                         rounds=rounds, log=lambda m: click.echo(f"calibrate: {m}", err=True))
    from kvsim import sim

    cpu = sim.load_cpu(str(path))
    click.echo(f"wrote {path}")
    click.echo(f"  {cpu.freq_ghz} GHz; {cpu.summary()}")


@cli.command()
@click.argument("src")
@click.argument("dst")
@click.option("--from", "src_format", default=None,
              help="Input format (kvt, dinero, lackey, gem5); guessed from the name if omitted.")
@click.option("--to", "dst_format", default=None,
              help="Output format (kvt, dinero, lackey, champsim, gem5); guessed if omitted.")
def convert(src, dst, src_format, dst_format):
    """Convert a trace between kvt and other simulators' formats."""
    from kvsim.experiments import progress
    from kvsim.traces import convert as conv

    total = Path(src).stat().st_size if src != "-" and Path(src).is_file() else None
    with progress.bar("convert", total=total, unit="B") as bar:
        conv.convert(src, dst, src_format=src_format, dst_format=dst_format,
                     progress=bar.update)


@cli.command()
@click.argument("name", type=click.Choice(["demo"]))
@click.option("--out", type=click.Path(file_okay=False), default="experiments/results/demo",
              show_default=True, help="Directory for tables and plots.")
@click.option("--keys", type=click.IntRange(min=1), default=200_000, show_default=True)
@click.option("--ops", type=click.IntRange(min=1), default=20_000, show_default=True)
@click.option("--cpu", "cpus_", multiple=True, help="Presets to simulate (repeatable).")
@click.option("--rounds", type=click.IntRange(min=1), default=9, show_default=True,
              help="Interleaved native rounds (6 or more give a 95 % interval).")
@click.option("--publish", is_flag=True,
              help="Also copy demo.json and demo.png to results/ of the checkout "
                   "(README.md's figures; render with python -m kvsim.experiments.render).")
def experiment(name, out, keys, ops, cpus_, rounds, publish):
    """Run a named experiment (for now: the demo study)."""
    from kvsim.experiments import demo

    demo.run(Path(out), keys=keys, ops=ops, cpus=list(cpus_) or None, rounds=rounds,
             publish=publish)


def _known_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [OSError, ValueError]
    for mod, name in (("kvsim.traces", "TraceError"), ("kvsim.sim", "ConfigError"),
                      ("kvsim.experiments.cref", "CrefError")):
        try:
            errs.append(getattr(__import__(mod, fromlist=[name]), name))
        except (ImportError, AttributeError):
            pass
    return tuple(errs)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one-line errors, no tracebacks."""
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
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the contract is one line, never a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        known = isinstance(exc, _known_errors())
        prefix = "" if known else "internal error: "
        click.echo(f"kvsim: error: {prefix}{first}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
