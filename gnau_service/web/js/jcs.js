// RFC 8785 (JCS) canonical JSON, for the values an audit entry may hold (docs/audit.md,
// Entries): every number an integer within ±(2^53-1), so each prints in plain decimal, exactly
// as JSON.stringify prints a safe integer. JSON.stringify also escapes strings as JCS does
// (only '"', '\\' and controls; the short forms \b \f \n \r \t, else lower-case \u00xx), except
// for a lone surrogate, which JCS cannot write at all: it is refused here.

import { JsonFloat } from "./json.js";

export class CanonicalError extends Error {}

export function canonicalJson(value) {
  if (value === null || typeof value === "boolean") return String(value);
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new CanonicalError(`the number ${value} is not a safe integer`);
    return String(value);
  }
  if (typeof value === "bigint" || value instanceof JsonFloat) {
    throw new CanonicalError("every number in an entry must be an integer within ±(2**53-1)");
  }
  if (typeof value === "string") return canonicalString(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  // Members sorted by their UTF-16 code units: the order of the default sort of strings.
  const names = Object.keys(value).sort();
  return `{${names.map((name) => `${canonicalString(name)}:${canonicalJson(value[name])}`).join(",")}}`;
}

function canonicalString(text) {
  if (!text.isWellFormed()) throw new CanonicalError("a string holds a lone surrogate");
  return JSON.stringify(text);
}
