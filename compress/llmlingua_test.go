package compress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/internal/golden"
	"github.com/ctxopt/ctxopt/llm"
)

func TestLLMLinguaWithTheStandIn(t *testing.T) {
	_, s := simClient(t)
	st, err := New(LLMLingua, nil, Deps{Tokenizer: testTokenizer(t), LinguaURL: s.LinguaURL(), HistoryThreshold: 100, ObservationThreshold: 20})
	if err != nil {
		t.Fatal(err)
	}
	in := fixtureInput()
	out, err := st.History.CompressHistory(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, out.Messages)
	ev := out.Event
	if ev.Calls != 5 || ev.TokensOut >= ev.TokensIn {
		t.Fatalf("calls %d (want one per older turn), tokens %d -> %d", ev.Calls, ev.TokensIn, ev.TokensOut)
	}
	// Names and numbers survive; function words go first.
	text := out.Messages[1].Content
	for _, w := range []string{"Marnth", "Ilse", "Sorn"} {
		if !strings.Contains(text, w) {
			t.Errorf("compressed history lost %q", w)
		}
	}
	golden.Check(t, "llmlingua.golden", dump(Output{Messages: out.Messages, Event: &Event{Kind: ev.Kind, Step: ev.Step, Strategy: ev.Strategy, Calls: ev.Calls, TokensIn: ev.TokensIn, TokensOut: ev.TokensOut, Levels: ev.Levels}}))
	// The next step sends nothing again: turns are cached by content.
	again, err := st.History.CompressHistory(context.Background(), in)
	if err != nil || again.Event.Calls != 0 {
		t.Fatalf("second step: %d calls, err %v", again.Event.Calls, err)
	}
	obs := strings.Repeat("The capital of Veloria is Marnth and it is the largest of the cities. ", 4)
	got, oev, err := st.Observation.CompressObservation(context.Background(), ObservationInput{Step: 2, Observation: obs})
	if err != nil || oev == nil || len(got) >= len(obs) || !strings.Contains(got, "Marnth") {
		t.Fatalf("observation: %q, %+v, %v", got, oev, err)
	}
}

func TestLLMLinguaEndpointDown(t *testing.T) {
	var hits atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, `{"detail":"rate must be a float"}`, http.StatusUnprocessableEntity)
	}))
	defer bad.Close()
	for _, tc := range []struct {
		name, url   string
		unavailable bool
		attempts    int64
	}{
		{"5xx is retried, then unavailable", down.URL, true, 3},
		{"4xx is not retried", bad.URL, false, 1},
		{"nothing listens", "http://127.0.0.1:1/compress", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			st, err := New(LLMLingua, &LLMLinguaParams{URL: tc.url, Rate: DefaultLinguaRate, MaxRetries: 2, Timeout: time.Second}, Deps{Tokenizer: testTokenizer(t), HistoryThreshold: 10})
			if err != nil {
				t.Fatal(err)
			}
			st.History.(*linguaHistory).l.http.Transport.(*llm.Retrier).Policy.Cap = time.Millisecond
			_, err = st.History.CompressHistory(context.Background(), fixtureInput())
			if err == nil || errors.Is(err, llm.ErrUnavailable) != tc.unavailable {
				t.Fatalf("err = %v, want unavailable=%v", err, tc.unavailable)
			}
			if tc.attempts > 0 && hits.Load() != tc.attempts {
				t.Fatalf("%d attempts, want %d", hits.Load(), tc.attempts)
			}
			if !strings.Contains(err.Error(), "llmlingua") {
				t.Fatalf("error does not name the service: %v", err)
			}
		})
	}
}
