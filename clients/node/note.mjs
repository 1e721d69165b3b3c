// C2SP signed-note checkpoints as docs/audit.md specifies them, checked with node:crypto only.

import { createHash, createPublicKey, verify } from 'node:crypto';

const ED25519 = 0x01; // the signed-note signature type of Ed25519

/** Parses a verifier key `<name>+<key ID hex>+<base64(0x01 || public key)>`. */
export function parseVerifierKey(vkey) {
  const first = vkey.indexOf('+');
  const second = vkey.indexOf('+', first + 1);
  const [name, keyId] = [vkey.slice(0, first), vkey.slice(first + 1, second)];
  const raw = Buffer.from(vkey.slice(second + 1), 'base64');
  if (first < 1 || second < 0 || raw.length !== 33 || raw[0] !== ED25519) {
    throw new Error(`not an Ed25519 verifier key: ${vkey}`);
  }
  const expectedId = createHash('sha256')
    .update(Buffer.concat([Buffer.from(name, 'utf8'), Buffer.of(0x0a), raw])).digest().subarray(0, 4);
  if (expectedId.toString('hex') !== keyId) throw new Error(`key ID ${keyId} does not match the key`);
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: raw.subarray(1).toString('base64url') }, format: 'jwk',
  });
  return { name, keyId, key };
}

/**
 * Opens a checkpoint note with a verifier key: returns {origin, size (BigInt), rootHash (Buffer),
 * signatures (count of lines)}; throws if no signature line of that key verifies.
 */
export function openCheckpoint(note, vkey) {
  const { name, keyId, key } = parseVerifierKey(vkey);
  const split = note.lastIndexOf('\n\n');
  if (split < 0 || !note.endsWith('\n')) throw new Error('no blank line before the signatures');
  const text = note.slice(0, split + 1);
  const signatureLines = note.slice(split + 2, -1).split('\n');
  const verified = signatureLines.some((line) => {
    const match = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
    if (!match || match[1] !== name) return false;
    const blob = Buffer.from(match[2], 'base64');
    return blob.length === 68 && blob.subarray(0, 4).toString('hex') === keyId
      && verify(null, Buffer.from(text, 'utf8'), key, blob.subarray(4));
  });
  if (!verified) throw new Error(`no valid signature by ${name}+${keyId}`);
  const [origin, size, root] = text.slice(0, -1).split('\n');
  if (!/^(0|[1-9][0-9]*)$/.test(size)) throw new Error(`bad tree size line ${JSON.stringify(size)}`);
  const rootHash = Buffer.from(root, 'base64');
  if (rootHash.length !== 32 || rootHash.toString('base64') !== root) throw new Error('bad root hash');
  return { origin, size: BigInt(size), rootHash, signatures: signatureLines.length };
}
