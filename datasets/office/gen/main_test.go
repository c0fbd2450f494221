package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerateDeterministic generates twice and compares the files with
// each other and with the checked-in dataset; another seed differs.
func TestGenerateDeterministic(t *testing.T) {
	cfg := config{Seed: 42, Train: 100, Test: 100}
	a, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
		checkedIn, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, checkedIn) {
			t.Errorf("datasets/office/%s is not the generator's output; run go generate ./datasets", name)
		}
	}
	cfg.Seed = 7
	c, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a["train.jsonl"], c["train.jsonl"]) {
		t.Error("seeds 42 and 7 gave the same tasks")
	}
	if _, err := generate(config{Seed: 1, Train: 0, Test: 1}); err == nil {
		t.Error("generate with no train tasks succeeded")
	}
}
