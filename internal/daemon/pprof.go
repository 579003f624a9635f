package daemon

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's profiler on the configured loopback address, for
// profiling the hot paths (create, exec, file I/O) on the host:
// go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=10.
// It runs until the daemon stops; nil if none is configured.
func (d *Daemon) servePprof() (*http.Server, error) {
	if d.cfg.PprofListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", d.cfg.PprofListen)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	d.pprofAddr.Store(ln.Addr().String())
	go srv.Serve(ln)
	d.log.Info("profiler serving", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return srv, nil
}

// PprofAddr is the profiler's address, "" when it is off (or not yet
// serving).
func (d *Daemon) PprofAddr() string {
	a, _ := d.pprofAddr.Load().(string)
	return a
}
