"""The log's side of witnessing, against real witness servers (in this process, over HTTP): the
service asks each witness to cosign, keeps what it returns beside the checkpoint and serves it;
a witness that is down blocks nothing and shows as lag; a 409 is retried from the witness's size;
clients (CLI, Python client) refuse a checkpoint fewer than the quorum of their witnesses
cosigned."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2
from gnau_client import AsyncGnauClient, QuorumError

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.cosignature import WitnessKey, cosigners
from gnau_service.audit.note import SignedNote
from gnau_service.server.process.app import running
from gnau_service.server.process.config import ConfigError, Settings, load_settings
from gnau_service.server.process.witness_endpoints import WitnessEndpoint, WitnessSpecError
from gnau_service.server.process.witnessing import Submission, WitnessStatus
from gnau_service.store import Store
from gnau_service.store.cosignatures import WitnessQuorum, cosigned_size
from tests.audit.logs import new_signer
from tests.catalogued import catalogue
from tests.conftest import Run
from tests.schemas.test_receipt_script import docs_script
from tests.server.conftest import TOKENS, Service
from tests.server.test_metrics import scrape, value
from tests.server.test_service import play
from tests.server.witnessed import WitnessSpec, down_witness, local_witness, log_vkey, until
from tests.store.test_schema_startup import append_as_older_gnau, older_gnau

ORIGIN = "gnau-dealer/witnessed"
STEPS_WITHOUT_PIN = "fairness, entries, round, outcome, checkpoint, inclusion"
#: The tables these tests deal at, catalogued for the default operator (issue 38).
TABLES = ("t1", "t2", "t3")

Gnau = Callable[..., Run]


@dataclass
class Witnessed:
    """A service asking three witnesses, of which only ``up`` answers."""

    service: Service
    up: WitnessSpec
    down: tuple[WitnessSpec, WitnessSpec]

    @property
    def keys(self) -> list[str]:
        return [self.up.vkey, *(spec.vkey for spec in self.down)]

    def status(self, spec: WitnessSpec) -> WitnessStatus:
        witnessing = self.service.app.witnessing
        assert witnessing is not None
        return next(status for status in witnessing.statuses if status.name == spec.name)

    def log_size(self) -> int:
        return self.service.app.tail.size

    async def cosigned_by_up(self) -> None:
        """Wait until the witness that is up has cosigned the log as it is now."""
        size = self.log_size()
        await until(lambda: self.status(self.up).cosigned_size >= size)


@pytest.fixture
async def witnessed(settings: Settings, tmp_path: Path) -> AsyncIterator[Witnessed]:
    """The server fixture's service (SQLite and PostgreSQL) with its HTTP port, asking one
    witness that is up and two that are down; its own quorum is 1. :data:`TABLES` are
    catalogued."""
    vkey = log_vkey(settings.data_dir, ORIGIN)
    async with local_witness(tmp_path / "w1", "witness.test/w1", ORIGIN, vkey) as up:
        down = (down_witness("witness.test/w2"), down_witness("witness.test/w3"))
        with_witnesses = dataclasses.replace(
            settings,
            origin=ORIGIN,
            http_listen="127.0.0.1:0",
            witnesses=(up.flag, *(spec.flag for spec in down)),
            witness_quorum=1,
            witness_interval_ms=20,
        )
        async with (
            running(with_witnesses) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            await catalogue(app.store, TABLES)
            yield Witnessed(Service(app, with_witnesses, channel), up, down)


async def test_a_witness_down_blocks_no_round_and_shows_as_lag(witnessed: Witnessed) -> None:
    for table in ("t1", "t2", "t3"):
        await play(witnessed.service, table)  # each call answered: nothing waits for witnesses
    await witnessed.cosigned_by_up()
    size = witnessed.log_size()
    samples = await scrape(witnessed.service.app.http_port)
    up, (down, _) = witnessed.up.name, witnessed.down
    assert value(samples, "gnau_witness_lag_entries", witness=up) == 0
    assert value(samples, "gnau_witness_lag_entries", witness=down.name) == size
    assert value(samples, "gnau_witness_submissions_total", witness=up, result="cosigned") >= 1
    unreachable = {"witness": down.name, "result": "unreachable"}
    assert value(samples, "gnau_witness_submissions_total", **unreachable) >= 1
    assert (
        value(samples, "gnau_witness_submissions_total", witness=down.name, result="cosigned") == 0
    )
    assert value(samples, "gnau_witness_cosignature_age_seconds", witness=up) < 60


async def test_get_checkpoint_serves_the_cosignatures_and_a_client_counts_them(
    witnessed: Witnessed,
) -> None:
    await play(witnessed.service, "t1")
    await witnessed.cosigned_by_up()
    response = await witnessed.service.call(
        "audit", "GetCheckpoint", audit_pb2.GetCheckpointRequest(cosigned=True), role=None
    )
    note = SignedNote.parse(response.checkpoint)
    # The log's own signature and the one witness's: the spec's note with one more line.
    assert [signature.name for signature in note.signatures] == [ORIGIN, witnessed.up.name]
    keys = [WitnessKey.from_vkey(vkey) for vkey in witnessed.keys]
    assert [c.key.name for c in cosigners(note, keys)] == [witnessed.up.name]
    assert Checkpoint.parse(note.text).size == witnessed.status(witnessed.up).cosigned_size

    target = f"127.0.0.1:{witnessed.service.app.port}"
    async with AsyncGnauClient(target) as client:
        with pytest.raises(QuorumError, match=r"1 valid cosignatures .* than the quorum of 2"):
            await client.get_checkpoint(witnesses=witnessed.keys, quorum=2)
        with pytest.raises(QuorumError):
            await client.get_checkpoint(witnesses=witnessed.keys)  # all three by default
        accepted = await client.get_checkpoint(witnesses=witnessed.keys, quorum=1)
    assert accepted == response.checkpoint


# The command line reads any backend alike: SQLite is enough.
@pytest.mark.system
@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
async def test_the_cli_refuses_a_receipt_only_one_of_three_witnesses_cosigned(
    gnau: Gnau, witnessed: Witnessed, tmp_path: Path
) -> None:
    round_ = await play(witnessed.service, "t1")
    await witnessed.cosigned_by_up()
    request = dealer_pb2.GetRoundReceiptRequest(round_id=round_.round_id)
    receipt = await witnessed.service.call("dealer", "GetRoundReceipt", request, role=None)
    path = tmp_path / "receipt.json"
    path.write_text(receipt.receipt, encoding="utf-8")
    # The receipt proves the round against the newest checkpoint the service's quorum cosigned.
    checkpoint = SignedNote.parse(json.loads(receipt.receipt)["checkpoint"])
    assert [signature.name for signature in checkpoint.signatures][1:] == [witnessed.up.name]

    vkey = witnessed.service.app.store.signer.vkey
    witnesses = [arg for key in witnessed.keys for arg in ("--witness", key)]
    base = ["receipt", "verify", str(path), "--key", vkey, *witnesses]
    refused = gnau(*base, "--quorum", "2")
    assert refused.status == 1, refused.err
    assert "INVALID at step checkpoint" in refused.out
    assert "fewer than the quorum of 2" in refused.out
    accepted = gnau(*base, "--quorum", "1")
    assert accepted.status == 0, accepted.out + accepted.err
    assert f"cosigned by 1 witnesses ({witnessed.up.name})" in accepted.out
    unusable = gnau(*base, "--quorum", "4")
    assert unusable.status == 2
    assert "--quorum 4 is not between 0 and the 3 --witness" in unusable.err

    # The standalone script of docs/receipts.md says the same, in an isolated interpreter.
    script = tmp_path / "verify_receipt.py"
    script.write_text(docs_script(), encoding="utf-8")
    said = {}
    for quorum in ("2", "1"):
        ran = subprocess.run(
            [sys.executable, "-I", str(script), str(path), vkey, *witnesses, "--quorum", quorum],
            capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        said[quorum] = (ran.returncode, ran.stdout + ran.stderr)
    assert said["2"][0] == 1, said
    assert "INVALID at step checkpoint: 1 of the witnesses cosigned, not 2" in said["2"][1]
    assert said["1"] == (0, f"round {round_.round_id}: VALID: {STEPS_WITHOUT_PIN}\n"), said


async def test_a_409_is_retried_from_the_size_the_witness_holds(
    tmp_path: Path, settings: Settings
) -> None:
    """The service forgets what the witness cosigned (its rows are gone): its first request says
    ``old 0``, the witness answers 409 with its size, and the next request, from that size,
    is cosigned."""
    vkey = log_vkey(settings.data_dir, ORIGIN)
    async with local_witness(tmp_path / "w1", "witness.test/w1", ORIGIN, vkey) as up:
        with_witness = dataclasses.replace(
            settings, origin=ORIGIN, witnesses=(up.flag,), witness_interval_ms=20
        )
        async with running(with_witness) as app:
            service = Service(app, with_witness, grpc.aio.insecure_channel(f"127.0.0.1:{app.port}"))
            await catalogue(app.store, TABLES)
            await play(service, "t1")
            assert app.witnessing is not None
            (status,) = app.witnessing.statuses
            first = app.tail.size
            await until(lambda: status.cosigned_size >= first)
            await service.channel.close()
            await app.store.run_async(lambda tx: tx.execute("DELETE FROM checkpoint_cosignatures"))
        async with running(with_witness) as app:
            assert app.witnessing is not None
            (status,) = app.witnessing.statuses
            assert status.witness_size == 0  # nothing kept: it asks from 0
            size = app.tail.size  # grown by the restart's own entry
            await until(lambda: status.cosigned_size >= size)
            assert status.submissions[Submission.CONFLICT] == 1
            assert status.submissions[Submission.COSIGNED] >= 1
            quorum = WitnessQuorum((up.vkey,), 1)
            assert cosigned_size(app.store, quorum) == size


def test_witness_settings_are_checked_at_start(tmp_path: Path) -> None:
    good = down_witness("witness.test/w1")
    with pytest.raises(ConfigError, match=r"witness_quorum.* is 2, more than the 1 witnesses"):
        load_settings(None, {}, {"witnesses": [good.flag], "witness_quorum": "2"})
    with pytest.raises(ConfigError, match="expected URL=VKEY"):
        load_settings(None, {"GNAU_WITNESSES": "ftp://x=" + good.vkey}, {})
    with pytest.raises(ConfigError, match="witness http://x"):
        load_settings(None, {"GNAU_WITNESSES": "http://x=not+a+key"}, {})
    other = down_witness("witness.test/w2")
    settings = load_settings(None, {"GNAU_WITNESSES": f"{good.flag}, {other.flag}"}, {})
    assert settings.witnesses == (good.flag, other.flag)
    config = tmp_path / "gnau.toml"
    config.write_text(f"witnesses = [{json.dumps(good.flag)}]\nwitness_interval_ms = 250\n")
    settings = load_settings(config, {}, {})
    assert (settings.witnesses, settings.witness_interval_ms) == ((good.flag,), 250)


def test_a_witness_is_its_submission_prefix_and_its_key() -> None:
    spec = down_witness("witness.test/w1")
    endpoint = WitnessEndpoint.parse(spec.url + "/prefix/=" + spec.vkey)
    assert endpoint.add_checkpoint_url == spec.url + "/prefix/add-checkpoint"
    assert endpoint.key.vkey == spec.vkey
    for bad in (
        spec.vkey,
        "=" + spec.vkey,
        "http://=" + spec.vkey,
        spec.url + "=" + TOKENS["public"],
    ):
        with pytest.raises(WitnessSpecError):
            WitnessEndpoint.parse(bad)


# The command line reads any backend alike: SQLite is enough.
@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
async def test_audit_verify_anchors_only_on_checkpoints_the_quorum_cosigned(
    gnau: Gnau, witnessed: Witnessed, tmp_path: Path
) -> None:
    await play(witnessed.service, "t1")
    await witnessed.cosigned_by_up()
    bundle = tmp_path / "bundle.jsonl"
    database = witnessed.service.settings.database_url
    exported = gnau("audit", "export", "--database", database, "--out", str(bundle))
    assert exported.status == 0, exported.err
    # The export carries the cosignatures: its last checkpoint has the log's and the witness's.
    last = json.loads(bundle.read_text().splitlines()[-1 - witnessed.log_size()])["checkpoint"]
    assert [s.name for s in SignedNote.parse(last).signatures] == [ORIGIN, witnessed.up.name]

    vkey = witnessed.service.app.store.signer.vkey
    witnesses = [arg for key in witnessed.keys for arg in ("--witness", key)]
    base = ["audit", "verify", str(bundle), "--key", vkey, "--jobs", "1", *witnesses]
    unanchored = gnau(*base, "--quorum", "2")
    assert unanchored.status == 1, unanchored.out + unanchored.err
    assert "no checkpoint was verified" in unanchored.out
    assert "result: UNANCHORED" in unanchored.out
    valid = gnau(*base, "--quorum", "1")
    assert valid.status == 0, valid.out + valid.err
    assert "result: VALID" in valid.out


def test_a_database_from_before_migration_4_still_exports(gnau: Gnau, tmp_path: Path) -> None:
    """The command line reads databases it does not migrate: one without the cosignatures'
    table exports its checkpoints as they are."""
    url = f"sqlite:///{tmp_path / 'v3.db'}"
    with Store(older_gnau(url, 3), new_signer()) as store:
        append_as_older_gnau(store, 3)
        notes = store.checkpoints()
    bundle = tmp_path / "bundle.jsonl"
    exported = gnau("audit", "export", "--database", url, "--out", str(bundle))
    assert exported.status == 0, exported.err
    lines = [json.loads(line) for line in bundle.read_text().splitlines()[1:]]
    assert [line["checkpoint"] for line in lines if "checkpoint" in line] == notes
