"""The tag_counts job's pieces that need no Spark: output file and error reporting."""

from __future__ import annotations

import csv

from tidemq.analytics.tag_counts import explain, write_csv
from tidemq.common.errors import TopicNotExist


def test_csv_has_header_and_rows_and_replaces_atomically(tmp_path):
    path = tmp_path / "out" / "counts.csv"
    write_csv(path, [("TagA", 3), ("", 1)])
    write_csv(path, [("TagB", 2), ("TagA", 1)])
    with path.open(newline="") as f:
        assert list(csv.reader(f)) == [["tag", "count"], ["TagB", "2"], ["TagA", "1"]]
    assert [p.name for p in path.parent.iterdir()] == ["counts.csv"], "no temp file left"


def test_explain_finds_the_tidemq_error_inside_a_spark_failure():
    spark_text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to plan Python data source read: Traceback ...\n"
        '  File "brokers.py", line 60, in fetch_route\n'
        "tidemq.common.errors.TopicNotExist: TOPIC_NOT_EXIST: topic 'nope' does not exist\n"
        " SQLSTATE: 38000"
    )
    assert explain(RuntimeError(spark_text)) == "TOPIC_NOT_EXIST: topic 'nope' does not exist"
    assert explain(TopicNotExist("gone")) == "TOPIC_NOT_EXIST: gone"
    assert explain(RuntimeError("\nfirst line\nsecond")) == "first line"
