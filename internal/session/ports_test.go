package session_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// TestPorts lists and dials what a session's fake sandbox serves, from a
// loopback listener of the test.
func TestPorts(t *testing.T) {
	f := start(t, session.Config{}, nil)
	info := mustCreate(t, f.m, "a", &session.CreateRequest{ID: "x"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	f.rt.Sandbox(info.Name).ServePort(8000, ln.Addr().String())

	ports, err := f.m.Ports(bg, "a", "x")
	if err != nil || len(ports) != 1 || ports[0].Port != 8000 || ports[0].LoopbackOnly || ports[0].Public {
		t.Fatalf("Ports = %+v, %v", ports, err)
	}
	c, err := f.m.DialPort(bg, "a", "x", 8000)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hi"))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Errorf("echo = %q, %v", buf, err)
	}
	c.Close()
	c.Close() // a second close releases nothing more

	_, err = f.m.DialPort(bg, "a", "x", 8001)
	wantClass(t, "DialPort(nothing listening)", err, errdefs.ErrUnavailable)
	_, err = f.m.DialPort(bg, "a", "x", 70000)
	wantClass(t, "DialPort(70000)", err, errdefs.ErrInvalidArgument)
	_, err = f.m.DialPort(bg, "b", "x", 8000)
	wantClass(t, "DialPort(another tenant's)", err, errdefs.ErrNotFound)
	_, err = f.m.Ports(bg, "b", "x")
	wantClass(t, "Ports(another tenant's)", err, errdefs.ErrNotFound)
}

// TestPublicPorts: only tenants allowed to may publish a port; a public
// port is found by session id, so two tenants cannot publish the same;
// deleting the session ends it.
func TestPublicPorts(t *testing.T) {
	f := fakes(t)
	f.tenants = &tenants{limits: map[string]session.TenantLimits{"a": {PublicPorts: true}, "c": {PublicPorts: true}}}
	start(t, session.Config{}, f)
	for _, tn := range []string{"a", "b", "c"} {
		mustCreate(t, f.m, tn, &session.CreateRequest{ID: "x"})
	}
	_, err := f.m.SetPortPublic(bg, "b", "x", 8000, true)
	wantClass(t, "SetPortPublic(tenant not allowed)", err, errdefs.ErrPermissionDenied)
	if _, ok := f.m.PublicPort("x", 8000); ok {
		t.Fatal("a refused port is public")
	}
	p, err := f.m.SetPortPublic(bg, "a", "x", 8000, true)
	if err != nil || !p.Public || p.Port != 8000 || len(p.Addresses) != 0 {
		t.Fatalf("SetPortPublic = %+v, %v", p, err)
	}
	if tn, ok := f.m.PublicPort("x", 8000); !ok || tn != "a" {
		t.Errorf("PublicPort = %q, %v; want tenant a", tn, ok)
	}
	if _, ok := f.m.PublicPort("x", 8001); ok {
		t.Error("another port of the session is public")
	}
	ports, err := f.m.Ports(bg, "a", "x")
	if err != nil || len(ports) != 1 || !ports[0].Public {
		t.Errorf("Ports = %+v, %v; want the public port listed", ports, err)
	}
	_, err = f.m.SetPortPublic(bg, "c", "x", 8000, true)
	wantClass(t, "SetPortPublic(the same id and port of another tenant)", err, errdefs.ErrConflict)
	if _, err := f.m.SetPortPublic(bg, "a", "x", 8000, true); err != nil {
		t.Errorf("SetPortPublic again = %v", err)
	}
	_, err = f.m.SetPortPublic(bg, "a", "x", 0, true)
	wantClass(t, "SetPortPublic(port 0)", err, errdefs.ErrInvalidArgument)

	if err := f.m.Delete(bg, "a", "x"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.m.PublicPort("x", 8000); ok {
		t.Error("a deleted session's port is still public")
	}
	// Making a port private needs no permission.
	if _, err := f.m.SetPortPublic(bg, "b", "x", 8000, false); err != nil {
		t.Errorf("SetPortPublic(false) = %v", err)
	}
}

// TestPortConnKeepsSessionInUse: an open connection to a session's port
// (a browser tab, a port-forward) keeps the session from its idle TTL;
// once closed, the session idles out.
func TestPortConnKeepsSessionInUse(t *testing.T) {
	f := start(t, session.Config{ReapInterval: 50 * time.Millisecond}, nil)
	info := mustCreate(t, f.m, "a", &session.CreateRequest{ID: "x", IdleTTL: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	f.rt.Sandbox(info.Name).ServePort(8000, ln.Addr().String())
	c, err := f.m.DialPort(bg, "a", "x", 8000)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := f.m.Get(bg, "a", "x"); err != nil {
		t.Fatalf("a session with an open port connection was reaped: %v", err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := f.m.Get(bg, "a", "x"); errdefs.Is(err, errdefs.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the session did not idle out after its port connection closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
