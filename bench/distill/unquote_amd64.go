package main

import "golang.org/x/sys/cpu"

// copyRunAVX2 decodes src[r:] into b[w:] 32 bytes at a time, the escapes
// \n, \" and \\ included (gen's text has one every few dozen bytes, so
// returning to Go for each cost a call), and stops at a quote, another
// escape, or fewer than 32 bytes from the end of src. It returns r and w
// there; unquote goes on from them a word at a time. It needs w <= r and
// len(b) >= len(src). BenchmarkDecodeRows.
//
//go:noescape
func copyRunAVX2(b, src []byte, r, w int) (int, int)

// haveAVX2 turns the block loop on; tests turn it off.
var haveAVX2 = cpu.X86.HasAVX2
