// The three primitives, from WebCrypto: SHA-256, HMAC-SHA-256 and Ed25519 verification.

const subtle = globalThis.crypto.subtle;

export async function sha256(bytes) {
  return new Uint8Array(await subtle.digest("SHA-256", bytes));
}

export async function hmacKey(key) {
  return subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

export async function hmacWith(cryptoKey, data) {
  return new Uint8Array(await subtle.sign("HMAC", cryptoKey, data));
}

const ed25519Keys = new Map();

/** Whether `signature` is the Ed25519 signature of `message` by the 32-byte `publicKey`. */
export async function ed25519Verify(publicKey, signature, message) {
  if (signature.length !== 64) return false;
  const id = Array.from(publicKey).join(",");
  if (!ed25519Keys.has(id)) {
    ed25519Keys.set(id, subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]));
  }
  try {
    return await subtle.verify({ name: "Ed25519" }, await ed25519Keys.get(id), signature, message);
  } catch {
    return false; // a public key that is not a curve point verifies nothing
  }
}
