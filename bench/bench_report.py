"""``gnau report``'s cost (issue 38, part 4): the seconds to report 1M rounds, and that it grows
linearly.

Run: ``.venv/bin/python bench/bench_report.py`` (about 3 minutes on two cores; ``--quick`` is a
tenth of the sizes). Every figure is printed beside a baseline measured in the same run on the
same entries: the machine is shared and noisy, so compare ratios, not absolute numbers across
runs.

1. The report's own work (:class:`~gnau_service.audit.report.LogReport` over decoded entries),
   for 1M rounds and at three smaller sizes, beside the baseline of building the same entries
   and dropping them. The entries are made in memory (no signing: the report's core takes
   decoded entries), four per round (committed, dealt, revealed, settled), with the payloads of
   real rounds of three seats, at 32 tables of 4 operators.
2. The whole path from a bundle (each entry's canonical bytes and signature checked, worker
   processes as ``gnau audit verify`` uses, then the report), on signed bundles of real-shaped
   rounds at three sizes, beside the baseline of reading and checking the same entries without
   reporting. The seconds for 1M rounds are extrapolated from the per-round cost, which the
   three sizes show to be flat.
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Iterator
from fractions import Fraction

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.entries import EntryKind, JsonValue, LogEntry
from gnau_service.audit.log import LogAppender
from gnau_service.audit.merkle import Frontier, MemoryTree, leaf_hash
from gnau_service.audit.operators import OPERATOR_FIELD
from gnau_service.audit.report import LogReport, Period
from gnau_service.audit.report_reading import bundle_entries
from gnau_service.audit.round_events import (
    committed_payload,
    dealt_payload,
    played_at,
    revealed_payload,
    settle_round,
    settled_payload,
)
from gnau_service.audit.signing import LogSigner
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules

KINDS = (
    EntryKind.ROUND_COMMITTED,
    EntryKind.ROUND_DEALT,
    EntryKind.ROUND_REVEALED,
    EntryKind.ROUND_SETTLED,
)
TEMPLATES = 64  # real rounds whose payloads are reused, round ids and times varying
TABLES = 32
#: The currency of every table: the one a real round names.
EUR = Currency.of("EUR")
OPERATORS = 4


def template_rounds() -> list[tuple[dict[str, JsonValue], ...]]:
    rounds = []
    for number in range(TEMPLATES):
        committed = CommittedRound.with_fresh_seed(f"template-{number}", HouseRules())
        seats = [LockedSeat(n, "p-" + f"{n:02x}" * 16, 10 * n) for n in range(1, 4)]
        dealt = committed.lock(seats).deal()
        payloads = (
            # As the service commits a round: with its table's version and currency.
            committed_payload(committed, f"table-{number % TABLES}") | played_at(1, EUR),
            dealt_payload(dealt),
            revealed_payload(dealt),
            settled_payload(settle_round(dealt.reveal())),
        )
        operator = f"operator-{number % OPERATORS}"
        rounds.append(tuple({**payload, OPERATOR_FIELD: operator} for payload in payloads))
    return rounds


def day_time(number: int, rounds: int) -> str:
    """Times spread over about a year, so that monthly rows change as the log goes."""
    seconds = number * (365 * 86_400 // max(rounds, 1))
    day, rest = divmod(seconds, 86_400)
    month, day_of_month = divmod(day, 28)
    return f"2026-{month % 12 + 1:02d}-{day_of_month + 1:02d}T{rest // 3600:02d}:00:00Z"


def memory_entries(
    rounds: int, templates: list[tuple[dict[str, JsonValue], ...]]
) -> Iterator[LogEntry]:
    index = 0
    for number in range(rounds):
        payloads = templates[number % TEMPLATES]
        time_ = day_time(number, rounds)
        for kind, payload in zip(KINDS, payloads, strict=True):
            yield LogEntry(index, kind, time_, f"r-{number}", payload, "0" * 64, "0" * 8, "0" * 128)
            index += 1


def timed(work: object) -> float:
    start = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - start


def core(sizes: list[int], templates: list[tuple[dict[str, JsonValue], ...]]) -> None:
    print("1. the report's own work over decoded entries (4 entries a round, 3 seats)")
    print(f"   {'rounds':>10} {'baseline s':>11} {'report s':>9} {'ratio':>6} {'µs/round':>9}")
    for rounds in sizes:
        baseline = timed(lambda: sum(1 for _ in memory_entries(rounds, templates)))  # noqa: B023
        report = LogReport(Period.MONTH)
        reported = timed(lambda: report.add_all(memory_entries(rounds, templates)))  # noqa: B023
        assert sum(sums.rounds_settled for sums in report.sums.values()) == rounds
        extra = (reported - baseline) / rounds * 1e6
        print(
            f"   {rounds:>10,} {baseline:>11.2f} {reported:>9.2f} {reported / baseline:>6.2f}"
            f" {extra:>9.2f}"
        )


class _Source:
    def __init__(self, entries: list[bytes], notes: list[str], vkey: str, tree: MemoryTree):
        self.entries, self.notes, self.vkey, self.tree = entries, notes, vkey, tree

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        yield from self.entries[start:end]

    def checkpoints(self) -> list[str]:
        return self.notes

    def public_keys(self) -> list[str]:
        return [self.vkey]

    def frontier(self, size: int) -> Frontier:
        return Frontier.from_reader(self.tree, size)


def signed_bundle(
    rounds: int, templates: list[tuple[dict[str, JsonValue], ...]]
) -> tuple[bytes, LogSigner]:
    signer = LogSigner.from_private_key("gnau-dealer/bench", Ed25519PrivateKey.generate())
    appender = LogAppender(signer)
    entries: list[bytes] = []
    tree = MemoryTree()
    for number in range(rounds):
        payloads = templates[number % TEMPLATES]
        for kind, payload in zip(KINDS, payloads, strict=True):
            data = appender.append(
                kind, payload, time=day_time(number, rounds), round_id=f"r-{number}"
            ).data
            entries.append(data)
            tree.append(leaf_hash(data))
    notes = [str(appender.checkpoint())]
    out = io.StringIO()
    write_bundle(_Source(entries, notes, signer.vkey, tree), out, end=len(entries))
    return out.getvalue().encode(), signer


def whole_path(sizes: list[int], templates: list[tuple[dict[str, JsonValue], ...]]) -> None:
    print(f"2. from a signed bundle, entries checked ({os.cpu_count()} cores, default jobs)")
    print(
        f"   {'rounds':>10} {'read s':>7} {'report s':>9} {'ratio':>6} {'ms/round':>9}"
        f" {'1M rounds s':>12}"
    )
    for rounds in sizes:
        bundle, signer = signed_bundle(rounds, templates)
        key = [signer.verifier]

        def read() -> None:
            for _ in bundle_entries(io.BytesIO(bundle), key).entries():  # noqa: B023
                pass

        def report() -> None:
            checked = bundle_entries(io.BytesIO(bundle), key)  # noqa: B023
            LogReport(Period.MONTH).add_all(checked.entries()).rows(_Figures())

        baseline, reported = timed(read), timed(report)
        per_round = reported / rounds
        print(
            f"   {rounds:>10,} {baseline:>7.2f} {reported:>9.2f} {reported / baseline:>6.2f}"
            f" {per_round * 1e3:>9.3f} {per_round * 1e6:>12,.0f}"
        )


class _Figures:
    """Fixed figures: the PAR sheet's variance and covariance are computed once per rule set and
    process (seconds), which is no part of the cost per round."""

    def rtp(self, rules: HouseRules) -> Fraction:
        return Fraction(19, 20)

    def variance(self, rules: HouseRules) -> Fraction:
        return Fraction(2)

    def covariance(self, rules: HouseRules) -> Fraction:
        return Fraction(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    templates = template_rounds()
    core([size // scale for size in (100_000, 200_000, 400_000, 1_000_000)], templates)
    whole_path([size // scale for size in (5_000, 10_000, 20_000)], templates)


if __name__ == "__main__":
    main()
