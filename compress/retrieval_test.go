package compress

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
	"github.com/ctxopt/ctxopt/llm"
)

// retrievalInput is the fixture plus a last turn asking Q2 again, whose
// search found nothing: the answer is in turn 4.
func retrievalInput() Input {
	in := fixtureInput()
	in.History = append(in.History,
		llm.Message{Role: "assistant", Content: "Looking up Q2: Who founded Ostrava Mills?", ToolCalls: []llm.ToolCall{{ID: "c7", Name: "search", Arguments: `{"query":"Ostrava Mills founder"}`}}},
		llm.Message{Role: "tool", ToolCallID: "c7", Name: "search", Content: "No passages match the search."})
	in.Step++
	return in
}

func TestRetrievalKeepsTheTurnWithTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params RetrievalParams
		emb    Embedder
	}{
		{"bm25", RetrievalParams{Keep: 1}, nil},
		{"embeddings", RetrievalParams{Keep: 1, Embeddings: true}, &bowEmbedder{}},
		{"budget", RetrievalParams{Keep: 4, Budget: 90}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Retrieval, &tc.params, Deps{Tokenizer: testTokenizer(t), Embedder: tc.emb})
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.History.CompressHistory(context.Background(), retrievalInput())
			if err != nil {
				t.Fatal(err)
			}
			checkPairs(t, out.Messages)
			kept := out.Event.Levels["kept"]
			if !slices.Contains(kept, 4) || kept[len(kept)-1] != 7 {
				t.Fatalf("kept steps %v, want turn 4 (the answer) and 7 (the last)", kept)
			}
			var text strings.Builder
			for _, m := range out.Messages {
				text.WriteString(m.Content)
			}
			if !strings.Contains(text.String(), "The founder of Ostrava Mills is Ilse Varga.") {
				t.Fatal("the answer is not in the context")
			}
			if tc.params.Budget > 0 && out.Event.TokensOut > tc.params.Budget {
				t.Fatalf("retrieved %d tokens over the budget %d", out.Event.TokensOut, tc.params.Budget)
			}
			if tc.name == "bm25" {
				if len(kept) != 2 {
					t.Fatalf("keep 1: kept %v", kept)
				}
				golden.Check(t, "retrieval_k1.golden", dump(out))
			}
		})
	}
}
