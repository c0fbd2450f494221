package main

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// copyRunAVX2 copies src to dst 32 bytes at a time until a block holds a
// quote or a backslash, or fewer than 32 of src's n bytes are left. It
// returns how many bytes come before that quote or backslash, or how many
// it copied. dst must have room for n bytes.
//
//go:noescape
func copyRunAVX2(dst, src *byte, n int) int

// haveAVX2 turns the block loop on; tests turn it off.
var haveAVX2 = cpu.X86.HasAVX2

// copyRun copies the run of src[r:] that has no quote or backslash into
// b[w:] as far as 32-byte blocks reach, and returns r and w past it; the
// word-at-a-time loop in unquote finishes the run. Runs are tens of bytes,
// so a block a step (here) beats a word a step: BenchmarkDecodeRows.
func copyRun(b, src []byte, r, w int) (int, int) {
	if !haveAVX2 || len(src)-r < 32 {
		return r, w
	}
	k := copyRunAVX2(unsafe.SliceData(b[w:]), unsafe.SliceData(src[r:]), len(src)-r)
	return r + k, w + k
}
