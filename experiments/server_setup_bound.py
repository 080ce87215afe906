"""What carrying the server's load in compact form changes in the ``server`` study's
predictions: each seed row (experiments/server_study.py) traced three ways at one key
count and simulated on the row's preset.

- ``records``: the load recorded request by request through the traced server and
  replayed as warm-up, record by record (the study's ``--scale small``);
- ``compact``: the same trace with its warm-up compacted afterwards (every line once,
  least recently touched first: ``server_study.compact_warmup``, the study's ``--scale
  full``);
- ``setup``: the load carried in compact form by the traced server itself (``DEBUG
  SETUP-BEGIN`` .. ``SETUP-END``, c_ref/setupwarm.c), never recorded (the study's
  ``--scale seed``).

Per row and side: the predicted requests/s of each form and the ratios of ``setup`` and
``compact`` to ``records``, and of the speedups. Writes results/server-setup-bound.json.
Some ten seconds per row and form at 100,000 keys on two cores (the ``records`` form grows
with the keys: some 70 records per key loaded).

    python -m kvsim.experiments.server_setup_bound [--keys N ...] [--row CELL ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

RESULT_NAME = "server-setup-bound.json"
FORMS = {"records": {}, "compact": {"compact": True}, "setup": {"setup": True}}


def bound_row(row: dict[str, Any], keys: int, requests: int) -> dict[str, Any]:
    """One seed row's predictions in every form of :data:`FORMS` and their ratios."""
    from kvsim.experiments import server_study as S

    spec = S.bench_spec(row["cell"], keys, requests, row["value_size"])
    out: dict[str, Any] = {"row": row["row"], "cell": row["cell"], "cpu": row["cpu"],
                           "keys": keys, "requests": requests}
    for form, kw in FORMS.items():
        t = time.monotonic()
        p = S.predict(spec, row["cpu"], row["args"], **kw)
        out[form] = {k: p[k] for k in ("pred_rps_a", "pred_rps_b", "pred_speedup")}
        out[form]["seconds"] = round(time.monotonic() - t, 1)  # wall, frozen time included
    for form in ("compact", "setup"):
        out[f"{form}_over_records"] = {k: out[form][k] / out["records"][k]
                                       for k in ("pred_rps_a", "pred_rps_b", "pred_speedup")}
    return out


def markdown(doc: dict[str, Any]) -> str:
    """The result file as a table: per row, the predictions with the load recorded, and
    the compact forms' ratios to them."""
    out = ["| row | cpu | keys | records: requests/s a / b, speedup | compact / records: "
           "a, b, speedup | setup / records: a, b, speedup |", "|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        rec = r["records"]
        ratios = ["{pred_rps_a:.4f}, {pred_rps_b:.4f}, {pred_speedup:.4f}".format(
            **r[f"{f}_over_records"]) for f in ("compact", "setup")]
        out.append(f"| {r['row']} | {r['cpu']} | {r['keys']:,} | {rec['pred_rps_a']:,.0f} / "
                   f"{rec['pred_rps_b']:,.0f}, {rec['pred_speedup']:.3f} | {ratios[0]} | "
                   f"{ratios[1]} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments import server_study as S
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_setup_bound",
                                 description="the server study's seed rows with the load "
                                             "recorded, compacted afterwards, and carried "
                                             "compact by the traced server")
    ap.add_argument("--keys", type=int, action="append", default=None,
                    help="keys loaded (repeatable: every row at each; default 100000)")
    ap.add_argument("--requests", type=int, default=None,
                    help="measured requests per side (default: the study's small scale's)")
    ap.add_argument("--row", action="append", default=None, metavar="CELL",
                    help="the seed rows of this cell (get-p10, mset-10, mset-50, mget-100, "
                         "mget-100-p10; repeatable; default: every row)")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    rows = [r for r in S._seed_rows() if not a.row or r["cell"] in a.row]
    if not rows:
        print(f"--row: no seed row of {', '.join(a.row)}", file=sys.stderr)
        return 2
    got = []
    try:
        for r in rows:
            reqs = a.requests or S.seed_row_requests(r)[0]
            for keys in a.keys or [100_000]:
                b = bound_row(r, keys, reqs)
                got.append(b)
                print(f"{r['cell']:<13} {r['cpu']:<11} {keys:>9} " + "  ".join(
                    f"{f}: a {b[f + '_over_records']['pred_rps_a']:.4f} "
                    f"b {b[f + '_over_records']['pred_rps_b']:.4f} "
                    f"speedup {b[f + '_over_records']['pred_speedup']:.4f}"
                    for f in ("compact", "setup")), flush=True)
    except (OSError, ToolMissing, ValkeyError, ValueError) as e:
        print(f"server_setup_bound: {e}", file=sys.stderr)
        return 1
    provenance.write_result(out, {
        "rows": got,
        "note": "predictions of the server study's seed rows on their presets with the "
                "server's load as warm-up: recorded and replayed record by record (records), "
                "compacted afterwards (compact), carried compact by the traced server "
                "(setup); ratios to records"})
    print(f"# wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
