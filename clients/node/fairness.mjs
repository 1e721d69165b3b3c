// An independent re-implementation of docs/fairness.md ("The construction, byte by byte") with
// node:crypto only: it recomputes a revealed round's commitment, transcript hash, deck and hands.
// It shares no code with the service, so agreement with the service is evidence for both.

import { createHash, createHmac } from 'node:crypto';

const utf8 = (text) => Buffer.from(text, 'utf8');
const tag = (name) => utf8(`gnau-dealer/fairness/v1/${name}`);
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
/** frame(x): the length of x as 4 bytes big-endian, then x. */
const frame = (data) => Buffer.concat([u32(data.length), data]);
const frames = (...fields) => Buffer.concat(fields.map(frame));
const sha256 = (...fields) => createHash('sha256').update(frames(...fields)).digest();
const mac = (key, data) => createHmac('sha256', key).update(data).digest();

/**
 * The commitment (hex) of `roundId` under `rules` ({name: value_text}, every rule) to `seed`.
 */
export function commitment(roundId, rules, seed) {
  const keys = Object.keys(rules).sort();
  const encoded = Buffer.concat(keys.map((k) => frames(utf8(k), utf8(String(rules[k])))));
  return sha256(tag('commitment'), utf8(roundId), encoded, u64(rules.decks), seed).toString('hex');
}

/**
 * The transcript hash (hex) locking `seats` ([{seat_number, player_id, stake, client_seed}],
 * stake a number, string or BigInt, client_seed a Buffer) and `beacon` ({label, value} or null).
 */
export function transcriptHash(commitmentHex, seats, beacon) {
  const ordered = [...seats].sort((a, b) => a.seat_number - b.seat_number);
  const locked = Buffer.concat(ordered.map((s) => frame(frames(
    u64(s.seat_number), utf8(s.player_id), u64(s.stake), Buffer.from(s.client_seed)))));
  const beaconBytes = beacon
    ? Buffer.concat([Buffer.of(1), frame(utf8(beacon.label)), frame(Buffer.from(beacon.value))])
    : Buffer.of(0);
  return sha256(tag('lock'), Buffer.from(commitmentHex, 'hex'), locked, beaconBytes).toString('hex');
}

/** HMAC_DRBG_Update (SP 800-90A 10.1.2.2). */
function update(K, V, data = Buffer.alloc(0)) {
  for (const flag of data.length ? [0, 1] : [0]) {
    K = mac(K, Buffer.concat([V, Buffer.of(flag), data]));
    V = mac(K, V);
  }
  return [K, V];
}

/** The shuffled deck: HMAC_DRBG keyed by seed || transcript || tag, then Fisher-Yates. */
export function shuffledDeck(seed, transcriptHex, decks) {
  let [K, V] = update(Buffer.alloc(32, 0), Buffer.alloc(32, 1),
    Buffer.concat([seed, Buffer.from(transcriptHex, 'hex'), tag('shuffle')]));
  const words = [];
  const nextWord = () => {
    if (words.length === 0) { // one Generate(64 bytes): 16 big-endian 32-bit words
      const V1 = mac(K, V);
      V = mac(K, V1);
      const out = Buffer.concat([V1, V]);
      [K, V] = update(K, V);
      for (let i = 0; i < 64; i += 4) words.push(out.readUInt32BE(i));
    }
    return words.shift();
  };
  const below = (n) => { // reject words in the incomplete top copy of 0..n-1
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) { const w = nextWord(); if (w < limit) return w % n; }
  };
  const one = [...'CDHS'].flatMap((suit) => [...'A23456789TJQK'].map((rank) => rank + suit));
  const deck = Array.from({ length: decks }, () => one).flat();
  for (let i = deck.length - 1; i > 0; i--) {
    const j = below(i + 1);
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  return deck;
}

/** Deals round-robin: the seats in ascending order, then the dealer; five passes. */
export function deal(deck, seatNumbers) {
  const ordered = [...seatNumbers].sort((a, b) => a - b);
  const n = ordered.length + 1;
  const hand = (k) => [0, 1, 2, 3, 4].map((pass) => deck[k + pass * n]);
  return { hands: ordered.map((seat, k) => ({ seat_number: seat, cards: hand(k) })), dealer: hand(n - 1) };
}
