// C2SP signed notes with Ed25519 keys (docs/audit.md, "Keys and names" and "Checkpoints"):
// verifier keys, key IDs, signature lines, checkpoints, and key rotation statements.

import { bytesOfCanonicalBase64, concat, equalBytes, hexOf, quoted, utf8 } from "./bytes.js";
import { ed25519Verify, sha256 } from "./crypto.js";

export class NoteError extends Error {}
/** A key, pin or other input that cannot be used at all (gnau's exit status 2). */
export class KeyFormatError extends NoteError {}

const EM_DASH_SPACE = "\u2014 ";
const MAX_SIGNATURES = 100;
const ED25519 = 0x01;
const CONTROL_BUT_NEWLINE = /[\x00-\x09\x0b-\x1f]/;

function checkKeyName(name) {
  if (!name) throw new KeyFormatError("key name is empty");
  if (/[\s+\x00-\x1f]/u.test(name)) throw new KeyFormatError(`key name ${quoted(name)} contains a space, a plus sign or a control character`);
}

/** SHA-256(name || 0x0A || 0x01 || public key)[:4]. */
export async function keyIdOf(name, publicKey) {
  return (await sha256(concat(utf8(name), new Uint8Array([0x0a, ED25519]), publicKey))).slice(0, 4);
}

/** A verifier key `<name>+<key ID, 8 lower-case hex>+<base64(0x01 || public key)>`. */
export async function parseVkey(text) {
  const first = text.indexOf("+");
  const second = first < 0 ? -1 : text.indexOf("+", first + 1);
  if (second < 0) throw new KeyFormatError(`verifier key ${quoted(text)} is not name+keyid+key`);
  const name = text.slice(0, first);
  const idHex = text.slice(first + 1, second);
  checkKeyName(name);
  if (!/^[0-9a-f]{8}$/.test(idHex)) throw new KeyFormatError(`key ID ${quoted(idHex)} is not 8 lower-case hex digits`);
  let blob;
  try {
    blob = bytesOfCanonicalBase64(text.slice(second + 1));
  } catch (error) {
    throw new KeyFormatError(`verifier key ${quoted(name)}: ${error.message}`);
  }
  if (blob.length === 0 || blob[0] !== ED25519) throw new KeyFormatError(`verifier key ${quoted(name)} is not an Ed25519 (type 0x01) key`);
  const publicKey = blob.slice(1);
  if (publicKey.length !== 32) throw new KeyFormatError(`Ed25519 public key must be 32 bytes, got ${publicKey.length}`);
  const keyId = await keyIdOf(name, publicKey);
  if (hexOf(keyId) !== idHex) throw new KeyFormatError(`verifier key ${quoted(name)} says key ID ${idHex}, but the key's ID is ${hexOf(keyId)}`);
  return { name, keyId: idHex, publicKey, vkey: text };
}

export const sameKey = (a, b) => a.name === b.name && equalBytes(a.publicKey, b.publicKey);

/**
 * Split a signed note into its text (everything up to and including the newline before the
 * last blank line) and its signature lines, checking every format rule.
 */
export function parseSignedNote(message) {
  const control = CONTROL_BUT_NEWLINE.exec(message);
  if (control) {
    throw new NoteError(`note contains control character U+${control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")} at offset ${control.index}`);
  }
  if (!message.isWellFormed()) throw new NoteError("note is not valid Unicode");
  if (!message.endsWith("\n")) throw new NoteError("note does not end in a newline");
  const blank = message.lastIndexOf("\n\n");
  if (blank < 0) throw new NoteError("note has no blank line before its signatures");
  const text = message.slice(0, blank + 1);
  const block = message.slice(blank + 2);
  if (!block) throw new NoteError("note has no signature lines after its last blank line");
  const lines = block.slice(0, -1).split("\n");
  if (lines.length > MAX_SIGNATURES) throw new NoteError(`note has ${lines.length} signatures, more than ${MAX_SIGNATURES}`);
  const signatures = lines.map((line) => {
    if (!line.startsWith(EM_DASH_SPACE)) {
      throw new NoteError(`signature line ${quoted(line, 40)} does not start with an em dash (U+2014) and a space`);
    }
    const rest = line.slice(EM_DASH_SPACE.length);
    const space = rest.indexOf(" ");
    if (space < 0) throw new NoteError(`signature line ${quoted(line, 40)} has no space after the name`);
    const name = rest.slice(0, space);
    let blob;
    try {
      checkKeyName(name);
      blob = bytesOfCanonicalBase64(rest.slice(space + 1));
    } catch (error) {
      throw new NoteError(`signature line ${quoted(line, 40)}: ${error.message}`);
    }
    if (blob.length <= 4) throw new NoteError(`signature by ${quoted(name)} is too short: ${blob.length} bytes`);
    return { name, keyId: hexOf(blob.slice(0, 4)), signature: blob.slice(4) };
  });
  return { text, signatures };
}

/**
 * The known keys whose signatures on the note verify. Signatures by keys not known by both name
 * and key ID are ignored; one by a known key that fails rejects the whole note.
 */
export async function verifyNote(note, verifiers) {
  const message = utf8(note.text);
  const verified = [];
  for (const signature of note.signatures) {
    const key = verifiers.find((v) => v.name === signature.name && v.keyId === signature.keyId);
    if (!key) continue;
    if (!(await ed25519Verify(key.publicKey, signature.signature, message))) {
      throw new NoteError(`signature by ${signature.name} (${signature.keyId}) does not verify`);
    }
    if (!verified.includes(key)) verified.push(key);
  }
  if (verified.length === 0) {
    const signers = note.signatures.map((s) => `${s.name} (${s.keyId})`).join(", ");
    throw new NoteError(`no signature from a known key; signed by: ${signers}`);
  }
  return verified;
}

/** A checkpoint body: origin, tree size (decimal, no leading zero), base64 root, extensions. */
export function parseCheckpoint(text) {
  if (!text.endsWith("\n")) throw new NoteError("checkpoint text must end in a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) throw new NoteError(`checkpoint needs origin, size and root lines; got ${lines.length}`);
  const empty = lines.indexOf("");
  if (empty >= 0) throw new NoteError(`checkpoint line ${empty + 1} is empty`);
  const [origin, sizeText, rootText] = lines;
  if (!/^(?:0|[1-9][0-9]*)$/.test(sizeText)) throw new NoteError(`tree size ${quoted(sizeText)} is not a decimal without leading zeros`);
  const size = BigInt(sizeText);
  if (size > 2n ** 64n - 1n) throw new NoteError(`tree size ${sizeText} is not in 0..2**64-1`);
  let root;
  try {
    root = bytesOfCanonicalBase64(rootText);
  } catch (error) {
    throw new NoteError(`root hash: ${error.message}`);
  }
  if (root.length !== 32) throw new NoteError(`root hash must be 32 bytes, got ${root.length}`);
  return { origin, size, root };
}

/** Parse and verify a signed checkpoint of the log `origin`. */
export async function openCheckpoint(message, origin, verifiers) {
  const note = parseSignedNote(message);
  await verifyNote(note, verifiers);
  const checkpoint = parseCheckpoint(note.text);
  if (checkpoint.origin !== origin) throw new NoteError(`checkpoint is for origin ${quoted(checkpoint.origin)}, expected ${quoted(origin)}`);
  return checkpoint;
}

// -- key rotation -------------------------------------------------------------------------------

const ROTATION_HEADER = "gnau-dealer/key-rotation/v1";
const UTC_TIME = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,6})?Z$/;

/** An RFC 3339 UTC time in the log's one spelling, of a real instant; its sort key, or null. */
export function utcInstant(text) {
  const match = typeof text === "string" ? UTC_TIME.exec(text) : null;
  if (!match) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  if (year < 1 || !days || day < 1 || day > days || hour > 23 || minute > 59 || second > 59) return null;
  return `${match.slice(1, 7).join("")}${(match[7] ?? ".").slice(1).padEnd(6, "0")}`;
}

/**
 * Follow signed rotation statements from a pinned key: every key it hands over to, oldest first.
 * Each rotation is signed by the key current then, names it as `old`, is later than the one
 * before, and brings back no earlier key. Throws at the first that breaks the chain.
 */
export async function trustedKeys(pinned, rotations) {
  // Each key carries when it was current: since/until as utcInstant strings (null: open).
  const chain = [{ ...pinned, since: null, until: null }];
  let since = null;
  for (const [position, message] of rotations.entries()) {
    const current = chain.at(-1);
    const note = parseSignedNote(message);
    await verifyNote(note, [current]);
    const lines = note.text.split("\n");
    if (lines.length !== 5 || lines[0] !== ROTATION_HEADER || lines[4] !== "") throw new NoteError(`not a ${ROTATION_HEADER} statement of four lines`);
    const values = ["old", "new", "time"].map((label, k) => {
      if (!lines[k + 1].startsWith(`${label} `)) throw new NoteError(`expected a line starting '${label} '`);
      return lines[k + 1].slice(label.length + 1);
    });
    const [old, next] = [await parseVkey(values[0]), await parseVkey(values[1])];
    const time = utcInstant(values[2]);
    if (time === null) throw new NoteError(`rotation ${position + 1}: time ${quoted(values[2])} is not RFC 3339 UTC`);
    if (sameKey(old, next)) throw new NoteError("a rotation must change the key");
    if (!sameKey(old, current)) throw new NoteError(`rotation ${position + 1} replaces ${old.vkey}, but the current key is ${current.vkey}`);
    if (chain.some((key) => sameKey(key, next))) throw new NoteError(`rotation ${position + 1} brings back the earlier key ${next.vkey}`);
    if (since !== null && time <= since) throw new NoteError(`rotation ${position + 1} is not after the previous one`);
    since = time;
    chain[chain.length - 1] = { ...current, until: time };
    chain.push({ ...next, since: time, until: null });
  }
  return chain;
}
