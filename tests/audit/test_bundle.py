"""Audit bundles: an honest log verifies; every attack of the issue is caught, for its reason."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import rfc8785

from gnau_service.audit.bundle import BundleFormatError
from gnau_service.audit.bundle_report import BundleReport
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.entries import EntryKind, encode_entry
from gnau_service.audit.merkle import leaf_hash
from gnau_service.audit.note import sign_note
from gnau_service.audit.round_events import committed_payload, settle_round, settled_payload
from gnau_service.audit.signing import KeyRotation
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.house_rules import HouseRules
from tests.audit.logs import MemoryLog, honest_log, new_signer, play_round
from tests.references import ref

HEADER, FIRST_CHECKPOINT = 0, 1


def verify(log: MemoryLog, lines: list[str] | None = None, **options: object) -> BundleReport:
    """Verify ``lines`` (the log's own bundle by default) as the bytes a file would give."""
    options.setdefault("pinned_keys", [log.signer.verifier])
    text = lines if lines is not None else log.bundle_lines()
    return verify_bundle([line.encode() for line in text], **options)  # type: ignore[arg-type]


def entry_positions(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.startswith('{"entry"')]


def test_an_honest_log_verifies_and_replays_every_round() -> None:
    log = honest_log(rounds=4)
    report = verify(log)
    assert report.ok, report.summary()
    # A start, four settled rounds of four entries, and a void after the deal that reveals the
    # round first (committed, dealt, revealed, voided): 1 + 16 + 4.
    assert (report.entries, report.checkpoints) == (21, 6)
    assert (report.rounds_settled, report.rounds_voided, report.rounds_open) == (4, 1, 0)
    assert "result: VALID" in report.summary()


def test_an_unfinished_round_is_open_not_wrong() -> None:
    log = honest_log(rounds=1)
    committed = CommittedRound.with_fresh_seed("round-open", HouseRules())
    log.append(EntryKind.ROUND_COMMITTED, committed_payload(committed, "t"), "round-open")
    log.checkpoint()
    report = verify(log)
    assert report.ok
    assert report.rounds_open == 1


# -- tampering with stored entries ----------------------------------------------------------------


def flip_byte(line: str) -> str:
    obj = json.loads(line)
    text: str = obj["entry"]
    at = text.index('"payload"') + 12
    obj["entry"] = text[:at] + chr(ord(text[at]) ^ 1) + text[at + 1 :]
    return json.dumps(obj, ensure_ascii=False) + "\n"


EntryAttack = Callable[[list[str], list[int]], list[str]]


def _flip(lines: list[str], at: list[int]) -> list[str]:
    lines[at[5]] = flip_byte(lines[at[5]])
    return lines


def _delete(lines: list[str], at: list[int]) -> list[str]:
    del lines[at[5]]
    return lines


def _insert(lines: list[str], at: list[int]) -> list[str]:
    lines.insert(at[5], lines[at[2]])
    return lines


def _duplicate(lines: list[str], at: list[int]) -> list[str]:
    lines.insert(at[5], lines[at[5]])
    return lines


def _swap(lines: list[str], at: list[int]) -> list[str]:
    lines[at[5]], lines[at[6]] = lines[at[6]], lines[at[5]]
    return lines


@pytest.mark.parametrize(
    ("attack", "reason"),
    [
        (_flip, "entry 5: "),
        (_delete, "entry 5: the entry says index 6 but stands where 5 belongs"),
        (_insert, "entry 5: the entry says index 2 but stands where 5 belongs"),
        (_duplicate, "entry 6: the entry says index 5 but stands where 6 belongs"),
        (_swap, "entry 5: the entry says index 6 but stands where 5 belongs"),
    ],
    ids=["flipped byte", "deleted", "inserted", "duplicated", "swapped"],
)
def test_tampered_entries_are_caught(attack: EntryAttack, reason: str) -> None:
    log = honest_log()
    lines = log.bundle_lines()
    report = verify(log, attack(lines, entry_positions(lines)))
    assert not report.ok
    assert str(report.failure).startswith(reason), str(report.failure)


def test_a_flipped_byte_breaks_the_signature_or_the_canonical_form() -> None:
    log = honest_log()
    lines = log.bundle_lines()
    report = verify(log, _flip(lines, entry_positions(lines)))
    assert "signature does not verify" in str(report.failure) or "canonical" in str(report.failure)


def test_non_canonical_entry_bytes_are_refused() -> None:
    log = honest_log()
    lines = log.bundle_lines()
    position = entry_positions(lines)[3]
    entry = json.loads(json.loads(lines[position])["entry"])
    lines[position] = json.dumps({"entry": json.dumps(entry, indent=1)}) + "\n"
    report = verify(log, lines)
    assert str(report.failure) == "entry 3: bytes are not RFC 8785 canonical JSON"


def test_a_validly_signed_entry_with_the_wrong_index_is_caught() -> None:
    # The operator holds the key: the signature is good, the position is not.
    log = honest_log(rounds=1)
    data = encode_entry(
        log.signer.signer,
        index=99,
        kind=EntryKind.CONFIG_CHANGED,
        time=log.time,
        payload={},
        prev_hash=log.appender.head.prev_hash,
    )
    lines = log.bundle_lines()
    lines.append(json.dumps({"entry": data.decode()}) + "\n")
    header = json.loads(lines[HEADER])
    header["size"] += 1
    lines[HEADER] = json.dumps(header) + "\n"
    report = verify(log, lines)
    assert "the entry says index 99 but stands where" in str(report.failure)


def test_a_bundle_shorter_than_its_header_is_caught() -> None:
    log = honest_log()
    lines = log.bundle_lines()[:-2]
    report = verify(log, lines)
    assert "truncated or padded" in str(report.failure)


# -- truncation, rollback and forks ---------------------------------------------------------------


def test_truncation_is_caught_against_a_pinned_checkpoint() -> None:
    log = honest_log(rounds=4)
    pinned = log.notes[-1]
    # The same log, served again without its last two rounds (and their checkpoints).
    truncated = MemoryLog(log.signer)
    for data in log.entries[:9]:
        truncated.entries.append(data)
        truncated.tree.append(leaf_hash(data))
    truncated.notes = [note for note in log.notes if int(note.split("\n")[1]) <= 9]
    report = verify(truncated, pinned_checkpoint=pinned)
    assert "the log was truncated or rolled back" in str(report.failure)


def test_a_rewritten_history_is_caught_against_a_pinned_checkpoint() -> None:
    signer = new_signer()
    original = honest_log(rounds=2, signer=signer)
    pinned = original.notes[2]  # after the first round
    rewritten = honest_log(rounds=3, signer=signer)  # same key, other rounds
    report = verify(rewritten, pinned_checkpoint=pinned)
    assert "the log was rewritten" in str(report.failure)


def test_two_signed_checkpoints_with_different_roots_are_reported_as_a_fork() -> None:
    signer = new_signer()
    log = honest_log(rounds=2, signer=signer)
    other = honest_log(rounds=2, signer=signer)
    lines = log.bundle_lines()
    lines.insert(FIRST_CHECKPOINT + 2, json.dumps({"checkpoint": other.notes[2]}) + "\n")
    report = verify(log, lines)
    assert report.fork is not None
    assert "two different roots for size" in str(report.failure)
    assert "FORK:" in report.summary()


def _root_flipped(text: str) -> str:
    body = text.split("\n")
    body[2] = ("B" if body[2][0] != "B" else "C") + body[2][1:]
    return "\n".join(body)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda text: text.replace("\n9\n", "\n10\n", 1), "checkpoint refused"),
        (lambda text: text.replace("gnau-dealer/test\n", "gnau-dealer/other\n", 1), "refused"),
        (lambda text: text.replace("—", "-"), "checkpoint refused"),
        (lambda text: text.replace("\n", "\r\n"), "checkpoint refused"),
        (_root_flipped, "checkpoint refused"),
    ],
    ids=["size", "origin", "hyphen for em dash", "CRLF", "root"],
)
def test_edited_checkpoint_text_is_refused(edit: Callable[[str], str], reason: str) -> None:
    log = honest_log(rounds=2)
    lines = log.bundle_lines()
    checkpoints = [i for i, line in enumerate(lines) if line.startswith('{"checkpoint"')]
    position = next(i for i in checkpoints if "\n9\n" in json.loads(lines[i])["checkpoint"])
    note = json.loads(lines[position])["checkpoint"]
    lines[position] = json.dumps({"checkpoint": edit(note)}) + "\n"
    report = verify(log, lines)
    assert reason in str(report.failure), str(report.failure)


def test_a_checkpoint_signed_only_by_an_unknown_key_is_refused() -> None:
    log = honest_log(rounds=1)
    stranger = MemoryLog(new_signer())
    stranger.entries, stranger.tree = log.entries, log.tree
    stranger.appender.head = log.appender.head
    lines = log.bundle_lines()
    lines.insert(FIRST_CHECKPOINT, json.dumps({"checkpoint": stranger.checkpoint()}) + "\n")
    report = verify(log, lines)
    assert "checkpoint refused" in str(report.failure)


def test_a_bundle_signed_by_another_key_than_the_pinned_one_fails() -> None:
    log = honest_log(rounds=1)
    report = verify(log, pinned_keys=[new_signer().verifier])
    assert "but the trusted key at this point is" in str(report.failure)


# -- rounds that do not follow --------------------------------------------------------------------


def test_a_settlement_that_does_not_follow_from_the_hands_is_caught() -> None:
    log = honest_log(rounds=1)

    def cheat(kind: EntryKind, payload: dict, round_id: str | None) -> bytes:
        if kind is EntryKind.ROUND_SETTLED:
            payload = json.loads(json.dumps(payload))
            payload["players"][0]["delta"] += 1
            payload["dealer"]["delta"] -= 1
        return log.append(kind, payload, round_id)

    play_round(cheat, "round-cheat")
    log.checkpoint()
    report = verify(log)
    assert "round round-cheat: the logged settlement does not follow from the dealt hands" in str(
        report.failure
    )
    assert "settlement.dealer.delta is" in str(report.failure)


def test_a_revealed_seed_that_does_not_match_its_commitment_is_caught() -> None:
    log = honest_log(rounds=1)

    def cheat(kind: EntryKind, payload: dict, round_id: str | None) -> bytes:
        if kind is EntryKind.ROUND_REVEALED:
            payload = {**payload, "server_seed": "00" * 32}
        return log.append(kind, payload, round_id)

    play_round(cheat, "round-seed")
    log.checkpoint()
    report = verify(log)
    assert "round round-seed: commitment:" in str(report.failure)


def test_a_commitment_logged_after_its_deal_is_caught() -> None:
    log = honest_log(rounds=1)
    held: list[tuple[EntryKind, dict, str | None]] = []

    def late_commit(kind: EntryKind, payload: dict, round_id: str | None) -> None:
        if kind is EntryKind.ROUND_COMMITTED:
            held.append((kind, payload, round_id))
            return
        log.append(kind, payload, round_id)
        if kind is EntryKind.ROUND_DEALT:
            log.append(*held.pop())

    play_round(late_commit, "round-late")
    log.checkpoint()
    report = verify(log)
    assert "round round-late: ROUND_DEALT before anything else" in str(report.failure)


@pytest.mark.parametrize(
    ("void_after", "reason"),
    [
        (
            EntryKind.ROUND_COMMITTED,
            "round round-void-cheat: the seed revealed by its void does not match its commitment",
        ),
        # After the deal the void comes after its round's reveal, whose seed the commitment
        # checked: the void's must be that one.
        (
            EntryKind.ROUND_DEALT,
            "round round-void-cheat: the seed of its void is not the seed its reveal published",
        ),
    ],
    ids=["before the deal", "after the deal"],
)
def test_a_void_revealing_another_seed_is_caught(void_after: EntryKind, reason: str) -> None:
    log = honest_log(rounds=1)

    def cheat(kind: EntryKind, payload: dict, round_id: str | None) -> bytes:
        if kind is EntryKind.ROUND_VOIDED:
            payload = {**payload, "server_seed": "11" * 32}
        return log.append(kind, payload, round_id)

    play_round(cheat, "round-void-cheat", void_after=void_after)
    log.checkpoint()
    assert reason in str(verify(log).failure)


def test_a_round_settled_twice_is_caught() -> None:
    log = honest_log(rounds=1)
    committed = CommittedRound.with_fresh_seed("round-twice", HouseRules())
    dealt = committed.lock([LockedSeat(1, ref("p"), 5)]).deal()
    play_round(log.append, "round-twice")
    log.append(
        EntryKind.ROUND_SETTLED, settled_payload(settle_round(dealt.reveal())), "round-twice"
    )
    log.checkpoint()
    assert "ROUND_SETTLED after ROUND_SETTLED" in str(verify(log).failure)


# -- keys -----------------------------------------------------------------------------------------


def rotated_log(actor: dict[str, str]) -> BundleReport:
    """A log whose key is rotated by a KEY_ROTATED entry with ``actor`` beside its note, and
    a round after it, verified from the old key."""
    old, new = new_signer(), new_signer()
    log = honest_log(rounds=1, signer=old)
    rotation = KeyRotation(old.verifier, new.verifier, "2026-11-29T13:00:00Z").sign(old.signer)
    log.append(EntryKind.KEY_ROTATED, {"rotation": str(rotation), **actor})
    log.appender.signer = new
    play_round(log.append, "after-rotation")
    log.checkpoint()
    lines = log.bundle_lines()
    header = json.loads(lines[HEADER])
    header["public_keys"] = [old.vkey, new.vkey]
    lines[HEADER] = json.dumps(header) + "\n"
    return verify(log, lines, pinned_keys=[old.verifier])


@pytest.mark.parametrize("actor", [{}, {"actor": "console"}], ids=["older", "with-actor"])
def test_a_rotation_signed_by_the_old_key_hands_over_to_the_new_one(actor: dict[str, str]) -> None:
    report = rotated_log(actor)
    assert report.ok, report.summary()
    assert report.rounds_settled == 2


def test_a_rotation_naming_no_actor_of_the_forms_is_refused() -> None:
    report = rotated_log({"actor": "the operator"})
    assert "KEY_ROTATED's actor 'the operator' is not service, console" in str(report.failure)


def test_a_rotation_not_signed_by_the_current_key_is_refused() -> None:
    old, new, intruder = new_signer(), new_signer(), new_signer()
    log = honest_log(rounds=1, signer=old)
    statement = KeyRotation(old.verifier, new.verifier, "2026-11-29T13:00:00Z")
    rotation = sign_note(statement.to_note_text(), intruder.signer)
    log.append(EntryKind.KEY_ROTATED, {"rotation": str(rotation)})
    log.checkpoint()
    assert "key rotation refused" in str(verify(log).failure)


# -- unreadable bundles ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        ([b"not json\n"], "line 1 is not JSON"),
        ([b'{"format": "something else"}\n'], "header"),
        ([b'{"format": "gnau-dealer/audit-bundle/v1", "origin": "o"}\n'], "public_keys"),
        ([b"[1, 2]\n"], "not a JSON object"),
    ],
)
def test_unreadable_bundles_raise_a_format_error(lines: list[bytes], message: str) -> None:
    with pytest.raises(BundleFormatError, match=message):
        verify_bundle(lines)


def test_entries_are_stored_as_their_exact_canonical_bytes() -> None:
    log = honest_log(rounds=1)
    for line, data in zip(
        [line for line in log.bundle_lines() if line.startswith('{"entry"')],
        log.entries,
        strict=True,
    ):
        text = json.loads(line)["entry"]
        assert text.encode() == data == rfc8785.dumps(json.loads(text))


def test_worker_processes_find_the_same_first_failure() -> None:
    log = honest_log(rounds=3)
    assert verify(log, jobs=2).ok
    lines = log.bundle_lines()
    tampered = _delete(lines, entry_positions(lines))
    in_process, in_workers = verify(log, tampered, jobs=1), verify(log, tampered, jobs=2)
    assert in_workers.failure == in_process.failure
    assert str(in_workers.failure).startswith("entry 5: the entry says index 6")


def test_worker_processes_report_the_earliest_round_failure() -> None:
    log = honest_log(rounds=1)

    def cheat(kind: EntryKind, payload: dict, round_id: str | None) -> bytes:
        if kind is EntryKind.ROUND_SETTLED:
            payload = json.loads(json.dumps(payload))
            payload["dealer"]["delta"] -= 1
        return log.append(kind, payload, round_id)

    play_round(cheat, "first-cheat")
    play_round(cheat, "second-cheat")
    log.checkpoint()
    in_process, in_workers = verify(log, jobs=1), verify(log, jobs=2)
    assert in_workers.failure == in_process.failure
    assert "round first-cheat: the logged settlement does not follow" in str(in_workers.failure)


def test_worker_processes_report_a_refused_line_like_the_process_itself() -> None:
    # A line that holds no entry travels through the workers as its reason, in its place.
    log = honest_log(rounds=3)
    lines = log.bundle_lines()
    lines[entry_positions(lines)[7]] = '{"entry": ' + "[" * 5000 + "]" * 5000 + "}\n"
    in_process, in_workers = verify(log, lines, jobs=1), verify(log, lines, jobs=2)
    assert in_workers.failure == in_process.failure
    assert str(in_workers.failure).startswith("entry 7: line ")
    assert "nested too deeply" in str(in_workers.failure)


def test_worker_processes_settle_a_round_whose_hands_fit_no_seat_without_crashing() -> None:
    # In workers the settlement check runs beside the reveal check that fails first.
    log = honest_log(rounds=1)

    def cheat(kind: EntryKind, payload: dict, round_id: str | None) -> bytes:
        if kind is EntryKind.ROUND_DEALT:
            payload = json.loads(json.dumps(payload))
            payload["hands"][0]["seat_number"] = 9
        return log.append(kind, payload, round_id)

    play_round(cheat, "round-stray-hand")
    log.checkpoint()
    in_process, in_workers = verify(log, jobs=1), verify(log, jobs=2)
    assert in_workers.failure == in_process.failure
    assert "round round-stray-hand: hand of seat 1: no hand is published" in str(in_workers.failure)


def test_worker_processes_check_a_void_whose_hands_fit_no_seat_without_crashing() -> None:
    # As for a settlement: in workers the void's check runs beside the reveal check that fails
    # first, so it cannot count on that check's having refused hands of no locked seat.
    log = honest_log(rounds=1)

    def cheat(kind: EntryKind, payload: dict, round_id: str | None) -> bytes:
        if kind is EntryKind.ROUND_DEALT:
            payload = json.loads(json.dumps(payload))
            payload["hands"][0]["seat_number"] = 9
        return log.append(kind, payload, round_id)

    play_round(cheat, "round-stray-hand", void_after=EntryKind.ROUND_DEALT)
    log.checkpoint()
    in_process, in_workers = verify(log, jobs=1), verify(log, jobs=2)
    assert in_workers.failure == in_process.failure
    assert "round round-stray-hand: hand of seat 1: no hand is published" in str(in_workers.failure)


# -- erasure --------------------------------------------------------------------------------------


def test_a_player_forgotten_entry_names_no_one_and_changes_no_proof() -> None:
    log = honest_log(rounds=2)
    log.append(EntryKind.PLAYER_FORGOTTEN, {})
    play_round(log.append, "after-forgetting")
    log.checkpoint()
    report = verify(log)
    assert report.ok, report.summary()
    assert report.rounds_settled == 3

    named = honest_log(rounds=1)
    named.append(EntryKind.PLAYER_FORGOTTEN, {"player_id": "alice@example.com"})
    named.checkpoint()
    assert "PLAYER_FORGOTTEN's payload must be empty or hold only its actor and operator" in str(
        verify(named).failure
    )


def test_a_player_forgotten_entry_may_name_who_asked_and_nothing_more() -> None:
    log = honest_log(rounds=1)
    log.append(EntryKind.PLAYER_FORGOTTEN, {"actor": "token:casino-a-platform"})
    log.checkpoint()
    assert verify(log).ok, verify(log).summary()

    beside = honest_log(rounds=1)
    beside.append(
        EntryKind.PLAYER_FORGOTTEN, {"actor": "console", "player_id": "alice@example.com"}
    )
    beside.checkpoint()
    assert "PLAYER_FORGOTTEN's payload must be empty or hold only its actor and operator" in str(
        verify(beside).failure
    )


# -- the actor and the events of the log ----------------------------------------------------------

GOOD_LOG_EVENTS = [
    (EntryKind.SERVICE_STARTED, {"actor": "service", "origin": "gnau-dealer/test"}),
    (EntryKind.CONFIG_CHANGED, {"actor": "service", "settings": {"max_stake": 100}}),
    (EntryKind.SERVICE_STOPPED, {"actor": "service"}),
    (EntryKind.SERVICE_STOPPED, {}),
    (
        EntryKind.TOKENS_CHANGED,
        {
            "actor": "console",
            "added": [{"name": "casino-a-platform", "role": "operator"}],
            "revoked": [],
        },
    ),
    (
        EntryKind.TOKENS_CHANGED,
        {
            "actor": "console",
            "added": [
                {"name": "casino-a-platform", "role": "operator", "operator": "casino-a"},
                {"name": "regulator", "role": "auditor", "operator": "*"},
                {"name": "site", "role": "public"},
            ],
            "revoked": [{"name": "casino-a-audit", "role": "auditor", "operator": "casino-a"}],
        },
    ),
    (EntryKind.PLAYER_FORGOTTEN, {"actor": "cert:platform.casino-a.example"}),
    (EntryKind.PLAYER_FORGOTTEN, {"actor": "token:casino-a-platform", "operator": "casino-a"}),
    (EntryKind.PLAYER_FORGOTTEN, {"actor": "console", "operator": "default"}),
]


@pytest.mark.parametrize(("kind", "payload"), GOOD_LOG_EVENTS)
def test_the_events_of_the_log_verify_with_their_actor(kind: EntryKind, payload: dict) -> None:
    log = honest_log(rounds=1)
    log.append(kind, payload)
    play_round(log.append, "after-the-event")
    log.checkpoint()
    report = verify(log)
    assert report.ok, report.summary()


BAD_LOG_EVENTS = [
    (EntryKind.SERVICE_STARTED, {"actor": "root"}, "SERVICE_STARTED's actor 'root' is not"),
    (EntryKind.CONFIG_CHANGED, {"actor": 7}, "CONFIG_CHANGED's actor 7 is not a string"),
    (
        EntryKind.PLAYER_FORGOTTEN,
        {"actor": "token:alice smith"},
        "names a token by something that is not a token name",
    ),
    (EntryKind.SERVICE_STOPPED, {"actor": "service\n"}, "holds a control character"),
    (EntryKind.SERVICE_STOPPED, {"actor": "service", "by": "x"}, "must hold only its actor"),
    (EntryKind.TOKENS_CHANGED, {"actor": "console", "added": []}, "exactly actor, added and"),
    (
        EntryKind.TOKENS_CHANGED,
        {
            "actor": "console",
            "added": [{"name": "ops", "role": "operator", "sha256": "ab" * 32}],
            "revoked": [],
        },
        "added must list tokens as {name, role, operator} alone",
    ),
    (
        EntryKind.TOKENS_CHANGED,
        {
            "actor": "console",
            "added": [{"name": "ops", "role": "operator", "operator": "Casino A"}],
            "revoked": [],
        },
        "added must list tokens as {name, role, operator} alone",
    ),
    (
        EntryKind.TOKENS_CHANGED,
        {"actor": "console", "added": [], "revoked": [{"name": "a b", "role": "operator"}]},
        "revoked must list tokens as {name, role, operator} alone",
    ),
    (
        EntryKind.TOKENS_CHANGED,
        {"actor": "operator", "added": [], "revoked": []},
        "TOKENS_CHANGED's actor 'operator' is not",
    ),
    (EntryKind.KEY_ROTATED, {"actor": ""}, "KEY_ROTATED must carry the signed rotation note"),
    (
        EntryKind.PLAYER_FORGOTTEN,
        {"actor": "console", "operator": "Casino A"},
        "PLAYER_FORGOTTEN's operator 'Casino A' is not 1 to 64 of a-z",
    ),
    (
        EntryKind.PLAYER_FORGOTTEN,
        {"actor": "console", "operator": "*"},
        "PLAYER_FORGOTTEN's operator '*' is not 1 to 64 of a-z",
    ),
    (
        EntryKind.PLAYER_FORGOTTEN,
        {"operator": "casino-a", "player_ref": "p-" + "ab" * 16},
        "PLAYER_FORGOTTEN's payload must be empty or hold only its actor and operator",
    ),
    (EntryKind.SERVICE_STOPPED, {"actor": "service", "operator": "x"}, "must hold only its actor"),
]


@pytest.mark.parametrize(("kind", "payload", "says"), BAD_LOG_EVENTS)
def test_an_event_of_the_log_out_of_form_is_refused(
    kind: EntryKind, payload: dict, says: str
) -> None:
    log = honest_log(rounds=1)
    log.append(kind, payload)
    log.checkpoint()
    failure = verify(log).failure
    assert failure is not None and says in str(failure), failure


# -- the operator (issue 38) ------------------------------------------------------------------


def operators_round(log: MemoryLog, round_id: str, *operators: object) -> None:
    """Play an honest round into ``log``, its entries naming these operators in turn (``...``:
    none)."""
    named = iter(operators)

    def append(kind: EntryKind, payload: dict, logged_id: str | None) -> None:
        operator = next(named)
        log.append(
            kind, payload if operator is ... else {**payload, "operator": operator}, logged_id
        )

    play_round(append, round_id)


def test_rounds_with_and_without_their_operator_verify() -> None:
    log = honest_log(rounds=1)  # rounds from before operators
    operators_round(log, "round-a", "casino-a", "casino-a", "casino-a", "casino-a")
    operators_round(log, "round-b", "casino-b", "casino-b", "casino-b", "casino-b")
    log.checkpoint()
    report = verify(log)
    assert report.ok, report.summary()
    assert report.rounds_settled == 3


OPERATOR_TAMPERING = [
    (("casino-a", "casino-a", "casino-b", "casino-a"), "ROUND_REVEALED names operator 'casino-b'"),
    (("casino-a", ..., "casino-a", "casino-a"), "ROUND_DEALT names no operator"),
    (
        (..., ..., ..., "casino-a"),
        "ROUND_SETTLED names operator 'casino-a', its ROUND_COMMITTED no",
    ),
    (("casino_A",) * 4, "ROUND_COMMITTED's operator 'casino_A' is not 1 to 64"),
]


@pytest.mark.parametrize(
    ("operators", "says"),
    OPERATOR_TAMPERING,
    ids=["changed mid-round", "missing from one entry", "on one entry only", "not an id"],
)
def test_a_round_whose_operator_changes_is_missing_or_malformed_fails(
    operators: tuple[object, ...], says: str
) -> None:
    log = honest_log(rounds=1)
    operators_round(log, "round-x", *operators)
    log.checkpoint()
    failure = verify(log).failure
    assert failure is not None and f"round round-x: {says}" in str(failure), failure


def test_a_bundle_starting_mid_round_still_checks_the_operators_it_holds() -> None:
    log = honest_log(rounds=1)
    operators_round(log, "round-x", "casino-a", "casino-a", "Casino-A", "casino-a")
    log.checkpoint()
    # From the deal on: replay does not see the round, but each operator must still be an id.
    start = len(log.entries) - 3
    report = verify(log, log.bundle_lines(first_index=start))
    assert report.failure is not None
    assert "ROUND_REVEALED's operator 'Casino-A' is not 1 to 64" in str(report.failure)
