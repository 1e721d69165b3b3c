"""What verifying an audit bundle found: the first failure, the verdict, the counts, and the
summary ``gnau audit verify`` prints (:mod:`gnau_service.audit.bundle_verification` fills it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from gnau_service.audit.checkpoint import ForkEvidence
from gnau_service.audit.entries import clip
from gnau_service.audit.spans import entry_span

MAX_REASON: Final = 400  # characters of a failure's reason; lower layers may quote at length


@dataclass(frozen=True)
class Failure:
    """The first thing that does not verify: the entry index (if it is an entry's) and why."""

    reason: str
    index: int | None = None

    def __post_init__(self) -> None:
        # The one bound on every reason, whatever layer wrote it and however much it quotes.
        object.__setattr__(self, "reason", clip(self.reason, MAX_REASON))

    def __str__(self) -> str:
        return self.reason if self.index is None else f"entry {self.index}: {self.reason}"


class Verdict(StrEnum):
    """What a bundle is. Only ``VALID`` is exit status 0."""

    VALID = "VALID"
    UNANCHORED = "UNANCHORED"  # every check passed, but no signed root covers the last entries
    INVALID = "INVALID"


@dataclass
class BundleReport:
    """What :func:`verify_bundle` found."""

    first_index: int = 0
    size: int = 0
    entries: int = 0
    checkpoints: int = 0
    rounds_settled: int = 0
    rounds_voided: int = 0
    rounds_open: int = 0
    rounds_partial: int = 0
    anchored_size: int | None = None  # the largest verified signed size, if any covers entries
    #: The most that a checkpoint's newest entry is stamped past a pinned witness's cosignature
    #: of it, in seconds (negative as it should be); None without such a cosignature.
    entry_lead_seconds: float | None = None
    allow_unanchored: bool = False
    failure: Failure | None = None
    fork: ForkEvidence | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def unanchored(self) -> str | None:
        """Which entries no verified signed root covers, if any do not."""
        if self.anchored_size == self.size:
            return None
        if self.anchored_size is None:
            covered = "no checkpoint was verified"
            first = self.first_index
        else:
            covered = f"the largest verified checkpoint is of size {self.anchored_size:,}"
            first = self.anchored_size
        return (
            f"no signed root covers {entry_span(first, self.size)} ({covered}, the bundle's "
            f"size is {self.size:,})"
        )

    @property
    def verdict(self) -> Verdict:
        if self.failure is not None:
            return Verdict.INVALID
        if self.unanchored is not None and not self.allow_unanchored:
            return Verdict.UNANCHORED
        return Verdict.VALID

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.VALID

    def summary(self) -> str:
        verified = entry_span(self.first_index, self.first_index + self.entries)
        lines = [
            f"entries: {self.entries:,} verified ({verified})",
            f"checkpoints: {self.checkpoints:,} verified",
            f"rounds: {self.rounds_settled:,} settled and replayed, {self.rounds_voided:,} voided,"
            f" {self.rounds_open:,} still open"
            + (
                f", {self.rounds_partial:,} only partly in this bundle"
                if self.rounds_partial
                else ""
            ),
        ]
        unanchored = self.unanchored if self.failure is None else None
        if unanchored is not None:
            lines.append(f"unanchored: {unanchored}")
        lines += [f"warning: {warning}" for warning in self.warnings]
        if self.fork is not None:
            lines.append(f"FORK: {self.fork.reason}")
            lines.append(f"  checkpoint 1:\n{_indent(str(self.fork.older.note))}")
            lines.append(f"  checkpoint 2:\n{_indent(str(self.fork.newer.note))}")
        verdict = self.verdict
        if verdict is Verdict.INVALID:
            lines.append(f"result: INVALID: {self.failure}")
        elif verdict is Verdict.UNANCHORED:
            lines.append(
                "result: UNANCHORED: the entries verify, but nothing ties the last of them to a "
                "signed tree (--allow-unanchored accepts this)"
            )
        else:
            lines.append("result: VALID")
        return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
