"""Render result files into the READMEs, so every figure a README shows comes from a file.

A README marks a generated region with two HTML comments (invisible on GitHub)::

    <!-- kvsim:results NAME -->
    ... replaced by the rendering NAME of its result file ...
    <!-- /kvsim:results -->

Each NAME is registered in :data:`RENDERINGS` with the result file it reads (a path from the
repository root, written by :func:`kvsim.provenance.write_result`) and a function turning
that file's JSON into Markdown. Another README gets its figures the same way: write a
function, decorate it with ``@rendering("name", "results/file.json")`` and add the markers.
The benchmarks' renderings (bench/renderings.py, in the checkout) register here too: the
command loads them when it runs in a checkout, and ``python -m bench render FILE.md`` is
the same command.

    python -m kvsim.experiments.render README.md [c_ref/README.md ...]          # rewrite
    python -m kvsim.experiments.render --check README.md                         # verify

``--check`` exits with status 1 and names each stale region; the test suite runs the same
check on every README, so a README that disagrees with its result files fails ``make test``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvsim import provenance
from kvsim.experiments.framework import published_name

__all__ = ["RENDERINGS", "RenderError", "Rendering", "provenance_line", "register_each",
           "render_text", "rendering"]


class RenderError(ValueError):
    """A README's markers or a result file are unusable; the message names which."""


@dataclass(frozen=True)
class Rendering:
    """A named rendering: the result file it reads and the function that formats it."""

    name: str
    result: str  #: path of the result file, from the repository root
    render: Callable[[dict[str, Any]], str]
    #: other result files it reads, passed in the document as ``doc["_also"][path]``
    also: tuple[str, ...] = ()


RENDERINGS: dict[str, Rendering] = {}


def rendering(name: str, result: str, also: tuple[str, ...] = ()):
    """Decorator registering ``fn(doc) -> markdown`` as rendering ``name`` of ``result``
    (and of the files ``also``, found in ``doc["_also"]``)."""
    def register(fn: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
        if name in RENDERINGS:
            raise ValueError(f"rendering {name!r} is registered twice")
        RENDERINGS[name] = Rendering(name, result, fn, tuple(also))
        return fn
    return register


_REGION = re.compile(r"(<!-- kvsim:results (?P<name>[\w.-]+) -->\n)(?P<body>.*?)"
                     r"(<!-- /kvsim:results -->)", re.S)
_OPEN = re.compile(r"<!-- kvsim:results\b")


def _load(root: Path, rel: str) -> dict[str, Any]:
    """A result file: JSON, or TOML (a CPU file `kvsim calibrate` wrote)."""
    import tomllib

    toml = rel.endswith(".toml")
    try:
        text = (root / rel).read_text()
    except OSError as exc:
        raise RenderError(f"{rel}: cannot read the result file ({exc.strerror})") from None
    try:
        return tomllib.loads(text) if toml else json.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RenderError(f"{rel}: not TOML ({exc})") from None
    except json.JSONDecodeError as exc:
        raise RenderError(f"{rel}: not JSON ({exc.msg} at line {exc.lineno})") from None


_RESULT_LINK = re.compile(r"\]\((?=results/)")


def link_prefix(path: Path, root: Path) -> str:
    """What a rendering's links (written from the repository root: ``results/...``) need in
    front of them in the document ``path``: nothing in a README, ``../`` per folder level in
    a page of the documentation site (``docs/``), where ``results/`` is mounted at the top
    of the site (``docs/hooks.py``)."""
    try:
        rel = path.resolve().relative_to((root / "docs").resolve())
    except ValueError:
        return ""
    return "../" * (len(rel.parts) - 1)


def render_text(text: str, root: Path, where: str = "<text>",
                prefix: str = "") -> tuple[str, list[str]]:
    """Return ``(text with every region re-rendered, names of the regions that changed)``.

    ``root`` is the repository root the result paths are relative to; ``where`` names the
    document in error messages; ``prefix`` goes in front of every ``results/`` link of a
    rendering (:func:`link_prefix`).
    """
    if len(_OPEN.findall(text)) != len(_REGION.findall(text)):
        raise RenderError(f"{where}: a '<!-- kvsim:results NAME -->' marker has no "
                          f"'<!-- /kvsim:results -->' after it")
    changed: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in RENDERINGS:
            known = ", ".join(sorted(RENDERINGS)) or "none"
            raise RenderError(f"{where}: unknown rendering {name!r} (known: {known})")
        r = RENDERINGS[name]
        try:
            doc = _load(root, r.result)
            if r.also:
                doc = dict(doc, _also={p: _load(root, p) for p in r.also})
            body = r.render(doc).rstrip("\n") + "\n"
        except (KeyError, TypeError, IndexError) as exc:
            raise RenderError(f"{r.result}: lacks what rendering {name!r} needs "
                              f"({type(exc).__name__}: {exc})") from None
        if prefix:
            body = _RESULT_LINK.sub("](" + prefix, body)
        if body != m["body"]:
            changed.append(name)
        return m.group(1) + body + m.group(4)

    return _REGION.sub(sub, text), changed


# --- renderings ------------------------------------------------------------------------------


def provenance_line(doc: dict[str, Any], result: str, command: str) -> str:
    """The line under a rendered table: the result file, the command, commit, date and
    machine that wrote it."""
    p = doc["provenance"]
    m = p["machine"]
    commit = (p.get("commit") or "unknown")[:12] + (" with local changes" if p.get("dirty")
                                                     else "")
    vm = ", a virtual machine" if m.get("hypervisor") else ""
    # the model name alone ("AMD EPYC" in a guest) does not tell one CPU from another
    fam = (f", family {m['cpu_family']} model {m['cpu_model_number']}"
           if m.get("cpu_family") and m.get("cpu_model_number") else "")
    return (f"Source: [`{result}`]({result}), written by `{command}` at commit {commit} on "
            f"{p['date_utc'][:10]}, on {m['cpu_model']}{fam} ({m['cores']} cores{vm}; "
            f"1-minute load average {m.get('load_average_1m')}).")


def measured_line(prov: dict[str, Any] | None, command: str) -> str:
    """The sentence after a provenance line naming the earlier run that measured a table's
    native part (its command, commit, date and load), or "" without that run's provenance."""
    if not prov:
        return ""
    return (f" The native runs: `{command}` at commit {(prov.get('commit') or 'unknown')[:12]}"
            f" on {(prov.get('date_utc') or '')[:10]} (1-minute load average "
            f"{(prov.get('machine') or {}).get('load_average_1m')}).")


@rendering("demo", "results/demo.json")
def render_demo(doc: dict[str, Any]) -> str:
    """The demo study: simulated table per CPU, native timings, MLP and ROB stalls."""
    from kvsim.experiments.pipeline_demo import native_line, predicted_local

    p = doc["params"]
    rows = doc["rows"]
    levels = sorted({k for r in rows for k in r if re.fullmatch(r"L\d+_misses", k)})
    head = ["cpu", "variant", "records", "instructions", "predicted cycles",
            *[f"{k.split('_')[0]} misses" for k in levels], "predicted speedup"]
    out = [f"Pipelined GETs ({p['keys']:,} keys, {p['value_size']} B values, {p['depth']} "
           f"commands per pipeline, {p['ops']:,} traced GETs), `naive` against `lookahead "
           f"--batch {p['batch']}`, traced by c_ref and simulated on "
           f"{len(p['cpus'])} presets:", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def num(v: Any) -> str:
        return "" if v is None or v != v else f"{int(v):,}"  # v != v: NaN (level absent)

    for r in rows:
        cells = [r["cpu"], r["variant"], num(r["records"]), num(r["instructions"]),
                 num(r["cycles"]), *[num(r.get(k)) for k in levels], f"{r['speedup']:.3f}"]
        out.append("| " + " | ".join(cells) + " |")
    native = native_line(doc["native"], predicted_local(rows))
    out += ["", native.replace("native on this machine", "Native on the machine named below",
                               1) + "."]
    by = {(r["cpu"], r["variant"]): r for r in rows}
    cpu = "local" if ("local", "naive") in by else rows[0]["cpu"]
    a, b = by.get((cpu, "naive")), by.get((cpu, "lookahead"))
    if a and b and a.get("mlp") is not None and b.get("mlp") is not None:
        more = b["instructions"] / a["instructions"] - 1
        out += ["", f"On `{cpu}` the lookahead trace has {more:.0%} more instructions, yet the "
                f"average number of outstanding misses (MLP) rises from {a['mlp']:.1f} to "
                f"{b['mlp']:.1f} and the cycles the core stalls on a full ROB fall from "
                f"{a['rob_full_cycles'] / 1e6:.1f} M to {b['rob_full_cycles'] / 1e6:.1f} M."]
    out += ["", provenance_line(doc, RENDERINGS["demo"].result,
                                 "kvsim experiment demo --publish")]
    return "\n".join(out)


def render_experiment(doc: dict[str, Any], result: str) -> str:
    """An experiment's result file (``kvsim experiment run NAME --publish``): each table
    with its seed column, note and plot, then the command, commit and machine."""
    from kvsim.experiments.report import _cell

    base = result.rsplit("/", 1)[0]
    out: list[str] = []
    for t in doc["tables"]:
        out += [f"**{t['title']}** ({t['unit']})", "",
                "| " + " | ".join(t["columns"]) + " |", "|" + "---|" * len(t["columns"])]
        out += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in t["rows"]]
        if t["note"]:
            out += ["", t["note"][0].upper() + t["note"][1:].rstrip(".") + "."]
        # the plot as the runner published it, named by the result file (--publish-as)
        name = published_name(doc["experiment"], Path(result).stem, t["name"])
        out += ["", f"![{t['title']}]({base}/{name}.png)", ""]
    command = doc["provenance"].get("command") or f"kvsim experiment run {doc['experiment']}"
    command = provenance.scrub_line(command)  # the output folder is the machine's: DIR
    out.append(provenance_line(doc, result, command))
    return "\n".join(out)


def register_each(render: Callable[[dict[str, Any], str], str], results: dict[str, str]) -> None:
    """Register ``render(doc, result)`` as the rendering of each ``name: result``."""
    for name, result in results.items():
        rendering(name, result)(lambda doc, result=result: render(doc, result))


# the studies' published results: the headline study (``make demo``: one key row of every
# seed) and the batch-size one (``kvsim experiment run batch_size --scale full --publish``)
register_each(render_experiment, {"headline": "results/experiments/headline.json",
                                  "batch_size": "results/experiments/batch_size.json"})
# the headline at small scale with its server rows (``--publish-as headline_small``)
register_each(render_experiment, {"headline_small": "results/experiments/headline_small.json"})
# the issue-45 studies (``kvsim experiment run NAME --scale small --publish``)
register_each(render_experiment, {n: f"results/experiments/{n}.json"
                                  for n in ("multikey_window", "hash", "pipeline_mget")})
# the server study (issue 43: ``kvsim experiment run server --scale small --publish``)
register_each(render_experiment, {"server": "results/experiments/server.json"})


@rendering("server_kernel", "results/server-kernel-ping.json")
def render_server_kernel(doc: dict[str, Any]) -> str:
    """c_ref's server under PINGs, natively and predicted (experiments/server_kernel.py)."""
    from kvsim.experiments.server_kernel import markdown

    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_kernel"].result, "python -m kvsim.experiments.server_kernel "
        "--cpu CPUFILE --cpu xeon-8488c --quick")
@rendering("load_split", "results/load-split.json")
def render_load_split(doc: dict[str, Any]) -> str:
    """A snapshot load natively, Valkey against c_ref (experiments/load_split.py)."""
    from kvsim.experiments.load_split import markdown

    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["load_split"].result, "python -m kvsim.experiments.load_split "
        "measure DIR --rounds 9")


@rendering("load_split_predict", "results/load-split-predict.json")
def render_load_split_predict(doc: dict[str, Any]) -> str:
    """c_ref's snapshot loads predicted without and with the kernel's costs, against the
    native loads (experiments/load_split.py predict)."""
    from kvsim.experiments.load_split import predict_markdown

    return predict_markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["load_split_predict"].result, "python -m kvsim.experiments.load_split "
        "predict --cpu results/calibrate-xeon-m167-kernel-full.toml --prior-cref BINARY "
        "--prior-label 'commit 1742c5e'")


@rendering("load_split_reused", "results/load-split-reused.json")
def render_load_split_reused(doc: dict[str, Any]) -> str:
    """c_ref's load natively into fresh and into reused pages (experiments/load_split.py
    measure --sides)."""
    from kvsim.experiments.load_split import markdown

    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["load_split_reused"].result, "python -m kvsim.experiments.load_split "
        "measure DIR --sides cref-arena,cref-arena-reused --rounds 9")


@rendering("load_split_predict_reused", "results/load-split-predict-reused.json")
def render_load_split_predict_reused(doc: dict[str, Any]) -> str:
    """c_ref's loads into reused pages predicted with the kernel's costs, against the
    native loads into reused pages (experiments/load_split.py predict --restart-pages)."""
    from kvsim.experiments.load_split import predict_markdown

    return predict_markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["load_split_predict_reused"].result, "python -m "
        "kvsim.experiments.load_split predict --cpu results/calibrate-xeon-m167-q15-quick.toml "
        "--restart-pages reused --sizes 4096,16384,65536 --native results/load-split-reused.json")


@rendering("load_split_checksum", "results/load-split-checksum.json")
def render_load_split_checksum(doc: dict[str, Any]) -> str:
    """Valkey's load against c_ref's natively, each with and without the checksum
    (experiments/load_split.py measure --sides ...,valkey-nocrc,cref-arena-reused-nocrc)."""
    from kvsim.experiments.load_split import markdown

    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["load_split_checksum"].result, "python -m kvsim.experiments.load_split "
        "measure DIR --sizes 8,32,256,4096 --sides valkey,valkey-nocrc,cref,cref-arena-reused,"
        "cref-arena-reused-nocrc --rounds 7")


def _predict_checksum(doc: dict[str, Any], name: str, crc: str, native: str) -> str:
    from kvsim.experiments.load_split import predict_markdown

    return predict_markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS[name].result, "python -m kvsim.experiments.load_split predict --cpu "
        "results/calibrate-xeon-m167-q15-quick.toml --restart-pages reused --sizes "
        f"8,32,256,4096 --native {native} --rdbchecksum {crc} --kinds")


@rendering("load_split_predict_checksum_yes", "results/load-split-predict-checksum-yes.json")
def render_load_split_predict_checksum_yes(doc: dict[str, Any]) -> str:
    """c_ref's loads into reused pages predicted per kind of work, with the checksum
    (experiments/load_split.py predict --kinds)."""
    return _predict_checksum(doc, "load_split_predict_checksum_yes", "yes",
                             "results/load-split-reused.json")


@rendering("load_split_predict_checksum_no", "results/load-split-predict-checksum-no.json")
def render_load_split_predict_checksum_no(doc: dict[str, Any]) -> str:
    """The same without the checksum (predict --rdbchecksum no --kinds)."""
    return _predict_checksum(doc, "load_split_predict_checksum_no", "no",
                             "results/load-split-checksum.json")


@rendering("server_user", "results/server-user.json")
def render_server_user(doc: dict[str, Any]) -> str:
    """The server's user code per request, natively and predicted before and after [work]
    server (experiments/server_user.py)."""
    from kvsim.experiments.server_user import markdown

    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_user"].result, "python -m kvsim.experiments.server_user "
        "--before CPUFILE --after CPUFILE --ping results/server-kernel-ping.json")


@rendering("server_split", "results/server-split.json")
def render_server_split(doc: dict[str, Any]) -> str:
    """The server study's cells split into user and system time, natively and predicted
    (experiments/server_split.py)."""
    from kvsim.experiments.server_split import markdown

    when = measured_line((doc.get("native_from") or {}).get("provenance"),
                         "python -m kvsim.experiments.server_split --bias --ping "
                         "--no-predict --rounds 7")
    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_split"].result, "python -m kvsim.experiments.server_split "
        "--native results/server-split-native.json --cpu CPUFILE --peer-cpu PEERFILE "
        "--loop-cpu LOOPFILE") + when



@rendering("native_server", "results/native-server.json")
def render_native_server(doc: dict[str, Any]) -> str:
    """c_ref's server against the real Valkey server natively, per cell (experiments/server.py
    ``kvsim native server``): the table, then the lowest round beside the median."""
    from kvsim.experiments.server import spread_markdown, table_markdown

    return (table_markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["native_server"].result,
        provenance.scrub_line(doc["provenance"]["command"]))
        + "\n\nThe guest's speed between the rounds: requests per server CPU second, the "
        "lowest round / the median (the lowest as a fraction of the median), and each ratio's "
        "lowest round / its median:\n\n" + spread_markdown(doc))


@rendering("server_branchsim", "results/native-server-branchsim.json")
def render_server_branchsim(doc: dict[str, Any]) -> str:
    """The study's cells' branch and I1 misses under callgrind, charged against each cell's
    gap between native and predicted user time (experiments/server_cachesim.py --gap)."""
    from kvsim.experiments.server_cachesim import gap_markdown

    return gap_markdown(doc["gap"]) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_branchsim"].result, "python -m kvsim.experiments."
        "server_cachesim --keys 100000 --requests 2000 --warmup-requests 1000 --gap "
        "results/server-split.json --cpu results/calibrate-xeon-m167-srvloop.toml")

# the server study's seed rows at their seeds' own key counts (``--scale seed``), and this
# machine's rows predicted on a CPU file's [syscall] measured again (sim/VALIDATION.md)
register_each(render_experiment, {"server-seeds": "results/experiments/server-seeds.json",
                                  "server-sitting-xeon-m167":
                                  "results/experiments/server-sitting-xeon-m167.json"})


@rendering("server_setup_bound", "results/server-setup-bound.json")
def render_server_setup_bound(doc: dict[str, Any]) -> str:
    """The seed rows' predictions with the server's load recorded, compacted afterwards and
    carried compact by the traced server (experiments/server_setup_bound.py)."""
    from kvsim.experiments.server_setup_bound import markdown

    keys = sorted({r["keys"] for r in doc["rows"]})
    command = "python -m kvsim.experiments.server_setup_bound" + "".join(
        f" --keys {k}" for k in keys)
    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_setup_bound"].result, command)


@rendering("server_heldout", "results/server-getp10-heldout.json")
def render_server_heldout(doc: dict[str, Any]) -> str:
    """The GET depth 10 seed row held out on this machine: predicted against the native
    servers at the seed's keys, the parameter swaps, 2 MiB pages (experiments/server_heldout.py)."""
    from kvsim.experiments.server_heldout import markdown

    args = provenance.scrub_line(doc["provenance"]["command"]).split()[1:]
    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_heldout"].result,
        " ".join(["python -m kvsim.experiments.server_heldout", *args]))


@rendering("server_memstate", "results/server-memstate.json")
def render_server_memstate(doc: dict[str, Any]) -> str:
    """The study's cells predicted with the memory path calibrated in the native runs'
    sitting (experiments/server_memstate.py)."""
    from kvsim.experiments.server_memstate import markdown

    args = provenance.scrub_line(doc["provenance"]["command"]).split()[1:]
    when = measured_line((doc.get("native_from") or {}).get("provenance"),
                         "python -m kvsim.experiments.server_split --memory --no-predict "
                         "--cell mget-100 --cell mget-20 --cell get-p10 --rounds 7")
    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_memstate"].result,
        " ".join(["python -m kvsim.experiments.server_memstate", *args])) + when


@rendering("server_missites", "results/server-missites.json")
def render_server_missites(doc: dict[str, Any]) -> str:
    """LL misses per request of c_ref's server natively by function and traced by site on
    callgrind's caches (experiments/server_missites.py)."""
    from kvsim.experiments.server_missites import markdown

    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_missites"].result, "python -m kvsim.experiments."
        "server_missites --native results/native-server-branchsim.json --cell mset-10 --cell "
        "mget-20 --cell get-p10 --build 62b5543=BINARY --cpu "
        "results/calibrate-xeon-m167-srvloop.toml --store-buffer 114")


@rendering("server_mset", "results/server-mset.json")
def render_server_mset(doc: dict[str, Any]) -> str:
    """MSET's request code timed by the clock and predicted, factor by factor, and the real
    server's MSET in situ (experiments/server_mset.py)."""
    from kvsim.experiments.server_mset import markdown

    when = measured_line(doc.get("measured_provenance"),
                         "python -m kvsim.experiments.server_mset --native-only --rounds 5")
    return markdown(doc) + "\n\n" + provenance_line(
        doc, RENDERINGS["server_mset"].result, "python -m kvsim.experiments.server_mset "
        "--native results/server-mset-native.json --cpu "
        "results/calibrate-xeon-m167-srvloop-probed.toml --store-buffer 114") + when


# the seeds' published times on their own presets (a compact table of its own)
register_each(lambda doc, result: _seed_absolute().render(doc, result),
              {"seed_absolute": "results/experiments/seed_absolute.json"})


def _seed_absolute():
    from kvsim.experiments import seed_absolute

    return seed_absolute
# pipeline_mget's native pairs with Redis's all-pending batch (``kvsim experiment run
# pipeline_mget --scale full --only native --publish-as pipeline_mget_native``)
register_each(render_experiment,
              {"pipeline_mget_native": "results/experiments/pipeline_mget_native.json"})


@rendering("gem5_vs_kvsim", "results/gem5-vs-kvsim.json")
def render_gem5(doc: dict[str, Any]) -> str:
    """sim/GEM5.md's table: gem5 against kvsim per trace, preset and level
    (``python -m kvsim.experiments.gem5_compare``)."""
    from kvsim.experiments import gem5_compare

    return gem5_compare.render_table(doc)


#: The columns of each validation table the README shows (the JSON holds more).
_VALIDATION_COLUMNS = {
    "validation": ["row", "set", "predicted", "native [95 % CI]", "native (minimums)",
                   "run medians", "ratio [interval]", "within 0.85-1.15"],
    "validation_time": ["row", "side", "set", "predicted_ns_per_op", "native_ns_per_op",
                        "ratio", "predicted_mlp", "diagnosis"],
}


def render_validation(doc: dict[str, Any], result: str) -> str:
    """The validation experiment (``kvsim experiment run validation --scale full
    --publish``, or ``--publish-as validation-MACHINE``): predicted against native on the
    machine it ran on, the printed columns only."""
    shown = dict(doc)
    tables = []
    for t in doc["tables"]:
        # a column the result has (a result from before the diagnosis has none)
        keep = [c for c in _VALIDATION_COLUMNS.get(t["name"], ()) if c in t["columns"]]
        if keep:
            idx = [t["columns"].index(c) for c in keep]
            t = dict(t, columns=keep, rows=[[r[i] for i in idx] for r in t["rows"]])
        tables.append(t)
    shown["tables"] = tables
    text = render_experiment(shown, result)
    stem = Path(result).stem
    plotted = (f"{stem}.png", f"{stem}_time.png")
    kept = (ln for ln in text.splitlines()
            if not ln.startswith("![") or ln.rstrip(")").endswith(plotted))
    # a CPU file's folder is the machine's (a cache or scratch directory): its name says
    # which file it was, its SHA-256 beside it says what was in it
    return _MACHINE_DIR.sub("", "\n".join(kept).replace("\n\n\n", "\n\n"))


_MACHINE_DIR = re.compile(r"(?<![\w.])(?:~|/[\w.-]+)(?:/[\w.-]+)*/(?=[\w.-]+\.toml\b)")


#: the validation's runs, one per machine it was published from (``--publish-as``)
for _name in ("validation", "validation-zen5", "validation-xeon-m167",
              "validation-xeon-m167-full", "validation-xeon-m167-fullcal", "validation-zen3",
              "validation-zen3-epyc-7713"):
    rendering(_name, f"results/experiments/{_name}.json")(
        lambda doc, _r=f"results/experiments/{_name}.json": render_validation(doc, _r))


def _register_experiment(name: str) -> None:
    rendering(name, f"results/experiments/{name}.json")(
        lambda doc, _r=f"results/experiments/{name}.json": render_experiment(doc, _r))


#: the validations the trust table (README.md) summarises: one per machine on its calibrated
#: ``local``, and (label, preset) where a preset was validated on a machine of its own core
TRUST: dict[str, str | tuple[str, str]] = {
    "results/experiments/validation.json": "Zen 4 guest",
    "results/experiments/validation-zen5.json": "Zen 5 guest",
    "results/experiments/validation-xeon-m167.json": "Intel Xeon guest",
    "results/experiments/validation-zen3.json": "Zen 3 guest",
    "results/experiments/validation-zen3-epyc-7713.json": ("Zen 3 guest", "epyc-7713")}


def _calibration_verdict(tables: dict[str, Any]) -> str:
    """The self-check of the calibration a validation predicted with, as its table says
    (validations from before the self-check existed have no such row)."""
    cal = tables.get("validation_calibration")
    said = dict(cal["rows"]).get("self-check of the calibration") if cal else None
    if said is None:
        return "not self-checked (before the check existed)"
    return "passed" if str(said).lower().startswith("passed") else "failed its self-check"


def render_calibration(doc: dict[str, Any], result: str) -> str:
    """A CPU file `kvsim calibrate` wrote: what it fitted, and its self-check's table."""
    from kvsim.sim import calibrate_check

    ghz = doc["freq_ghz"]
    rows = ["| level | size | ways | replacement | latency | source of the size |",
            "|---|---|---|---|---|---|"]
    for c in doc["cache"]:
        rows.append(f"| {c['name']} | {c['size'] // 1024} KiB | {c['ways']} | "
                    f"{c.get('replacement', 'lru')} | {c['latency']} cycles "
                    f"({c['latency'] / ghz:.2f} ns) | {c['src']['size']} |")
    t = doc.get("tlb") or {}
    d = doc["dram"]
    out = [f"**`{result}`**: clock {ghz} GHz; DRAM {d['latency_ns']} ns; walk fixed part "
           f"{t.get('walk_latency')} cycles, {t.get('walk_reads')} page-table reads, "
           f"{t.get('walkers') or 'unlimited'} walkers; host page "
           f"{t.get('host_page_size') or 'not modelled (as the guest page)'}; "
           + (f"page-table retention {t['walk_retention_ns'] / 1e6:g} ms; "
              if t.get("walk_retention_ns") else "")
           + ("no page-table line kept in the last level; "
              if t.get("walk_last_level") is False else
              "no host page-table line kept in the last level; "
              if t.get("walk_last_level") == "guest" else "")
           + (f"host page-table read {t['host_read_ns']} ns; " if t.get("host_read_ns") else "")
           + f"L1 miss buffers {doc['cache'][0].get('mshrs')}", "", *rows, "",
           calibrate_check.table(doc["selfcheck"]), ""]
    p = doc["meta"].get("measured_provenance") or doc["meta"]["provenance"]
    command = provenance.scrub_line(p.get("command") or "kvsim calibrate")
    out.append(provenance_line({"provenance": p}, result, command))
    return "\n".join(out)


register_each(render_calibration, {
    "calibration-xeon-m167-quick": "results/calibrate-xeon-m167-spread-quick.toml",
    "calibration-xeon-m167-full": "results/calibrate-xeon-m167-spread-full.toml",
    "calibration-xeon-m167-walk-quick": "results/calibrate-xeon-m167-walk-quick.toml",
    "calibration-xeon-m167-quiet-full": "results/calibrate-xeon-m167-quiet-full.toml",
    "calibration-xeon-m167-shape-quick": "results/calibrate-xeon-m167-shape-quick.toml",
    "calibration-xeon-m167-shape-full": "results/calibrate-xeon-m167-shape-full.toml",
    "calibration-xeon-m167-step-quick": "results/calibrate-xeon-m167-step-quick.toml",
    "calibration-xeon-m167-step-full": "results/calibrate-xeon-m167-step-full.toml",
    "calibration-xeon-m167-onewindow-quick": "results/calibrate-xeon-m167-onewindow-quick.toml",
    "calibration-xeon-m167-onewindow-full": "results/calibrate-xeon-m167-onewindow-full.toml",
    "calibration-xeon-m167-floor-quick": "results/calibrate-xeon-m167-floor-quick.toml",
    "calibration-xeon-m167-floor-full": "results/calibrate-xeon-m167-floor-full.toml",
    "calibration-xeon-m167-twopass-quick": "results/calibrate-xeon-m167-twopass-quick.toml",
    "calibration-xeon-m167-twopass-full": "results/calibrate-xeon-m167-twopass-full.toml"})


@rendering("trust", next(iter(TRUST)), also=tuple(TRUST)[1:])
def render_trust(doc: dict[str, Any]) -> str:
    """How far to trust a prediction: per machine the validation ran on, its CPU, the rows
    whose predicted speedup is within 0.85-1.15 of native, the range of predicted / native
    time per operation; then what no run has checked."""
    from kvsim import sim

    docs = {next(iter(TRUST)): doc, **doc.get("_also", {})}
    head = ["machine", "CPU", "calibration", "speedup rows within 0.85-1.15 (tuning, held back)",
            "predicted / native time per operation", "result file"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    checked: dict[str, str] = {}
    for path, entry in TRUST.items():
        label, preset = (entry, None) if isinstance(entry, str) else entry
        d = docs[path]
        m = d["provenance"]["machine"]
        t = {x["name"]: x for x in d["tables"]}
        v = t["validation"]
        col = v["columns"].index("within 0.85-1.15")
        sets = v["columns"].index("set")
        inside = {k: sum(1 for r in v["rows"] if r[sets] == k and r[col] in (True, "yes"))
                  for k in ("tuning", "held back")}
        total = {k: sum(1 for r in v["rows"] if r[sets] == k) for k in inside}
        tt = t["validation_time"]
        ratios = [r[tt["columns"].index("ratio")] for r in tt["rows"]]
        cpu = f"{m['cpu_model']}, family {m.get('cpu_family')} model {m.get('cpu_model_number')}"
        if preset is not None:
            checked[preset] = f"{label} ({cpu})"
        verdict = (f"none: the preset `{preset}` as it is" if preset is not None
                   else _calibration_verdict(t))
        out.append(f"| {label} | {cpu} | {verdict} | "
                   f"{sum(inside.values())} of "
                   f"{sum(total.values())} ({inside['tuning']} of {total['tuning']}, "
                   f"{inside['held back']} of {total['held back']}) | "
                   f"{min(ratios):.2f}-{max(ratios):.2f} | [`{path}`]({path}) |")
    presets = [p for p in sim.preset_names() if p != "local" and p not in checked]
    for p, on in checked.items():
        out += ["", f"The preset `{p}` is checked on a {on}: a part with its core and cache "
                "sizes, not its clock or the memory a tenant of the part gets (its own row "
                "above)."]
    out += ["", "Never checked: the presets " + ", ".join(f"`{p}`" for p in presets)
            + " against the hardware they describe (no native run on those CPUs); the "
            "native checks of a prediction are the calibrated `local` on the machine "
            "that runs it and the presets above, and an uncalibrated `local` has none."]
    return "\n".join(out)


#: c_ref's fidelity changes (kvsim.experiments.fidelity): each file times and predicts one pair
#: before and after one change that brought c_ref closer to upstream
FIDELITY = ("results/fidelity-iterate-keys.json", "results/fidelity-iterate-save.json",
            "results/fidelity-iterate-save-nochecksum.json", "results/fidelity-load.json",
            "results/fidelity-mget-dict.json", "results/fidelity-mget-hashtable.json",
            "results/fidelity-mset-dict-15043.json",
            "results/fidelity-mset-dict-random-batch.json",
            "results/fidelity-mset-hashtable.json", "results/fidelity-pipeline-dict.json",
            "results/fidelity-pipeline-get-hashtable.json",
            "results/fidelity-pipeline-hashtable.json")


@rendering("fidelity", FIDELITY[0], also=FIDELITY[1:])
def render_fidelity(doc: dict[str, Any]) -> str:
    """Each fidelity change: the pair, what changed in c_ref, and the predicted and native
    speedups before and after it."""
    docs = {FIDELITY[0]: doc, **doc.get("_also", {})}
    head = ["pair", "change to c_ref", "predicted before → after", "native (CPU time) "
            "before → after", "preset", "result file"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for path in FIDELITY:
        d = docs[path]
        a = d["after"]["speedup"]
        b = (d.get("before") or {}).get("speedup")  # a file may hold the new pair only

        def pair(key: str, a: dict = a, b: dict | None = b) -> str:
            return (f"{b[key]:.2f} → " if b else "(new) ") + f"{a[key]:.2f}"

        change = d["change"].replace("|", "/")
        out.append(f"| {d['workload']} {d['baseline']} → {d['variant']} | {change} | "
                   f"{pair('predicted')} | {pair('native_cpu')} | {d['cpu_preset']} | "
                   f"[`{Path(path).name}`]({path}) |")
    return "\n".join(out)


# the other seed studies' full-scale runs
# (``kvsim experiment run NAME --scale full --publish -o DIR``)
for _name in ("iterate", "pipeline", "real_valkey", "rdb_load", "kvobj_memory", "mset_batch"):
    _register_experiment(_name)


# --- command line ----------------------------------------------------------------------------


def _root() -> Path:
    from kvsim import artifacts

    return artifacts.source_root() or Path.cwd()


def load_benchmark_renderings() -> None:
    """In a checkout, the command renders the benchmarks' regions too: bench/renderings.py
    (outside the package, as the benchmarks are) registers them here when imported."""
    from kvsim import artifacts

    root = artifacts.source_root()
    if root is None or not (root / "bench" / "renderings.py").is_file():
        return
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import importlib

    importlib.import_module("bench.renderings")
    # run as ``python -m``, this module is __main__ and the package's copy got them
    for name, r in importlib.import_module("kvsim.experiments.render").RENDERINGS.items():
        RENDERINGS.setdefault(name, r)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.render",
                                 description="Render result files into README regions.")
    ap.add_argument("files", nargs="+", type=Path, help="Markdown files to render")
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 if a region disagrees with its result file")
    args = ap.parse_args(argv)
    root = _root()
    load_benchmark_renderings()
    stale = []
    try:
        for path in args.files:
            try:
                text = path.read_text()
            except OSError as exc:
                raise RenderError(f"{path}: {exc.strerror}") from None
            new, changed = render_text(text, root, str(path), link_prefix(path, root))
            stale += [f"{path}: region {name!r}" for name in changed]
            if changed and not args.check:
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_text(new)
                tmp.replace(path)
    except RenderError as exc:
        print(f"render: error: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print("render: stale (rerun without --check): " + "; ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
# the seeds' scale (``python -m kvsim.experiments.scale``): docs/scale.md's tables
register_each(lambda doc, result: _scale_render().render(doc, result, "cycles"),
              {"scale": "results/scale.json"})
register_each(lambda doc, result: _scale_render().render(doc, result, "walks"),
              {"scale_walks": "results/scale.json"})
register_each(lambda doc, result: _scale_render().render(doc, result, "chase"),
              {"scale_chase": "results/scale.json"})
register_each(lambda doc, result: _scale_render().render(doc, result, "memory"),
              {"scale_memory": "results/scale.json"})


def _scale_render():
    from kvsim.experiments import scale_render

    return scale_render
