package cputime

import "testing"

func TestProcessGrowsWithWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		t.Skip("no CPU time on this platform")
	}
	x := 0
	for i := range 50_000_000 {
		x ^= i * i
	}
	after, _ := Process()
	if after <= before {
		t.Fatalf("CPU time went from %v to %v over a busy loop (%d)", before, after, x)
	}
}
