"""The independent verifiers on live rounds: fairness v1, v2 and v3 rounds played through a real
service (settled under several rule sets, voided before and after the deal and after the
reveal, one left open, a forget, a key rotation), the log exported with ``gnau audit export``
and each round's receipt from ``GetRoundReceipt``. The verifiers must find them all valid,
refuse tampered copies, and agree with ``gnau audit verify`` and ``gnau receipt verify``, run
as commands.

Only this file drives the service (with the harness of tests/schemas/served.py, which also
makes the v1 and v2 rounds); the verifiers it checks import nothing of gnau_service.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
)
from gnau.v1 import dealer_pb2, round_pb2, types_pb2

from gnau_service.audit.signing import LogSigner
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.server.grpc.convert import house_rules_from_proto
from gnau_service.server.process.app import running
from gnau_service.server.process.structured_logs import configure_logging
from tests.catalogued import catalogue
from tests.independent import forge, notes
from tests.independent.bundle import verify_bundle
from tests.independent.receipt import verify_receipt
from tests.schemas.served import settings_for, shuffling_rounds_of
from tests.server.conftest import Service, write_tokens
from tests.serving import REPO, gnau

SEATS = [
    round_pb2.Seat(seat_number=1, player_id="alice", stake=100, client_seed=b"alice's luck"),
    round_pb2.Seat(seat_number=2, player_id="bob", stake=250),
    round_pb2.Seat(seat_number=5, player_id="zoë", stake=7, client_seed=bytes(64)),
]
#: A v1 round may seat one player twice, under one id (SEATS: the others, by reference).
V1_SEATS = [*SEATS, round_pb2.Seat(seat_number=7, player_id="alice", stake=40)]
BIG_TABLE = [
    round_pb2.Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n, client_seed=bytes([n]))
    for n in (*range(1, 7), *range(8, 14))
]
BEACON = round_pb2.Beacon(label="drand/quicknet/round/12345678", value=bytes(range(32)))
EVERY_RULE = types_pb2.HouseRules(
    ten_is_duke=True,
    three_six_pair=True,
    trips_make_ox=False,
    five_small=False,
    tie=types_pb2.TIE_RULE_HIGH_CARD,
    payout=types_pb2.PAYOUT_TABLE_MULTIPLIER,
    suited_double=True,
    decks=2,
)
PUSH = types_pb2.HouseRules(tie=types_pb2.TIE_RULE_PUSH, payout=types_pb2.PAYOUT_TABLE_MULTIPLIER)
#: The rule sets the rounds are shuffled under (the default, EVERY_RULE, PUSH), which each of
#: their tables approves (issue 38: a round is dealt only at a catalogued table).
APPROVED = tuple(
    house_rules_from_proto(rules) for rules in (types_pb2.HouseRules(), EVERY_RULE, PUSH)
)
#: Each story: its fairness version, how it ends, and its house rules as the log names them.
STORIES = {
    "settled": (3, "ROUND_SETTLED"),
    "settled_every_rule": (3, "ROUND_SETTLED"),
    "settled_push": (3, "ROUND_SETTLED"),
    "voided_shuffled": (3, "ROUND_VOIDED"),
    "voided_dealt": (3, "ROUND_VOIDED"),
    "voided_revealed": (3, "ROUND_VOIDED"),
    "revealed": (3, "ROUND_REVEALED"),
    "v2_settled": (2, "ROUND_SETTLED"),
    "v2_voided_dealt": (2, "ROUND_VOIDED"),
    "v1_settled": (1, "ROUND_SETTLED"),
    "v1_settled_push": (1, "ROUND_SETTLED"),
    "v1_voided_shuffled": (1, "ROUND_VOIDED"),
    "v1_voided_dealt": (1, "ROUND_VOIDED"),
    "v1_voided_revealed": (1, "ROUND_VOIDED"),
    "settled_after_rotation": (3, "ROUND_SETTLED"),
}


@dataclass
class Live:
    """What the service wrote, and what a forger of its log would hold."""

    directory: Path
    vkey: str = ""
    origin: str = ""
    round_ids: dict[str, str] = field(default_factory=dict)
    receipts: dict[str, str] = field(default_factory=dict)
    pin: str = ""  # a checkpoint from before the rotation
    pinned_receipt: str = ""  # the "settled" round's, fetched with that pin
    bundle: bytes = b""
    range_bundle: bytes = b""  # gnau audit export --from-round, from v1_voided_dealt on
    keys: list[Ed25519PrivateKey] = field(default_factory=list)

    def write(self, name: str, data: bytes | str) -> Path:
        path = self.directory / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path


def _rid() -> str:
    return str(uuid.uuid4())


async def _play(live: Live, service: Service) -> None:
    async def step(method: str, request: Any) -> round_pb2.Round:
        answer = await service.call("dealer", method, request)
        assert isinstance(answer.round, round_pb2.Round)
        return answer.round

    async def shuffle(story: str, table: str, rules: types_pb2.HouseRules | None = None) -> str:
        request = dealer_pb2.ShuffleRequest(request_id=_rid(), table_id=table, house_rules=rules)
        live.round_ids[story] = (await step("Shuffle", request)).round_id
        return live.round_ids[story]

    async def deal(round_id: str, seats: list[round_pb2.Seat], beacon: bool = False) -> None:
        request = dealer_pb2.DealRequest(request_id=_rid(), round_id=round_id, seats=seats)
        if beacon:
            request.beacon.CopyFrom(BEACON)
        await step("Deal", request)

    async def reveal(round_id: str) -> None:
        await step("Reveal", dealer_pb2.RevealRequest(request_id=_rid(), round_id=round_id))

    async def settle(round_id: str) -> None:
        await step("Settle", dealer_pb2.SettleRequest(request_id=_rid(), round_id=round_id))

    async def void(round_id: str) -> None:
        request = dealer_pb2.VoidRoundRequest(
            request_id=_rid(),
            round_id=round_id,
            reason="the shoe was dropped",
            reason_code=round_pb2.VOID_REASON_GAME_MALFUNCTION,
        )
        await step("VoidRound", request)

    async def played_from(round_id: str, seats: Any, beacon: bool = False) -> str:
        await deal(round_id, seats, beacon)
        await reveal(round_id)
        return round_id

    async def played(story: str, table: str, rules: Any, seats: Any, beacon: bool = False) -> str:
        return await played_from(await shuffle(story, table, rules), seats, beacon)

    await settle(await played("settled", "table-1", None, SEATS))
    await settle(await played("settled_every_rule", "table-2", EVERY_RULE, BIG_TABLE, True))
    await settle(await played("settled_push", "table-3", PUSH, SEATS))
    await void(await shuffle("voided_shuffled", "table-4"))
    voided = await shuffle("voided_dealt", "table-5")
    await deal(voided, SEATS, beacon=True)
    await void(voided)
    await void(await played("voided_revealed", "table-6", None, SEATS))
    await played("revealed", "table-7", None, SEATS[:1])
    with shuffling_rounds_of(FairnessVersion.V2):
        v2 = {story: await shuffle(story, f"v2-{story}") for story in STORIES if "v2_" in story}
    await settle(await played_from(v2["v2_settled"], SEATS, beacon=True))
    await deal(v2["v2_voided_dealt"], SEATS)
    await void(v2["v2_voided_dealt"])
    with shuffling_rounds_of(FairnessVersion.V1):
        v1 = {story: await shuffle(story, f"v1-{story}") for story in STORIES if "v1_" in story}
    await deal(v1["v1_settled"], V1_SEATS, beacon=True)
    await reveal(v1["v1_settled"])
    await settle(v1["v1_settled"])
    await void(v1["v1_voided_shuffled"])
    await deal(v1["v1_voided_dealt"], V1_SEATS)
    await void(v1["v1_voided_dealt"])
    await deal(v1["v1_voided_revealed"], V1_SEATS)
    await reveal(v1["v1_voided_revealed"])
    await void(v1["v1_voided_revealed"])
    forget = dealer_pb2.ForgetPlayerRequest(player_id="bob", request_id=_rid())
    assert (await service.call("dealer", "ForgetPlayer", forget)).forgotten

    store = service.app.store
    live.pin = store.checkpoint() or ""
    new = Ed25519PrivateKey.generate()
    await asyncio.to_thread(store.rotate_key, LogSigner.from_private_key(live.origin, new))
    live.keys.append(new)
    await settle(await played("settled_after_rotation", "table-1", None, SEATS))
    # v1 rules under push, settled after the rotation: a v1 round outlives a key.
    await deal(v1["v1_settled_push"], V1_SEATS)
    await reveal(v1["v1_settled_push"])
    await settle(v1["v1_settled_push"])

    async def receipt(round_id: str, pinned_size: int = 0) -> str:
        request = dealer_pb2.GetRoundReceiptRequest(round_id=round_id, pinned_size=pinned_size)
        answer = await service.call("dealer", "GetRoundReceipt", request, role="public")
        return str(answer.receipt)

    for story, round_id in live.round_ids.items():
        live.receipts[story] = await receipt(round_id)
    pin_size = int(live.pin.split("\n")[1])
    live.pinned_receipt = await receipt(live.round_ids["settled"], pin_size)


async def _serve_and_play(live: Live) -> None:
    tokens = write_tokens(live.directory / "tokens.json")
    settings = settings_for(live.directory / "data", tokens)
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        live.vkey = app.store.signer.vkey
        live.origin = live.vkey.split("+")[0]
        tables = [f"table-{n}" for n in range(1, 8)]
        tables += [f"{story[:2]}-{story}" for story in STORIES if story.startswith(("v1_", "v2_"))]
        await catalogue(app.store, tables, *APPROVED)
        await _play(live, Service(app, settings, channel))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    configure_logging("json")
    played = Live(tmp_path_factory.mktemp("independent"))
    key_file = played.directory / "data" / "log-signing-key.pem"
    asyncio.run(_serve_and_play(played))
    first_key = load_pem_private_key(key_file.read_bytes(), None)
    assert isinstance(first_key, Ed25519PrivateKey)
    played.keys.insert(0, first_key)
    out = played.directory / "log.jsonl"
    database = f"sqlite:///{played.directory / 'data' / 'gnau.db'}"
    exported = gnau("audit", "export", "--database", database, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    played.bundle = out.read_bytes()
    first = played.round_ids["v1_voided_dealt"]
    ranged = gnau(
        "audit", "export", "--database", database, "--out", str(out), "--from-round", first
    )
    assert ranged.returncode == 0, ranged.stderr
    played.range_bundle = out.read_bytes()
    yield played


#: Runs ``gnau ARGS`` for each ARGS of a JSON list on stdin, as the command line does, and
#: writes [exit status, output] for each: one process for many commands, since starting one
#: costs more than verifying a bundle of this size.
RUN_EACH = """
import contextlib, io, json, sys
from gnau_service.cli.main import main
results = []
for argv in json.load(sys.stdin):
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 2
    results.append([status, output.getvalue()])
json.dump(results, sys.__stdout__)
"""


def _run_each(calls: list[list[str]]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", RUN_EACH]
    return subprocess.run(
        command, input=json.dumps(calls), capture_output=True, text=True, cwd=REPO, check=False
    )


def commands(calls: list[list[str]]) -> list[tuple[int, str]]:
    """Exit statuses and output of ``gnau`` commands, in two processes side by side."""
    halves = [calls[: len(calls) // 2], calls[len(calls) // 2 :]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(_run_each, halves))
    results = []
    for run in runs:
        assert run.returncode == 0, run.stderr
        results += [(status, output) for status, output in json.loads(run.stdout)]
    return results


# -- valid ------------------------------------------------------------------------------------


def test_the_live_log_verifies_and_holds_both_versions(live: Live) -> None:
    verdict = verify_bundle(live.bundle, live.vkey)
    assert (verdict.status, verdict.reason) == ("VALID", "")
    settled = sum(end == "ROUND_SETTLED" for _, end in STORIES.values())
    voided = sum(end == "ROUND_VOIDED" for _, end in STORIES.values())
    assert verdict.summary == {
        "entries": verdict.summary["entries"],
        "checkpoints": verdict.summary["checkpoints"],
        "settled": settled,
        "voided": voided,
        "open": 1,
    }
    _, _, entries = forge.read_bundle(live.bundle)
    committed = {e["round_id"]: e["payload"] for e in entries if e["kind"] == "ROUND_COMMITTED"}
    versions = {
        story: committed[live.round_ids[story]].get("fairness_version", 1) for story in STORIES
    }
    assert versions == {story: version for story, (version, _) in STORIES.items()}
    kinds = {e["kind"] for e in entries}
    assert {"KEY_ROTATED", "PLAYER_FORGOTTEN", "SERVICE_STARTED"} <= kinds
    # Issue 37: every entry names its actor; a clean stop is logged, and the settings at start.
    assert {"CONFIG_CHANGED", "SERVICE_STOPPED"} <= kinds
    assert all("actor" in e["payload"] for e in entries), [e["kind"] for e in entries]


@pytest.mark.parametrize(
    "story", [s for s in STORIES if s.endswith(("voided_dealt", "voided_revealed"))]
)
def test_a_void_after_the_deal_is_revealed_and_pays_the_better_of(live: Live, story: str) -> None:
    """The void of a dealt round follows its reveal, and pays each seat the better of its
    result and a refund: never less than the result, a loss refunded."""
    _, _, entries = forge.read_bundle(live.bundle)
    kinds = [e["kind"] for e in entries if e["round_id"] == live.round_ids[story]]
    assert kinds[-2:] == ["ROUND_REVEALED", "ROUND_VOIDED"]
    void = _payload(entries, live.round_ids[story], "ROUND_VOIDED")
    assert void["reason_code"] == "GAME_MALFUNCTION"
    assert void["state"] == ("DEALT" if story.endswith("voided_dealt") else "REVEALED")
    for paid, result in zip(void["paid"]["players"], void["result"]["players"], strict=True):
        assert paid == {"seat": result["seat"], "stake": result["stake"]} | {
            "delta": max(result["delta"], 0)
        }


@pytest.mark.parametrize("story", STORIES)
def test_every_live_receipt_verifies(live: Live, story: str) -> None:
    verdict = verify_receipt(live.receipts[story], [live.vkey])
    assert (verdict.status, verdict.reason) == ("VALID", "")
    receipt = json.loads(live.receipts[story])
    version, end = STORIES[story]
    assert json.loads(receipt["entries"][-1]["entry"])["kind"] == end
    if receipt["round"] is not None:
        assert receipt["round"]["format"] == f"gnau-dealer/revealed-round/v{version}"
    assert (receipt["round"] is None) == story.endswith("voided_shuffled")


def test_a_receipt_checks_against_a_pin(live: Live) -> None:
    verdict = verify_receipt(live.pinned_receipt, [live.vkey], live.pin)
    assert verdict.status == "VALID"
    assert verdict.passed[-1] == "consistency"
    # The receipt fetched without the pin carries no proof from it: nothing to conclude.
    assert verify_receipt(live.receipts["settled"], [live.vkey], live.pin).status == "CANNOT_CHECK"


# -- tampered ---------------------------------------------------------------------------------


@dataclass
class Case:
    """A document, what the verifier is given beside it, and the exit status the command
    gives it: 0 valid; 1 invalid (or unanchored); 2 for a receipt, cannot check."""

    data: bytes | str
    expected: int
    pin: str | None = None
    keys: list[str] | None = None  # the pinned keys; None: the log's first key
    witnesses: list[str] = field(default_factory=list)


def _payload(entries: list[dict[str, Any]], round_id: str, kind: str) -> dict[str, Any]:
    entry = next(e for e in entries if e["round_id"] == round_id and e["kind"] == kind)
    payload: dict[str, Any] = entry["payload"]
    return payload


def bundle_cases(live: Live) -> dict[str, Case]:
    ids, signed = live.round_ids, live.bundle
    header, _, _ = forge.read_bundle(signed)
    later_key = header["public_keys"][-1]

    def resigned(edit: Callable[[list[dict[str, Any]]], object]) -> bytes:
        return forge.resign(signed, live.keys, edit)

    def stake(entries: list[dict[str, Any]]) -> None:
        _payload(entries, ids["settled"], "ROUND_DEALT")["seats"][1]["stake"] += 1

    def another_reference(entries: list[dict[str, Any]]) -> None:
        # Not locked after v1: a log that names another reference is another valid log.
        seats = _payload(entries, ids["settled"], "ROUND_DEALT")["seats"]
        seats[0]["player_ref"] = "p-" + "ab" * 16

    def v1_player(entries: list[dict[str, Any]]) -> None:
        _payload(entries, ids["v1_settled"], "ROUND_DEALT")["seats"][0]["player_id"] = "mallory"

    def card(entries: list[dict[str, Any]]) -> None:
        deck = _payload(entries, ids["settled_push"], "ROUND_REVEALED")["deck"]
        deck[-1], deck[-2] = deck[-2], deck[-1]  # two cards set aside, swapped

    def delta(entries: list[dict[str, Any]]) -> None:
        settlement = _payload(entries, ids["v1_settled_push"], "ROUND_SETTLED")
        settlement["players"][0]["delta"] += 1
        settlement["dealer"]["delta"] -= 1

    def void_seed(entries: list[dict[str, Any]]) -> None:
        _payload(entries, ids["voided_dealt"], "ROUND_VOIDED")["server_seed"] = "00" * 32

    def void_pays_less(entries: list[dict[str, Any]]) -> None:
        paid = _payload(entries, ids["voided_revealed"], "ROUND_VOIDED")["paid"]
        paid["players"][0]["delta"] -= 1
        paid["dealer_delta"] += 1

    def void_as_before(entries: list[dict[str, Any]]) -> None:
        # The old form after the deal: a void that settles nothing.
        void = _payload(entries, ids["v1_voided_revealed"], "ROUND_VOIDED")
        for name in ("reason_code", "result", "paid"):
            del void[name]

    def bad_actor(entries: list[dict[str, Any]]) -> None:
        _payload(entries, ids["settled"], "ROUND_DEALT")["actor"] = "token:"

    def as_v1(entries: list[dict[str, Any]]) -> None:
        del _payload(entries, ids["voided_shuffled"], "ROUND_COMMITTED")["fairness_version"]

    def naming_a_player(entries: list[dict[str, Any]]) -> None:
        forgotten = next(e for e in entries if e["kind"] == "PLAYER_FORGOTTEN")
        forgotten["payload"]["player_id"] = "bob"

    lines = signed.decode().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith('{"entry"')]
    swapped = list(lines)
    swapped[at[5]], swapped[at[6]] = lines[at[6]], lines[at[5]]
    flipped = list(lines)
    signature = json.loads(json.loads(lines[at[3]])["entry"])["signature"]
    flipped[at[3]] = lines[at[3]].replace(
        signature, f"{int(signature[0], 16) ^ 1:x}{signature[1:]}"
    )
    pin_size = int(live.pin.split("\n")[1])
    wrong_root = forge.sign_checkpoint(live.origin, pin_size, b"\x07" * 32, live.keys[0])
    too_big = forge.sign_checkpoint(live.origin, header["size"] + 1, b"\x07" * 32, live.keys[1])
    stranger = Ed25519PrivateKey.generate()
    by_stranger = forge.sign_checkpoint(live.origin, pin_size, b"\x07" * 32, stranger)
    # A range: from a v1 round on, across the rotation; and a pin from before it, not compared.
    first = json.loads(live.range_bundle.split(b"\n")[0])["first_index"]
    before = forge.sign_checkpoint(live.origin, first - 1, b"\x07" * 32, live.keys[0])
    return {
        "as served, with its pin": Case(signed, 0, live.pin),
        "re-signed, another reference": Case(resigned(another_reference), 0),
        "re-signed, a stake": Case(resigned(stake), 1),
        "re-signed, a v1 player id": Case(resigned(v1_player), 1),
        "re-signed, a card": Case(resigned(card), 1),
        "re-signed, a delta": Case(resigned(delta), 1),
        "re-signed, a void's seed": Case(resigned(void_seed), 1),
        "re-signed, a void paying a seat less": Case(resigned(void_pays_less), 1),
        "re-signed, a void after the deal of the old form": Case(resigned(void_as_before), 1),
        "re-signed, an actor of no form": Case(resigned(bad_actor), 1),
        "re-signed, a v2 round read as v1": Case(resigned(as_v1), 1),
        "re-signed, a forget naming a player": Case(resigned(naming_a_player), 1),
        "two entries swapped": Case("".join(swapped).encode(), 1),
        "a signature bit": Case("".join(flipped).encode(), 1),
        "without its checkpoints": Case(
            "".join(line for line in lines if '"checkpoint"' not in line).encode(), 1
        ),
        "a pin with another root": Case(signed, 1, wrong_root),
        "a pin beyond the log": Case(signed, 1, too_big),
        "a pin by another key": Case(signed, 1, by_stranger),
        "a range, a pin before it": Case(live.range_bundle, 0, before),
        "a range, the key of a later place pinned": Case(live.range_bundle, 1, keys=[later_key]),
    }


def test_bundles_tampered_or_not_the_verifiers_agree(live: Live) -> None:
    cases = bundle_cases(live)
    calls, ours = [], {}
    for n, (name, case) in enumerate(cases.items()):
        key = (case.keys or [live.vkey])[0]
        args = ["audit", "verify", str(live.write(f"bundle-{n}.jsonl", case.data)), "--key", key]
        if case.pin is not None:
            args += ["--checkpoint", str(live.write(f"pin-{n}.txt", case.pin))]
        calls.append([*args, "--jobs", "1"])
        assert isinstance(case.data, bytes)
        verdict = verify_bundle(case.data, key, case.pin)
        ours[name] = (verdict.exit_status, f"{verdict.status}: {verdict.reason}")
    theirs = dict(zip(cases, commands(calls), strict=True))
    expected = {name: case.expected for name, case in cases.items()}
    assert {name: status for name, (status, _) in ours.items()} == expected, ours
    assert {name: status for name, (status, _) in theirs.items()} == expected, theirs
    # A pin older than a range cannot be compared with it: both say so, and pass.
    name = "a range, a pin before it"
    assert "predates" in theirs[name][1]
    assert (
        verify_bundle(live.range_bundle, live.vkey, cases[name].pin)
        .warnings[-1]
        .startswith("the pinned checkpoint predates")
    )


def _cosigned(note: str, witness: Ed25519PrivateKey, name: str) -> tuple[str, str]:
    """The checkpoint with a C2SP cosignature/v1 line (docs/witness.md), and the witness key."""
    public = witness.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = notes.key_id(name, notes.COSIGNATURE_V1, public)
    vkey = (
        f"{name}+{key_id.hex()}+{base64.b64encode(bytes([notes.COSIGNATURE_V1]) + public).decode()}"
    )
    text, time = note[: note.rfind("\n\n") + 1], 1_700_000_000
    signature = witness.sign(f"cosignature/v1\ntime {time}\n{text}".encode())
    blob = base64.b64encode(key_id + time.to_bytes(8, "big") + signature).decode()
    return f"{note}\u2014 {name} {blob}\n", vkey


def receipt_cases(live: Live) -> dict[str, Case]:
    header, _, _ = forge.read_bundle(live.bundle)
    later_key = header["public_keys"][-1]

    def edited(story: str, edit: Callable[[dict[str, Any]], object]) -> str:
        receipt = copy.deepcopy(json.loads(live.receipts[story]))
        edit(receipt)
        return json.dumps(receipt, ensure_ascii=False)

    def stake(r: dict[str, Any]) -> None:
        r["round"]["seats"][0]["stake"] += 1

    def reference(r: dict[str, Any]) -> None:
        r["round"]["seats"][0]["player_ref"] = "p-" + "cd" * 16  # fails only against the log

    def card(r: dict[str, Any]) -> None:
        r["round"]["dealer_hand"][0] = "AS" if r["round"]["dealer_hand"][0] != "AS" else "KS"

    def signature(r: dict[str, Any]) -> None:
        entry = r["entries"][1]["entry"]
        sig = json.loads(entry)["signature"]
        r["entries"][1]["entry"] = entry.replace(sig, f"{int(sig[0], 16) ^ 1:x}{sig[1:]}")

    def proof(r: dict[str, Any]) -> None:
        r["entries"][0]["inclusion_proof"][0] = "00" * 32

    def as_v2(r: dict[str, Any]) -> None:
        r["round"]["format"] = "gnau-dealer/revealed-round/v2"
        for seat in r["round"]["seats"]:
            del seat["player_id"]
            seat["player_ref"] = f"p-{seat['seat_number']:032x}"

    witness, stranger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()

    def cosigned(r: dict[str, Any]) -> None:
        r["checkpoint"] = _cosigned(r["checkpoint"], witness, "witness.example/w1")[0]

    def miscosigned(r: dict[str, Any]) -> None:
        r["checkpoint"] = _cosigned(r["checkpoint"], stranger, "witness.example/w1")[0]

    witness_key = _cosigned(live.pin, witness, "witness.example/w1")[1]
    size = int(live.pin.split("\n")[1])
    wrong = forge.sign_checkpoint(live.origin, size, b"\x07" * 32, live.keys[0])
    return {
        "v3 as served, with its pin": Case(live.pinned_receipt, 0, live.pin),
        "v1 as served": Case(live.receipts["v1_voided_dealt"], 0),
        "a stake": Case(edited("settled", stake), 1),
        "another reference": Case(edited("voided_revealed", reference), 1),
        "a card": Case(edited("v1_settled", card), 1),
        "a signature bit": Case(edited("settled_after_rotation", signature), 1),
        "an inclusion proof": Case(edited("v1_settled_push", proof), 1),
        "a v1 round read as v2": Case(edited("v1_settled", as_v2), 1),
        "a pin with another root": Case(live.pinned_receipt, 1, wrong),
        "a pin without its proof": Case(live.receipts["settled"], 2, live.pin),
        "the later key pinned, a round before it": Case(
            live.receipts["settled"], 1, keys=[later_key]
        ),
        "both keys pinned": Case(live.receipts["v1_settled_push"], 0, keys=[later_key, live.vkey]),
        "cosigned by the pinned witness": Case(
            edited("settled_every_rule", cosigned), 0, witnesses=[witness_key]
        ),
        "cosigned by another witness key": Case(
            edited("settled_every_rule", miscosigned), 1, witnesses=[witness_key]
        ),
    }


def test_receipts_tampered_or_not_the_verifiers_agree(live: Live) -> None:
    cases = receipt_cases(live)
    calls, ours = [], {}
    for n, (name, case) in enumerate(cases.items()):
        keys = case.keys or [live.vkey]
        args = ["receipt", "verify", str(live.write(f"receipt-{n}.json", case.data))]
        args += [option for key in keys for option in ("--key", key)]
        args += [option for key in case.witnesses for option in ("--witness", key)]
        if case.pin is not None:
            args += ["--checkpoint", str(live.write(f"receipt-pin-{n}.txt", case.pin))]
        calls.append(args)
        assert isinstance(case.data, str)
        verdict = verify_receipt(case.data, keys, case.pin, case.witnesses, len(case.witnesses))
        ours[name] = (verdict.exit_status, verdict.step, verdict.reason)
    theirs = dict(zip(cases, commands(calls), strict=True))
    expected = {name: case.expected for name, case in cases.items()}
    assert {name: status for name, (status, _, _) in ours.items()} == expected, ours
    assert {name: status for name, (status, _) in theirs.items()} == expected, theirs
    # Both name the same failing step (docs/receipts.md: "INVALID at step NAME: ...").
    for name, (status, step, _) in ours.items():
        if status == 1:
            assert f"INVALID at step {step}:" in theirs[name][1], (name, step, theirs[name][1])
