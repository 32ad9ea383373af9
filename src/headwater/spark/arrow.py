"""Schemas of the source, and XRANGE pages turned into Arrow record batches.

Why Arrow: a Python data source may yield ``pyarrow.RecordBatch`` objects, which Spark takes as
they are; yielding tuples instead costs a per-value Python conversion in PySpark's worker, about
3x the read itself. An XRANGE page arrives already split into binary arrays (``pages.py``); its
columns are made from them with vectorised Arrow kernels, no Python loop over the entries.

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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
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

from headwater.spark.pages import Page

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


def _strings(values: pa.Array | Sequence[bytes | None]) -> pa.Array:
    """Binary to an Arrow string array (UTF-8 validated by Arrow, in C)."""
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.binary())
    return values.cast(pa.string())


class PageShaper:
    """Builds record batches for one stream key from XRANGE pages, for one schema.

    Built inside ``read()`` on the executor: Arrow objects are not pickled with the reader."""

    def __init__(self, schema: StructType, stream: str) -> None:
        self.schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.stream = stream
        self.by_field = {
            field.name: field.name.encode() for field in schema.fields if field.name not in RESERVED
        }

    def batch(self, page: Page) -> pa.RecordBatch:
        ids = _strings(page.ids)
        parts = pc.split_pattern(ids, "-")
        computed: dict[str, Callable[[], pa.Array]] = {
            "stream": lambda: pa.repeat(pa.scalar(self.stream, pa.string()), len(page)),
            "id": lambda: ids,
            "ms": lambda: pc.cast(pc.list_element(parts, 0), pa.int64()),
            "seq": lambda: pc.cast(pc.list_element(parts, 1), pa.int64()),
        }
        columns = []
        for target in self.arrow_schema:
            if target.name == "fields":
                keys, items = _strings(page.fields), _strings(page.values)
                columns.append(
                    pa.MapArray.from_arrays(page.pair_offsets, keys, items, type=target.type)
                )
            elif target.name in computed:
                columns.append(_reserved(computed[target.name](), target.type))
            else:
                raw = field_values(page, self.by_field[target.name])
                columns.append(cast_strings(raw, target.type))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)


def field_values(page: Page, name: bytes) -> pa.Array:
    """Each entry's value of field ``name`` (binary; null where it has none, the last one where
    it repeats the name), picked with vectorised kernels rather than a dict an entry."""
    matches = pc.equal(page.fields, pa.scalar(name, pa.binary())).to_numpy(zero_copy_only=False)
    found = np.flatnonzero(matches)
    counts = np.diff(page.pair_offsets.to_numpy())
    owners = np.repeat(np.arange(len(page)), counts)[found]
    last = np.append(owners[1:] != owners[:-1], True) if len(owners) else owners.astype(bool)
    pick = np.full(len(page), -1, np.int64)
    pick[owners[last]] = found[last]
    return page.values.take(pa.array(pick, mask=pick < 0))


def _reserved(column: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(target):  # ms as the ID's time
        return pc.multiply(column, 1000).cast(pa.timestamp("us")).cast(target)
    return column


# -- string fields to typed columns --------------------------------------------------------


def cast_strings(raw: pa.Array | Sequence[bytes | None], target: pa.DataType) -> pa.Array:
    """Field values (binary, or bytes or None) as an Arrow array of ``target``; unparsable
    values -> null."""
    if pa.types.is_binary(target):
        return raw if isinstance(raw, pa.Array) else pa.array(raw, pa.binary())
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
