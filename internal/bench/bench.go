// Package bench is warren's benchmark harness (warren bench): it measures
// a daemon through the Go client, and the host's own floor (a bare
// fork+exec, a bash spawn, a namespace sandbox made by hand) in the same
// run, and reports each result next to its floor.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
)

// Options choose what runs and how often.
type Options struct {
	// N is how many timed repetitions each latency gets (after Warmup).
	N, Warmup int
	// Clients is how many concurrent clients the throughput runs use,
	// each in its own session, for Duration.
	Clients  int
	Duration time.Duration
	// Density is how many idle sessions the density run holds at once (0
	// skips it).
	Density int
	// Prefix names the sessions the harness makes, so that a shared
	// daemon's own sessions are never touched.
	Prefix string
	// DaemonPid, if known, lets the density run read the daemon's RSS.
	DaemonPid int
	// Log, if set, hears progress.
	Log io.Writer
}

// Result is one measurement.
type Result struct {
	Name string `json:"name"`
	// Unit is "ms" for latencies (P50, P95, Mean), "ops/s" or "MiB" for
	// single values (Value).
	Unit  string  `json:"unit"`
	N     int     `json:"n,omitempty"`
	P50   float64 `json:"p50,omitempty"`
	P95   float64 `json:"p95,omitempty"`
	Mean  float64 `json:"mean,omitempty"`
	Value float64 `json:"value,omitempty"`
	// Floor names the host measurement this one compares to, and Ratio is
	// P50 (or Value) over the floor's.
	Floor string  `json:"floor,omitempty"`
	Ratio float64 `json:"ratio,omitempty"`
	Note  string  `json:"note,omitempty"`
}

// Report is a whole run.
type Report struct {
	Started time.Time `json:"started"`
	Host    HostInfo  `json:"host"`
	Results []Result  `json:"results"`
}

// latency times f N times after Warmup runs.
func latency(name string, o Options, f func() error) (Result, error) {
	for i := 0; i < o.Warmup; i++ {
		if err := f(); err != nil {
			return Result{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	ts := make([]time.Duration, 0, o.N)
	for i := 0; i < o.N; i++ {
		t0 := time.Now()
		if err := f(); err != nil {
			return Result{}, fmt.Errorf("%s: %w", name, err)
		}
		ts = append(ts, time.Since(t0))
	}
	return summarize(name, ts), nil
}

func summarize(name string, ts []time.Duration) Result {
	slices.Sort(ts)
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	var sum time.Duration
	for _, t := range ts {
		sum += t
	}
	q := func(p float64) float64 { return ms(ts[int(p*float64(len(ts)-1))]) }
	return Result{Name: name, Unit: "ms", N: len(ts), P50: q(0.5), P95: q(0.95), Mean: ms(sum / time.Duration(len(ts)))}
}

// Run measures the daemon c talks to, and the host's floor.
func Run(ctx context.Context, c *client.Client, o Options) (*Report, error) {
	if o.N <= 0 {
		o.N = 200
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	if o.Prefix == "" {
		o.Prefix = "bench"
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	rep := &Report{Started: time.Now().UTC(), Host: hostInfo()}
	add := func(r Result) { rep.Results = append(rep.Results, r) }

	logf("host floor")
	floors, err := hostFloor(o)
	if err != nil {
		return nil, err
	}
	for _, f := range floors {
		add(f)
	}
	floor := func(name string) float64 {
		for _, f := range floors {
			if f.Name == name {
				return f.P50
			}
		}
		return 0
	}
	withFloor := func(r Result, name string) Result {
		if f := floor(name); f > 0 {
			r.Floor, r.Ratio = name, r.P50/f
		}
		return r
	}

	sid := o.Prefix + "-main"
	_ = c.DeleteSession(ctx, sid) // a leftover of an earlier run, if any
	if _, err := c.CreateSession(ctx, &api.CreateSessionRequest{ID: sid}); err != nil {
		return nil, fmt.Errorf("create the benchmark session: %w", err)
	}
	defer deleteQuietly(ctx, c, sid)

	logf("create and delete")
	var creates, deletes []time.Duration
	for j := -o.Warmup; j < o.N; j++ {
		id := fmt.Sprintf("%s-d%d", o.Prefix, j+o.Warmup)
		t0 := time.Now()
		if _, err := c.CreateSession(ctx, &api.CreateSessionRequest{ID: id}); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		t1 := time.Now()
		if err := c.DeleteSession(ctx, id); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
		if j >= 0 {
			creates, deletes = append(creates, t1.Sub(t0)), append(deletes, time.Since(t1))
		}
	}
	add(withFloor(summarize("create session (cold)", creates), "namespaces+overlay+cgroup by hand"))
	add(summarize("delete session", deletes))

	logf("exec")
	execs := []struct {
		name, floor string
		req         api.ExecRequest
	}{
		{"exec echo hi (builtin)", "bash -c 'echo hi' spawn", api.ExecRequest{Command: "echo hi"}},
		{"exec /bin/true (shell)", "fork+exec /bin/true", api.ExecRequest{Command: "/bin/true"}},
		{"exec /bin/true (argv)", "fork+exec /bin/true", api.ExecRequest{Argv: []string{"/bin/true"}}},
	}
	for _, e := range execs {
		r, err := latency(e.name, o, func() error {
			res, err := c.Exec(ctx, sid, &e.req)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit code %d", res.ExitCode)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		add(withFloor(r, e.floor))
	}

	logf("files")
	mib := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	r, err := latency("write 1 MiB file", o, func() error {
		_, err := c.WriteFile(ctx, sid, "bench.bin", bytes.NewReader(mib), 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	add(r)
	r, err = latency("read 1 MiB file", o, func() error {
		rc, err := c.ReadFile(ctx, sid, "bench.bin")
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err == nil && n != int64(len(mib)) {
			err = fmt.Errorf("read %d bytes", n)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	add(r)

	logf("streamed exec")
	var ttfb []time.Duration
	for j := -o.Warmup; j < o.N; j++ {
		t0 := time.Now()
		var first time.Duration
		if _, err := c.ExecStream(ctx, sid, &api.ExecRequest{Command: "echo hi; sleep 0.005"}, func(string, []byte) error {
			if first == 0 {
				first = time.Since(t0)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if j >= 0 {
			ttfb = append(ttfb, first)
		}
	}
	add(summarize("streamed exec, first byte", ttfb))

	for _, mode := range []struct {
		name string
		req  api.ExecRequest
	}{
		{"exec true, 8 clients (shell)", api.ExecRequest{Command: "true"}},
		{"exec /bin/true, 8 clients (argv)", api.ExecRequest{Argv: []string{"/bin/true"}}},
	} {
		logf("%s", mode.name)
		n, err := throughput(ctx, c, o, mode.req)
		if err != nil {
			return nil, err
		}
		add(Result{Name: strings.Replace(mode.name, "8", fmt.Sprint(o.Clients), 1), Unit: "ops/s", Value: n})
	}

	if o.Density > 0 {
		logf("density: %d idle sessions", o.Density)
		rs, err := density(ctx, c, o)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			add(r)
		}
	}
	return rep, nil
}

// throughput runs Clients loops of req, each in a session of its own, for
// Duration, and returns completed calls per second.
func throughput(ctx context.Context, c *client.Client, o Options, req api.ExecRequest) (float64, error) {
	ids := make([]string, o.Clients)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-t%d", o.Prefix, i)
		_ = c.DeleteSession(ctx, ids[i]) // a leftover of an earlier run, if any
		if _, err := c.CreateSession(ctx, &api.CreateSessionRequest{ID: ids[i]}); err != nil {
			return 0, err
		}
	}
	defer func() {
		for _, id := range ids {
			deleteQuietly(ctx, c, id)
		}
	}()
	var done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(o.Duration)
	start := time.Now()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if _, err := c.Exec(ctx, id, &req); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// density holds Density idle sessions and reports what they cost the host.
func density(ctx context.Context, c *client.Client, o Options) ([]Result, error) {
	runtimeGC()
	before := memAvailable()
	rssBefore := rssOf(o.DaemonPid)
	ids := make([]string, 0, o.Density)
	defer func() {
		for _, id := range ids {
			deleteQuietly(ctx, c, id)
		}
	}()
	t0 := time.Now()
	for i := 0; i < o.Density; i++ {
		id := fmt.Sprintf("%s-n%d", o.Prefix, i)
		if _, err := c.CreateSession(ctx, &api.CreateSessionRequest{ID: id}); err != nil {
			return nil, fmt.Errorf("density: session %d of %d: %w", i+1, o.Density, err)
		}
		ids = append(ids, id)
	}
	elapsed := time.Since(t0)
	time.Sleep(2 * time.Second) // let shells settle into idle
	after := memAvailable()
	var cg uint64
	if list, err := c.ListSessions(ctx); err == nil {
		for _, s := range list {
			if strings.HasPrefix(s.ID, o.Prefix+"-n") && s.Usage != nil {
				cg += s.Usage.MemoryBytes
			}
		}
	}
	n := float64(o.Density)
	out := []Result{
		{Name: fmt.Sprintf("%d idle sessions created", o.Density), Unit: "s", Value: elapsed.Seconds()},
		{Name: "host memory per idle session (MemAvailable)", Unit: "MiB", Value: float64(before-after) / n / (1 << 20),
			Note: "everything the host lost: processes, page tables, kernel objects, the daemon's share"},
		{Name: "cgroup memory per idle session", Unit: "MiB", Value: float64(cg) / n / (1 << 20),
			Note: "what the sessions' cgroups charge (agent, shell, their page cache)"},
	}
	if rssBefore > 0 {
		out = append(out, Result{Name: "daemon RSS growth per session", Unit: "MiB", Value: float64(rssOf(o.DaemonPid)-rssBefore) / n / (1 << 20)})
	}
	// Delete them all and check that the host gets its memory back.
	t1 := time.Now()
	for _, id := range ids {
		if err := c.DeleteSession(ctx, id); err != nil {
			return nil, fmt.Errorf("density: delete %s: %w", id, err)
		}
	}
	ids = nil
	out = append(out, Result{Name: fmt.Sprintf("%d sessions deleted", o.Density), Unit: "s", Value: time.Since(t1).Seconds()})
	list, err := c.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if strings.HasPrefix(s.ID, o.Prefix+"-n") {
			return nil, fmt.Errorf("density: session %s is still listed after its delete", s.ID)
		}
	}
	return out, nil
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "warren bench, %s, %s\n\n", r.Started.Format(time.RFC3339), r.Host)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tP50\tP95\tMEAN\tN\tVS FLOOR")
	for _, x := range r.Results {
		vs := ""
		if x.Ratio > 0 {
			vs = fmt.Sprintf("%.2fx %s", x.Ratio, x.Floor)
		}
		if x.Unit == "ms" {
			fmt.Fprintf(tw, "%s\t%.3f ms\t%.3f ms\t%.3f ms\t%d\t%s\n", x.Name, x.P50, x.P95, x.Mean, x.N, vs)
		} else {
			fmt.Fprintf(tw, "%s\t%.2f %s\t\t\t\t%s\n", x.Name, x.Value, x.Unit, x.Note)
		}
	}
	return tw.Flush()
}

// WriteJSON prints the report for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// deleteQuietly deletes a benchmark's session on the way out, even when the
// benchmark was canceled; a session left behind is named in the log of the
// daemon, whose reaper removes it at its TTL.
func deleteQuietly(ctx context.Context, c *client.Client, id string) {
	_ = c.DeleteSession(context.WithoutCancel(ctx), id)
}
