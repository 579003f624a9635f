package metrics

import (
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// HistoryWindow is how far back a History remembers.
const HistoryWindow = time.Hour

// Point is one interval of a History: what the daemon did between the
// sample before it and At.
type Point struct {
	// At is when the interval ended.
	At time.Time `json:"at"`
	// Sessions is how many sessions existed at At.
	Sessions float64 `json:"sessions"`
	// Creates is how many sessions were created in the interval
	// (successfully or not).
	Creates float64 `json:"creates"`
	// ExecRate is the commands run per second over the interval.
	ExecRate float64 `json:"exec_rate"`
	// ExecLatency is the mean time of the commands that ran in the
	// interval, in seconds; 0 when none ran.
	ExecLatency float64 `json:"exec_latency_seconds"`
}

// sample is the cumulative values a Point is the difference of.
type sample struct {
	at                         time.Time
	sessions, creates, execs   float64
	execSeconds, execsMeasured float64
}

// History keeps the last HistoryWindow of the daemon's own metrics in
// memory, sampled every interval, for the web console's charts: an
// operator sees the last hour without running Prometheus. It is safe for
// concurrent use.
type History struct {
	m     *Metrics      // (immutable)
	every time.Duration // (immutable)
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex // guards samples
	samples []sample   // oldest first, at most HistoryWindow/every+1
}

// NewHistory starts sampling m every interval (10 s if not positive)
// until Stop.
func NewHistory(m *Metrics, every time.Duration) *History {
	if every <= 0 {
		every = 10 * time.Second
	}
	h := &History{m: m, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	h.Sample(time.Now())
	go h.run()
	return h
}

func (h *History) run() {
	defer close(h.done)
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.Sample(now)
		}
	}
}

// Stop ends the sampling; it is safe to call more than once.
func (h *History) Stop() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
}

// Sample records the metrics' values at now (the sampler calls it every
// interval; tests call it themselves).
func (h *History) Sample(now time.Time) {
	s := sample{at: now}
	mfs, err := h.m.reg.Gather()
	if err != nil && len(mfs) == 0 {
		return // an interval without a point: the chart shows a gap
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "warren_sessions":
			s.sessions = sum(mf.Metric, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
		case "warren_session_creates_total":
			s.creates = sum(mf.Metric, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
		case "warren_execs_total":
			s.execs = sum(mf.Metric, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
		case "warren_exec_duration_seconds":
			s.execSeconds = sum(mf.Metric, func(m *dto.Metric) float64 { return m.GetHistogram().GetSampleSum() })
			s.execsMeasured = sum(mf.Metric, func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) })
		}
	}
	keep := int(HistoryWindow/h.every) + 1
	h.mu.Lock()
	h.samples = append(h.samples, s)
	if len(h.samples) > keep {
		h.samples = append(h.samples[:0], h.samples[len(h.samples)-keep:]...)
	}
	h.mu.Unlock()
}

func sum(ms []*dto.Metric, v func(*dto.Metric) float64) float64 {
	var t float64
	for _, m := range ms {
		t += v(m)
	}
	return t
}

// Points returns the intervals of the last HistoryWindow, oldest first.
func (h *History) Points() []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Point, 0, len(h.samples))
	for i := 1; i < len(h.samples); i++ {
		a, b := h.samples[i-1], h.samples[i]
		p := Point{At: b.at.UTC(), Sessions: b.sessions, Creates: max(0, b.creates-a.creates)}
		if d := b.at.Sub(a.at).Seconds(); d > 0 {
			p.ExecRate = max(0, b.execs-a.execs) / d
		}
		if n := b.execsMeasured - a.execsMeasured; n > 0 {
			p.ExecLatency = (b.execSeconds - a.execSeconds) / n
		}
		out = append(out, p)
	}
	return out
}
