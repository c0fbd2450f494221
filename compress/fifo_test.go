package compress

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
)

func TestFIFOKeepsExactlyTheLastKTurns(t *testing.T) {
	for _, k := range []int{1, 2, 3, 6, 10} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			s, err := New(FIFO, &FIFOParams{Keep: k}, Deps{Tokenizer: testTokenizer(t)})
			if err != nil {
				t.Fatal(err)
			}
			in := fixtureInput()
			out, err := s.History.CompressHistory(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			checkPairs(t, out.Messages)
			if out.Messages[0].Content != fixtureTask {
				t.Fatalf("first message %q, want the task", out.Messages[0].Content)
			}
			turns := turnStarts(out.Messages[1:])
			want := min(k, 6)
			if len(turns) != want {
				t.Fatalf("kept %d turns, want %d", len(turns), want)
			}
			// The kept turns are the last ones, whole.
			if !reflect.DeepEqual(out.Messages[1:], in.History[len(in.History)-len(out.Messages[1:]):]) {
				t.Fatal("kept messages are not the tail of the history")
			}
			if k >= 6 {
				if out.Event != nil {
					t.Fatalf("nothing dropped but an event: %+v", out.Event)
				}
				return
			}
			if got := out.Event.Levels["dropped"]; len(got) != 6-k || got[0] != 1 || got[len(got)-1] != 6-k {
				t.Fatalf("dropped steps %v, want 1..%d", got, 6-k)
			}
			if k == 2 {
				golden.Check(t, "fifo_k2.golden", dump(out))
			}
			// The next call with the state it returned drops nothing more.
			in.Covered = out.Covered
			again, err := s.History.CompressHistory(context.Background(), in)
			if err != nil || again.Event != nil || len(again.Messages) != len(out.Messages) {
				t.Fatalf("second call: event %+v, %d messages, err %v", again.Event, len(again.Messages), err)
			}
		})
	}
}
