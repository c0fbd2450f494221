package rollout

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
)

// RecordFormat is the version of the trajectory record written by
// EncodeTrajectory; DecodeTrajectory reads every earlier one:
//   - 1 (no format field): the trajectory as it is, every agent input in
//     full, so a record grew with the square of the steps;
//   - 2: each text stored once and referred to by index (see record);
//   - 3: format 2 with its texts, messages, turns and compression events
//     compressed into one zstd frame (the zstd field, base64 in the JSON
//     line). The outcome fields stay plain JSON. The text table shares
//     only equal texts; observations that overlap (a passage found by two
//     searches) and templated prose are most of a record's bytes, and the
//     frame brings the demo's records to a quarter of their format 2 size.
const RecordFormat = 3

// formatTexts is the format that introduced the text table.
const formatTexts = 2

// MaxRecordBytes bounds one record line; a longer line is an error, not
// an allocation of whatever size the file claims.
const MaxRecordBytes = 256 << 20

// RecordLimits bound the trajectory files readers accept. Records are
// streamed, so the file bound only stops a runaway input.
var RecordLimits = jsonl.Limits{Line: MaxRecordBytes, File: 64 << 30}

// A record stores each text of an episode once, in Texts, and refers to it
// by index: messages, observations, compression variables and outputs.
// Each agent call lists the messages it was sent, so its input is rebuilt
// exactly and the record grows linearly with the steps (the first format
// repeated the whole prompt at every step). The trajectory's other fields
// are embedded as they are; the fields below shadow the ones stored as
// references.
type record struct {
	Format int `json:"format"`
	Trajectory
	Texts    []string     `json:"texts,omitempty"`
	Messages []recMessage `json:"messages,omitempty"`
	Turns    []recTurn    `json:"turns,omitempty"`
	Events   []recEvent   `json:"compression_events,omitempty"`
	// Packed holds the four fields above, as the JSON object body, in one
	// zstd frame (format 3); they are then absent from the line.
	Packed []byte `json:"zstd,omitempty"`
}

// body is what format 3 packs: the fields of record that grow with the
// steps. Its fields are record's (a struct embedding both would hide the
// turns of both from encoding/json).
type body struct {
	Texts    []string     `json:"texts,omitempty"`
	Messages []recMessage `json:"messages,omitempty"`
	Turns    []recTurn    `json:"turns,omitempty"`
	Events   []recEvent   `json:"compression_events,omitempty"`
}

// recMessage is a message with its content as a text reference. By is the
// 1-based index of the compression event that produced the message (a
// history summary, a refined observation); 0 for messages that were not
// compressed.
type recMessage struct {
	Role       string         `json:"role"`
	Content    int            `json:"content"`
	ToolCalls  []llm.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
	By         int            `json:"by,omitempty"`
}

// recTurn is one agent call: Input lists the messages it was sent, in
// order, as runs of consecutive message indexes ([first, count]), so an
// input that only grew costs one run; Output is the reply's index.
type recTurn struct {
	Turn
	Input                 [][2]int `json:"input"`
	Output                int      `json:"output"`
	Observation           int      `json:"observation"`
	CompressedObservation int      `json:"compressed_observation,omitempty"` // text index + 1; 0: none
}

// recEvent is one compression. Its prompt is stored as parts: literal
// texts and the variables rendered into it; the variables are parts too,
// literal texts and the messages' texts they quote (a formatted history
// quotes the observations). So nothing the compressor was shown is stored
// twice.
type recEvent struct {
	CompressionEvent
	Vars   map[string][]recPart `json:"vars"`
	Input  []recPrompt          `json:"input"`
	Output int                  `json:"output"`
}

type recPrompt struct {
	Role  string    `json:"role"`
	Parts []recPart `json:"parts"`
}

// recPart is a literal text (T) or the value of a variable (V).
type recPart struct {
	T int    `json:"t,omitempty"` // text index + 1
	V string `json:"v,omitempty"`
}

// minQuote is the shortest text worth a reference inside another.
const minQuote = 32

// EncodeTrajectory returns t as one record line (without the newline).
func EncodeTrajectory(t *Trajectory) ([]byte, error) {
	e := encoder{texts: map[string]int{}, msgs: map[string]int{}}
	r := record{Format: RecordFormat, Trajectory: *t, Turns: make([]recTurn, len(t.Turns)), Events: make([]recEvent, len(t.Events))}
	r.Trajectory.Turns, r.Trajectory.Events = nil, nil
	for i, tr := range t.Turns {
		rt := recTurn{Turn: tr, Observation: e.text(tr.Observation)}
		rt.Turn.Input, rt.Turn.Output, rt.Turn.Observation, rt.Turn.CompressedObservation = nil, llm.Message{}, "", ""
		if tr.CompressedObservation != "" {
			rt.CompressedObservation = e.text(tr.CompressedObservation) + 1
		}
		for j, m := range tr.Input {
			idx, fresh := e.message(m)
			if fresh {
				e.out[idx].By = producedBy(t, i, j, m)
			}
			if n := len(rt.Input); n > 0 && rt.Input[n-1][0]+rt.Input[n-1][1] == idx {
				rt.Input[n-1][1]++
			} else {
				rt.Input = append(rt.Input, [2]int{idx, 1})
			}
		}
		rt.Output, _ = e.message(tr.Output)
		r.Turns[i] = rt
	}
	// Texts of the messages that compression variables may quote.
	var quoted []quote
	for i, txt := range e.list {
		if len(txt) >= minQuote {
			quoted = append(quoted, quote{text: txt, part: recPart{T: i + 1}})
		}
	}
	for i, ev := range t.Events {
		re := recEvent{CompressionEvent: ev, Output: e.text(ev.Output)}
		if ev.Vars != nil {
			re.Vars = make(map[string][]recPart, len(ev.Vars))
		}
		re.CompressionEvent.Vars, re.CompressionEvent.Input, re.CompressionEvent.Output = nil, nil, ""
		var vars []quote
		for k, v := range ev.Vars {
			re.Vars[k] = e.parts(v, quoted)
			vars = append(vars, quote{text: v, part: recPart{V: k}})
		}
		for _, m := range ev.Input {
			if m.ToolCalls != nil || m.ToolCallID != "" || m.Name != "" {
				return nil, fmt.Errorf("encode trajectory %s: compression event %d: only role and content of a compressor prompt are recorded", t.TaskID, i+1)
			}
			re.Input = append(re.Input, recPrompt{Role: m.Role, Parts: e.parts(m.Content, vars)})
		}
		r.Events[i] = re
	}
	plain, err := json.Marshal(body{Texts: e.list, Messages: e.out, Turns: r.Turns, Events: r.Events})
	if err != nil {
		return nil, fmt.Errorf("encode trajectory %s: %w", t.TaskID, err)
	}
	r.Turns, r.Events = nil, nil
	r.Packed = packer().EncodeAll(plain, nil)
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode trajectory %s: %w", t.TaskID, err)
	}
	return b, nil
}

// packWindow is the largest window the packer uses (klauspost's default,
// named so the decoder can insist on it). A frame no larger is one
// single segment whose window is its size.
const packWindow = 8 << 20

// The zstd encoder is safe for concurrent EncodeAll and holds buffers, so
// it is made once. klauspost's pure-Go zstd writes the same bytes with and
// without cgo (records are content-hashed by the stages that read them).
var packer = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithWindowSize(packWindow))
	if err != nil {
		panic(err) // only invalid options fail
	}
	return enc
})

// unpackers hold stream decoders, one per concurrent caller. DecodeAll
// would allocate the content size a frame header declares (up to
// MaxRecordBytes for a line of a few bytes); a stream decoder allocates
// the frame's window, which is at most packWindow here, and the output
// grows with what the frame really holds.
var unpackers = sync.Pool{New: func() any {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(packWindow), zstd.WithDecoderMaxMemory(MaxRecordBytes))
	if err != nil {
		panic(err) // only invalid options fail
	}
	return dec
}}

// producedBy returns the 1-based index of the compression event that made
// the j-th input message of turn i (fresh in that turn), or 0. Messages
// that turn i-1 added on its own (its reply, the answers to its tool calls,
// a nudge) are natural, unless an observation compression refined the
// answer; any other new message (a summary, a rewritten turn) comes from
// the history compression made right before the call.
func producedBy(t *Trajectory, i, j int, m llm.Message) int {
	if i == 0 || j == 0 {
		return 0
	}
	step, prev := t.Turns[i].Step, t.Turns[i-1]
	natural := reflect.DeepEqual(m, prev.Output) ||
		(m.Role != "assistant" && (m.Content == prev.Observation || strings.HasPrefix(m.Content, "error:")))
	refined := m.Role == "tool" && prev.CompressedObservation != "" && m.Content == prev.CompressedObservation
	for k := len(t.Events) - 1; k >= 0; k-- {
		ev := t.Events[k]
		if ev.Step != step-1 {
			continue
		}
		switch {
		case ev.Kind == compress.KindObservation && refined:
			return k + 1
		case ev.Kind == compress.KindHistory && !natural && !refined:
			return k + 1
		}
	}
	return 0
}

type encoder struct {
	texts map[string]int
	list  []string
	msgs  map[string]int
	out   []recMessage
}

func (e *encoder) text(s string) int {
	if i, ok := e.texts[s]; ok {
		return i
	}
	e.texts[s] = len(e.list)
	e.list = append(e.list, s)
	return len(e.list) - 1
}

// message interns m and reports whether it is new.
func (e *encoder) message(m llm.Message) (int, bool) {
	rm := recMessage{Role: m.Role, Content: e.text(m.Content), ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
	key, _ := json.Marshal(rm)
	if i, ok := e.msgs[string(key)]; ok {
		return i, false
	}
	e.msgs[string(key)] = len(e.out)
	e.out = append(e.out, rm)
	return len(e.out) - 1, true
}

// quote is a text that parts replaces by a reference wherever it occurs.
type quote struct {
	text string
	part recPart
}

// parts splits s at every occurrence of a quoted text, longest first, so
// concatenating the parts gives s back; the rest are literal texts.
func (e *encoder) parts(s string, quotes []quote) []recPart {
	type piece struct {
		lit string
		ref *recPart
	}
	pieces := []piece{{lit: s}}
	qs := slices.Clone(quotes)
	slices.SortStableFunc(qs, func(a, b quote) int {
		return cmp.Or(cmp.Compare(len(b.text), len(a.text)), cmp.Compare(a.part.V, b.part.V), cmp.Compare(a.part.T, b.part.T))
	})
	for _, q := range qs {
		if len(q.text) < minQuote {
			continue
		}
		var next []piece
		for _, p := range pieces {
			if p.ref != nil {
				next = append(next, p)
				continue
			}
			rest := p.lit
			for {
				i := strings.Index(rest, q.text)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, piece{lit: rest[:i]})
				}
				next = append(next, piece{ref: &q.part})
				rest = rest[i+len(q.text):]
			}
			if rest != "" || len(next) == 0 {
				next = append(next, piece{lit: rest})
			}
		}
		pieces = next
	}
	out := make([]recPart, len(pieces))
	for i, p := range pieces {
		if p.ref != nil {
			out[i] = *p.ref
		} else {
			out[i] = recPart{T: e.text(p.lit) + 1}
		}
	}
	return out
}

// legacyTrajectory is the first record format: every field as in
// Trajectory, agent inputs in full.
type legacyTrajectory Trajectory

// DecodeTrajectory reads one record line of either format and rebuilds the
// trajectory, every agent and compressor input exactly as it was sent.
func DecodeTrajectory(line []byte) (*Trajectory, error) { return decode(line, true) }

// DecodeEvents is DecodeTrajectory without the turns, for readers that
// need only the outcome and the compression events (distillation); the
// turns are skipped while decoding.
func DecodeEvents(line []byte) (*Trajectory, error) { return decode(line, false) }

// legacyEvents and recordEvents shadow the turns of a record so that
// decoding skips them.
type legacyEvents struct {
	legacyTrajectory
	Turns []struct{} `json:"turns"`
}

type recordEvents struct {
	record
	Turns []struct{} `json:"turns"`
}

// lineHead holds what decides how a record line is read.
type lineHead struct {
	Format int             `json:"format"`
	TaskID string          `json:"task_id"`
	Turns  json.RawMessage `json:"turns"`
	Packed json.RawMessage `json:"zstd"`
}

// check rejects a line that no format reads, so every reader rejects the
// same lines with the same words.
func (h *lineHead) check() error {
	switch {
	case h.TaskID == "":
		return errors.New("trajectory record has no task_id")
	case h.Format < 0:
		return fmt.Errorf("trajectory %s: record format %d does not exist (formats are 1 to %d)", h.TaskID, h.Format, RecordFormat)
	case h.Format > RecordFormat:
		return fmt.Errorf("trajectory %s: record format %d is newer than this optimize reads (%d); upgrade optimize", h.TaskID, h.Format, RecordFormat)
	case h.Format < formatTexts && h.Turns == nil:
		// Format 1 always wrote turns; an index line, say, has none.
		return fmt.Errorf("trajectory %s: a record of format 1 (no format field) has turns, this line has none; is this a trajectories file?", h.TaskID)
	case h.Format != RecordFormat && h.Packed != nil:
		return fmt.Errorf("trajectory %s: zstd field in a record of format %d, which packs nothing", h.TaskID, max(h.Format, 1))
	case h.Format == RecordFormat && h.Packed == nil:
		return fmt.Errorf("trajectory %s: a record of format %d needs its zstd field", h.TaskID, RecordFormat)
	}
	return nil
}

func decode(line []byte, turns bool) (*Trajectory, error) {
	var head lineHead
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("not a trajectory record: %w", err)
	}
	if err := head.check(); err != nil {
		return nil, err
	}
	var t *Trajectory
	var err error
	if head.Format < formatTexts {
		var v legacyEvents
		if turns {
			err = json.Unmarshal(line, (*legacyTrajectory)(&v.legacyTrajectory))
		} else {
			err = json.Unmarshal(line, &v)
		}
		t = (*Trajectory)(&v.legacyTrajectory)
	} else {
		var v recordEvents
		if turns {
			err = json.Unmarshal(line, &v.record)
		} else {
			err = json.Unmarshal(line, &v)
		}
		if err == nil && head.Format == RecordFormat {
			err = v.unpack(turns)
		}
		if err == nil {
			t, err = v.record.trajectory()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("trajectory %s: %w", head.TaskID, err)
	}
	return t, nil
}

// unpack decodes the packed fields of a format 3 record in place, the
// turns only when turns is set.
func (v *recordEvents) unpack(turns bool) error {
	plain, err := unpack(v.Packed)
	if err != nil {
		return err
	}
	v.Packed = nil
	if turns {
		return json.Unmarshal(plain, &v.record)
	}
	return json.Unmarshal(plain, v)
}

// unpack returns the JSON object a format 3 record packed, at most
// MaxRecordBytes.
func unpack(packed []byte) ([]byte, error) {
	if len(packed) == 0 {
		return nil, fmt.Errorf("a record of format %d needs its zstd field", RecordFormat)
	}
	dec := unpackers.Get().(*zstd.Decoder)
	defer unpackers.Put(dec)
	// A bytes.Reader, not a bytes.Buffer: Reset decodes a small Buffer with
	// DecodeAll.
	if err := dec.Reset(bytes.NewReader(packed)); err != nil {
		return nil, fmt.Errorf("zstd field: %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(dec, MaxRecordBytes+1))
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("zstd field: the frame asks for a window over %d bytes, which optimize never writes: %w", packWindow, err)
	}
	if err != nil {
		return nil, fmt.Errorf("zstd field: %w", err)
	}
	if len(plain) > MaxRecordBytes {
		return nil, fmt.Errorf("zstd field expands past %d bytes, the limit of a record", MaxRecordBytes)
	}
	return plain, nil
}

func (r *record) trajectory() (*Trajectory, error) {
	text := func(i int, what string) (string, error) {
		if i < 0 || i >= len(r.Texts) {
			return "", fmt.Errorf("%s refers to text %d of %d", what, i, len(r.Texts))
		}
		return r.Texts[i], nil
	}
	msgs := make([]llm.Message, len(r.Messages))
	for i, m := range r.Messages {
		c, err := text(m.Content, fmt.Sprintf("message %d", i))
		if err != nil {
			return nil, err
		}
		if m.By < 0 || m.By > len(r.Events) {
			return nil, fmt.Errorf("message %d names compression event %d of %d", i, m.By, len(r.Events))
		}
		msgs[i] = llm.Message{Role: m.Role, Content: c, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
	}
	msg := func(i int, what string) (llm.Message, error) {
		if i < 0 || i >= len(msgs) {
			return llm.Message{}, fmt.Errorf("%s refers to message %d of %d", what, i, len(msgs))
		}
		return msgs[i], nil
	}
	t := &r.Trajectory
	if len(r.Turns) > 0 {
		t.Turns = make([]Turn, len(r.Turns))
	}
	var err error
	for i, rt := range r.Turns {
		what := fmt.Sprintf("turn %d", i+1)
		tr := rt.Turn
		tr.Input = nil
		for _, run := range rt.Input {
			if run[1] < 1 || run[1] > len(msgs) {
				return nil, fmt.Errorf("%s input has a run of %d messages", what, run[1])
			}
			for k := run[0]; k < run[0]+run[1]; k++ {
				m, err := msg(k, what+" input")
				if err != nil {
					return nil, err
				}
				tr.Input = append(tr.Input, m)
			}
		}
		if tr.Output, err = msg(rt.Output, what+" output"); err != nil {
			return nil, err
		}
		if tr.Observation, err = text(rt.Observation, what+" observation"); err != nil {
			return nil, err
		}
		if rt.CompressedObservation > 0 {
			if tr.CompressedObservation, err = text(rt.CompressedObservation-1, what+" compressed observation"); err != nil {
				return nil, err
			}
		}
		t.Turns[i] = tr
	}
	if len(r.Events) > 0 {
		t.Events = make([]CompressionEvent, len(r.Events))
	}
	for i, re := range r.Events {
		what := fmt.Sprintf("compression event %d", i+1)
		ev := re.CompressionEvent
		ev.Vars = nil
		if re.Vars != nil {
			ev.Vars = make(map[string]string, len(re.Vars))
		}
		if ev.Output, err = text(re.Output, what+" output"); err != nil {
			return nil, err
		}
		for k, parts := range re.Vars {
			if ev.Vars[k], err = join(parts, nil, text, what+" variable "+k); err != nil {
				return nil, err
			}
		}
		for _, p := range re.Input {
			c, err := join(p.Parts, ev.Vars, text, what+" input")
			if err != nil {
				return nil, err
			}
			ev.Input = append(ev.Input, llm.Message{Role: p.Role, Content: c})
		}
		t.Events[i] = ev
	}
	return t, nil
}

// join concatenates parts: texts and, where vars is given, variables.
func join(parts []recPart, vars map[string]string, text func(int, string) (string, error), what string) (string, error) {
	var b strings.Builder
	for _, part := range parts {
		switch {
		case part.V != "":
			v, ok := vars[part.V]
			if !ok {
				return "", fmt.Errorf("%s refers to variable %q, which is not recorded", what, part.V)
			}
			b.WriteString(v)
		default:
			s, err := text(part.T-1, what)
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
	}
	return b.String(), nil
}

// DamagedError is a line of a trajectories file that is not a record and
// not a torn last line (jsonl.Torn): damage, which readers report rather
// than skip, and which a resumed rollout does not cut off (it would drop
// the records after it).
type DamagedError struct {
	File string
	Line int
	Err  error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%s:%d: %v (a damaged record: delete the line to keep the records around it, or remove the directory to run it again)", e.File, e.Line, e.Err)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// Records yields the trajectories of a trajectories.jsonl file in file
// order, one at a time, so a reader holds one record in memory. A bad line
// ends the sequence with a DamagedError; a torn last line (see jsonl) ends
// it with a warning.
func Records(path string) iter.Seq2[*Trajectory, error] {
	return func(yield func(*Trajectory, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(nil, fmt.Errorf("open trajectories: %w", err))
			return
		}
		defer f.Close()
		rd := jsonl.NewReader(f, path, RecordLimits)
		for {
			line, err := rd.NonBlank()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			t, err := DecodeTrajectory(line)
			if err != nil {
				if !rd.SkipTorn(err) {
					yield(nil, &DamagedError{File: path, Line: rd.Line(), Err: err})
				}
				return
			}
			if !yield(t, nil) {
				return
			}
		}
	}
}

// ReadTrajectories reads a whole trajectories.jsonl file. Use Records to
// stream a large one.
func ReadTrajectories(path string) ([]*Trajectory, error) {
	var out []*Trajectory
	for t, err := range Records(path) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
