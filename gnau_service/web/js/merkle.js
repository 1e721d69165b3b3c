// RFC 6962 / RFC 9162 Merkle trees with SHA-256: leaf and node hashes, and the verification of
// inclusion proofs (RFC 9162 2.1.3.2) and consistency proofs (2.1.4.2). Indices and sizes are
// BigInts: a log may outgrow the 32 bits that JavaScript's bit operators keep.

import { concat, equalBytes, hexOf } from "./bytes.js";
import { sha256 } from "./crypto.js";

export class ProofError extends Error {}

export const leafHash = (data) => sha256(concat(new Uint8Array([0]), data));
export const nodeHash = (left, right) => sha256(concat(new Uint8Array([1]), left, right));

const bitLength = (n) => (n === 0n ? 0 : n.toString(2).length);
const popCount = (n) => [...n.toString(2)].filter((bit) => bit === "1").length;

function inclusionLength(index, size) {
  const below = bitLength(index ^ (size - 1n));
  return below + popCount(index >> BigInt(below));
}

function checkLength(proof, expected) {
  if (proof.length !== expected) throw new ProofError(`proof has ${proof.length} hashes, expected ${expected}`);
  proof.forEach((hash, position) => {
    if (hash.length !== 32) throw new ProofError(`proof hash ${position} must be 32 bytes, got ${hash.length}`);
  });
}

/** Check that `leaf` (a leaf hash) is at `index` in the tree of `size` leaves with `root`. */
export async function verifyInclusion(leaf, index, size, proof, root) {
  index = BigInt(index);
  size = BigInt(size);
  if (index < 0n || index >= size) throw new ProofError(`leaf index ${index} is not below tree size ${size}`);
  checkLength(proof, inclusionLength(index, size));
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) throw new ProofError("the proof is longer than the path");
    if (fn & 1n || fn === sn) {
      r = await nodeHash(p, r);
      while (fn !== 0n && !(fn & 1n)) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new ProofError("the proof is shorter than the path");
  if (!equalBytes(r, root)) throw new ProofError(`root mismatch: the proof leads to ${hexOf(r)}, expected ${hexOf(root)}`);
}

/** Check that the tree of `size1` leaves with `root1` is a prefix of `size2` with `root2`. */
export async function verifyConsistency(size1, size2, proof, root1, root2) {
  size1 = BigInt(size1);
  size2 = BigInt(size2);
  if (size1 < 0n || size2 < size1) throw new ProofError(`no consistency from size ${size1} to size ${size2}`);
  if (size1 === 0n) throw new ProofError("a consistency proof from the empty tree proves nothing");
  if (size1 === size2) {
    if (proof.length) throw new ProofError(`sizes are equal, so the proof must be empty; got ${proof.length}`);
    if (!equalBytes(root1, root2)) throw new ProofError("sizes are equal but the roots differ");
    return;
  }
  const inside = BigInt(bitLength(size1 & -size1) - 1);
  const powerOfTwo = size1 === 1n << inside;
  checkLength(proof, inclusionLength(size1 - 1n, size2) - Number(inside) + (powerOfTwo ? 0 : 1));
  // When size1 is a power of two its root is the seed of both paths; otherwise the proof's first.
  const path = powerOfTwo ? [root1, ...proof] : [...proof];
  let fn = size1 - 1n;
  let sn = size2 - 1n;
  while (fn & 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) throw new ProofError("the proof is longer than the path");
    if (fn & 1n || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      while (fn !== 0n && !(fn & 1n)) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new ProofError("the proof is shorter than the path");
  if (!equalBytes(fr, root1)) throw new ProofError(`root1 mismatch: the proof leads to ${hexOf(fr)}, expected ${hexOf(root1)}`);
  if (!equalBytes(sr, root2)) throw new ProofError(`root2 mismatch: the proof leads to ${hexOf(sr)}, expected ${hexOf(root2)}`);
}
