// The rules of Gnau as docs/rules.md states them: cards, house rules, evaluation of five cards
// and settlement of a table, in the JSON form the audit log records (Settlement.to_json).

import { isInteger, isObject, jsonType } from "./json.js";
import { quoted } from "./bytes.js";

export class RulesError extends Error {}

// -- cards --------------------------------------------------------------------------------------

export const RANKS = "A23456789TJQK";
export const SUITS = "CDHS"; // canonical deck order: clubs, diamonds, hearts, spades
export const SUIT_SYMBOLS = { C: "♣", D: "♦", H: "♥", S: "♠" };
export const SUIT_NAMES = { C: "clubs", D: "diamonds", H: "hearts", S: "spades" };
const RANK_NAMES = { A: "ace", T: "10", J: "jack", Q: "queen", K: "king" };

/** A card's text (case-insensitive, "10" for T, surrounding space ignored) in the form "TH". */
export function parseCard(token) {
  let text = token.trim().toUpperCase();
  if (text.startsWith("10")) text = "T" + text.slice(2);
  if (text.length !== 2 || !RANKS.includes(text[0]) || !SUITS.includes(text[1])) {
    throw new RulesError(`not a card: ${quoted(token)} (rank A 2-9 T/10 J Q K, then suit C D H S)`);
  }
  return text;
}

/** Face rank 1-13: A=1, J=11, Q=12, K=13. */
export function face(card) {
  return RANKS.indexOf(card[0]) + 1;
}

/** The card as people print it: "10♥". */
export function cardLabel(card) {
  return `${card[0] === "T" ? "10" : card[0]}${SUIT_SYMBOLS[card[1]]}`;
}

/** The card as a screen reader says it: "10 of hearts". */
export function cardName(card) {
  return `${RANK_NAMES[card[0]] ?? card[0]} of ${SUIT_NAMES[card[1]]}`;
}

/** `decks` decks in canonical order: each suit A 2 ... 10 J Q K, the decks concatenated. */
export function standardDeck(decks) {
  const one = [];
  for (const suit of SUITS) for (const rank of RANKS) one.push(rank + suit);
  return Array.from({ length: decks }, () => one).flat();
}

function checkCopies(cards, decks) {
  const counts = new Map();
  for (const card of cards) counts.set(card, (counts.get(card) ?? 0) + 1);
  for (const [card, copies] of counts) {
    if (copies > decks) {
      const holds = decks === 1 ? "1 deck holds" : `${decks} decks hold`;
      throw new RulesError(`card ${card} appears ${copies} times but ${holds} only ${decks}`);
    }
  }
}

// -- house rules --------------------------------------------------------------------------------

export const MAX_DECKS = 8;
/** Every house rule with its default, in the order the service lists them. */
export const DEFAULT_RULES = Object.freeze({
  ten_is_duke: false,
  three_six_pair: false,
  trips_make_ox: true,
  five_small: true,
  tie: "dealer",
  payout: "points",
  suited_double: false,
  decks: 1,
});
const CHOICES = { tie: ["dealer", "push", "high_card"], payout: ["points", "multiplier"] };

/** House rules from their JSON object: a missing key takes its default, an unknown one fails. */
export function readHouseRules(value) {
  if (!isObject(value)) throw new RulesError(`house_rules must be a JSON object, got ${jsonType(value)}`);
  const rules = { ...DEFAULT_RULES };
  for (const key of Object.keys(value)) {
    const given = value[key];
    if (!Object.hasOwn(DEFAULT_RULES, key)) {
      throw new RulesError(`unknown house rule ${quoted(key)} (known: ${Object.keys(DEFAULT_RULES).join(", ")})`);
    }
    if (key in CHOICES) {
      if (!CHOICES[key].includes(given)) {
        throw new RulesError(`house rule '${key}' must be one of ${CHOICES[key].join("|")}, got ${quoted(given)}`);
      }
    } else if (key === "decks") {
      if (!Number.isSafeInteger(given) || given < 1 || given > MAX_DECKS) {
        throw new RulesError(`house rule 'decks' must be an integer from 1 to ${MAX_DECKS}, got ${quoted(given)}`);
      }
    } else if (typeof given !== "boolean") {
      throw new RulesError(`house rule '${key}' must be true or false, got ${quoted(given)}`);
    }
    rules[key] = given;
  }
  return rules;
}

// -- evaluation ---------------------------------------------------------------------------------

export const CATEGORY_NAMES = {
  NO_OX: "No Ox",
  SINGLE_OX: "Single-Ox",
  DOUBLE_OX: "Double-Ox",
  NGAU_TONKU: "Ngau Tonku",
  FIVE_SMALL: "Five Small",
  FIVE_DUKES: "Five Dukes",
};

/** A category and value with its strength: 0 No Ox, 1-9 Single-Ox 1-9, 10 Single-Ox 0,
 *  11-23 Double-Ox A-K, 24 Ngau Tonku, 25 Five Small, 26 Five Dukes. */
function handRank(category, value = null) {
  const strength = {
    NO_OX: 0,
    SINGLE_OX: value === 0 ? 10 : value,
    DOUBLE_OX: 10 + value,
    NGAU_TONKU: 24,
    FIVE_SMALL: 25,
    FIVE_DUKES: 26,
  }[category];
  return { category, value, strength };
}

export function rankTitle(rank) {
  if (rank.category === "DOUBLE_OX") {
    const card = RANKS[rank.value - 1];
    return `Double-Ox ${card === "T" ? "10" : card}`;
  }
  if (rank.category === "SINGLE_OX") return `Single-Ox ${rank.value}`;
  return CATEGORY_NAMES[rank.category];
}

const HAND_SIZE = 5;
const isThreeOrSix = (card) => card[0] === "3" || card[0] === "6";
/** Ox points at face value: A=1, 2-9 as marked, 10 J Q K = 10. */
const points = (card) => Math.min(face(card), 10);
/** Every value a card may count at: 3 and 6 are each worth 3 or 6. */
const pointChoices = (card) => (isThreeOrSix(card) ? [3, 6] : [points(card)]);

/** Splits into three ox cards and two power cards, in the order of Python's
 *  itertools.combinations(range(5), 3): the order docs/rules.md fixes for ties. */
const SPLITS = [];
for (let a = 0; a < HAND_SIZE; a++)
  for (let b = a + 1; b < HAND_SIZE; b++)
    for (let c = b + 1; c < HAND_SIZE; c++) {
      SPLITS.push([[a, b, c], [0, 1, 2, 3, 4].filter((i) => i !== a && i !== b && i !== c)]);
    }

/** Sort key: a card's evaluation class, the Ace of Spades (0) before the ranks A-K (1-13). */
const evaluationClass = (card) => (card === "AS" ? 0 : face(card));

/**
 * Evaluate five cards under `rules`: the category, its value, the ox and power cards, the points
 * each card counted at, and the Nenku mark (docs/rules.md, "Evaluating five cards").
 */
export function evaluate(cards, rules) {
  if (cards.length !== HAND_SIZE) throw new RulesError(`a hand has exactly ${HAND_SIZE} cards, got ${cards.length}`);
  checkCopies(cards, rules.decks);
  // Readings are tried on the hand sorted by rank, Ace of Spades first, and mapped back.
  const order = [0, 1, 2, 3, 4].sort((i, j) => evaluationClass(cards[i]) - evaluationClass(cards[j]));
  const sorted = order.map((i) => cards[i]);
  const reading = bestReading(sorted, rules);
  const counted = new Array(HAND_SIZE);
  reading.points.forEach((value, position) => (counted[order[position]] = value));
  const inHandOrder = (positions) => positions.map((p) => order[p]).sort((a, b) => a - b).map((i) => cards[i]);
  return {
    cards: [...cards],
    rank: reading.rank,
    ox: inHandOrder(reading.ox),
    power: inHandOrder(reading.power),
    points: counted,
    nenku: reading.nenku,
  };
}

function bestReading(cards, rules) {
  const dukes = new Set(rules.ten_is_duke ? [10, 11, 12, 13] : [11, 12, 13]);
  let best = null;
  for (const [ox, power] of SPLITS) {
    const oxPoints = oxReading(ox.map((i) => cards[i]), rules);
    if (oxPoints === null) continue;
    const [rank, powerPoints, nenku] = powerReading(cards[power[0]], cards[power[1]], rules, dukes);
    // The first strongest reading wins; among equally strong ones, the first showing a Nenku.
    if (best === null || rank.strength > best.rank.strength || (rank.strength === best.rank.strength && nenku && !best.nenku)) {
      const counted = new Array(HAND_SIZE);
      [...ox, ...power].forEach((position, k) => (counted[position] = [...oxPoints, ...powerPoints][k]));
      best = { rank, ox, power, points: counted, nenku };
    }
  }
  if (best === null) best = { rank: handRank("NO_OX"), ox: [], power: [], points: cards.map(points), nenku: false };
  // Five Dukes and Five Small outrank any reading, which is still shown.
  if (cards.every((card) => dukes.has(face(card)))) return { ...best, rank: handRank("FIVE_DUKES"), nenku: false };
  if (rules.five_small && cards.every((card) => face(card) <= 4)) {
    return { ...best, rank: handRank("FIVE_SMALL"), nenku: false };
  }
  return best;
}

/** The points three cards count at to make an ox, or null. As few 3s and 6s as possible count
 *  as 6, and real 6s count as 6 before 3s do; three of a rank make an ox if the rules say so. */
function oxReading(ox, rules) {
  let fixed = 0;
  const flexible = [];
  ox.forEach((card, i) => (isThreeOrSix(card) ? flexible.push(i) : (fixed += points(card))));
  for (let sixes = 0; sixes <= flexible.length; sixes++) {
    if ((fixed + 3 * (flexible.length + sixes)) % 10 === 0) {
      const asSix = [...flexible].sort((i, j) => face(ox[j]) - face(ox[i])).slice(0, sixes);
      return ox.map((card, i) => (isThreeOrSix(card) ? (asSix.includes(i) ? 6 : 3) : points(card)));
    }
  }
  if (rules.trips_make_ox && face(ox[0]) === face(ox[1]) && face(ox[1]) === face(ox[2])) return ox.map(points);
  return null;
}

/** What two power cards give: [rank, the points they count at, Nenku]. */
function powerReading(first, second, rules, dukes) {
  const facePoints = [points(first), points(second)];
  const aceAndDuke = (ace) =>
    ace[1] === "S" ? [handRank("NGAU_TONKU"), facePoints, false] : [handRank("SINGLE_OX", 1), facePoints, true];
  if (face(first) === 1 && dukes.has(face(second))) return aceAndDuke(first);
  if (face(second) === 1 && dukes.has(face(first))) return aceAndDuke(second);
  if (rules.three_six_pair && isThreeOrSix(first) && isThreeOrSix(second)) return [handRank("DOUBLE_OX", 6), [6, 6], false];
  if (face(first) === face(second)) return [handRank("DOUBLE_OX", face(first)), facePoints, false];
  let best = null;
  for (const a of pointChoices(first))
    for (const b of pointChoices(second)) {
      const rank = handRank("SINGLE_OX", (a + b) % 10);
      if (best === null || rank.strength > best[0].strength) best = [rank, [a, b], false];
    }
  return best;
}

/** One line: "Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C" (the form the log records). */
export function describe(evaluation) {
  const title = rankTitle(evaluation.rank) + (evaluation.nenku ? " (Nenku)" : "");
  if (evaluation.ox.length === 0) return `${title}  ${evaluation.cards.join(" ")}`;
  const annotated = (card) =>
    isThreeOrSix(card) ? `${card}(${evaluation.points[evaluation.cards.indexOf(card)]})` : card;
  return `${title}  ox ${evaluation.ox.map(annotated).join(" ")}  power ${evaluation.power.map(annotated).join(" ")}`;
}

export function evaluationJson(evaluation) {
  return {
    cards: evaluation.cards,
    category: evaluation.rank.category,
    value: evaluation.rank.value,
    ox: evaluation.ox,
    power: evaluation.power,
    points: evaluation.points,
    nenku: evaluation.nenku,
    strength: evaluation.rank.strength,
    description: describe(evaluation),
  };
}

// -- settlement ---------------------------------------------------------------------------------

export const PAYOUTS = {
  points: { NO_OX: 0, SINGLE_OX: 1, DOUBLE_OX: 2, NGAU_TONKU: 5, FIVE_SMALL: 10, FIVE_DUKES: 10 },
  multiplier: { NO_OX: 0, SINGLE_OX: 1, DOUBLE_OX: 3, NGAU_TONKU: 5, FIVE_SMALL: 7, FIVE_DUKES: 7 },
};
// High card: rank K high ... A low, then spades > hearts > clubs > diamonds.
const SUIT_STRENGTH = { D: 0, C: 1, H: 2, S: 3 };
const highCard = (cards) => Math.max(...cards.map((card) => face(card) * 4 + SUIT_STRENGTH[card[1]]));

function outcomeOf(player, dealer, rules) {
  if (player.rank.category === "FIVE_DUKES" && dealer.rank.category === "FIVE_DUKES") return "TIE";
  if (player.rank.strength !== dealer.rank.strength) return player.rank.strength > dealer.rank.strength ? "WIN" : "LOSE";
  if (rules.tie === "push") return "TIE";
  if (rules.tie === "high_card" && highCard(player.cards) > highCard(dealer.cards)) return "WIN";
  return "LOSE"; // equal hands go to the dealer
}

/** Stake multiples a win with this hand is worth: the table, doubled for a suited hand. */
function payoutUnits(evaluation, rules) {
  const units = PAYOUTS[rules.payout][evaluation.rank.category];
  const suited = new Set(evaluation.cards.map((card) => card[1])).size === 1;
  return BigInt(rules.suited_double && suited ? 2 * units : units);
}

/** A whole number as JSON holds it: a Number where exact, else a BigInt (which no logged
 *  number equals: the log holds only integers within ±(2^53-1)). */
const jsonInteger = (n) => (n >= -BigInt(Number.MAX_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n);

/**
 * Settle every seat against the dealer: `players` is [{seat, cards, stake}]. Returns the
 * evaluations, outcomes and deltas, and `json`, the form the log's ROUND_SETTLED records.
 */
export function settle(dealerCards, players, rules) {
  if (players.length === 0) throw new RulesError("a table needs at least one player");
  const seen = new Set();
  for (const player of players) {
    if (!isInteger(player.seat) || player.seat < 1) throw new RulesError(`seat must be a positive integer, got ${quoted(player.seat)}`);
    if (seen.has(player.seat)) throw new RulesError(`seat ${player.seat} appears twice`);
    seen.add(player.seat);
    if (!isInteger(player.stake) || player.stake < 1) {
      throw new RulesError(`stake of seat ${player.seat} must be a positive integer of minor units, got ${quoted(player.stake)}`);
    }
  }
  checkCopies([...dealerCards, ...players.flatMap((player) => player.cards)], rules.decks);
  const dealer = evaluate(dealerCards, rules);
  const seats = [...players]
    .sort((a, b) => (a.seat < b.seat ? -1 : 1))
    .map((player) => {
      const evaluation = evaluate(player.cards, rules);
      const outcome = outcomeOf(evaluation, dealer, rules);
      const stake = BigInt(player.stake);
      const delta =
        outcome === "WIN" ? stake * payoutUnits(evaluation, rules) : outcome === "LOSE" ? -stake * payoutUnits(dealer, rules) : 0n;
      return { seat: player.seat, stake: player.stake, evaluation, outcome, delta };
    });
  const dealerDelta = -seats.reduce((sum, seat) => sum + seat.delta, 0n);
  return {
    dealer,
    dealerDelta,
    seats,
    json: {
      dealer: { ...evaluationJson(dealer), delta: jsonInteger(dealerDelta) },
      players: seats.map((seat) => ({
        seat: seat.seat,
        ...evaluationJson(seat.evaluation),
        stake: seat.stake,
        outcome: seat.outcome,
        delta: jsonInteger(seat.delta),
      })),
    },
  };
}
