package distill

import (
	"encoding/json"
	"io"
)

// jsonlFormat writes SPLIT.jsonl: prompt–completion rows with their
// metadata, one JSON object a line, the default configuration of the card.
type jsonlFormat struct{}

func init() {
	RegisterFormat(FormatInfo{
		Name:        "jsonl",
		Description: "the same rows as JSON lines",
		Config:      "default",
		Order:       1,
		Format:      jsonlFormat{},
	})
}

func (jsonlFormat) Path(split string) string { return split + ".jsonl" }

func (jsonlFormat) Open(w io.Writer, _ string, _ WriterOptions) (RowWriter, error) {
	return newJSONLines(w, func(r *Row) any { return r }), nil
}

// jsonLines encodes one value a row as a JSON line. HTML characters stay
// as they are (encoding/json would escape <, > and & for browsers), so the
// text trainers read is the text the teacher wrote.
type jsonLines struct {
	enc   *json.Encoder
	value func(*Row) any
}

func newJSONLines(w io.Writer, value func(*Row) any) *jsonLines {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonLines{enc: enc, value: value}
}

func (j *jsonLines) Write(r *Row) error { return j.enc.Encode(j.value(r)) }

func (j *jsonLines) Close() error { return nil }
