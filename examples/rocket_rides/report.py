"""The demo's verdict: one table of every consumer against the truth, and an exit status.

The truth is the rides table (what the API committed). Every consumer's total and last ride id
must equal it to the cent, and so must the reconciliation, which recomputes both from the log
alone (the archive of trimmed entries plus the stream after it); anything else is a disagreement
and the demo exits 1. So is a failure of trimming:

* a trim passed a consumer checkpoint (the stream's first entry is above one at the end, or the
  streamer's check after some trim found it so);
* nothing was trimmed although the run had more rides than the ``MAXLEN ~`` target plus one
  stream node (``~`` removes whole nodes only), so the demo cannot silently stop trimming;
* the reconciliation did not read every entry ever added exactly once (archived + in the stream).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import db
from .log import kept_checkpoint, stream_id_key
from .money import format_cents_grouped

NODE_ENTRIES = 100  # stream-node-max-entries: a whole node may survive a trim with MINID ~

CONSUMER_KINDS = {
    "consumer-0": "XRANGE",
    "consumer-1": "XRANGE",
    "group-reader": "XREADGROUP/XACK/XAUTOCLAIM",
    "spark": "Spark Structured Streaming",
}
HEADER = ("", "total distance", "last ride ID", "crashes survived", "agrees")


@dataclass
class Outcome:
    """Everything the table shows; filled in by the demo after everyone caught up."""

    expected: db.RideTotals
    states: list[db.ConsumerState]
    crashes: dict[str, int]
    reconciliation_label: str
    reconciled_total_cents: int
    reconciled_last_ride_id: int
    reconciled_disagreeing: list[str]
    stream_length: int
    entries_added: int
    stream_duplicates: int
    idmp_duplicates: int
    double_sent_batches: int
    resent_records: int
    server_kills: int
    reconnects: int
    refused: int
    invalid_sent: int
    rides_sent: int
    max_length: int  # the streamer's MAXLEN ~ target
    first_entry_id: str | None  # XINFO STREAM first-entry at the end
    archived_upto: str  # the archive summarizes every entry below this ID
    archived_entries: int
    reconciled_entries: int  # entries the reconciliation read: archived + in the stream
    trims: int  # trims the streamer sent and checked
    trims_past_checkpoint: int  # of those, how many left the first entry above the checkpoint
    notes: list[str] = field(default_factory=list)

    def agrees(self, total: int, last: int) -> bool:
        return (total, last) == (self.expected.total_cents, self.expected.last_ride_id)

    @property
    def removed(self) -> int:
        """Entries removed by trimming (nothing else deletes entries)."""
        return self.entries_added - self.stream_length

    @property
    def slowest(self) -> db.ConsumerState | None:
        return min(self.states, key=lambda s: stream_id_key(s.last_stream_id), default=None)

    @property
    def first_entry_kept(self) -> bool:
        """At the end: the first live entry is at or below every consumer's checkpoint."""
        return all(
            kept_checkpoint(s.last_stream_id, self.first_entry_id, self.removed)
            for s in self.states
        )

    @property
    def trimmed_as_expected(self) -> bool:
        return self.removed > 0 or self.rides_sent <= self.max_length + NODE_ENTRIES

    @property
    def every_entry_once(self) -> bool:
        return self.reconciled_entries == self.entries_added

    @property
    def ok(self) -> bool:
        consumers = all(self.agrees(s.total_cents, s.last_ride_id) for s in self.states)
        reconciled = self.agrees(self.reconciled_total_cents, self.reconciled_last_ride_id)
        api = self.expected.rides == self.rides_sent and self.refused == self.invalid_sent
        trimming = self.trimmed_as_expected and self.trims_past_checkpoint == 0
        trimming = trimming and self.first_entry_kept and self.every_entry_once
        return consumers and reconciled and not self.reconciled_disagreeing and api and trimming


def table(o: Outcome) -> str:
    """The one table: consumer rows, the truth and its recomputation, then the stream's facts."""
    rows: list[tuple[str, ...]] = []
    for s in o.states:
        label = f"{s.name} ({CONSUMER_KINDS.get(s.name, 'consumer')})"
        rows.append(_row(o, label, s.total_cents, s.last_ride_id, str(o.crashes.get(s.name, 0))))
    expected = (
        "expected (rides table)",
        format_cents_grouped(o.expected.total_cents),
        f"{o.expected.last_ride_id:,}",
        "",
        "",
    )
    recon = _row(o, o.reconciliation_label, o.reconciled_total_cents, o.reconciled_last_ride_id, "")
    consumer_crashes = sum(o.crashes.get(s.name, 0) for s in o.states)
    facts = [
        (
            "entries in the stream",
            f"{o.stream_length:,} (entries added {o.entries_added:,}, removed by trimming"
            f" {o.removed:,}, duplicate rides {o.stream_duplicates:,})",
        ),
        *_trim_facts(o),
        (
            "duplicates prevented by IDMP",
            f"{o.idmp_duplicates:,} (double-sent batches: {o.double_sent_batches:,},"
            f" {o.resent_records:,} records)",
        ),
        (
            "crashes survived",
            f"{consumer_crashes:,} by consumers; Headwater kill -9: {o.server_kills};"
            f" reconnects: {o.reconnects:,}",
        ),
        (
            "rides stored by the API",
            f"{o.expected.rides:,} of {o.rides_sent:,}; invalid: {o.refused} of"
            f" {o.invalid_sent} got 422",
        ),
    ]
    return _render([rows, [expected, recon]], facts)


def _trim_facts(o: Outcome) -> list[tuple[str, str]]:
    slowest = o.slowest
    checkpoint = f"{slowest.last_stream_id} (slowest: {slowest.name})" if slowest else "none"
    trimmed = o.trimmed_as_expected and o.trims_past_checkpoint == 0
    return [
        (
            f"trimming (MAXLEN ~ {o.max_length:,})",
            f"{_verdict(trimmed)}: {o.trims:,} trims, {o.trims_past_checkpoint:,} past a"
            f" checkpoint; archive below {o.archived_upto}",
        ),
        (
            "first entry <= every checkpoint",
            f"{_verdict(o.first_entry_kept)}: {o.first_entry_id or 'none'} <= {checkpoint}",
        ),
        (
            "reconciliation read each entry once",
            f"{_verdict(o.every_entry_once)}: {o.archived_entries:,} archived +"
            f" {o.reconciled_entries - o.archived_entries:,} from the stream ="
            f" {o.reconciled_entries:,} of {o.entries_added:,} added",
        ),
    ]


def _verdict(ok: bool) -> str:
    return "yes" if ok else "NO"


def _row(o: Outcome, label: str, total: int, last: int, crashes: str) -> tuple[str, ...]:
    verdict = "yes" if o.agrees(total, last) else "NO"
    return (label, format_cents_grouped(total), f"{last:,}", crashes, verdict)


def _render(sections: list[list[tuple[str, ...]]], facts: list[tuple[str, str]]) -> str:
    """ASCII table; fact rows span every column after the first."""
    all_rows = [HEADER, *(r for sec in sections for r in sec)]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(HEADER))]
    widths[0] = max(widths[0], *(len(f[0]) for f in facts))
    span = sum(widths[1:]) + 3 * (len(widths) - 2)
    if max(len(f[1]) for f in facts) > span:
        widths[1] += max(len(f[1]) for f in facts) - span
        span = sum(widths[1:]) + 3 * (len(widths) - 2)
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule, _line(HEADER, widths), rule]
    for section in sections:
        lines += [_line(r, widths) for r in section] + [rule]
    lines += [f"| {name:<{widths[0]}} | {value:<{span}} |" for name, value in facts]
    lines.append(rule)
    return "\n".join(lines)


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    first = f" {cells[0]:<{widths[0]}} "
    rest = [f" {c:>{w}} " for c, w in zip(cells[1:], widths[1:], strict=True)]
    return "|" + "|".join([first, *rest]) + "|"
