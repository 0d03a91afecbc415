"""One SparkSession per worker process, created on first use and reused.

Never created in `worker_process_init` (that hook must not block); the first
task a worker process runs pays the JVM start-up.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

# Spark's default log4j2 configuration at WARN (a driver started with
# -Dlog4j2.level instead falls back to log4j's bare status layout and Spark's
# own defaults are never loaded).
LOG4J_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"

_lock = threading.Lock()
_session = None
# Called with the session `stop_spark` just stopped: what was derived from it goes too.
_stop_hooks: list = []


def on_stop(hook) -> None:
    """Have `hook(session)` called whenever `stop_spark` stops the process's session
    (on a cluster, after each task's application)."""
    if hook not in _stop_hooks:
        _stop_hooks.append(hook)


def get_spark(
    *,
    master: str | None = None,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    java_options: str = "",
    scheduler_mode: str = "FAIR",
    app_name: str | None = None,
):
    """The process's SparkSession (settings from `console.settings` when Django is set up).

    `java_options` are added to the driver JVM's options (a slot process's
    collector and its exit on OutOfMemoryError, `workers.slots`). A slot
    process runs one task at a time: FIFO, no scheduler pools to configure.
    `app_name` is the application's name (on a cluster, the master lists it)."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        from pyspark.sql import SparkSession

        if master is None or shuffle_partitions is None or driver_memory is None:
            try:
                from django.conf import settings

                master = master or settings.SPARK_MASTER
                shuffle_partitions = shuffle_partitions or settings.SPARK_SHUFFLE_PARTITIONS
                driver_memory = driver_memory or settings.SPARK_DRIVER_MEMORY
            except Exception:  # used outside Django (benchmarks): sane local defaults
                master = master or os.environ.get("SPARK_MASTER", "local[2]")
                shuffle_partitions = shuffle_partitions or 4
                driver_memory = driver_memory or "2g"
        builder = (
            SparkSession.builder.master(master)
            .appName(app_name or f"strata-worker-{os.getpid()}")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.caseSensitive", "true")  # as Druid's column names
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            .config("spark.default.parallelism", str(shuffle_partitions))
            .config("spark.driver.memory", driver_memory)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
            .config("spark.sql.parquet.compression.codec", "snappy")
            .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
            .config("spark.hadoop.parquet.enable.summary-metadata", "false")
            .config("spark.sql.sources.partitionOverwriteMode", "static")
            .config("spark.sql.adaptive.enabled", "true")
            # Task slots that are threads sharing this session each have their
            # own FAIR scheduler pool, so one task's big job does not starve the others.
            .config("spark.scheduler.mode", scheduler_mode)
            .config("spark.driver.extraJavaOptions", _java_options(java_options))
        )
        _session = builder.getOrCreate()
        _session.sparkContext.setLogLevel("WARN")
        return _session


def _java_options(extra: str) -> str:
    return f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} {extra}".strip()


def stop_spark() -> None:
    global _session
    with _lock:
        stopped, _session = _session, None
        if stopped is None:
            return
        try:
            stopped.stop()
        finally:
            for hook in _stop_hooks:
                hook(stopped)


def start_gateway(*, master: str, driver_memory: str, java_options: str = "") -> None:
    """Start this process's driver JVM without a SparkContext (`get_spark` then
    creates its session on it): a slot process on a cluster starts an
    application per task, named by it, on the JVM it keeps warm."""
    from pyspark import SparkConf, SparkContext

    conf = SparkConf(loadDefaults=False)
    conf.set("spark.master", master)
    conf.set("spark.driver.memory", driver_memory)
    conf.set("spark.driver.extraJavaOptions", _java_options(java_options))
    SparkContext._ensure_initialized(conf=conf)


def driver_process():
    """The `Popen` of this process's driver JVM (None before it started); it
    outlives a stopped session."""
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)
