package guideline

import (
	"fmt"
	"slices"
	"strings"
)

// Delta operations a curator proposes (ACE): deterministic code applies
// them, so a proposal can add, change or drop bullets but never rewrite
// the playbook.
const (
	OpAdd    = "ADD"
	OpUpdate = "UPDATE"
	OpRemove = "REMOVE"
	OpMerge  = "MERGE"
)

// Op is one proposed delta operation, as the curator's JSON spells it.
// ADD names a section and content; UPDATE an id and its new content;
// REMOVE an id; MERGE two or more ids and, optionally, the merged content.
type Op struct {
	Type     string   `json:"type"`
	Section  string   `json:"section,omitempty"`
	ID       string   `json:"id,omitempty"`
	IDs      []string `json:"ids,omitempty"`
	Content  string   `json:"content,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}

// Applied records what became of an operation: the bullet it wrote (ADD,
// UPDATE, MERGE) or removed, or why it was rejected.
type Applied struct {
	Op       Op     `json:"op"`
	Bullet   string `json:"bullet,omitempty"`
	Rejected string `json:"rejected,omitempty"`
}

// Apply applies ops in order in round, each checked on its own: an op that
// names an unknown id, carries empty, oversized or template content, or
// has an unknown type is rejected with the reason and changes nothing.
func (pb *Playbook) Apply(round int, ops []Op) []Applied {
	out := make([]Applied, 0, len(ops))
	for _, op := range ops {
		id, err := pb.apply(round, op)
		a := Applied{Op: op, Bullet: id}
		if err != nil {
			a.Bullet, a.Rejected = "", err.Error()
		}
		out = append(out, a)
	}
	return out
}

func (pb *Playbook) apply(round int, op Op) (string, error) {
	content := strings.TrimSpace(op.Content)
	switch op.Type {
	case OpAdd:
		if p := sectionProblem(op.Section); p != "" {
			return "", fmt.Errorf("%s", p)
		}
		if p := contentProblem(content); p != "" {
			return "", fmt.Errorf("%s", p)
		}
		if slices.ContainsFunc(pb.Bullets, func(b Bullet) bool { return b.Section == op.Section && b.Content == content }) {
			return "", fmt.Errorf("section %s already has this content", op.Section)
		}
		b := Bullet{ID: pb.newID(op.Section), Section: op.Section, Content: content, Round: round, Changed: round, Evidence: slices.Clone(op.Evidence)}
		pb.Bullets = append(pb.Bullets, b)
		return b.ID, nil
	case OpUpdate:
		i := pb.find(op.ID)
		if i < 0 {
			return "", fmt.Errorf("unknown bullet id %q", op.ID)
		}
		if p := contentProblem(content); p != "" {
			return "", fmt.Errorf("%s", p)
		}
		b := &pb.Bullets[i]
		b.Content, b.Changed, b.Evidence = content, round, slices.Clone(op.Evidence)
		return b.ID, nil
	case OpRemove:
		i := pb.find(op.ID)
		if i < 0 {
			return "", fmt.Errorf("unknown bullet id %q", op.ID)
		}
		pb.Bullets = slices.Delete(pb.Bullets, i, i+1)
		return op.ID, nil
	case OpMerge:
		return pb.mergeOp(round, op, content)
	}
	return "", fmt.Errorf("unknown operation type %q: want ADD, UPDATE, REMOVE or MERGE", op.Type)
}

// mergeOp merges the bullets op.IDs into the oldest of them, which keeps
// its id and section and gets the summed counters and op's content (its
// own when op has none).
func (pb *Playbook) mergeOp(round int, op Op, content string) (string, error) {
	if len(op.IDs) < 2 {
		return "", fmt.Errorf("merge needs two or more ids, got %d", len(op.IDs))
	}
	var idx []int
	for _, id := range op.IDs {
		i := pb.find(id)
		if i < 0 {
			return "", fmt.Errorf("unknown bullet id %q", id)
		}
		if slices.Contains(idx, i) {
			return "", fmt.Errorf("bullet id %q named twice", id)
		}
		idx = append(idx, i)
	}
	if content != "" {
		if p := contentProblem(content); p != "" {
			return "", fmt.Errorf("%s", p)
		}
	}
	keep := slices.MinFunc(idx, func(a, b int) int { return olderFirst(pb.Bullets[a], pb.Bullets[b]) })
	for _, i := range idx {
		if i != keep {
			absorb(&pb.Bullets[keep], pb.Bullets[i])
		}
	}
	k := &pb.Bullets[keep]
	if content != "" {
		k.Content = content
	}
	k.Changed = round
	k.Evidence = union(k.Evidence, op.Evidence)
	id := k.ID
	pb.Bullets = slices.DeleteFunc(pb.Bullets, func(b Bullet) bool { return b.ID != id && slices.Contains(op.IDs, b.ID) })
	return id, nil
}

// olderFirst orders bullets by the round that created them, then by id
// number: the older one keeps its id when bullets merge.
func olderFirst(a, b Bullet) int {
	if a.Round != b.Round {
		return a.Round - b.Round
	}
	if na, nb := number(a.ID), number(b.ID); na != nb {
		return na - nb
	}
	return strings.Compare(a.ID, b.ID)
}

// absorb adds other's counters and evidence to b.
func absorb(b *Bullet, other Bullet) {
	b.Helpful += other.Helpful
	b.Harmful += other.Harmful
	b.Changed = max(b.Changed, other.Changed)
	b.Evidence = union(b.Evidence, other.Evidence)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// Tags a reflector gives the bullets a compressor used.
const (
	TagHelpful = "helpful"
	TagHarmful = "harmful"
	TagNeutral = "neutral"
)

// Tag is the reflector's verdict on one bullet, with its evidence.
type Tag struct {
	ID       string   `json:"id"`
	Tag      string   `json:"tag"`
	Evidence []string `json:"evidence,omitempty"`
}

// ApplyTags counts the tags in round. A tag naming an unknown bullet or an
// unknown verdict is rejected with the reason; neutral changes nothing.
func (pb *Playbook) ApplyTags(round int, tags []Tag) []string {
	var rejected []string
	for _, t := range tags {
		i := pb.find(t.ID)
		if i < 0 {
			rejected = append(rejected, fmt.Sprintf("tag %s: unknown bullet id", t.ID))
			continue
		}
		b := &pb.Bullets[i]
		switch t.Tag {
		case TagHelpful:
			b.Helpful++
		case TagHarmful:
			b.Harmful++
		case TagNeutral:
			continue
		default:
			rejected = append(rejected, fmt.Sprintf("tag %s: unknown verdict %q: want helpful, harmful or neutral", t.ID, t.Tag))
			continue
		}
		// The evidence is that of the last change.
		b.Changed, b.Evidence = round, slices.Clone(t.Evidence)
	}
	return rejected
}
