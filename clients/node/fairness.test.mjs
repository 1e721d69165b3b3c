// Checks fairness.mjs against the published test vectors (docs/vectors/fairness-*.json, the
// fairness v1 rounds and the v2 ones), so that the live-server test below it can trust it.
// Needs no server.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';

import { commitment, deal, shuffledDeck, transcriptHash, verifyRevealedRound, versionOf } from './fairness.mjs';

const vectors = new URL('../../docs/vectors/', import.meta.url);
const rounds = readdirSync(vectors)
  .filter((name) => /^fairness-.*\.json$/.test(name))
  .map((name) => [name, JSON.parse(readFileSync(new URL(name, vectors), 'utf8')).revealed_round])
  .filter(([, round]) => round);
const ofVersion = (version) => rounds.filter(([, r]) => versionOf(r) === version);

describe('fairness.mjs against the test vectors', () => {
  it('finds the vectors of both versions', () => {
    assert.ok(ofVersion(1).length >= 3, `only ${ofVersion(1).map(([n]) => n)} in ${vectors}`);
    assert.ok(ofVersion(2).length >= 1, `no fairness v2 vector in ${vectors}`);
  });

  for (const [name, r] of rounds) {
    it(`recomputes ${name} (v${versionOf(r)})`, () => {
      const version = versionOf(r);
      const seed = Buffer.from(r.server_seed, 'hex');
      assert.equal(commitment(r.round_id, r.house_rules, seed, version), r.commitment);
      const seats = r.seats.map((s) => ({ ...s, client_seed: Buffer.from(s.client_seed ?? '', 'hex') }));
      const beacon = r.beacon && { label: r.beacon.label, value: Buffer.from(r.beacon.value, 'hex') };
      assert.equal(transcriptHash(r.commitment, seats, beacon, version), r.transcript_hash);
      const deck = shuffledDeck(seed, r.transcript_hash, r.house_rules.decks);
      assert.deepEqual(deck, r.deck.map((card) => card.toUpperCase()));
      const dealt = deal(deck, seats.map((s) => s.seat_number));
      const expected = [...r.hands].sort((a, b) => a.seat_number - b.seat_number);
      assert.deepEqual(dealt.hands, expected.map((h) => ({ seat_number: h.seat_number, cards: h.cards })));
      assert.deepEqual(dealt.dealer, r.dealer_hand);
      assert.deepEqual(verifyRevealedRound(r), []);
      // Read under the other version, the same round does not verify: the tags differ.
      const other = version === 1 ? 2 : 1;
      assert.notEqual(commitment(r.round_id, r.house_rules, seed, other), r.commitment);
      const named = seats.map((s) => ({ ...s, player_id: s.player_id ?? s.player_ref }));
      assert.notEqual(transcriptHash(r.commitment, named, beacon, other), r.transcript_hash);
    });
  }

  it('notices a tampered seed, stake and beacon', () => {
    const r = ofVersion(1)[0][1];
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

  it('refuses a tampered v2 round: a stake, a client seed, a reference, a shared one, a version', () => {
    const [, r] = ofVersion(2)[0];
    const copy = () => structuredClone(r);
    const staked = copy();
    staked.seats[0].stake += 1;
    assert.deepEqual(verifyRevealedRound(staked), ['lock']);
    const seeded = copy();
    seeded.seats[0].client_seed = 'ff';
    assert.deepEqual(verifyRevealedRound(seeded), ['lock']);
    // The reference is not in the lock, but it must be a reference: not a player id.
    const named = copy();
    named.seats[0].player_ref = 'alice';
    assert.deepEqual(verifyRevealedRound(named), ['seats']);
    const upper = copy();
    upper.seats[0].player_ref = upper.seats[0].player_ref.toUpperCase();
    assert.deepEqual(verifyRevealedRound(upper), ['seats']);
    const both = copy();
    both.seats[0].player_id = 'alice';
    assert.deepEqual(verifyRevealedRound(both), ['seats']);
    // Each reference names one seat of its round: two seats may not share one.
    const shared = copy();
    shared.seats[1].player_ref = shared.seats[0].player_ref;
    assert.deepEqual(verifyRevealedRound(shared), ['seats']);
    // A v2 round relabelled v1 (its seats renamed) hashes under the v1 tags: nothing holds.
    const relabelled = copy();
    relabelled.format = 'gnau-dealer/revealed-round/v1';
    relabelled.seats = relabelled.seats.map(({ player_ref: ref, ...s }) => ({ ...s, player_id: ref }));
    assert.deepEqual(verifyRevealedRound(relabelled).slice(0, 2), ['commitment', 'lock']);
    const unknown = copy();
    unknown.format = 'gnau-dealer/revealed-round/v3';
    assert.deepEqual(verifyRevealedRound(unknown), ['format']);
  });
});
