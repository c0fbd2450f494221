package llm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// nativeEncodings are the encodings bpe counts itself, with tiktoken-go's
// pattern for each, copied from its encoding.go; the pattern only serves
// to show the first differing piece when counts differ.
var nativeEncodings = []struct{ name, pattern string }{
	{"o200k_base", strings.Join([]string{
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`\p{N}{1,3}`,
		` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
		`\s*[\r\n]+`,
		`\s+(?!\S)`,
		`\s+`,
	}, "|")},
	{"cl100k_base", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
}

// trickyTexts probe the corners of the patterns: case-insensitive
// contractions, digit runs, the give-back of \s+(?!\S) and \s*[\r\n]+,
// marks, scripts without case, and invalid UTF-8.
var trickyTexts = []struct{ name, text string }{
	{"empty", ""},
	{"one space", " "},
	{"contractions lower", "it's don't we're they've I'm you'll he'd"},
	{"contractions upper", "IT'S DON'T WE'RE THEY'VE I'M YOU'LL HE'D"},
	{"contractions mixed", "It'S dOn'T wE'rE tHeY'Ve i'M yOu'Ll hE'D 'LL 're 'rx 'lx 'v"},
	{"contraction alone", "'s 't 're 've 'm 'll 'd ''s '"},
	{"contraction after number", "1990'S 7's 3'LL"},
	{"contraction after mark", "e\u0301's A\u0301'S \u0301'd"},
	{"contraction lookalikes", "K'\u212A \u0130'\u0130 x'\u017F x'\u212Aelvin"},
	{"digits 1-7", "1 12 123 1234 12345 123456 1234567"},
	{"digits mixed", "v1.2.3 3.14159 1,000,000 x86_64 0x1F 12ab34"},
	{"other numbers", "\u0663\u0664\u0665\u0666 \u2167\u2168 \u00bd\u00be \uff11\uff12\uff13\uff14"},
	{"crlf", "line one\r\nline two\r\n\r\nline three\r\n"},
	{"trailing spaces before newline", "word   \nnext \t \n  \n\nend  "},
	{"spaces before word", "a  b   c    d\t\te \t f"},
	{"tabs", "\tindented\n\t\tmore\n\t \tmixed"},
	{"only whitespace", " \t\r\n \u00a0\u2003\u3000"},
	{"newline runs", "\n\n\n  \n \r\r\n\n x"},
	{"unicode spaces", "a\u00a0b\u2003c\u3000d\u2028e\u2029f\u0085g\u1680h"},
	{"emoji", "I 👍 this 🎉🎉! 👨‍👩‍👧 family 🇫🇷 flag"},
	{"cjk", "这是一个测试。日本語のテキストです、カタカナ。한국어 텍스트입니다."},
	{"combining marks", "e\u0301 a\u0300\u0301 \u0301alone n\u0303o Zalgo: Z\u0351\u034a\u035ba\u036f\u0310l"},
	{"arabic", "مرحبا بالعالم، هذا اختبار. ١٢٣٤"},
	{"hebrew devanagari thai", "שלום עולם नमस्ते दुनिया สวัสดีชาวโลก"},
	{"mixed scripts", "Helloмир世界ᾈΣσς Ǆǅǆ ǈ ʰʱ ꟸ"},
	{"titlecase and modifiers", "ǅemal ᾈδης ʰello ˈstress ǅ1"},
	{"punctuation then newline", "end.\nnext!!\n\n?!\r\n...\n"},
	{"punctuation then slash", "a/b //x ./../path/ http://example.com/a/b?c=d&e=f ;;//\n/"},
	{"space punctuation", " . ,, !? -- ->\n (x) [y] {z}"},
	{"code", "func main() {\n\tfmt.Println(\"hi\") // comment\n\treturn nil\n}\n"},
	{"json", `{"key": [1, 2.5, -3e10], "s": "a\"b", "n": null}`},
	{"markdown", "# Title\n\n- item **bold** _it_\n\n```go\nx := 1\n```\n| a | b |\n|---|---|\n"},
	{"invalid utf8", "ok \xff\xfe bad \xc3 cut \xe2\x82 half"},
	{"lone surrogates", "\xed\xa0\x80 high \xed\xb0\x80 low"},
	{"replacement char", "\ufffd\ufffd x\ufffd"},
	{"control chars", "a\x00b\x01c\x7f\x1b[31mred\x1b[0m"},
	{"long word", strings.Repeat("abcdefghij", 30)},
	{"long symbol run", strings.Repeat("=-", 200) + "\n"},
	{"long spaces", strings.Repeat(" ", 300) + "x" + strings.Repeat("\t", 200)},
	{"long digits", strings.Repeat("9876543210", 20)},
	{"long cjk", strings.Repeat("漢字仮名交じり文", 40)},
}

var (
	refMu   sync.Mutex
	refEncs = map[string]*tiktoken.Tiktoken{}
)

// reference returns tiktoken-go's encoding, the truth the native counts
// must match.
func reference(tb testing.TB, name string) *tiktoken.Tiktoken {
	tb.Helper()
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	refMu.Lock()
	defer refMu.Unlock()
	if e, ok := refEncs[name]; ok {
		return e
	}
	e, err := tiktoken.GetEncoding(name)
	if err != nil {
		tb.Fatal(err)
	}
	refEncs[name] = e
	return e
}

func nativeBPE(tb testing.TB, name string) *bpe {
	tb.Helper()
	b, err := sharedBPE(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var sharedBPE = func() func(string) (*bpe, error) {
	var mu sync.Mutex
	loaded := map[string]*bpe{}
	return func(name string) (*bpe, error) {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := loaded[name]; ok {
			return b, nil
		}
		b, err := newBPE(name)
		if err != nil {
			return nil, err
		}
		loaded[name] = b
		return b, nil
	}
}()

// checkCount fails when b's count of s differs from tiktoken-go's, naming
// the first piece the two pre-tokenizers split differently.
func checkCount(t *testing.T, b *bpe, ref *tiktoken.Tiktoken, pattern, label, s string) {
	t.Helper()
	want := len(ref.EncodeOrdinary(s))
	// The second count reads the piece cache the first one filled.
	for range 2 {
		if got := b.count(s); got != want {
			t.Fatalf("%s: %d tokens, tiktoken-go %d; %s", label, got, want, firstSplitDiff(b, pattern, s))
		}
	}
}

func firstSplitDiff(b *bpe, pattern, s string) string {
	re := regexp2.MustCompile(pattern, regexp2.None)
	runes := []rune(s)
	valid := string(runes)
	var want []string
	for m, _ := re.FindRunesMatch(runes); m != nil; m, _ = re.FindNextMatch(m) {
		want = append(want, string(runes[m.Index:m.Index+m.Length]))
	}
	sc := scanner{s: valid, bmp: b.bmp}
	var got []string
	for p := 0; p < len(valid); {
		e := b.split(&sc, p)
		got = append(got, valid[p:e])
		p = e
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("piece %d is %q, regexp2 %q", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d pieces, regexp2 %d", len(got), len(want))
	}
	return "same pieces: the byte-pair merge differs"
}

// corpusTexts are every line of the QA corpus as stored, and every passage
// it holds.
func corpusTexts(t testing.TB) (lines, passages []string) {
	t.Helper()
	f, err := os.Open("../datasets/qa/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var doc struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("corpus.jsonl:%d: %v", n, err)
		}
		lines = append(lines, sc.Text())
		passages = append(passages, doc.Title+"\n\n"+doc.Text)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, passages
}

func repoFiles(t testing.TB, glob string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no files match %s (%v)", glob, err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

func TestCountMatchesTiktoken(t *testing.T) {
	lines, passages := corpusTexts(t)
	files := repoFiles(t, "../templates/*.tmpl")
	for p, s := range repoFiles(t, "../docs/*.md") {
		files[p] = s
	}
	for _, enc := range nativeEncodings {
		t.Run(enc.name, func(t *testing.T) {
			b, ref := nativeBPE(t, enc.name), reference(t, enc.name)
			t.Run("tricky", func(t *testing.T) {
				for _, tt := range trickyTexts {
					t.Run(tt.name, func(t *testing.T) {
						checkCount(t, b, ref, enc.pattern, "text", tt.text)
						// Each text also inside others, to shift it against
						// what precedes and follows it.
						checkCount(t, b, ref, enc.pattern, "wrapped", "x"+tt.text+"1 "+tt.text+"\n")
					})
				}
			})
			t.Run("corpus lines", func(t *testing.T) {
				for i, s := range sample(lines) {
					checkCount(t, b, ref, enc.pattern, fmt.Sprintf("corpus.jsonl:%d", i+1), s)
				}
			})
			t.Run("corpus passages", func(t *testing.T) {
				for i, s := range sample(passages) {
					checkCount(t, b, ref, enc.pattern, fmt.Sprintf("passage of corpus.jsonl:%d", i+1), s)
				}
			})
			t.Run("repo files", func(t *testing.T) {
				for p, s := range files {
					checkCount(t, b, ref, enc.pattern, p, s)
				}
			})
		})
	}
}

// sample keeps every text, or every raceStride-th one under the race
// detector, which slows tiktoken-go's regexp about tenfold; the fuzz test and
// plain runs cover the rest.
func sample(texts []string) []string {
	if raceStride == 1 {
		return texts
	}
	var out []string
	for i := 0; i < len(texts); i += raceStride {
		out = append(out, texts[i])
	}
	return out
}

func TestTokenizerEncodings(t *testing.T) {
	const text = "Tokenizers can't all split the same way: 12345 words\r\n  and   spaces.\n"
	for _, name := range []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"} {
		t.Run(name, func(t *testing.T) {
			tok, err := NewTokenizer(name)
			if err != nil {
				t.Fatal(err)
			}
			want := len(reference(t, name).EncodeOrdinary(text))
			for range 2 { // the second count comes from the memo
				if got := tok.Count(text); got != want {
					t.Fatalf("Count = %d, tiktoken-go %d", got, want)
				}
			}
		})
	}
	if _, err := NewTokenizer("no_such_base"); err == nil || !strings.Contains(err.Error(), "no_such_base") {
		t.Errorf("unknown encoding: err = %v", err)
	}
}

func FuzzCount(f *testing.F) {
	for _, tt := range trickyTexts {
		f.Add(tt.text)
	}
	encs := make([]struct {
		b       *bpe
		ref     *tiktoken.Tiktoken
		pattern string
	}, len(nativeEncodings))
	for i, e := range nativeEncodings {
		encs[i].b, encs[i].ref, encs[i].pattern = nativeBPE(f, e.name), reference(f, e.name), e.pattern
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, e := range encs {
			checkCount(t, e.b, e.ref, e.pattern, nativeEncodings[i].name, s)
		}
	})
}

// BenchmarkCount compares tiktoken-go with the native count on the corpus
// passages, without the Tokenizer's memo. "native-cold" starts each pass
// with an empty piece cache.
func BenchmarkCount(b *testing.B) {
	_, passages := corpusTexts(b)
	for _, enc := range nativeEncodings {
		ref, native := reference(b, enc.name), nativeBPE(b, enc.name)
		tokens := 0
		for _, s := range passages {
			tokens += len(ref.EncodeOrdinary(s))
		}
		counters := []struct {
			name  string
			count func(string) int
		}{
			{"tiktoken-go", func(s string) int { return len(ref.EncodeOrdinary(s)) }},
			{"native", native.count},
		}
		for _, c := range counters {
			b.Run(enc.name+"/"+c.name, func(b *testing.B) {
				start := time.Now()
				for b.Loop() {
					for _, s := range passages {
						c.count(s)
					}
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*tokens), "ns/token")
			})
		}
		b.Run(enc.name+"/native-cold", func(b *testing.B) {
			var elapsed time.Duration
			for b.Loop() {
				cold := &bpe{ranks: native.ranks, split: native.split, bmp: native.bmp, seed: native.seed}
				start := time.Now()
				for _, s := range passages {
					cold.count(s)
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*tokens), "ns/token")
		})
	}
}
