// Command go_tiles reads a Gnau Dealer log through its C2SP tlog-tiles with the Go checksum
// database's reference code (golang.org/x/mod/sumdb/note and .../tlog) and nothing of ours.
//
//	go_tiles BASE_URL VKEY
//
// BASE_URL is where the log's checkpoint and tile/ paths are (ending in "/"). It verifies the
// checkpoint with note.Open, recomputes its root with tlog.TreeHash through tlog.TileHashReader
// (x/mod names tiles tile/8/L/N and tile/8/data/N: the "8/" is dropped and "data" is "entries"),
// reads every entry bundle, and proves every entry's inclusion and the tree's consistency with
// each smaller size that is a multiple of 100. It prints "ok SIZE ROOT" or exits 1 with a reason.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

type tiles struct{ base string }

func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<24))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

func (t tiles) path(tile tlog.Tile) string {
	path := strings.Replace(tile.Path(), "tile/8/", "tile/", 1)
	return strings.Replace(path, "tile/data/", "tile/entries/", 1)
}

func (t tiles) Height() int { return height }

func (t tiles) ReadTiles(list []tlog.Tile) ([][]byte, error) {
	data := make([][]byte, len(list))
	for i, tile := range list {
		body, err := get(t.base + t.path(tile))
		if err != nil {
			return nil, err
		}
		data[i] = body
	}
	return data, nil
}

func (t tiles) SaveTiles([]tlog.Tile, [][]byte) {}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_tiles: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: go_tiles BASE_URL VKEY")
	}
	base, vkey := os.Args[1], os.Args[2]
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		fail("vkey: %v", err)
	}
	text, err := get(base + "checkpoint")
	if err != nil {
		fail("%v", err)
	}
	signed, err := note.Open(text, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	lines := strings.Split(signed.Text, "\n")
	if len(lines) < 4 {
		fail("checkpoint: %d lines", len(lines))
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	rootBytes, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(rootBytes) != tlog.HashSize {
		fail("checkpoint root: %q", lines[2])
	}
	var root tlog.Hash
	copy(root[:], rootBytes)
	reader := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, tiles{base})
	computed, err := tlog.TreeHash(size, reader)
	if err != nil {
		fail("tree hash: %v", err)
	}
	if computed != root {
		fail("the tiles give root %v, the checkpoint says %v", computed, root)
	}
	source := tiles{base}
	for first := int64(0); first < size; first += 256 {
		width := size - first
		if width > 256 {
			width = 256
		}
		tile := tlog.Tile{H: height, L: -1, N: first / 256, W: int(width)}
		bundle, err := get(base + source.path(tile))
		if err != nil {
			fail("%v", err)
		}
		for i := int64(0); i < width; i++ {
			if len(bundle) < 2 {
				fail("bundle %d ends early", first/256)
			}
			length := int(binary.BigEndian.Uint16(bundle))
			entry := bundle[2 : 2+length]
			bundle = bundle[2+length:]
			proof, err := tlog.ProveRecord(size, first+i, reader)
			if err != nil {
				fail("prove entry %d: %v", first+i, err)
			}
			if err := tlog.CheckRecord(proof, size, root, first+i, tlog.RecordHash(entry)); err != nil {
				fail("entry %d: %v", first+i, err)
			}
		}
		if len(bundle) != 0 {
			fail("bundle %d has %d bytes too many", first/256, len(bundle))
		}
	}
	for old := int64(100); old < size; old += 100 {
		oldRoot, err := tlog.TreeHash(old, reader)
		if err != nil {
			fail("tree hash at %d: %v", old, err)
		}
		proof, err := tlog.ProveTree(size, old, reader)
		if err != nil {
			fail("prove %d in %d: %v", old, size, err)
		}
		if err := tlog.CheckTree(proof, size, root, old, oldRoot); err != nil {
			fail("consistency %d -> %d: %v", old, size, err)
		}
	}
	fmt.Printf("ok %d %s\n", size, base64.StdEncoding.EncodeToString(root[:]))
}
