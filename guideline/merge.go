package guideline

import (
	"errors"
	"fmt"
)

// MergeReport says how two playbooks became one.
type MergeReport struct {
	// Matched are the ids both playbooks hold for the same rule: counters
	// summed.
	Matched []string `json:"matched,omitempty"`
	// Renumbered are b's bullets whose id a uses for another rule (both
	// added it on their own): b's gets a fresh id.
	Renumbered []Renamed  `json:"renumbered,omitempty"`
	Deduped    []Merged   `json:"deduped,omitempty"`
	Evicted    []Eviction `json:"evicted,omitempty"`
}

// Renamed is a bullet given a fresh id.
type Renamed struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// MergeOptions are the rules a merge applies, the same as a round's.
type MergeOptions struct {
	Round     int
	Vectors   Vectorizer
	Threshold float64
	MaxTokens int // 0: no budget
	Count     func(string) int
}

// MergePlaybooks merges playbooks learned in parallel from the same frame:
// bullets matched by id (when their contents are alike) and then by
// similarity within a section have their counters summed, the older id
// kept; the result is budgeted and validated like any round's playbook.
func MergePlaybooks(a, b *Playbook, o MergeOptions) (*Playbook, MergeReport, error) {
	var rep MergeReport
	if a.Kind != b.Kind {
		return nil, rep, fmt.Errorf("merge playbooks: a is a %s playbook, b a %s one", a.Kind, b.Kind)
	}
	if a.Frame != b.Frame {
		return nil, rep, errors.New("merge playbooks: they grew from different frames (starting guidelines); merge only playbooks of one run's lineage")
	}
	out := a.Clone()
	out.Next = max(a.Next, b.Next)
	for _, x := range b.Bullets {
		i := out.find(x.ID)
		if i < 0 {
			x.Evidence = union(nil, x.Evidence)
			out.Bullets = append(out.Bullets, x)
			continue
		}
		same, err := alike(o, out.Bullets[i].Content, x.Content)
		if err != nil {
			return nil, rep, err
		}
		if !same || out.Bullets[i].Section != x.Section {
			id := out.newID(x.Section)
			rep.Renumbered = append(rep.Renumbered, Renamed{From: x.ID, To: id})
			x.ID, x.Evidence = id, union(nil, x.Evidence)
			out.Bullets = append(out.Bullets, x)
			continue
		}
		rep.Matched = append(rep.Matched, x.ID)
		k := &out.Bullets[i]
		if better := x.Helpful - x.Harmful; better > k.Helpful-k.Harmful || (better == k.Helpful-k.Harmful && x.Changed > k.Changed) {
			k.Content = x.Content
		}
		absorb(k, x)
	}
	var err error
	if rep.Deduped, err = out.Dedup(o.Round, o.Vectors, o.Threshold); err != nil {
		return nil, rep, err
	}
	if o.MaxTokens > 0 {
		if rep.Evicted, err = out.Budget(o.MaxTokens, o.Count); err != nil {
			return nil, rep, err
		}
	}
	if _, err := out.Compile(); err != nil {
		return nil, rep, fmt.Errorf("merge playbooks: %w", err)
	}
	return out, rep, nil
}

// alike reports whether two contents of one id are the same rule: equal,
// or at least as similar as the dedup threshold.
func alike(o MergeOptions, x, y string) (bool, error) {
	if x == y {
		return true, nil
	}
	vs, err := o.Vectors([]string{x, y})
	if err != nil {
		return false, fmt.Errorf("merge playbooks: %w", err)
	}
	return Cosine(vs[0], vs[1]) >= o.Threshold-cosineSlack, nil
}
