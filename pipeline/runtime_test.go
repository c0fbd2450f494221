package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/llm"
)

var errBad = errors.New("bad")

func TestWithPatience(t *testing.T) {
	down := fmt.Errorf("stage x: 3 of 9 tasks unfinished: %w", llm.ErrUnavailable)
	tests := []struct {
		name      string
		patience  time.Duration
		errs      []error // fn's results in turn; the last repeats
		wantCalls int
		wantErr   error // nil: fn's last result is nil and so must err be
	}{
		{name: "gives up when stuck", patience: 1200 * time.Millisecond, errs: []error{down}, wantCalls: 2, wantErr: llm.ErrUnavailable},
		{name: "no patience", patience: 0, errs: []error{down}, wantCalls: 1, wantErr: llm.ErrUnavailable},
		{name: "progress resets the patience", patience: 600 * time.Millisecond, errs: []error{
			fmt.Errorf("a: %w", llm.ErrUnavailable), fmt.Errorf("b: %w", llm.ErrUnavailable), fmt.Errorf("c: %w", llm.ErrUnavailable), nil,
		}, wantCalls: 4},
		{name: "other errors end at once", patience: time.Minute, errs: []error{errBad}, wantCalls: 1, wantErr: errBad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := WithPatience(context.Background(), tc.patience, func() error {
				e := tc.errs[min(calls, len(tc.errs)-1)]
				calls++
				return e
			})
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
			if (tc.wantErr == nil && err != nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
		})
	}
}
