package distill

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The data files are most of what an export writes, so rows are encoded by
// hand rather than through reflection: the output is byte for byte what
// encoding/json produces with SetEscapeHTML(false) (a test holds it to that),
// at a fraction of the cost.

// appendRowJSON appends r as one line of SPLIT.jsonl.
func appendRowJSON(b []byte, r *Row) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, r.ID)
	b = append(b, `,"prompt":`...)
	b = appendMessagesJSON(b, r.Prompt, false)
	b = append(b, `,"completion":`...)
	b = appendMessagesJSON(b, r.Completion, false)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, r.Kind)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, r.Source)
	b = append(b, `,"task_id":`...)
	b = appendJSONString(b, r.TaskID)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, r.Step, 10)
	b = append(b, `,"guideline_id":`...)
	b = appendJSONString(b, r.GuidelineID)
	b = append(b, `,"teacher_model":`...)
	b = appendJSONString(b, r.TeacherModel)
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, r.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, r.OutputTokens, 10)
	b = append(b, `,"compression_ratio":`...)
	b = appendJSONFloat(b, r.CompressionRatio)
	b = append(b, `,"split":`...)
	b = appendJSONString(b, r.Split)
	return append(b, "}\n"...)
}

// appendMessagesLineJSON appends r as one line of SPLIT.messages.jsonl (the
// JSON form of messagesRow).
func appendMessagesLineJSON(b []byte, r *Row) []byte {
	b = append(b, `{"messages":[`...)
	b = appendMessageList(b, r.Prompt, false)
	if len(r.Prompt) > 0 && len(r.Completion) > 0 {
		b = append(b, ',')
	}
	b = appendMessageList(b, r.Completion, true)
	return append(b, "]}\n"...)
}

func appendMessagesJSON(b []byte, ms []Message, weighted bool) []byte {
	if ms == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	b = appendMessageList(b, ms, weighted)
	return append(b, ']')
}

func appendMessageList(b []byte, ms []Message, weighted bool) []byte {
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendJSONString(b, m.Role)
		b = append(b, `,"content":`...)
		b = appendJSONString(b, m.Content)
		if weighted {
			b = append(b, `,"weight":1`...)
		}
		b = append(b, '}')
	}
	return b
}

// jsonSafe marks the bytes that need no escaping; the others are control
// characters, '"', '\\' and the first byte of U+2028/U+2029 (0xE2), which is
// checked further.
var jsonSafe = func() (t [256]bool) {
	for i := range t {
		t[i] = i >= 0x20 && i != '"' && i != '\\' && i != 0xE2
	}
	return t
}()

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c == 0xE2 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat formats like encoding/json: shortest representation,
// exponent form only for very small or large magnitudes.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
