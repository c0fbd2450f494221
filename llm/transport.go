package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SampleHeader carries Request.Sample when it is > 0, so a deterministic
// server can answer repeated samples of one prompt differently.
const SampleHeader = "X-Ctxopt-Sample"

// attemptKey keys the *attempt of one HTTP attempt in its request context.
type attemptKey struct{}

// attempt carries what doer adds to one request, and what it saw of the
// response: go-openai hides the status line and headers of failed calls,
// and Retry-After is needed to pace the retry.
type attempt struct {
	purpose string
	sample  int
	// fillContent asks for "content": "" on messages that go-openai sent
	// without one (omitempty); most servers reject a message with no content.
	fillContent bool

	status     int
	retryAfter string
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
// restores sampling fields that go-openai's omitempty drops, and records
// the response status for the retry loop.
type doer struct {
	client      *http.Client
	temperature json.RawMessage
	seed        json.RawMessage // nil when the role sets no seed
}

func newDoer(cfg RoleConfig) (*doer, error) {
	d := &doer{client: &http.Client{Transport: sharedTransport}}
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
		return nil, errors.New("request sent outside the retry loop")
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
	resp, err := d.client.Do(r)
	if resp != nil {
		a.status = resp.StatusCode
		a.retryAfter = resp.Header.Get("Retry-After")
	}
	return resp, err
}

// rewriteChat sets temperature (0 included) and seed in the JSON body.
// It edits the decoded object rather than the text so any field order or
// spacing go-openai produces is handled.
func (d *doer) rewriteChat(r *http.Request, fillContent bool) error {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	m["temperature"] = d.temperature
	if d.seed != nil {
		m["seed"] = d.seed
	}
	if fillContent {
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(m["messages"], &msgs); err != nil {
			return err
		}
		for _, msg := range msgs {
			if _, ok := msg["content"]; !ok {
				msg["content"] = json.RawMessage(`""`)
			}
		}
		if m["messages"], err = json.Marshal(msgs); err != nil {
			return err
		}
	}
	if body, err = encodeObject(m); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nil
}

// encodeObject writes m with sorted keys. Unlike json.Marshal it copies the
// values verbatim: they came out of json.Unmarshal or from us, so they are
// valid, and re-validating a long history on every call is wasted work.
func encodeObject(m map[string]json.RawMessage) ([]byte, error) {
	n := 2
	for k, v := range m {
		n += len(k) + len(v) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		q, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b = append(append(b, q...), ':')
		b = append(b, m[k]...)
	}
	return append(b, '}'), nil
}
