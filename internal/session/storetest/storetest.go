// Package storetest is the conformance suite for session.Store. Every
// implementation runs it from its own tests (containerd's snapshotter
// testsuite is the model), so they all keep one contract.
//
// Beyond what the Store interface documents, the suite pins down:
//   - every field round-trips exactly; times compare Equal at nanosecond
//     precision and come back in UTC, and the zero time stays zero;
//   - nil and empty Env and Labels both come back nil, never as an empty
//     map, so a record reads back the same whichever the caller stored;
//   - a store keeps no reference to the caller's Session or maps;
//   - a Name held by any tenant's session is ErrConflict, like a (tenant,
//     id) that exists;
//   - a nil session, or an empty tenant, id or name, is ErrInvalidArgument
//     (tenant "" means every tenant to ListSessions, so it can own nothing);
//   - 8 goroutines creating and updating at once all succeed.
package storetest

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Run runs the suite against the implementation that newStore builds.
// newStore must return a fresh, empty store each time; Run closes it when
// the subtest that asked for it ends and fails that subtest if Close
// fails. Subtests run in parallel, so newStore must be safe to call
// concurrently; t.TempDir gives each store its own place.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	t.Helper()
	cases := []struct {
		name string
		test func(t *testing.T, st session.Store)
	}{
		{"CreateGet", testCreateGet},
		{"ZeroValues", testZeroValues},
		{"CreateDuplicate", testCreateDuplicate},
		{"SameIDInTwoTenants", testSameIDInTwoTenants},
		{"DuplicateName", testDuplicateName},
		{"InvalidArgument", testInvalidArgument},
		{"Missing", testMissing},
		{"List", testList},
		{"Update", testUpdate},
		{"Delete", testDelete},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			t.Cleanup(func() {
				if err := st.Close(); err != nil {
					t.Errorf("Close() = %v, want nil", err)
				}
			})
			tc.test(t, st)
		})
	}
}

// full returns a session with every field set to a value that is not its
// zero value, named after tenant and id so that names stay unique.
func full(tenant, id string) *session.Session {
	created := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("IST", 5*3600+1800))
	return &session.Session{
		ID:          id,
		Tenant:      tenant,
		Name:        "w-" + tenant + "-" + id,
		Image:       "docker.io/library/python:3.13-slim",
		State:       session.StateFailed,
		Reason:      "agent exited: signal: killed",
		CreatedAt:   created,
		LastUsedAt:  created.Add(90*time.Second + 1),
		IdleTTL:     15*time.Minute + 1,
		MaxLifetime: 24*time.Hour + 3,
		BaseDir:     "/home/user/project",
		Env:         map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "EMPTY": ""},
		Limits:      session.Limits{MemoryMB: 512, CPUs: 1.5, Pids: 256, DiskMB: 2048},
		Network:     "bridge",
		User:        "sandbox",
		Labels:      map[string]string{"team": "ml", "ünïcödé": "✓", "quote\"key": "new\nline"},
		Pid:         424242,
	}
}

// clone returns a deep copy of s.
func clone(s *session.Session) *session.Session {
	c := *s
	c.Env = maps.Clone(s.Env)
	c.Labels = maps.Clone(s.Labels)
	return &c
}

func mustCreate(t *testing.T, st session.Store, s *session.Session) {
	t.Helper()
	if err := st.CreateSession(t.Context(), s); err != nil {
		t.Fatalf("CreateSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
	}
}

func mustUpdate(t *testing.T, st session.Store, s *session.Session) {
	t.Helper()
	if err := st.UpdateSession(t.Context(), s); err != nil {
		t.Fatalf("UpdateSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
	}
}

// checkGet fails t unless the store holds exactly want under its key.
func checkGet(t *testing.T, st session.Store, want *session.Session) {
	t.Helper()
	got, err := st.GetSession(t.Context(), want.Tenant, want.ID)
	if err != nil {
		t.Fatalf("GetSession(%q, %q) = %v, want nil", want.Tenant, want.ID, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetSession(%q, %q) mismatch (-want +got):\n%s", want.Tenant, want.ID, diff)
	}
}

// checkMissing fails t unless GetSession reports ErrNotFound.
func checkMissing(t *testing.T, st session.Store, tenant, id string) {
	t.Helper()
	got, err := st.GetSession(t.Context(), tenant, id)
	if !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetSession(%q, %q) = %v, %v, want nil, %v", tenant, id, got, err, errdefs.ErrNotFound)
	}
}

// checkUTC fails t unless every non-zero time in s is in UTC.
func checkUTC(t *testing.T, s *session.Session) {
	t.Helper()
	for field, tm := range map[string]time.Time{"CreatedAt": s.CreatedAt, "LastUsedAt": s.LastUsedAt} {
		if loc := tm.Location(); loc != time.UTC {
			t.Errorf("session %q: %s location = %v, want UTC", s.ID, field, loc)
		}
	}
}

func testCreateGet(t *testing.T, st session.Store) {
	in := full("acme", "s1")
	in.LastUsedAt = time.Now() // local, with a monotonic reading
	want := clone(in)
	mustCreate(t, st, in)

	// The store must not share the caller's maps, in either direction.
	in.Env["PATH"] = "/changed"
	in.Labels["team"] = "changed"
	checkGet(t, st, want)

	got, err := st.GetSession(t.Context(), "acme", "s1")
	if err != nil {
		t.Fatalf("GetSession(%q, %q) = %v, want nil", "acme", "s1", err)
	}
	checkUTC(t, got)
	got.Env["PATH"] = "/changed"
	checkGet(t, st, want)
}

func testZeroValues(t *testing.T, st session.Store) {
	// Only the key and the name set: zero times stay zero, nil maps stay
	// nil.
	minimal := &session.Session{Tenant: "acme", ID: "min", Name: "w-min"}
	mustCreate(t, st, minimal)
	checkGet(t, st, minimal)

	// Empty maps come back nil too.
	empty := full("acme", "empty")
	empty.Env = map[string]string{}
	empty.Labels = map[string]string{}
	mustCreate(t, st, empty)
	want := clone(empty)
	want.Env, want.Labels = nil, nil
	checkGet(t, st, want)

	// The Unix epoch is a time like any other, not the zero time.
	epoch := full("acme", "epoch")
	epoch.CreatedAt = time.Unix(0, 0)
	epoch.LastUsedAt = time.Unix(0, 1)
	mustCreate(t, st, epoch)
	checkGet(t, st, epoch)
}

func testCreateDuplicate(t *testing.T, st session.Store) {
	orig := full("acme", "s1")
	mustCreate(t, st, orig)

	dup := full("acme", "s1")
	dup.Name = "w-other"
	dup.Image = "alpine:3"
	if err := st.CreateSession(t.Context(), dup); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("CreateSession(%q, %q) again = %v, want %v", dup.Tenant, dup.ID, err, errdefs.ErrConflict)
	}
	checkGet(t, st, orig)

	// The rejected session's name stays free.
	other := full("acme", "s2")
	other.Name = dup.Name
	mustCreate(t, st, other)
}

func testSameIDInTwoTenants(t *testing.T, st session.Store) {
	a := full("acme", "s1")
	b := full("globex", "s1")
	b.Image = "alpine:3"
	mustCreate(t, st, a)
	mustCreate(t, st, b)
	checkGet(t, st, a)
	checkGet(t, st, b)
}

func testDuplicateName(t *testing.T, st session.Store) {
	a := full("acme", "s1")
	mustCreate(t, st, a)

	b := full("globex", "s2")
	b.Name = a.Name
	if err := st.CreateSession(t.Context(), b); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("CreateSession(%q, %q) with the name of (%q, %q) = %v, want %v",
			b.Tenant, b.ID, a.Tenant, a.ID, err, errdefs.ErrConflict)
	}
	checkMissing(t, st, b.Tenant, b.ID)
	checkGet(t, st, a)
}

func testInvalidArgument(t *testing.T, st session.Store) {
	withKey := func(tenant, id, name string) *session.Session {
		s := full("acme", "s1")
		s.Tenant, s.ID, s.Name = tenant, id, name
		return s
	}
	tests := []struct {
		name string
		s    *session.Session
	}{
		{"nil", nil},
		{"no tenant", withKey("", "s1", "w-1")},
		{"no id", withKey("acme", "", "w-1")},
		{"no name", withKey("acme", "s1", "")},
	}
	for _, tc := range tests {
		if err := st.CreateSession(t.Context(), tc.s); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CreateSession(%s) = %v, want %v", tc.name, err, errdefs.ErrInvalidArgument)
		}
	}

	mustCreate(t, st, withKey("acme", "s1", "w-1"))
	for _, tc := range tests {
		if err := st.UpdateSession(t.Context(), tc.s); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("UpdateSession(%s) = %v, want %v", tc.name, err, errdefs.ErrInvalidArgument)
		}
	}
	checkGet(t, st, withKey("acme", "s1", "w-1"))
	sessions, err := st.ListSessions(t.Context(), "")
	if err != nil || len(sessions) != 1 {
		t.Errorf("ListSessions(%q) = %d sessions, %v, want 1, nil", "", len(sessions), err)
	}
}

func testMissing(t *testing.T, st session.Store) {
	// (acme, s1) exists, so the cases cover a missing id, a missing tenant
	// and an id that exists only in another tenant.
	mustCreate(t, st, full("acme", "s1"))
	keys := []struct{ tenant, id string }{
		{"acme", "nope"},
		{"nobody", "s1"},
		{"globex", "s1"},
		{"", "s1"},
	}
	for _, k := range keys {
		checkMissing(t, st, k.tenant, k.id)

		upd := full(k.tenant, k.id)
		upd.Name = "w-missing"
		if k.tenant != "" { // tenant "" is ErrInvalidArgument for UpdateSession
			if err := st.UpdateSession(t.Context(), upd); !errdefs.Is(err, errdefs.ErrNotFound) {
				t.Errorf("UpdateSession(%q, %q) = %v, want %v", k.tenant, k.id, err, errdefs.ErrNotFound)
			}
		}
		if err := st.DeleteSession(t.Context(), k.tenant, k.id); !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Errorf("DeleteSession(%q, %q) = %v, want %v", k.tenant, k.id, err, errdefs.ErrNotFound)
		}
	}
	// None of that touched the session that exists.
	checkGet(t, st, full("acme", "s1"))
}

func testList(t *testing.T, st session.Store) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(tenant, id string, created time.Time) *session.Session {
		s := full(tenant, id)
		s.CreatedAt = created
		return s
	}
	// Inserted out of order; ties on CreatedAt are broken by ID, also
	// across tenants (globex/a before acme/b). No two sessions tie on both,
	// so the order is fully defined.
	sessions := []*session.Session{
		at("acme", "c", base.Add(2*time.Second)),
		at("globex", "a", base.Add(time.Second)),
		at("acme", "b", base.Add(time.Second)),
		at("acme", "a", base.Add(time.Second+1)), // one nanosecond later
		at("acme", "z", time.Time{}),             // the zero time sorts first
		at("globex", "d", base.Add(2*time.Second)),
	}
	for _, s := range sessions {
		mustCreate(t, st, s)
	}
	byKey := make(map[string]*session.Session)
	for _, s := range sessions {
		byKey[s.Tenant+"/"+s.ID] = s
	}
	tests := []struct {
		tenant string
		want   []string // tenant/id
	}{
		{"acme", []string{"acme/z", "acme/b", "acme/a", "acme/c"}},
		{"globex", []string{"globex/a", "globex/d"}},
		{"", []string{"acme/z", "globex/a", "acme/b", "acme/a", "acme/c", "globex/d"}},
		{"nobody", nil},
	}
	for _, tc := range tests {
		got, err := st.ListSessions(t.Context(), tc.tenant)
		if err != nil {
			t.Errorf("ListSessions(%q) = %v, want nil", tc.tenant, err)
			continue
		}
		if !cmp.Equal(tc.want, keys(got)) {
			t.Errorf("ListSessions(%q) = %v, want %v", tc.tenant, keys(got), tc.want)
			continue
		}
		for i, k := range tc.want {
			if diff := cmp.Diff(byKey[k], got[i]); diff != "" {
				t.Errorf("ListSessions(%q)[%d] mismatch (-want +got):\n%s", tc.tenant, i, diff)
			}
		}
	}
}

// keys lists sessions as tenant/id, for messages.
func keys(sessions []*session.Session) []string {
	var ks []string
	for _, s := range sessions {
		ks = append(ks, s.Tenant+"/"+s.ID)
	}
	return ks
}

func testUpdate(t *testing.T, st session.Store) {
	s := full("acme", "s1")
	bystander := full("acme", "s2")
	mustCreate(t, st, s)
	mustCreate(t, st, bystander)

	// Every field but the key and the (immutable) name changes.
	upd := &session.Session{
		ID:          s.ID,
		Tenant:      s.Tenant,
		Name:        s.Name,
		Image:       "alpine:3.22",
		State:       session.StateRunning,
		Reason:      "restarted",
		CreatedAt:   s.CreatedAt.Add(-time.Hour - 7),
		LastUsedAt:  s.LastUsedAt.Add(time.Hour + 11),
		IdleTTL:     time.Minute + 13,
		MaxLifetime: time.Hour + 17,
		BaseDir:     "/work",
		Env:         map[string]string{"PATH": "/bin", "NEW": "1"}, // LANG, EMPTY removed
		Limits:      session.Limits{MemoryMB: 1024, CPUs: 0.25, Pids: 64, DiskMB: 100},
		Network:     "none",
		Labels:      map[string]string{"team": "infra"},
		Pid:         99,
	}
	if diff := cmp.Diff(s, upd); diff == "" {
		t.Fatal("the test's update changes nothing")
	}
	mustUpdate(t, st, upd)
	checkGet(t, st, upd)
	checkGet(t, st, bystander)

	// Back to zero values, maps and times included.
	zero := &session.Session{ID: s.ID, Tenant: s.Tenant, Name: s.Name}
	mustUpdate(t, st, zero)
	checkGet(t, st, zero)
}

func testDelete(t *testing.T, st session.Store) {
	gone := full("acme", "s1")
	kept := full("acme", "s2")
	sameID := full("globex", "s1")
	for _, s := range []*session.Session{gone, kept, sameID} {
		mustCreate(t, st, s)
	}
	if err := st.DeleteSession(t.Context(), gone.Tenant, gone.ID); err != nil {
		t.Fatalf("DeleteSession(%q, %q) = %v, want nil", gone.Tenant, gone.ID, err)
	}
	checkMissing(t, st, gone.Tenant, gone.ID)
	if err := st.DeleteSession(t.Context(), gone.Tenant, gone.ID); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("DeleteSession(%q, %q) again = %v, want %v", gone.Tenant, gone.ID, err, errdefs.ErrNotFound)
	}
	checkGet(t, st, kept)
	checkGet(t, st, sameID)
	got, err := st.ListSessions(t.Context(), "acme")
	if err != nil {
		t.Fatalf("ListSessions(%q) = %v, want nil", "acme", err)
	}
	if diff := cmp.Diff([]string{"acme/s2"}, keys(got)); diff != "" {
		t.Errorf("ListSessions(%q) after delete mismatch (-want +got):\n%s", "acme", diff)
	}

	// The deleted session's id and name can be used again.
	mustCreate(t, st, gone)
	checkGet(t, st, gone)
}

func testConcurrent(t *testing.T, st session.Store) {
	const workers, perWorker = 8, 8
	tenants := []string{"acme", "globex"}
	final := func(w, i int) *session.Session {
		s := full(tenants[w%len(tenants)], fmt.Sprintf("w%d-s%d", w, i))
		s.State = session.StateRunning
		s.Reason = ""
		s.Pid = 1000*w + i
		s.Labels = map[string]string{"worker": fmt.Sprint(w)}
		return s
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := t.Context()
			for i := range perWorker {
				want := final(w, i)
				s := clone(want)
				s.State = session.StateCreating
				s.Pid = 0
				if err := st.CreateSession(ctx, s); err != nil {
					t.Errorf("CreateSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
					return
				}
				if _, err := st.GetSession(ctx, s.Tenant, s.ID); err != nil {
					t.Errorf("GetSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
					return
				}
				if err := st.UpdateSession(ctx, want); err != nil {
					t.Errorf("UpdateSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
					return
				}
				if _, err := st.ListSessions(ctx, s.Tenant); err != nil {
					t.Errorf("ListSessions(%q) = %v, want nil", s.Tenant, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	got, err := st.ListSessions(t.Context(), "")
	if err != nil {
		t.Fatalf("ListSessions(%q) = %v, want nil", "", err)
	}
	if len(got) != workers*perWorker {
		t.Fatalf("ListSessions(%q) = %d sessions, want %d", "", len(got), workers*perWorker)
	}
	for w := range workers {
		for i := range perWorker {
			checkGet(t, st, final(w, i))
		}
	}
}
