package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/errdefs"
)

// TestStatusOf: every class has its status, and the statuses answered
// without an envelope map back to the class that gives them.
func TestStatusOf(t *testing.T) {
	for _, c := range []*errdefs.Class{
		errdefs.ErrInvalidArgument, errdefs.ErrUnauthenticated, errdefs.ErrPermissionDenied, errdefs.ErrNotFound,
		errdefs.ErrConflict, errdefs.ErrTooLarge, errdefs.ErrResourceExhausted, errdefs.ErrUnavailable,
		errdefs.ErrInternal, errdefs.ErrCanceled,
	} {
		if got := classOfStatus(StatusOf(c)); got != c {
			t.Errorf("classOfStatus(StatusOf(%v) = %d) = %v, want %v", c, StatusOf(c), got, c)
		}
	}
	if got := classOfStatus(http.StatusMethodNotAllowed); got != errdefs.ErrInvalidArgument {
		t.Errorf("classOfStatus(405) = %v, want invalid_argument", got)
	}
}

// TestChallenge: RFC 6750 §3: no error attribute without credentials,
// invalid_token and warren's message with a credential that failed; the
// description never breaks out of its quotes.
func TestChallenge(t *testing.T) {
	err := errdefs.New(errdefs.ErrUnauthenticated, `invalid API key "x"\ü`)
	tests := []struct {
		name   string
		header func(r *http.Request)
		url    string
		want   string
	}{
		{"none", func(*http.Request) {}, "/mcp", `Bearer realm="warren"`},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrn_x") }, "/mcp",
			`Bearer realm="warren", error="invalid_token", error_description="invalid API key 'x'/?"`},
		{"x-api-key", func(r *http.Request) { r.Header.Set("X-API-Key", "wrn_x") }, "/mcp",
			`Bearer realm="warren", error="invalid_token", error_description="invalid API key 'x'/?"`},
		{"token parameter", func(*http.Request) {}, "/v1/sessions/x/shell?token=wrt_x",
			`Bearer realm="warren", error="invalid_token", error_description="invalid API key 'x'/?"`},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("POST", tc.url, nil)
		tc.header(r)
		if got := Challenge(r, err); got != tc.want {
			t.Errorf("%s: Challenge = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestCanceled: an error of a call whose client went away is canceled
// (499), not internal; a classified outcome stays what it was.
func TestCanceled(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want *errdefs.Class
	}{
		{"unclassified, client gone", gone, fmt.Errorf("exec: %w", context.Canceled), errdefs.ErrCanceled},
		{"classified cancellation, client gone", gone, errdefs.New(errdefs.ErrUnavailable, "queued: %w", context.Canceled), errdefs.ErrCanceled},
		{"not found, client gone", gone, errdefs.New(errdefs.ErrNotFound, "no session"), errdefs.ErrNotFound},
		{"cancellation, client still there", context.Background(), fmt.Errorf("x: %w", context.Canceled), errdefs.ErrInternal},
	}
	for _, tc := range tests {
		if got := ClassOf(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: ClassOf = %v, want %v", tc.name, got, tc.want)
		}
	}

	var buf bytes.Buffer
	e := New(Config{Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	h := e.Observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context()) // the client hangs up
		cancel()
		e.WriteError(w, r.WithContext(ctx), fmt.Errorf("exec: %w", context.Canceled))
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/sessions/x/exec", nil))
	if rec.Code != StatusClientClosedRequest {
		t.Errorf("status %d, want %d", rec.Code, StatusClientClosedRequest)
	}
	if strings.Contains(buf.String(), "internal error") || !strings.Contains(buf.String(), `"canceled":true`) {
		t.Errorf("log of a canceled call:\n%s\nwant an access line marked canceled and no internal error", buf.String())
	}
}

// TestAuditRecords: records carry the class of the outcome; only REST's
// carry an HTTP status, and a query reports the status REST would have
// answered for the others.
func TestAuditRecords(t *testing.T) {
	l, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := New(Config{Audit: l, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	serve := func(f func(ctx context.Context)) {
		e.Observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := e.Admit(r)
			if err != nil {
				t.Fatal(err)
			}
			f(ctx)
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", nil))
	}
	start := time.Now()
	serve(func(ctx context.Context) {
		e.Record(ctx, "grpc CreateSession", "s1", "", errdefs.New(errdefs.ErrUnavailable, "start: %w", errdefs.New(errdefs.ErrInvalidArgument, "bad")), start)
	})
	serve(func(ctx context.Context) { e.Record(ctx, "mcp exec", "s1", "", nil, start) })
	serve(func(ctx context.Context) { e.RecordHTTP(ctx, "POST /v1/keys", "", "", http.StatusCreated, start) })
	serve(func(ctx context.Context) {
		Failed(ctx, errdefs.New(errdefs.ErrNotFound, "no such image"))
		e.RecordHTTP(ctx, "POST /v1/images/pull", "", "", http.StatusOK, start)
	})
	recs, err := l.Query(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		op, tenant, outcome string
		stored, reported    int
	}
	var got []row
	for i := range recs {
		got = append(got, row{recs[i].Op, recs[i].Tenant, recs[i].Outcome, recs[i].Status, AuditStatus(&recs[i])})
	}
	want := []row{
		{"grpc CreateSession", DefaultTenant, "unavailable", 0, 503},
		{"mcp exec", DefaultTenant, "ok", 0, 200},
		{"POST /v1/keys", DefaultTenant, "ok", 201, 201},
		{"POST /v1/images/pull", DefaultTenant, "not_found", 200, 200},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records:\n got %+v\nwant %+v", got, want)
	}
	b, _ := json.Marshal(recs[0])
	if strings.Contains(string(b), `"status"`) {
		t.Errorf("a gRPC record on disk carries an HTTP status: %s", b)
	}
}
