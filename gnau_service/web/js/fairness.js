// Provable fairness as docs/fairness.md specifies it: the commitment, the lock transcript,
// HMAC_DRBG (NIST SP 800-90A, SHA-256), the rejection-sampling Fisher-Yates shuffle, the
// round-robin deal, and the strict reading and verification of a revealed round.

import { HEX_PAIRS, bytesOfHex, concat, equalBytes, frames, hexOf, quoted, uint64, utf8, utf8Length } from "./bytes.js";
import { hmacKey, hmacWith, sha256 } from "./crypto.js";
import { isInteger, isObject, jsonType } from "./json.js";
import { DEFAULT_RULES, RulesError, parseCard, readHouseRules, standardDeck } from "./rules.js";

/** The revealed-round format of each fairness version (docs/fairness.md): v1 seats name the
 *  platform's player id, v2 and v3 seats a player reference; v3 hashes no stake; each version
 *  hashes under its own tags. */
export const REVEALED_ROUND_FORMATS = {
  1: "gnau-dealer/revealed-round/v1",
  2: "gnau-dealer/revealed-round/v2",
  3: "gnau-dealer/revealed-round/v3",
};
export const REVEALED_ROUND_FORMAT = REVEALED_ROUND_FORMATS[1];
export const FAIRNESS_VERSIONS = [1, 2, 3];
/** Whether a version's seats name a player reference (v2 and v3) rather than a player id (v1). */
export const namesPlayersByReference = (version) => version >= 2;
/** A v2 or v3 seat's player reference: "p-" and 32 lower-case hex digits (docs/fairness.md). */
export const PLAYER_REF_PATTERN = /^p-[0-9a-f]{32}$/;
export const isPlayerRef = (text) => typeof text === "string" && PLAYER_REF_PATTERN.test(text);
/** The fairness version a revealed-round format names, or null for none. */
export const versionOfFormat = (format) => FAIRNESS_VERSIONS.find((version) => REVEALED_ROUND_FORMATS[version] === format) ?? null;
/** The member of a seat that says who sits there: the player id in v1, the reference after. */
export const playerField = (version) => (namesPlayersByReference(version) ? "player_ref" : "player_id");
const TAG = (name, version = 1) => utf8(`gnau-dealer/fairness/v${version}/${name}`);

/** The error of a revealed round that cannot be read; the message names the field's path. */
export class RevealFormatError extends Error {}

// -- step 1: commit -----------------------------------------------------------------------------

/** `true`/`false`, decimal, or the choice itself: how KEY=VALUE writes a rule. */
const ruleText = (value) => (typeof value === "boolean" ? (value ? "true" : "false") : String(value));

export function encodeHouseRules(rules) {
  const keys = Object.keys(rules).sort(); // the rule names are ASCII: byte order is this order
  return concat(...keys.map((key) => frames(utf8(key), utf8(ruleText(rules[key])))));
}

export async function computeCommitment(roundId, rules, serverSeed, version = 1) {
  return sha256(frames(TAG("commitment", version), utf8(roundId), encodeHouseRules(rules), uint64(rules.decks), serverSeed));
}

// -- step 2: lock -------------------------------------------------------------------------------

const bySeatNumber = (a, b) => (a.seat_number < b.seat_number ? -1 : a.seat_number > b.seat_number ? 1 : 0);

/** A seat as it enters the lock: v1 frames the player id after the seat number; v2 frames no
 *  player at all (the reference is bound by the signed ROUND_DEALT entry, not by the deck); v3
 *  frames no stake either (the amount wagered moves no card; the same entry binds it). */
export function encodeSeat(seat, version = 1) {
  if (version === 1) return frames(uint64(seat.seat_number), utf8(seat.player_id), uint64(seat.stake), seat.client_seed);
  if (version === 2) return frames(uint64(seat.seat_number), uint64(seat.stake), seat.client_seed);
  return frames(uint64(seat.seat_number), seat.client_seed);
}

export async function computeTranscriptHash(commitment, seats, beacon, version = 1) {
  const encodedSeats = [...seats].sort(bySeatNumber).map((seat) => encodeSeat(seat, version));
  const encodedBeacon = beacon === null ? new Uint8Array([0]) : concat(new Uint8Array([1]), frames(utf8(beacon.label), beacon.value));
  return sha256(frames(TAG("lock", version), commitment, frames(...encodedSeats), encodedBeacon));
}

// -- step 3: shuffle and deal -------------------------------------------------------------------

/** HMAC_DRBG with SHA-256 (SP 800-90A Rev. 1, 10.1.2): no reseed, no additional input. */
export class HmacDrbg {
  static async instantiate(entropyInput, nonce, personalization) {
    const drbg = new HmacDrbg();
    drbg.key = new Uint8Array(32); // K = 00...00
    drbg.value = new Uint8Array(32).fill(1); // V = 01...01
    await drbg.update(concat(entropyInput, nonce, personalization));
    return drbg;
  }

  async update(data = new Uint8Array(0)) {
    for (const flag of data.length ? [0, 1] : [0]) {
      this.key = await hmacWith(await hmacKey(this.key), concat(this.value, new Uint8Array([flag]), data));
      this.value = await hmacWith(await hmacKey(this.key), this.value);
    }
  }

  async generate(length) {
    const key = await hmacKey(this.key);
    const out = [];
    let produced = 0;
    while (produced < length) {
      this.value = await hmacWith(key, this.value);
      out.push(this.value);
      produced += this.value.length;
    }
    await this.update();
    return concat(...out).slice(0, length);
  }
}

/** 32-bit big-endian words from successive Generate(64 bytes) calls. */
class WordStream {
  constructor(drbg) {
    this.drbg = drbg;
    this.words = [];
    this.used = 0;
  }

  async next() {
    if (this.words.length === 0) {
      const block = await this.drbg.generate(64);
      const view = new DataView(block.buffer);
      for (let i = 0; i < 64; i += 4) this.words.push(view.getUint32(i));
    }
    this.used++;
    return this.words.shift();
  }

  /** A uniform draw below n: a word in the incomplete top copy of 0..n-1 is rejected. */
  async below(n) {
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) {
      const word = await this.next();
      if (word < limit) return word % n;
    }
  }
}

/** The shuffled deck: Fisher-Yates (Durstenfeld) over the canonical order of `decks` decks. */
export async function shuffleDeck(serverSeed, transcriptHash, decks) {
  const drbg = await HmacDrbg.instantiate(serverSeed, transcriptHash, TAG("shuffle"));
  const words = new WordStream(drbg);
  const deck = standardDeck(decks);
  for (let i = deck.length - 1; i >= 1; i--) {
    const j = await words.below(i + 1);
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  return deck;
}

/** Five passes, one card at a time: the seats in ascending order, then the dealer. */
export function dealRoundRobin(deck, seatNumbers) {
  const seats = [...seatNumbers].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const hands = seats.length + 1;
  const handOf = (k) => [0, 1, 2, 3, 4].map((pass) => deck[k + pass * hands]);
  return { seatHands: seats.map((seat, k) => ({ seat_number: seat, cards: handOf(k) })), dealerHand: handOf(seats.length) };
}

// -- step 4: the revealed round -----------------------------------------------------------------

const TOP_FIELDS = ["format", "round_id", "house_rules", "seats", "beacon", "commitment", "transcript_hash", "server_seed", "deck", "hands", "dealer_hand"];
const LIMITS = { seatNumber: 2 ** 31 - 1, stake: 2n ** 63n - 1n, text: 128, clientSeed: 64, beaconValue: 1024 };

class Fields {
  constructor(value, path, names) {
    this.path = path;
    if (!isObject(value)) this.fail("", `${path || "a revealed round"} must be a JSON object, got ${jsonType(value)}`);
    for (const key of Object.keys(value)) {
      if (!names.includes(key)) this.fail(key, `is not a field of ${path || "a revealed round"} (known: ${names.join(", ")})`);
    }
    this.value = value;
  }

  where(key) {
    return this.path ? `${this.path}.${key}` : key;
  }

  fail(key, problem) {
    throw new RevealFormatError(key ? `${this.where(key)} ${problem}` : problem);
  }

  get(key, fallback) {
    if (Object.hasOwn(this.value, key)) return this.value[key];
    if (fallback === undefined) this.fail(key, "is missing");
    return fallback;
  }

  text(key, maxBytes) {
    const value = this.get(key);
    if (typeof value !== "string") this.fail(key, `must be a string, got ${jsonType(value)}`);
    if (value === "") this.fail(key, "must be a non-empty string");
    if (!value.isWellFormed()) this.fail(key, "must be valid Unicode text");
    if (utf8Length(value) > maxBytes) this.fail(key, `must be at most ${maxBytes} bytes of UTF-8, got ${utf8Length(value)} bytes`);
    return value;
  }

  integer(key, minimum, maximum) {
    const value = this.get(key);
    if (!isInteger(value)) this.fail(key, `must be an integer, got ${jsonType(value)}`);
    if (value < minimum || value > maximum) this.fail(key, `must be an integer from ${minimum} to ${maximum}, got ${quoted(value)}`);
    return value;
  }

  hex(key, { optional = false, min = 0, max = Infinity } = {}) {
    const value = optional ? this.get(key, "") : this.get(key);
    if (typeof value !== "string" || !HEX_PAIRS.test(value)) this.fail(key, `must be a string of hex digit pairs, got ${quoted(value)}`);
    const bytes = bytesOfHex(value);
    if (bytes.length < min || bytes.length > max) {
      const wanted = min === max ? `exactly ${min} bytes` : `${min} to ${max} bytes`;
      this.fail(key, `must be ${wanted}, got ${bytes.length} bytes`);
    }
    return bytes;
  }

  array(key) {
    const value = this.get(key);
    if (!Array.isArray(value)) this.fail(key, `must be a JSON array, got ${jsonType(value)}`);
    return value;
  }

  cards(key) {
    return this.array(key).map((token, index) => {
      const where = `${key}[${index}]`;
      if (typeof token !== "string") this.fail(where, `must be a card such as 'TH', got ${jsonType(token)}`);
      try {
        return parseCard(token);
      } catch (error) {
        return this.fail(where, `is ${error.message}`);
      }
    });
  }
}

/**
 * Read a revealed round strictly (docs/fairness.md, "Reading"): unknown or missing fields, bad
 * types, hex or cards, seats given twice, a table too big for its decks all throw
 * RevealFormatError naming the field. Seats and hands come back in seat order, hex as bytes,
 * cards in the form "TH".
 */
export function readRevealedRound(value) {
  const top = new Fields(value, "", TOP_FIELDS);
  const format = top.get("format");
  const version = versionOfFormat(format);
  if (version === null) {
    const known = FAIRNESS_VERSIONS.map((v) => `'${REVEALED_ROUND_FORMATS[v]}'`).join(" or ");
    top.fail("format", `must be ${known}, got ${quoted(format)}`);
  }
  const player = playerField(version);
  let rules;
  try {
    rules = readHouseRules(top.get("house_rules"));
  } catch (error) {
    if (!(error instanceof RulesError)) throw error;
    throw new RevealFormatError(`house_rules: ${error.message}`);
  }
  const seats = top.array("seats").map((item, index) => {
    const seat = new Fields(item, `seats[${index}]`, ["seat_number", player, "stake", "client_seed"]);
    const seatNumber = seat.integer("seat_number", 1, LIMITS.seatNumber);
    const who = seat.text(player, LIMITS.text);
    if (namesPlayersByReference(version) && !isPlayerRef(who)) seat.fail(player, `must be a player reference, 'p-' and 32 lower-case hex digits, got ${quoted(who)}`);
    return {
      seat_number: seatNumber,
      [player]: who,
      stake: seat.integer("stake", 1, LIMITS.stake),
      client_seed: seat.hex("client_seed", { optional: true, max: LIMITS.clientSeed }),
    };
  });
  const beaconValue = top.get("beacon", null);
  let beacon = null;
  if (beaconValue !== null) {
    const fields = new Fields(beaconValue, "beacon", ["label", "value"]);
    beacon = { label: fields.text("label", LIMITS.text), value: fields.hex("value", { min: 1, max: LIMITS.beaconValue }) };
  }
  const round = {
    version,
    round_id: top.text("round_id", LIMITS.text),
    rules,
    seats: seats.sort(bySeatNumber),
    beacon,
    commitment: top.hex("commitment", { min: 32, max: 32 }),
    transcript_hash: top.hex("transcript_hash", { min: 32, max: 32 }),
    server_seed: top.hex("server_seed", { min: 32, max: 32 }),
    deck: top.cards("deck"),
    hands: top.array("hands").map((item, index) => {
      const hand = new Fields(item, `hands[${index}]`, ["seat_number", "cards"]);
      const seatNumber = hand.get("seat_number");
      if (!isInteger(seatNumber)) hand.fail("seat_number", `must be an integer, got ${jsonType(seatNumber)}`);
      return { seat_number: seatNumber, cards: hand.cards("cards") };
    }),
    dealer_hand: top.cards("dealer_hand"),
  };
  round.hands.sort(bySeatNumber);
  if (round.seats.length === 0) throw new RevealFormatError("seats: a round needs at least one seat");
  for (let i = 1; i < round.seats.length; i++) {
    if (round.seats[i].seat_number === round.seats[i - 1].seat_number) {
      throw new RevealFormatError(`seats: seat ${round.seats[i].seat_number} is locked twice`);
    }
  }
  if (namesPlayersByReference(version)) {
    // A reference is made for its own seat: two seats of one round never share one.
    const seatOf = new Map();
    for (const seat of round.seats) {
      const first = seatOf.get(seat.player_ref);
      if (first !== undefined) throw new RevealFormatError(`seats: seat ${seat.seat_number} has the player reference of seat ${first}: a reference names one seat of one round`);
      seatOf.set(seat.player_ref, seat.seat_number);
    }
  }
  for (let i = 1; i < round.hands.length; i++) {
    if (round.hands[i].seat_number === round.hands[i - 1].seat_number) {
      throw new RevealFormatError(`hands: two hands are given for seat ${round.hands[i].seat_number}`);
    }
  }
  const needed = 5 * (round.seats.length + 1);
  if (needed > 52 * rules.decks) {
    const holds = rules.decks === 1 ? "1 deck holds" : `${rules.decks} decks hold`;
    throw new RevealFormatError(
      `seats: ${round.seats.length} seats and the dealer need ${needed} cards, ${holds} ${52 * rules.decks}: ` +
        `at most ${Math.floor((52 * rules.decks) / 5) - 1} seats; raise house rule 'decks'`,
    );
  }
  return round;
}

/** The round as plain JSON values in one spelling (seat order, lower-case hex, "TH" cards,
 *  every house rule): two readings of one round give equal JSON. */
export function revealedRoundJson(round) {
  return {
    format: REVEALED_ROUND_FORMATS[round.version ?? 1],
    round_id: round.round_id,
    house_rules: Object.fromEntries(Object.keys(DEFAULT_RULES).map((key) => [key, round.rules[key]])),
    seats: round.seats.map((seat) => ({ ...seat, client_seed: hexOf(seat.client_seed) })),
    beacon: round.beacon === null ? null : { label: round.beacon.label, value: hexOf(round.beacon.value) },
    commitment: hexOf(round.commitment),
    transcript_hash: hexOf(round.transcript_hash),
    server_seed: hexOf(round.server_seed),
    deck: round.deck,
    hands: round.hands,
    dealer_hand: round.dealer_hand,
  };
}

// -- verifying a round --------------------------------------------------------------------------

/**
 * Recompute every link of the chain (docs/fairness.md, "Verifying a round"): the commitment,
 * the lock, the deck, each seat's hand and the dealer's. Returns the failures in that order,
 * each {subject, detail}: the first one is the reason the round does not verify.
 */
export async function verifyRevealedRound(round) {
  const failures = [];
  const version = round.version ?? 1;
  const commitment = await computeCommitment(round.round_id, round.rules, round.server_seed, version);
  if (!equalBytes(commitment, round.commitment)) {
    failures.push({
      subject: "commitment",
      detail: `the round id, house rules and revealed seed hash to ${hexOf(commitment)}, but the published commitment is ${hexOf(round.commitment)}`,
    });
  }
  const transcript = await computeTranscriptHash(round.commitment, round.seats, round.beacon, version);
  if (!equalBytes(transcript, round.transcript_hash)) {
    failures.push({
      subject: "lock",
      detail: `the seats and beacon hash to ${hexOf(transcript)}, but the published transcript hash is ${hexOf(round.transcript_hash)}`,
    });
  }
  const deck = await shuffleDeck(round.server_seed, round.transcript_hash, round.rules.decks);
  if (deck.length !== round.deck.length) {
    failures.push({ subject: "deck", detail: `the seed and transcript give ${deck.length} cards, but the published deck has ${round.deck.length}` });
  } else {
    const position = deck.findIndex((card, i) => card !== round.deck[i]);
    if (position >= 0) {
      failures.push({
        subject: "deck",
        detail: `at position ${position} (0 is dealt first) the seed and transcript give ${deck[position]}, but the published deck has ${round.deck[position]}`,
      });
    }
  }
  const deal = dealRoundRobin(deck, round.seats.map((seat) => seat.seat_number));
  const published = new Map(round.hands.map((hand) => [hand.seat_number, hand.cards]));
  const differs = (dealt, claimed) => `the deal gives ${dealt.join(" ")}, but the published hand is ${claimed.join(" ")}`;
  for (const hand of deal.seatHands) {
    const claimed = published.get(hand.seat_number);
    published.delete(hand.seat_number);
    if (claimed === undefined) {
      failures.push({ subject: `hand of seat ${hand.seat_number}`, detail: `no hand is published for this seat; the deal gives ${hand.cards.join(" ")}` });
    } else if (claimed.join(" ") !== hand.cards.join(" ")) {
      failures.push({ subject: `hand of seat ${hand.seat_number}`, detail: differs(hand.cards, claimed) });
    }
  }
  for (const seatNumber of [...published.keys()].sort((a, b) => (a < b ? -1 : 1))) {
    failures.push({ subject: `hand of seat ${seatNumber}`, detail: "a hand is published for this seat, but no such seat is locked" });
  }
  if (deal.dealerHand.join(" ") !== round.dealer_hand.join(" ")) {
    failures.push({ subject: "dealer hand", detail: differs(deal.dealerHand, round.dealer_hand) });
  }
  return { failures, deck, deal };
}

/** The seat a player's query names: a player reference (v2, v3) or player id (v1), exactly, or a
 *  seat number; null when no seat of the round matches. */
export function findSeat(round, query) {
  const text = query.trim();
  if (!round || !text) return null;
  const reference = text.toLowerCase();
  if (isPlayerRef(reference)) return round.seats.find((seat) => seat.player_ref === reference) ?? null;
  if (/^[0-9]{1,10}$/.test(text)) return round.seats.find((seat) => seat.seat_number === Number(text)) ?? null;
  return round.seats.find((seat) => (seat.player_ref ?? seat.player_id) === text) ?? null;
}

export const failureText = (failure) => `${failure.subject}: ${failure.detail}`;
