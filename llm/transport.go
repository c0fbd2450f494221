package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// SampleHeader carries Request.Sample when it is > 0, so a deterministic
// server can answer repeated samples of one prompt differently.
const SampleHeader = "X-Ctxopt-Sample"

// attemptKey keys the *attempt of one call in its request context.
type attemptKey struct{}

// attempt carries what doer adds to the request of one call, and what the
// answer's check needs to know.
type attempt struct {
	purpose string
	sample  int
	// fillContent asks for "content": "" on messages that go-openai sent
	// without one (omitempty); most servers reject a message with no content.
	fillContent bool
	// inputs is the number of texts an embedding request sends.
	inputs int
}

// sharedTransport keeps enough idle connections per host for a full
// concurrency window; http.DefaultTransport keeps 2 and would redial.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 1024
	t.IdleConnTimeout = 90 * time.Second
	return t
}()

// doer is the HTTPDoer given to go-openai. It marks the role and sample,
// and restores sampling fields that go-openai's omitempty drops; its
// client retries.
type doer struct {
	client      *http.Client
	temperature json.RawMessage
	seed        json.RawMessage // nil when the role sets no seed
}

func newDoer(cfg RoleConfig, rt http.RoundTripper) (*doer, error) {
	d := &doer{client: &http.Client{Transport: rt}}
	var err error
	if d.temperature, err = json.Marshal(cfg.Temperature); err != nil {
		return nil, fmt.Errorf("encode temperature: %w", err)
	}
	if cfg.Seed != nil {
		d.seed = json.RawMessage(strconv.Itoa(*cfg.Seed))
	}
	return d, nil
}

func (d *doer) Do(r *http.Request) (*http.Response, error) {
	a, _ := r.Context().Value(attemptKey{}).(*attempt)
	if a == nil {
		return nil, errors.New("request sent without its call's attempt")
	}
	r.Header.Set(RoleHeader, a.purpose)
	if a.sample > 0 {
		r.Header.Set(SampleHeader, strconv.Itoa(a.sample))
	}
	if r.Body != nil && strings.HasSuffix(r.URL.Path, "/chat/completions") {
		if err := d.rewriteChat(r, a.fillContent); err != nil {
			return nil, fmt.Errorf("rewrite chat request: %w", err)
		}
	}
	return d.client.Do(r)
}

// rewriteChat sets temperature (0 included) and seed in the JSON body,
// and fills missing message content when asked.
func (d *doer) rewriteChat(r *http.Request, fillContent bool) error {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return err
	}
	if body, err = d.editChat(body, fillContent); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nil
}

// editChat edits the JSON text of a chat request in place of decoding and
// re-encoding it, which cost a tenth of the CPU on long conversations. The
// body is go-openai's json.Marshal output, so it is valid JSON and is not
// validated again; gjson only finds where the edits go.
func (d *doer) editChat(body []byte, fillContent bool) ([]byte, error) {
	open := len(body) - len(bytes.TrimLeft(body, " \t\r\n"))
	if open == len(body) || body[open] != '{' {
		return nil, errors.New("body is not a JSON object")
	}
	// go-openai omits a zero temperature (and seed), and writes others as
	// float32, whose shortest form can differ from the configured float64's.
	var head []byte
	body, head = setMember(body, head, "temperature", d.temperature)
	if d.seed != nil {
		body, head = setMember(body, head, "seed", d.seed)
	}
	var edits []insertion
	if head != nil {
		edits = append(edits, insertion{at: open + 1, text: head})
	}
	if fillContent {
		msgs := gjson.GetBytes(body, "messages")
		if !msgs.IsArray() {
			return nil, errors.New("no messages array to fill content in")
		}
		var err error
		msgs.ForEach(func(_, m gjson.Result) bool {
			if !m.IsObject() {
				err = fmt.Errorf("message at byte %d is not an object", m.Index)
				return false
			}
			if !m.Get("content").Exists() {
				edits = append(edits, insertion{at: m.Index + 1, text: []byte(`"content":"",`)})
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return insert(body, edits), nil
}

// setMember makes the top-level key of body hold value: when it is absent
// the member, with a comma, is appended to head for insertion after the
// opening brace; when it differs its value is replaced.
func setMember(body, head []byte, key string, value []byte) ([]byte, []byte) {
	v := gjson.GetBytes(body, key)
	switch {
	case !v.Exists():
		head = append(append(append(head, '"'), key...), '"', ':')
		head = append(append(head, value...), ',')
	case v.Raw != string(value) && v.Index > 0:
		body = slices.Concat(body[:v.Index], value, body[v.Index+len(v.Raw):])
	}
	return body, head
}

// insertion puts text, a member and its trailing comma, right after the
// opening brace at at-1.
type insertion struct {
	at   int
	text []byte
}

// insert applies edits, in increasing order of offset, in one copy. A
// member inserted into an empty object loses its trailing comma.
func insert(body []byte, edits []insertion) []byte {
	if len(edits) == 0 {
		return body
	}
	n := len(body)
	for _, e := range edits {
		n += len(e.text)
	}
	out := make([]byte, 0, n)
	last := 0
	for _, e := range edits {
		out = append(out, body[last:e.at]...)
		text := e.text
		if rest := bytes.TrimLeft(body[e.at:], " \t\r\n"); len(rest) > 0 && rest[0] == '}' {
			text = text[:len(text)-1]
		}
		out = append(out, text...)
		last = e.at
	}
	return append(out, body[last:]...)
}

// MaxAnswerBytes bounds what a role's client reads of one answer: far
// more than any chat completion or batch of embeddings needs, so a larger
// one is an endpoint gone wrong, refused rather than held in memory.
const MaxAnswerBytes = 64 << 20

// errMalformed marks a 2xx answer that cannot be used; servers under load
// (and the simulator's fault injection) produce them, and a retry helps.
var errMalformed = errors.New("malformed response")

// checkAnswer is the Retrier's Check of the client: a 2xx answer must be
// a usable reply, and a 5xx whose message says the server could not parse
// its model's output is final (asked again, the model answers the same).
func checkAnswer(r *http.Request, status int, body []byte) error {
	if status >= 500 {
		if msg := gjson.GetBytes(body, "error.message").String(); serverUnparsed(msg) {
			return unparsedError(msg)
		}
		return nil
	}
	if status/100 != 2 {
		return nil
	}
	if len(body) > MaxAnswerBytes {
		return fmt.Errorf("%w: the answer is over %d MiB (llm.MaxAnswerBytes)", errMalformed, MaxAnswerBytes>>20)
	}
	if !gjson.ValidBytes(body) {
		return fmt.Errorf("%w: not JSON", errMalformed)
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		if ch := gjson.GetBytes(body, "choices"); !ch.IsArray() || len(ch.Array()) == 0 {
			return fmt.Errorf("%w: no choices", errMalformed)
		}
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		a := r.Context().Value(attemptKey{}).(*attempt) // the doer sends none without
		data := gjson.GetBytes(body, "data").Array()
		if len(data) != a.inputs {
			return fmt.Errorf("%w: %d embeddings for %d inputs", errMalformed, len(data), a.inputs)
		}
		for _, d := range data {
			if i := d.Get("index").Int(); i < 0 || i >= int64(a.inputs) {
				return fmt.Errorf("%w: embedding index %d out of range", errMalformed, i)
			}
		}
	}
	return nil
}

// send runs fn, which makes one request of a, through the client's
// Retrier, and returns the failed attempts it retried.
func (c *Client) send(ctx context.Context, a *attempt, fn func(context.Context) error) (int, error) {
	rctx, t := WithTry(context.WithValue(ctx, attemptKey{}, a))
	err := fn(rctx)
	retries := max(t.N-1, 0)
	switch {
	case err == nil:
		return retries, nil
	case ctx.Err() != nil:
		// The caller gave up; the attempt's error is only a consequence.
		return retries, fmt.Errorf("llm %s: %w", c.role, ctx.Err())
	case errors.Is(t.Err, errUnparsed):
		return retries, c.redact(t.Err)
	case t.GaveUp:
		return retries, c.redact(fmt.Errorf("llm %s: %w: %s after %d attempts, last %s: %w",
			c.role, ErrUnavailable, c.host, t.N, describe(t.Status, t.TimedOut), err))
	}
	return retries, c.redact(fmt.Errorf("llm %s (%s): %w", c.role, c.host, err))
}

func describe(status int, timedOut bool) string {
	switch {
	case timedOut:
		return "attempt timed out"
	case status == 0:
		return "no response"
	default:
		return "status " + strconv.Itoa(status)
	}
}

// logAttempt is the Retrier's Log of the client.
func (c *Client) logAttempt(r *http.Request, t Try, wait time.Duration) {
	a := r.Context().Value(attemptKey{}).(*attempt)
	slog.Debug("llm attempt", "role", c.role, "model", c.cfg.Model, "purpose", a.purpose,
		"attempt", t.N, "status", t.Status, "timeout", t.TimedOut, "took", t.Took,
		"err", c.redact(t.Err), "wait", wait, "exhausted", t.GaveUp)
}
