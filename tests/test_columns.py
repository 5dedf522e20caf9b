"""What advisor computes column-wise, without building a DataFrame or looping in pandas, must be what pandas computes:
small tables built as columns (ingest.columns), distinct step counts and the stragglers of the reduce."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.ingest.columns import column, columns_of, frame_of, records


COLUMN_CASES = [[1, 2], [1, None], [None, None], [1.5, None], [1, 2.5], ["a", "b"], [], [None], [True, False],
                ["a", None], [1, "a"], [0, 2**40], [2**63], [2**64], [None, 2**70], [1.5, 2**70], [-(2**63), 1]]


@pytest.mark.parametrize("values", COLUMN_CASES, ids=repr)
def test_a_column_is_what_a_dataframe_of_the_rows_gives(values):
    """ingest.columns builds without pandas what pd.DataFrame(rows) then columns_of gave: same dtype, same values,
    and the same frame back."""
    rows = pd.DataFrame([{"x": v} for v in values], columns=["x"])
    expected, built = columns_of(rows)["x"], column(values)
    assert built.dtype == expected.dtype
    assert [v if v == v else "NaN" for v in built.tolist()] == [v if v == v else "NaN" for v in expected.tolist()]
    pd.testing.assert_frame_equal(frame_of({"x": built}), rows)
    assert not built.flags.writeable  # a frame of these columns shares them


def _shown(rows: list[dict]) -> list[list[tuple[str, str, str]]]:
    return [[(key, type(value).__name__, repr(value)) for key, value in row.items()] for row in rows]


def test_records_are_to_dict_records_for_every_kind_of_column():
    frame = pd.DataFrame({
        "text": ["a", None, "c"], "int": [1, 2, 3], "float": [1.5, np.nan, 2.0], "bool": [True, False, True],
        "object": pd.Series([None, "x", 3], dtype=object), "nullable": pd.array([1, None, 3], dtype="Int64"),
        "time": pd.to_datetime(["2020-01-01", None, "2021-01-01"]), "category": pd.Categorical(["x", "y", None]),
        "numpy scalars": pd.Series([np.int64(3), np.float64(0.5), None], dtype=object), 7: ["a name", "that is", "no text"],
    }, index=[5, 3, 9])
    assert _shown(records(frame)) == _shown(frame.to_dict("records"))
    assert records(frame.iloc[:0]) == [] and records(pd.DataFrame(index=range(2))) == [{}, {}]


cells = st.sampled_from([None, np.nan, 1, 2, 1.0, "x", True])


@given(st.lists(cells, max_size=8))
def test_distinct_steps_count_as_pandas_counts_them(values):
    from advisor.facts.reduce import _distinct

    objects = np.empty(len(values), dtype=object)
    objects[:] = values
    assert _distinct(objects) == pd.Series(objects).nunique(dropna=False)
    numbers = np.array([v for v in values if isinstance(v, float)], dtype=float)
    assert _distinct(numbers) == pd.Series(numbers).nunique(dropna=False)


def _stragglers_by_group(waits: pd.DataFrame) -> pd.DataFrame:
    """The definition of facts.cluster.collective_stragglers, group by group in pandas."""
    rows = []
    for group, members in waits.groupby("group", sort=True):
        if len(members) < 2:
            continue
        ordered = members.sort_values(["wait_us", "rank"], kind="stable")
        slow, others = ordered.iloc[0], ordered.iloc[1:]
        rows.append({"group": group, "ranks": len(members), "rank": int(slow["rank"]),
                     "straggler_wait_us": float(slow["wait_us"]), "others_wait_us": float(others["wait_us"].mean()),
                     "lost_us": max(float(others["wait_us"].mean() - slow["wait_us"]), 0.0),
                     "max_wait_rank": int(ordered.iloc[-1]["rank"])})
    return pd.DataFrame(rows, columns=["group", "ranks", "rank", "straggler_wait_us", "others_wait_us", "lost_us",
                                       "max_wait_rank"])


member = st.tuples(st.integers(0, 15), st.sampled_from(["b", "a", "c10", "c2", None]),
                   st.sampled_from([np.nan, 5.0, 0.30000000000000004, 1e-3, 123.456, 7.25]))


@given(st.lists(member, max_size=30))
def test_stragglers_are_found_as_group_by_group(members):
    from advisor.facts.cluster import collective_stragglers

    waits = pd.DataFrame(members, columns=["rank", "group", "wait_us"]).astype({"wait_us": float})
    pd.testing.assert_frame_equal(collective_stragglers(waits), _stragglers_by_group(waits), check_exact=True,
                                  check_dtype=False)


def test_a_table_reads_one_column_from_the_form_it_holds_and_is_made_by_its_constructors():
    from advisor.ingest.model import CommunicationTables, CsvTable

    frame = pd.DataFrame({"name": ["MatMul", "Add"], "device_id": [np.nan, 3.0]})
    table = CsvTable.of_frame(Path("kernel_details.csv"), frame)
    assert table.values("device_id").tolist()[1] == 3.0 and table.values("absent") is None
    assert "columns" not in table.__dict__  # reading one column copied nothing
    with pytest.raises(TypeError, match="constructors"):
        _ = CsvTable(Path("x.csv"), [], 0).frame
    with pytest.raises(TypeError, match="constructors"):
        _ = CommunicationTables().ops
