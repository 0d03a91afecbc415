"""What the float dimension and float metric tests (test_float_dimensions,
test_float_metrics) share: ingest a few JSON rows on real Spark by the runner,
read a dataSource's column types back, ask the Broker, compact it."""

from __future__ import annotations

import json

from metastore import query
from metastore.models import TaskStatus


def sql(text: str) -> list[list]:
    return query.run_query(sql=text).rows


def ingest(run_spec, inline_spec, datasource: str, rows: list[dict], **spec) -> None:
    """Ingest `rows` (JSON lines) into `datasource`, rolled up by DAY."""
    data = "\n".join(map(json.dumps, rows))
    task = run_spec(inline_spec(datasource, data=data, query_granularity="DAY", **spec))
    assert task.status == TaskStatus.SUCCESS, task.error


def compact(run_spec, datasource: str, **spec) -> None:
    """Compact all of `datasource` in 2024."""
    body = {
        "type": "compact",
        "dataSource": datasource,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2024/2025"}},
        **spec,
    }
    task = run_spec(body)
    assert task.status == TaskStatus.SUCCESS, task.error


def column_types(datasource: str, columns) -> list[list]:
    """[[column, DATA_TYPE]] of `columns`, by name, from INFORMATION_SCHEMA."""
    names = ", ".join(f"'{n}'" for n in columns)
    return sql(
        "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
        f"WHERE TABLE_NAME = '{datasource}' AND COLUMN_NAME IN ({names}) ORDER BY 1"
    )


def druid(api_client, body: dict):
    """A native query's answer through /druid/v2."""
    response = api_client.post("/druid/v2", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()
