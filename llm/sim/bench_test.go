package sim

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/llm"
)

// benchTask is an 8-question task.
func benchTask() string {
	var b strings.Builder
	b.WriteString("Answer all 8 questions below. Search for evidence, then call finish with the answers in question order.\n")
	for i := range 8 {
		fmt.Fprintf(&b, "Q%d: What is the capital of Zarn%c?\n", i+1, 'a'+i)
	}
	return b.String()
}

// benchObservation is three passages of about 150 words, one of which
// answers question i.
func benchObservation(i int) string {
	filler := "Farmers in the hills around the valley raise goats and grow barley and oats. " +
		"The weather changes quickly, and fog is common in the mornings. Markets open at dawn and close before the evening bells. " +
		"Travellers are advised to carry warm cloaks when crossing the moors. Songs from the region often describe the sea, the wind and long journeys. "
	var b strings.Builder
	for k := range 3 {
		fmt.Fprintf(&b, "[%d] (doc d%05d) Zarn%c\nZarn%c is a small region set among misty hills. %s", k+1, 100*i+k, 'a'+i, 'a'+i, strings.Repeat(filler, 2))
		if k == 0 {
			fmt.Fprintf(&b, "The capital of Zarn%c is Holt%c. ", 'a'+i, 'a'+i)
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// benchRequests returns agent requests with a context of about 4k tokens
// (task and seven search turns) and its token count. Request v differs from
// the others in its last observation, as successive calls of a run do, so
// the tokenizer's memo cannot serve that message.
func benchRequests(tb testing.TB) (func(v int64) []byte, int) {
	var turns [][2]string
	for i := range 7 {
		turns = append(turns, [2]string{fmt.Sprintf("What is the capital of Zarn%c?", 'a'+i), benchObservation(i)})
	}
	const mark = "VARIANT-MARK"
	turns[6][1] += mark
	msgs := agentMsgs(benchTask(), turns...)
	body := chatBody(tb, msgs, true)
	pre, post, ok := bytes.Cut(body, []byte(mark))
	if !ok {
		tb.Fatal("variant mark not in the request")
	}
	return func(v int64) []byte {
		return slices.Concat(pre, []byte(strconv.FormatInt(v, 10)), post)
	}, mustTokenizer(tb).CountMessages(msgs[1:])
}

// variant numbers requests across benchmark runs, so that no run finds its
// last observations counted by an earlier one.
var variant atomic.Int64

// BenchmarkHandlerAgent measures agent calls with a 4k-token context.
// "fresh": every call brings an observation the tokenizer has not counted
// yet, as with a standalone server (tokenizing it is most of the cost).
// "counted": the observation was counted before, as in-process, where
// rollout counts each message with the same shared tokenizer first.
func BenchmarkHandlerAgent(b *testing.B) {
	h := newHandlerT(b, Config{})
	request, tokens := benchRequests(b)
	serve := func(b *testing.B, body []byte) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.Run("fresh", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				serve(b, request(variant.Add(1)))
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		b.ReportMetric(float64(tokens), "ctx-tokens")
	})
	b.Run("counted", func(b *testing.B) {
		bodies := make([][]byte, 256)
		for i := range bodies {
			bodies[i] = request(variant.Add(1))
			serve(b, bodies[i])
		}
		var next atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				serve(b, bodies[next.Add(1)%int64(len(bodies))])
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		b.ReportMetric(float64(tokens), "ctx-tokens")
	})
}

// BenchmarkServer64Clients is the load of a rollout: 64 concurrent clients
// over loopback HTTP against a model with 50ms latency. 64 clients waiting
// 50ms each bound the rate at 1280 req/s.
func BenchmarkServer64Clients(b *testing.B) {
	s, err := Start(b.Context(), "", Config{Latency: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	request, _ := benchRequests(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const clients = 64
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if done.Add(1) > int64(b.N) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", bytes.NewReader(request(variant.Add(1))))
				req.Header.Set(llm.RoleHeader, "agent")
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				var sink bytes.Buffer
				_, _ = sink.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
