// An independent re-implementation of docs/fairness.md ("The construction, byte by byte") with
// node:crypto only: it recomputes a revealed round's commitment, transcript hash, deck and hands.
// It shares no code with the service, so agreement with the service is evidence for both.
// Every fairness version: v1 hashes each seat's player_id; v2 hashes under its own commitment and
// lock tags and leaves the player out of the lock: a v2 seat names a player reference (p- and 32
// hex digits), bound to its seat by the signed ROUND_DEALT entry; v3 (the format of new rounds)
// hashes under its own tags and leaves the stake out of the lock too (the same entry binds it),
// so that the amount wagered moves no card.

import { createHash, createHmac } from 'node:crypto';

const utf8 = (text) => Buffer.from(text, 'utf8');
const tag = (name, version = 1) => utf8(`gnau-dealer/fairness/v${version}/${name}`);

/** The revealed-round format of each fairness version, and a v2 or v3 seat's player reference. */
export const FORMATS = {
  1: 'gnau-dealer/revealed-round/v1',
  2: 'gnau-dealer/revealed-round/v2',
  3: 'gnau-dealer/revealed-round/v3',
};
export const PLAYER_REF = /^p-[0-9a-f]{32}$/;

/** The fairness version of a revealed round (1, 2 or 3) from its `format`; throws for another. */
export function versionOf(round) {
  const version = Number(Object.keys(FORMATS).find((v) => FORMATS[v] === round.format));
  if (!version) throw new Error(`not a revealed round: format ${JSON.stringify(round.format)}`);
  return version;
}

/** Throws unless each seat names its player as the version says: a non-empty player_id in v1,
 *  a player_ref matching PLAYER_REF in v2 and v3 (and not the other member), no two seats with
 *  one. */
export function checkSeats(seats, version) {
  const byReference = version >= 2;
  const refs = seats.map((s) => s.player_ref);
  if (byReference && new Set(refs).size !== refs.length) {
    throw new Error('two seats have one player_ref: a reference names one seat of one round');
  }
  for (const s of seats) {
    const [want, other] = byReference ? ['player_ref', 'player_id'] : ['player_id', 'player_ref'];
    if (Object.hasOwn(s, other)) throw new Error(`seat ${s.seat_number}: a v${version} seat has no ${other}`);
    if (typeof s[want] !== 'string' || !s[want]) throw new Error(`seat ${s.seat_number}: ${want} missing`);
    if (byReference && !PLAYER_REF.test(s.player_ref)) {
      throw new Error(`seat ${s.seat_number}: player_ref ${JSON.stringify(s.player_ref)} is not a player reference`);
    }
  }
}
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
/** frame(x): the length of x as 4 bytes big-endian, then x. */
const frame = (data) => Buffer.concat([u32(data.length), data]);
const frames = (...fields) => Buffer.concat(fields.map(frame));
const sha256 = (...fields) => createHash('sha256').update(frames(...fields)).digest();
const mac = (key, data) => createHmac('sha256', key).update(data).digest();

/**
 * The commitment (hex) of `roundId` under `rules` ({name: value_text}, every rule) to `seed`,
 * under the tag of fairness `version` (1, 2 or 3).
 */
export function commitment(roundId, rules, seed, version = 1) {
  const keys = Object.keys(rules).sort();
  const encoded = Buffer.concat(keys.map((k) => frames(utf8(k), utf8(String(rules[k])))));
  return sha256(tag('commitment', version), utf8(roundId), encoded, u64(rules.decks), seed).toString('hex');
}

/**
 * The transcript hash (hex) locking `seats` ([{seat_number, player_id, stake, client_seed}],
 * stake a number, string or BigInt, client_seed a Buffer) and `beacon` ({label, value} or null).
 * In `version` 2 a seat is frame(seat_number) || frame(stake) || frame(client_seed): no player;
 * in `version` 3 frame(seat_number) || frame(client_seed): no player, no stake.
 */
export function transcriptHash(commitmentHex, seats, beacon, version = 1) {
  const ordered = [...seats].sort((a, b) => a.seat_number - b.seat_number);
  const player = (s) => (version === 1 ? [utf8(s.player_id)] : []);
  const stake = (s) => (version < 3 ? [u64(s.stake)] : []);
  const locked = Buffer.concat(ordered.map((s) => frame(frames(
    u64(s.seat_number), ...player(s), ...stake(s), Buffer.from(s.client_seed)))));
  const beaconBytes = beacon
    ? Buffer.concat([Buffer.of(1), frame(utf8(beacon.label)), frame(Buffer.from(beacon.value))])
    : Buffer.of(0);
  return sha256(tag('lock', version), Buffer.from(commitmentHex, 'hex'), locked, beaconBytes).toString('hex');
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

/**
 * Checks a revealed round (the JSON of docs/fairness.md, v1, v2 or v3) link by link; returns the
 * names of the links that fail (`format`, `seats`, `commitment`, `lock`, `deck`, `hands`,
 * `dealer hand`), empty when it verifies.
 */
export function verifyRevealedRound(r) {
  let version;
  try {
    version = versionOf(r);
    checkSeats(r.seats, version);
  } catch (error) {
    return [version ? 'seats' : 'format'];
  }
  const failures = [];
  const seed = Buffer.from(r.server_seed, 'hex');
  const rules = { decks: 1, five_small: true, payout: 'points', suited_double: false, ten_is_duke: false,
    three_six_pair: false, tie: 'dealer', trips_make_ox: true, ...r.house_rules };
  if (commitment(r.round_id, rules, seed, version) !== r.commitment.toLowerCase()) failures.push('commitment');
  const seats = r.seats.map((s) => ({ ...s, client_seed: Buffer.from(s.client_seed ?? '', 'hex') }));
  const beacon = r.beacon && { label: r.beacon.label, value: Buffer.from(r.beacon.value, 'hex') };
  if (transcriptHash(r.commitment, seats, beacon, version) !== r.transcript_hash.toLowerCase()) failures.push('lock');
  const deck = shuffledDeck(seed, r.transcript_hash, rules.decks);
  const card = (c) => c.toUpperCase().replace('10', 'T');
  if (deck.join(' ') !== r.deck.map(card).join(' ')) failures.push('deck');
  const dealt = deal(deck, seats.map((s) => s.seat_number));
  const published = [...r.hands].sort((a, b) => a.seat_number - b.seat_number)
    .map((h) => ({ seat_number: h.seat_number, cards: h.cards.map(card) }));
  if (JSON.stringify(dealt.hands) !== JSON.stringify(published)) failures.push('hands');
  if (dealt.dealer.join(' ') !== r.dealer_hand.map(card).join(' ')) failures.push('dealer hand');
  return failures;
}
