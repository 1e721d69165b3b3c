"""What a test that played rounds checks of the log afterwards: read straight from the database,
gap-free, every acknowledged step in it, and valid, in memory and through the command line
(exported, then verified with the public key alone)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.bundle_report import BundleReport
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.entries import LogEntry, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.store import open_reader
from tests.failover_drill import STEP_ENTRY, Player
from tests.serving import gnau


@dataclass(frozen=True)
class VerifiedLog:
    entries: list[LogEntry]
    report: BundleReport


def verified_log(url: str, work: Path, vkey: str, players: Sequence[Player] = ()) -> VerifiedLog:
    """The log at ``url``, once checked as above (``players``: whose acknowledged steps)."""
    verifier = Verifier.from_vkey(vkey)
    with open_reader(url) as reader:
        size = reader.size()
        data = list(reader.iter_entries(0, size))
        bundle_text = io.StringIO()
        write_bundle(reader, bundle_text, end=size)
    entries = [decode_entry(entry, verifier) for entry in data]
    assert [entry.index for entry in entries] == list(range(size))
    written = {(entry.round_id, entry.kind) for entry in entries}
    lost = [
        f"{ack.round_id} {ack.step}"
        for player in players
        for ack in player.acks
        if (ack.round_id, STEP_ENTRY[ack.step]) not in written
    ]
    assert not lost, lost
    report = verify_bundle(io.BytesIO(bundle_text.getvalue().encode()), pinned_keys=[verifier])
    assert report.ok, report.summary()
    bundle = work / "log.bundle"
    exported = gnau("audit", "export", "--database", url, "--out", str(bundle))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    verify = gnau("audit", "verify", str(bundle), "--key", vkey, "--jobs", "1")
    assert verify.returncode == 0 and "VALID" in verify.stdout, verify.stdout + verify.stderr
    return VerifiedLog(entries, report)
