package env

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/internal/jsonl"
)

// QAQuestionsPerTask is the number of questions of every qa task (ACON's
// 8-objective QA).
const QAQuestionsPerTask = 8

// passage is one retrievable document of the qa corpus.
type passage struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// taskLine is one line of train.jsonl or test.jsonl.
type taskLine struct {
	ID        string     `json:"id"`
	Questions []Question `json:"questions"`
}

// missingFileError reports a dataset file that does not exist, with what to
// do about it.
type missingFileError struct{ path string }

func (e *missingFileError) Error() string {
	return "open dataset " + e.path + ": no such file; set env.dataset in the job file to a directory with corpus.jsonl, train.jsonl and test.jsonl"
}

func (e *missingFileError) Unwrap() error { return fs.ErrNotExist }

// dataset is a qa dataset as read from fsys; display turns a file name into
// the path named in errors.
type dataset struct {
	fsys    fs.FS
	display func(name string) string
	limits  jsonl.Limits
	// sum, when set, digests every line read, so an environment's settings
	// name the content of its dataset even when VERSION was not bumped.
	sum hash.Hash
}

// digest is the digest of the lines read so far, "" without sum.
func (d dataset) digest() string {
	if d.sum == nil {
		return ""
	}
	return hex.EncodeToString(d.sum.Sum(nil))[:16]
}

// readLines calls fn for each non-blank line of the named JSONL file with its
// line number; fn's errors are prefixed with path:line.
func (d dataset) readLines(name string, fn func(n int, line []byte) error) error {
	path := d.display(name)
	f, err := d.fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &missingFileError{path: path}
	}
	if err != nil {
		return fmt.Errorf("open dataset %s: %w", path, err)
	}
	defer f.Close()
	rd := jsonl.NewReader(f, path, d.limits)
	for {
		line, err := rd.NonBlank()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read dataset: %w", err)
		}
		if d.sum != nil {
			fmt.Fprintf(d.sum, "%s\n%s\n", name, line)
		}
		if err := fn(rd.Line(), line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, rd.Line(), err)
		}
	}
}

// decodeStrict decodes one JSON object into v, rejecting unknown fields and
// trailing data, with errors that name the field.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
		if dec.More() {
			return errors.New("malformed JSON: more than one value on the line")
		}
		return nil
	case errors.As(err, &typeErr):
		return fmt.Errorf("field %q: want %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("malformed JSON at byte %d: %w", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return fmt.Errorf("malformed JSON: %w", err)
	}
}

func (d dataset) loadCorpus() ([]passage, error) {
	var ps []passage
	lineOf := map[string]int{}
	err := d.readLines("corpus.jsonl", func(n int, line []byte) error {
		var p passage
		if err := decodeStrict(line, &p); err != nil {
			return err
		}
		switch {
		case p.ID == "":
			return errors.New(`field "id": missing or empty`)
		case p.Title == "":
			return errors.New(`field "title": missing or empty`)
		case strings.TrimSpace(p.Text) == "":
			return errors.New(`field "text": missing or empty`)
		case strings.Contains(p.Text, "\n\n"):
			// A blank line ends a passage block in search observations.
			return errors.New(`field "text": contains a blank line; passages must not, since a blank line separates passages in observations`)
		case strings.Contains(p.Title, "\n"):
			return errors.New(`field "title": contains a line break`)
		}
		if prev, dup := lineOf[p.ID]; dup {
			return fmt.Errorf(`field "id": %q already used on line %d`, p.ID, prev)
		}
		ps = append(ps, p)
		lineOf[p.ID] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("dataset %s is empty: want one passage per line", d.display("corpus.jsonl"))
	}
	// Index order is id order, so BM25 ties go to the lower id.
	slices.SortFunc(ps, func(a, b passage) int { return strings.Compare(a.ID, b.ID) })
	return ps, nil
}

// loadTasks reads split's tasks. ids holds the task ids of splits read so
// far (they must be unique across splits) and questions the question texts
// with their "path:line" (splits must not share a question).
func (d dataset) loadTasks(split string, ids, questions map[string]string) ([]Task, error) {
	name := split + ".jsonl"
	var tasks []Task
	err := d.readLines(name, func(n int, raw []byte) error {
		var t taskLine
		if err := decodeStrict(raw, &t); err != nil {
			return err
		}
		if t.ID == "" {
			return errors.New(`field "id": missing or empty`)
		}
		if where, dup := ids[t.ID]; dup {
			return fmt.Errorf(`field "id": task %q already defined at %s`, t.ID, where)
		}
		if len(t.Questions) != QAQuestionsPerTask {
			return fmt.Errorf(`field "questions": want %d questions, got %d`, QAQuestionsPerTask, len(t.Questions))
		}
		where := fmt.Sprintf("%s:%d", d.display(name), n)
		ids[t.ID] = where
		var prompt strings.Builder
		for i, q := range t.Questions {
			if strings.TrimSpace(q.Text) == "" || strings.Contains(q.Text, "\n") {
				return fmt.Errorf(`field "questions[%d].q": want one non-empty line`, i)
			}
			if len(q.Answers) == 0 {
				return fmt.Errorf(`field "questions[%d].answers": want at least one answer`, i)
			}
			for j, a := range q.Answers {
				if normalizeAnswer(a) == "" {
					return fmt.Errorf(`field "questions[%d].answers[%d]": empty after normalization`, i, j)
				}
			}
			if prev, dup := questions[q.Text]; dup {
				return fmt.Errorf(`field "questions[%d].q": %q is also asked at %s; a question may appear once, so train and test stay apart`, i, q.Text, prev)
			}
			questions[q.Text] = where
			fmt.Fprintf(&prompt, "Q%d: %s\n", i+1, q.Text)
		}
		tasks = append(tasks, Task{
			ID:        t.ID,
			Split:     split,
			Prompt:    strings.TrimSuffix(prompt.String(), "\n"),
			Questions: t.Questions,
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("dataset %s is empty: want one task per line", d.display(name))
	}
	return tasks, nil
}
