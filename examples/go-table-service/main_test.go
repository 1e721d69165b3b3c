package main

import (
	"encoding/hex"
	"testing"

	gnauv1 "github.com/gnau-dealer/gnau/gen/go/gnau/v1"
)

// The vector of gnau_service/fairness/commitment.py: round "round-1", the default house rules,
// the seed 00 01 02 ... 1f, fairness v1.
func TestCommitmentMatchesThePythonReference(t *testing.T) {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i)
	}
	got := hex.EncodeToString(commitment("v1", "round-1", &gnauv1.HouseRules{}, seed))
	if want := "9a67e377fdb9e1e511c4609960adea7779e6fbe72bde29682042e2ff4dbaa1a1"; got != want {
		t.Fatalf("commitment %s, want %s", got, want)
	}
}

// A revealed seed other than the committed one opens nothing.
func TestAnotherSeedOpensNoCommitment(t *testing.T) {
	seed := make([]byte, 32)
	shown := hex.EncodeToString(commitment("v3", "r-1", &gnauv1.HouseRules{}, seed))
	seed[31] = 1
	round := &gnauv1.Round{RoundId: "r-1", HouseRules: &gnauv1.HouseRules{}, ServerSeed: hex.EncodeToString(seed)}
	if version := openedVersion(shown, round); version != "" {
		t.Fatalf("another seed opened the commitment as %s", version)
	}
	seed[31] = 0
	round.ServerSeed = hex.EncodeToString(seed)
	if version := openedVersion(shown, round); version != "v3" {
		t.Fatalf("the committed seed opened %q, want v3", version)
	}
}
