package guideline

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteBullets writes a table of pb's bullets: id, section, counters,
// rounds, the number of feedback records behind its last change, content.
func WriteBullets(w io.Writer, pb *Playbook) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BULLET\tSECTION\tHELPFUL\tHARMFUL\tROUND\tCHANGED\tEVIDENCE\tCONTENT")
	for _, b := range pb.Bullets {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", b.ID, b.Section, b.Helpful, b.Harmful, b.Round, b.Changed, len(b.Evidence), b.Content)
	}
	return tw.Flush()
}

// DiffBullets says, bullet by bullet, how b differs from a: "+" added, "-"
// removed, "~" content or counters changed ("" when none did).
func DiffBullets(a, b *Playbook) string {
	var out strings.Builder
	for _, x := range a.Bullets {
		y, ok := b.Get(x.ID)
		switch {
		case !ok:
			fmt.Fprintf(&out, "- %s\n", BulletText(x))
		case x.Content != y.Content:
			fmt.Fprintf(&out, "~ %s\n  was %s\n", BulletText(y), BulletText(x))
		case x.Helpful != y.Helpful || x.Harmful != y.Harmful:
			fmt.Fprintf(&out, "~ [%s] helpful %d -> %d, harmful %d -> %d\n", x.ID, x.Helpful, y.Helpful, x.Harmful, y.Harmful)
		}
	}
	for _, y := range b.Bullets {
		if _, ok := a.Get(y.ID); !ok {
			fmt.Fprintf(&out, "+ %s\n", BulletText(y))
		}
	}
	return out.String()
}

// MergeStored merges the stored playbooks a and b (ids or prefixes) and
// stores the result with both as parents.
func (r *Registry) MergeStored(a, b string, o MergeOptions) (Record, *Playbook, MergeReport, error) {
	ra, pa, err := r.Playbook(a)
	if err != nil {
		return Record{}, nil, MergeReport{}, err
	}
	rb, pbb, err := r.Playbook(b)
	if err != nil {
		return Record{}, nil, MergeReport{}, err
	}
	o.Round = max(ra.Round, rb.Round) + 1
	m, rep, err := MergePlaybooks(pa, pbb, o)
	if err != nil {
		return Record{}, nil, rep, err
	}
	rec, _, err := r.PutPlaybook(Record{Parent: ra.ID, Parents: []string{ra.ID, rb.ID}, Round: o.Round, Step: StepMerge, Source: "merge"}, m)
	return rec, m, rep, err
}
