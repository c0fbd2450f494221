package env

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	"github.com/ctxopt/ctxopt/internal/memo"
)

// qaData is a qa dataset as loaded and checked: its passages in id order,
// its tasks by split (before any regrouping) and what names it. It is
// read-only once loaded; the corpus is indexed on the first search.
type qaData struct {
	passages []passage
	tasks    map[string][]Task
	version  string
	content  string // digest of the dataset's lines

	indexOnce sync.Once
	index     *bm25
}

// searchIndex returns the BM25 index of the corpus, built on the first
// search: a process that only reads finished work, like a re-run of a
// finished run, never searches, and indexing takes tens of milliseconds.
func (d *qaData) searchIndex() *bm25 {
	d.indexOnce.Do(func() {
		docs := make([]string, len(d.passages))
		for i, p := range d.passages {
			docs[i] = p.Title + "\n" + p.Text
		}
		d.index = newBM25(docs)
	})
	return d.index
}

// qaLoaded holds the datasets this process loaded, by the bytes of their
// files and the limits they were read under: each run, evaluation and
// worker of a process (a nightly loop, a test binary) opens its dataset
// again, and decoding and checking every line and indexing the corpus
// took most of opening it. Files whose bytes changed load anew.
var qaLoaded = memo.New[string, *qaData](8)

// qaFiles are the files of a qa dataset, VERSION optional.
var qaFiles = []string{"corpus.jsonl", "train.jsonl", "test.jsonl", "VERSION"}

// memoKey names d's files by their bytes, with the limits; ok is false
// when a file cannot be read (loading says why).
func (d dataset) memoKey() (key string, ok bool) {
	h := sha256.New()
	fmt.Fprintf(h, "%+v\n", d.limits)
	for _, name := range qaFiles {
		f, err := d.fsys.Open(name)
		if err != nil {
			if name == "VERSION" && errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(h, "%s absent\n", name)
				continue
			}
			return "", false
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", false
		}
		h.Write([]byte{0})
	}
	return string(h.Sum(nil)), true
}

// loadQA returns d's dataset, from qaLoaded when its files' bytes were
// loaded before.
func loadQA(d dataset) (*qaData, error) {
	key, ok := d.memoKey()
	if ok {
		if data, hit := qaLoaded.Get(key); hit {
			return data, nil
		}
	}
	data, err := d.load()
	if err != nil || !ok {
		return data, err
	}
	qaLoaded.Put(key, data)
	return data, nil
}
