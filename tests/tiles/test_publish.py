"""``gnau tiles publish`` to a directory: every tile byte for byte, only new tiles on each pass,
a crash resumed without a gap or a rewrite, a fork never overwritten, and bundles of unrevealed
rounds withheld until the reveal. The expected tiles are computed from the entries alone
(:func:`tests.tiles.logs.expected_tiles`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit import tiles
from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.cosignature import WitnessSigner, cosign
from gnau_service.audit.note import SignedNote
from gnau_service.audit.signing import LogSigner
from gnau_service.audit.tiles import parse_tile_path
from gnau_service.cli import tiles_commands
from gnau_service.store import DEFAULT_DATABASE_URL, open_store
from gnau_service.store.cosignatures import WitnessQuorum, add_cosignature
from gnau_service.store.tiles import read_tile
from gnau_service.tiles.publisher import PublishError, publish_once
from gnau_service.tiles.targets import DirectoryTarget, TileConflict, open_target
from tests.cli.test_lazy_imports import imported_by, within
from tests.conftest import Run
from tests.postgres import fresh_database
from tests.steps import run_steps
from tests.tiles.logs import Log, expected_tiles, files_under, opened_log


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    with opened_log("sqlite", tmp_path) as opened:
        yield opened


def published(root: Path) -> dict[str, bytes]:
    """The tiles under ``root`` (the checkpoint apart); no temporary file is left."""
    files = files_under(root)
    assert not [path for path in files if path.endswith(".tmp")]
    files.pop("checkpoint", None)
    return files


def checkpoint_size(root: Path) -> int:
    return Checkpoint.parse(SignedNote.parse((root / "checkpoint").read_bytes()).text).size


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_log_is_published_tile_for_tile_as_its_entries_say(backend: str, tmp_path: Path) -> None:
    with opened_log(backend, tmp_path) as log:
        log.grow(600)
        round_id = log.deal()
        log.reveal(round_id)
        log.grow(100)
        entries = log.entries()
        root = tmp_path / "tiles"
        report = publish_once(log.store, DirectoryTarget(root))
        expected = expected_tiles(entries)
        assert published(root) == expected
        assert sorted(report.paths_written) == sorted(expected)
        assert (report.written, report.present, report.bundles_withheld) == (len(expected), 0, 0)
        assert report.bytes_written == sum(map(len, expected.values()))
        # Partial tiles of levels 0 and 1, and a full level-0 tile and bundle are all there.
        assert {"tile/0/000", "tile/entries/001", "tile/1/000.p/2"} <= set(expected)
        # The checkpoint is the store's latest, signed by its key, of every entry.
        note = (root / "checkpoint").read_bytes()
        assert note.decode() == log.store.checkpoint()
        SignedNote.parse(note).verify([log.store.signer.verifier])
        assert checkpoint_size(root) == report.size == len(entries)
        # What the store renders is what was published.
        for path, data in expected.items():
            ref = parse_tile_path(path)
            assert read_tile(log.store, ref, public=True, covered_size=len(entries)) == data


def test_each_pass_writes_only_the_new_tiles_and_keeps_the_partial_ones(
    log: Log, tmp_path: Path
) -> None:
    root = tmp_path / "tiles"
    target = DirectoryTarget(root)
    log.grow(300)
    first = log.entries()
    publish_once(log.store, target)
    before = {path: (root / path).stat().st_ino for path in published(root)}
    log.grow(250)
    second = log.entries()
    report = publish_once(log.store, target)
    old, new = expected_tiles(first), expected_tiles(second)
    assert sorted(report.paths_written) == sorted(set(new) - set(old))
    assert report.previous_size == len(first) and report.size == len(second)
    # The tree of 300 entries' partial tiles stay: a client may hold that checkpoint.
    assert published(root) == old | new
    assert 256 < len(first) < 512
    assert f"tile/0/001.p/{len(first) - 256}" in published(root)
    # Nothing of the first pass was written again.
    assert {path: (root / path).stat().st_ino for path in before} == before
    # A pass with nothing new writes nothing, the checkpoint included.
    mtime = (root / "checkpoint").stat().st_mtime_ns
    again = publish_once(log.store, target)
    assert (again.written, again.bytes_written, again.checkpoint_written) == (0, 0, False)
    assert (root / "checkpoint").stat().st_mtime_ns == mtime
    assert published(root) == old | new


class CrashError(Exception):
    """The publisher's process dies here."""


class Recording:
    """A target that records each write's outcome, and crashes where it is told to."""

    def __init__(
        self, inner: DirectoryTarget, *, tiles: int | None = None, checkpoint: bool = False
    ) -> None:
        self.inner = inner
        self.tiles_left = tiles  # None: never crash on a tile
        self.crash_on_checkpoint = checkpoint
        self.outcomes: list[tuple[str, bool]] = []
        self.lock = threading.Lock()  # the publisher writes several tiles at once

    def put_new(self, path: str, data: bytes) -> bool:
        with self.lock:
            if self.tiles_left is not None:
                if self.tiles_left == 0:
                    raise CrashError(path)
                self.tiles_left -= 1
        written = self.inner.put_new(path, data)
        with self.lock:
            self.outcomes.append((path, written))
        return written

    def put(self, path: str, data: bytes, content_type: str, cache_control: str) -> None:
        if self.crash_on_checkpoint:
            raise CrashError(path)
        self.inner.put(path, data, content_type, cache_control)

    def get(self, path: str) -> bytes | None:
        return self.inner.get(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)


def test_a_crashed_pass_is_resumed_without_a_gap_or_a_rewrite(log: Log, tmp_path: Path) -> None:
    root = tmp_path / "tiles"
    log.grow(900)
    first = log.entries()
    # The first pass dies after 5 tiles (hash tiles and a bundle), before any checkpoint.
    with pytest.raises(CrashError):
        publish_once(log.store, Recording(DirectoryTarget(root), tiles=5))
    crashed = published(root)
    assert len(crashed) == 5 and not (root / "checkpoint").exists()
    inodes = {path: (root / path).stat().st_ino for path in crashed}
    # The log grows; the next pass writes every tile and dies before the checkpoint.
    log.grow(200)
    second = log.entries()
    resumed = Recording(DirectoryTarget(root), checkpoint=True)
    with pytest.raises(CrashError):
        publish_once(log.store, resumed)
    assert not (root / "checkpoint").exists()
    # Then a pass that completes.
    last = Recording(DirectoryTarget(root))
    report = publish_once(log.store, last)
    assert report.size == len(second) and report.checkpoint_written
    # Each tile was written once: a later pass found it with the same bytes, or skipped it.
    outcomes = [*resumed.outcomes, *last.outcomes]
    written = [path for path, done in outcomes if done]
    assert len(written) == len(set(written))
    assert not set(written) & set(crashed)
    assert not any(done for _, done in last.outcomes)
    assert {path: (root / path).stat().st_ino for path in inodes} == inodes
    # No gap: everything of the final tree, and only tiles of the two trees.
    assert set(expected_tiles(second)) <= set(published(root))
    assert published(root) == {
        path: data
        for path, data in (expected_tiles(first) | expected_tiles(second)).items()
        if path in published(root)
    }
    assert checkpoint_size(root) == len(second)


def test_a_pass_that_stopped_among_parallel_bundle_writes_leaves_no_gap(
    log: Log, tmp_path: Path
) -> None:
    """Bundles are written several at a time: a crash may leave bundle 3 missing and bundle 4
    written. The next pass finds the hole, not just the last bundle there."""
    root = tmp_path / "tiles"
    log.grow(1500)
    entries = log.entries()
    publish_once(log.store, DirectoryTarget(root))
    (root / "checkpoint").unlink()
    (root / "tile" / "entries" / "003").unlink()
    inode = (root / "tile" / "entries" / "004").stat().st_ino
    report = publish_once(log.store, DirectoryTarget(root))
    assert report.paths_written == ["tile/entries/003"]
    assert published(root) == expected_tiles(entries)
    assert (root / "tile" / "entries" / "004").stat().st_ino == inode


def test_a_tile_with_other_bytes_is_a_conflict_and_is_never_overwritten(
    log: Log, tmp_path: Path, gnau: Callable[..., Run]
) -> None:
    root = tmp_path / "tiles"
    log.grow(600)
    (root / "tile" / "0").mkdir(parents=True)
    forged = b"\x07" * 8192
    (root / "tile" / "0" / "001").write_bytes(forged)
    with pytest.raises(TileConflict, match="tile/0/001"):
        publish_once(log.store, DirectoryTarget(root))
    assert (root / "tile" / "0" / "001").read_bytes() == forged
    assert not (root / "checkpoint").exists()  # nothing is committed to over a conflict
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    run = gnau("tiles", "publish", "--database", url, "--to", str(root))
    assert run.status == 1
    assert "tile/0/001 already holds 8,192 bytes that differ" in run.err
    assert (root / "tile" / "0" / "001").read_bytes() == forged


def test_a_target_holding_another_log_or_a_fork_is_refused(log: Log, tmp_path: Path) -> None:
    log.grow(300)
    root = tmp_path / "tiles"
    # A second log under the same name, with other entries: a fork of this one.
    signer = LogSigner.from_private_key("gnau-dealer/test", Ed25519PrivateKey.generate())
    with open_store(f"sqlite:///{tmp_path / 'fork.db'}", signer) as fork:
        Log(fork).grow(200)
        publish_once(fork, DirectoryTarget(root))
    with pytest.raises(PublishError, match=r"another root .* a fork"):
        publish_once(log.store, DirectoryTarget(root))
    # Another log's checkpoint altogether.
    other = tmp_path / "other"
    signer = LogSigner.from_private_key("gnau-dealer/other", Ed25519PrivateKey.generate())
    with open_store(f"sqlite:///{tmp_path / 'other.db'}", signer) as elsewhere:
        Log(elsewhere).grow(10)
        publish_once(elsewhere, DirectoryTarget(other))
    with pytest.raises(PublishError, match="of the log 'gnau-dealer/other'"):
        publish_once(log.store, DirectoryTarget(other))
    # A checkpoint of this log's key and name beyond its size: a rollback of the database.
    ahead = tmp_path / "ahead"
    with open_store(f"sqlite:///{tmp_path / 'longer.db'}", log.store.signer) as longer:
        Log(longer).grow(400)
        publish_once(longer, DirectoryTarget(ahead))
    with pytest.raises(PublishError, match="entries, beyond the log's"):
        publish_once(log.store, DirectoryTarget(ahead))


def test_a_bundle_waits_until_every_round_in_it_is_revealed(
    log: Log, tmp_path: Path, gnau: Callable[..., Run]
) -> None:
    public, private = tmp_path / "public", tmp_path / "auditors"
    log.grow(300)
    round_id = log.deal()  # its entries are in bundle 1
    log.grow(250)  # bundle 1 fills up; bundle 2 is partial
    dealt = log.entries()
    report = publish_once(log.store, DirectoryTarget(public))
    expected = expected_tiles(dealt)
    bundles = sorted(path for path in expected if path.startswith("tile/entries/"))
    assert bundles == [
        "tile/entries/000",
        "tile/entries/001",
        f"tile/entries/002.p/{len(dealt) - 512}",
    ]
    # Bundle 0 is out; bundle 1 holds the dealt round, so it and the ones after it wait.
    assert report.bundles_withheld == 2
    assert published(public) == {
        path: data for path, data in expected.items() if path not in bundles[1:]
    }
    assert checkpoint_size(public) == len(dealt)  # the hash tiles are public: checkpoint too
    assert round_id.encode() not in b"".join(published(public).values())
    # --all-bundles: an auditors' target gets every bundle at once.
    database = f"sqlite:///{tmp_path / 'gnau.db'}"
    run = gnau("tiles", "publish", "--database", database, "--to", str(private), "--all-bundles")
    assert run.status == 0, run.err
    assert "withheld" not in run.out
    assert published(private) == expected
    # After the reveal, the next pass publishes them (the partial one at the size of then).
    log.reveal(round_id)
    revealed = log.entries()
    report = publish_once(log.store, DirectoryTarget(public))
    assert report.bundles_withheld == 0
    withheld = {path: data for path, data in expected.items() if path not in bundles[1:]}
    assert published(public) == withheld | expected_tiles(revealed)
    assert f"tile/entries/002.p/{len(revealed) - 512}" in published(public)
    assert f"tile/entries/002.p/{len(dealt) - 512}" not in published(public)


def test_the_headers_are_those_docs_audit_md_gives() -> None:
    # One definition serves the HTTP port and the bucket (tests/web/test_tiles_http.py reads
    # the port's answers, test_publish_s3.py the bucket's objects).
    assert tiles.CHECKPOINT_CACHE_CONTROL == "public, max-age=2"
    assert tiles.TILE_CACHE_CONTROL == "public, max-age=604800, immutable"
    assert tiles.TILE_CONTENT_TYPE == "application/octet-stream"
    assert tiles.CHECKPOINT_CONTENT_TYPE == "text/plain; charset=utf-8"


def with_password(url: str, password: str) -> str:
    """``url`` (PostgreSQL's, with a user and no password) with ``password``."""
    parts = urlsplit(url)
    assert parts.username and not parts.password
    netloc = parts.netloc.replace(f"{parts.username}@", f"{parts.username}:{password}@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def test_the_command_publishes_and_never_says_the_database_password(
    tmp_path: Path, gnau: Callable[..., Run]
) -> None:
    """The test server trusts loopback: the password is sent, not checked."""
    secret = "pw-9f3a1c"
    with fresh_database() as url:
        signer = LogSigner.from_private_key("gnau-dealer/test", Ed25519PrivateKey.generate())
        with open_store(url, signer) as store:
            Log(store).grow(300)
            entries = list(store.iter_entries(0))
        database = with_password(url, secret)
        root = tmp_path / "tiles"
        run = gnau("tiles", "publish", "--database", database, "--to", str(root))
        assert run.status == 0, run.err
        expected = expected_tiles(entries)
        assert run.out == (
            f"published to {root}: checkpoint 300 entries (+300): 5 tiles written "
            f"({sum(map(len, expected.values())):,} bytes), 0 already there\n"
        )
        assert published(root) == expected
        for args in (
            ("--database", database, "--to", "ftp://example/x"),
            ("--database", database.replace("postgresql", "mysql", 1), "--to", str(root)),
        ):
            run = gnau("tiles", "publish", *args)
            assert run.status == 2
            assert secret not in run.out + run.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--to", "s3://"), "names no bucket"),
        (("--to", "http://example/tiles"), "--to is a directory or s3://"),
        (("--to", "DIR", "--endpoint-url", "http://127.0.0.1:1"), "--endpoint-url is for an s3"),
        (("--to", "DIR", "--follow", "0"), "--follow must be a number of seconds above 0"),
    ],
)
def test_unusable_arguments_are_refused(
    tmp_path: Path, gnau: Callable[..., Run], args: tuple[str, ...], message: str
) -> None:
    args = tuple(str(tmp_path / "out") if arg == "DIR" else arg for arg in args)
    run = gnau("tiles", "publish", "--database", f"sqlite:///{tmp_path / 'none.db'}", *args)
    assert run.status == 2
    assert run.err.startswith("gnau tiles publish: ") and message in run.err


def test_a_missing_database_is_refused(tmp_path: Path, gnau: Callable[..., Run]) -> None:
    run = gnau(
        "tiles",
        "publish",
        "--database",
        f"sqlite:///{tmp_path / 'none.db'}",
        "--to",
        str(tmp_path / "out"),
    )
    assert (run.status, run.err) == (
        2,
        f"gnau tiles publish: there is no database at 'sqlite:///{tmp_path / 'none.db'}'\n",
    )


def test_open_target_reads_to() -> None:
    target = open_target("s3://bucket/some/prefix/", endpoint_url="http://127.0.0.1:1")
    assert str(target) == "s3://bucket/some/prefix"
    assert isinstance(open_target("relative/dir"), DirectoryTarget)


def test_following_publishes_each_pass_until_a_signal(log: Log, tmp_path: Path) -> None:
    log.grow(100)
    root = tmp_path / "tiles"
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    command = [
        sys.executable,
        "-m",
        "gnau_service.cli.main",
        "tiles",
        "publish",
        "--database",
        url,
        "--to",
        str(root),
        "--follow",
        "0.2",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reading = threading.Thread(
        target=lambda: lines.extend(iter(process.stderr.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    reading.start()

    def said(text: str) -> bool:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(text in line for line in lines):
                return True
            time.sleep(0.05)
        return False

    try:
        size = log.store.size()
        assert said(f"checkpoint {size:,} entries (+{size:,}): 2 tiles written")
        log.grow(200)
        assert said(f"checkpoint {size + 200:,} entries (+200)")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reading.join(timeout=5)
    assert lines[-1].rstrip().endswith("stopped")
    assert published(root) == expected_tiles(log.entries()[:size]) | expected_tiles(log.entries())
    assert os.stat(root / "checkpoint").st_size > 0


def test_the_command_imports_its_work_only_when_it_runs() -> None:
    """Parsing ``gnau tiles publish`` imports neither the store nor boto3: both load in the
    run (``gnau --help`` stays fast)."""
    modules = imported_by("tiles", "publish", "--to", "s3://bucket")
    assert within(modules, ("boto3", "botocore", "gnau_service.store", "psycopg")) == []
    assert tiles_commands.DEFAULT_DATABASE_URL == DEFAULT_DATABASE_URL


def test_with_a_quorum_the_newest_cosigned_checkpoint_is_published(
    log: Log, tmp_path: Path
) -> None:
    witness = WitnessSigner("witness.example/w1", Ed25519PrivateKey.generate())
    quorum = WitnessQuorum((witness.vkey,), 1)
    log.grow(300)
    root = tmp_path / "tiles"
    # No checkpoint is cosigned yet: nothing is published, not even the latest.
    report = publish_once(log.store, DirectoryTarget(root), quorum=quorum)
    assert (report.written, report.checkpoint_written) == (0, False)
    assert not (root / "checkpoint").exists()
    cosigned = log.store.size()
    note = log.store.checkpoint(cosigned)
    assert note is not None
    body = SignedNote.parse(note).text
    line = cosign(witness, body, 1_700_000_000).line.rstrip("\n")  # kept without it
    run_steps(log.store, [lambda tx: add_cosignature(tx, cosigned, witness.vkey, line, 1)])
    log.grow(100)  # signed, not cosigned
    report = publish_once(log.store, DirectoryTarget(root), quorum=quorum)
    published_note = (root / "checkpoint").read_text()
    assert Checkpoint.parse(SignedNote.parse(published_note).text).size == cosigned
    assert published_note == note + line + "\n"
    assert report.size == cosigned
    assert not any(
        parse_tile_path(path).end_leaf > cosigned
        for path in published(root)
        if path != "checkpoint"
    )
