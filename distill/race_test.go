//go:build race

package distill

// raceDetector is set when tests run under -race, whose pointer checks
// (checkptr) turn some of parquet-go's panics on damaged input into fatal
// errors that no recover catches.
const raceDetector = true
