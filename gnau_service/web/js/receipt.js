// Round receipts (docs/receipts.md): reading one, and its seven checks in their order. Also the
// bare revealed round (gnau round verify), for which only the fairness step applies.

import { HEX_PAIRS, bytesOfHex, hexOf, quoted, utf8, utf8Length } from "./bytes.js";
import { cosigners, parseWitnessVkey } from "./cosignature.js";
import { ed25519Verify } from "./crypto.js";
import {
  REVEALED_ROUND_FORMATS,
  RevealFormatError,
  computeCommitment,
  failureText,
  readRevealedRound,
  revealedRoundJson,
  verifyRevealedRound,
  versionOfFormat,
} from "./fairness.js";
import { canonicalJson, CanonicalError } from "./jcs.js";
import { JsonError, isInteger, isObject, jsonType, parseJson } from "./json.js";
import { leafHash, verifyConsistency, verifyInclusion, ProofError } from "./merkle.js";
import { KeyFormatError, NoteError, openCheckpoint, parseCheckpoint, parseSignedNote, parseVkey, trustedKeys, utcInstant } from "./note.js";
import { DEFAULT_RULES, RulesError, readHouseRules, settle } from "./rules.js";

export const RECEIPT_FORMAT = "gnau-dealer/round-receipt/v1";
export const STEPS = ["fairness", "entries", "round", "outcome", "checkpoint", "inclusion", "consistency"];
const MAX_ENTRIES = 4;
const MAX_PROOF_HASHES = 64;
/** A proof hash as the log writes one: 64 lower-case hex digits (gnau_service.audit.entries.is_hash_hex). */
const HASH_HEX = /^[0-9a-f]{64}$/;

/** A document, key or pin that cannot be checked at all (gnau receipt verify's exit 2). */
export class UnreadableError extends Error {}

class StepFailure extends Error {
  constructor(step, reason) {
    super(reason);
    this.step = step;
  }
}

/** A step the receipt does not carry enough to check (a consistency proof from the pin): not
 * evidence of tampering, and not valid either. */
class StepUnchecked extends StepFailure {}

// -- reading ------------------------------------------------------------------------------------

function members(value, what, names) {
  if (!isObject(value)) throw new UnreadableError(`${what} must be a JSON object, not ${jsonType(value)}`);
  const given = Object.keys(value);
  const missing = names.filter((name) => !given.includes(name));
  const unknown = given.filter((name) => !names.includes(name));
  if (missing.length || unknown.length) {
    throw new UnreadableError(`${what}: missing members ${quoted(missing, 120)}, unknown members ${quoted(unknown, 120)}`);
  }
  return value;
}

function typed(object, name, check, kind, what) {
  const value = object[name];
  if (!check(value)) throw new UnreadableError(`${what}: ${name} must be ${kind}, not ${jsonType(value)}`);
  return value;
}

const isString = (value) => typeof value === "string";

function hashes(list, what) {
  if (list.length > MAX_PROOF_HASHES) throw new UnreadableError(`${what}: a proof of ${list.length} hashes is too long`);
  return list.map((item) => {
    if (!isString(item) || !HASH_HEX.test(item)) throw new UnreadableError(`${what}: a proof hash must be 64 lower-case hex digits`);
    return bytesOfHex(item);
  });
}

/** Read a receipt's JSON form (docs/receipts.md, "The document"); throws UnreadableError. */
export function readReceipt(value) {
  const top = members(value, "the receipt", ["format", "round_id", "round", "entries", "checkpoint", "key_rotations", "consistency"]);
  if (top.format !== RECEIPT_FORMAT) throw new UnreadableError(`format is ${quoted(top.format)}, not '${RECEIPT_FORMAT}'`);
  const roundId = typed(top, "round_id", isString, "a string", "the receipt");
  if (top.round !== null && !isObject(top.round)) throw new UnreadableError(`round must be an object or null, not ${jsonType(top.round)}`);
  const entries = typed(top, "entries", Array.isArray, "an array", "the receipt");
  if (entries.length < 1 || entries.length > MAX_ENTRIES) throw new UnreadableError(`entries must hold 1 to ${MAX_ENTRIES}, not ${entries.length}`);
  const rotations = typed(top, "key_rotations", Array.isArray, "an array", "the receipt");
  if (!rotations.every(isString)) throw new UnreadableError("key_rotations must be strings (signed notes)");
  let consistency = null;
  if (top.consistency !== null) {
    const fields = members(top.consistency, "consistency", ["first_size", "proof"]);
    consistency = {
      firstSize: typed(fields, "first_size", isInteger, "an integer", "consistency"),
      proof: hashes(typed(fields, "proof", Array.isArray, "an array", "consistency"), "consistency"),
    };
  }
  return {
    roundId,
    round: top.round,
    entries: entries.map((item, position) => {
      const what = `entries[${position}]`;
      const entry = members(item, what, ["index", "entry", "inclusion_proof"]);
      const text = typed(entry, "entry", isString, "a string", what);
      if (!text.isWellFormed()) throw new UnreadableError(`${what}: entry is not valid Unicode text`);
      return {
        index: typed(entry, "index", isInteger, "an integer", what),
        text,
        bytes: utf8(text),
        proof: hashes(typed(entry, "inclusion_proof", Array.isArray, "an array", what), what),
      };
    }),
    checkpoint: typed(top, "checkpoint", isString, "a string", "the receipt"),
    rotations,
    consistency,
  };
}

// -- entries (docs/audit.md, "Entries") ---------------------------------------------------------

const ENTRY_MEMBERS = ["index", "key_id", "kind", "payload", "prev_hash", "round_id", "signature", "time"];
const KINDS = [
  "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED", "ROUND_VOIDED",
  "SERVICE_STARTED", "SERVICE_STOPPED", "CONFIG_CHANGED", "TOKENS_CHANGED", "KEY_ROTATED", "PLAYER_FORGOTTEN",
  "TABLE_CHANGED", "OPERATOR_CHANGED", "GAMING_CHANGED", "SOFTWARE_VERIFIED",
];
const MAX_NESTING = 32;
const MAX_ACTOR_BYTES = 256;
const TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/**
 * Why a payload's `actor` is not one (docs/audit.md, the actor), or null when it is: "service",
 * "console", "token:NAME" (a token file's name) or "cert:CN" (a client certificate's common
 * name), at most 256 bytes of UTF-8 and no control character. Entries from before actors were
 * logged have none, and need none.
 */
export function actorProblem(actor) {
  if (!isString(actor)) return `actor must be a string, not ${jsonType(actor)}`;
  if (utf8Length(actor) > MAX_ACTOR_BYTES) return `actor is longer than ${MAX_ACTOR_BYTES} bytes of UTF-8`;
  if (CONTROL_CHARACTER.test(actor)) return `actor ${quoted(actor)} holds a control character`;
  if (actor === "service" || actor === "console") return null;
  if (actor.startsWith("token:")) return TOKEN_NAME.test(actor.slice(6)) ? null : `actor ${quoted(actor)} names a token by something that is not a token name`;
  if (actor.startsWith("cert:")) return actor.length > 5 ? null : `actor ${quoted(actor)} names no certificate`;
  return `actor ${quoted(actor)} is not service, console, token:NAME or cert:CN`;
}

const OPERATOR_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/**
 * Why a payload's `operator` is not an operator id (docs/audit.md, the operator), or null when it
 * is: 1 to 64 of a-z, 0-9, ".", "_", "-", starting with a letter or digit. Entries from before
 * operators were logged have none, and need none.
 */
export function operatorProblem(operator) {
  if (!isString(operator)) return `operator must be a string, not ${jsonType(operator)}`;
  if (!OPERATOR_ID.test(operator)) return `operator ${quoted(operator)} is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit`;
  return null;
}

/** Parse, check and verify one entry's text against the trusted keys; throws with the rule it
 * breaks, without naming the entry: the caller names it, once. */
async function decodeEntry(text, keys) {
  let entry;
  try {
    entry = parseJson(text, { maxDepth: MAX_NESTING });
  } catch (error) {
    if (error instanceof JsonError) throw new Error(`not JSON an entry may be: ${error.message}`);
    throw error;
  }
  if (!isObject(entry)) throw new Error("not a JSON object");
  const names = Object.keys(entry);
  const missing = ENTRY_MEMBERS.filter((name) => !names.includes(name));
  const unknown = names.filter((name) => !ENTRY_MEMBERS.includes(name));
  if (missing.length || unknown.length) throw new Error(`missing members ${quoted(missing)}, unknown members ${quoted(unknown, 120)}`);
  let canonical;
  try {
    canonical = canonicalJson(entry);
  } catch (error) {
    if (error instanceof CanonicalError) throw new Error(`${error.message}`);
    throw error;
  }
  if (canonical !== text) throw new Error(`bytes are not RFC 8785 canonical JSON`);
  const { index, kind, time, payload } = entry;
  if (!Number.isSafeInteger(index) || index < 0) throw new Error(`index ${quoted(index)} is not an integer in 0..2**53-1`);
  if (!KINDS.includes(kind)) throw new Error(`unknown kind ${quoted(kind)}`);
  if (utcInstant(time) === null) throw new Error(`time ${quoted(time)} is not an RFC 3339 UTC timestamp of a real instant`);
  if (kind.startsWith("ROUND_")) {
    const roundIdBytes = isString(entry.round_id) ? new TextEncoder().encode(entry.round_id).length : 0;
    if (roundIdBytes === 0 || roundIdBytes > 128) {
      throw new Error(`a ${kind} entry needs a round_id of 1-128 bytes of UTF-8`);
    }
  } else if (entry.round_id !== null) {
    throw new Error(`a ${kind} entry must have round_id null`);
  }
  if (!isObject(payload)) throw new Error(`payload must be a JSON object`);
  if (Object.hasOwn(payload, "actor")) {
    const problem = actorProblem(payload.actor);
    if (problem) throw new Error(problem);
  }
  if (Object.hasOwn(payload, "operator")) {
    const problem = operatorProblem(payload.operator);
    if (problem) throw new Error(problem);
  }
  if (!isString(entry.prev_hash) || !/^[0-9a-f]{64}$/.test(entry.prev_hash)) throw new Error(`prev_hash must be 64 lower-case hex digits`);
  if (!isString(entry.key_id) || !/^[0-9a-f]{8}$/.test(entry.key_id)) throw new Error(`key_id must be 8 lower-case hex digits`);
  if (!isString(entry.signature) || !/^[0-9a-f]{128}$/.test(entry.signature)) throw new Error(`signature must be 128 lower-case hex digits`);
  // The signed bytes are the canonical JSON of the seven members other than the signature.
  const { signature, ...signed } = entry;
  const candidates = keys.filter((key) => key.keyId === entry.key_id);
  if (candidates.length === 0) throw new Error(`signed by key ${entry.key_id}, which is not trusted`);
  const message = utf8(canonicalJson(signed));
  for (const key of candidates) {
    if (await ed25519Verify(key.publicKey, bytesOfHex(signature), message)) return entry;
  }
  throw new Error(`the signature does not verify`);
}

// -- the checks ---------------------------------------------------------------------------------

const ALLOWED_AFTER = {
  ROUND_COMMITTED: [null],
  ROUND_DEALT: ["ROUND_COMMITTED"],
  ROUND_REVEALED: ["ROUND_DEALT"],
  ROUND_SETTLED: ["ROUND_REVEALED"],
  ROUND_VOIDED: ["ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED"],
};
/** The fields each event publishes, exactly (docs/audit.md, "Rounds in the log"). */
const EVENT_FIELDS = {
  ROUND_COMMITTED: ["table_id", "house_rules", "commitment"],
  ROUND_DEALT: ["seats", "beacon", "transcript_hash", "hands", "dealer_hand"],
  ROUND_REVEALED: ["server_seed", "deck"],
};
/** Who acted and whose round it is: absent from entries logged before actors and operators, and
 *  no field of the round. */
const WHO = ["actor", "operator"];
/** Members an event may carry besides: who acted and whose round it is, the rule set's disclosed
 *  return to player (docs/audit.md), the fairness version of a round after v1 (docs/fairness.md;
 *  absent means v1), and the software that dealt the round. */
const OPTIONAL_FIELDS = {
  ROUND_COMMITTED: [...WHO, "return_to_player", "fairness_version", "table_version", "currency"],
  ROUND_DEALT: [...WHO, "software"],
  ROUND_REVEALED: WHO,
};
/** A committed entry's table version and currency (docs/audit.md, *Rounds in the log*): both or
 *  neither (a round from before the catalogue); a positive version, and an ISO 4217 code with a
 *  minor-unit exponent of 0 to 4. */
function requireTablePlayed(payload, roundId) {
  const present = ["table_version", "currency"].filter((key) => Object.hasOwn(payload, key));
  if (present.length === 0) {
    return;
  }
  if (present.length === 1) {
    throw new StepFailure("entries", `round ${roundId}: ROUND_COMMITTED names table_version and currency together or neither`);
  }
  const version = payload.table_version;
  if (!Number.isSafeInteger(version) || version < 1) {
    throw new StepFailure("entries", `round ${roundId}: ROUND_COMMITTED's table_version must be a positive integer, got ${quoted(version)}`);
  }
  const currency = payload.currency;
  const keys = currency !== null && typeof currency === "object" && !Array.isArray(currency) ? Object.keys(currency).sort() : [];
  if (!same(keys, ["code", "exponent"]) || typeof currency.code !== "string" || !/^[A-Z]{3}$/.test(currency.code)
      || !Number.isSafeInteger(currency.exponent) || currency.exponent < 0 || currency.exponent > 4) {
    throw new StepFailure("entries", `round ${roundId}: ROUND_COMMITTED's currency must be {"code": three capital letters, "exponent": 0 to 4}`);
  }
}
/** A void's closed list of reason codes; the last is the service's own (docs/audit.md). */
export const VOID_REASON_CODES = ["PLATFORM_FAILURE", "STAKE_REJECTED", "GAME_MALFUNCTION", "TABLE_CLOSED", "REGULATOR_ORDER", "DEAL_DEADLINE_PASSED"];
const VOID_MEMBERS = ["reason", "reason_code", "server_seed", "state"];
const VOID_AFTER_DEAL_MEMBERS = [...VOID_MEMBERS, "paid", "result"].sort();
const LEGACY_VOID_MEMBERS = ["reason", "server_seed", "state"];
const AFTER_THE_DEAL = "a void after the deal must settle every seat at the better of its result and a refund";
const DISCLOSED_MEMBERS = ["house_edge", "house_edge_decimal", "rtp", "rtp_decimal"];
/** The fields of each event that the round merges: the commitment's table_id is not one. */
const MERGED_FIELDS = { ...EVENT_FIELDS, ROUND_COMMITTED: ["house_rules", "commitment"], ROUND_VOIDED: ["server_seed"] };

/**
 * Whether the key with this id was current at this instant: a retired key signs nothing after
 * its rotation, a new one nothing before (the rotation's own instant may be either's).
 */
function currentAt(keys, keyId, instant) {
  return keys.some((key) => key.keyId === keyId && (key.since == null || key.since <= instant) && (key.until == null || instant <= key.until));
}

/** The pinned keys, and every key a valid chain of rotations from one of them hands over to. */
async function trusted(pins, rotations) {
  const keys = pins.map((pin) => ({ ...pin, since: null, until: null }));
  for (const pin of pins) {
    let chain;
    try {
      chain = await trustedKeys(pin, rotations);
    } catch (error) {
      if (error instanceof NoteError) continue; // rotations from another pinned key
      throw error;
    }
    // The chain knows when each of its keys was current: it replaces the bare pin.
    for (const key of chain) {
      const known = keys.findIndex((other) => other.name === key.name && other.vkey === key.vkey);
      if (known === -1) keys.push(key);
      else keys[known] = key;
    }
  }
  return keys;
}

function same(a, b) {
  return stableJson(a) === stableJson(b);
}

/** JSON with members in sorted order and BigInts in decimal: equal for equal values. */
export function stableJson(value) {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (isObject(value)) {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${stableJson(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value?.text ?? value); // a JsonFloat as written
}

/** Where two JSON values first differ, as "settlement.players[0].delta is 5, the rules give 10". */
function firstDifference(expected, logged, path) {
  if (isObject(expected) && isObject(logged)) {
    for (const key of [...new Set([...Object.keys(expected), ...Object.keys(logged)])].sort()) {
      if (!same(expected[key], logged[key])) return firstDifference(expected[key], logged[key], `${path}.${key}`);
    }
  }
  if (Array.isArray(expected) && Array.isArray(logged) && expected.length === logged.length) {
    for (let i = 0; i < expected.length; i++) {
      if (!same(expected[i], logged[i])) return firstDifference(expected[i], logged[i], `${path}[${i}]`);
    }
  }
  return `${path} is ${logged === undefined ? "missing" : quoted(logged)}, the rules give ${quoted(expected)}`;
}

async function fairnessStep(receipt) {
  let round;
  try {
    round = readRevealedRound(receipt.round);
  } catch (error) {
    if (error instanceof RevealFormatError) throw new StepFailure("fairness", `the round is not a revealed round: ${error.message}`);
    throw error;
  }
  if (round.round_id !== receipt.roundId) {
    throw new StepFailure("fairness", `the round is ${quoted(round.round_id)}, the receipt is for ${quoted(receipt.roundId)}`);
  }
  const { failures } = await verifyRevealedRound(round);
  if (failures.length) throw new StepFailure("fairness", failureText(failures[0]));
  return round;
}

async function entriesStep(receipt, keys) {
  const entries = [];
  let last = null;
  for (const [position, item] of receipt.entries.entries()) {
    let entry;
    try {
      entry = await decodeEntry(item.text, keys);
    } catch (error) {
      throw new StepFailure("entries", `entry ${item.index}: ${error.message}`);
    }
    if (!currentAt(keys, entry.key_id, utcInstant(entry.time))) {
      throw new StepFailure("entries", `entry ${entry.index} is signed by key ${entry.key_id}, which was not the log's key at ${entry.time}`);
    }
    if (entry.index !== Number(item.index)) throw new StepFailure("entries", `entries[${position}] says index ${entry.index}, listed as ${item.index}`);
    if (entries.length && entry.index <= entries.at(-1).index) {
      throw new StepFailure("entries", `entry ${entry.index} is not after entry ${entries.at(-1).index}`);
    }
    if (entry.round_id !== receipt.roundId || !entry.kind.startsWith("ROUND_")) {
      throw new StepFailure("entries", `entry ${entry.index} is ${entry.kind} of ${quoted(entry.round_id)}, not an event of round ${quoted(receipt.roundId)}`);
    }
    if (!ALLOWED_AFTER[entry.kind].includes(last)) {
      throw new StepFailure("entries", `round ${receipt.roundId}: ${entry.kind} ${last === null ? "before anything else" : `after ${last}`}`);
    }
    const fields = EVENT_FIELDS[entry.kind];
    if (fields) {
      const optional = OPTIONAL_FIELDS[entry.kind] ?? [];
      const given = Object.keys(entry.payload).sort();
      if (!same(given.filter((key) => !optional.includes(key)), [...fields].sort())) {
        throw new StepFailure("entries", `round ${receipt.roundId}: ${entry.kind} must carry exactly ${fields.join(", ")}, got ${quoted(given, 120)}`);
      }
    }
    if (entry.kind === "ROUND_COMMITTED" && Object.hasOwn(entry.payload, "fairness_version") && !LOGGED_VERSIONS.includes(entry.payload.fairness_version)) {
      throw new StepFailure("entries", `round ${receipt.roundId}: ROUND_COMMITTED's fairness_version must be 2 or 3 (absent for a v1 round), got ${quoted(entry.payload.fairness_version)}`);
    }
    if (entry.kind === "ROUND_COMMITTED") {
      requireTablePlayed(entry.payload, receipt.roundId);
    }
    requireOneForm(entry, receipt.roundId);
    const operator = operatorOf(entry);
    if (entries.length && operator !== operatorOf(entries[0])) {
      const named = (name) => (name === null ? "no operator" : `operator ${quoted(name)}`);
      throw new StepFailure("entries", `round ${receipt.roundId}: ${entry.kind} names ${named(operator)}, its ROUND_COMMITTED ${named(operatorOf(entries[0]))}: every entry of a round names the same operator, or none does`);
    }
    last = entry.kind;
    entries.push(entry);
  }
  if (!entries.some((entry) => entry.kind === "ROUND_REVEALED" || entry.kind === "ROUND_VOIDED")) {
    throw new StepFailure("entries", "no entry reveals the round's seed (a reveal or a void)");
  }
  return entries;
}

/** The operator an entry names, or null (an entry logged before operators). */
function operatorOf(entry) {
  return Object.hasOwn(entry.payload, "operator") ? entry.payload.operator : null;
}

/**
 * A logged payload is in the one form the service writes (docs/audit.md, "One form in the log"):
 * the committed house_rules name every rule, every dealt seat carries its client_seed. A revealed
 * round may leave either out; an entry may not.
 */
function requireOneForm(entry, roundId) {
  const { house_rules: rules, seats } = entry.payload;
  if (entry.kind === "ROUND_COMMITTED" && isObject(rules)) {
    const missing = Object.keys(DEFAULT_RULES).filter((name) => !Object.hasOwn(rules, name));
    if (missing.length) throw new StepFailure("entries", `round ${roundId}: ROUND_COMMITTED's house_rules must name every rule; missing: ${missing.join(", ")}`);
  }
  if (entry.kind === "ROUND_DEALT" && Array.isArray(seats)) {
    const index = seats.findIndex((seat) => isObject(seat) && !Object.hasOwn(seat, "client_seed"));
    if (index !== -1) throw new StepFailure("entries", `round ${roundId}: ROUND_DEALT's seats[${index}].client_seed is missing: a logged seat always carries it ("" for none)`);
  }
  if (entry.kind === "ROUND_DEALT" && Object.hasOwn(entry.payload, "software")) {
    const software = entry.payload.software;
    const wellFormed = isObject(software) && same(Object.keys(software).sort(), ["name", "sha256", "version"])
      && isString(software.name) && software.name !== "" && isString(software.version) && software.version !== ""
      && isString(software.sha256) && HASH_HEX.test(software.sha256);
    if (!wellFormed) throw new StepFailure("entries", `round ${roundId}: ROUND_DEALT's software must be {name, version, sha256 (64 lower-case hex digits)}, got ${quoted(software)}`);
  }
}

/**
 * The disclosed return to player of a ROUND_COMMITTED payload (null for entries from before it
 * was logged), checked as replay checks it (docs/audit.md): exact fractions in lowest terms that
 * sum to 1, and decimals that are them rounded to 6 places, to nearest, ties to even.
 */
export function disclosed(figures, roundId) {
  if (figures === undefined) return null;
  const fail = (what) => {
    throw new StepFailure("entries", `round ${roundId}: return_to_player ${what}`);
  };
  if (figures === null || typeof figures !== "object" || Array.isArray(figures) || !same(Object.keys(figures).sort(), DISCLOSED_MEMBERS)) fail("is not an object of exactly its four members");
  const [rtp, edge] = ["rtp", "house_edge"].map((key) => {
    const match = typeof figures[key] === "string" ? /^(-?(?:0|[1-9][0-9]{0,63}))\/([1-9][0-9]{0,63})$/.exec(figures[key]) : null;
    if (!match) fail(`has ${key} not a fraction numerator/denominator`);
    const [numerator, denominator] = [BigInt(match[1]), BigInt(match[2])];
    if (gcd(numerator < 0n ? -numerator : numerator, denominator) !== 1n) fail(`has ${key} not in lowest terms`);
    return [numerator, denominator];
  });
  const agree = rtp[0] * edge[1] + edge[0] * rtp[1] === rtp[1] * edge[1]
    && figures.rtp_decimal === sixPlaces(...rtp) && figures.house_edge_decimal === sixPlaces(...edge);
  if (!agree) fail("does not agree with itself");
  return { rtp: figures.rtp_decimal, houseEdge: figures.house_edge_decimal };
}

function gcd(a, b) {
  return b === 0n ? a : gcd(b, a % b);
}

/** numerator/denominator rounded to 6 decimal places (to nearest, ties to even), as text. */
export function sixPlaces(numerator, denominator) {
  const negative = numerator < 0n;
  const scaled = (negative ? -numerator : numerator) * 1000000n;
  let units = scaled / denominator;
  const twice = 2n * (scaled % denominator);
  if (twice > denominator || (twice === denominator && units % 2n === 1n)) units += 1n;
  return `${negative ? "-" : ""}${units / 1000000n}.${String(units % 1000000n).padStart(6, "0")}`;
}

/** The fairness versions a ROUND_COMMITTED entry may state (a v1 round's states none). */
const LOGGED_VERSIONS = [2, 3];

/** The fairness version the round's ROUND_COMMITTED entry states: 2 or 3, or 1 when it names
 *  none. */
export function committedVersion(entries) {
  const commit = entries.find((entry) => entry.kind === "ROUND_COMMITTED");
  const stated = commit?.payload.fairness_version;
  return LOGGED_VERSIONS.includes(stated) ? stated : 1;
}

/** The fields the entries published, merged into one revealed-round object, in the revealed-round
 *  format of the committed fairness version. */
function published(entries) {
  const merged = Object.create(null);
  for (const entry of entries) for (const key of MERGED_FIELDS[entry.kind] ?? []) merged[key] = entry.payload[key] ?? null;
  merged.format = REVEALED_ROUND_FORMATS[committedVersion(entries)];
  return merged;
}

function roundStep(receipt, round, merged) {
  const dealt = Object.hasOwn(merged, "seats");
  if (round === null) {
    if (dealt) throw new StepFailure("round", "the log dealt this round, but the receipt has no round");
    return;
  }
  if (!dealt) throw new StepFailure("round", "the receipt has a dealt round, but the log never dealt it");
  const ours = revealedRoundJson(round);
  let theirs;
  try {
    // A voided round's log holds no deck: the receipt's own, which step 1 proved is the shuffle.
    theirs = revealedRoundJson(
      readRevealedRound({ ...merged, round_id: receipt.roundId, deck: merged.deck ?? ours.deck }),
    );
  } catch (error) {
    if (error instanceof RevealFormatError) throw new StepFailure("round", `the entries do not form a round: ${error.message}`);
    throw error;
  }
  for (const key of Object.keys(ours)) {
    if (!same(ours[key], theirs[key])) throw new StepFailure("round", `${key} differs from what the log published`);
  }
}

/** The settlement the rules give for the logged round's hands. */
function settleLogged(round, fail) {
  const seats = round.seats.map((seat) => seat.seat_number);
  if (!same(round.hands.map((hand) => hand.seat_number), seats)) fail(`its hands are not one for each locked seat [${seats.join(", ")}]`);
  const stakes = new Map(round.seats.map((seat) => [seat.seat_number, seat.stake]));
  try {
    return settle(round.dealer_hand, round.hands.map((hand) => ({ seat: hand.seat_number, cards: hand.cards, stake: stakes.get(hand.seat_number) })), round.rules);
  } catch (error) {
    if (error instanceof RulesError) fail(`its hands cannot be settled: ${error.message}`);
    throw error;
  }
}

/** What a void after the deal pays: each seat the better of its result and a refund of its
 *  stake (a delta of 0), the dealer minus their sum; evaluations and outcomes are the result's. */
export function paidAfterTheDeal(settlement) {
  const seats = settlement.seats.map((seat) => ({ ...seat, delta: seat.delta > 0n ? seat.delta : 0n }));
  const dealerDelta = -seats.reduce((sum, seat) => sum + seat.delta, 0n);
  const json = { dealer_delta: dealerDelta, players: seats.map((seat) => ({ seat: seat.seat, stake: seat.stake, delta: seat.delta })) };
  return { dealer: settlement.dealer, dealerDelta, seats, json };
}

/** A ROUND_VOIDED payload against the entry before it (docs/audit.md, ROUND_VOIDED): its reason
 *  code and state; before the deal it pays nothing; after it, it follows the reveal, its result
 *  is the settlement of the hands and it pays each seat the better of its result and a refund.
 *  Returns what it paid (null before the deal). */
function checkVoid(payload, previous, document, roundId, fail) {
  const has = (name) => Object.hasOwn(payload, name);
  const members = Object.keys(payload).filter((name) => !WHO.includes(name)).sort();
  const beforeDeal = previous.kind === "ROUND_COMMITTED";
  if (!has("reason_code")) {
    // The form of voids logged before reason codes: valid before the deal only.
    if (!beforeDeal) fail(AFTER_THE_DEAL);
    if (!same(members, LEGACY_VOID_MEMBERS)) fail(`ROUND_VOIDED must carry exactly ${LEGACY_VOID_MEMBERS.join(", ")}, got ${quoted(members, 120)}`);
    if (!isString(payload.reason) || !payload.reason) fail("ROUND_VOIDED must carry a non-empty reason");
    if (payload.state !== "SHUFFLED") fail(`a void before the deal is of a SHUFFLED round, not ${quoted(payload.state)}`);
    return null;
  }
  const state = payload.state;
  if (!["SHUFFLED", "DEALT", "REVEALED"].includes(state)) fail(`a void's state must be SHUFFLED, DEALT or REVEALED, not ${quoted(state)}`);
  const expected = state === "SHUFFLED" ? VOID_MEMBERS : VOID_AFTER_DEAL_MEMBERS;
  if (!same(members, expected)) fail(`a void of a ${state} round must carry exactly ${expected.join(", ")}, got ${quoted(members, 120)}`);
  const code = payload.reason_code;
  if (!VOID_REASON_CODES.includes(code)) fail(`${quoted(code)} is not a void reason code (${VOID_REASON_CODES.join(", ")})`);
  const reason = payload.reason;
  if (!isString(reason) || utf8Length(reason) > 1024 || CONTROL_CHARACTER.test(reason)) fail("a void's reason must be text of at most 1024 bytes of UTF-8 without control characters");
  if (code === "DEAL_DEADLINE_PASSED") {
    if (state !== "SHUFFLED") fail("DEAL_DEADLINE_PASSED voids only a SHUFFLED round");
    if (has("actor") && payload.actor !== "service") fail("only the service voids for DEAL_DEADLINE_PASSED");
  }
  if (state === "SHUFFLED") {
    if (!beforeDeal) fail(`a void of a SHUFFLED round follows its ROUND_COMMITTED, not ${previous.kind}`);
    return null;
  }
  if (previous.kind !== "ROUND_REVEALED") fail(`a void after the deal follows the round's ROUND_REVEALED, not ${previous.kind}`);
  if (!isString(payload.server_seed) || payload.server_seed.toLowerCase() !== String(previous.payload.server_seed).toLowerCase()) {
    fail("the seed of its void is not the seed its reveal published");
  }
  const result = settleLogged(readLogged(document, roundId, fail), fail);
  if (!same(result.json, payload.result)) {
    fail(`the void's result does not follow from the dealt hands (${firstDifference(result.json, payload.result, "result")})`);
  }
  const paid = paidAfterTheDeal(result);
  if (!same(paid.json, payload.paid)) fail(`${AFTER_THE_DEAL} (${firstDifference(paid.json, payload.paid, "paid")})`);
  return paid;
}

/** Step 4, in log order: the reveal's chain, the settlement's deltas, a void's seed and what
 *  it pays. */
async function outcomeStep(receipt, entries) {
  const roundId = receipt.roundId;
  const fail = (reason) => {
    throw new StepFailure("outcome", `round ${roundId}: ${reason}`);
  };
  const version = committedVersion(entries);
  const document = Object.create(null);
  document.format = REVEALED_ROUND_FORMATS[version];
  let settlement = null;
  for (const [position, entry] of entries.entries()) {
    const payload = entry.payload;
    if (entry.kind === "ROUND_COMMITTED" || entry.kind === "ROUND_DEALT") {
      for (const key of MERGED_FIELDS[entry.kind]) document[key] = payload[key];
      continue;
    }
    if (entry.kind === "ROUND_REVEALED") {
      for (const key of MERGED_FIELDS[entry.kind]) document[key] = payload[key];
      const { failures } = await verifyRevealedRound(readLogged(document, roundId, fail));
      if (failures.length) fail(failureText(failures[0]));
    } else if (entry.kind === "ROUND_SETTLED") {
      settlement = settleLogged(readLogged(document, roundId, fail), fail);
      const { actor, operator, ...logged } = payload; // the settlement, who settled it, whose
      if (!same(settlement.json, logged)) {
        fail(`the logged settlement does not follow from the dealt hands (${firstDifference(settlement.json, logged, "settlement")})`);
      }
    } else if (entry.kind === "ROUND_VOIDED") {
      const seed = payload.server_seed;
      if (!isString(seed)) fail("ROUND_VOIDED must carry the seed");
      if (!isObject(document.house_rules)) fail(`its void cannot be checked: the committed house_rules are ${quoted(document.house_rules)}, not a JSON object`);
      let commitment;
      try {
        if (!HEX_PAIRS.test(seed) || seed.length !== 64) throw new RulesError(`server_seed must be exactly 32 bytes of hex, got ${quoted(seed)}`);
        commitment = await computeCommitment(roundId, readHouseRules(document.house_rules), bytesOfHex(seed), version);
      } catch (error) {
        if (error instanceof RulesError) fail(`its void cannot be checked: ${error.message}`);
        throw error;
      }
      if (hexOf(commitment) !== document.commitment) fail("the seed revealed by its void does not match its commitment");
      if (position === 0) fail("ROUND_VOIDED before anything else");
      settlement = checkVoid(payload, entries[position - 1], document, roundId, fail);
    }
  }
  return settlement;
}

function readLogged(document, roundId, fail) {
  try {
    return readRevealedRound({ ...document, round_id: roundId });
  } catch (error) {
    if (error instanceof RevealFormatError) fail(`its logged fields do not form a round: ${error.message}`);
    throw error;
  }
}

async function checkpointStep(receipt, keys, pins, witnessing) {
  let failure = null;
  for (const origin of [...new Set(pins.map((pin) => pin.name))].sort()) {
    try {
      const checkpoint = await openCheckpoint(receipt.checkpoint, origin, keys);
      if (witnessing.quorum > 0) {
        const found = await cosigners(parseSignedNote(receipt.checkpoint), witnessing.witnesses);
        if (found.length < witnessing.quorum) {
          const names = found.map((witness) => witness.name).join(", ") || "none";
          throw new StepFailure("checkpoint", `checkpoint has ${found.length} valid cosignatures from trusted witnesses (${names}), fewer than the quorum of ${witnessing.quorum}`);
        }
        checkpoint.cosignedBy = found.map((witness) => witness.name);
      }
      const last = BigInt(receipt.entries.at(-1).index);
      if (checkpoint.size <= last) {
        throw new StepFailure("checkpoint", `the checkpoint's tree of ${checkpoint.size} entries does not reach entry ${last}`);
      }
      return checkpoint;
    } catch (error) {
      if (error instanceof StepFailure) throw error;
      if (!(error instanceof NoteError)) throw error;
      failure = error;
    }
  }
  throw new StepFailure("checkpoint", failure.message);
}

async function inclusionStep(receipt, checkpoint) {
  for (const item of receipt.entries) {
    try {
      await verifyInclusion(await leafHash(item.bytes), item.index, checkpoint.size, item.proof, checkpoint.root);
    } catch (error) {
      if (error instanceof ProofError) throw new StepFailure("inclusion", `entry ${item.index} is not in the checkpoint's tree: ${error.message}`);
      throw error;
    }
  }
}

async function consistencyStep(receipt, checkpoint, pinned, keys) {
  let pin;
  try {
    pin = await openCheckpoint(pinned, checkpoint.origin, keys);
  } catch (error) {
    if (error instanceof NoteError) throw new StepFailure("consistency", `the pinned checkpoint does not open: ${error.message}`);
    throw error;
  }
  const { size, root } = checkpoint;
  if (pin.size === size) {
    if (hexOf(pin.root) !== hexOf(root)) throw new StepFailure("consistency", `two signed roots for size ${size}: a fork`);
    return pin.size;
  }
  if (pin.size > size) {
    throw new StepUnchecked("consistency", `the pinned checkpoint (${pin.size} entries) is newer than the receipt's (${size}): get the receipt again with this pin`);
  }
  const proof = receipt.consistency;
  if (proof === null || BigInt(proof.firstSize) !== pin.size) {
    throw new StepUnchecked("consistency", `the receipt carries no consistency proof from size ${pin.size}: get it again with that pin`);
  }
  try {
    await verifyConsistency(pin.size, size, proof.proof, pin.root, root);
  } catch (error) {
    if (error instanceof ProofError) throw new StepFailure("consistency", `the pinned tree is not a prefix of the receipt's: ${error.message}`);
    throw error;
  }
  return pin.size;
}

/**
 * Check a read receipt against the pinned keys (parsed vkeys) and, optionally, a pinned
 * checkpoint's text and a witness quorum ({witnesses: parsed witness vkeys, quorum}). Returns
 * {passed, failure: {step, reason} | null, state, checkpointSize, cosignedBy, pinnedSize, round,
 * settlement, operator (the round's, null for a round logged before operators), and once the
 * checkpoint step holds, tree: {origin, size, root} and leaves: [{index, bytes}] (tiles.js)}:
 * every step that held, or the first that failed.
 */
export async function verifyReceipt(receipt, pins, pinnedCheckpoint = null, witnessing = { witnesses: [], quorum: 0 }) {
  const report = { roundId: receipt.roundId, passed: [], failure: null, unchecked: null, state: "", checkpointSize: null, cosignedBy: [], pinnedSize: null, round: null, settlement: null, operator: null, currency: null };
  try {
    if (receipt.round !== null) report.round = await fairnessStep(receipt);
    report.passed.push("fairness");
    const keys = await trusted(pins, receipt.rotations);
    const entries = await entriesStep(receipt, keys);
    report.tableId = entries[0].kind === "ROUND_COMMITTED" ? entries[0].payload.table_id : null;
    report.operator = operatorOf(entries[0]); // one for the whole round (the entries step)
    report.returnToPlayer = entries[0].kind === "ROUND_COMMITTED" ? disclosed(entries[0].payload.return_to_player, receipt.roundId) : null;
    report.currency = entries[0].kind === "ROUND_COMMITTED" && Object.hasOwn(entries[0].payload, "currency") ? entries[0].payload.currency : null;
    report.passed.push("entries");
    roundStep(receipt, report.round, published(entries));
    report.passed.push("round");
    report.settlement = await outcomeStep(receipt, entries);
    report.state = entries.at(-1).kind.replace("ROUND_", "").toLowerCase();
    report.voidReason = entries.at(-1).kind === "ROUND_VOIDED" ? voidReasonText(entries.at(-1).payload) : null;
    report.passed.push("outcome");
    const checkpoint = await checkpointStep(receipt, keys, pins, witnessing);
    report.checkpointSize = checkpoint.size;
    // What the page checks against the log's tiles besides (tiles.js): the signed tree, the entries.
    report.tree = { origin: checkpoint.origin, size: checkpoint.size, root: checkpoint.root };
    report.leaves = receipt.entries.map(({ index, bytes }) => ({ index, bytes }));
    report.cosignedBy = checkpoint.cosignedBy ?? [];
    report.passed.push("checkpoint");
    await inclusionStep(receipt, checkpoint);
    report.passed.push("inclusion");
    if (pinnedCheckpoint !== null) {
      report.pinnedSize = await consistencyStep(receipt, checkpoint, pinnedCheckpoint, keys);
      report.passed.push("consistency");
    }
  } catch (error) {
    if (!(error instanceof StepFailure)) throw error;
    report[error instanceof StepUnchecked ? "unchecked" : "failure"] = { step: error.step, reason: error.message };
  }
  return report;
}

/** A bare revealed round (gnau round verify): the fairness step alone. */
export async function verifyRound(value) {
  const round = readRevealedRound(value);
  const { failures } = await verifyRevealedRound(round);
  let settlement = null;
  if (failures.length === 0) {
    const stakes = new Map(round.seats.map((seat) => [seat.seat_number, seat.stake]));
    settlement = settle(round.dealer_hand, round.hands.map((hand) => ({ seat: hand.seat_number, cards: hand.cards, stake: stakes.get(hand.seat_number) })), round.rules);
  }
  return {
    roundId: round.round_id,
    round,
    settlement,
    passed: failures.length ? [] : ["fairness"],
    failure: failures.length ? { step: "fairness", reason: failureText(failures[0]) } : null,
  };
}

/**
 * Verify a document given as text: a receipt (with `vkeys`, the pinned keys' text, an optional
 * pinned checkpoint, and optional witness keys' text with the quorum of them that must have
 * cosigned its checkpoint, all of them by default), a revealed round, or a test-vector file
 * holding one. Returns {kind: "receipt" | "round", ...the report}; throws UnreadableError when
 * nothing can be checked.
 */
export async function verifyDocument(text, { vkeys = [], pinnedCheckpoint = null, witnessVkeys = [], quorum = null } = {}) {
  let value;
  try {
    value = parseJson(text);
  } catch (error) {
    if (error instanceof JsonError) throw new UnreadableError(`not JSON: ${error.message}`);
    throw error;
  }
  if (isObject(value) && versionOfFormat(value.format) !== null) return { kind: "round", ...(await readableRound(value)) };
  if (isObject(value) && !Object.hasOwn(value, "format") && isObject(value.revealed_round)) {
    return { kind: "round", ...(await readableRound(value.revealed_round)) };
  }
  const receipt = readReceipt(value);
  if (vkeys.length === 0) throw new UnreadableError("a receipt is checked against the log's public key: enter the pinned key (vkey)");
  const pins = [];
  for (const vkey of vkeys) {
    try {
      pins.push(await parseVkey(vkey));
    } catch (error) {
      if (error instanceof KeyFormatError) throw new UnreadableError(`the pinned key cannot be used: ${error.message}`);
      throw error;
    }
  }
  const witnesses = [];
  for (const vkey of witnessVkeys) {
    try {
      witnesses.push(await parseWitnessVkey(vkey));
    } catch (error) {
      if (error instanceof KeyFormatError) throw new UnreadableError(`a witness key cannot be used: ${error.message}`);
      throw error;
    }
  }
  const required = quorum ?? witnesses.length;
  if (!Number.isInteger(required) || required < 0 || required > witnesses.length) {
    throw new UnreadableError(`the quorum must be a whole number from 0 to the ${witnesses.length} witness keys, not ${quoted(String(quorum))}`);
  }
  return { kind: "receipt", ...(await verifyReceipt(receipt, pins, pinnedCheckpoint, { witnesses, quorum: required })) };
}

/** A void's reason as the page shows it: its code, then the free text that came with it. */
function voidReasonText(payload) {
  const text = String(payload.reason ?? "");
  if (!Object.hasOwn(payload, "reason_code")) return text;
  return text ? `${payload.reason_code}: ${text}` : String(payload.reason_code);
}

async function readableRound(value) {
  try {
    return await verifyRound(value);
  } catch (error) {
    if (error instanceof RevealFormatError) throw new UnreadableError(`not a revealed round: ${error.message}`);
    throw error;
  }
}

/** The size a pinned checkpoint's text claims (to ask for a receipt with that pin), or null. */
export function pinnedSizeOf(text) {
  try {
    return parseCheckpoint(parseSignedNote(text).text).size;
  } catch {
    return null;
  }
}

export const summaryOf = (report) => {
  if (report.failure) return `round ${report.roundId}: INVALID at step ${report.failure.step}: ${report.failure.reason}`;
  if (report.unchecked) return `round ${report.roundId}: CANNOT CHECK step ${report.unchecked.step}: ${report.unchecked.reason} (${report.passed.join(", ")} hold; nothing is known to be wrong)`;
  if (report.kind === "round") return `round ${report.roundId}: VALID (revealed round): fairness holds; not checked against the log`;
  const pin = report.pinnedSize === null ? "" : `; one history with the pinned checkpoint of size ${report.pinnedSize}`;
  const cosigned = report.cosignedBy?.length ? `, cosigned by ${report.cosignedBy.length} witnesses (${report.cosignedBy.join(", ")})` : "";
  const operator = report.operator ? `; operator ${report.operator}` : "";
  const currency = report.currency ? `; amounts in ${report.currency.code} minor units (exponent ${report.currency.exponent})` : "";
  return `round ${report.roundId}: VALID (${report.state}): ${report.passed.join(", ")} all hold; in the log's signed tree of ${report.checkpointSize} entries${cosigned}${pin}${operator}${currency}`;
};
