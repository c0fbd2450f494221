package distill

import (
	"fmt"
	"os"
	"sync"
)

// asyncFile buffers a file's bytes and writes them from a goroutine of its
// own, so the kernel's copy of one buffer overlaps the encoding of the next:
// an export writes more than a gigabyte of JSON lines per 100,000 rows, and
// writing it inline would serialize the writer on system calls. Buffers are
// recycled and at most asyncBuffers are alive, which bounds memory.
//
// appendLine and Write must be called from one goroutine.
type asyncFile struct {
	f     *os.File
	name  string
	buf   []byte
	queue chan []byte
	free  chan []byte
	done  chan struct{}

	mu  sync.Mutex
	err error // first write error, set by the goroutine
}

const (
	asyncBufferSize = 1 << 20
	asyncBuffers    = 4
)

func newAsyncFile(f *os.File, name string) *asyncFile {
	a := &asyncFile{
		f:     f,
		name:  name,
		buf:   make([]byte, 0, asyncBufferSize),
		queue: make(chan []byte, asyncBuffers),
		free:  make(chan []byte, asyncBuffers),
		done:  make(chan struct{}),
	}
	for range asyncBuffers - 1 {
		a.free <- make([]byte, 0, asyncBufferSize)
	}
	go a.run()
	return a
}

func (a *asyncFile) run() {
	defer close(a.done)
	for b := range a.queue {
		if a.failure() == nil {
			if _, err := a.f.Write(b); err != nil {
				a.mu.Lock()
				a.err = fmt.Errorf("write %s: %w", a.name, err)
				a.mu.Unlock()
			}
		}
		a.free <- b[:0]
	}
}

func (a *asyncFile) failure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// appendLine lets encode append a line to the current buffer, and hands the
// buffer to the writing goroutine once it is full.
func (a *asyncFile) appendLine(encode func([]byte) []byte) error {
	a.buf = encode(a.buf)
	if len(a.buf) < asyncBufferSize {
		return nil
	}
	return a.handOff()
}

// handOff gives the full buffer to the writing goroutine and takes a free
// one.
func (a *asyncFile) handOff() error {
	a.queue <- a.buf
	a.buf = <-a.free
	return a.failure()
}

// Write copies p into the buffers, handing each to the writing goroutine
// once it is full; buffers never grow past asyncBufferSize, however large p.
func (a *asyncFile) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), asyncBufferSize-len(a.buf))
		a.buf = append(a.buf, p[:k]...)
		p = p[k:]
		if len(a.buf) < asyncBufferSize {
			break
		}
		if err := a.handOff(); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// close writes what is buffered, waits for the goroutine and closes the
// file.
func (a *asyncFile) close() error {
	if len(a.buf) > 0 {
		a.queue <- a.buf
		a.buf = nil
	}
	close(a.queue)
	<-a.done
	err := a.failure()
	if cerr := a.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", a.name, cerr)
	}
	return err
}
