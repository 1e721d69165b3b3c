"""GnauClient against a real in-process gRPC server (tests/clients/fakes.py): what reaches the
server (request ids, metadata, deadlines), gRPC's retries, and the round and audit calls."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2
from gnau_client import (
    Beacon,
    EntryOrderError,
    GnauClient,
    HouseRules,
    PayoutTable,
    RetryPolicy,
    RoundState,
    Seat,
    TieRule,
    channel_options,
)

from tests.clients.conftest import FAST_RETRY
from tests.clients.fakes import FakeServer, make_round

# The grpc-timeout header rounds the deadline up a little.
SLACK = 0.1

SEATS = [
    Seat(seat_number=1, player_id="alice", stake=100, client_seed=b"\x01\x02"),
    Seat(seat_number=2, player_id="bob", stake=250),
]


def _is_uuid4(text: str) -> bool:
    return uuid.UUID(text).version == 4 and str(uuid.UUID(text)) == text


def _mutate_all(client: GnauClient) -> None:
    client.shuffle("table-1")
    client.deal("r-1", SEATS)
    client.reveal("r-1")
    client.settle("r-1")
    client.void_round("r-1", round_pb2.VOID_REASON_GAME_MALFUNCTION, "dealer error")


def test_every_mutating_call_gets_its_own_uuid4_request_id(
    client: GnauClient, fake: FakeServer
) -> None:
    _mutate_all(client)
    calls = fake.recorder.calls
    assert [call.method for call in calls] == ["Shuffle", "Deal", "Reveal", "Settle", "VoidRound"]
    ids = [call.request.request_id for call in calls]  # type: ignore[attr-defined]
    assert all(_is_uuid4(request_id) for request_id in ids)
    assert len(set(ids)) == len(ids)


def test_a_given_request_id_is_sent_unchanged(client: GnauClient, fake: FakeServer) -> None:
    client.shuffle("table-1", request_id="retry-me-1")
    client.settle("r-1", request_id="retry-me-1")
    assert [call.request.request_id for call in fake.recorder.calls] == ["retry-me-1"] * 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", ["", "x" * 37, "has space", "naïve"])
def test_a_malformed_request_id_is_refused_before_sending(
    client: GnauClient, fake: FakeServer, bad: str
) -> None:
    with pytest.raises(ValueError, match="request_id"):
        client.reveal("r-1", request_id=bad)
    assert fake.recorder.calls == []


def test_grpc_retries_resend_the_same_request_id(client: GnauClient, fake: FakeServer) -> None:
    fake.recorder.fail("Shuffle", grpc.StatusCode.UNAVAILABLE, times=2)
    fake.recorder.fail("Deal", grpc.StatusCode.UNAVAILABLE, times=4)
    round_ = client.shuffle("table-1")
    client.deal(round_.round_id, SEATS)
    for method, attempts in (("Shuffle", 3), ("Deal", 5)):
        calls = fake.recorder.of(method)
        assert len(calls) == attempts
        assert len({call.request.request_id for call in calls}) == 1  # type: ignore[attr-defined]
        assert len({call.request.SerializeToString() for call in calls}) == 1  # type: ignore[attr-defined]
    assert round_.round_id == "r-1"


def test_retries_stop_after_five_attempts(client: GnauClient, fake: FakeServer) -> None:
    fake.recorder.fail("Reveal", grpc.StatusCode.UNAVAILABLE, times=9)
    with pytest.raises(grpc.RpcError) as caught:
        client.reveal("r-1")
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    assert len(fake.recorder.of("Reveal")) == 5


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ALREADY_EXISTS,
    ],
)
def test_only_unavailable_is_retried(
    client: GnauClient, fake: FakeServer, code: grpc.StatusCode
) -> None:
    fake.recorder.fail("Settle", code)
    with pytest.raises(grpc.RpcError) as caught:
        client.settle("r-1")
    assert caught.value.code() is code
    assert len(fake.recorder.of("Settle")) == 1


def test_retries_can_be_turned_off(fake: FakeServer) -> None:
    fake.recorder.fail("Shuffle", grpc.StatusCode.UNAVAILABLE)
    with GnauClient(fake.target, retry=None) as client, pytest.raises(grpc.RpcError):
        client.shuffle("table-1")
    assert len(fake.recorder.of("Shuffle")) == 1


def test_bearer_token_and_user_agent_reach_the_server(client: GnauClient, fake: FakeServer) -> None:
    client.get_round("r-1")
    client.get_checkpoint()
    for call in fake.recorder.calls:
        assert call.metadata["authorization"] == "Bearer s3cret-token"
        assert call.metadata["user-agent"].startswith("gnau-client/0.1.0 ")


def test_no_token_sends_no_authorization(fake: FakeServer) -> None:
    with GnauClient(fake.target) as client:
        client.get_round("r-1")
    assert "authorization" not in fake.recorder.calls[0].metadata


@pytest.mark.parametrize("token", ["", "two words", "line\nbreak", "tok=en"])
def test_a_malformed_token_is_refused(fake: FakeServer, token: str) -> None:
    with pytest.raises(ValueError, match="bearer token"):
        GnauClient(fake.target, token=token)


def test_a_token_never_crosses_the_network_in_clear_text() -> None:
    with pytest.raises(ValueError, match="clear text"):
        GnauClient("dealer.example:443", token="t")
    GnauClient("dealer.example:443", token="t", allow_insecure_token=True).close()
    credentials = grpc.ssl_channel_credentials()
    GnauClient("dealer.example:443", token="t", credentials=credentials).close()
    for local in ("localhost:1", "127.0.0.1:1", "[::1]:1", "unix:/tmp/gnau.sock"):
        GnauClient(local, token="t").close()


def test_every_unary_call_has_the_default_deadline(client: GnauClient, fake: FakeServer) -> None:
    client.shuffle("table-1")
    client.get_round("r-1")
    client.get_public_keys()
    for call in fake.recorder.calls:
        assert call.time_remaining is not None
        assert 3.0 < call.time_remaining <= 5.0 + SLACK


def test_deadlines_per_client_and_per_call(fake: FakeServer) -> None:
    with GnauClient(fake.target, timeout=30.0) as client:
        client.get_round("r-1")
        client.get_round("r-1", timeout=1.5)
    with GnauClient(fake.target, timeout=None) as client:
        client.get_round("r-1")
    long, short, unbounded = (call.time_remaining for call in fake.recorder.calls)
    assert long is not None and 25.0 < long <= 30.0 + SLACK
    assert short is not None and 0.0 < short <= 1.5 + SLACK
    assert unbounded is None


def test_shuffle_and_deal_send_what_they_are_given(client: GnauClient, fake: FakeServer) -> None:
    rules = HouseRules(tie=TieRule.TIE_RULE_PUSH, decks=2, ten_is_duke=False)
    beacon = Beacon(label="drand/quicknet/round/1", value=b"\xff" * 32)
    round_ = client.shuffle("table-7", rules)
    client.deal(round_.round_id, reversed(SEATS), beacon)
    shuffle, deal = (call.request for call in fake.recorder.calls)
    assert isinstance(shuffle, dealer_pb2.ShuffleRequest)
    assert shuffle.table_id == "table-7"
    assert shuffle.house_rules == rules
    assert shuffle.house_rules.HasField("ten_is_duke")
    assert not shuffle.house_rules.HasField("five_small")
    assert isinstance(deal, dealer_pb2.DealRequest)
    assert deal.round_id == "r-1"
    assert list(deal.seats) == list(reversed(SEATS))
    assert deal.beacon == beacon
    assert round_.state == RoundState.Value("ROUND_STATE_SHUFFLED")


def test_unset_rules_and_beacon_stay_unset(client: GnauClient, fake: FakeServer) -> None:
    client.shuffle("table-1")
    client.deal("r-1", SEATS)
    shuffle, deal = (call.request for call in fake.recorder.calls)
    assert not shuffle.HasField("house_rules")  # type: ignore[attr-defined]
    assert not deal.HasField("beacon")  # type: ignore[attr-defined]


def test_play_round_runs_the_four_steps_on_one_round(client: GnauClient, fake: FakeServer) -> None:
    rules = HouseRules(payout=PayoutTable.PAYOUT_TABLE_MULTIPLIER)
    fake.recorder.fail("Reveal", grpc.StatusCode.UNAVAILABLE)
    settled = client.play_round("table-1", SEATS, house_rules=rules)
    assert fake.recorder.methods() == ["Shuffle", "Deal", "Reveal", "Reveal", "Settle"]
    requests = [call.request for call in fake.recorder.calls]
    assert requests[0].house_rules == rules  # type: ignore[attr-defined]
    assert all(request.round_id == "r-1" for request in requests[1:])  # type: ignore[attr-defined]
    assert list(requests[1].seats) == SEATS  # type: ignore[attr-defined]
    ids = [request.request_id for request in requests]  # type: ignore[attr-defined]
    assert ids[2] == ids[3]  # the retried Reveal
    assert len(set(ids)) == 4
    assert settled.state == round_pb2.ROUND_STATE_SETTLED
    assert settled.settlement.dealer_delta == -200
    assert settled.settlement.seat_results[0].outcome == round_pb2.OUTCOME_WIN


def test_play_round_failure_names_the_round_and_the_step(
    client: GnauClient, fake: FakeServer
) -> None:
    fake.recorder.fail("Reveal", grpc.StatusCode.FAILED_PRECONDITION)
    with pytest.raises(grpc.RpcError) as caught:
        client.play_round("table-1", SEATS)
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.__notes__ == ["play_round: round 'r-1' stopped at Reveal"]
    assert "Settle" not in fake.recorder.methods()


def test_play_round_shuffle_failure_names_its_request_id(
    client: GnauClient, fake: FakeServer
) -> None:
    fake.recorder.fail("Shuffle", grpc.StatusCode.PERMISSION_DENIED)
    with pytest.raises(grpc.RpcError) as caught:
        client.play_round("table-1", SEATS)
    request_id = fake.recorder.calls[0].request.request_id  # type: ignore[attr-defined]
    assert caught.value.__notes__ == [f"play_round: Shuffle failed (request_id {request_id!r})"]


def test_void_get_and_evaluate(client: GnauClient, fake: FakeServer) -> None:
    voided = client.void_round("r-1", round_pb2.VOID_REASON_GAME_MALFUNCTION, "shoe dropped")
    assert voided.state == round_pb2.ROUND_STATE_VOIDED
    assert voided.void_reason == "shoe dropped"
    sent = fake.recorder.calls[-1].request
    assert sent.reason_code == round_pb2.VOID_REASON_GAME_MALFUNCTION  # type: ignore[attr-defined]
    assert client.get_round("r-1").state == round_pb2.ROUND_STATE_DEALT
    with pytest.raises(grpc.RpcError) as caught:
        client.get_round("r-404")
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    evaluation = client.evaluate_hand("3C 6S 8H 4H 8C")
    assert list(evaluation.cards) == ["3C", "6S", "8H", "4H", "8C"]
    assert evaluation.value == 8
    client.evaluate_hand(["KD", "4C", "3S", "AS", "QC"], HouseRules(ten_is_duke=True))
    last = fake.recorder.calls[-1].request
    assert list(last.cards) == ["KD", "4C", "3S", "AS", "QC"]  # type: ignore[attr-defined]
    assert last.house_rules.ten_is_duke  # type: ignore[attr-defined]


def test_list_and_iterate_rounds(client: GnauClient, fake: FakeServer) -> None:
    state = round_pb2.ROUND_STATE_SETTLED
    fake.dealer.pages = {
        "": dealer_pb2.ListRoundsResponse(
            rounds=[make_round("r-3", state), make_round("r-2", state)], next_page_token="p2"
        ),
        "p2": dealer_pb2.ListRoundsResponse(rounds=[make_round("r-1", state)]),
    }
    page = client.list_rounds("table-1", page_size=2)
    assert [round_.round_id for round_ in page.rounds] == ["r-3", "r-2"]
    assert page.next_page_token == "p2"
    assert [round_.round_id for round_ in client.iter_rounds("table-1", page_size=2)] == [
        "r-3",
        "r-2",
        "r-1",
    ]
    requests = [call.request for call in fake.recorder.of("ListRounds")]
    assert [(r.table_id, r.page_size, r.page_token) for r in requests] == [  # type: ignore[attr-defined]
        ("table-1", 2, ""),
        ("table-1", 2, ""),
        ("table-1", 2, "p2"),
    ]
    assert all(r.operator == "" for r in requests)  # type: ignore[attr-defined]


def test_list_rounds_of_one_operator(client: GnauClient, fake: FakeServer) -> None:
    state = round_pb2.ROUND_STATE_SETTLED
    fake.dealer.pages = {
        "": dealer_pb2.ListRoundsResponse(rounds=[make_round("r-2", state)], next_page_token="p2"),
        "p2": dealer_pb2.ListRoundsResponse(rounds=[make_round("r-1", state)]),
    }
    client.list_rounds(operator="casino-a")
    assert [r.round_id for r in client.iter_rounds(operator="casino-b")] == ["r-2", "r-1"]
    requests = [call.request for call in fake.recorder.of("ListRounds")]
    assert [(r.operator, r.page_token) for r in requests] == [  # type: ignore[attr-defined]
        ("casino-a", ""),
        ("casino-b", ""),
        ("casino-b", "p2"),
    ]


def test_audit_reads(client: GnauClient, fake: FakeServer) -> None:
    assert client.get_checkpoint().startswith("gnau-dealer/test\n10\n")
    assert client.get_inclusion_proof(3, 10) == [b"\x01" * 32, b"\x02" * 32]
    assert client.get_consistency_proof(5, 10) == [b"\x03" * 32]
    keys = client.get_public_keys()
    assert keys.origin == "gnau-dealer/test"
    assert list(keys.verifier_keys) == ["gnau-dealer/test+01020304+AQID"]
    verdict = client.verify_round("r-1")
    assert verdict.ok
    assert verdict.summary == "round r-1 verifies"
    inclusion, consistency = (
        fake.recorder.of("GetInclusionProof"),
        fake.recorder.of("GetConsistencyProof"),
    )
    assert inclusion[0].request == audit_pb2.GetInclusionProofRequest(index=3, tree_size=10)
    assert consistency[0].request == audit_pb2.GetConsistencyProofRequest(
        first_size=5, second_size=10
    )


def test_get_entries_flattens_batches_in_order(client: GnauClient, fake: FakeServer) -> None:
    entries = list(client.get_entries(2, 9))
    assert [entry.index for entry in entries] == list(range(2, 9))
    assert entries[0].data == b'{"index":2}'
    assert [entry.index for entry in client.get_entries(8, 100)] == [8, 9]  # the log ends at 10
    streaming = fake.recorder.of("GetEntries")
    assert streaming[0].time_remaining is None  # streams have no default deadline


def test_get_entries_refuses_a_gap(client: GnauClient, fake: FakeServer) -> None:
    fake.audit.skip_index = 4
    with pytest.raises(EntryOrderError, match="sent entry 5 where entry 4 was due"):
        list(client.get_entries(0, 10))


def test_watch_entries_resumes_where_the_stream_broke(client: GnauClient, fake: FakeServer) -> None:
    fake.audit.watch_breaks.extend([3, 2])
    indices = [entry.index for entry in client.watch_entries(1)]
    assert indices == list(range(1, 10))
    starts = [call.request.start_index for call in fake.recorder.of("WatchEntries")]  # type: ignore[attr-defined]
    assert starts == [1, 4, 6]


def test_watch_entries_without_resume_raises(client: GnauClient, fake: FakeServer) -> None:
    fake.audit.watch_breaks.append(2)
    received: list[int] = []
    with pytest.raises(grpc.RpcError):
        received.extend(entry.index for entry in client.watch_entries(0, resume=False))
    assert received == [0, 1]


def test_watch_entries_gives_up_when_a_reopened_stream_makes_no_progress(
    client: GnauClient, fake: FakeServer
) -> None:
    # The first stream breaks after 2 entries; the reopened one breaks before sending any (and
    # gRPC's own retries, which apply before a stream's first message, fail too).
    fake.audit.watch_breaks.extend([2] + [0] * 5)
    with pytest.raises(grpc.RpcError) as caught:
        list(client.watch_entries(0))
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    starts = [call.request.start_index for call in fake.recorder.of("WatchEntries")]  # type: ignore[attr-defined]
    assert starts == [0] + [2] * 5


def test_a_watch_follows_the_log_until_the_caller_stops(
    client: GnauClient, fake: FakeServer
) -> None:
    fake.audit.follow = True
    stream = client.watch_entries(7)
    assert [next(stream).index for _ in range(3)] == [7, 8, 9]
    assert not fake.audit.watch_ended.wait(0.2)  # the stream stays open past the log's end
    stream.close()  # what breaking out of a for loop does, once the generator is dropped
    assert fake.audit.watch_ended.wait(5.0)  # the server saw the cancellation
    assert len(fake.recorder.of("WatchEntries")) == 1


def test_from_channel_uses_the_callers_channel(fake: FakeServer) -> None:
    channel = grpc.insecure_channel(fake.target, options=channel_options(FAST_RETRY))
    client = GnauClient.from_channel(channel, token="abc")
    fake.recorder.fail("GetRound", grpc.StatusCode.UNAVAILABLE)
    assert client.get_round("r-1").round_id == "r-1"
    client.close()  # not the client's channel: left open
    assert client.get_round("r-1").round_id == "r-1"
    assert fake.recorder.calls[-1].metadata["authorization"] == "Bearer abc"
    channel.close()


def test_the_service_config_is_the_documented_one() -> None:
    options = dict(channel_options(RetryPolicy()))
    assert options["grpc.enable_retries"] == 1
    assert json.loads(str(options["grpc.service_config"])) == {
        "methodConfig": [
            {
                "name": [{"service": "gnau.v1.DealerService"}, {"service": "gnau.v1.AuditService"}],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2.0,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
        "retryThrottling": {"maxTokens": 20, "tokenRatio": 0.5},
    }
    unthrottled = RetryPolicy(throttle_max_tokens=None).service_config()
    assert "retryThrottling" not in unthrottled
    no_retries = dict(channel_options(None, [("grpc.max_receive_message_length", 1 << 20)]))
    assert no_retries["grpc.enable_retries"] == 0
    assert "grpc.service_config" not in no_retries
    assert no_retries["grpc.max_receive_message_length"] == 1 << 20


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 1},
        {"max_attempts": 6},
        {"initial_backoff": 0},
        {"max_backoff": 0.01, "initial_backoff": 0.1},
        {"backoff_multiplier": -1},
        {"retryable_status_codes": ()},
        {"retryable_status_codes": ("UNAVAILIBLE",)},
        {"retryable_status_codes": ("OK",)},
        {"throttle_max_tokens": 0},
        {"throttle_max_tokens": 1001},
        {"throttle_token_ratio": 0},
    ],
)
def test_a_bad_retry_policy_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
