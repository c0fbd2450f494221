package compress

import (
	"cmp"
	"testing"
)

// Each strategy says which models it calls, so reports name exactly the
// roles a run used: the embedder only for pace and retrieval over
// embeddings, the compressor only for the strategies that summarize.
func TestStrategyCalls(t *testing.T) {
	hist := &Prompt{ID: "builtin-plan-aware", Template: builtinPrompt("history_plan_aware.tmpl")}
	tests := []struct {
		name                 Name
		label                string // when name is not enough
		params               ModuleParams
		compressor, embedder bool
	}{
		{name: None},
		{name: FIFO},
		{name: Prompting, compressor: true},
		{name: Guideline, compressor: true},
		{name: PlanAware, compressor: true},
		{name: LLMLingua},
		{name: Retrieval, label: "retrieval bm25"},
		{name: Retrieval, label: "retrieval embeddings", params: &RetrievalParams{Keep: DefaultRetrievalKeep, Embeddings: true}, embedder: true},
		{name: PACE, compressor: true, embedder: true},
	}
	for _, tt := range tests {
		t.Run(cmp.Or(tt.label, string(tt.name)), func(t *testing.T) {
			s, err := New(tt.name, tt.params, Deps{
				Tokenizer: testTokenizer(t), Compressor: &summaryFake{}, Embedder: &bowEmbedder{},
				History: hist, LinguaURL: "http://127.0.0.1:1/lingua",
			})
			if err != nil {
				t.Fatal(err)
			}
			if s.CallsCompressor != tt.compressor || s.CallsEmbedder != tt.embedder {
				t.Errorf("calls compressor %v, embedder %v; want %v, %v", s.CallsCompressor, s.CallsEmbedder, tt.compressor, tt.embedder)
			}
		})
	}
}
