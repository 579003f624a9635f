package daemon_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// The fuzz run's knobs: WARREN_FUZZ_SEED replays a run (its seed is in
// the log), WARREN_FUZZ_DURATION makes it longer than the default few
// seconds.
const (
	fuzzDefaultSeed     = 20
	fuzzDefaultDuration = 6 * time.Second
	fuzzWorkers         = 2
	// fuzzHang is how long the daemon may take to begin its answer to
	// one request before the run calls it a hang. The longest bounded
	// wait is a stdin write to a process that does not read: up to 10 s
	// for the turn behind another such write, and 10 s for its own.
	fuzzHang = 30 * time.Second
)

// oaSchema, oaParam and oaOp are the parts of api/openapi.yaml the fuzzer
// generates requests from.
type oaSchema struct {
	Type                 string               `yaml:"type"`
	Format               string               `yaml:"format"`
	Ref                  string               `yaml:"$ref"`
	Enum                 []any                `yaml:"enum"`
	Items                *oaSchema            `yaml:"items"`
	Properties           map[string]*oaSchema `yaml:"properties"`
	AdditionalProperties any                  `yaml:"additionalProperties"`
	AllOf                []*oaSchema          `yaml:"allOf"`
	OneOf                []*oaSchema          `yaml:"oneOf"`
}

type oaParam struct {
	Ref    string    `yaml:"$ref"`
	Name   string    `yaml:"name"`
	In     string    `yaml:"in"`
	Schema *oaSchema `yaml:"schema"`
}

type oaOp struct {
	OperationID string    `yaml:"operationId"`
	Parameters  []oaParam `yaml:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema *oaSchema `yaml:"schema"`
		} `yaml:"content"`
	} `yaml:"requestBody"`

	method, path string
}

type oaDoc struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas    map[string]*oaSchema `yaml:"schemas"`
		Parameters map[string]oaParam   `yaml:"parameters"`
	} `yaml:"components"`
}

// loadOperations parses the OpenAPI document into its operations, path
// parameters merged into each, sorted so a seed means the same run.
func loadOperations(t *testing.T) (*oaDoc, []*oaOp) {
	t.Helper()
	var doc oaDoc
	if err := yaml.Unmarshal(api.OpenAPIYAML, &doc); err != nil {
		t.Fatalf("parse api/openapi.yaml: %v", err)
	}
	var ops []*oaOp
	for path, item := range doc.Paths {
		var shared []oaParam
		if n, ok := item["parameters"]; ok {
			if err := n.Decode(&shared); err != nil {
				t.Fatalf("%s parameters: %v", path, err)
			}
		}
		for method, n := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue // parameters, summary, description
			}
			op := &oaOp{}
			if err := n.Decode(op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			op.method, op.path = strings.ToUpper(method), path
			op.Parameters = append(slices.Clone(shared), op.Parameters...)
			for i, p := range op.Parameters {
				if p.Ref != "" {
					op.Parameters[i] = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
			}
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].method+ops[i].path < ops[j].method+ops[j].path })
	return &doc, ops
}

// fuzzer makes hostile requests from the API description.
type fuzzer struct {
	doc *oaDoc
	rng *rand.Rand
	h   *daemontest.Harness

	deleting bool // the request being made is a DELETE

	mu        sync.Mutex // guards session and proc
	session   string     // a live session the requests may hit
	proc      string     // a process in it
	recreated int
}

func (f *fuzzer) pick(vals ...string) string { return vals[f.rng.IntN(len(vals))] }

// hostileStrings go anywhere a string goes.
var hostileStrings = []string{
	"", " ", "a", "..", "../../../../etc/passwd", "/etc/shadow", "/proc/self/fd/0", "/proc/1/environ",
	"/dev/zero", "/dev/null", "%00", "a\x00b", "ü\u202e", "\xff\xfe", strings.Repeat("a", 5000),
	"/" + strings.Repeat("d/", 2000), "${HOME}", "$(reboot)", "`id`", "-rf", "\n", "0", "-1", "true", "null",
	"p1", "base", "s-nosuch", "KILL", "SIGTERM", "999", "1e999", "{}", "[]",
}

// hugeNumbers are the numeric literals that wrap, overflow or mislead.
var hugeNumbers = []string{
	"0", "1", "-1", "2147483648", "4294967296", "18446744074", "18446744073710", "9007199254740993",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551616",
	"1e30", "1e400", "-1e400", "0.5", "-0.0", "1E2", "100000000000000000000000000000",
}

// pathValue is a value for the path parameter name.
func (f *fuzzer) pathValue(name string) string {
	f.mu.Lock()
	sess, proc := f.session, f.proc
	f.mu.Unlock()
	r := f.rng.IntN(10)
	switch {
	case name == "id" && r < 6 && (!f.deleting || f.rng.IntN(4) == 0):
		// Deleting the live session is tried, but seldom: the
		// other operations need it.
		return sess
	case name == "pid" && r < 5:
		return proc
	case name == "pid" && r < 7:
		return f.pick("p1", "p2", "p99999", "0", "-1", "18446744073709551616")
	case r < 7:
		return f.pick("nosuch", "s-nosuch", "x", "wrn", "abcdefghijkl", "python:3.12", "snap1", "ws1", "t1")
	}
	// Escaped, so that it reaches the operation's handler rather than
	// another route.
	return url.PathEscape(f.pick(hostileStrings...))
}

// queryValue is a value for a query parameter of schema s.
func (f *fuzzer) queryValue(s *oaSchema) string {
	if f.rng.IntN(3) == 0 {
		return f.pick(hostileStrings...)
	}
	switch {
	case s == nil:
	case s.Type == "integer" || s.Type == "number":
		return f.pick(hugeNumbers...)
	case s.Type == "boolean":
		return f.pick("true", "false", "1", "yes", "")
	case len(s.Enum) > 0:
		return fmt.Sprint(s.Enum[f.rng.IntN(len(s.Enum))])
	}
	return f.pick("/tmp", "/tmp/x", "/workspace", "x", "/", "/etc/hostname", "/proc/self/maps", "/dev/zero", "/tmp/../../..")
}

func (f *fuzzer) resolve(s *oaSchema) *oaSchema {
	for i := 0; s != nil && s.Ref != "" && i < 10; i++ {
		s = f.doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// value generates a JSON value for schema s, sometimes of the wrong type.
func (f *fuzzer) value(s *oaSchema, depth int) any {
	s = f.resolve(s)
	if s == nil || depth > 6 {
		return nil
	}
	if f.rng.IntN(12) == 0 {
		return f.wrongType()
	}
	if len(s.AllOf) > 0 {
		return f.value(s.AllOf[0], depth+1)
	}
	if len(s.OneOf) > 0 {
		return f.value(s.OneOf[f.rng.IntN(len(s.OneOf))], depth+1)
	}
	if len(s.Enum) > 0 && f.rng.IntN(3) > 0 {
		return s.Enum[f.rng.IntN(len(s.Enum))]
	}
	switch s.Type {
	case "object", "":
		out := map[string]any{}
		for _, name := range sortedKeys(s.Properties) {
			if f.rng.IntN(3) > 0 {
				out[name] = f.value(s.Properties[name], depth+1)
			}
		}
		if ap, ok := s.AdditionalProperties.(map[string]any); ok && ap != nil {
			for range f.rng.IntN(3) {
				out[f.pick("A", "PATH", "k", "warren.dev/x", "a=b", "", "LD_PRELOAD")] = f.pick(hostileStrings...)
			}
		}
		return out
	case "array":
		var out []any
		for range f.rng.IntN(4) {
			out = append(out, f.value(s.Items, depth+1))
		}
		return out
	case "integer", "number":
		return json.Number(f.pick(hugeNumbers...))
	case "boolean":
		return f.rng.IntN(2) == 0
	case "string":
		if s.Format == "byte" && f.rng.IntN(2) == 0 {
			return f.pick("aGk=", "!!!", "aGk", "")
		}
		if f.rng.IntN(3) == 0 {
			return f.pick("echo hi", "true", "cat", "ls /", "exit 3", "base", "none", "rw", "ro")
		}
		return f.pick(hostileStrings...)
	}
	return nil
}

func (f *fuzzer) wrongType() any {
	switch f.rng.IntN(6) {
	case 0:
		return json.Number(f.pick(hugeNumbers...))
	case 1:
		return f.pick(hostileStrings...)
	case 2:
		return []any{1, "a", nil}
	case 3:
		return map[string]any{"x": 1}
	case 4:
		return true
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sandboxMakers are the operations whose valid requests make sandboxes,
// images or snapshots: costly on a shared machine, so most of their
// bodies get an unknown field (refused at decoding). Pulls always do:
// the test has no registry to reach.
var sandboxMakers = map[string]int{"createSession": 4, "run": 4, "forkSession": 8, "snapshotSession": 8,
	"createWorkspace": 4, "pullImage": 0, "importImage": 2, "importSnapshot": 2}

// body makes a request body for op, and its content type.
func (f *fuzzer) body(op *oaOp) ([]byte, string) {
	if op.RequestBody == nil {
		if f.rng.IntN(8) == 0 {
			return []byte(`{"unexpected":"body"}`), "application/json"
		}
		return nil, ""
	}
	types := sortedKeys(op.RequestBody.Content)
	ct := types[f.rng.IntN(len(types))]
	if ct != "application/json" {
		return f.rawBody(ct), ct
	}
	v := f.value(op.RequestBody.Content[ct].Schema, 0)
	if n, costly := sandboxMakers[op.OperationID]; costly && (n == 0 || f.rng.IntN(n) != 0) {
		if m, ok := v.(map[string]any); ok {
			m["fuzz_unknown_field"] = 1
		} else {
			v = map[string]any{"fuzz_unknown_field": 1}
		}
	}
	b, _ := json.Marshal(v)
	switch f.rng.IntN(20) {
	case 0:
		b = b[:f.rng.IntN(len(b)+1)] // truncated
	case 1:
		b = append(b, `{"comm`...) // a complete object, then a truncated one
	case 2:
		b = append(b, " garbage"...)
	case 3:
		b = []byte(f.pick("", "null", "[]", `"x"`, "1", "{", "}", "\x00", "{\"a\":1,}", "\xef\xbb\xbf{}"))
	case 4:
		b = append(bytes.Repeat([]byte("["), 100000), bytes.Repeat([]byte("]"), 100000)...)
	case 5:
		b = f.randomBytes(4096)
	}
	if f.rng.IntN(15) == 0 {
		ct = f.pick("text/plain", "application/x-www-form-urlencoded", "", "application/json; charset=latin1")
	}
	return b, ct
}

// rawBody makes an upload of content type ct: random bytes, a tar cut
// short, a tar with hostile names, or nothing.
func (f *fuzzer) rawBody(ct string) []byte {
	switch f.rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return f.randomBytes(64 << 10)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for range 1 + f.rng.IntN(3) {
		name := f.pick("a.txt", "../escape", "/abs", "d/", "link", strings.Repeat("n", 300), "dev", "fifo")
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(f.rng.IntN(2000))}
		switch name {
		case "d/":
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		case "link":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, "/etc/shadow", 0
		case "dev":
			hdr.Typeflag, hdr.Devmajor, hdr.Size = tar.TypeChar, 1, 0
		case "fifo":
			hdr.Typeflag, hdr.Size = tar.TypeFifo, 0
		}
		tw.WriteHeader(hdr)
		tw.Write(f.randomBytes(int(hdr.Size)))
	}
	tw.Close()
	b := buf.Bytes()
	if f.rng.IntN(2) == 0 {
		b = b[:f.rng.IntN(len(b))] // ends early
	}
	return b
}

func (f *fuzzer) randomBytes(max int) []byte {
	b := make([]byte, f.rng.IntN(max+1))
	for i := range b {
		b[i] = byte(f.rng.Uint32())
	}
	return b
}

// request makes one hostile request for op.
func (f *fuzzer) request(ctx context.Context, op *oaOp) (*http.Request, string) {
	path := op.path
	f.deleting = op.method == "DELETE"
	q := url.Values{}
	for _, p := range op.Parameters {
		switch p.In {
		case "path":
			path = strings.ReplaceAll(path, "{"+p.Name+"}", f.pathValue(p.Name))
		case "query":
			if f.rng.IntN(4) > 0 {
				q.Set(p.Name, f.queryValue(p.Schema))
			}
		}
	}
	if f.rng.IntN(10) == 0 {
		q.Set(f.pick("zzz", "path", "offset", "follow", "token"), f.pick(hostileStrings...))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, ct := f.body(op)
	req, err := http.NewRequestWithContext(ctx, op.method, f.h.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, ""
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if f.rng.IntN(3) == 0 {
		req.Header.Set("Accept", f.pick("text/event-stream", "application/octet-stream", "*/*", "text/html"))
	}
	shown := body
	if len(shown) > 300 {
		shown = append(shown[:300:300], "..."...)
	}
	return f.h.Authorize(req), fmt.Sprintf("%s %s (%s, %d bytes) %q", op.method, path, ct, len(body), shown)
}

// check sends req and says what is wrong with the answer, if anything,
// and the answer's status (0 for none).
// A success may be an endless stream: cancel ends the request once a
// second of it was read.
func (f *fuzzer) check(client *http.Client, req *http.Request, cancel func()) (string, int) {
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
			return fmt.Sprintf("no answer within %v: %v", fuzzHang, err), 0
		}
		return fmt.Sprintf("no answer: %v", err), 0
	}
	defer resp.Body.Close()
	if resp.StatusCode < 400 {
		// A success may be a stream (server-sent events, a followed
		// process, a download of /dev/zero): a little of it is enough.
		stop := time.AfterFunc(time.Second, cancel)
		io.CopyN(io.Discard, resp.Body, 64<<10)
		stop.Stop()
		return "", resp.StatusCode
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Sprintf("%d: reading the error: %v", resp.StatusCode, err), resp.StatusCode
	}
	var e api.Error
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Sprintf("%d with Content-Type %q: %.200q", resp.StatusCode, ct, b), resp.StatusCode
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		return fmt.Sprintf("%d without the error envelope: %.200q", resp.StatusCode, b), resp.StatusCode
	}
	if resp.StatusCode >= 500 {
		return fmt.Sprintf("%d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message), resp.StatusCode
	}
	return "", resp.StatusCode
}

// ensureSession makes sure the fuzzer has a live session with a process
// (a request may have deleted them).
func (f *fuzzer) ensureSession(t *testing.T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.session != "" {
		if _, err := f.h.Client.GetSession(t.Context(), f.session); err == nil {
			return
		}
	}
	s, err := f.h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Errorf("create the fuzzer's session: %v", err)
		return
	}
	f.session = s.ID
	f.recreated++
	r := as(t, f.h, bearer(f.h.AdminKey), "POST", "/v1/sessions/"+s.ID+"/processes", `{"command":"cat >/dev/null","stdin":true}`)
	var p api.Process
	if json.Unmarshal(r.body, &p) != nil || p.ID == "" {
		t.Errorf("start the fuzzer's process: %d %s", r.status, r.body)
	}
	f.proc = p.ID
}

// TestFuzzAPI sends seeded random hostile requests to every operation of
// api/openapi.yaml on a real daemon: malformed and boundary bodies,
// truncated and trailing bodies, wrong types, huge numbers, hostile paths
// and unknown ids. Every answer must be below 500 (client input is never
// a server fault), every error must come in the envelope, no request may
// go unanswered for fuzzHang, and the daemon must serve normally after.
// A failure names the seed and the request; WARREN_FUZZ_SEED=N replays.
func TestFuzzAPI(t *testing.T) {
	seed := uint64(fuzzDefaultSeed)
	if v := os.Getenv("WARREN_FUZZ_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_FUZZ_SEED=%q: %v", v, err)
		}
		seed = n
	}
	dur := fuzzDefaultDuration
	if v := os.Getenv("WARREN_FUZZ_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WARREN_FUZZ_DURATION=%q: %v", v, err)
		}
		dur = d
	}
	t.Logf("seed %d (replay with WARREN_FUZZ_SEED=%d), %v", seed, seed, dur)

	// Without a rate limit, so that the requests reach the handlers
	// (the limit has tests of its own).
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.RateLimit = 0 })
	doc, ops := loadOperations(t)
	if len(ops) < 50 {
		t.Fatalf("only %d operations in api/openapi.yaml", len(ops))
	}
	client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: fuzzHang, MaxIdleConnsPerHost: fuzzWorkers}}

	var (
		mu       sync.Mutex
		failures []string
		sent     int
		perOp    = map[string]int{}
		statuses = map[int]int{}
		// The slowest request, for the log: the run's length is the
		// sum of such.
		slowest     time.Duration
		slowestWhat string
	)
	base := &fuzzer{doc: doc, h: h}
	base.ensureSession(t)
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range fuzzWorkers {
		f := &fuzzer{doc: doc, h: h, rng: rand.New(rand.NewPCG(seed, uint64(w)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every operation at least twice per worker, then more
			// until the time is up.
			for i := 0; i < 2*len(ops) || time.Now().Before(deadline); i++ {
				op := ops[(i+w*7)%len(ops)]
				base.mu.Lock()
				f.session, f.proc = base.session, base.proc
				base.mu.Unlock()
				ctx, cancel := context.WithTimeout(t.Context(), 2*fuzzHang)
				req, what := f.request(ctx, op)
				if req == nil {
					cancel()
					continue
				}
				began := time.Now()
				problem, status := f.check(client, req, cancel)
				took := time.Since(began)
				cancel()
				mu.Lock()
				sent++
				perOp[op.OperationID]++
				statuses[status]++
				if took > slowest {
					slowest, slowestWhat = took, what
				}
				if problem != "" && len(failures) < 20 {
					failures = append(failures, fmt.Sprintf("worker %d, request %d: %s\n\t%s", w, i, problem, what))
				}
				mu.Unlock()
				if op.method == "DELETE" && strings.HasPrefix(op.path, "/v1/sessions/{id}") {
					base.ensureSession(t)
				}
			}
		}()
	}
	wg.Wait()
	for _, op := range ops {
		if perOp[op.OperationID] == 0 {
			t.Errorf("operation %s (%s %s) was never tried", op.OperationID, op.method, op.path)
		}
	}
	t.Logf("%d requests over %d operations, answered %v; the fuzzer's session was made %d times", sent, len(ops), statuses, base.recreated)
	t.Logf("the slowest request took %v: %.300s", slowest, slowestWhat)
	for _, f := range failures {
		t.Errorf("seed %d: %s", seed, f)
	}

	// The daemon still serves.
	base.ensureSession(t)
	res, err := h.Client.Exec(t.Context(), base.session, &api.ExecRequest{Command: "echo still here"})
	if err != nil || strings.TrimSpace(res.Stdout) != "still here" {
		t.Errorf("exec after the fuzz run: %v %+v", err, res)
	}
	if r := as(t, h, nil, "GET", "/healthz", ""); r.status != 200 {
		t.Errorf("healthz after the fuzz run: %d %s", r.status, r.body)
	}
}
