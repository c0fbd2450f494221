package distill

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestValidateAcceptsWhatBuildWrites(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ds")
	if _, err := Build(t.Context(), "testdata/run", out, Options{RowGroupRows: 2}); err != nil {
		t.Fatal(err)
	}
	for _, split := range splitNames {
		for _, name := range []string{jsonlFormat{}.Path(split), messagesFormat{}.Path(split), parquetFormat{}.Path(split)} {
			t.Run(name, func(t *testing.T) {
				vs, err := ValidateFile(t.Context(), filepath.Join(out, name))
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range vs {
					t.Error(v)
				}
			})
		}
	}
}

const goodMessages = `{"messages":[{"role":"system","content":"Compress."},{"role":"user","content":"history"},{"role":"assistant","content":"summary","weight":1}]}`

const goodRow = `{"id":"a1","prompt":[{"role":"system","content":"Compress."},{"role":"user","content":"history"}],"completion":[{"role":"assistant","content":"summary"}],"kind":"history","source":"acon","task_id":"t1","step":2,"guideline_id":"g","teacher_model":"m","input_tokens":10,"output_tokens":2,"compression_ratio":0.2,"split":"train"}`

// toolCallMessages is an OpenAI chat fine-tuning line from elsewhere: an
// assistant turn that only calls a tool has content null.
const toolCallMessages = `{"messages":[{"role":"user","content":"find x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"x is 1"},{"role":"assistant","content":"x is 1","weight":1}],"tools":[{"type":"function","function":{"name":"search","parameters":{}}}]}`

func TestValidateJSONLViolations(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		row   int
		field string
		want  string
	}{
		{"bad role", []string{goodMessages, strings.Replace(goodMessages, `"role":"user"`, `"role":"human"`, 1)}, 2, "messages[1].role", "unknown role"},
		{"empty content", []string{strings.Replace(goodMessages, `"content":"history"`, `"content":""`, 1)}, 1, "messages[1].content", "empty"},
		{"content not a string", []string{strings.Replace(goodMessages, `"content":"history"`, `"content":["history"]`, 1)}, 1, "messages[1].content", "not a string"},
		{"no assistant message", []string{goodMessages, goodMessages, `{"messages":[{"role":"user","content":"hi"}]}`}, 3, "messages", "no assistant message"},
		{"unknown message key", []string{strings.Replace(goodMessages, `"weight":1`, `"score":1`, 1)}, 1, "messages[2].score", "unknown message key"},
		{"unknown line key", []string{strings.Replace(goodMessages, `{"messages"`, `{"meta":1,"messages"`, 1)}, 1, "meta", "unknown key"},
		{"weight on user", []string{strings.Replace(goodMessages, `"content":"history"`, `"content":"history","weight":1`, 1)}, 1, "messages[1].weight", "assistant messages only"},
		{"weight not 0 or 1", []string{strings.Replace(goodMessages, `"weight":1`, `"weight":0.5`, 1)}, 1, "messages[2].weight", "0 or 1"},
		{"not json", []string{goodMessages, `{"messages": [`}, 2, "", "not a JSON object"},
		{"blank line", []string{goodMessages, "", goodMessages}, 2, "", "blank line"},
		{"row bad role", []string{goodRow, strings.Replace(goodRow, `"role":"user"`, `"role":"tool"`, 1)}, 2, "prompt[1].role", "unknown role"},
		{"row completion by user", []string{strings.Replace(goodRow, `"role":"assistant"`, `"role":"user"`, 1)}, 1, "completion[0].role", "unknown role"},
		{"row empty completion", []string{strings.Replace(goodRow, `"content":"summary"`, `"content":"  "`, 1)}, 1, "completion[0].content", "empty"},
		{"row missing metadata", []string{strings.Replace(goodRow, `"task_id":"t1",`, ``, 1)}, 1, "task_id", "missing"},
		{"row unknown key", []string{strings.Replace(goodRow, `"split":"train"`, `"split":"train","extra":true`, 1)}, 1, "extra", "unknown key"},
		{"row bad kind", []string{strings.Replace(goodRow, `"kind":"history"`, `"kind":"summary"`, 1)}, 1, "kind", "not history"},
		{"row bad split", []string{strings.Replace(goodRow, `"split":"train"`, `"split":"test"`, 1)}, 1, "split", "not train"},
		{"row wrong type", []string{strings.Replace(goodRow, `"step":2`, `"step":"two"`, 1)}, 1, "", "wrong value type"},
		{"row duplicate id", []string{goodRow, goodRow}, 2, "id", "duplicate of row 1"},
		{"neither format", []string{`{"text":"hello"}`}, 1, "text", "unknown key"},
		{"null content without tool calls", []string{strings.Replace(toolCallMessages, `,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]`, ``, 1)}, 1, "messages[1].content", "only an assistant message with tool_calls"},
		{"tool call without a name", []string{strings.Replace(toolCallMessages, `"name":"search",`, ``, 1)}, 1, "messages[1].tool_calls[0].function", "name"},
		{"empty tool calls", []string{strings.Replace(toolCallMessages, `"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]`, `"tool_calls":[]`, 1)}, 1, "messages[1].tool_calls", "non-empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(tt.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			vs, err := ValidateFile(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				if v.Row == tt.row && v.Field == tt.field && strings.Contains(v.Message, tt.want) {
					if !strings.Contains(v.String(), "bad.jsonl") {
						t.Errorf("%q does not name the file", v.String())
					}
					return
				}
			}
			t.Errorf("violations %v: want row %d, field %q, %q", vs, tt.row, tt.field, tt.want)
		})
	}
}

func TestValidateGoodJSONL(t *testing.T) {
	for name, line := range map[string]string{"messages": goodMessages, "row": goodRow, "tool calls": toolCallMessages} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "good.jsonl")
			if err := os.WriteFile(path, []byte(line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			vs, err := ValidateFile(t.Context(), path)
			if err != nil || len(vs) != 0 {
				t.Errorf("ValidateFile = %v, %v; want no violations", vs, err)
			}
		})
	}
}

func TestValidateParquetViolations(t *testing.T) {
	t.Run("bad rows", func(t *testing.T) {
		// Written past the Writer's checks, as another tool might.
		rows := []Row{testRow(1, SplitTrain), testRow(2, SplitTrain), testRow(3, SplitTrain)}
		rows[1].Completion = nil
		rows[2].Prompt[0].Role = "robot"
		path := filepath.Join(t.TempDir(), "bad.parquet")
		writeParquet(t, path, rows, parquet.Compression(&parquet.Zstd))
		vs, err := ValidateFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"2 completion": false, "3 prompt[0].role": false}
		for _, v := range vs {
			key := strconv.Itoa(v.Row) + " " + v.Field
			if _, ok := want[key]; ok {
				want[key] = true
			}
		}
		for k, found := range want {
			if !found {
				t.Errorf("no violation for row/field %s in %v", k, vs)
			}
		}
	})
	t.Run("codec and encoding", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "snappy.parquet")
		writeParquet(t, path, []Row{testRow(1, SplitTrain)}, parquet.Compression(&parquet.Snappy))
		vs, err := ValidateFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) == 0 || !strings.Contains(vs[0].Message, "want ZSTD") || vs[0].Row != 0 {
			t.Errorf("violations %v, want the codec reported for the file", vs)
		}
	})
	t.Run("schema", func(t *testing.T) {
		type flat struct {
			ID     string `parquet:"id"`
			Prompt string `parquet:"prompt"`
		}
		path := filepath.Join(t.TempDir(), "flat.parquet")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[flat](f)
		if _, err := w.Write([]flat{{"a", "b"}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		vs, err := ValidateFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		var fields []string
		for _, v := range vs {
			fields = append(fields, v.Field)
		}
		if got := strings.Join(fields, ","); !strings.Contains(got, "prompt") || !strings.Contains(got, "completion") {
			t.Errorf("violations %v: want prompt's type and completion's absence reported", vs)
		}
	})
	t.Run("not parquet", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "junk.parquet")
		if err := os.WriteFile(path, []byte("not parquet at all"), 0o644); err != nil {
			t.Fatal(err)
		}
		vs, err := ValidateFile(t.Context(), path)
		if err != nil || len(vs) != 1 || !strings.Contains(vs[0].Message, "not a readable Parquet file") {
			t.Errorf("ValidateFile = %v, %v", vs, err)
		}
	})
}

func TestValidateRejectsOtherFiles(t *testing.T) {
	if _, err := ValidateFile(t.Context(), "README.md"); err == nil {
		t.Error("want an error for a .md file")
	}
}

func writeParquet(t *testing.T, path string, rows []Row, opts ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := parquet.NewGenericWriter[Row](f, append(opts, parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain))...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
