"""Schemas of the source, and XRANGE pages turned into Arrow record batches.

Why Arrow: a Python data source may yield ``pyarrow.RecordBatch`` objects, which Spark takes as
they are; yielding tuples instead costs a per-value Python conversion in PySpark's worker, about
3x the read itself. A page of raw XRANGE replies (``[[id, [f1, v1, ...]], ...]`` as bytes) becomes
columns with a handful of list comprehensions and vectorised Arrow kernels.

The default schema is ``stream string, id string, ms long, seq long, fields map<string,string>``.
A user schema picks columns by name instead: ``stream``, ``id``, ``ms`` (long, or timestamp for the
ID's time), ``seq`` and ``fields`` (map<string,string>) are filled from the entry; any other column
takes the entry's field of that name, cast from its string. A value that does not parse as the
column's type becomes null (as Spark's ``try_cast``); a missing field is null. Field names and
values that are not UTF-8 fail the read (Spark strings are UTF-8). An entry that repeats a field
name gives a map with that key twice.
"""

from __future__ import annotations

import decimal
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

DEFAULT_SCHEMA = StructType(
    [
        StructField("stream", StringType()),
        StructField("id", StringType()),
        StructField("ms", LongType()),
        StructField("seq", LongType()),
        StructField("fields", MapType(StringType(), StringType())),
    ]
)

#: Columns filled from the entry itself, and the Spark types each may have.
RESERVED: dict[str, tuple[type[DataType], ...]] = {
    "stream": (StringType,),
    "id": (StringType,),
    "ms": (LongType, TimestampType),
    "seq": (LongType,),
    "fields": (MapType,),
}
#: Types a column mapped from a field may have (cast from the field's string).
FIELD_TYPES: tuple[type[DataType], ...] = (
    StringType,
    BinaryType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    DateType,
    TimestampType,
    TimestampNTZType,
)


class SchemaError(ValueError):
    """A user schema the source cannot fill."""


def check_schema(schema: StructType) -> None:
    """Raise SchemaError for a column of an unsupported type (before the query starts)."""
    for field in schema.fields:
        allowed = RESERVED.get(field.name, FIELD_TYPES)
        if not isinstance(field.dataType, allowed):
            names = ", ".join(kind.typeName() for kind in allowed)
            raise SchemaError(
                f"column {field.name!r} has type {field.dataType.simpleString()}; "
                f"a headwater source column of that name may be: {names}"
            )
        if field.name == "fields" and field.dataType != MapType(StringType(), StringType()):
            raise SchemaError("column 'fields' must be map<string,string>")


# -- pages to batches ----------------------------------------------------------------------------


def _strings(values: Sequence[bytes | None]) -> pa.Array:
    """Bytes to an Arrow string array (UTF-8 validated by Arrow, in C)."""
    return pa.array(values, pa.binary()).cast(pa.string())


def _map_column(flats: Sequence[Sequence[bytes]], map_type: pa.DataType) -> pa.Array:
    offsets = [0, *itertools.accumulate(len(flat) >> 1 for flat in flats)]
    pairs = list(itertools.chain.from_iterable(flats))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), _strings(pairs[0::2]), _strings(pairs[1::2]), type=map_type
    )


class PageShaper:
    """Builds record batches for one stream key from raw XRANGE pages, for one schema.

    Built inside ``read()`` on the executor: Arrow objects are not pickled with the reader."""

    def __init__(self, schema: StructType, stream: str) -> None:
        self.schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.stream = stream
        self.by_field = {
            field.name: field.name.encode() for field in schema.fields if field.name not in RESERVED
        }

    def batch(self, entries: Sequence[Any]) -> pa.RecordBatch:
        ids = _strings([entry[0] for entry in entries])
        flats = [entry[1] for entry in entries]
        parts = pc.split_pattern(ids, "-")
        computed: dict[str, Callable[[], pa.Array]] = {
            "stream": lambda: pa.repeat(pa.scalar(self.stream, pa.string()), len(entries)),
            "id": lambda: ids,
            "ms": lambda: pc.cast(pc.list_element(parts, 0), pa.int64()),
            "seq": lambda: pc.cast(pc.list_element(parts, 1), pa.int64()),
        }
        dicts = [dict(zip(f[0::2], f[1::2], strict=False)) for f in flats] if self.by_field else []
        columns = []
        for target in self.arrow_schema:
            if target.name == "fields":
                columns.append(_map_column(flats, target.type))
            elif target.name in computed:
                columns.append(_reserved(computed[target.name](), target.type))
            else:
                raw = [d.get(self.by_field[target.name]) for d in dicts]
                columns.append(cast_strings(raw, target.type))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)


def _reserved(column: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(target):  # ms as the ID's time
        return pc.multiply(column, 1000).cast(pa.timestamp("us")).cast(target)
    return column


# -- string fields to typed columns --------------------------------------------------------


def cast_strings(raw: Sequence[bytes | None], target: pa.DataType) -> pa.Array:
    """Field values (bytes or None) as an Arrow array of ``target``; unparsable values -> null."""
    if pa.types.is_binary(target):
        return pa.array(raw, pa.binary())
    strings = _strings(raw)
    if pa.types.is_string(target):
        return strings
    try:
        return _cast(strings, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, decimal.InvalidOperation):
        return pa.array([_cast_one(value, target) for value in strings.to_pylist()], target)


def _cast(strings: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_decimal(target):
        return pa.array([_decimal(value, target) for value in strings.to_pylist()], target)
    if pa.types.is_timestamp(target) and target.tz is not None:
        try:
            return pc.cast(strings, target)
        except pa.ArrowInvalid:  # no zone offset in the text: read it as UTC
            return pc.cast(pc.cast(strings, pa.timestamp(target.unit)), target)
    return pc.cast(pc.utf8_trim_whitespace(strings), target)


def _cast_one(value: str | None, target: pa.DataType) -> Any:
    if value is None:
        return None
    try:
        return _cast(pa.array([value], pa.string()), target)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, decimal.InvalidOperation):
        return None


def _decimal(value: str | None, target: pa.DataType) -> decimal.Decimal | None:
    if value is None:
        return None
    quantum = decimal.Decimal(1).scaleb(-target.scale)
    return decimal.Decimal(value.strip()).quantize(quantum, rounding=decimal.ROUND_HALF_UP)
