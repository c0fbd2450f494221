package sim

import (
	"encoding/json"
	"math"
	"testing"
)

func TestJudge(t *testing.T) {
	two := "- Q1: The capital of Veloria is Marnth.\n- Identified the chief export of Port Anselm: Dorvik amber.\n"
	one := "- Identified the capital of Veloria: Marnth.\n"
	tests := []struct {
		name, a, b, winner string
	}{
		{"more task facts wins", one, two, "B"},
		{"facts before length", two + "OTHER FACTS:\n- Veloria's patron is Saint Ivo.\n", one, "A"},
		{"same facts, shorter wins", two + "REASONING: long text here.\n", two, "B"},
		{"other facts do not count", one + "- Veloria's patron is Saint Ivo.\n", one, "B"},
		{"tie", one, one, "tie"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prompt := "Compare two summaries for this task:\n" + taskText + "\n\nOUTPUT_A\n" + tt.a + "OUTPUT_A_END\nOUTPUT_B\n" + tt.b + "OUTPUT_B_END\nAnswer in JSON."
			out, err := judge(prompt)
			if err != nil {
				t.Fatal(err)
			}
			var v verdict
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatal(err)
			}
			if v.Winner != tt.winner || v.Reason == "" {
				t.Errorf("verdict = %+v, want winner %s", v, tt.winner)
			}
		})
	}
	if _, err := judge("Which is better?"); err == nil {
		t.Error("no error without OUTPUT_A/OUTPUT_B")
	}
}

func TestEmbed(t *testing.T) {
	cos := func(a, b []float32) float64 {
		var s float64
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	a := embed("The capital of Veloria is Marnth.")
	if len(a) != embeddingDims {
		t.Fatalf("dims = %d", len(a))
	}
	for _, text := range []string{"The capital of Veloria is Marnth.", "", "!!!", "x"} {
		if n := cos(embed(text), embed(text)); math.Abs(n-1) > 1e-5 {
			t.Errorf("|embed(%q)|² = %v, want 1", text, n)
		}
	}
	again := embed("the CAPITAL of veloria, is marnth")
	for i := range a {
		if a[i] != again[i] {
			t.Fatal("case and punctuation changed the vector")
		}
	}
	near, far := cos(a, embed("Veloria capital Marnth")), cos(a, embed("Bells ring at noon in Ostrel."))
	if near <= far {
		t.Errorf("related text %.3f not closer than unrelated %.3f", near, far)
	}
}
