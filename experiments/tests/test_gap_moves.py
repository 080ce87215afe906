"""experiments/gap_moves.py: bad input."""

from __future__ import annotations

from kvsim.experiments import gap_moves


def test_gap_moves_refuses_a_row_the_validation_has_not(tmp_path, capsys):
    out = tmp_path / "moves.json"
    rc = gap_moves.main(["--arm", "x", "-", str(tmp_path / "none.toml"), "--row", "GET d99",
                         "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and not out.exists()
    assert len(err) == 1 and "GET d99" in err[0]
