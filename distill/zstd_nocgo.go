//go:build !cgo

package distill

import "github.com/parquet-go/parquet-go/compress/zstd"

const zstdLibrary = "klauspost"

// newZstdCodec is klauspost's pure-Go zstd at its fastest level (about zstd
// level 1) when cgo is off; zstd_cgo.go uses libzstd, which is faster. The
// codec pools its encoders, so workers share it.
func newZstdCodec() pageCompressor {
	return &zstd.Codec{Level: zstd.SpeedFastest}
}
