package llm

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// bpeEncodings are the encodings counted natively: a hand-written
// pre-tokenizer and byte-pair merging over the ranks tiktoken-go loads. The
// URL names the rank file in the offline loader, as tiktoken-go names it.
var bpeEncodings = map[string]struct {
	url   string
	split splitFunc
}{
	"o200k_base":  {"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken", (*scanner).o200k},
	"cl100k_base": {"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken", (*scanner).cl100k},
}

const (
	// pieceCacheSlots bounds the piece cache; a slot holds the last piece
	// hashed to it.
	pieceCacheSlots = 1 << 15
	// maxCachedPiece keeps rare long pieces (runs of symbols, long words in
	// scripts without spaces) out of the cache.
	maxCachedPiece = 128
)

// bpe counts tokens as tiktoken's EncodeOrdinary does, without building
// the tokens. Pieces that are one token are found in the rank table; the
// token counts of the others are cached, since most recur.
type bpe struct {
	ranks map[string]int
	split splitFunc
	bmp   *[0x10000]uint8
	seed  maphash.Seed
	cache [pieceCacheSlots]atomic.Pointer[cachedPiece]
}

type cachedPiece struct {
	piece string
	n     int
}

// newBPE loads the ranks of encoding, or returns nil when encoding has no
// native pre-tokenizer.
func newBPE(encoding string) (*bpe, error) {
	e, ok := bpeEncodings[encoding]
	if !ok {
		return nil, nil
	}
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(e.url)
	if err != nil {
		return nil, fmt.Errorf("load ranks: %w", err)
	}
	return &bpe{ranks: ranks, split: e.split, bmp: bmpClasses(), seed: maphash.MakeSeed()}, nil
}

// count returns the number of tokens of s.
func (b *bpe) count(s string) int {
	if !utf8.ValidString(s) {
		// tiktoken-go splits []rune(s), where each invalid byte is U+FFFD.
		s = string([]rune(s))
	}
	sc := scanner{s: s, bmp: b.bmp}
	n := 0
	for p := 0; p < len(s); {
		e := b.split(&sc, p)
		n += b.pieceTokens(s[p:e])
		p = e
	}
	return n
}

func (b *bpe) pieceTokens(piece string) int {
	if _, ok := b.ranks[piece]; ok {
		return 1
	}
	if len(piece) > maxCachedPiece {
		return b.merge(piece)
	}
	slot := &b.cache[maphash.String(b.seed, piece)&(pieceCacheSlots-1)]
	if c := slot.Load(); c != nil && c.piece == piece {
		return c.n
	}
	n := b.merge(piece)
	slot.Store(&cachedPiece{piece: strings.Clone(piece), n: n})
	return n
}

// bpePart is a part of a piece being merged: where it starts, and the rank
// of the merge of it with the next part (noRank when there is none).
type bpePart struct {
	start, rank int
}

const noRank = math.MaxInt

// merge returns the number of tokens byte-pair merging makes of piece, as
// tiktoken's _byte_pair_merge: repeatedly merge the adjacent pair of lowest
// rank, the leftmost among equals.
func (b *bpe) merge(piece string) int {
	var buf [maxCachedPiece + 1]bpePart
	var parts []bpePart
	if len(piece) < len(buf) {
		parts = buf[:len(piece)+1]
	} else {
		parts = make([]bpePart, len(piece)+1)
	}
	minRank, minAt := noRank, 0
	for i := range parts {
		parts[i] = bpePart{start: i, rank: noRank}
		if i+2 <= len(piece) {
			parts[i].rank = b.rank(piece[i : i+2])
			if parts[i].rank < minRank {
				minRank, minAt = parts[i].rank, i
			}
		}
	}
	// rankAfter is the rank of the merge of part i with the next part, once
	// parts i+1 and i+2 have merged.
	rankAfter := func(i int) int {
		if i+3 < len(parts) {
			return b.rank(piece[parts[i].start:parts[i+3].start])
		}
		return noRank
	}
	for minRank != noRank {
		i := minAt
		if i > 0 {
			parts[i-1].rank = rankAfter(i - 1)
		}
		parts[i].rank = rankAfter(i)
		parts = append(parts[:i+1], parts[i+2:]...)
		minRank = noRank
		for j, p := range parts[:len(parts)-1] {
			if p.rank < minRank {
				minRank, minAt = p.rank, j
			}
		}
	}
	return len(parts) - 1
}

func (b *bpe) rank(s string) int {
	if r, ok := b.ranks[s]; ok {
		return r
	}
	return noRank
}
