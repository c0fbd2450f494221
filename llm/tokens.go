package llm

import (
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// DefaultEncoding is the BPE used when a role names none.
const DefaultEncoding = "o200k_base"

// loaderOnce installs the offline BPE loader before any GetEncoding, so no
// token count ever reaches the network.
var loaderOnce sync.Once

// Tokenizer counts tokens. It memoizes counts per text, so re-counting a
// growing conversation costs only its new messages.
type Tokenizer struct {
	// encode counts the tokens of a text: natively for o200k_base and
	// cl100k_base (over ten times faster than tiktoken-go), with
	// tiktoken-go for the others. The native rank tables are parsed on the
	// first count (load): that takes over 100 ms, and a process that only
	// reads finished work, like a re-run of a finished run, counts nothing.
	encode func(string) int
	load   sync.Once
	native string
	seed   maphash.Seed
	mu     sync.RWMutex
	memo   map[uint64]int
}

var (
	tokMu      sync.Mutex
	tokenizers = map[string]*Tokenizer{}
)

// NewTokenizer returns the shared tokenizer for encoding (o200k_base when
// empty). Encodings are loaded once per process.
func NewTokenizer(encoding string) (*Tokenizer, error) {
	if encoding == "" {
		encoding = DefaultEncoding
	}
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	tokMu.Lock()
	defer tokMu.Unlock()
	if t, ok := tokenizers[encoding]; ok {
		return t, nil
	}
	t := &Tokenizer{seed: maphash.MakeSeed(), memo: map[uint64]int{}}
	if _, ok := bpeEncodings[encoding]; ok {
		t.native = encoding
	} else {
		enc, err := tiktoken.GetEncoding(encoding)
		if err != nil {
			return nil, fmt.Errorf("load token encoding %q: %w", encoding, err)
		}
		t.encode = func(s string) int { return len(enc.EncodeOrdinary(s)) }
	}
	tokenizers[encoding] = t
	return t, nil
}

// loadNative parses the rank table of a native encoding. The tables are
// embedded in the binary (tiktoken-go-loader), so they fail to load only
// when the binary is corrupt.
func (t *Tokenizer) loadNative() {
	if t.native == "" {
		return
	}
	b, err := newBPE(t.native)
	if err != nil {
		panic(fmt.Sprintf("load embedded token encoding %q: %v", t.native, err))
	}
	t.encode = b.count
}

// memoLimit bounds the memo; past it the memo is dropped and refilled, which
// keeps memory flat on long jobs at the price of some recounting.
const memoLimit = 1 << 18

// Count returns the number of tokens of s. Special-token text is counted as
// ordinary text (Encode with allowed specials panics on it).
func (t *Tokenizer) Count(s string) int {
	if s == "" {
		return 0
	}
	// Short strings are memoized too: role names recur on every message.
	h := maphash.String(t.seed, s)
	t.mu.RLock()
	n, ok := t.memo[h]
	t.mu.RUnlock()
	if ok {
		return n
	}
	t.load.Do(t.loadNative)
	n = t.encode(s)
	t.mu.Lock()
	if len(t.memo) >= memoLimit {
		t.memo = map[uint64]int{}
	}
	t.memo[h] = n
	t.mu.Unlock()
	return n
}

// perMessageOverhead approximates the chat format's framing tokens, as
// OpenAI's cookbook counts them.
const perMessageOverhead = 3

// CountMessage counts one message with its framing and tool calls.
func (t *Tokenizer) CountMessage(m Message) int {
	n := perMessageOverhead + t.Count(m.Role) + t.Count(m.Content)
	for _, c := range m.ToolCalls {
		n += t.Count(c.Name) + t.Count(c.Arguments)
	}
	return n
}

// CountMessages counts a conversation, including the reply primer.
func (t *Tokenizer) CountMessages(ms []Message) int {
	n := 3
	for _, m := range ms {
		n += t.CountMessage(m)
	}
	return n
}
