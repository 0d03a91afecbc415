"""tuningConfig.partitionsSpec: dynamic, hashed, range and single_dim, Druid's
legacy tuningConfig fields folded in, and Druid's rules between partitioning
and perfect rollup."""

from __future__ import annotations

from dataclasses import dataclass, replace

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, int_at, none_as, object_at

PARTITION_TYPES = ("dynamic", "hashed", "range", "single_dim")
HASH_PARTITION_FUNCTION = "murmur3_32_abs"  # Druid's only name; Strata hashes with Spark's murmur3
DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000
DEFAULT_MAX_TOTAL_ROWS = 20_000_000
DYNAMIC_PARTITIONS_FIELDS = {"type", "maxRowsPerSegment", "maxTotalRows"}
HASHED_PARTITIONS_FIELDS = {
    "type",
    "numShards",
    "targetRowsPerSegment",
    "maxRowsPerSegment",
    "partitionDimensions",
    "partitionFunction",
}
SINGLE_DIM_PARTITIONS_FIELDS = {
    "type",
    "targetRowsPerSegment",
    "maxRowsPerSegment",
    "partitionDimension",
    "assumeGrouped",
}
RANGE_PARTITIONS_FIELDS = {
    "type",
    "targetRowsPerSegment",
    "maxRowsPerSegment",
    "partitionDimensions",
    "assumeGrouped",
    "maxTotalRows",
}
LEGACY_TUNING = (
    "maxRowsPerSegment",
    "maxTotalRows",
    "targetPartitionSize",
    "numShards",
    "partitionDimensions",
)
TUNING_PATH = "spec.tuningConfig"
PARTITIONS_PATH = "spec.tuningConfig.partitionsSpec"


@dataclass(frozen=True)
class PartitionsSpec:
    type: str = "dynamic"
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT
    max_total_rows: int = DEFAULT_MAX_TOTAL_ROWS
    num_shards: int | None = None
    target_rows_per_segment: int | None = None
    partition_dimensions: tuple[str, ...] = ()


def _fold_legacy(kind: str, ps: dict, legacy: dict) -> set[str]:
    """Copy legacy fields into the partitionsSpec `ps` where it leaves a gap; the
    legacy keys used."""
    rows = legacy.get("maxRowsPerSegment", legacy.get("targetPartitionSize"))
    rows_key = "maxRowsPerSegment" if "maxRowsPerSegment" in legacy else "targetPartitionSize"
    used = set()

    def fill(key: str, legacy_key: str, value, *absent: str) -> None:
        if value is not None and not any(ps.get(k) is not None for k in (key, *absent)):
            ps[key] = value
            used.add(legacy_key)

    if kind == "dynamic":
        fill("maxRowsPerSegment", rows_key, rows)
        fill("maxTotalRows", "maxTotalRows", legacy.get("maxTotalRows"))
    elif kind == "hashed":
        fill("numShards", "numShards", legacy.get("numShards"), "targetRowsPerSegment")
        if "partitionDimensions" in legacy and not ps.get("partitionDimensions"):
            ps["partitionDimensions"] = legacy["partitionDimensions"]
            used.add("partitionDimensions")
        fill("targetRowsPerSegment", rows_key, rows, "numShards", "maxRowsPerSegment")
    else:
        fill("maxRowsPerSegment", rows_key, rows, "targetRowsPerSegment")
    return used


def _legacy_partitions(tuning: dict, ignored: list[str]) -> dict:
    """Druid's pre-partitionsSpec tuningConfig fields, folded into a partitionsSpec.

    maxRowsPerSegment / maxTotalRows are the dynamic spec's; targetPartitionSize
    is maxRowsPerSegment (or hashed targetRowsPerSegment with perfect rollup);
    numShards / partitionDimensions make a hashed spec. With a partitionsSpec
    given too, its own fields win and a legacy field only fills a gap.
    """
    path = TUNING_PATH
    legacy = {k: tuning[k] for k in LEGACY_TUNING if tuning.get(k) is not None}
    ps = dict(object_at(tuning.get("partitionsSpec"), f"{path}.partitionsSpec", required=False))
    if not legacy:
        return ps
    for key in legacy:
        if key != "partitionDimensions":
            int_at(tuning, key, path, None, minimum=1)
    if "maxRowsPerSegment" in legacy and "targetPartitionSize" in legacy:
        raise SpecError(
            f"{path}.targetPartitionSize",
            "give maxRowsPerSegment (its newer name) or targetPartitionSize, not both",
        )
    guaranteed = bool_at(tuning, "forceGuaranteedRollup", path, False)
    if not ps:
        # As Druid's IndexTuningConfig: the legacy fields make a hashed spec with
        # perfect rollup, a dynamic one (numShards and partitionDimensions unused) without.
        ps = {"type": "hashed" if guaranteed else "dynamic"}
    kind = ps.get("type", "dynamic")
    used = _fold_legacy(kind, ps, legacy)
    for key in legacy:
        if key not in used:
            ignored.append(
                f"{path}.{key}: superseded by partitionsSpec ({kind}), which decides segment sizes"
                if tuning.get("partitionsSpec") or kind != "dynamic"
                else f"{path}.{key}: only used for hashed partitioning, with forceGuaranteedRollup"
            )
    return ps


def _dimension_list(ps: dict, key: str, kind: str) -> tuple[str, ...]:
    path = PARTITIONS_PATH
    value = none_as(ps.get(key), [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(f"{path}.{key}", "must be a list of dimension names")
    for i, name in enumerate(value):
        if name in value[:i]:
            raise SpecError(f"{path}.{key}[{i}]", f"{name!r} is listed twice")
        if name == "__time" and kind != "range":
            raise SpecError(f"{path}.{key}[{i}]", "__time cannot be a hashed partition dimension")
    return tuple(value)


def _dynamic(ps: dict) -> PartitionsSpec:
    path = PARTITIONS_PATH
    allow(ps, path, DYNAMIC_PARTITIONS_FIELDS)
    # maxTotalRows is honoured: no segment holds more rows than it (Druid pushes
    # every segment it holds once maxTotalRows rows are buffered).
    return PartitionsSpec(
        type="dynamic",
        max_rows_per_segment=int_at(
            ps, "maxRowsPerSegment", path, DEFAULT_MAX_ROWS_PER_SEGMENT, minimum=1
        ),
        max_total_rows=int_at(ps, "maxTotalRows", path, DEFAULT_MAX_TOTAL_ROWS, minimum=1),
    )


def _hashed(ps: dict) -> PartitionsSpec:
    path = PARTITIONS_PATH
    allow(ps, path, HASHED_PARTITIONS_FIELDS)
    function = ps.get("partitionFunction", HASH_PARTITION_FUNCTION)
    if function != HASH_PARTITION_FUNCTION:
        raise SpecError(
            f"{path}.partitionFunction",
            f"unknown partition function {function!r}; accepted: {HASH_PARTITION_FUNCTION}",
        )
    num_shards = int_at(ps, "numShards", path, None, minimum=1)
    target = int_at(ps, "targetRowsPerSegment", path, None, minimum=1)
    max_rows = int_at(ps, "maxRowsPerSegment", path, None, minimum=1)
    if target and max_rows:
        raise SpecError(
            f"{path}.maxRowsPerSegment",
            "give targetRowsPerSegment (maxRowsPerSegment is its old name), not both",
        )
    target = target or max_rows
    if num_shards and target:
        raise SpecError(f"{path}.numShards", "give numShards or targetRowsPerSegment, not both")
    return PartitionsSpec(
        type="hashed",
        num_shards=num_shards,
        target_rows_per_segment=None if num_shards else (target or DEFAULT_MAX_ROWS_PER_SEGMENT),
        partition_dimensions=_dimension_list(ps, "partitionDimensions", "hashed"),
    )


def _range_dimensions(ps: dict, kind: str, ignored: list[str]) -> tuple[str, ...]:
    path = PARTITIONS_PATH
    if kind == "single_dim":
        allow(ps, path, SINGLE_DIM_PARTITIONS_FIELDS)
        single = ps.get("partitionDimension")
        if not isinstance(single, str) or not single:
            raise SpecError(f"{path}.partitionDimension", "is required for single_dim")
        if single == "__time":
            raise SpecError(f"{path}.partitionDimension", "__time cannot be a partition dimension")
        return (single,)
    allow(ps, path, RANGE_PARTITIONS_FIELDS)
    if ps.get("maxTotalRows") is not None:
        ignored.append(
            f"{path}.maxTotalRows: a dynamic partitioning field; range partitions are sized "
            "by targetRowsPerSegment / maxRowsPerSegment (Druid ignores it here too)"
        )
    dims = _dimension_list(ps, "partitionDimensions", kind)
    if not dims:
        raise SpecError(f"{path}.partitionDimensions", "is required for range partitioning")
    return dims


def _range(ps: dict, kind: str, ignored: list[str]) -> PartitionsSpec:
    """range and single_dim (a range on one dimension)."""
    path = PARTITIONS_PATH
    partition_dims = _range_dimensions(ps, kind, ignored)
    if ps.get("assumeGrouped"):
        raise SpecError(f"{path}.assumeGrouped", "is only for Hadoop ingestion; leave it false")
    target = int_at(ps, "targetRowsPerSegment", path, None, minimum=1)
    max_rows = int_at(ps, "maxRowsPerSegment", path, None, minimum=1)
    if target and max_rows:
        raise SpecError(
            f"{path}.targetRowsPerSegment",
            "give targetRowsPerSegment or maxRowsPerSegment, not both",
        )
    return PartitionsSpec(
        type="range",
        # With only maxRowsPerSegment, partitions are sized to stay under it.
        target_rows_per_segment=target if target or max_rows else DEFAULT_MAX_ROWS_PER_SEGMENT,
        max_rows_per_segment=max_rows or DEFAULT_MAX_ROWS_PER_SEGMENT,
        partition_dimensions=partition_dims,
    )


def partitions_spec(tuning: dict, ignored: list[str] | None = None) -> PartitionsSpec:
    """tuningConfig's partitionsSpec (with the legacy fields folded in)."""
    ignored = [] if ignored is None else ignored
    ps = _legacy_partitions(tuning, ignored)
    if not ps and bool_at(tuning, "forceGuaranteedRollup", TUNING_PATH, False):
        ps = {"type": "hashed"}  # Druid's default partitionsSpec for perfect rollup
    kind = ps.get("type", "dynamic")
    if kind not in PARTITION_TYPES:
        raise SpecError(
            f"{PARTITIONS_PATH}.type",
            f"unknown partitionsSpec type {kind!r}; accepted: {', '.join(PARTITION_TYPES)}",
        )
    if kind == "dynamic":
        return _dynamic(ps)
    if kind == "hashed":
        return _hashed(ps)
    return _range(ps, kind, ignored)


def check_rollup_mode(tuning: dict, partitions: PartitionsSpec, force_rollup: bool) -> None:
    """Druid's rule (native-batch.md, partitionsSpec): hashed, range and single_dim
    are for perfect rollup and need forceGuaranteedRollup; dynamic is for best-effort
    rollup and cannot have it."""
    path = TUNING_PATH
    if partitions.type != "dynamic" and not force_rollup:
        given = (tuning.get("partitionsSpec") or {}).get("type", partitions.type)
        raise SpecError(
            f"{path}.forceGuaranteedRollup",
            f"must be true with {given} partitioning, as in Druid: hashed, range and "
            "single_dim are for perfect rollup; use dynamic partitioning for best-effort rollup",
        )
    if force_rollup and partitions.type == "dynamic":
        raise SpecError(
            f"{path}.partitionsSpec.type",
            "dynamic partitioning cannot be used for perfect rollup (forceGuaranteedRollup): "
            "use hashed, range or single_dim, or leave forceGuaranteedRollup false",
        )


def _kept_dimension(name: str, where: str, names: dict, ignored: list[str]) -> bool:
    """Whether partition dimension `name` splits rows; refuse one that cannot."""
    if name == "__time":
        return True
    if name in names["counts"]:
        # Druid reads a partition dimension from the input row: a count
        # metric's name is no input field, null for every row: it splits nothing.
        ignored.append(
            f"{where}: {name!r} is a count metric, not an input field; it splits nothing "
            "(Druid reads it as null for every row)"
        )
        return False
    known = names["dimensions"]
    if name in names["metrics"]:
        raise SpecError(
            where,
            f"{name!r} is a metric, not a dimension; partition on dimensions "
            f"({', '.join(sorted(known)) or 'those of the input'})",
        )
    if name in names["exclusions"]:
        raise SpecError(where, f"{name!r} is excluded (dimensionExclusions)")
    if known and name not in known:
        raise SpecError(where, f"{name!r} is not a dimension of this spec")
    return True


def check_partition_dimensions(
    partitions: PartitionsSpec, tuning: dict, names: dict, ignored: list[str]
) -> PartitionsSpec:
    """An ingestion spec's partition dimensions against its dimensions and metrics
    (`names`: sets "dimensions", "metrics", "counts" (count metrics), "exclusions").
    Count metrics are dropped: every row's key is null there, so each time chunk
    is one range, as in Druid (the worker reads an empty key so)."""
    if partitions.type == "dynamic":
        return partitions
    single = "partitionDimension" in (tuning.get("partitionsSpec") or {})
    kept = []
    for i, name in enumerate(partitions.partition_dimensions):
        where = (
            f"{PARTITIONS_PATH}.partitionDimension"
            if single
            else (f"{PARTITIONS_PATH}.partitionDimensions[{i}]")
        )
        if _kept_dimension(name, where, names, ignored):
            kept.append(name)
    if tuple(kept) == partitions.partition_dimensions:
        return partitions
    return replace(partitions, partition_dimensions=tuple(kept))
