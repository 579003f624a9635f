package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// TestAmendAndOnExpire checks that Amend sets labels (the daemon's own
// included) and moves a session's end both ways, that the store keeps
// both, and that an OnExpire that takes care of a session keeps the
// reaper from deleting it.
func TestAmendAndOnExpire(t *testing.T) {
	f := start(t, session.Config{ReapInterval: 10 * time.Millisecond}, nil)
	info := mustCreate(t, f.m, "t", &session.CreateRequest{ID: "a", Labels: map[string]string{"k": "v"}})
	end := time.Now().Add(time.Hour)
	got, err := f.m.Amend(bg, "t", "a", session.Amendment{Labels: map[string]string{"warren.dev/x": "1", "k": ""}, ExpiresAt: end})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["warren.dev/x"] != "1" || got.Labels["k"] != "" || !got.ExpiresAt().Equal(end) {
		t.Fatalf("after Amend: labels %v, expires %v, want %v", got.Labels, got.ExpiresAt(), end)
	}
	if rec, err := f.store.GetSession(bg, "t", "a"); err != nil || rec.Labels["warren.dev/x"] != "1" || !rec.ExpiresAt().Equal(end) {
		t.Fatalf("the store has %+v, %v", rec, err)
	}
	for _, bad := range []session.Amendment{
		{Labels: map[string]string{"bad key": "v"}},
		{ExpiresAt: info.CreatedAt.Add(365 * 24 * time.Hour)},
	} {
		if _, err := f.m.Amend(bg, "t", "a", bad); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Amend(%+v) = %v, want invalid_argument", bad, err)
		}
	}
	if _, err := f.m.Amend(bg, "t", "nope", session.Amendment{}); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Amend of a missing session = %v", err)
	}

	// Ends now: an OnExpire that keeps it is asked, again and again,
	// until it lets go.
	var asked atomic.Int32
	f.m.OnExpire(func(ctx context.Context, s *session.Session) bool {
		return s.ID == "a" && asked.Add(1) < 3
	})
	if _, err := f.m.Amend(bg, "t", "a", session.Amendment{ExpiresAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := f.m.Get(bg, "t", "a"); errdefs.Is(err, errdefs.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session outlived its end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := asked.Load(); n < 3 {
		t.Fatalf("OnExpire was asked %d times before the session went, want 3", n)
	}
}

// TestPauseNeedsAFreezer checks that a runtime whose sandboxes cannot
// freeze says so, and that resuming a session that is not paused does
// nothing. (test/e2b pauses real sandboxes.)
func TestPauseNeedsAFreezer(t *testing.T) {
	f := start(t, session.Config{}, nil)
	mustCreate(t, f.m, "t", &session.CreateRequest{ID: "a"})
	if err := f.m.Pause(bg, "t", "a"); !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Pause = %v, want unavailable", err)
	}
	if ok, err := f.m.Resume(bg, "t", "a"); ok || err != nil {
		t.Fatalf("Resume of a running session = %v, %v", ok, err)
	}
	if recs := f.m.RecordsWithID("a"); len(recs) != 1 || recs[0].Tenant != "t" {
		t.Fatalf("RecordsWithID = %+v", recs)
	}
	if recs := f.m.Records("other"); len(recs) != 0 {
		t.Fatalf("Records(other) = %+v", recs)
	}
}
