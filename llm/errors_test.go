package llm

import (
	"errors"
	"fmt"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

func TestIsContextOverflow(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"openai code", &openai.APIError{HTTPStatusCode: 400, Code: "context_length_exceeded", Message: "This model's maximum context length is 8192 tokens."}, true},
		{"vllm message, wrapped", fmt.Errorf("agent: %w", &openai.APIError{HTTPStatusCode: 400, Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"}), true},
		{"llama.cpp 413", &openai.APIError{HTTPStatusCode: 413, Message: "the request exceeds the context size"}, true},
		{"llama.cpp 400", &openai.APIError{HTTPStatusCode: 400, Message: "the request exceeds the context window"}, true},
		{"other 400", &openai.APIError{HTTPStatusCode: 400, Message: "invalid tool schema"}, false},
		{"500 mentioning context", &openai.APIError{HTTPStatusCode: 500, Message: "context length"}, false},
		{"unavailable", fmt.Errorf("x: %w", ErrUnavailable), false},
		{"plain", errors.New("maximum context length"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsContextOverflow(tc.err); got != tc.want {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
}
