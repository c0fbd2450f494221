package guideline

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/templates"
)

// A playbook (ACE) is a guideline whose rules are itemized bullets with
// stable ids, sections and helpful/harmful counters, grown by delta
// operations that this package applies: no model rewrites it. It renders
// to an ordinary guideline template, its frame (the guideline it started
// from) followed by the bullets in ACE's layout, so serve, every compressor
// and the registry treat it like any other guideline; the structured
// bullets are stored beside it (<id>.playbook.json).

// Bullet is one playbook item.
type Bullet struct {
	ID      string `json:"id"` // section slug and number: "keep-00001"
	Section string `json:"section"`
	Content string `json:"content"`
	Helpful int    `json:"helpful"`
	Harmful int    `json:"harmful"`
	// Round created it, Changed last changed its content or counters.
	Round   int `json:"round"`
	Changed int `json:"changed"`
	// Evidence are the feedback ids that created or last changed it.
	Evidence []string `json:"evidence,omitempty"`
}

// Playbook is a frame and its bullets, in section then insertion order.
type Playbook struct {
	Kind Kind `json:"kind"`
	// Frame is the guideline source the bullets are appended to.
	Frame   string   `json:"frame"`
	Bullets []Bullet `json:"bullets"`
	// Next numbers the next bullet added (ids are never reused).
	Next int `json:"next_id"`
}

// Limits bound what an operation may write.
const (
	// MaxBulletChars bounds one bullet's content: a rule, not an essay.
	MaxBulletChars = 400
	// maxSectionLen bounds a section slug.
	maxSectionLen = 24
)

var sectionSlugRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// NewPlaybook starts an empty playbook on frame, a valid guideline of kind.
func NewPlaybook(kind Kind, frame string) (*Playbook, error) {
	if strings.Contains(frame, templates.PlaybookBegin) {
		return nil, fmt.Errorf("playbook frame holds a %s line: it is a playbook already (read it with ParsePlaybook)", templates.PlaybookBegin)
	}
	if _, rep := Validate(kind, frame); !rep.OK {
		return nil, fmt.Errorf("playbook frame: %s", strings.Join(rep.Problems, "; "))
	}
	return &Playbook{Kind: kind, Frame: strings.TrimRight(frame, "\n") + "\n", Next: 1}, nil
}

// Clone returns a deep copy, so a rejected batch leaves the original.
func (pb *Playbook) Clone() *Playbook {
	c := *pb
	c.Bullets = make([]Bullet, len(pb.Bullets))
	for i, b := range pb.Bullets {
		b.Evidence = slices.Clone(b.Evidence)
		c.Bullets[i] = b
	}
	return &c
}

// find returns the index of the bullet id, -1 when there is none.
func (pb *Playbook) find(id string) int {
	return slices.IndexFunc(pb.Bullets, func(b Bullet) bool { return b.ID == id })
}

// Get returns the bullet id.
func (pb *Playbook) Get(id string) (Bullet, bool) {
	if i := pb.find(id); i >= 0 {
		return pb.Bullets[i], true
	}
	return Bullet{}, false
}

// sections returns the section slugs in order of first appearance.
func (pb *Playbook) sections() []string {
	var out []string
	for _, b := range pb.Bullets {
		if !slices.Contains(out, b.Section) {
			out = append(out, b.Section)
		}
	}
	return out
}

// Block renders the bullets in ACE's playbook layout, between the
// PlaybookBegin and PlaybookEnd lines.
func (pb *Playbook) Block() string {
	var b strings.Builder
	b.WriteString(templates.PlaybookBegin + "\n")
	for _, sec := range pb.sections() {
		fmt.Fprintf(&b, "## %s\n", sec)
		for _, x := range pb.Bullets {
			if x.Section == sec {
				b.WriteString(BulletText(x) + "\n")
			}
		}
	}
	b.WriteString(templates.PlaybookEnd + "\n")
	return b.String()
}

// BulletText is one bullet's line: "[id] helpful=X harmful=Y :: content".
func BulletText(x Bullet) string {
	return fmt.Sprintf("[%s] helpful=%d harmful=%d%s%s", x.ID, x.Helpful, x.Harmful, templates.BulletSep, x.Content)
}

// Source is the playbook as a guideline source: the frame, then the block.
func (pb *Playbook) Source() string {
	return pb.Frame + "\n" + pb.Block()
}

// Compile validates the rendered playbook exactly as every guideline is
// validated; a playbook that fails is an error naming the problems.
func (pb *Playbook) Compile() (*Template, error) {
	t, rep := Validate(pb.Kind, pb.Source())
	if !rep.OK {
		return nil, fmt.Errorf("playbook renders an invalid guideline: %s", strings.Join(rep.Problems, "; "))
	}
	return t, nil
}

// contentProblem says why content cannot be a bullet's, "" when it can.
// Content is the curator's, untrusted: template code in it would run.
func contentProblem(content string) string {
	switch c := strings.TrimSpace(content); {
	case c == "":
		return "empty content"
	case len(c) > MaxBulletChars:
		return fmt.Sprintf("content is %d bytes; the limit is %d", len(c), MaxBulletChars)
	case strings.ContainsAny(c, "\n\r"):
		return "content spans several lines; a bullet is one line"
	case strings.Contains(c, "{{") || strings.Contains(c, "{%") || strings.Contains(c, "{#") ||
		strings.Contains(c, "}}") || strings.Contains(c, "%}") || strings.Contains(c, "#}"):
		return "content holds template syntax"
	case strings.Contains(c, templates.PlaybookBegin) || strings.Contains(c, templates.PlaybookEnd):
		return "content holds a playbook marker"
	}
	return ""
}

func sectionProblem(s string) string {
	if len(s) > maxSectionLen || !sectionSlugRE.MatchString(s) {
		return fmt.Sprintf("section %q is not a slug (lower-case letters, digits, _; at most %d)", s, maxSectionLen)
	}
	return ""
}

// newID numbers a bullet of section.
func (pb *Playbook) newID(section string) string {
	id := fmt.Sprintf("%s-%05d", section, pb.Next)
	pb.Next++
	return id
}

// number is the numeric part of a bullet id (0 when malformed).
func number(id string) int {
	_, n, _ := strings.Cut(id, "-")
	v, _ := strconv.Atoi(n)
	return v
}

// MarshalPlaybook encodes pb for <id>.playbook.json.
func MarshalPlaybook(pb *Playbook) ([]byte, error) {
	b, err := json.MarshalIndent(pb, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// UnmarshalPlaybook decodes and checks a stored playbook.
func UnmarshalPlaybook(data []byte) (*Playbook, error) {
	var pb Playbook
	if err := json.Unmarshal(data, &pb); err != nil {
		return nil, fmt.Errorf("playbook: %w", err)
	}
	if _, err := ParseKind(string(pb.Kind)); err != nil {
		return nil, fmt.Errorf("playbook: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, b := range pb.Bullets {
		if seen[b.ID] {
			errs = append(errs, fmt.Errorf("bullet %d: duplicate id %s", i, b.ID))
		}
		seen[b.ID] = true
		if !templates.BulletLine.MatchString(BulletText(b)) || !strings.HasPrefix(b.ID, b.Section+"-") {
			errs = append(errs, fmt.Errorf("bullet %d: id %q does not fit section %q", i, b.ID, b.Section))
		}
		if p := contentProblem(b.Content); p != "" {
			errs = append(errs, fmt.Errorf("bullet %s: %s", b.ID, p))
		}
		if number(b.ID) >= pb.Next {
			errs = append(errs, fmt.Errorf("bullet %s: number not below next_id %d", b.ID, pb.Next))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("playbook: %w", err)
	}
	return &pb, nil
}

// ParsePlaybook reads a playbook back from its rendered source (a promoted
// playbook that a later run starts from): the frame, and each bullet with
// its id, section and counters. What the source does not carry (rounds,
// evidence) starts empty. A source that is not exactly a playbook's
// rendering is an error.
func ParsePlaybook(kind Kind, src string) (*Playbook, error) {
	sep := "\n" + templates.PlaybookBegin + "\n"
	i := strings.LastIndex(src, sep)
	if i < 0 {
		return nil, fmt.Errorf("%w: no %s line", ErrNotPlaybook, templates.PlaybookBegin)
	}
	pb := &Playbook{Kind: kind, Frame: src[:i], Next: 1}
	section := ""
	for line := range strings.Lines(src[i+len(sep):]) {
		line = strings.TrimSuffix(line, "\n")
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		m := templates.BulletLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		h, _ := strconv.Atoi(m[2])
		x, _ := strconv.Atoi(m[3])
		pb.Bullets = append(pb.Bullets, Bullet{ID: m[1], Section: section, Content: m[4], Helpful: h, Harmful: x})
		pb.Next = max(pb.Next, number(m[1])+1)
	}
	data, err := MarshalPlaybook(pb)
	if err != nil {
		return nil, err
	}
	if _, err := UnmarshalPlaybook(data); err != nil {
		return nil, err
	}
	if pb.Source() != src {
		return nil, fmt.Errorf("%w: the source is not exactly a playbook's rendering", ErrNotPlaybook)
	}
	if _, err := pb.Compile(); err != nil {
		return nil, err
	}
	return pb, nil
}
