"""``gnau tiles publish`` to a real S3-compatible bucket: SeaweedFS's ``weed mini`` on loopback
(:mod:`tests.tiles.conftest`). Every object byte for byte with the headers of the HTTP port,
conditional writes the bucket itself refuses (412), and the command end to end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from gnau_service.tiles.publisher import publish_once
from gnau_service.tiles.targets import S3Target, TileConflict
from tests.conftest import Run
from tests.tiles.conftest import Seaweed
from tests.tiles.logs import Log, expected_tiles, opened_log

pytestmark = pytest.mark.system  # weed mini: about 4 s in all


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Log]:
    with opened_log("sqlite", tmp_path_factory.mktemp("s3-log")) as opened:
        opened.grow(600)
        yield opened


def test_a_log_is_published_to_a_bucket_with_the_http_ports_headers(
    seaweed: Seaweed, log: Log
) -> None:
    bucket = seaweed.bucket()
    target = S3Target(bucket, "logs/gnau", seaweed.client)
    entries = log.entries()
    report = publish_once(log.store, target)
    expected = expected_tiles(entries)
    objects = seaweed.objects(bucket, "logs/gnau/")
    assert objects.pop("checkpoint").decode() == log.store.checkpoint()
    assert objects == expected
    assert report.written == len(expected)
    head = seaweed.client.head_object(Bucket=bucket, Key="logs/gnau/tile/0/000")
    assert (head["ContentType"], head["CacheControl"]) == (
        "application/octet-stream",
        "public, max-age=604800, immutable",
    )
    head = seaweed.client.head_object(Bucket=bucket, Key="logs/gnau/checkpoint")
    assert (head["ContentType"], head["CacheControl"]) == (
        "text/plain; charset=utf-8",
        "public, max-age=2",
    )
    # A second pass writes nothing; a pass after growth only the new tiles.
    again = publish_once(log.store, target)
    assert (again.written, again.checkpoint_written) == (0, False)
    log.grow(300)
    grown = log.entries()
    report = publish_once(log.store, target)
    assert sorted(report.paths_written) == sorted(set(expected_tiles(grown)) - set(expected))
    objects = seaweed.objects(bucket, "logs/gnau/")
    del objects["checkpoint"]
    assert objects == expected | expected_tiles(grown)


def test_the_bucket_refuses_a_second_write_and_a_conflict_is_never_overwritten(
    seaweed: Seaweed, log: Log
) -> None:
    bucket = seaweed.bucket()
    # SeaweedFS honours If-None-Match: * (412), so the bucket, not the publisher, is the guard.
    seaweed.client.put_object(Bucket=bucket, Key="probe", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        seaweed.client.put_object(Bucket=bucket, Key="probe", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    target = S3Target(bucket, "", seaweed.client)
    assert target.put_new("tile/0/000", b"a" * 32) is True
    assert target.put_new("tile/0/000", b"a" * 32) is False
    with pytest.raises(TileConflict, match="tile/0/000 already holds 32 bytes"):
        target.put_new("tile/0/000", b"b" * 32)
    assert target.get("tile/0/000") == b"a" * 32
    assert target.get("tile/0/001") is None
    # A forged tile where the log's would go: the pass stops, the forgery stays, no checkpoint.
    with pytest.raises(TileConflict):
        publish_once(log.store, target)
    assert target.get("tile/0/000") == b"a" * 32
    assert target.get("checkpoint") is None


def test_the_command_publishes_to_a_bucket(
    seaweed: Seaweed, log: Log, tmp_path: Path, gnau: Callable[..., Run], s3_credentials: None
) -> None:
    bucket = seaweed.bucket()
    database = f"sqlite:///{log.store.backend.path}"  # type: ignore[attr-defined]
    args = ("tiles", "publish", "--database", database, "--to", f"s3://{bucket}/p")
    run = gnau(*args, "--endpoint-url", seaweed.endpoint)
    assert run.status == 0, run.err
    assert run.out.startswith(f"published to s3://{bucket}/p: checkpoint ")
    objects = seaweed.objects(bucket, "p/")
    del objects["checkpoint"]
    assert objects == expected_tiles(log.entries())
    # A bucket that is not there: the target cannot be used.
    missing = ("tiles", "publish", "--database", database, "--to", "s3://no-such-bucket-here")
    run = gnau(*missing, "--endpoint-url", seaweed.endpoint)
    assert run.status == 2
    assert run.err.startswith(
        "gnau tiles publish: s3://no-such-bucket-here: cannot read checkpoint"
    )
