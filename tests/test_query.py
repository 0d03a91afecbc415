"""SQL over the visible rows (metastore/query.py, console/query_api.py).

The metastore states are built through the services with real Parquet files in
deep storage: a day-long chunk partly overshadowed by a later replace of its
first six hours, a day replaced by a tombstone, and time travel with `as_of`.
The expected rows are written out here, from what each commit published.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.db import transaction

from metastore import query, services
from metastore.intervals import Interval
from metastore.models import Task, TaskStatus

pytestmark = pytest.mark.django_db


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def write_segment_file(datasource: str, rows: list[tuple]) -> str:
    """A segment file as the ingestion job writes it: `__time` (UTC micros), page, added,
    count; a row with a fourth value adds a `user` dimension to its file."""
    path = settings.STRATA_DEEP_STORAGE / datasource / uuid.uuid4().hex / "data.parquet"
    path.parent.mkdir(parents=True)
    columns = {
        "__time": pa.array([t(r[0]) for r in rows], type=pa.timestamp("us", tz="UTC")),
        "page": pa.array([r[1] for r in rows], type=pa.string()),
        "added": pa.array([r[2] for r in rows], type=pa.int64()),
        "count": pa.array([1] * len(rows), type=pa.int64()),
    }
    if any(len(r) > 3 for r in rows):
        columns["user"] = pa.array([r[3] for r in rows], type=pa.string())
    table = pa.table(columns)
    pq.write_table(table, path)
    return str(path)


def commit(inline_spec, datasource: str, lock: str, chunks: dict[str, list[list[tuple]]]) -> int:
    """One task locks `lock`, writes one file per partition of each chunk (an empty
    chunk gets a tombstone) and publishes them; returns the commit seq."""
    with transaction.atomic():
        task = services.task_submit(spec=inline_spec(datasource))
        assert services.task_claim(task_id=task.id, worker="pytest")
    task = Task.objects.get(id=task.id)
    services.lock_acquire(task=task, interval=Interval.parse(lock))
    new = []
    for chunk_text, partitions in chunks.items():
        chunk = Interval.parse(chunk_text)
        if not partitions:
            [alloc] = services.segments_allocate_many(
                task=task,
                requests=[services.AllocationRequest(chunk, 1, "tombstone")],
                append=False,
            )
            new.append(
                services.NewSegment(
                    interval=chunk,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=0,
                    tombstone=True,
                    shard_spec={"type": "tombstone"},
                )
            )
            continue
        alloc = services.segments_allocate(
            task=task, interval=chunk, count=len(partitions), append=False
        )
        for partition, rows in zip(alloc.partitions, partitions, strict=True):
            new.append(
                services.NewSegment(
                    interval=chunk,
                    version=alloc.version,
                    partition=partition,
                    core_partitions=alloc.core_partitions,
                    location=write_segment_file(datasource, rows),
                    num_rows=len(rows),
                    shard_spec={"type": "numbered", "partitionNum": partition},
                )
            )
    entry = services.segments_publish(task=task, segments=new)
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    return entry.seq


DAY1_P0 = [("2024-01-01T01:00", "a", 1), ("2024-01-01T05:00", "b", 2), ("2024-01-01T12:00", "a", 4)]
DAY1_P1 = [("2024-01-01T03:00", "c", 8), ("2024-01-01T20:00", "b", 16)]
DAY2 = [("2024-01-02T02:00", "a", 32), ("2024-01-02T10:00", "c", 64)]
HOURS_V2 = [("2024-01-01T01:30", "z", 128), ("2024-01-01T04:00", "a", 256)]
DAY3_APPEND = [("2024-01-03T00:00", "d", 512)]


@pytest.fixture
def history(inline_spec):
    """v1: day 1 in two partitions, day 2; v2 replaces 00:00-06:00 of day 1 (day 1's
    v1 files stay visible from 06:00 on); v3 replaces day 2 with a tombstone."""
    seq1 = commit(
        inline_spec,
        "wiki",
        "2024-01-01/2024-01-03",
        {"2024-01-01/2024-01-02": [DAY1_P0, DAY1_P1], "2024-01-02/2024-01-03": [DAY2]},
    )
    seq2 = commit(
        inline_spec,
        "wiki",
        "2024-01-01T00/2024-01-01T06",
        {"2024-01-01T00/2024-01-01T06": [HOURS_V2]},
    )
    seq3 = commit(inline_spec, "wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": []})
    return seq1, seq2, seq3


def rows_of(*groups) -> list[list]:
    """Expected `SELECT __time, page, added` rows, time-ordered."""
    out = [[f"{r[0]}:00.000Z", r[1], r[2]] for g in groups for r in g]
    return sorted(out)


ALL_ROWS = "SELECT __time, page, added FROM wiki ORDER BY __time"


def test_exactly_the_visible_rows_with_partial_overshadowing_and_a_tombstone(history):
    result = query.run_query(sql=ALL_ROWS)

    assert result.columns == ["__time", "page", "added"]
    # Day 1: v2's two rows, and v1's rows from 06:00 on (12:00 from p0, 20:00 from p1);
    # v1's 01:00, 03:00 and 05:00 rows are hidden. Day 2: the tombstone hides v1.
    assert result.rows == [
        ["2024-01-01T01:30:00.000Z", "z", 128],
        ["2024-01-01T04:00:00.000Z", "a", 256],
        ["2024-01-01T12:00:00.000Z", "a", 4],
        ["2024-01-01T20:00:00.000Z", "b", 16],
    ]
    assert query.run_query(sql="SELECT count(*), sum(added) FROM wiki").rows == [[4, 404]]


def test_as_of_each_commit(history):
    seq1, seq2, seq3 = history

    assert query.run_query(sql=ALL_ROWS, as_of=seq1).rows == rows_of(DAY1_P0, DAY1_P1, DAY2)
    assert query.run_query(sql=ALL_ROWS, as_of=seq2).rows == rows_of(
        HOURS_V2, [DAY1_P0[2]], [DAY1_P1[1]], DAY2
    )
    assert query.run_query(sql=ALL_ROWS, as_of=seq3).rows == query.run_query(sql=ALL_ROWS).rows
    assert query.run_query(sql=ALL_ROWS, as_of=seq1 - 1).rows == []


def test_an_append_and_a_mark_unused_change_what_is_seen(history, inline_spec):
    seq_append = commit(
        inline_spec, "wiki", "2024-01-03/2024-01-04", {"2024-01-03/2024-01-04": [DAY3_APPEND]}
    )
    assert query.run_query(sql="SELECT sum(added) FROM wiki").rows == [[404 + 512]]

    # Marking v2's segment unused uncovers v1's first six hours again.
    v2 = services.segments_mark_used(
        datasource="wiki", used=False, interval=Interval.parse("2024-01-01T00/2024-01-01T06")
    )
    assert len(v2.removed) == 1
    assert query.run_query(sql="SELECT sum(added) FROM wiki").rows == [[1 + 2 + 4 + 8 + 16 + 512]]
    assert query.run_query(sql="SELECT sum(added) FROM wiki", as_of=seq_append).rows == [
        [404 + 512]
    ]


def test_files_with_a_new_dimension_are_read_by_column_name(history, inline_spec):
    commit(
        inline_spec,
        "wiki",
        "2024-01-04/2024-01-05",
        {"2024-01-04/2024-01-05": [[("2024-01-04T00:00", "e", 1024, "bob")]]},
    )

    result = query.run_query(sql="SELECT page, added, user FROM wiki ORDER BY __time")

    assert result.columns == ["page", "added", "user"]
    assert result.rows == [
        ["z", 128, None],
        ["a", 256, None],
        ["a", 4, None],
        ["b", 16, None],
        ["e", 1024, "bob"],
    ]


def test_group_by_druid_time_functions_and_names(history):
    by_page = query.run_query(
        sql="SELECT page, sum(added) AS added FROM wiki GROUP BY page ORDER BY page"
    )
    assert by_page.columns == ["page", "added"]
    assert by_page.rows == [["a", 260], ["b", 16], ["z", 128]]

    by_day = query.run_query(
        sql="SELECT TIME_FLOOR(__time, 'P1D') AS day, COUNT(*) AS n FROM druid.wiki "
        "WHERE __time >= TIMESTAMP '2024-01-01 06:00:00' GROUP BY 1 ORDER BY 1"
    )
    assert by_day.rows == [["2024-01-01T00:00:00.000Z", 2]]
    hourly = query.run_query(
        sql='SELECT TIME_FLOOR(__time, \'PT6H\') h, SUM("count") FROM "WIKI" GROUP BY 1 ORDER BY 1'
    )
    assert hourly.rows == [
        ["2024-01-01T00:00:00.000Z", 2],
        ["2024-01-01T12:00:00.000Z", 1],
        ["2024-01-01T18:00:00.000Z", 1],
    ]
    millis = query.run_query(sql="SELECT TIMESTAMP_TO_MILLIS(MIN(__time)) FROM wiki")
    assert millis.rows == [[int(t("2024-01-01T01:30").timestamp() * 1000)]]


def test_a_dataSource_with_only_tombstones_is_an_empty_table(inline_spec):
    commit(inline_spec, "gone", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": [DAY1_P0]})
    commit(inline_spec, "gone", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": []})

    result = query.run_query(sql="SELECT __time, page, added FROM gone")

    assert result.columns == ["__time", "page", "added"] and result.rows == []


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("INSERT INTO wiki VALUES (1)", "INSERT"),
        ("CREATE TABLE x AS SELECT 1", "CREATE"),
        ("DROP VIEW wiki", "DROP"),
        ("DELETE FROM wiki", "DELETE"),
        ("UPDATE wiki SET added = 0", "UPDATE"),
        ("COPY (SELECT 1) TO '/tmp/x.csv'", "COPY"),
        ("ATTACH '/tmp/x.db'", "ATTACH"),
        ("SET threads = 1", "SET"),
        ("INSTALL httpfs", "LOAD"),
        ("SELECT 1; DROP VIEW wiki", "one query at a time"),
        ("", "give the SQL text"),
        ("SELEC 1", "cannot parse"),
        pytest.param(
            "SELECT 1 " + "UNION ALL SELECT 1 " * 6000, "characters of SQL; at most", id="long"
        ),
        # Nested 100,000 deep, subqueries crash DuckDB's parser: refused before it.
        pytest.param(
            "SELECT * FROM (" * 5000 + "SELECT 1" + ")" * 5000, "nested 5000 deep", id="deep"
        ),
    ],
)
def test_anything_but_a_query_is_refused(history, sql, says):
    with pytest.raises(query.QueryError) as err:
        query.run_query(sql=sql)
    assert says in str(err.value)


def test_parentheses_in_strings_names_and_comments_do_not_count_as_nesting():
    many = "(" * (query.MAX_SQL_NESTING + 1)
    result = query.run_query(sql=f"SELECT '{many}' AS \"{many}\" -- {many}")
    assert result.columns == [many] and result.rows == [[many]]


def test_a_query_cannot_read_other_files(history, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    for sql in (
        f"SELECT * FROM read_csv('{secret}')",
        "SELECT * FROM read_text('/etc/passwd')",
    ):
        with pytest.raises(query.QueryError) as err:
            query.run_query(sql=sql)
        assert "is not supported" in str(err.value)
    with pytest.raises(query.QueryError) as err:
        query.run_query(sql="SELECT * FROM nothing_here")
    assert "table nothing_here not found" in str(err.value)


# --- the HTTP endpoints ------------------------------------------------------------------


def test_api_query(api_client, history):
    seq1 = history[0]
    response = api_client.post("/api/v1/query", {"sql": ALL_ROWS}, format="json")
    assert response.status_code == 200
    assert response.json() == {
        "columns": ["__time", "page", "added"],
        "rows": [
            ["2024-01-01T01:30:00.000Z", "z", 128],
            ["2024-01-01T04:00:00.000Z", "a", 256],
            ["2024-01-01T12:00:00.000Z", "a", 4],
            ["2024-01-01T20:00:00.000Z", "b", 16],
        ],
    }
    old = api_client.post(
        "/api/v1/query", {"sql": "SELECT count(*) FROM wiki", "as_of": seq1}, format="json"
    )
    assert old.json() == {"columns": ["count_star()"], "rows": [[7]]}

    refused = api_client.post("/api/v1/query", {"sql": "DELETE FROM wiki"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["field"] == "sql" and "DELETE" in refused.json()["error"]
    bad = api_client.post("/api/v1/query", {"sql": ALL_ROWS, "as_of": "yesterday"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "as_of"
    missing = api_client.post("/api/v1/query", {}, format="json")
    assert missing.status_code == 400 and missing.json()["field"] == "sql"


def test_druid_sql_result_formats(api_client, history):
    sql = "SELECT page, SUM(added) AS added FROM wiki GROUP BY page ORDER BY page"

    default = api_client.post("/druid/v2/sql", {"query": sql}, format="json")
    assert default.status_code == 200
    assert default.json() == [
        {"page": "a", "added": 260},
        {"page": "b", "added": 16},
        {"page": "z", "added": 128},
    ]
    array = api_client.post(
        "/druid/v2/sql", {"query": sql, "resultFormat": "array", "header": True}, format="json"
    )
    assert array.json() == [["page", "added"], ["a", 260], ["b", 16], ["z", 128]]
    csv_text = api_client.post(
        "/druid/v2/sql", {"query": sql, "resultFormat": "csv"}, format="json"
    )
    assert csv_text.content.decode() == "a,260\nb,16\nz,128\n\n"
    lines = api_client.post(
        "/druid/v2/sql", {"query": sql, "resultFormat": "objectLines"}, format="json"
    )
    assert lines.content.decode().splitlines()[0] == '{"page": "a", "added": 260}'
    with_param = api_client.post(
        "/druid/v2/sql",
        {
            "query": "SELECT COUNT(*) AS n FROM wiki WHERE page = ?",
            "parameters": [{"type": "VARCHAR", "value": "a"}],
        },
        format="json",
    )
    assert with_param.json() == [{"n": 2}]

    refused = api_client.post("/druid/v2/sql", {"query": "DROP VIEW wiki"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"] == "druidException"
    assert "DROP" in refused.json()["errorMessage"]
    bad_format = api_client.post(
        "/druid/v2/sql", {"query": sql, "resultFormat": "xml"}, format="json"
    )
    assert bad_format.status_code == 400 and "resultFormat" in bad_format.json()["errorMessage"]


def test_query_endpoints_refuse_anonymous_requests(client):
    for path in ("/api/v1/query", "/druid/v2/sql"):
        response = client.post(path, {"sql": "SELECT 1"}, content_type="application/json")
        assert response.status_code in (401, 403)


def test_query_posts_are_marked_for_viewers():
    from console.query_api import DruidSqlView, QueryView

    assert QueryView.strata_role == DruidSqlView.strata_role == "viewer"


def _concurrent_task(inline_spec, datasource: str) -> Task:
    spec = inline_spec(datasource)
    spec["context"] = {"useConcurrentLocks": True}
    with transaction.atomic():
        task = services.task_submit(spec=spec)
        assert services.task_claim(task_id=task.id, worker="pytest")
    return Task.objects.get(id=task.id)


def carried_copy_alone_visible(inline_spec, datasource: str) -> None:
    """An append of a whole DAY commits while an HOUR replace of 00:00 holds its
    REPLACE lock: the replace's publish copies it onto the hour's chunk (same file,
    the hour's interval). A later replace of 01:00-24:00 then hides the DAY segment
    everywhere else, so its file stays visible only through the copy's hour."""
    from metastore import locking

    day = Interval.parse("2024-01-01/2024-01-02")
    hour0 = Interval.parse("2024-01-01T00/2024-01-01T01")
    appender = _concurrent_task(inline_spec, datasource)
    services.locks_acquire(task=appender, intervals=[day], lock_type=locking.APPEND)
    alloc = services.segments_allocate(task=appender, interval=day, count=1, append=True)
    replacer = _concurrent_task(inline_spec, datasource)
    services.locks_acquire(task=replacer, intervals=[day], lock_type=locking.REPLACE)
    rows = [
        ("2024-01-01T00:10", "j0", 1),
        ("2024-01-01T05:00", "j5", 2),
        ("2024-01-01T12:00", "j12", 4),
    ]
    services.segments_publish(
        task=appender,
        segments=[
            services.NewSegment(
                interval=day,
                version=alloc.version,
                partition=alloc.partitions[0],
                core_partitions=alloc.core_partitions,
                location=write_segment_file(datasource, rows),
                num_rows=len(rows),
            )
        ],
    )
    services.task_finish(task_id=appender.id, status=TaskStatus.SUCCESS)
    r = services.segments_allocate(task=replacer, interval=hour0, count=1, append=False)
    replaced = [("2024-01-01T00:30", "r0", 8)]
    services.segments_publish(
        task=replacer,
        segments=[
            services.NewSegment(
                interval=hour0,
                version=r.version,
                partition=0,
                core_partitions=1,
                location=write_segment_file(datasource, replaced),
                num_rows=1,
            )
        ],
    )
    services.task_finish(task_id=replacer.id, status=TaskStatus.SUCCESS)
    later = [("2024-01-01T05:30", "late", 16)]
    hours = {f"2024-01-01T{h:02d}/2024-01-01T{h + 1:02d}": [] for h in range(1, 23)}
    hours["2024-01-01T05/2024-01-01T06"] = [later]
    hours["2024-01-01T23/2024-01-02"] = []
    commit(inline_spec, datasource, "2024-01-01T01/2024-01-02", hours)


def test_an_upgraded_copy_shows_only_its_own_interval_of_the_file_it_shares(inline_spec):
    carried_copy_alone_visible(inline_spec, "copies")

    result = query.run_query(sql="SELECT page, added FROM copies ORDER BY added")

    # j5 and j12 are hidden by the later replace; only the copy's hour of j's file shows.
    assert result.rows == [["j0", 1], ["r0", 8], ["late", 16]]
