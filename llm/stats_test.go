package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// usageOf answers a chat call with the given token counts.
func usageOf(u Usage) fault {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "c", "object": "chat.completion", "model": "fake-model",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "ok"}}},
			"usage": map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens},
		})
	}
}

// orderSensitive are calls whose costs at $3/$15 per million tokens sum to
// different floats forwards (0.04592399999999999) and backwards (0.045924).
var orderSensitive = []Usage{{3997, 15}, {3194, 222}, {4977, 391}}

// The cost total is the same bytes whatever order the calls complete in,
// as it is in a run with concurrent calls: it prices the summed tokens.
func TestStatsCostIndependentOfOrder(t *testing.T) {
	var want Usage
	for _, u := range orderSensitive {
		want.PromptTokens += u.PromptTokens
		want.CompletionTokens += u.CompletionTokens
	}
	snapshot := func(order []Usage) []byte {
		faults := make([]fault, len(order))
		for i, u := range order {
			faults[i] = usageOf(u)
		}
		f := newFake(t, func(f *fake) { f.faults = faults })
		c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", PriceIn: 3, PriceOut: 15}, nil)
		for range order {
			if _, err := c.Complete(context.Background(), Request{Messages: userMsg("hi")}); err != nil {
				t.Fatal(err)
			}
		}
		s := c.Stats()
		if wantCost := c.Cost(want); s.CostUSD != wantCost {
			t.Errorf("cost %v, want %v, the price of the summed tokens", s.CostUSD, wantCost)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	backward := slices.Clone(orderSensitive)
	slices.Reverse(backward)
	fwd, back := snapshot(orderSensitive), snapshot(backward)
	if !bytes.Equal(fwd, back) {
		t.Fatalf("the stats depend on the order of the calls:\n%s\n%s", fwd, back)
	}
}
