package guideline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// PlaybooksDir holds, inside a registry, each playbook guideline's
// structured bullets as <id>.json beside the guideline's <id>.tmpl.
const PlaybooksDir = "playbooks"

// ErrNotPlaybook is returned (wrapped) for a guideline stored without
// bullets.
var ErrNotPlaybook = errors.New("guideline is not a playbook")

// PutPlaybook renders pb, validates it as every guideline is validated and
// stores the guideline with rec's lineage and the bullets beside it. The
// bullets are written first: a guideline exists once its record does, and
// then its bullets do too.
func (r *Registry) PutPlaybook(rec Record, pb *Playbook) (Record, *Template, error) {
	t, err := pb.Compile()
	if err != nil {
		return Record{}, nil, fmt.Errorf("put playbook: %w", err)
	}
	rec.Kind = pb.Kind
	data, err := MarshalPlaybook(pb)
	if err != nil {
		return Record{}, nil, fmt.Errorf("put playbook: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, PlaybooksDir), 0o755); err != nil {
		return Record{}, nil, fmt.Errorf("put playbook: %w", err)
	}
	if err := atomicfile.WriteFile(r.playbookPath(t.ID()), data, 0o644); err != nil {
		return Record{}, nil, fmt.Errorf("put playbook: %w", err)
	}
	rec, err = r.PutTemplate(rec, t)
	return rec, t, err
}

// Playbook returns the record and bullets of the playbook guideline id (or
// unique prefix).
func (r *Registry) Playbook(id string) (Record, *Playbook, error) {
	rec, src, err := r.Get(id)
	if err != nil {
		return Record{}, nil, err
	}
	data, err := os.ReadFile(r.playbookPath(rec.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil, fmt.Errorf("guideline %s: %w (it has no %s)", rec.ID, ErrNotPlaybook, r.playbookPath(rec.ID))
	}
	if err != nil {
		return rec, nil, fmt.Errorf("playbook %s: %w", rec.ID, err)
	}
	pb, err := UnmarshalPlaybook(data)
	if err != nil {
		return rec, nil, fmt.Errorf("%s: %w", r.playbookPath(rec.ID), err)
	}
	if pb.Source() != src {
		return rec, nil, fmt.Errorf("playbook %s: %s does not render to the stored %s.tmpl", rec.ID, r.playbookPath(rec.ID), rec.ID)
	}
	return rec, pb, nil
}

func (r *Registry) playbookPath(id string) string {
	return filepath.Join(r.dir, PlaybooksDir, id+".json")
}
