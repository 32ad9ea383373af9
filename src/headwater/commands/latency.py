"""LATENCY: the latency monitor's events and each command's latency histogram (Redis's
latency.c and its per-command HDR histograms, 7.0 replies).

**Events.** A source that took ``latency-monitor-threshold`` milliseconds or more adds a
sample to its event's series: the last 160 seconds that had one, the worst of each second
kept, and the all-time high. The sources: ``command`` and ``fast-command`` (a call, by its
``fast`` flag: ``Engine.call``), ``expire-cycle`` (the active expiry of one cron turn),
``aof-write`` and ``aof-fsync-always`` (the AOF's write and its fsync), ``snapshot`` (a save
in the foreground). Threshold 0: nothing is sampled, as in Redis.

**Histograms.** With ``latency-tracking yes`` every call's duration goes into its command's
histogram, counted as Redis's HDR histogram counts (nanoseconds, two significant digits,
1 ns to 1 s): the same buckets, so LATENCY HISTOGRAM and INFO latencystats report the same
figures Redis would for the same durations. A command counts its calls by whole µs below
``LATENCY_SMALL_US`` (one list increment: most calls) and the rest in a dict of bucket index
to count; ``histogram_of`` folds the two when one is read.

DOCTOR's statistics are Redis's (samples, average, mean deviation, period, worst); its
advice is Headwater's own, for the sources Headwater has.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from headwater.commands.context import Client, CommandSpec, help_handler, reject_subcommand, spec
from headwater.errors import err
from headwater.resp.types import PairMap, Reply, Verbatim

#: Redis's LATENCY_TS_LEN: seconds of samples an event keeps
SERIES_LEN = 160
_GRAPH_COLUMNS = 80
_GRAPH_ROWS = 4

# -- the histograms (an HDR histogram of 2 significant digits, lowest value 1) ----------------

HISTOGRAM_MIN_NS = 1
HISTOGRAM_MAX_NS = 1_000_000_000
_SUB_HALF_BITS = 7  # (256 sub-buckets, 128 per half)


def bucket_of(ns: int) -> int:
    """The counts index HDR gives a value (already clamped to [1 ns, 1 s])."""
    if ns < 256:
        return ns
    shift = ns.bit_length() - 8
    return ((shift + 1) << _SUB_HALF_BITS) + (ns >> shift) - 128


def record(counts: dict[int, int], duration_us: float) -> None:
    """One call of ``duration_us`` into a histogram (Redis records whole microseconds)."""
    ns = int(duration_us) * 1000
    if ns < HISTOGRAM_MIN_NS:
        ns = HISTOGRAM_MIN_NS
    elif ns > HISTOGRAM_MAX_NS:
        ns = HISTOGRAM_MAX_NS
    index = bucket_of(ns)
    counts[index] = counts.get(index, 0) + 1


def histogram_of(row: CommandSpec) -> dict[int, int]:
    """A command's histogram: its HDR buckets with its calls counted by µs folded in."""
    counts = dict(row.latency_counts)
    for us, calls in enumerate(row.latency_small):
        if calls:
            index = bucket_of(max(us * 1000, HISTOGRAM_MIN_NS))
            counts[index] = counts.get(index, 0) + calls
    return counts


def _lowest(index: int) -> tuple[int, int]:
    """A bucket's lowest value and its shift (the range it covers is 1 << shift)."""
    shift = (index >> _SUB_HALF_BITS) - 1
    sub = (index & 127) + 128
    if shift < 0:
        return sub - 128, 0
    return sub << shift, shift


def highest_equivalent(index: int) -> int:
    lowest, shift = _lowest(index)
    return lowest + (1 << shift) - 1


def cumulative_buckets(counts: dict[int, int]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's ``histogram_usec``: (µs, calls up to it) at 1, 2, 4 … µs (HDR's
    logarithmic iteration from 1024 ns), where the count grew, up to the last call."""
    total = sum(counts.values())
    out: list[tuple[int, int]] = []
    ordered = sorted(counts.items())
    seen = 0
    position = 0
    level = 1024
    while seen < total:
        index = bucket_of(level)
        while position < len(ordered) and ordered[position][0] <= index:
            seen += ordered[position][1]
            position += 1
        if seen and (not out or seen > out[-1][1]):
            out.append((highest_equivalent(index) // 1000, seen))
        level *= 2
    return out


def percentile(counts: dict[int, int], wanted: float) -> int:
    """HDR's value at a percentile, in nanoseconds (0 for an empty histogram)."""
    total = sum(counts.values())
    if not total:
        return 0
    rank = max(int(min(wanted, 100.0) / 100 * total + 0.5), 1)
    seen = 0
    for index, count in sorted(counts.items()):
        seen += count
        if seen >= rank:
            if wanted == 0.0:
                return _lowest(index)[0]
            return highest_equivalent(index)
    return 0


# -- the events ---------------------------------------------------------------------------------


@dataclass
class Series:
    """One event's samples: a ring of (unix second, ms), oldest first from ``next``."""

    samples: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)] * SERIES_LEN)
    next: int = 0
    max: int = 0

    def add(self, now: int, ms: int) -> None:
        if ms > self.max:
            self.max = ms
        last = (self.next - 1) % SERIES_LEN
        when, worst = self.samples[last]
        if when == now:
            if ms > worst:
                self.samples[last] = (now, ms)
            return
        self.samples[self.next] = (now, ms)
        self.next = (self.next + 1) % SERIES_LEN

    def history(self) -> list[tuple[int, int]]:
        ring = self.samples[self.next :] + self.samples[: self.next]
        return [sample for sample in ring if sample[0]]

    def latest(self) -> tuple[int, int]:
        return self.samples[(self.next - 1) % SERIES_LEN]


class LatencyMonitor:
    """The events' series (``latency-monitor-threshold``: the engine's config listener
    sets ``floor_ms``; 0 turns sampling off)."""

    def __init__(self) -> None:
        self.events: dict[str, Series] = {}
        self.threshold_ms = 0

    def sample(self, event: str, ms: float) -> None:
        """Add ``ms`` to ``event`` if the monitor is on and it reaches the threshold."""
        if self.threshold_ms and ms >= self.threshold_ms:
            self.add(event, int(ms), int(time.time()))

    def add(self, event: str, ms: int, now: int) -> None:
        series = self.events.get(event)
        if series is None:
            series = self.events[event] = Series()
        series.add(now, ms)

    def reset(self, names: list[str] | None) -> int:
        if names is None:
            count = len(self.events)
            self.events.clear()
            return count
        count = 0
        for name in names:
            for event in [e for e in self.events if e.lower() == name.lower()]:
                del self.events[event]
                count += 1
        return count

    def check_invariants(self) -> None:
        for name, series in self.events.items():
            times = [when for when, _ in series.history()]
            if times != sorted(times) or len(set(times)) != len(times):
                raise AssertionError(f"latency series {name}: times out of order {times}")
            if any(ms > series.max for _, ms in series.history()):
                raise AssertionError(f"latency series {name}: a sample above the all-time max")


# -- LATENCY GRAPH: Redis's sparkline, four rows high, labels below ---------------------------

_FILL = "_o#"


def graph(event: str, series: Series, now: int) -> str:
    samples = series.history()
    values = [ms for _, ms in samples]
    low, high = min(values), max(values)
    head = f"{event} - high {high} ms, low {low} ms (all time high {series.max} ms)\n"
    out = [head, "-" * _GRAPH_COLUMNS + "\n"]
    labels = [_age_label(now - when) for when, _ in samples]
    for start in range(0, len(values), _GRAPH_COLUMNS):
        if start:
            out.append("\n")
        chunk = slice(start, start + _GRAPH_COLUMNS)
        out.append(_sparkline(values[chunk], labels[chunk], low, high))
    return "".join(out)


def _age_label(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _sparkline(values: list[int], labels: list[str], low: int, high: int) -> str:
    steps = len(_FILL) * _GRAPH_ROWS
    span = (high - low) or 1
    levels = [min(max(int(int((v - low) * steps) / span), 0), steps - 1) for v in values]
    rows = []
    for row in range(_GRAPH_ROWS):
        chars = []
        for level in levels:
            at = level - (_GRAPH_ROWS - row - 1) * len(_FILL)
            chars.append(_FILL[at] if 0 <= at < len(_FILL) else "|" if at >= len(_FILL) else " ")
        rows.append("".join(chars))
    rows.append(" " * len(values))  # (the margin above the labels)
    for depth in range(max(len(label) for label in labels)):
        rows.append("".join(label[depth] if depth < len(label) else " " for label in labels))
    return "".join(row + "\n" for row in rows)


# -- LATENCY DOCTOR ------------------------------------------------------------------------------


def doctor(monitor: LatencyMonitor, slowlog_threshold_us: int, now: int) -> str:
    if not monitor.events:
        if not monitor.threshold_ms:
            return (
                "Latency monitoring is off: no event has been sampled. Turn it on with "
                '"CONFIG SET latency-monitor-threshold <milliseconds>".\n'
            )
        return "No latency spike has been observed since the server started.\n"
    lines = ["Latency spikes were observed in this server:\n\n"]
    advice: list[str] = []
    for number, (name, series) in enumerate(monitor.events.items(), 1):
        history = series.history()
        samples = [ms for _, ms in history]
        oldest = min(when for when, _ in history)
        average = sum(samples) // len(samples)
        deviation = sum(abs(average - ms) for ms in samples) // len(samples)
        period = max(now - oldest, 1)
        lines.append(
            f"{number}. {name}: {len(samples)} latency spikes (average {average}ms, mean "
            f"deviation {deviation}ms, period {period / len(samples):.2f} sec). Worst all "
            f"time event {series.max}ms.\n"
        )
        advice.extend(_advice(name, slowlog_threshold_us, monitor.threshold_ms))
    if advice:
        lines.append("\nWhat may help:\n\n")
        lines.extend(f"- {text}\n" for text in dict.fromkeys(advice))
    return "".join(lines)


def _advice(event: str, slowlog_threshold_us: int, threshold_ms: int) -> list[str]:
    if event == "command":
        out = ["SLOWLOG GET shows which commands were slow and their arguments."]
        if slowlog_threshold_us < 0:
            out.append("The slow log is off: CONFIG SET slowlog-log-slower-than 10000 turns it on.")
        elif slowlog_threshold_us // 1000 > threshold_ms:
            out.append(
                "The slow log's threshold is above the latency monitor's: lower "
                f"slowlog-log-slower-than to {threshold_ms * 1000} to see these commands."
            )
        out.append(
            "Deleting or expiring a large value takes time in proportion to its size: "
            "split very large keys, or trim streams with XTRIM as they grow."
        )
        return out
    if event == "fast-command":
        return [
            "A command flagged fast was slow: the process was probably not scheduled "
            "(a loaded or oversubscribed machine)."
        ]
    if event == "expire-cycle":
        return ["Many keys expired at once: spread their TTLs, or split large expiring keys."]
    if event in ("aof-write", "aof-fsync-always"):
        return [
            "The AOF's disk is slow: a local SSD helps; appendfsync everysec trades one "
            "second of writes for much lower latency."
        ]
    if event == "snapshot":
        return ["A save ran in the foreground: prefer BGSAVE to SAVE."]
    return []


# -- the command -------------------------------------------------------------------------------


def cmd_latency_latest(c: Client, argv: list[bytes]) -> Reply:
    out: list[Reply] = []
    for name, series in c.server.latency.events.items():
        when, ms = series.latest()
        out.append([name.encode(), when, ms, series.max])
    return out


def cmd_latency_history(c: Client, argv: list[bytes]) -> Reply:
    series = c.server.latency.events.get(argv[2].decode("utf-8", "surrogateescape"))
    if series is None:
        return []
    return [[when, ms] for when, ms in series.history()]


def cmd_latency_graph(c: Client, argv: list[bytes]) -> Reply:
    name = argv[2].decode("utf-8", "surrogateescape")
    series = c.server.latency.events.get(name)
    if series is None:
        raise err(f"No samples available for event '{name}'")
    return Verbatim(graph(name, series, int(time.time())).encode())


def cmd_latency_doctor(c: Client, argv: list[bytes]) -> Reply:
    threshold: int = c.server.config["slowlog-log-slower-than"]
    report = doctor(c.server.latency, threshold, int(time.time()))
    return Verbatim(report.encode())


def cmd_latency_reset(c: Client, argv: list[bytes]) -> Reply:
    names = [arg.decode("utf-8", "surrogateescape") for arg in argv[2:]] or None
    return c.server.latency.reset(names)


def _histogram_reply(row: CommandSpec) -> Reply:
    counts = histogram_of(row)
    buckets: dict[Reply, Reply] = {}
    for micros, calls in cumulative_buckets(counts):
        buckets[micros] = calls
    return {b"calls": sum(counts.values()), b"histogram_usec": buckets}


def _with_histograms(row: CommandSpec) -> list[CommandSpec]:
    """A command's row and its subcommands' that have recorded calls."""
    rows = [row, *row.subcommands.values()]
    return [r for r in rows if _has_calls(r)]


def _has_calls(row: CommandSpec) -> bool:
    return bool(row.latency_counts) or any(row.latency_small)


def cmd_latency_histogram(c: Client, argv: list[bytes]) -> Reply:
    """LATENCY HISTOGRAM [command ...]: unknown names are skipped; a container gives its
    subcommands; ``container|sub`` names one."""
    table = c.server.table
    rows: list[CommandSpec] = []
    if len(argv) == 2:
        for command in table.values():
            rows.extend(_with_histograms(command))
    for name in argv[2:]:
        parent, _, sub = name.partition(b"|")
        found = table.get(parent.upper())
        if found is not None and sub:
            child = found.subcommands.get(sub.lower())
            if child is not None and _has_calls(child):
                rows.append(child)
        elif found is not None:
            rows.extend(_with_histograms(found))
    # (pairs: a command named twice is answered twice, as Redis's deferred map is)
    return PairMap((row.name.encode(), _histogram_reply(row)) for row in rows)


LATENCY_HELP = [
    b"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"DOCTOR",
    b"    Return a human readable latency analysis report.",
    b"GRAPH <event>",
    b"    Return an ASCII latency graph for the <event> class.",
    b"HISTORY <event>",
    b"    Return time-latency samples for the <event> class.",
    b"LATEST",
    b"    Return the latest latency samples for all events.",
    b"RESET [<event> ...]",
    b"    Reset latency data of one or more <event> classes.",
    b"    (default: reset all data for all event classes)",
    b"HISTOGRAM [COMMAND ...]",
    b"    Return a cumulative distribution of latencies in the format of a histogram for the "
    b"specified command names.",
    b"    If no commands are specified then all histograms are replied.",
    b"HELP",
    b"    Prints this help.",
]

_FLAGS = "admin noscript loading stale"

SPECS = (
    spec(
        "latency",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("latency|latest", 2, _FLAGS, handler=cmd_latency_latest),
            spec("latency|history", 3, _FLAGS, handler=cmd_latency_history),
            spec("latency|graph", 3, _FLAGS, handler=cmd_latency_graph),
            spec("latency|doctor", 2, _FLAGS, handler=cmd_latency_doctor),
            spec("latency|reset", -2, _FLAGS, handler=cmd_latency_reset),
            spec("latency|histogram", -2, _FLAGS, handler=cmd_latency_histogram),
            spec("latency|help", 2, "loading stale", handler=help_handler(LATENCY_HELP)),
        ),
    ),
)
