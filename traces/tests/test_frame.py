"""traces.to_dataframe: every field kept, codes named by the header, from a path, a reader
or an array alike."""

import numpy as np
import pandas as pd
import pytest
from trace_helpers import HEADER, random_records

from kvsim import traces


@pytest.fixture
def written(tmp_path):
    recs = random_records(2000, seed=3)
    path = tmp_path / "t.kvt"
    with traces.Writer(path, dict(HEADER)) as w:
        w.write(recs)
    return path, recs


def test_columns_keep_values_and_name_codes(written):
    path, recs = written
    df = traces.to_dataframe(path)
    assert len(df) == len(recs)
    for col in ("addr", "gap", "dep", "size", "flags"):
        assert np.array_equal(df[col].to_numpy(), recs[col]), col
    for col in ("kind", "tag", "site", "marker"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    assert np.array_equal(df["kind"].cat.codes.to_numpy(), recs["kind"])
    assert np.array_equal(df["tag"].cat.codes.to_numpy(), recs["tag"])
    assert np.array_equal(df["site"].cat.codes.to_numpy(), recs["site"])
    names = HEADER["tags"]
    for t, name in zip(recs["tag"], df["tag"], strict=True):
        assert name == (names[t] if t < len(names) else f"tag{t}")
    kinds = df["kind"].astype(str).to_numpy()
    assert list(kinds) == [traces.KIND_NAMES[k] for k in recs["kind"]]
    is_marker = recs["kind"] == traces.KIND_MARKER
    assert df["marker"][~is_marker].isna().all()
    m = HEADER["markers"]
    assert [str(x) for x in df["marker"][is_marker]] == \
        [m[f] if f < len(m) else f"marker{f}" for f in recs["flags"][is_marker]]


def test_path_reader_and_array_agree(written):
    path, recs = written
    a = traces.to_dataframe(path)
    with traces.open(path) as tr:
        b = traces.to_dataframe(tr)
    c = traces.to_dataframe(recs, dict(HEADER))
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)
    plain = traces.to_dataframe(recs)  # no header: the format's own tag names
    assert [str(t) for t in plain["tag"]] == [traces.TAG_NAMES[t] for t in recs["tag"]]


def test_counts_match_summarize(written):
    path, _ = written
    df = traces.to_dataframe(path)
    s = traces.summarize(path)
    assert df["kind"].value_counts().loc[lambda v: v > 0].to_dict() == s["by_kind"]


def test_rejects_other_input():
    with pytest.raises(TypeError):
        traces.to_dataframe(np.zeros(3))
    with pytest.raises(TypeError):
        traces.to_dataframe(object())
