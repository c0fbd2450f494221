//go:build race

package llm

// raceStride thins the corpus under the race detector, which slows
// tiktoken-go's regexp several times over.
const raceStride = 8
