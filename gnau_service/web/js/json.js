// A strict JSON reader (RFC 8259). JSON.parse keeps the last of two members with one name and
// rounds every integer to a double; both would let this page read another document than the
// reference does. Here a name given twice is refused, an integer beyond 2^53-1 stays exact
// (a BigInt), and a number written with a fraction or an exponent is a JsonFloat, so that
// "100.0" is never taken for the integer 100.

export class JsonError extends Error {}

/** A number written with a fraction or an exponent: never an integer, whatever its value. */
export class JsonFloat {
  constructor(text) {
    this.text = text;
    this.value = Number(text);
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const SIMPLE_ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/**
 * Parse `text`. Objects have no prototype (a member named "__proto__" is only a member); read
 * them with Object.hasOwn. Arrays and objects nest at most `maxDepth` levels.
 */
export function parseJson(text, { maxDepth = 256 } = {}) {
  let at = 0;

  const fail = (what) => {
    throw new JsonError(`${what} at offset ${at}`);
  };
  const skipSpace = () => {
    while (at < text.length) {
      const c = text.charCodeAt(at);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      at++;
    }
  };
  const literal = (word, value) => {
    if (text.startsWith(word, at)) {
      at += word.length;
      return value;
    }
    return fail("not JSON");
  };

  const readString = () => {
    at++; // the opening quote
    let out = "";
    let start = at;
    for (;;) {
      if (at >= text.length) fail("unterminated string");
      const c = text.charCodeAt(at);
      if (c === 0x22) {
        out += text.slice(start, at);
        at++;
        return out;
      }
      if (c < 0x20) fail("a control character inside a string");
      if (c !== 0x5c) {
        at++;
        continue;
      }
      out += text.slice(start, at);
      const escape = text[at + 1];
      if (Object.hasOwn(SIMPLE_ESCAPES, escape ?? "")) {
        out += SIMPLE_ESCAPES[escape];
        at += 2;
      } else if (escape === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(at + 2, at + 6))) {
        out += String.fromCharCode(parseInt(text.slice(at + 2, at + 6), 16));
        at += 6;
      } else {
        fail("a bad escape in a string");
      }
      start = at;
    }
  };

  const readNumber = () => {
    NUMBER.lastIndex = at;
    const match = NUMBER.exec(text);
    if (!match) fail("not JSON");
    at = NUMBER.lastIndex;
    const written = match[0];
    if (match[1] !== undefined || match[2] !== undefined) return new JsonFloat(written);
    const exact = BigInt(written);
    return exact > SAFE || exact < -SAFE ? exact : Number(exact);
  };

  const readValue = (depth) => {
    skipSpace();
    const c = text[at];
    if (c === "{" || c === "[") {
      if (depth + 1 > maxDepth) throw new JsonError(`nested more than ${maxDepth} levels deep`);
      return c === "{" ? readObject(depth + 1) : readArray(depth + 1);
    }
    if (c === '"') return readString();
    if (c === "t") return literal("true", true);
    if (c === "f") return literal("false", false);
    if (c === "n") return literal("null", null);
    if (c === "-" || (c >= "0" && c <= "9")) return readNumber();
    return fail(at >= text.length ? "unexpected end" : "not JSON");
  };

  const readObject = (depth) => {
    at++;
    const object = Object.create(null);
    skipSpace();
    if (text[at] === "}") {
      at++;
      return object;
    }
    for (;;) {
      skipSpace();
      if (text[at] !== '"') fail("expected a member name");
      const name = readString();
      if (Object.hasOwn(object, name)) {
        throw new JsonError(`member ${JSON.stringify(name).slice(0, 60)} appears twice`);
      }
      skipSpace();
      if (text[at] !== ":") fail("expected ':'");
      at++;
      object[name] = readValue(depth);
      skipSpace();
      if (text[at] === ",") {
        at++;
      } else if (text[at] === "}") {
        at++;
        return object;
      } else {
        fail("expected ',' or '}'");
      }
    }
  };

  const readArray = (depth) => {
    at++;
    const array = [];
    skipSpace();
    if (text[at] === "]") {
      at++;
      return array;
    }
    for (;;) {
      array.push(readValue(depth));
      skipSpace();
      if (text[at] === ",") {
        at++;
      } else if (text[at] === "]") {
        at++;
        return array;
      } else {
        fail("expected ',' or ']'");
      }
    }
  };

  const value = readValue(0);
  skipSpace();
  if (at !== text.length) fail("text after the JSON value");
  return value;
}

export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof JsonFloat);
}

/** An integer, as JSON wrote it: a safe Number or a BigInt (never a boolean or a JsonFloat). */
export function isInteger(value) {
  return Number.isSafeInteger(value) || typeof value === "bigint";
}

/** How JSON names the type of a parsed value, for messages. */
export function jsonType(value) {
  if (value === null) return "null";
  if (typeof value === "boolean") return "a boolean";
  if (typeof value === "number" || typeof value === "bigint" || value instanceof JsonFloat) {
    return "a number";
  }
  if (typeof value === "string") return "a string";
  if (Array.isArray(value)) return "an array";
  return "an object";
}
