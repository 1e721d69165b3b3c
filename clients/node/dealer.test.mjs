// An independent Node.js client of the Gnau Dealer contract: it loads proto/gnau/v1/*.proto at
// run time with @grpc/proto-loader (no generated code) and plays against a running server.
//
//   TARGET=127.0.0.1:50051 TOKEN=<operator token> node --test
//
// tests/node/test_node_client.py starts a server and runs this as part of `make test`.

import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

import { FORMATS, PLAYER_REF, commitment, deal, shuffledDeck, transcriptHash, verifyRevealedRound } from './fairness.mjs';
import { openCheckpoint } from './note.mjs';

const { TARGET, TOKEN } = process.env;
const PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url));
const DEADLINE_MS = 15_000;
const HEX64 = /^[0-9a-f]{64}$/;
const CARD = /^[A2-9TJQK][CDHS]$/;
const FIVE_DUKES = 'HAND_CATEGORY_FIVE_DUKES';
/** The `points` payout table of docs/rules.md, by hand category. */
const POINTS = {
  HAND_CATEGORY_NO_OX: 0n,
  HAND_CATEGORY_SINGLE_OX: 1n,
  HAND_CATEGORY_DOUBLE_OX: 2n,
  HAND_CATEGORY_NGAU_TONKU: 5n,
  HAND_CATEGORY_FIVE_SMALL: 10n,
  HAND_CATEGORY_FIVE_DUKES: 10n,
};
const FULL_DECK = [...'CDHS'].flatMap((suit) => [...'A23456789TJQK'].map((rank) => rank + suit));

const definition = protoLoader.loadSync(['gnau/v1/dealer.proto', 'gnau/v1/audit.proto'], {
  includeDirs: [PROTO_ROOT],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const gnau = grpc.loadPackageDefinition(definition).gnau.v1;

let dealer;
let audit;

/** One unary call, as a promise; `token` null sends no credentials. */
function call(client, method, request, token = TOKEN) {
  const metadata = new grpc.Metadata();
  if (token !== null) metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) => {
    client[method](request, metadata, { deadline: Date.now() + DEADLINE_MS }, (error, response) =>
      error ? reject(error) : resolve(response));
  });
}

/** The error of a call that must fail. */
async function refusal(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('the call succeeded, but it should have been refused');
}

/** Minimal protobuf reader for google.rpc.Status: [[field, BigInt | Buffer], ...]. */
function fields(buffer) {
  const out = [];
  let i = 0;
  const varint = () => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buffer[i++];
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (i < buffer.length) {
    const key = Number(varint());
    if ((key & 7) === 0) out.push([key >> 3, varint()]);
    else if ((key & 7) === 2) {
      const length = Number(varint());
      out.push([key >> 3, buffer.subarray(i, i + length)]);
      i += length;
    } else throw new Error(`unexpected wire type ${key & 7}`);
  }
  return out;
}
const field = (parsed, number) => parsed.find(([n]) => n === number)?.[1];

/** The google.rpc.Status in an error's trailers: {code, message, details: {type: value}}. */
function richStatus(error) {
  const [bin] = error.metadata.get('grpc-status-details-bin');
  assert.ok(bin, `no google.rpc.Status details on ${error.code} ${error.details}`);
  const status = fields(bin);
  const details = {};
  for (const [n, any] of status) {
    if (n !== 3) continue;
    const parsed = fields(any);
    details[field(parsed, 1).toString()] = field(parsed, 2) ?? Buffer.alloc(0);
  }
  return { code: Number(field(status, 1) ?? 0n), message: field(status, 2)?.toString(), details };
}

/** The rules of a round as docs/fairness.md writes them (`value_text`), from the proto. */
function rulesText(rules) {
  const choice = (value, prefix) => value.slice(prefix.length).toLowerCase();
  return {
    decks: rules.decks,
    five_small: rules.five_small,
    payout: choice(rules.payout, 'PAYOUT_TABLE_'),
    suited_double: rules.suited_double,
    ten_is_duke: rules.ten_is_duke,
    three_six_pair: rules.three_six_pair,
    tie: choice(rules.tie, 'TIE_RULE_'),
    trips_make_ox: rules.trips_make_ox,
  };
}

const uniqueTable = (what) => `node-${what}-${randomUUID().slice(0, 8)}`;
/** What the tests' tables deal under (docs/api.md, "Tables"): euro stakes of 1 cent to 100
 * million euro, the default rules (unset fields take their defaults), up to 6 seats. */
const TABLE_CONFIG = {
  currency: 'EUR', rule_sets: [{}], min_stake: '1', max_stake: '10000000000', max_seats: 6, enabled: true,
};

/** A fresh table, put in the operator's catalogue: a round is dealt only at a catalogued table. */
async function catalogued(what) {
  const tableId = uniqueTable(what);
  await call(dealer, 'PutTable', { table_id: tableId, config: TABLE_CONFIG });
  return tableId;
}

/**
 * The fairness version the log holds for a revealed or voided round (docs/fairness.md): its
 * receipt's ROUND_COMMITTED entry says `"fairness_version": 3` for a v3 round (every new one),
 * 2 for a v2 round, nothing for v1.
 * The receipt's revealed round (when dealt) must be in that version's format, and verify.
 */
async function loggedVersion(roundId) {
  const { receipt } = await call(dealer, 'GetRoundReceipt', { round_id: roundId });
  const document = JSON.parse(receipt);
  const committed = JSON.parse(document.entries[0].entry);
  assert.equal(committed.kind, 'ROUND_COMMITTED');
  const version = committed.payload.fairness_version ?? 1;
  assert.ok([1, 2, 3].includes(version), `fairness_version ${version}`);
  if (document.round !== null) {
    assert.equal(document.round.format, FORMATS[version], 'the receipt round is of the logged version');
    assert.deepEqual(verifyRevealedRound(document.round), [], 'the receipt round verifies');
  }
  return version;
}

describe(`Gnau Dealer at ${TARGET ?? '(TARGET not set)'}`, () => {
  before(() => {
    assert.ok(TARGET && TOKEN, 'set TARGET (host:port) and TOKEN (an operator token)');
    const credentials = grpc.credentials.createInsecure();
    dealer = new gnau.DealerService(TARGET, credentials);
    audit = new gnau.AuditService(TARGET, credentials);
  });

  after(() => {
    dealer?.close();
    audit?.close();
  });

  it('plays a full round: PutTable, Shuffle, Deal, Reveal, Settle', async (t) => {
    const tableId = uniqueTable('round');
    const seats = [
      // Given out of order: the server locks them in ascending seat number.
      { seat_number: 3, player_id: 'carol', stake: '250', client_seed: Buffer.alloc(0) },
      { seat_number: 1, player_id: 'alice', stake: '100', client_seed: randomBytes(32) },
      { seat_number: 2, player_id: 'bob', stake: '5000000000', client_seed: Buffer.alloc(0) },
    ];
    const beacon = { label: 'drand/quicknet/round/12345678', value: randomBytes(32) };
    let roundId;
    let shuffled;
    let dealt;
    let revealed;

    await t.test('PutTable catalogues the table; the same configuration again changes nothing', async () => {
      const refused = await refusal(call(dealer, 'Shuffle', { request_id: randomUUID(), table_id: tableId }));
      assert.equal(refused.code, grpc.status.NOT_FOUND, refused.message);
      const info = richStatus(refused).details['type.googleapis.com/google.rpc.ErrorInfo'];
      assert.equal(field(fields(info), 1).toString(), 'TABLE_NOT_FOUND');
      const { table } = await call(dealer, 'PutTable', { table_id: tableId, config: TABLE_CONFIG });
      assert.equal(table.table_id, tableId);
      assert.equal(table.version, '1');
      assert.deepEqual(table.currency, { code: 'EUR', exponent: 2 });
      assert.equal(table.config.max_stake, TABLE_CONFIG.max_stake, 'int64 comes back exact');
      assert.equal(table.config.rule_sets.length, 1);
      const again = await call(dealer, 'PutTable', { table_id: tableId, config: TABLE_CONFIG });
      assert.deepEqual(again.table, table);
    });

    await t.test('Shuffle commits to a seed', async () => {
      const { round } = await call(dealer, 'Shuffle', { request_id: randomUUID(), table_id: tableId });
      assert.equal(round.state, 'ROUND_STATE_SHUFFLED');
      assert.ok(round.round_id.length > 0);
      assert.equal(round.table_id, tableId);
      assert.match(round.commitment, HEX64);
      assert.equal(round.house_rules.decks, 1);
      assert.equal(round.server_seed, '', 'the seed is secret until the reveal');
      assert.deepEqual([round.seats, round.hands, round.deck], [[], [], []]);
      // The rules' return to player, disclosed as the round begins (the default rules' figure).
      assert.equal(round.return_to_player.rtp_decimal, '0.948173');
      roundId = round.round_id;
      shuffled = round;
    });

    await t.test('Deal locks 3 seats and a beacon, and deals 5 cards each', async () => {
      const { round } = await call(dealer, 'Deal', {
        request_id: randomUUID(), round_id: roundId, seats, beacon,
      });
      assert.equal(round.state, 'ROUND_STATE_DEALT');
      assert.equal(round.round_id, roundId);
      assert.equal(round.commitment, shuffled.commitment);
      assert.deepEqual(round.seats.map((s) => s.seat_number), [1, 2, 3]);
      for (const seat of round.seats) {
        const sent = seats.find((s) => s.seat_number === seat.seat_number);
        assert.equal(seat.player_id, sent.player_id, 'the operator sees the player id it sent');
        // v2 (docs/fairness.md): each seat also gets its player reference, unique to the round.
        if (seat.player_ref) assert.match(seat.player_ref, PLAYER_REF);
        assert.equal(seat.stake, sent.stake, 'int64 stakes come back exact, as strings');
        assert.ok(Buffer.from(seat.client_seed).equals(sent.client_seed), 'client seed echoed');
      }
      assert.equal(round.beacon.label, beacon.label);
      assert.ok(Buffer.from(round.beacon.value).equals(beacon.value));
      assert.match(round.transcript_hash, HEX64);
      assert.deepEqual(round.hands.map((h) => h.seat_number), [1, 2, 3]);
      for (const hand of round.hands) {
        assert.equal(hand.cards.length, 5);
        for (const card of hand.cards) assert.match(card, CARD);
      }
      assert.equal(round.dealer_hand.length, 5);
      const cards = [...round.hands.flatMap((h) => h.cards), ...round.dealer_hand];
      assert.equal(new Set(cards).size, 20, 'one deck: no card dealt twice');
      assert.equal(round.server_seed, '', 'the seed is secret until the reveal');
      assert.deepEqual(round.deck, []);
      dealt = round;
    });

    await t.test('Reveal publishes the seed and the 52-card deck', async () => {
      const { round } = await call(dealer, 'Reveal', { request_id: randomUUID(), round_id: roundId });
      assert.equal(round.state, 'ROUND_STATE_REVEALED');
      assert.equal(round.round_id, roundId);
      assert.match(round.server_seed, HEX64);
      assert.equal(round.deck.length, 52);
      assert.deepEqual([...round.deck].sort(), [...FULL_DECK].sort());
      assert.deepEqual(round.hands, dealt.hands);
      assert.deepEqual(round.dealer_hand, dealt.dealer_hand);
      assert.equal(round.transcript_hash, dealt.transcript_hash);
      revealed = round;
    });

    await t.test('the round verifies independently (docs/fairness.md, in JS)', async () => {
      const version = await loggedVersion(roundId);
      // The API says the version the log states (docs/fairness.md, section 6).
      assert.equal(revealed.fairness_version, version, 'Round.fairness_version');
      assert.equal(shuffled.fairness_version, version, 'fixed from the shuffle on');
      // A v2 or v3 round's seats carry references; a v1 round's do not.
      assert.equal(revealed.seats.every((s) => PLAYER_REF.test(s.player_ref ?? '')), version >= 2);
      const seed = Buffer.from(revealed.server_seed, 'hex');
      const rules = rulesText(revealed.house_rules);
      assert.equal(commitment(roundId, rules, seed, version), shuffled.commitment, 'commitment');
      const lockedSeats = revealed.seats.map((s) => ({ ...s, client_seed: Buffer.from(s.client_seed) }));
      assert.equal(
        transcriptHash(revealed.commitment, lockedSeats, revealed.beacon, version), revealed.transcript_hash,
        'transcript hash (seats and beacon as sent)',
      );
      assert.equal(transcriptHash(revealed.commitment, seats, beacon, version), revealed.transcript_hash);
      if (version >= 2) {
        // The lock holds no player: another player at a seat leaves the transcript as it is;
        // another stake does too in v3 (the amount wagered moves no card), not in v2.
        const renamed = seats.map((s) => ({ ...s, player_id: `${s.player_id}-else` }));
        assert.equal(transcriptHash(revealed.commitment, renamed, beacon, version), revealed.transcript_hash);
        const restaked = seats.map((s, i) => ({ ...s, stake: i === 0 ? BigInt(s.stake) + 1n : s.stake }));
        const restakedHash = transcriptHash(revealed.commitment, restaked, beacon, version);
        assert.equal(restakedHash === revealed.transcript_hash, version === 3);
      }
      const deck = shuffledDeck(seed, revealed.transcript_hash, rules.decks);
      assert.deepEqual(revealed.deck, deck, 'deck');
      const { hands, dealer: dealerHand } = deal(deck, [1, 2, 3]);
      assert.deepEqual(revealed.hands.map((h) => ({ seat_number: h.seat_number, cards: h.cards })), hands);
      assert.deepEqual(revealed.dealer_hand, dealerHand);
    });

    await t.test('Settle pays by the rules, conserves money, and a retry changes nothing', async () => {
      assert.equal(revealed.house_rules.tie, 'TIE_RULE_DEALER');
      assert.equal(revealed.house_rules.payout, 'PAYOUT_TABLE_POINTS');
      const request = { request_id: randomUUID(), round_id: roundId };
      const { round } = await call(dealer, 'Settle', request);
      assert.equal(round.state, 'ROUND_STATE_SETTLED');
      assert.equal(round.round_id, roundId);
      const { seat_results: results, dealer_evaluation: dealerEvaluation } = round.settlement;
      assert.deepEqual(results.map((r) => r.seat_number), [1, 2, 3]);
      let sum = 0n;
      for (const result of results) {
        const seat = seats.find((s) => s.seat_number === result.seat_number);
        const hand = revealed.hands.find((h) => h.seat_number === result.seat_number);
        assert.equal(result.stake, seat.stake);
        assert.deepEqual(result.evaluation.cards, hand.cards);
        assert.ok(result.evaluation.category in POINTS, result.evaluation.category);
        // docs/rules.md, "Settlement", under the default rules (tie: dealer, payout: points).
        const player = result.evaluation;
        const outcome = player.category === FIVE_DUKES && dealerEvaluation.category === FIVE_DUKES
          ? 'OUTCOME_TIE'
          : player.strength > dealerEvaluation.strength ? 'OUTCOME_WIN' : 'OUTCOME_LOSE';
        assert.equal(result.outcome, outcome, `seat ${result.seat_number}`);
        const stake = BigInt(seat.stake);
        const delta = { OUTCOME_WIN: stake * POINTS[player.category],
          OUTCOME_LOSE: -stake * POINTS[dealerEvaluation.category], OUTCOME_TIE: 0n }[outcome];
        assert.equal(BigInt(result.delta), delta, `seat ${result.seat_number}: ${outcome}`);
        sum += BigInt(result.delta);
      }
      assert.deepEqual(dealerEvaluation.cards, revealed.dealer_hand);
      assert.equal(sum + BigInt(round.settlement.dealer_delta), 0n, 'money is conserved');

      const again = await call(dealer, 'Settle', request);
      assert.deepEqual(again.round.settlement, round.settlement, 'same request_id, same result');
      const fetched = await call(dealer, 'GetRound', { round_id: roundId });
      assert.equal(fetched.round.state, 'ROUND_STATE_SETTLED');
      assert.deepEqual(fetched.round.settlement, round.settlement);
      assert.ok(fetched.round.log_indices.length >= 4, 'every step is in the audit log');
    });
  });

  it('refuses Settle before Reveal with FAILED_PRECONDITION, then voids the round', async () => {
    const tableId = await catalogued('early-settle');
    const { round } = await call(dealer, 'Shuffle', { request_id: randomUUID(), table_id: tableId });
    const error = await refusal(call(dealer, 'Settle', { request_id: randomUUID(), round_id: round.round_id }));
    assert.equal(error.code, grpc.status.FAILED_PRECONDITION, error.message);
    const status = richStatus(error);
    assert.equal(status.code, grpc.status.FAILED_PRECONDITION);
    const failure = status.details['type.googleapis.com/google.rpc.PreconditionFailure'];
    assert.ok(failure, `details: ${Object.keys(status.details)}`);
    const violation = fields(field(fields(failure), 1));
    assert.equal(field(violation, 2).toString(), round.round_id, 'the violation names the round');
    assert.ok(status.details['type.googleapis.com/google.rpc.ErrorInfo']);

    const reason = 'node contract test: settled too early';
    const voided = await call(dealer, 'VoidRound', {
      request_id: randomUUID(), round_id: round.round_id, reason_code: 'VOID_REASON_GAME_MALFUNCTION', reason,
    });
    assert.equal(voided.round.state, 'ROUND_STATE_VOIDED');
    assert.equal(voided.round.void_reason, reason);
    assert.equal(voided.round.void_reason_code, 'VOID_REASON_GAME_MALFUNCTION');
    // docs/fairness.md: a void reveals the seed, so the voided deal can be recomputed.
    const seed = Buffer.from(voided.round.server_seed, 'hex');
    const version = await loggedVersion(round.round_id);
    assert.equal(commitment(round.round_id, rulesText(round.house_rules), seed, version), round.commitment);
    // The table is free again.
    const next = await call(dealer, 'Shuffle', { request_id: randomUUID(), table_id: tableId });
    await call(dealer, 'VoidRound', {
      request_id: randomUUID(), round_id: next.round.round_id, reason_code: 'VOID_REASON_TABLE_CLOSED', reason,
    });
  });

  it('tells anyone the return to player of a rule set, and refuses invalid rules by field', async () => {
    const answer = await call(dealer, 'GetHouseRulesInfo', { house_rules: { tie: 'TIE_RULE_PUSH' } }, null);
    assert.equal(answer.house_rules.tie, 'TIE_RULE_PUSH');
    assert.equal(answer.house_rules.decks, 1, 'every rule in force is set');
    const { rtp, house_edge: edge, rtp_decimal: rtpDecimal } = answer.return_to_player;
    const fraction = (text) => {
      const [numerator, denominator] = text.split('/').map(BigInt);
      assert.ok(denominator > 0n, text);
      return [numerator, denominator];
    };
    const [rn, rd] = fraction(rtp);
    const [en, ed] = fraction(edge);
    assert.equal(rn * ed + en * rd, rd * ed, 'rtp + house_edge = 1, exactly');
    assert.match(rtpDecimal, /^[01]\.[0-9]{6}$/);
    assert.ok(Math.abs(Number(rn) / Number(rd) - Number(rtpDecimal)) <= 5e-7, `${rtp} is ${rtpDecimal}`);
    const error = await refusal(call(dealer, 'GetHouseRulesInfo', { house_rules: { decks: 9 } }, null));
    assert.equal(error.code, grpc.status.INVALID_ARGUMENT, error.message);
  });

  it('refuses Shuffle without a token with PERMISSION_DENIED', async () => {
    const error = await refusal(
      call(dealer, 'Shuffle', { request_id: randomUUID(), table_id: uniqueTable('no-token') }, null),
    );
    assert.equal(error.code, grpc.status.PERMISSION_DENIED, error.message);
  });

  it('answers NOT_FOUND for an unknown round', async () => {
    const error = await refusal(call(dealer, 'GetRound', { round_id: `no-such-round-${randomUUID()}` }));
    assert.equal(error.code, grpc.status.NOT_FOUND, error.message);
  });

  it('serves a signed checkpoint that opens with the published key', async () => {
    const keys = await call(audit, 'GetPublicKeys', {}, null);
    assert.ok(keys.verifier_keys.length >= 1, 'at least one verifier key');
    assert.ok(keys.origin.length > 0);
    const { checkpoint } = await call(audit, 'GetCheckpoint', {}, null);
    const lines = checkpoint.split('\n');
    assert.equal(lines[0], keys.origin);
    assert.match(lines[1], /^[1-9][0-9]*$/, 'the 2nd line is the tree size');
    assert.ok(lines.some((line) => line.startsWith('\u2014 ')), 'an em-dash signature line');
    const opened = openCheckpoint(checkpoint, keys.verifier_keys[0]);
    assert.equal(opened.origin, keys.origin);
    assert.equal(opened.size, BigInt(lines[1]));
    assert.ok(opened.size >= 5n, 'the rounds played above are in the log');
    const forged = checkpoint.replace(`\n${lines[1]}\n`, `\n${opened.size + 1n}\n`);
    assert.throws(() => openCheckpoint(forged, keys.verifier_keys[0]), /no valid signature/);
  });
});
