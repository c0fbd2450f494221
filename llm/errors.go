package llm

import (
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// contextOverflowPhrases are how OpenAI, vLLM, llama.cpp, Ollama and
// Anthropic-compatible proxies word a prompt longer than the context window.
var contextOverflowPhrases = []string{
	"context length", "context window", "maximum context", "context_length_exceeded",
	"prompt is too long", "too many tokens", "exceeds the context",
}

// IsContextOverflow reports whether err is a server refusing a prompt that
// does not fit the model's context window. Such a call fails the task that
// made it, not the whole job: the next task may fit.
func IsContextOverflow(err error) bool {
	var api *openai.APIError
	if !errors.As(err, &api) || (api.HTTPStatusCode != 400 && api.HTTPStatusCode != 413) {
		return false
	}
	text := strings.ToLower(fmt.Sprint(api.Code) + " " + api.Message)
	for _, p := range contextOverflowPhrases {
		if strings.Contains(text, p) {
			return true
		}
	}
	return false
}
