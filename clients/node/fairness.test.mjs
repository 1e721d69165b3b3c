// Checks fairness.mjs against the published test vectors (docs/vectors/fairness-*.json, the
// fairness v1 rounds, the v2 and the v3 ones), so that the live-server test below it can trust it.
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
  it('finds the vectors of every version', () => {
    assert.ok(ofVersion(1).length >= 3, `only ${ofVersion(1).map(([n]) => n)} in ${vectors}`);
    assert.ok(ofVersion(2).length >= 1, `no fairness v2 vector in ${vectors}`);
    assert.ok(ofVersion(3).length >= 3, `not the v3 vectors in ${vectors}`);
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
      // Read under another version, the same round does not verify: the tags differ.
      for (const other of [1, 2, 3].filter((v) => v !== version)) {
        assert.notEqual(commitment(r.round_id, r.house_rules, seed, other), r.commitment);
        const named = seats.map((s) => ({ ...s, player_id: s.player_id ?? s.player_ref }));
        assert.notEqual(transcriptHash(r.commitment, named, beacon, other), r.transcript_hash);
      }
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
    unknown.format = 'gnau-dealer/revealed-round/v4';
    assert.deepEqual(verifyRevealedRound(unknown), ['format']);
  });

  it('deals a v3 round the same cards whatever the stakes: the stake pair', () => {
    const pair = ['fairness-round-v3-1deck-4seats-stake-500.json', 'fairness-round-v3-1deck-4seats-stake-501.json']
      .map((name) => rounds.find(([n]) => n === name)[1]);
    const [low, high] = pair;
    assert.notDeepEqual(low.seats.map((s) => s.stake), high.seats.map((s) => s.stake));
    for (const r of pair) assert.deepEqual(verifyRevealedRound(r), []);
    const seats = (r) => r.seats.map((s) => ({ ...s, client_seed: Buffer.from(s.client_seed, 'hex') }));
    const beacon = { label: low.beacon.label, value: Buffer.from(low.beacon.value, 'hex') };
    const lowHash = transcriptHash(low.commitment, seats(low), beacon, 3);
    assert.equal(lowHash, transcriptHash(high.commitment, seats(high), beacon, 3));
    assert.equal(lowHash, low.transcript_hash);
    assert.deepEqual(low.deck, high.deck);
    // Any stake at all: the v3 round still verifies, for the stake is not in its lock.
    const staked = structuredClone(low);
    staked.seats[0].stake = 9007199254740991;
    assert.deepEqual(verifyRevealedRound(staked), []);
    // The same seats under the v2 tags and encoding: the stakes then give other hashes.
    assert.notEqual(transcriptHash(low.commitment, seats(low), beacon, 2), transcriptHash(high.commitment, seats(high), beacon, 2));
  });

  it('refuses a tampered v3 round: a client seed, a reference, a shared one, a version', () => {
    const [, r] = ofVersion(3)[0];
    const copy = () => structuredClone(r);
    const seeded = copy();
    seeded.seats[0].client_seed = 'ff';
    assert.deepEqual(verifyRevealedRound(seeded), ['lock']);
    const named = copy();
    named.seats[0].player_ref = 'alice';
    assert.deepEqual(verifyRevealedRound(named), ['seats']);
    const shared = copy();
    shared.seats[1].player_ref = shared.seats[0].player_ref;
    assert.deepEqual(verifyRevealedRound(shared), ['seats']);
    // A v3 round relabelled v2 hashes under the v2 tags, with its stakes: nothing holds.
    const relabelled = copy();
    relabelled.format = 'gnau-dealer/revealed-round/v2';
    assert.deepEqual(verifyRevealedRound(relabelled).slice(0, 2), ['commitment', 'lock']);
  });
});
