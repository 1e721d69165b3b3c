// Bytes: UTF-8, hex, canonical base64, big-endian integers and the length-prefixed frames of
// docs/fairness.md. Pure functions, no DOM: Node can import this module as the page does.

const encoder = new TextEncoder();

/** The exact UTF-8 bytes of a (well-formed) string, not normalized. */
export function utf8(text) {
  return encoder.encode(text);
}

/** The length of a string in bytes of UTF-8. */
export function utf8Length(text) {
  return encoder.encode(text).length;
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Pairs of hex digits, either case (docs/fairness.md: upper case is accepted on reading). */
export const HEX_PAIRS = /^(?:[0-9a-fA-F]{2})*$/;

export function hexOf(bytes) {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Bytes of a string already checked against HEX_PAIRS. */
export function bytesOfHex(text) {
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function base64Of(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/**
 * Standard padded base64 in its one canonical spelling (no whitespace, padding present, spare
 * bits zero): anything else throws, so each value has exactly one text form.
 */
export function bytesOfCanonicalBase64(text) {
  let binary;
  try {
    binary = atob(text);
  } catch {
    throw new Error(`${quoted(text)} is not canonical base64`);
  }
  const bytes = Uint8Array.from(binary, (char) => char.charCodeAt(0));
  if (base64Of(bytes) !== text) throw new Error(`${quoted(text)} is not canonical base64`);
  return bytes;
}

export function uint32(n) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n);
  return out;
}

/** n (a Number or a BigInt, 0 to 2^64-1) as 8 bytes, big-endian. */
export function uint64(n) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n));
  return out;
}

/** frame(x): the length of x as 4 bytes big-endian, then x. */
export function frame(bytes) {
  return concat(uint32(bytes.length), bytes);
}

export function frames(...fields) {
  return concat(...fields.map(frame));
}

/** A value as a message quotes it: JSON, cut to about `limit` characters. */
export function quoted(value, limit = 60) {
  let text;
  try {
    text = typeof value === "bigint" ? value.toString() : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  if (text === undefined) text = String(value);
  return text.length > limit ? `${text.slice(0, limit)}…(+${text.length - limit} chars)` : text;
}
