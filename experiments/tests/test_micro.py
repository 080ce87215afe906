"""`kvsim micro` (kvsim.experiments.micro): the trace command and its one-line errors (the
traces themselves are tested in sim/tests/test_micro.py)."""

from kvsim import traces
from kvsim.experiments import micro


def test_trace_command_writes_a_readable_trace(tmp_path):
    out = tmp_path / "c.kvt"
    assert micro.main(["trace", str(out), "--working-set", "64KiB", "--chains", "3",
                       "--steps", "50"]) == 0
    rec = traces.read_all(str(out))
    assert (rec["kind"] == traces.KIND_LOAD).sum() == 1024 + 2 * 3 * 50


def test_bad_working_set_is_one_line(tmp_path, capsys):
    assert micro.main(["trace", str(tmp_path / "x.kvt"), "--working-set", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--working-set" in err[0]
    assert not (tmp_path / "x.kvt").exists()
