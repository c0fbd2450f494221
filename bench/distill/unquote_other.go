//go:build !amd64

package main

// haveAVX2 is false: runs are left to the word-at-a-time loop in unquote.
var haveAVX2 = false

// copyRunAVX2 is not called where haveAVX2 is false.
func copyRunAVX2(b, src []byte, r, w int) (int, int) { return r, w }
