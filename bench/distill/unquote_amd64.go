package main

import "golang.org/x/sys/cpu"

// copyRunAVX2 copies src[r:] to b[w:] 32 bytes at a time until a block
// holds a quote or a backslash, or fewer than 32 bytes of src are left, and
// returns r and w past the bytes before that quote or backslash, or past
// what it copied. It needs w <= r and len(b) >= len(src); unquote finishes
// the run a word at a time. Runs are tens of bytes, so a block a step beats
// a word a step: BenchmarkDecodeRows.
//
//go:noescape
func copyRunAVX2(b, src []byte, r, w int) (int, int)

// haveAVX2 turns the block loop on; tests turn it off.
var haveAVX2 = cpu.X86.HasAVX2
