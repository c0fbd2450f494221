package distill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Violation is one way a file breaks the formats: a row (1-based line of a
// JSONL file or row of a Parquet file; 0 for the file as a whole) and the
// field at fault.
type Violation struct {
	File    string `json:"file"`
	Row     int    `json:"row"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(v.File)
	if v.Row > 0 {
		fmt.Fprintf(&b, ": row %d", v.Row)
	}
	if v.Field != "" {
		b.WriteString(": ")
		b.WriteString(v.Field)
	}
	b.WriteString(": ")
	b.WriteString(v.Message)
	return b.String()
}

// maxViolations bounds the report of a badly broken file; the last entry
// says how many more there were.
const maxViolations = 1000

// ValidateFile checks a JSONL or Parquet file against the formats this
// package writes. A JSONL line with a "messages" key is checked against the
// OpenAI chat fine-tuning rules (a messages list; known roles and keys only;
// non-empty string content; at least one assistant message); any other line
// must be a prompt–completion row with its metadata. A Parquet file must have
// the prompt–completion schema (message lists as LIST of STRUCT(role,
// content)), zstd pages that read back, plain or dictionary strings, rows
// that pass the same checks, and column statistics that bound each row
// group's values. The error is for files that cannot be read at all.
func ValidateFile(ctx context.Context, path string) ([]Violation, error) {
	vs := &violations{file: path}
	var err error
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".jsonl":
		err = validateJSONL(ctx, path, vs)
	case ".parquet":
		err = validateParquet(ctx, path, vs)
	default:
		return nil, fmt.Errorf("%s: cannot validate %q files (want .jsonl or .parquet)", path, ext)
	}
	if err != nil {
		return nil, err
	}
	return vs.list(), nil
}

type violations struct {
	file    string
	items   []Violation
	dropped int
	// typedMessages is set when rows come typed (Parquet, the Writer), so
	// no JSON-level check has looked at their messages yet.
	typedMessages bool
}

func (vs *violations) add(row int, field, format string, args ...any) {
	if len(vs.items) >= maxViolations {
		vs.dropped++
		return
	}
	vs.items = append(vs.items, Violation{File: vs.file, Row: row, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (vs *violations) list() []Violation {
	if vs.dropped > 0 {
		return append(vs.items, Violation{File: vs.file, Message: fmt.Sprintf("%d more violations not listed", vs.dropped)})
	}
	return vs.items
}

func validateJSONL(ctx context.Context, path string, vs *violations) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ids := map[string]int{}
	lr := newLineReader(f, path)
	// Blank lines are skipped by the reader but rejected by fine-tuning
	// services, so the gaps between the lines it returns are violations.
	prev, rows := 0, 0
	blanks := func(upTo int) {
		for b := prev + 1; b <= upTo; b++ {
			vs.add(b, "", "blank line")
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, n, err := lr.next()
		if errors.Is(err, io.EOF) {
			blanks(lr.line)
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		blanks(n - 1)
		prev = n
		rows++
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil {
			vs.add(n, "", "not a JSON object: %v", err)
			continue
		}
		if _, ok := obj["messages"]; ok {
			checkMessagesLine(n, obj, vs)
			continue
		}
		if r, ok := checkPromptCompletionLine(n, obj, vs); ok {
			checkRowValues(n, &r, vs)
			checkUniqueID(n, r.ID, ids, vs)
		}
	}
	if rows == 0 {
		vs.add(0, "", "no rows")
	}
	return nil
}

// OpenAI chat fine-tuning: the keys a line and a message may have, and the
// roles.
var (
	messagesLineKeys = map[string]bool{"messages": true, "tools": true, "parallel_tool_calls": true, "functions": true}
	openAIMessageKey = map[string]bool{"role": true, "content": true, "name": true, "weight": true, "tool_calls": true, "tool_call_id": true, "function_call": true}
	openAIRoles      = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}
)

func checkMessagesLine(row int, obj map[string]json.RawMessage, vs *violations) {
	for _, k := range sortedRawKeys(obj) {
		if !messagesLineKeys[k] {
			vs.add(row, k, "unknown key (a messages line has messages and, optionally, tools)")
		}
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(obj["messages"], &msgs); err != nil {
		vs.add(row, "messages", "not a list of message objects")
		return
	}
	if len(msgs) == 0 {
		vs.add(row, "messages", "empty list")
		return
	}
	assistants := 0
	for i, msg := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		role, ok := checkMessage(row, field, msg, openAIMessageKey, openAIRoles, vs)
		if !ok {
			continue
		}
		if role == "assistant" {
			assistants++
		}
		// A null weight is no weight: ours writes it on the prompt's
		// messages so that every message has the same keys.
		if w, has := msg["weight"]; has && string(w) != "null" {
			var weight float64
			switch {
			case role != "assistant":
				vs.add(row, field+".weight", "weight is allowed on assistant messages only (null elsewhere)")
			case json.Unmarshal(w, &weight) != nil || (weight != 0 && weight != 1):
				vs.add(row, field+".weight", "weight must be 0 or 1, got %s", w)
			}
		}
	}
	if assistants == 0 {
		vs.add(row, "messages", "no assistant message: nothing to train on")
	}
}

// checkMessage checks one message object: known keys, a known role, and
// non-empty string content. It returns the role and whether the role was
// readable.
func checkMessage(row int, field string, msg map[string]json.RawMessage, keys, roles map[string]bool, vs *violations) (string, bool) {
	for _, k := range sortedRawKeys(msg) {
		if !keys[k] {
			vs.add(row, field+"."+k, "unknown message key")
		}
	}
	var role string
	raw, ok := msg["role"]
	switch {
	case !ok:
		vs.add(row, field+".role", "missing")
		return "", false
	case json.Unmarshal(raw, &role) != nil:
		vs.add(row, field+".role", "not a string")
		return "", false
	case !roles[role]:
		vs.add(row, field+".role", "unknown role %q (want one of %s)", role, strings.Join(sortedBoolKeys(roles), ", "))
	}
	var content string
	raw, ok = msg["content"]
	calls := role == "assistant" && hasCalls(row, field, msg, vs)
	switch {
	case calls && (!ok || string(raw) == "null"):
		// An assistant turn that only calls tools has no content
		// (OpenAI's format: "content": null with "tool_calls").
	case !ok:
		vs.add(row, field+".content", "missing")
	case string(raw) == "null":
		vs.add(row, field+".content", "null; only an assistant message with tool_calls may have no content")
	case json.Unmarshal(raw, &content) != nil:
		vs.add(row, field+".content", "not a string")
	case strings.TrimSpace(content) == "":
		vs.add(row, field+".content", "empty")
	}
	return role, true
}

// hasCalls reports whether an assistant message carries tool calls (or a
// legacy function_call), checking their shape.
func hasCalls(row int, field string, msg map[string]json.RawMessage, vs *violations) bool {
	if raw, ok := msg["function_call"]; ok && string(raw) != "null" {
		var fc struct {
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		}
		if json.Unmarshal(raw, &fc) != nil || fc.Name == nil || fc.Arguments == nil {
			vs.add(row, field+".function_call", "want an object with string name and arguments")
		}
		return true
	}
	raw, ok := msg["tool_calls"]
	if !ok || string(raw) == "null" {
		return false
	}
	var tcs []struct {
		ID       *string `json:"id"`
		Type     *string `json:"type"`
		Function *struct {
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tcs) != nil || len(tcs) == 0 {
		vs.add(row, field+".tool_calls", "want a non-empty list of tool calls")
		return false
	}
	for i, tc := range tcs {
		f := fmt.Sprintf("%s.tool_calls[%d]", field, i)
		switch {
		case tc.ID == nil || *tc.ID == "":
			vs.add(row, f+".id", "missing")
		case tc.Type == nil || *tc.Type != "function":
			vs.add(row, f+".type", `want "function"`)
		case tc.Function == nil || tc.Function.Name == nil || *tc.Function.Name == "" || tc.Function.Arguments == nil:
			vs.add(row, f+".function", "want an object with a name and string arguments")
		}
	}
	return true
}

// The keys of a prompt–completion row, all required.
var rowKeys = []string{"id", "prompt", "completion", "kind", "source", "task_id", "step", "guideline_id",
	"teacher_model", "input_tokens", "output_tokens", "compression_ratio", "split"}

var (
	rowMessageKeys = map[string]bool{"role": true, "content": true}
	completionRole = map[string]bool{"assistant": true}
)

// checkPromptCompletionLine checks the keys and types of a prompt–completion
// line and returns it decoded when they are right.
func checkPromptCompletionLine(row int, obj map[string]json.RawMessage, vs *violations) (Row, bool) {
	known := map[string]bool{}
	for _, k := range rowKeys {
		known[k] = true
	}
	before := len(vs.items) + vs.dropped
	for _, k := range sortedRawKeys(obj) {
		if !known[k] {
			vs.add(row, k, "unknown key")
		}
	}
	for _, k := range rowKeys {
		if _, ok := obj[k]; !ok {
			vs.add(row, k, "missing")
		}
	}
	for _, part := range []struct {
		key   string
		roles map[string]bool
	}{{"prompt", promptRoles}, {"completion", completionRole}} {
		raw, ok := obj[part.key]
		if !ok {
			continue
		}
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &msgs); err != nil {
			vs.add(row, part.key, "not a list of message objects")
			continue
		}
		for i, msg := range msgs {
			checkMessage(row, fmt.Sprintf("%s[%d]", part.key, i), msg, rowMessageKeys, part.roles, vs)
		}
	}
	if len(vs.items)+vs.dropped > before {
		return Row{}, false
	}
	var r Row
	dec := json.NewDecoder(bytes.NewReader(mustMarshal(obj)))
	if err := dec.Decode(&r); err != nil {
		vs.add(row, "", "wrong value type: %v", err)
		return Row{}, false
	}
	return r, true
}

func mustMarshal(obj map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(obj) // re-encoding raw messages just decoded cannot fail
	return b
}

// checkRowValues checks the values of a decoded row. The Writer enforces the
// same rules, so what it writes validates.
func checkRowValues(row int, r *Row, vs *violations) {
	if r.ID == "" {
		vs.add(row, "id", "empty")
	}
	if len(r.Prompt) == 0 {
		vs.add(row, "prompt", "empty: the compressor input is missing")
	}
	if len(r.Completion) != 1 {
		vs.add(row, "completion", "want exactly one assistant message, got %d messages", len(r.Completion))
	}
	for i, m := range r.Prompt {
		checkMessageValue(row, "prompt", i, m, promptRoles, vs)
	}
	for i, m := range r.Completion {
		checkMessageValue(row, "completion", i, m, completionRole, vs)
	}
	if !validKind[r.Kind] {
		vs.add(row, "kind", "%q is not history, observation or paace", r.Kind)
	}
	if !validSource[r.Source] {
		vs.add(row, "source", "%q is not acon or paace_syn", r.Source)
	}
	if !validSplit[r.Split] {
		vs.add(row, "split", "%q is not train or validation", r.Split)
	}
	if r.Step < 0 {
		vs.add(row, "step", "negative")
	}
	if r.InputTokens < 0 {
		vs.add(row, "input_tokens", "negative")
	}
	if r.OutputTokens < 0 {
		vs.add(row, "output_tokens", "negative")
	}
	if math.IsNaN(r.CompressionRatio) || math.IsInf(r.CompressionRatio, 0) || r.CompressionRatio < 0 {
		vs.add(row, "compression_ratio", "%v is not a finite non-negative number", r.CompressionRatio)
	}
	for _, f := range []struct{ name, value string }{
		{"id", r.ID}, {"task_id", r.TaskID}, {"guideline_id", r.GuidelineID}, {"teacher_model", r.TeacherModel},
	} {
		if !utf8.ValidString(f.value) {
			vs.add(row, f.name, "not valid UTF-8")
		}
	}
}

// checkMessageValue checks a typed message. For JSON lines, checkMessage
// has already reported role and content faults.
func checkMessageValue(row int, part string, i int, m Message, roles map[string]bool, vs *violations) {
	field := func(k string) string { return part + "[" + strconv.Itoa(i) + "]." + k }
	if !utf8.ValidString(m.Content) {
		vs.add(row, field("content"), "not valid UTF-8")
	}
	if !vs.typedMessages {
		return
	}
	if !roles[m.Role] {
		vs.add(row, field("role"), "unknown role %q (want one of %s)", m.Role, strings.Join(sortedBoolKeys(roles), ", "))
	}
	if strings.TrimSpace(m.Content) == "" {
		vs.add(row, field("content"), "empty")
	}
}

func checkUniqueID(row int, id string, ids map[string]int, vs *violations) {
	if id == "" {
		return
	}
	if first, dup := ids[id]; dup {
		vs.add(row, "id", "duplicate of row %d", first)
		return
	}
	ids[id] = row
}

func validateParquet(ctx context.Context, path string, vs *violations) error {
	vs.typedMessages = true
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		vs.add(0, "", "not a readable Parquet file: %v", err)
		return nil
	}
	if !checkParquetSchema(pf, vs) {
		return nil
	}
	checkParquetChunks(pf, vs)
	if !checkParquetBounds(ctx, pf, vs) {
		return nil // rows of a damaged page would be decoded from garbage
	}
	return checkParquetRows(ctx, pf, vs)
}

// checkParquetRows reads every row and checks its values. A damaged file
// can make parquet-go's reader panic; that is reported as an unreadable row.
func checkParquetRows(ctx context.Context, pf *parquet.File, vs *violations) error {
	row := 0
	defer func() {
		if p := recover(); p != nil {
			vs.add(row+1, "", "unreadable row: the Parquet reader failed: %v", p)
		}
	}()
	r := parquet.NewGenericReader[Row](pf)
	defer r.Close()
	ids := map[string]int{}
	buf := make([]Row, 256)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(buf)
		for i := range buf[:n] {
			row++
			checkRowValues(row, &buf[i], vs)
			checkUniqueID(row, buf[i].ID, ids, vs)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			vs.add(row+1, "", "unreadable row: %v", err)
			break
		}
	}
	if int64(row) != pf.NumRows() {
		vs.add(0, "", "%d rows read, the footer says %d", row, pf.NumRows())
	}
	return nil
}

// checkParquetBounds checks the pages of every column chunk against the
// chunk's statistics: readers skip row groups by them (a filter in DuckDB or
// pyarrow), so a bound that excludes a value drops its row from query
// results without an error. Reading the pages also finds damaged ones
// (parquet-go checks their checksums). It reports damage and returns false.
func checkParquetBounds(ctx context.Context, pf *parquet.File, vs *violations) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			vs.add(0, "", "damaged file (write it again): the Parquet reader failed: %v", p)
			ok = false
		}
	}()
	md := pf.Metadata()
	for g, rg := range pf.RowGroups() {
		for c, chunk := range rg.ColumnChunks() {
			if ctx.Err() != nil {
				return true // checkParquetRows returns the error
			}
			meta := &md.RowGroups[g].Columns[c].MetaData
			if err := checkChunkBounds(chunk, &meta.Statistics); err != nil {
				col := strings.Join(meta.PathInSchema, ".")
				var outside *boundsError
				if !errors.As(err, &outside) {
					vs.add(0, col, "damaged file (write it again): row group %d: %v", g, err)
					return false
				}
				vs.add(0, col, "row group %d: %v: readers filtering on its statistics would skip rows", g, err)
			}
		}
	}
	return true
}

type boundsError struct{ value, lo, hi parquet.Value }

func (e *boundsError) Error() string {
	return fmt.Sprintf("value %.80s is outside the statistics [%.80s, %.80s]", e.value, e.lo, e.hi)
}

// checkChunkBounds returns a *boundsError for a page value outside the
// chunk's statistics, or the error reading a page.
func checkChunkBounds(chunk parquet.ColumnChunk, st *format.Statistics) error {
	typ := chunk.Type()
	pages := chunk.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		lo, hi, has := p.Bounds()
		parquet.Release(p)
		if !has {
			continue
		}
		if st.MinValue != nil && typ.Compare(lo, typ.Kind().Value(st.MinValue)) < 0 {
			return &boundsError{lo, typ.Kind().Value(st.MinValue), typ.Kind().Value(st.MaxValue)}
		}
		if st.MaxValue != nil && typ.Compare(hi, typ.Kind().Value(st.MaxValue)) > 0 {
			return &boundsError{hi, typ.Kind().Value(st.MinValue), typ.Kind().Value(st.MaxValue)}
		}
	}
}

// checkParquetSchema compares each column with the one Row gives, by name,
// so that readers find the types they expect (a message list must be a LIST
// of STRUCT(role, content), not a repeated group).
func checkParquetSchema(pf *parquet.File, vs *violations) bool {
	want := parquet.SchemaOf(Row{})
	got := map[string]parquet.Field{}
	for _, f := range pf.Schema().Fields() {
		got[f.Name()] = f
	}
	ok := true
	for _, wf := range want.Fields() {
		gf, found := got[wf.Name()]
		switch {
		case !found:
			vs.add(0, wf.Name(), "column missing")
			ok = false
		case !parquet.EqualNodes(gf, wf):
			vs.add(0, wf.Name(), "column type differs from the format: want %s", nodeString(wf))
			ok = false
		}
		delete(got, wf.Name())
	}
	for _, f := range pf.Schema().Fields() {
		if _, extra := got[f.Name()]; extra {
			vs.add(0, f.Name(), "unknown column")
		}
	}
	return ok
}

// checkParquetChunks checks the codec and string encodings of every column
// chunk: zstd, and no DELTA_*_BYTE_ARRAY, which older readers reject.
func checkParquetChunks(pf *parquet.File, vs *violations) {
	seen := map[string]bool{}
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			col := strings.Join(cc.MetaData.PathInSchema, ".")
			if cc.MetaData.Codec != format.Zstd && !seen[col+"codec"] {
				seen[col+"codec"] = true
				vs.add(0, col, "compressed with %s, want ZSTD", cc.MetaData.Codec)
			}
			for _, e := range cc.MetaData.Encoding {
				if (e == format.DeltaLengthByteArray || e == format.DeltaByteArray) && !seen[col+"enc"] {
					seen[col+"enc"] = true
					vs.add(0, col, "encoded with %s; want PLAIN or dictionary strings, which every reader supports", e)
				}
			}
		}
	}
}

func nodeString(n parquet.Node) string {
	var b strings.Builder
	parquet.PrintSchema(&b, "", n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func sortedRawKeys(m map[string]json.RawMessage) []string {
	set := make(map[string]struct{}, len(m))
	for k := range m {
		set[k] = struct{}{}
	}
	return sortedKeys(set)
}

func sortedBoolKeys(m map[string]bool) []string {
	set := make(map[string]struct{}, len(m))
	for k := range m {
		set[k] = struct{}{}
	}
	return sortedKeys(set)
}
