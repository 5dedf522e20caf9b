"""advisor.ingest.columns: small tables built as columns without pandas must be what pandas would have built."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.ingest.columns import column, columns_of, frame_of, records


COLUMN_CASES = [[1, 2], [1, None], [None, None], [1.5, None], [1, 2.5], ["a", "b"], [], [None], [True, False],
                ["a", None], [1, "a"], [0, 2**40]]


@pytest.mark.parametrize("values", COLUMN_CASES, ids=repr)
def test_a_column_is_what_a_dataframe_of_the_rows_gives(values):
    """ingest.columns builds without pandas what pd.DataFrame(rows) then columns_of gave: same dtype, same values,
    and the same frame back."""
    rows = pd.DataFrame([{"x": v} for v in values], columns=["x"])
    expected, built = columns_of(rows)["x"], column(values)
    assert built.dtype == expected.dtype
    assert [v if v == v else "NaN" for v in built.tolist()] == [v if v == v else "NaN" for v in expected.tolist()]
    pd.testing.assert_frame_equal(frame_of({"x": built}), rows)




def _shown(rows: list[dict]) -> list[list[tuple[str, str, str]]]:
    return [[(key, type(value).__name__, repr(value)) for key, value in row.items()] for row in rows]


def test_records_are_to_dict_records_for_every_kind_of_column():
    frame = pd.DataFrame({
        "text": ["a", None, "c"], "int": [1, 2, 3], "float": [1.5, np.nan, 2.0], "bool": [True, False, True],
        "object": pd.Series([None, "x", 3], dtype=object), "nullable": pd.array([1, None, 3], dtype="Int64"),
        "time": pd.to_datetime(["2020-01-01", None, "2021-01-01"]), "category": pd.Categorical(["x", "y", None]),
    }, index=[5, 3, 9])
    assert _shown(records(frame)) == _shown(frame.to_dict("records"))
    assert records(frame.iloc[:0]) == [] and records(pd.DataFrame(index=range(2))) == [{}, {}]
