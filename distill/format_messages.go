package distill

import "io"

// messagesFormat writes SPLIT.messages.jsonl: each row as an OpenAI chat
// fine-tuning line, the prompt's messages then the completion, which alone
// carries a weight of 1 so that fine-tuning APIs train on it only. The
// prompt's messages carry "weight": null: with the key on every message,
// readers that infer a schema (🤗 datasets, pyarrow) see one struct type,
// not a mix they can only read as JSON.
type messagesFormat struct{}

func init() {
	RegisterFormat(FormatInfo{
		Name:        "messages",
		Description: "the same rows in the OpenAI chat fine-tuning format, in the same order",
		Config:      "messages",
		Order:       2,
		Format:      messagesFormat{},
	})
}

func (messagesFormat) Path(split string) string { return split + ".messages.jsonl" }

func (messagesFormat) Open(w io.Writer, _ string, _ WriterOptions) (RowWriter, error) {
	return newJSONLines(w, func(r *Row) any { return messagesLine(r) }), nil
}

type weightedMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Weight  *int   `json:"weight"` // nil (null) where not trained on
}

type messagesRow struct {
	Messages []weightedMessage `json:"messages"`
}

func messagesLine(r *Row) messagesRow {
	ms := make([]weightedMessage, 0, len(r.Prompt)+len(r.Completion))
	for _, m := range r.Prompt {
		ms = append(ms, weightedMessage{Role: m.Role, Content: m.Content})
	}
	trained := 1
	for _, m := range r.Completion {
		ms = append(ms, weightedMessage{Role: m.Role, Content: m.Content, Weight: &trained})
	}
	return messagesRow{Messages: ms}
}
