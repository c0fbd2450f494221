//go:build !race

package llm

// raceStride is 1: the whole corpus is checked without the race detector.
const raceStride = 1
