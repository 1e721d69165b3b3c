// The log's C2SP tlog-tiles (docs/audit.md, "Tiles"): a receipt's entries checked against the
// hash tiles served beside the page, and the checkpoint's root recomputed from those tiles
// alone. Indices and sizes are BigInts, as in merkle.js.

import { equalBytes, hexOf } from "./bytes.js";
import { sha256 } from "./crypto.js";
import { leafHash, nodeHash } from "./merkle.js";

const WIDTH = 256n;
const HASH = 32;

/** The tiles disagree with what was signed: a wrong hash, a wrong root, a malformed tile. */
export class TileMismatch extends Error {}
/** No tiles to check against: not served here, refused, or not reachable. */
export class TilesUnavailable extends Error {}

/** `tile/<L>/<N>[.p/<W>]` (`level` null: `tile/entries/...`), N in x-prefixed groups of three. */
export function tilePath(level, index, width = 256) {
  let digits = BigInt(index).toString();
  digits = "0".repeat((3 - (digits.length % 3)) % 3) + digits;
  const groups = digits.match(/.../g);
  const name = [...groups.slice(0, -1).map((group) => `x${group}`), groups.at(-1)].join("/");
  return `tile/${level === null ? "entries" : level}/${name}${Number(width) === 256 ? "" : `.p/${width}`}`;
}

/** The width of tile `index` of `level` in a tree of `size` leaves: 256 full, 0 absent. */
export function tileWidth(size, level, index) {
  const complete = BigInt(size) / WIDTH ** BigInt(level);
  const width = complete - WIDTH * BigInt(index);
  return Number(width < 0n ? 0n : width > WIDTH ? WIDTH : width);
}

async function perfectRoot(hashes) {
  let level = hashes;
  while (level.length > 1) {
    const next = [];
    for (let i = 0; i < level.length; i += 2) next.push(await nodeHash(level[i], level[i + 1]));
    level = next;
  }
  return level[0];
}

/** The tree of `size` leaves read through its hash tiles; `fetchTile(path)` gives a tile's bytes. */
export class TreeTiles {
  constructor(size, fetchTile) {
    this.size = BigInt(size);
    this.fetchTile = fetchTile;
    this.tiles = new Map();
  }

  /** Tile (level, index) at the width this tree gives it, fetched once. */
  async hashes(level, index) {
    const key = `${level}/${index}`;
    if (!this.tiles.has(key)) {
      const width = tileWidth(this.size, level, index);
      if (width === 0) throw new TileMismatch(`a tree of ${this.size} entries has no tile ${key}`);
      const path = tilePath(level, index, width);
      const bytes = await this.fetchTile(path);
      if (bytes.length !== HASH * width) throw new TileMismatch(`${path} is ${bytes.length} bytes, not ${width} hashes of ${HASH}`);
      this.tiles.set(key, Array.from({ length: width }, (_, i) => bytes.subarray(HASH * i, HASH * (i + 1))));
    }
    return this.tiles.get(key);
  }

  /** Node (m, j), the root of leaves [j·2^m, (j+1)·2^m): 2^r hashes of tile level floor(m/8). */
  async node(m, j) {
    const level = Math.floor(m / 8);
    const r = m % 8;
    const first = j << BigInt(r);
    const hashes = await this.hashes(level, first / WIDTH);
    const offset = Number(first % WIDTH);
    if (offset + 2 ** r > hashes.length) throw new TileMismatch(`node (${m}, ${j}) is not complete in the tiles`);
    return perfectRoot(hashes.slice(offset, offset + 2 ** r));
  }

  /** MTH(a, b): a node where the range is one complete subtree, else split as RFC 9162 does. */
  async mth(a, b) {
    const n = b - a;
    if ((n & (n - 1n)) === 0n && a % n === 0n) return this.node(n.toString(2).length - 1, a / n);
    const k = 1n << BigInt((n - 1n).toString(2).length - 1);
    return nodeHash(await this.mth(a, a + k), await this.mth(a + k, b));
  }

  async root() {
    return this.size === 0n ? sha256(new Uint8Array()) : this.mth(0n, this.size);
  }

  /** Entry `index`'s leaf hash: hash index mod 256 of level-0 tile floor(index / 256). */
  async leaf(index) {
    index = BigInt(index);
    return (await this.hashes(0, index / WIDTH))[Number(index % WIDTH)];
  }
}

/**
 * Check a verified receipt's entries against the log's tiles: each entry's leaf hash,
 * SHA-256(0x00 ‖ bytes), must be the level-0 tile's hash at its index, and the root recomputed
 * from the tiles for the checkpoint's size must be the checkpoint's. Returns {entries, tiles}
 * (how many of each were read); throws TileMismatch, or TilesUnavailable from `fetchTile`.
 */
export async function checkAgainstTiles({ size, root, leaves }, fetchTile) {
  const tree = new TreeTiles(size, fetchTile);
  for (const { index, bytes } of leaves) {
    if (BigInt(index) >= tree.size) throw new TileMismatch(`entry ${index} is beyond the tree of ${size} entries`);
    const expected = await leafHash(bytes);
    const found = await tree.leaf(index);
    if (!equalBytes(expected, found)) {
      throw new TileMismatch(`entry ${index}'s leaf hash is ${hexOf(expected)}, the tile holds ${hexOf(found)}`);
    }
  }
  const computed = await tree.root();
  if (!equalBytes(computed, root)) {
    throw new TileMismatch(`the tiles give the tree of ${size} entries the root ${hexOf(computed)}, the checkpoint signs ${hexOf(root)}`);
  }
  return { entries: leaves.length, tiles: tree.tiles.size };
}

/** Reads tiles over HTTP under `prefix` (relative to the page): anything but 200 is unavailable. */
export function httpTiles(prefix = "log/") {
  return async (path) => {
    let response;
    try {
      response = await fetch(prefix + path);
    } catch (error) {
      throw new TilesUnavailable(`${path} cannot be fetched (${error.message})`);
    }
    if (!response.ok) throw new TilesUnavailable(`${path}: ${response.status} ${response.statusText}`.trim());
    return new Uint8Array(await response.arrayBuffer());
  };
}
