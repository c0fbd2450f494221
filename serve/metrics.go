package serve

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctxopt/ctxopt/internal/version"
)

// metrics are the Prometheus series of /metrics. client_golang is the
// reference implementation of the exposition format and its histograms;
// a registry per server keeps tests independent.
type metrics struct {
	reg               *prometheus.Registry
	requests          *prometheus.CounterVec
	latency           *prometheus.HistogramVec
	compressions      *prometheus.CounterVec
	tokensSaved       prometheus.Counter
	summaryWaited     prometheus.Counter
	summaryBypassed   prometheus.Counter
	summaryWait       prometheus.Histogram
	compressorSeconds *prometheus.HistogramVec
	fallbacks         *prometheus.CounterVec
	invalid           *prometheus.CounterVec
	upstreamErrors    *prometheus.CounterVec
	rejected          *prometheus.CounterVec
	reloads           *prometheus.CounterVec
	guideline         *prometheus.GaugeVec
	sessions          prometheus.GaugeFunc
	// compactionAnswered counts agents' compaction requests answered
	// from a summary (compactreq.go).
	compactionAnswered prometheus.Counter
}

const ns = "ctxopt_serve"

func newMetrics(sessions func() float64) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Requests answered, by endpoint and status code."}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help:    "Time to the end of the response, by endpoint.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"endpoint"}),
		compressions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "compressions_total",
			Help: "Summaries computed, by the link that produced them and whether a request past the threshold needed it (sync) or it was started ahead of need (background)."}, []string{"link", "mode"}),
		tokensSaved: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "tokens_saved_total",
			Help: "Prompt tokens not sent upstream thanks to compression."}),
		summaryWaited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "summary_waited_total",
			Help: "Requests past the threshold that waited (at most compression.max_wait) for their summary."}),
		summaryBypassed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "summary_bypassed_total",
			Help: "Requests past the threshold whose summary was not ready in time: sent with the previous summary and the turns since, older tool outputs folded and, if that was not enough, the oldest turns left out."}),
		summaryWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "summary_wait_seconds",
			Help:    "Time a request waited for its summary.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		compressorSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "compressor_duration_seconds",
			Help: "Time of one compressor call, by link.", Buckets: prometheus.DefBuckets}, []string{"link"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "fallbacks_total",
			Help: "Links passed over in the fallback chain, by link and reason (breaker_open, error, timeout, invalid)."}, []string{"link", "reason"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "compressor_rejections_total",
			Help: "Compressor answers rejected as invalid summaries, by link and the rule they broke (compress.Rule*: empty, coverage, not_shorter, no_section)."}, []string{"link", "rule"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_errors_total",
			Help: "Upstream answers with an error status or no answer (code 0), by endpoint."}, []string{"endpoint", "code"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rejected_total",
			Help: "Requests refused before reaching upstream, by reason."}, []string{"reason"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "guideline_reloads_total",
			Help: "Promoted guideline loads, by result (ok, invalid)."}, []string{"result"}),
		guideline: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "guideline_info",
			Help: "The guidelines in service (value 1), by kind and id."}, []string{"kind", "id"}),
	}
	m.compactionAnswered = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "compaction_answered_total",
		Help: "Agents' own compaction requests answered from the session's summary, with no upstream call (agent_compaction)."})
	m.reg.MustRegister(m.compactionAnswered)
	m.sessions = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "sessions",
		Help: "Conversations with a summary in the store."}, sessions)
	m.reg.MustRegister(buildInfo(), m.requests, m.latency, m.compressions, m.tokensSaved, m.summaryWaited, m.summaryBypassed, m.summaryWait, m.compressorSeconds, m.fallbacks, m.invalid,
		m.upstreamErrors, m.rejected, m.reloads, m.guideline, m.sessions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// buildInfo is ctxopt_build_info, the usual Prometheus gauge of value 1
// whose labels say which build serves: a dashboard joins on it to tell
// the metrics of two versions apart.
func buildInfo() prometheus.Collector {
	v := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxopt_build_info",
		Help: "The build serving (value 1): module version, VCS revision, Go version and the embedded model's version.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.RevisionLabel(),
			"goversion": v.GoVersion, "embedded_model": v.EmbeddedModel}})
	g.Set(1)
	return g
}

// codeCounters are the requests_total series of one endpoint, kept by
// status code so a request finds its counter without hashing its labels.
type codeCounters struct {
	vec      *prometheus.CounterVec
	endpoint string
	byCode   [600]atomic.Pointer[prometheus.Counter]
}

func (m *metrics) requestsOf(endpoint string) *codeCounters {
	return &codeCounters{vec: m.requests, endpoint: endpoint}
}

func (c *codeCounters) inc(code int) {
	if code < 0 || code >= len(c.byCode) {
		c.vec.WithLabelValues(c.endpoint, strconv.Itoa(code)).Inc()
		return
	}
	p := c.byCode[code].Load()
	if p == nil {
		ctr := c.vec.WithLabelValues(c.endpoint, strconv.Itoa(code))
		p = &ctr
		c.byCode[code].Store(p)
	}
	(*p).Inc()
}

// watchBreakers exposes each link's breaker as compressor_breaker_open
// (1 while open or half-open), what /readyz reports as degraded, so an
// alert can fire on it.
func (m *metrics) watchBreakers(links []*link) {
	for _, l := range links {
		br := l.br
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "compressor_breaker_open",
			Help:        "1 while the link's circuit breaker is open (its compressions fall to the next link), else 0.",
			ConstLabels: prometheus.Labels{"link": l.name}}, func() float64 {
			if br.open() {
				return 1
			}
			return 0
		}))
	}
}
