package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

func newPortForwardCommand(a *app) *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:   "port-forward [flags] SESSION [LOCAL:]REMOTE...",
		Short: "Forward local TCP ports to ports inside a session",
		Long: `Listen on local TCP ports and forward every connection to a port on the
loopback of a session, through the daemon (raw TCP carried over a
WebSocket: GET /v1/sessions/{id}/port-forward/{port}), like kubectl
port-forward. It works in every network mode of the session, none included:
the daemon connects from inside the sandbox.

Each mapping is LOCAL:REMOTE, or REMOTE alone for the same port number on
both sides; LOCAL 0 picks a free port. It runs until interrupted. A
connection to a remote port with nothing listening is closed at once, with
a note on stderr.`,
		Example: `  warren port-forward dev 9000:8000
  warren port-forward dev 5432 0:6379 --address 0.0.0.0`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			type mapping struct{ local, remote int }
			var maps []mapping
			for _, m := range args[1:] {
				l, r, ok := strings.Cut(m, ":")
				if !ok {
					l, r = m, m
				}
				lp, lerr := strconv.Atoi(l)
				rp, rerr := strconv.Atoi(r)
				if lerr != nil || rerr != nil || lp < 0 || lp > 65535 || rp < 1 || rp > 65535 {
					return fmt.Errorf("port mapping %q: want [LOCAL:]REMOTE, ports from 1 to 65535 (LOCAL 0: any free port)", m)
				}
				maps = append(maps, mapping{lp, rp})
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c := a.client()
			if _, err := c.GetSession(ctx, id); err != nil {
				return err
			}
			var lns []net.Listener
			defer func() {
				for _, ln := range lns {
					ln.Close()
				}
			}()
			for _, m := range maps {
				ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(m.local)))
				if err != nil {
					return err
				}
				lns = append(lns, ln)
				fmt.Fprintf(a.stdout, "Forwarding from %s -> %d\n", ln.Addr(), m.remote)
			}
			var wg sync.WaitGroup
			for i, ln := range lns {
				remote := maps[i].remote
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						lc, err := ln.Accept()
						if err != nil {
							return // closed at the end
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							defer lc.Close()
							// An interrupt ends the connections in flight too.
							stop := context.AfterFunc(ctx, func() { lc.Close() })
							defer stop()
							rc, err := c.PortForward(ctx, id, remote)
							if err != nil {
								a.warn("forward %s to port %d of session %s: %v", lc.RemoteAddr(), remote, id, err)
								return
							}
							splice(lc, rc)
						}()
					}
				}()
			}
			<-ctx.Done()
			for _, ln := range lns {
				ln.Close()
			}
			wg.Wait()
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local address to listen on")
	return cmd
}

// splice copies between a and b both ways until either side ends, then
// closes both.
func splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	cp := func(dst, src io.ReadWriteCloser) {
		_, _ = io.Copy(dst, src) // either side ending ends the forward
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}
