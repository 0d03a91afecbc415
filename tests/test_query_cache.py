"""What a query reads, kept between queries and cut to its time filter
(metastore/sql_sources.py, metastore/query.py).

The latest visible file list of a dataSource is kept per process with the commit
seq it reflects, so the next query after any commit (an append, a mark-unused, an
admin edit of a file's location) must see it, and `as_of` must still read the
past. A query whose WHERE bounds `__time` by constants reads only the files whose
segments meet those bounds: shown by removing the other files from deep storage,
which a query that still opened them would fail on. The metastore states are
built through the services with real Parquet files (tests/test_query.py).
"""

from __future__ import annotations

import os
import shutil

import pytest
import test_query
from django.conf import settings
from test_query import history  # noqa: F401 - the shared metastore history fixture

from metastore import query, services
from metastore.intervals import Interval
from metastore.models import Segment
from metastore.sql_sources import visible_source

pytestmark = pytest.mark.django_db

SUM = "SELECT sum(added) FROM wiki"


def test_the_next_query_after_a_commit_sees_it(history, inline_spec):  # noqa: F811
    before = query.run_query(sql=SUM).rows
    kept = visible_source(datasource="wiki")
    assert visible_source(datasource="wiki") is kept  # no commit since: the same list

    test_query.commit(
        inline_spec,
        "wiki",
        "2024-01-03/2024-01-04",
        {"2024-01-03/2024-01-04": [test_query.DAY3_APPEND]},
    )

    assert query.run_query(sql=SUM).rows == [[before[0][0] + 512]]
    assert visible_source(datasource="wiki") is not kept


def test_marking_unused_is_seen_by_the_next_query(history):  # noqa: F811
    assert query.run_query(sql=SUM).rows == [[404]]

    services.segments_mark_used(
        datasource="wiki", used=False, interval=Interval.parse("2024-01-01T00/2024-01-01T06")
    )

    # v2's six hours are gone: day 1's v1 files show whole again.
    assert query.run_query(sql=SUM).rows == [[1 + 2 + 4 + 8 + 16]]


def test_an_admin_edit_of_a_file_location_is_seen_by_the_next_query(history, tmp_path):  # noqa: F811
    assert query.run_query(sql=SUM).rows == [[404]]
    v2 = Segment.objects.get(datasource__name="wiki", start__hour=0, end__hour=6, used=True)
    # The same rows in a file elsewhere, then the original removed: only a query that
    # reads the new location still answers.
    moved = settings.STRATA_DEEP_STORAGE / "wiki" / "moved" / "v2.parquet"
    moved.parent.mkdir(parents=True)
    shutil.copyfile(v2.location, moved)
    os.remove(v2.location)

    services.segment_admin_update(segment=v2, fields={"location": str(moved)})

    assert query.run_query(sql=SUM).rows == [[404]]


def test_as_of_reads_the_past_while_the_latest_list_is_kept(history):  # noqa: F811
    seq1, seq2, _ = history
    latest = query.run_query(sql=SUM).rows

    assert query.run_query(sql=SUM, as_of=seq1).rows == [[1 + 2 + 4 + 8 + 16 + 32 + 64]]
    assert query.run_query(sql=SUM, as_of=seq2).rows == [[128 + 256 + 4 + 16 + 32 + 64]]
    assert query.run_query(sql=SUM).rows == latest == [[404]]


# --- pruning by time ---------------------------------------------------------------------


def bound_files(sql: str, as_of: int | None = None) -> list[str]:
    con = query.duckdb_database(str(settings.STRATA_DEEP_STORAGE)).cursor()
    try:
        (source,) = query.bind_query(con, sql, as_of=as_of).sources
        return source.files
    finally:
        con.close()


def day_files(history_day: str) -> set[str]:
    start = Interval.parse(history_day).start
    return set(
        Segment.objects.filter(datasource__name="wiki", start=start, used=True)
        .exclude(location="")
        .values_list("location", flat=True)
    )


@pytest.fixture
def three_days(history, inline_spec):  # noqa: F811
    """The history, with day 3 appended: days 1 and 3 have data, day 2 a tombstone."""
    test_query.commit(
        inline_spec,
        "wiki",
        "2024-01-03/2024-01-04",
        {"2024-01-03/2024-01-04": [test_query.DAY3_APPEND]},
    )
    return day_files("2024-01-01/2024-01-02"), day_files("2024-01-03/2024-01-04")


@pytest.mark.parametrize(
    "where",
    [
        "__time >= TIMESTAMP '2024-01-03 00:00:00'",
        "__time > '2024-01-02 12:00:00' AND page <> 'zz'",
        "TIMESTAMP '2024-01-03' <= __time",
        "__time BETWEEN DATE '2024-01-03' AND TIMESTAMP '2024-01-09 00:00:00'",
        "__time = TIMESTAMP '2024-01-03 00:00:00'",
        "w.__time >= TIMESTAMPTZ '2024-01-03 01:00:00+01'",
    ],
)
def test_a_time_filter_reads_only_the_files_of_its_interval(three_days, where):
    day1, day3 = three_days
    sql = f"SELECT page, added FROM wiki AS w WHERE {where}"

    assert set(bound_files(sql)) == day3
    for path in day1:  # a query that opened them would fail now
        os.remove(path)
    assert query.run_query(sql=sql).rows == [["d", 512]]


def test_an_inclusive_upper_bound_keeps_the_segment_starting_at_it(three_days):
    day1, day3 = three_days
    sql = "SELECT count(*) FROM wiki WHERE __time <= TIMESTAMP '2024-01-03 00:00:00'"

    assert set(bound_files(sql)) == day1 | day3
    assert query.run_query(sql=sql).rows == [[5]]  # day 1's four rows and day 3's midnight
    exclusive = sql.replace("<=", "<")
    assert set(bound_files(exclusive)) == day1
    assert query.run_query(sql=exclusive).rows == [[4]]


def test_pruned_and_unpruned_queries_agree(three_days):
    for where in (
        "__time >= TIMESTAMP '2024-01-01 06:00:00' AND __time < TIMESTAMP '2024-01-01 13:00:00'",
        "__time < TIMESTAMP '2024-01-01 02:00:00'",
        "__time >= TIMESTAMP '2030-01-01 00:00:00'",  # no file at all: an empty table
    ):
        pruned = f"SELECT __time, page, added FROM wiki WHERE {where} ORDER BY 1"
        # `+ INTERVAL 0 SECONDS` hides the bound from pruning: every file is read.
        unpruned = pruned.replace("WHERE __time", "WHERE __time + INTERVAL 0 SECONDS")
        assert len(bound_files(pruned)) < len(bound_files(unpruned))
        assert query.run_query(sql=pruned).rows == query.run_query(sql=unpruned).rows
    empty = query.run_query(sql="SELECT * FROM wiki WHERE __time > TIMESTAMP '2030-01-01'")
    assert empty.rows == [] and "page" in empty.columns


@pytest.mark.parametrize(
    "sql",
    [
        # Bounds that do not bound every reference, or not by constants: every file.
        "SELECT count(*) FROM wiki WHERE __time >= TIMESTAMP '2024-01-03' OR page = 'a'",
        "SELECT count(*) FROM (SELECT * FROM wiki) AS s WHERE __time >= TIMESTAMP '2024-01-03'",
        "SELECT count(*) FROM wiki WHERE __time >= TIMESTAMP '2024-01-03' "
        "UNION ALL SELECT count(*) FROM wiki",
        "SELECT count(*) FROM wiki a JOIN wiki b USING (page) "
        "WHERE a.__time >= TIMESTAMP '2024-01-03'",
        "SELECT count(*) FROM wiki WHERE __time >= (SELECT max(__time) FROM wiki)",
        "SELECT count(*) FROM wiki WHERE NOT (__time < TIMESTAMP '2024-01-03')",
    ],
)
def test_what_a_filter_does_not_bound_reads_every_file(three_days, sql):
    day1, day3 = three_days

    assert set(bound_files(sql)) >= day1 | day3


def test_a_common_table_expression_named_like_the_dataSource_is_not_pruned(three_days):
    day1, day3 = three_days
    sql = (
        "WITH wiki AS (SELECT * FROM druid.wiki) "
        "SELECT count(*) FROM wiki WHERE __time >= TIMESTAMP '2024-01-03'"
    )

    assert set(bound_files(sql)) >= day1 | day3
    assert query.run_query(sql=sql).rows == [[1]]


def test_as_of_is_pruned_by_time_too(three_days, history):  # noqa: F811
    seq1, _, _ = history
    sql = "SELECT page, added FROM wiki WHERE __time >= TIMESTAMP '2024-01-02' ORDER BY 2"

    files = bound_files(sql, as_of=seq1)

    assert set(files) == day_files("2024-01-02/2024-01-03")  # day 2's v1 file, then visible
    assert query.run_query(sql=sql, as_of=seq1).rows == [[r[1], r[2]] for r in test_query.DAY2]


def test_files_with_different_columns_are_all_read(three_days, inline_spec):
    test_query.commit(
        inline_spec,
        "wiki",
        "2024-01-04/2024-01-05",
        {"2024-01-04/2024-01-05": [[("2024-01-04T00:00", "e", 1024, "bob")]]},
    )
    sql = "SELECT page, user FROM wiki WHERE __time < TIMESTAMP '2024-01-02' AND page = 'z'"

    # The table has `user` because one of its files has it, whatever the filter.
    assert len(bound_files(sql)) == len(visible_source(datasource="wiki").files)
    assert query.run_query(sql=sql).rows == [["z", None]]


def test_native_queries_are_pruned_by_their_intervals(three_days, api_client):
    day1, _ = three_days
    body = {
        "queryType": "timeseries",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": ["2024-01-03/2024-01-04"],
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    }
    assert api_client.post("/druid/v2", body, format="json").status_code == 200  # columns known
    for path in day1:
        os.remove(path)

    response = api_client.post("/druid/v2", body, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == [{"timestamp": "2024-01-03T00:00:00.000Z", "result": {"added": 512}}]


def test_a_dataSource_read_by_native_queries_gets_its_new_columns(
    three_days, api_client, inline_spec
):
    body = {
        "queryType": "groupBy",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": ["2024-01-01/2024-01-09"],
        "dimensions": ["page"],
        "aggregations": [{"type": "count", "name": "n"}],
    }
    assert api_client.post("/druid/v2", body, format="json").status_code == 200
    test_query.commit(
        inline_spec,
        "wiki",
        "2024-01-04/2024-01-05",
        {"2024-01-04/2024-01-05": [[("2024-01-04T00:00", "e", 1024, "bob")]]},
    )

    response = api_client.post("/druid/v2", {**body, "dimensions": ["user"]}, format="json")

    assert response.status_code == 200, response.content
    users = {row["event"]["user"]: row["event"]["n"] for row in response.json()}
    assert users == {None: 5, "bob": 1}  # days 1 and 3, and the new file


# --- connections kept between queries ----------------------------------------------------

ENDLESS = "SELECT count(*) FROM range(10000000000000)"  # ten trillion rows: never finishes


@pytest.fixture
def no_kept_connections():
    query.kept_connections_close()


def test_a_kept_connection_keeps_its_view_until_the_files_change(
    history,  # noqa: F811
    inline_spec,
    no_kept_connections,
):
    assert query.run_query(sql=SUM).rows == [[404]]
    (kept,) = query.kept_views()
    source = kept["wiki"]

    assert query.run_query(sql=SUM).rows == [[404]]  # the same view, not bound again
    assert kept["wiki"] is source
    test_query.commit(
        inline_spec,
        "wiki",
        "2024-01-03/2024-01-04",
        {"2024-01-03/2024-01-04": [test_query.DAY3_APPEND]},
    )
    assert query.run_query(sql=SUM).rows == [[404 + 512]]  # replaced: the new files
    assert kept["wiki"] is not source


def test_a_connection_whose_query_timed_out_or_failed_is_not_kept(
    history,  # noqa: F811
    no_kept_connections,
):
    with pytest.raises(query.QueryTimeout):
        query.run_query(sql=ENDLESS, timeout_ms=200)
    with pytest.raises(query.QueryError):
        query.run_query(sql="SELECT no_such_column FROM wiki")
    assert query.kept_views() == []  # both closed

    assert query.run_query(sql=SUM).rows == [[404]]
    assert len(query.kept_views()) == 1
