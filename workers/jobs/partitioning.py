"""Secondary partitioning of a time chunk: hashed and range (Spark + driver side).

Both follow Druid's native batch. Hashed: a row goes to bucket
`pmod(hash(key), numBuckets)` where the key is the partition dimensions' values,
or the truncated `__time` and every dimension when none are named; with
`targetRowsPerSegment` instead of `numShards`, each chunk's bucket count is
`ceil(cardinality(key) / target)` from an HLL sketch. Range: each chunk is cut at
boundaries taken from a sample of the partition dimensions' values (of distinct
rolled-up rows when rolling up), so that partitions hold about
`targetRowsPerSegment` rows; partition `p` holds keys in `[boundary[p-1],
boundary[p])`, compared as tuples with nulls first (as Spark compares structs).

A determining pass (Druid's partial dimension cardinality/distribution tasks)
reads the input once before phase 1 when hashed has no `numShards`, and always
for range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from metastore.druid.errors import SpecError
from metastore.druid.partitions import PartitionsSpec

# Samples kept per expected segment for range boundaries: ~7% error in sizes.
SAMPLES_PER_SEGMENT = 200
_SAMPLE_MODULUS = 1 << 20
# With only maxRowsPerSegment, aim below it so that estimation errors stay under it.
_MAX_ROWS_HEADROOM = 0.85
HASH_FUNCTION = "spark_murmur3_pmod"  # pmod(Spark's hash(key columns...), numBuckets)


@dataclass
class ChunkPlan:
    """How one time chunk is split."""

    rows: int = 0  # input rows (before rollup)
    estimated_rows: int = 0  # rows after rollup (HLL), or input rows without rollup
    num_buckets: int = 1  # hashed
    boundaries: list[tuple] = field(default_factory=list)  # range: n-1 cut points


@dataclass
class PartitionPlan:
    """The partitioning of every chunk, and the shard spec of each partition."""

    type: str  # "hashed" | "range"
    key_columns: list[str]  # the columns hashed / compared
    declared_dimensions: list[str]  # partitionDimensions as given (may be empty for hashed)
    num_shards: int | None = None  # hashed with a fixed numShards
    chunks: dict[int, ChunkPlan] = field(default_factory=dict)

    def buckets_of(self, chunk: int) -> int:
        if self.type == "hashed":
            return self.num_shards or self.chunks[chunk].num_buckets
        return len(self._boundaries(chunk)) + 1

    def _boundaries(self, chunk: int) -> list[tuple]:
        plan = self.chunks.get(chunk)  # none: a range with no key was not determined
        return plan.boundaries if plan else []

    def shard_specs(self, chunk: int, buckets: Sequence[int]) -> list[dict]:
        """Shard specs (without partitionNum/numCorePartitions, given at allocation)
        of the non-empty `buckets` of a chunk, in order."""
        buckets = sorted(buckets)
        if self.type == "hashed":
            return [
                {
                    "type": "hashed",
                    "bucketId": b,
                    "numBuckets": self.buckets_of(chunk),
                    "partitionDimensions": list(self.declared_dimensions),
                    "partitionFunction": HASH_FUNCTION,
                }
                for b in buckets
            ]
        bounds = self._boundaries(chunk)
        out = []
        for i, b in enumerate(buckets):
            # Empty ranges are folded into their neighbours: the ranges stay contiguous.
            start = None if i == 0 else _jsonable(bounds[b - 1])
            end = None if i == len(buckets) - 1 else _jsonable(bounds[buckets[i + 1] - 1])
            out.append(
                {
                    "type": "range",
                    "partitionDimensions": list(self.key_columns),
                    "start": start,
                    "end": end,
                }
            )
        return out

    def assign(self, spark, rows):
        """`rows` with an int `__partition` column: the bucket of each row in its chunk."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        key = [F.col(f"`{c}`") for c in self.key_columns]
        if not key:  # range on count metrics only: a null key for every row, one range
            return rows.withColumn("__partition", F.lit(0))
        if self.type == "hashed":
            if self.num_shards:
                return rows.withColumn("__partition", F.pmod(F.hash(*key), F.lit(self.num_shards)))
            table = spark.createDataFrame(
                [(c, p.num_buckets) for c, p in self.chunks.items()],
                "__chunk long, __buckets int",
            )
            joined = rows.join(F.broadcast(table), "__chunk", "left")
            bucket = F.pmod(F.hash(*key), F.coalesce(F.col("__buckets"), F.lit(1)))
            return joined.withColumn("__partition", bucket).drop("__buckets")
        key_type = T.StructType([rows.schema[c] for c in self.key_columns])
        table = spark.createDataFrame(
            [(c, [tuple(b) for b in p.boundaries]) for c, p in self.chunks.items()],
            T.StructType(
                [
                    T.StructField("__chunk", T.LongType()),
                    T.StructField("__bounds", T.ArrayType(key_type)),
                ]
            ),
        )
        joined = rows.join(F.broadcast(table), "__chunk", "left")
        row_key = F.struct(*key)
        position = F.size(
            F.filter(F.coalesce(F.col("__bounds"), F.array()), lambda b: b <= row_key)
        )
        return joined.withColumn("__partition", position.cast("int")).drop("__bounds")

    def report(self, chunk_names: dict[int, str]) -> dict:
        return {
            chunk_names.get(c, str(c)): {
                "inputRows": p.rows,
                "estimatedRows": p.estimated_rows,
                "buckets": self.buckets_of(c),
            }
            for c, p in list(self.chunks.items())[:1000]
        }


def _jsonable(key: tuple) -> list:
    """A range boundary for a shard spec (JSON): a __time value as ISO text."""
    from datetime import datetime

    from metastore.intervals import format_ts

    return [format_ts(v) if isinstance(v, datetime) else v for v in key]


def plan_needs_determining(partitions: PartitionsSpec) -> bool:
    if partitions.type == "range":
        return bool(partitions.partition_dimensions)
    return not partitions.num_shards


def key_columns(partitions: PartitionsSpec, dimensions: Sequence[str]) -> list[str]:
    if partitions.partition_dimensions or partitions.type == "range":
        # Range with none left (the spec named count metrics, null in every input
        # row, as Druid reads them): no key, one range per time chunk.
        return list(partitions.partition_dimensions)
    # Druid hashes the truncated timestamp and every dimension when none are named.
    return ["__time", *dimensions]


def determine_partitions(
    spark, rows, partitions: PartitionsSpec, dimensions: Sequence[str], *, rollup: bool
) -> PartitionPlan:
    """Run the determining pass over `rows` (if needed) and return the plan."""
    keys = key_columns(partitions, dimensions)
    missing = [k for k in keys if k not in rows.columns]
    if missing:  # a schemaless spec names a partition dimension the input lacks
        raise SpecError(
            "spec.tuningConfig.partitionsSpec.partitionDimensions",
            f"{', '.join(missing)} not among the input's dimensions ({', '.join(dimensions)})",
        )
    plan = PartitionPlan(
        type=partitions.type,
        key_columns=keys,
        declared_dimensions=list(partitions.partition_dimensions),
        num_shards=partitions.num_shards if partitions.type == "hashed" else None,
    )
    if not plan_needs_determining(partitions):
        return plan
    target = _target_rows(partitions)
    rows, aggs = _determining_aggregations(rows, partitions, keys, dimensions, target, rollup)
    for row in rows.groupBy("__chunk").agg(*aggs).collect():
        plan.chunks[int(row["__chunk"])] = _chunk_plan(row, partitions.type, target, rollup)
    return plan


def _target_rows(partitions: PartitionsSpec) -> int:
    """Rows per partition the determining pass aims at."""
    if partitions.type == "hashed":
        return partitions.target_rows_per_segment
    return partitions.target_rows_per_segment or int(
        partitions.max_rows_per_segment * _MAX_ROWS_HEADROOM
    )


def _determining_aggregations(rows, partitions, keys, dimensions, target: int, rollup: bool):
    """(rows, aggregations per chunk) of the determining pass: the row count, and a
    cardinality sketch of the key (hashed) or a sample of keys (range)."""
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("rows")]
    if partitions.type == "hashed":
        hashed_key = F.xxhash64(*[F.col(f"`{c}`") for c in keys])
        aggs.append(F.hll_sketch_estimate(F.hll_sketch_agg(hashed_key)).alias("estimate"))
        return rows, aggs
    fraction = min(1.0, SAMPLES_PER_SEGMENT / target)
    key_struct = F.struct(*[F.col(f"`{c}`") for c in keys])
    if rollup:
        # Sample distinct rolled-up rows: every copy of a row is in or out together.
        row_hash = F.xxhash64(*[F.col(f"`{c}`") for c in ["__time", *dimensions]])
        picked = F.pmod(row_hash, F.lit(_SAMPLE_MODULUS)) < F.lit(int(fraction * _SAMPLE_MODULUS))
        aggs.append(F.hll_sketch_estimate(F.hll_sketch_agg(row_hash)).alias("estimate"))
        aggs.append(
            F.collect_set(
                F.when(picked, F.struct(row_hash.alias("h"), key_struct.alias("k")))
            ).alias("sample")
        )
    else:
        rows = rows.withColumn("__sample_pick", F.rand(17) < F.lit(fraction))  # not in agg
        aggs.append(F.collect_list(F.when(F.col("__sample_pick"), key_struct)).alias("sample"))
    return rows, aggs


def _chunk_plan(row, partition_type: str, target: int, rollup: bool) -> ChunkPlan:
    """How one chunk is split, from its row of the determining pass."""
    chunk = ChunkPlan(rows=int(row["rows"]))
    if partition_type == "hashed":
        chunk.estimated_rows = int(row["estimate"])
        chunk.num_buckets = max(1, math.ceil(chunk.estimated_rows / target))
        return chunk
    if rollup:
        chunk.estimated_rows = int(row["estimate"])
        sample = [tuple(item["k"]) for item in row["sample"]]
    else:
        chunk.estimated_rows = chunk.rows
        sample = [tuple(item) for item in row["sample"]]
    count = max(1, math.ceil(chunk.estimated_rows / target))
    chunk.boundaries = range_boundaries(sample, count)
    return chunk


def _order(key: tuple) -> tuple:
    """Sort key of a partition key tuple, nulls first (Spark's struct ordering)."""
    return tuple((0,) if v is None else (1, v) for v in key)


def range_boundaries(sample: list[tuple], partitions: int) -> list[tuple]:
    """Cut points splitting `sample` into `partitions` parts of equal size
    (fewer when values repeat)."""
    if partitions <= 1 or not sample:
        return []
    ordered = sorted(sample, key=_order)
    cuts: list[tuple] = []
    for i in range(1, partitions):
        candidate = ordered[(i * len(ordered)) // partitions]
        if candidate == ordered[0] or (cuts and _order(candidate) <= _order(cuts[-1])):
            continue
        cuts.append(candidate)
    return cuts
