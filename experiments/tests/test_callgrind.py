"""The reader of callgrind's output format (experiments/callgrind.py): a hand-written file
whose every figure is worked out below, each kind of broken file as one line naming the file
and the line, and a real callgrind file read the same as callgrind_annotate reads it."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from kvsim.experiments import callgrind as CG
from kvsim.experiments import server_cachesim as CS
from kvsim.experiments.server import callgrind_costs, callgrind_self_costs

# main calls lookup (twice, from one place) and helper; lookup has inlined code from
# inline.h. Name compression: fn=(12) main, later fn=(12); cfn=(13)/(14) define names
# that fn= refers to; cfl=(2) defines the file that fl=(2) refers to. Subpositions: hex,
# "+3", "-2", "*", in both columns (positions: instr line).
HAND = """\
# callgrind format
version: 1
creator: hand-written
positions: instr line
events: Ir Dr D1mr
summary: 135 49 8

ob=(1) /bin/app
fl=(1) main.c
fn=(12) main
0x10 5 10 4 1
+3 * 6 2
cfl=(2) lib.c
cfn=(13) lookup
calls=2 0x40 20
+1 -1 100 40 7
cfn=(14) helper
calls=1 0x80 30
* * 10 2
jump=3 +2 *
* *
-2 +1 4

fl=(2)
fn=(13)
0x40 20 50 20 5
fi=(3) inline.h
+4 * 25 10
fe=(2)
* +1 25 10 2

fl=(1)
fn=(14)
0x80 30 10 2
fn=(12)
0x20 9 5 1

totals: 135 49 8
"""

# Self costs (Ir, Dr, D1mr), line by line:
#   main:   (10, 4, 1) + (6, 2, 0) + jump's position line (0, 0, 0) + (4, 0, 0)
#           + the second fn=(12) block (5, 1, 0)                          = (25, 7, 1)
#   lookup: lib.c (50, 20, 5) + inline.h (25, 10, 0) + lib.c (25, 10, 2) = (100, 40, 7)
#   helper: (10, 2, 0)
# Inclusive: main = self + the two call lines (100, 40, 7) and (10, 2, 0) = (135, 49, 8);
# lookup and helper make no calls: their self costs.
# Totals: the sum of the self costs = (135, 49, 8), the file's totals: line.
SELF = {"main": {"Ir": 25, "Dr": 7, "D1mr": 1},
        "lookup": {"Ir": 100, "Dr": 40, "D1mr": 7},
        "helper": {"Ir": 10, "Dr": 2, "D1mr": 0}}


@pytest.fixture
def hand(tmp_path):
    p = tmp_path / "callgrind.out.1"
    p.write_text(HAND)
    return p


def test_hand_written_file(hand):
    prof = CG.read(hand)
    prof.check_valid()
    assert prof.events == ["Ir", "Dr", "D1mr"]
    assert prof.self_costs == SELF
    assert prof.inclusive == {"main": {"Ir": 135, "Dr": 49, "D1mr": 8},
                              "lookup": SELF["lookup"], "helper": SELF["helper"]}
    assert prof.totals == {"Ir": 135, "Dr": 49, "D1mr": 8}
    assert prof.self_by_file == {("main.c", "main"): SELF["main"],
                                 ("lib.c", "lookup"): {"Ir": 75, "Dr": 30, "D1mr": 7},
                                 ("inline.h", "lookup"): {"Ir": 25, "Dr": 10, "D1mr": 0},
                                 ("main.c", "helper"): SELF["helper"]}
    assert prof.event_costs("Dr") == {"main": 7, "lookup": 40, "helper": 2}
    assert prof.event_costs("Ir", inclusive=True)["main"] == 135
    assert prof.calls == {"lookup": 2, "helper": 1}  # main itself is called by no line
    assert prof.call_costs == {("main", "lookup"): {"calls": 2, **SELF["lookup"]},
                               ("main", "helper"): {"calls": 1, **SELF["helper"]}}


def test_the_old_names_read_the_same(hand):
    """server.callgrind_costs / callgrind_self_costs (the first event, instructions) and
    server_cachesim.callgrind_events are this reader."""
    assert callgrind_costs(hand) == ({"main": 25, "lookup": 100, "helper": 10},
                                     {"main": 135, "lookup": 100, "helper": 10})
    assert callgrind_self_costs(hand) == {"main": 25, "lookup": 100, "helper": 10}
    assert CS.callgrind_events(hand) == ({"Ir": 135, "Dr": 49, "D1mr": 8}, SELF)


def test_names_without_compression(tmp_path):
    """Uncompressed names may hold spaces (C++); positions default to one (line)."""
    p = tmp_path / "cg"
    p.write_text("events: Ir\nfl=a.cc\nfn=operator new(unsigned long)\n3 7\n"
                 "cfn=std::vector<int>::push_back(int const&)\ncalls=1 9\n3 11\n"
                 "fn=std::vector<int>::push_back(int const&)\n9 11\n")
    prof = CG.read(p)
    prof.check_valid()
    assert prof.event_costs("Ir") == {"operator new(unsigned long)": 7,
                                      "std::vector<int>::push_back(int const&)": 11}
    assert prof.event_costs("Ir", inclusive=True)["operator new(unsigned long)"] == 18
    assert prof.totals == {"Ir": 18}


def test_parts_add_up(tmp_path):
    """Two parts (--combine-dumps=yes), each with its header and totals: line; the second
    counts one more event, which the first part's rows then hold as 0."""
    p = tmp_path / "cg"
    p.write_text("part: 1\nevents: Ir\nfn=(1) f\n1 5\ntotals: 5\n"
                 "part: 2\nevents: Ir Bc\nfn=(2) g\n2 3 1\nfn=(1)\n+1 2 2\ntotals: 5 3\n")
    prof = CG.read(p)
    prof.check_valid()
    assert prof.self_costs == {"f": {"Ir": 7, "Bc": 2}, "g": {"Ir": 3, "Bc": 1}}
    assert prof.totals == {"Ir": 10, "Bc": 3}


@pytest.mark.parametrize("body, line, what", [
    ("events: Ir\nfn=(3)\n1 5\n", 2, "fn=(3) refers to no earlier name"),
    ("events: Ir\nfn=f\n1 5 6\n", 3, "2 costs for 1 events"),
    ("events: Ir\nfn=f\n1 five\n", 3, "a cost is not a number"),
    ("events: Ir\n1 5\n", 2, "a cost line before any fn= line"),
    ("events: Ir\nfn=f\ncfn=g\ncalls=1 2\nfn=g\n", 5, "must be followed by its cost line"),
    ("events: Ir\nfn=f\ncfn=g\ncalls=1 2\n", 4, "truncated"),
    ("events: Ir\nfn=f\ncalls=1 2\n1 5\n", 3, "without a count or a cfn="),
    ("events: Ir\nfn=f\ncfn=g\ncalls=x 2\n1 5\n", 4, "without a count or a cfn="),
    ("events: Ir\nfn=f\n1 5\ntotals: 6\n", 4, "totals: 6 but the cost lines add up to 5"),
    ("positions: line\nevents: Ir\nfn=f\nx1 5\n", 4, "not a line of callgrind's format"),
    ("positions: instr line\nevents: Ir\nfn=f\n0x1\n", 4, "2 subposition(s)"),
    ("positions: cycles\nevents: Ir\n", 1, "unknown positions"),
])
def test_a_broken_file_is_one_line(tmp_path, body, line, what):
    p = tmp_path / "cg.out"
    p.write_text(body)
    with pytest.raises(CG.CallgrindFormatError) as e:
        CG.read(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: ") and what in msg and "\n" not in msg


def test_not_a_callgrind_file(tmp_path):
    p = tmp_path / "empty"
    p.write_text("# nothing\n")
    with pytest.raises(CG.CallgrindFormatError, match="no events: line"):
        CG.read(p)


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_annotate")
                    is None, reason="valgrind not installed")
def test_a_real_file_reads_as_callgrind_annotate_reads_it(tmp_path):
    """/bin/true under callgrind with every event, per-instruction positions and jumps:
    the self cost of each (file, function) and the totals are callgrind_annotate's."""
    out = tmp_path / "cg.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes",
                    "--dump-instr=yes", "--collect-jumps=yes", f"--callgrind-out-file={out}",
                    "/bin/true"], check=True, capture_output=True, timeout=300)
    prof = CG.read(out)
    prof.check_valid()
    assert prof.events[0] == "Ir" and "DLmr" in prof.events and "Bcm" in prof.events
    ann = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", str(out)],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    # the totals: line (callgrind's summary: line, which callgrind_annotate prints as the
    # program's totals, may count a few more events than the cost lines hold)
    (totals,) = [ln.split()[1:] for ln in out.read_text().splitlines()
                 if ln.startswith("totals:")]
    assert [prof.totals[e] for e in prof.events] == [int(t) for t in totals]
    _, _, table = ann.partition("file:function")
    count = re.compile(r"([\d,]+|\.)(?: \(\s*[\d.]+%\))?")
    theirs = {}
    row = re.compile(r"^\s*((?:(?:[\d,]+|\.)(?: \(\s*[\d.]+%\))?\s+)+)(\S.*?)(?: \[[^]]*\])?$")
    for ln in table.splitlines()[2:]:
        m = row.match(ln)
        if m:
            costs = [int(c.replace(",", "").replace(".", "0")) for c in count.findall(m[1])]
            if any(costs):
                theirs[m[2]] = costs
    ours = {f"{file}:{fn}": [c[e] for e in prof.events]
            for (file, fn), c in prof.self_by_file.items() if any(c.values())}
    assert len(ours) > 20 and ours == theirs
