"""Software authentication in a running service (issue 42, docs/software.md): the check at
start, on request (AuditService.VerifySoftware) and every day, each a signed SOFTWARE_VERIFIED
entry naming its actor; a mismatch is an alert (an ERROR line, gnau_software_mismatch at 1).

The service checks a copy of the package in a temporary directory (``installation``), which the
tests change; never the installed one. The expected digest is the SHA-256 of the manifest file's
signed text, read here with the note's own format (docs/software.md), not with the code under
test."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import audit_pb2, audit_pb2_grpc

import gnau_service
from gnau_service.audit.entries import EntryKind, LogEntry, decode_entry
from gnau_service.audit.note import Signer
from gnau_service.audit.software_manifest import Installation, Manifest, sign_manifest
from gnau_service.cli.main import main
from gnau_service.server.process.app import running
from gnau_service.server.process.config import ConfigError, Settings, load_settings
from gnau_service.store import Store
from tests.schemas.validation import errors
from tests.server.conftest import TOKENS
from tests.server.test_catalogue_api import why
from tests.server.test_interceptors import log_lines

RELEASE = Signer("gnau-release", Ed25519PrivateKey.generate())


@dataclasses.dataclass
class Release:
    """A copy of the package, its signed manifest and the release key's verifier key file."""

    package: Path
    manifest: Path
    release_key: Path

    @property
    def digest(self) -> str:
        data = self.manifest.read_bytes()
        # The signed text: everything up to the last blank line, with its final newline.
        return hashlib.sha256(data[: data.rindex(b"\n\n") + 1]).hexdigest()

    def installation(self) -> Installation:
        return Installation(self.package, ())

    def settings(self, settings: Settings) -> Settings:
        return dataclasses.replace(
            settings,
            software_manifest=self.manifest,
            release_key=self.release_key,
            metrics_listen="127.0.0.1:0",
        )

    def flip(self, shipped: str) -> None:
        path = self.package.parent / shipped
        data = bytearray(path.read_bytes())
        data[0] ^= 0x01
        path.write_bytes(bytes(data))


@pytest.fixture
def release(tmp_path: Path) -> Release:
    package = tmp_path / "site" / "gnau_service"
    shutil.copytree(
        Path(gnau_service.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    manifest, key = tmp_path / "software.manifest", tmp_path / "release.vkey"
    manifest.write_bytes(sign_manifest(Manifest.of(Installation(package, ())), RELEASE))
    key.write_text(RELEASE.verifier.vkey + "\n")
    return Release(package, manifest, key)


def software_entries(store: Store) -> list[LogEntry]:
    """Every SOFTWARE_VERIFIED entry, each decoded with the log's key (so signed)."""
    verifier = store.signer.verifier
    entries = [decode_entry(data, verifier) for data in store.entries(0, store.size())]
    return [entry for entry in entries if entry.kind is EntryKind.SOFTWARE_VERIFIED]


def mismatch_gauge(exposition: bytes) -> str:
    (line,) = [
        line
        for line in exposition.decode().splitlines()
        if line.startswith("gnau_software_mismatch ")
    ]
    return line.split()[1]


def bearer(role: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {TOKENS[role]}"),)


async def test_the_start_checks_the_software_and_logs_it_after_its_start(
    settings: Settings, release: Release
) -> None:
    async with running(release.settings(settings), installation=release.installation) as app:
        verifier = app.store.signer.verifier
        kinds = [
            decode_entry(data, verifier).kind for data in app.store.entries(0, app.store.size())
        ]
        (entry,) = software_entries(app.store)
        assert app.metrics is not None
        assert mismatch_gauge(app.metrics.exposition()) == "0.0"
    assert kinds.index(EntryKind.SOFTWARE_VERIFIED) > kinds.index(EntryKind.SERVICE_STARTED)
    assert entry.payload == {
        "actor": "service",
        "result": "MATCHED",
        "manifest_sha256": release.digest,
        "mismatches": [],
        "mismatch_count": 0,
        "detail": "",
    }
    assert errors("payload-software-verified.schema.json", entry.payload) == []


async def test_verify_software_answers_logs_the_caller_and_raises_the_alert(
    settings: Settings, release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    async with (
        running(release.settings(settings), installation=release.installation) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        audit = audit_pb2_grpc.AuditServiceStub(channel)
        request = audit_pb2.VerifySoftwareRequest()
        matched = await audit.VerifySoftware(request, metadata=bearer("operator"))
        release.flip("gnau_service/web/js/receipt.js")
        mismatched = await audit.VerifySoftware(request, metadata=bearer("auditor"))
        assert app.metrics is not None
        alarm = mismatch_gauge(app.metrics.exposition())
        release.flip("gnau_service/web/js/receipt.js")  # back as it was
        again = await audit.VerifySoftware(request, metadata=bearer("operator"))
        calm = mismatch_gauge(app.metrics.exposition())
        entries = software_entries(app.store)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await audit.VerifySoftware(request, metadata=bearer("public"))
    assert (matched.result, matched.manifest_sha256) == ("MATCHED", release.digest)
    assert (mismatched.result, mismatched.mismatch_count) == ("MISMATCHED", 1)
    assert [(m.part, m.name, m.problem) for m in mismatched.mismatches] == [
        ("file", "gnau_service/web/js/receipt.js", "changed")
    ]
    assert (alarm, again.result, calm) == ("1.0", "MATCHED", "0.0")
    by_index = {entry.index: entry for entry in entries}
    logged = by_index[mismatched.entry_index].payload
    assert logged["result"] == "MISMATCHED"
    assert logged["mismatches"] == [
        {"part": "file", "name": "gnau_service/web/js/receipt.js", "problem": "changed"}
    ]
    assert str(logged["actor"]).startswith("token:")
    assert by_index[matched.entry_index].payload["actor"] != "service"
    assert len(entries) == 4  # the start's and the three answered
    assert errors("payload-software-verified.schema.json", logged) == []
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    alerts = [
        line
        for line in log_lines(capsys.readouterr().err)
        if line.get("event") == "software does not match its manifest"
    ]
    assert [(line["level"], line["mismatch_count"]) for line in alerts] == [("error", 1)]


async def test_without_a_manifest_nothing_is_checked_and_the_call_is_refused(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        audit = audit_pb2_grpc.AuditServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await audit.VerifySoftware(
                audit_pb2.VerifySoftwareRequest(), metadata=bearer("operator")
            )
        assert software_entries(app.store) == []
    found = why(refused.value)
    assert found.code is grpc.StatusCode.FAILED_PRECONDITION
    assert found.reason == "SOFTWARE_MANIFEST_NOT_CONFIGURED"
    assert found.metadata == {"setting": "software_manifest"}
    warned = [
        line
        for line in log_lines(capsys.readouterr().err)
        if line.get("event") == "no software manifest configured"
    ]
    assert [line["level"] for line in warned] == ["warning"]


async def test_the_daily_check_runs_again_by_itself(settings: Settings, release: Release) -> None:
    async with running(
        release.settings(settings),
        installation=release.installation,
        software_check_seconds=0.2,
    ) as app:
        release.flip("gnau_service/store/migrations/0001_tables.sqlite.sql")
        entries: list[LogEntry] = []
        for _ in range(100):
            entries = software_entries(app.store)
            if any(entry.payload["result"] == "MISMATCHED" for entry in entries):
                break
            await asyncio.sleep(0.05)
        assert app.software is not None and app.software.alarming
    assert entries[0].payload["result"] == "MATCHED"
    later = [entry.payload for entry in entries[1:]]
    assert later and all(payload["actor"] == "service" for payload in later)
    assert later[-1]["mismatches"] == [
        {
            "part": "file",
            "name": "gnau_service/store/migrations/0001_tables.sqlite.sql",
            "problem": "changed",
        }
    ]


async def test_a_manifest_signed_by_another_key_is_an_alert_at_start(
    settings: Settings, release: Release
) -> None:
    release.release_key.write_text(
        Signer("gnau-release", Ed25519PrivateKey.generate()).verifier.vkey + "\n"
    )
    async with running(release.settings(settings), installation=release.installation) as app:
        (entry,) = software_entries(app.store)
        assert app.metrics is not None
        assert mismatch_gauge(app.metrics.exposition()) == "1.0"
    assert entry.payload["result"] == "UNVERIFIED"
    assert entry.payload["manifest_sha256"] is None
    assert "does not verify" in str(entry.payload["detail"])


@pytest.mark.parametrize(
    "flags",
    [{"software_manifest": "m"}, {"release_key": "k"}],
)
def test_the_manifest_and_the_release_key_go_together(flags: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="--software-manifest and --release-key go together"):
        load_settings(None, {}, flags)


async def test_gnau_software_verify_target_asks_the_service(
    settings: Settings,
    release: Release,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GNAU_TOKEN", raising=False)
    async with running(release.settings(settings), installation=release.installation) as app:
        target = ["software", "verify", "--target", f"127.0.0.1:{app.port}", "--json"]
        release.flip("gnau_service/web/index.html")
        status = await asyncio.to_thread(main, [*target, "--token", TOKENS["auditor"]])
        printed = capsys.readouterr()
        refused = await asyncio.to_thread(main, target)
        entries = software_entries(app.store)
    assert status == 1
    assert json.loads(printed.out) == {
        "result": "MISMATCHED",
        "manifest_sha256": release.digest,
        "mismatches": [
            {"part": "file", "name": "gnau_service/web/index.html", "problem": "changed"}
        ],
        "mismatch_count": 1,
        "detail": "",
    }
    assert f"logged as entry {entries[-1].index}" in printed.err
    assert refused == 2 and "needs an operator's or an auditor's token" in capsys.readouterr().err
