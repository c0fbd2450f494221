package distill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/redact"
)

// ManifestFormat identifies manifest.json files written by this package; an
// existing output directory is replaced only when it holds one.
const ManifestFormat = "ctxopt.distill/v1"

// Manifest accounts for a build: what was read, what was kept, what was
// dropped and why, what was redacted, and what was written. It is
// deterministic: the same inputs and options give the same bytes.
type Manifest struct {
	Format string `json:"format"`
	Job    string `json:"job,omitempty"`
	// Guideline is the prefix events' guideline ids were filtered on, and
	// GuidelineFrom where it came from: "flag", "summary" or "" (all).
	Guideline     string   `json:"guideline"`
	GuidelineFrom string   `json:"guideline_from"`
	GuidelineIDs  []string `json:"guideline_ids"`
	TeacherModels []string `json:"teacher_models"`
	Sources       []string `json:"sources"`
	License       string   `json:"license"`
	// LicenseLink is where the license's text is (the card's license_link).
	LicenseLink string `json:"license_link,omitempty"`

	Options ManifestOptions `json:"options"`
	Inputs  []InputFile     `json:"inputs"`

	Trajectories TrajectoryCounts `json:"trajectories"`
	// Workflows count the PAACE-Syn executions read, when synth runs were
	// given.
	Workflows *WorkflowCounts `json:"workflows,omitempty"`
	// BadLines lists the first lines skipped with SkipBad (up to
	// maxBadLines); Trajectories.BadLines counts them all.
	BadLines []LineRef `json:"bad_lines,omitempty"`

	Rows RowCounts `json:"rows"`
	// Redactions count the secrets replaced, per kind, in every row that
	// reached curation, including rows then dropped as duplicates or too
	// long.
	Redactions map[string]int        `json:"redactions"`
	Splits     map[string]SplitStats `json:"splits"`
	Files      []OutputFile          `json:"files"`
}

// ManifestOptions are the options that shaped the data.
type ManifestOptions struct {
	Seed               int     `json:"seed"`
	ValidationFraction float64 `json:"validation_fraction"`
	MaxLength          int     `json:"max_length"`
	RedactEmails       bool    `json:"redact_emails"`
	SkipBad            bool    `json:"skip_bad"`
	RowGroupRows       int     `json:"row_group_rows"`
}

// InputFile is one trajectories.jsonl read.
type InputFile struct {
	Path         string `json:"path"`
	SHA256       string `json:"sha256"`
	Lines        int    `json:"lines"`
	Trajectories int    `json:"trajectories"`
	// Workflows counts the executions of a synth run's file.
	Workflows int `json:"workflows,omitempty"`
	BadLines  int `json:"bad_lines"`
}

// TrajectoryCounts count trajectories by outcome. Only successful ones,
// ACON's D⁺_train, give rows.
type TrajectoryCounts struct {
	Read       int `json:"read"`
	Successful int `json:"successful"`
	Failed     int `json:"failed"`
	Infra      int `json:"infra"`
	BadLines   int `json:"bad_lines"`
}

// LineRef names a skipped line.
type LineRef struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// RowCounts count compression events: Read = Kept + the sum of Dropped.
type RowCounts struct {
	Read    int            `json:"read"`
	Kept    int            `json:"kept"`
	Dropped map[string]int `json:"dropped"`
	// WithSystem counts the kept rows whose prompt has a system message,
	// so the card describes the prompts as they are.
	WithSystem int `json:"with_system_message"`
}

// OutputFile is one file of the dataset directory.
type OutputFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

const maxBadLines = 100

func newManifest() Manifest {
	m := Manifest{
		Format:        ManifestFormat,
		GuidelineIDs:  []string{},
		TeacherModels: []string{},
		Sources:       []string{},
		Inputs:        []InputFile{},
		Rows:          RowCounts{Dropped: map[string]int{}},
		Redactions:    map[string]int{},
	}
	// Every reason and kind is listed, zero or not, so a reader sees that
	// it was checked.
	for _, r := range DropReasons() {
		m.Rows.Dropped[r] = 0
	}
	for _, k := range redact.Kinds() {
		m.Redactions[k] = 0
	}
	return m
}

func (m *Manifest) marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// listFiles describes every file under dir but manifest.json.
func listFiles(dir string) ([]OutputFile, error) {
	var files []OutputFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == manifestName {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return fmt.Errorf("hash %s: %w", rel, err)
		}
		files = append(files, OutputFile{Path: rel, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list dataset files: %w", err)
	}
	// WalkDir goes in lexical order, so the list is sorted and stable.
	return files, nil
}
