package guideline

import (
	"cmp"
	"fmt"
	"slices"
)

// Eviction records a bullet evicted to keep the playbook within its token
// budget, with the figures that ranked it.
type Eviction struct {
	Bullet  string `json:"bullet"`
	Net     int    `json:"harmful_minus_helpful"`
	Changed int    `json:"changed"`
	Round   int    `json:"round"`
	Tokens  int    `json:"tokens_before"` // the playbook's tokens before it went
}

// evictOrder ranks bullets for eviction: the most harmful net of helpful
// first, then the stalest (changed longest ago), then the oldest, then by
// id number, so the order is total.
func evictOrder(a, b Bullet) int {
	if c := cmp.Compare(b.Harmful-b.Helpful, a.Harmful-a.Helpful); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Changed, b.Changed); c != 0 {
		return c
	}
	return olderFirst(a, b)
}

// Tokens counts the playbook's bullets block (what the playbook adds to
// its frame) with count, the project's tokenizer.
func (pb *Playbook) Tokens(count func(string) int) int { return count(pb.Block()) }

// Budget evicts bullets in evictOrder until the block's tokens are at most
// max, and returns the evictions. A max below the empty block's tokens is
// an error: no eviction could meet it.
func (pb *Playbook) Budget(max int, count func(string) int) ([]Eviction, error) {
	empty := (&Playbook{}).Tokens(count)
	if max < empty {
		return nil, fmt.Errorf("playbook token budget %d is below the %d tokens of an empty playbook", max, empty)
	}
	var out []Eviction
	for {
		n := pb.Tokens(count)
		if n <= max {
			return out, nil
		}
		victim := slices.MinFunc(pb.Bullets, evictOrder)
		out = append(out, Eviction{Bullet: victim.ID, Net: victim.Harmful - victim.Helpful, Changed: victim.Changed, Round: victim.Round, Tokens: n})
		pb.Bullets = slices.DeleteFunc(pb.Bullets, func(b Bullet) bool { return b.ID == victim.ID })
	}
}
