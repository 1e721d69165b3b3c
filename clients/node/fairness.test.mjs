// Checks fairness.mjs against the checked-in test vectors (tests/vectors/fairness-round-*.json),
// so that the live-server test below it can trust it. Needs no server.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';

import { commitment, deal, shuffledDeck, transcriptHash } from './fairness.mjs';

const vectors = new URL('../../tests/vectors/', import.meta.url);
const names = readdirSync(vectors).filter((name) => /^fairness-round-.*\.json$/.test(name));

describe('fairness.mjs against the test vectors', () => {
  it('finds the vectors', () => assert.ok(names.length >= 3, `only ${names} in ${vectors}`));

  for (const name of names) {
    it(`recomputes ${name}`, () => {
      const r = JSON.parse(readFileSync(new URL(name, vectors), 'utf8')).revealed_round;
      const seed = Buffer.from(r.server_seed, 'hex');
      assert.equal(commitment(r.round_id, r.house_rules, seed), r.commitment);
      const seats = r.seats.map((s) => ({ ...s, client_seed: Buffer.from(s.client_seed ?? '', 'hex') }));
      const beacon = r.beacon && { label: r.beacon.label, value: Buffer.from(r.beacon.value, 'hex') };
      assert.equal(transcriptHash(r.commitment, seats, beacon), r.transcript_hash);
      const deck = shuffledDeck(seed, r.transcript_hash, r.house_rules.decks);
      assert.deepEqual(deck, r.deck.map((card) => card.toUpperCase()));
      const dealt = deal(deck, seats.map((s) => s.seat_number));
      const expected = [...r.hands].sort((a, b) => a.seat_number - b.seat_number);
      assert.deepEqual(dealt.hands, expected.map((h) => ({ seat_number: h.seat_number, cards: h.cards })));
      assert.deepEqual(dealt.dealer, r.dealer_hand);
    });
  }

  it('notices a tampered seed, stake and beacon', () => {
    const r = JSON.parse(readFileSync(new URL(names[0], vectors), 'utf8')).revealed_round;
    const seed = Buffer.from(r.server_seed, 'hex');
    seed[0] ^= 1;
    assert.notEqual(commitment(r.round_id, r.house_rules, seed), r.commitment);
    const seats = r.seats.map((s) => ({ ...s, client_seed: Buffer.alloc(0) }));
    seats[0].stake += 1;
    assert.notEqual(transcriptHash(r.commitment, seats, null), r.transcript_hash);
    seats[0].stake -= 1;
    const beacon = { label: 'x', value: Buffer.of(0) };
    assert.notEqual(transcriptHash(r.commitment, seats, beacon), r.transcript_hash);
  });
});
