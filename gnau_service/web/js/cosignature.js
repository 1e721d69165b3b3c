// Witness cosignatures (C2SP tlog-cosignature, `cosignature/v1`, Ed25519) on a checkpoint, and
// the quorum a reader asks of them (docs/witness.md). A cosignature is one more signature line
// on the checkpoint's note:
//
//   — <witness name> base64(key ID || 8-byte big-endian time || 64-byte Ed25519 signature)
//
// with key ID SHA-256(name || 0x0A || 0x04 || public key)[:4], over the message
// "cosignature/v1\ntime <time>\n" followed by the checkpoint text (the note up to its blank line).
// Lines from keys the reader did not pin are ignored; a line that claims a pinned key but does
// not verify is not counted.

import { bytesOfCanonicalBase64, concat, hexOf, quoted, utf8 } from "./bytes.js";
import { ed25519Verify, sha256 } from "./crypto.js";
import { KeyFormatError } from "./note.js";

const COSIGNATURE_V1 = 0x04;
const NOTE_ED25519 = 0x01; // a plain note vkey of the same Ed25519 key is read too

/** SHA-256(name || 0x0A || type || public key)[:4], as 8 hex digits. */
async function keyIdHex(name, type, publicKey) {
  return hexOf((await sha256(concat(utf8(name), new Uint8Array([0x0a, type]), publicKey))).slice(0, 4));
}

/** A witness vkey `<name>+<key ID>+base64(0x04 || 32-byte key)` (or type 0x01). */
export async function parseWitnessVkey(text) {
  const [name, idHex, ...rest] = text.trim().split("+");
  const encoded = rest.join("+");
  if (!name || /[\s\x00-\x1f]/u.test(name) || !/^[0-9a-f]{8}$/.test(idHex ?? "")) {
    throw new KeyFormatError(`witness key ${quoted(text)} is not name+keyid+key`);
  }
  let blob;
  try {
    blob = bytesOfCanonicalBase64(encoded);
  } catch (error) {
    throw new KeyFormatError(`witness key ${quoted(name)}: ${error.message}`);
  }
  if (blob.length !== 33 || (blob[0] !== COSIGNATURE_V1 && blob[0] !== NOTE_ED25519)) {
    throw new KeyFormatError(`witness key ${quoted(name)} is not an Ed25519 (type 0x04) key`);
  }
  const publicKey = blob.slice(1);
  if ((await keyIdHex(name, blob[0], publicKey)) !== idHex) {
    throw new KeyFormatError(`witness key ${quoted(name)} says key ID ${idHex}, which is not the key's`);
  }
  return { name, publicKey, keyId: await keyIdHex(name, COSIGNATURE_V1, publicKey), vkey: text.trim() };
}

/** Whether `signature` (a parsed note signature) is `witness`'s valid cosignature of `text`. */
async function cosigned(witness, text, signature) {
  if (signature.name !== witness.name || signature.keyId !== witness.keyId) return false;
  const bytes = signature.signature;
  if (bytes.length !== 8 + 64) return false;
  const time = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0);
  if (time >= 2n ** 63n) return false;
  const message = utf8(`cosignature/v1\ntime ${time}\n${text}`);
  return ed25519Verify(witness.publicKey, bytes.slice(8), message);
}

/** The pinned witnesses that validly cosigned the parsed note `note` ({text, signatures}). */
export async function cosigners(note, witnesses) {
  const found = [];
  for (const witness of witnesses) {
    if (found.some((other) => other.vkey === witness.vkey)) continue;
    for (const signature of note.signatures) {
      if (await cosigned(witness, note.text, signature)) {
        found.push(witness);
        break;
      }
    }
  }
  return found;
}
