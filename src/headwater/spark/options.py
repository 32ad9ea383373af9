"""Options of the ``headwater`` data source: one table per role, parsed before any task runs.

Spark hands every option over as a string in a case-insensitive dict. Parsing happens on the
driver when the reader or writer is created, so a typo or a bad number fails the query before
it starts, with the option's name in the message. Unknown options are errors (a misspelt
``maxRecordsPerBatch`` silently ignored would be worse than a failed start).

| role   | option               | value                                                  |
|--------|----------------------|--------------------------------------------------------|
| both   | url                  | ``redis://[user:pass@]host:port/db`` or ``rediss://``  |
| both   | connectTimeout       | seconds (default 5)                                    |
| read   | streams (or path)    | comma-separated stream keys                            |
| read   | streamsPattern       | also every stream whose key matches this glob (SCAN    |
|        |                      | MATCH ... TYPE stream), found again at each micro-batch |
| read   | startingOffsets      | earliest (default), latest, or JSON {key: id} where id |
|        |                      | is the last one already seen (exclusive, as XREAD)     |
| read   | startingTimestamp    | ms since the epoch; entries at or after it             |
| read   | endingOffsets        | batch only: latest (default) or JSON {key: id}, the    |
|        |                      | last ID to read (inclusive, as XRANGE)                 |
| stream | maxRecordsPerBatch   | at most this many entries per micro-batch (all keys)   |
| stream | maxMillisPerBatch    | at most this much ID time per key per micro-batch      |
| read   | minPartitions        | split each key's range into time slices (default 1)    |
| read   | failOnDataLoss       | true (default) or false (skip trimmed ranges, warn)    |
| stream | commitGroup          | consumer group moved to each committed offset          |
| read   | pageSize             | entries per XRANGE call and per Arrow batch (10000)    |
| write  | stream (or path)     | target stream key                                      |
| write  | streamColumn         | column holding each row's target key                   |
| write  | idempotence          | position (default), column:<name> or none              |
| write  | idempotenceProducers | column mode: producer ids to hash keys over (1024)     |
| write  | idmpMaxsize, idmpDuration | XCFGSET the target stream first if different      |

At least one of ``streams`` and ``streamsPattern`` is needed. With a pattern, keys found later
start at their beginning (as Kafka's ``subscribePattern`` starts new partitions at the earliest
offset, whatever ``startingOffsets`` says) and the offsets must be words or a timestamp, not
JSON: a JSON map names keys, which a pattern does not know in advance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from headwater.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetError,
    StreamId,
    last_id_before_ms,
    parse_id,
    parse_offsets_json,
)


class OptionError(ValueError):
    """An option of the ``headwater`` data source is unknown, missing or malformed."""


DEFAULT_URL = "redis://localhost:6379/0"
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_PAGE_SIZE = 10_000
DEFAULT_PRODUCERS = 1024
#: Redis's bounds for XCFGSET (STREAMS-REFERENCE §2.1).
IDMP_MAXSIZE_RANGE = (1, 10_000)
IDMP_DURATION_RANGE = (1, 86_400)

_COMMON = ("url", "connecttimeout")
#: Options Spark itself puts in the map (``save(path)``/``load(path)``, the query checkpoint).
_SPARK = ("path", "checkpointlocation")
READ_OPTIONS = frozenset(
    (
        *_COMMON,
        *_SPARK,
        "streams",
        "streamspattern",
        "startingoffsets",
        "startingtimestamp",
        "endingoffsets",
        "maxrecordsperbatch",
        "maxmillisperbatch",
        "minpartitions",
        "failondataloss",
        "commitgroup",
        "pagesize",
    )
)
STREAM_ONLY_OPTIONS = ("maxrecordsperbatch", "maxmillisperbatch", "commitgroup")
BATCH_ONLY_OPTIONS = ("endingoffsets",)
WRITE_OPTIONS = frozenset(
    (
        *_COMMON,
        *_SPARK,
        "stream",
        "streamcolumn",
        "idempotence",
        "idempotenceproducers",
        "idmpmaxsize",
        "idmpduration",
    )
)


# -- value parsers -------------------------------------------------------------------------------


def parse_int(
    options: Mapping[str, str], name: str, low: int, high: int | None = None
) -> int | None:
    """An integer option within ``[low, high]``, or None when absent."""
    raw = options.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not (text.isascii() and text.lstrip("-").isdigit()):
        raise OptionError(f"option {name!r} must be an integer, got {raw!r}")
    value = int(text)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise OptionError(f"option {name!r} must be {bound}, got {value}")
    return value


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word not in ("true", "false"):
        raise OptionError(f"option {name!r} must be 'true' or 'false', got {raw!r}")
    return word == "true"


def parse_float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise OptionError(f"option {name!r} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise OptionError(f"option {name!r} must be > 0, got {raw!r}")
    return value


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def check_known(options: Mapping[str, str], known: frozenset[str], role: str) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise OptionError(
            f"unknown option(s) for a headwater {role}: {unknown}; known: {sorted(known)}"
        )


def _alias(options: Mapping[str, str], name: str) -> str | None:
    """``name`` or Spark's ``path`` (``load(key)``/``save(key)``), not both."""
    value, path = options.get(name), options.get("path")
    if value is not None and path is not None:
        raise OptionError(f"give either option {name!r} or a path, not both")
    return value if value is not None else path


# -- reader options --------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Where a stream starts: ``kind`` is earliest, latest, id or timestamp; ``after`` is the
    exclusive bound for id and timestamp."""

    kind: str
    after: StreamId | None = None


@dataclass(frozen=True)
class ReadOptions:
    url: str
    connect_timeout: float
    streams: tuple[str, ...]
    starting: dict[str, Start]
    ending: dict[str, StreamId | None]  # None: latest
    max_records: int | None
    max_millis: int | None
    min_partitions: int
    fail_on_data_loss: bool
    commit_group: str | None
    page_size: int
    #: a glob: the keys of the streams matching it are read too (found again and again)
    pattern: str | None = None

    def start_of(self, key: str) -> Start:
        """Where a new query starts reading ``key`` (a key found by the pattern after the
        query started begins at its start: see ``checkpoint_offsets``)."""
        return self.starting.get(key) or self.starting.get(PATTERN_KEYS) or Start(EARLIEST)

    def end_of(self, key: str) -> StreamId | None:
        """The last ID a batch read takes from ``key``; None: its last entry."""
        return self.ending.get(key)


#: ``ReadOptions.starting``'s entry for the keys a pattern finds (not a valid key: a comma)
PATTERN_KEYS = ","


def parse_read_options(raw: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """``streaming`` None: not yet known (``schema()`` serves both kinds of read)."""
    options = lower_keys(raw)
    check_known(options, READ_OPTIONS, "reader")
    if streaming is not None:
        _check_role(options, streaming)
    pattern = _non_empty(options, "streamspattern")
    streams = parse_streams(_alias(options, "streams"), pattern is not None)
    if pattern is not None:
        _check_pattern_offsets(options)
    try:
        return ReadOptions(
            url=options.get("url", DEFAULT_URL),
            connect_timeout=parse_float(options, "connecttimeout", DEFAULT_CONNECT_TIMEOUT),
            streams=streams,
            starting=parse_starting(options, (*streams, PATTERN_KEYS) if pattern else streams),
            ending=parse_ending(options.get("endingoffsets"), streams),
            max_records=parse_int(options, "maxrecordsperbatch", 1),
            max_millis=parse_int(options, "maxmillisperbatch", 1),
            min_partitions=parse_int(options, "minpartitions", 1, 100_000) or 1,
            fail_on_data_loss=parse_bool(options, "failondataloss", True),
            commit_group=_non_empty(options, "commitgroup"),
            page_size=parse_int(options, "pagesize", 1, 1_000_000) or DEFAULT_PAGE_SIZE,
            pattern=pattern,
        )
    except OffsetError as exc:
        raise OptionError(str(exc)) from None


def _check_role(options: Mapping[str, str], streaming: bool) -> None:
    wrong = BATCH_ONLY_OPTIONS if streaming else STREAM_ONLY_OPTIONS
    given = [name for name in wrong if name in options]
    if given:
        kind = "batch" if streaming else "streaming"
        raise OptionError(f"option(s) {given} apply to {kind} reads only")


def parse_streams(raw: str | None, pattern: bool = False) -> tuple[str, ...]:
    if pattern and raw is None:
        return ()
    if raw is None or not raw.strip():
        raise OptionError(
            "option 'streams' (comma-separated stream keys) or 'streamsPattern' is required"
        )
    keys = tuple(key.strip() for key in raw.split(","))
    if any(not key for key in keys):
        raise OptionError(f"option 'streams' has an empty key: {raw!r}")
    if len(set(keys)) != len(keys):
        raise OptionError(f"option 'streams' names a key twice: {raw!r}")
    return keys


def _check_pattern_offsets(options: Mapping[str, str]) -> None:
    for name in ("startingoffsets", "endingoffsets"):
        word = options.get(name, "").strip().lower()
        if word and word not in (EARLIEST, LATEST):
            raise OptionError(
                f"option {_SPELLING[name]!r} names keys (JSON): with 'streamsPattern' use "
                "earliest, latest or 'startingTimestamp'"
            )


_SPELLING = {"startingoffsets": "startingOffsets", "endingoffsets": "endingOffsets"}


def parse_starting(options: Mapping[str, str], streams: tuple[str, ...]) -> dict[str, Start]:
    offsets, stamp = options.get("startingoffsets"), options.get("startingtimestamp")
    if offsets is not None and stamp is not None:
        raise OptionError("give either 'startingOffsets' or 'startingTimestamp', not both")
    if stamp is not None:
        ms = parse_int(options, "startingtimestamp", 0)
        assert ms is not None
        return dict.fromkeys(streams, Start("timestamp", last_id_before_ms(ms)))
    word = (offsets or EARLIEST).strip()
    if word.lower() in (EARLIEST, LATEST):
        return dict.fromkeys(streams, Start(word.lower()))
    parsed = parse_offsets_json(word, streams, option="startingOffsets")
    return {key: _start(value) for key, value in parsed.items()}


def _start(value: str) -> Start:
    return Start(value) if value in (EARLIEST, LATEST) else Start("id", parse_id(value))


def parse_ending(raw: str | None, streams: tuple[str, ...]) -> dict[str, StreamId | None]:
    word = (raw or LATEST).strip()
    if word.lower() == LATEST:
        return dict.fromkeys(streams)
    if word.lower() == EARLIEST:
        raise OptionError("option 'endingOffsets' cannot be 'earliest'")
    parsed = parse_offsets_json(word, streams, option="endingOffsets")
    ending: dict[str, StreamId | None] = {}
    for key, value in parsed.items():
        if value == EARLIEST:
            raise OptionError(f"option 'endingOffsets': {key!r} cannot end at 'earliest'")
        ending[key] = None if value == LATEST else parse_id(value)
    return ending


def _non_empty(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is not None and not value.strip():
        raise OptionError(f"option {name!r} must not be empty")
    return value


# -- writer options --------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteOptions:
    url: str
    connect_timeout: float
    stream: str | None
    stream_column: str | None
    idempotence: str  # position | column | none
    key_column: str | None  # column mode: the column whose value is the iid
    producers: int
    idmp_maxsize: int | None
    idmp_duration: int | None

    @property
    def sink(self) -> str:
        """The sink's name inside producer ids: the target key, or ``@<streamColumn>``."""
        return self.stream if self.stream is not None else f"@{self.stream_column}"


def parse_write_options(raw: Mapping[str, str]) -> WriteOptions:
    options = lower_keys(raw)
    check_known(options, WRITE_OPTIONS, "writer")
    stream, column = _alias(options, "stream"), _non_empty(options, "streamcolumn")
    if (stream is None) == (column is None):
        raise OptionError("give exactly one of option 'stream' (a key) or 'streamColumn'")
    if stream is not None and not stream.strip():
        raise OptionError("option 'stream' must not be empty")
    mode, key_column = parse_idempotence(options.get("idempotence"))
    maxsize = parse_int(options, "idmpmaxsize", *IDMP_MAXSIZE_RANGE)
    duration = parse_int(options, "idmpduration", *IDMP_DURATION_RANGE)
    if column is not None and (maxsize or duration):
        raise OptionError("options 'idmpMaxsize'/'idmpDuration' need a fixed 'stream'")
    return WriteOptions(
        url=options.get("url", DEFAULT_URL),
        connect_timeout=parse_float(options, "connecttimeout", DEFAULT_CONNECT_TIMEOUT),
        stream=stream,
        stream_column=column,
        idempotence=mode,
        key_column=key_column,
        producers=parse_int(options, "idempotenceproducers", 1, 1_000_000) or DEFAULT_PRODUCERS,
        idmp_maxsize=maxsize,
        idmp_duration=duration,
    )


def parse_idempotence(raw: str | None) -> tuple[str, str | None]:
    text = (raw or "position").strip()
    word = text.lower()
    if word in ("position", "none"):
        return word, None
    if word.startswith("column:") and text[len("column:") :].strip():
        return "column", text[len("column:") :].strip()
    raise OptionError(
        f"option 'idempotence' must be 'position', 'column:<name>' or 'none', got {raw!r}"
    )
