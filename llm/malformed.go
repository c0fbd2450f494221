package llm

import (
	"errors"
	"fmt"
	"strings"
)

// MalformedKind names what was wrong with a reply the caller could not use
// as asked. Real models produce all of these; each is counted per role and
// recorded with the raw reply, and the caller carries on.
type MalformedKind string

const (
	// MalformedUnparsed: the server itself could not parse the model's
	// output into the OpenAI format (llama.cpp answers 500 when a tool-call
	// template's output does not match its parser).
	MalformedUnparsed MalformedKind = "server_could_not_parse"
	// MalformedNoToolCall: the agent answered without calling a tool.
	MalformedNoToolCall MalformedKind = "no_tool_call"
	// MalformedToolCallInText: the model wrote its tool call as text (a
	// fenced JSON object) that the server did not parse into a tool call;
	// the client recovers the first call and the reply goes on.
	MalformedToolCallInText MalformedKind = "tool_call_in_text"
	// MalformedToolArguments: a tool call's arguments are not JSON.
	MalformedToolArguments MalformedKind = "invalid_tool_arguments"
	// MalformedEmptySummary: the compressor returned nothing.
	MalformedEmptySummary MalformedKind = "empty_summary"
	// MalformedInvalidSummary: a compressor's answer broke the rule of a
	// valid summary other than by being empty (compress.CheckSummary).
	MalformedInvalidSummary MalformedKind = "invalid_summary"
	// MalformedAnalysis: an analysis reply held no usable JSON object.
	MalformedAnalysis MalformedKind = "unusable_analysis"
	// MalformedCandidate: an optimizer reply was not a valid guideline.
	MalformedCandidate MalformedKind = "invalid_candidate"
)

// FinishMalformed is the finish reason of a Response standing in for a
// reply the server could not parse: its message is empty.
const FinishMalformed = "malformed"

// rawLimit bounds the raw reply kept in a record.
const rawLimit = 8 << 10

// MalformedReply records one unusable reply.
type MalformedReply struct {
	Role    string        `json:"role"`
	Purpose Purpose       `json:"purpose"`
	Kind    MalformedKind `json:"kind"`
	// Detail says what is wrong; Raw is the reply as received (cut to 8 KiB).
	Detail string `json:"detail,omitempty"`
	Raw    string `json:"raw"`
}

// SetMalformedSink makes the client pass every malformed reply it is told
// of to sink (which must be safe for concurrent use). Call it before the
// client is used.
func (c *Client) SetMalformedSink(sink func(MalformedReply)) { c.sink = sink }

// ReportMalformed counts m against the client's role and passes it to the
// sink. Callers report what they could not use; the client reports what
// the server could not parse.
func (c *Client) ReportMalformed(m MalformedReply) {
	m.Role = c.role
	if m.Purpose == "" {
		m.Purpose = Purpose(c.role)
	}
	if len(m.Raw) > rawLimit {
		m.Raw = m.Raw[:rawLimit]
	}
	c.stats.malformed()
	if c.sink != nil {
		c.sink(m)
	}
}

// errUnparsed marks a server's refusal of the model's own output; asking
// again at the same temperature gets the same output, so it is not retried.
var errUnparsed = errors.New("the server could not parse the model's reply")

// unparsedPhrases are how llama.cpp words a model output its chat parser
// rejects (tool-call templates: "does not match the expected peg-native
// format"; older builds: "Failed to parse tool call").
var unparsedPhrases = []string{"does not match the expected", "failed to parse tool call", "failed to parse input"}

// serverUnparsed reports whether msg, a server error's message, is the
// server rejecting its model's output rather than the request or its own
// health.
func serverUnparsed(msg string) bool {
	msg = strings.ToLower(msg)
	for _, p := range unparsedPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func unparsedError(msg string) error { return fmt.Errorf("%w: %s", errUnparsed, msg) }

// Report passes m to c when c counts malformed replies (a Client, or a
// wrapper embedding one); fakes in tests need not.
func Report(c any, m MalformedReply) {
	if r, ok := c.(interface{ ReportMalformed(MalformedReply) }); ok {
		r.ReportMalformed(m)
	}
}
