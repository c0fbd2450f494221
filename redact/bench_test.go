package redact_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ctxopt/ctxopt/internal/datagen"
	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/redact/redacttest"
)

// BenchmarkRedact redacts the texts of the distillation benchmark's rows
// (bench/distill.sh: a ~5 KB prompt and a ~1 KB completion of agent-trace
// words), without secrets and with one secret sample of each kind mixed
// in, which makes every rule and view do its work.
func BenchmarkRedact(b *testing.B) {
	r := rand.New(rand.NewPCG(42, 42))
	var plain, secrets []string
	for i := range 64 {
		n := 5000
		if i%2 == 1 {
			n = 1000
		}
		text := datagen.TraceText(r, n)
		plain = append(plain, text)
		s := redacttest.Samples()[i%len(redacttest.Samples())]
		secrets = append(secrets, text[:n/2]+" "+s.Text+" "+text[n/2:])
	}
	red := redact.New(false)
	for _, bc := range []struct {
		name  string
		texts []string
	}{{"plain", plain}, {"secrets", secrets}} {
		b.Run(bc.name, func(b *testing.B) {
			size := 0
			for _, t := range bc.texts {
				size += len(t)
			}
			b.SetBytes(int64(size / len(bc.texts)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				red.Redact(bc.texts[i%len(bc.texts)])
				i++
			}
		})
	}
}
