//go:build !race

package distill

const raceDetector = false
