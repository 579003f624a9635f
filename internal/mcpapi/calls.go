package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errClientCancelled is why a call that the client cancelled ended.
var errClientCancelled = errors.New("the client cancelled the call (notifications/cancelled)")

// calls are the tools/call requests in flight over HTTP, by caller and
// JSON-RPC id, so that a notifications/cancelled, which a stateless
// endpoint receives in a POST (and an SDK session) of its own, finds the
// call it names.
type calls struct {
	mu sync.Mutex
	m  map[string][]*inflight // guarded by mu; by caller "\x00" id
}

// inflight is one call in flight.
type inflight struct{ cancel context.CancelCauseFunc }

func newCalls() *calls { return &calls{m: map[string][]*inflight{}} }

// boundKey keys the context a tool call is bound to (see callContext).
type boundKey struct{}

// bind registers a call and returns the request context to serve it with:
// it carries a context that ends when the request's does (the client hung
// up) or when cancel names the call. done unregisters the call.
func (c *calls) bind(ctx context.Context, caller, id string) (_ context.Context, done func()) {
	callCtx, cancel := context.WithCancelCause(ctx)
	key := caller + "\x00" + id
	call := &inflight{cancel: cancel}
	c.mu.Lock()
	c.m[key] = append(c.m[key], call)
	c.mu.Unlock()
	return context.WithValue(ctx, boundKey{}, callCtx), func() {
		c.mu.Lock()
		c.m[key] = slices.DeleteFunc(c.m[key], func(q *inflight) bool { return q == call })
		if len(c.m[key]) == 0 {
			delete(c.m, key)
		}
		c.mu.Unlock()
		cancel(nil)
	}
}

// cancel cancels the caller's call with id, if exactly one is in flight,
// and returns how many there were. Two clients of the same key may use the
// same ids; which one meant a cancel cannot be told, so none is cancelled.
func (c *calls) cancel(caller, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.m[caller+"\x00"+id]
	if len(l) == 1 {
		l[0].cancel(errClientCancelled)
	}
	return len(l)
}

// callContext returns the context a tool runs with: ctx, ended also when
// the context that bind attached to the call's request ends. Over stdio
// there is none, and the SDK's own cancellation applies.
func callContext(ctx context.Context) (context.Context, func()) {
	bound, ok := ctx.Value(boundKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(bound, func() { cancel(context.Cause(bound)) })
	return ctx, func() { stop(); cancel(nil) }
}

// reportProgress sends notifications/progress for the call with token
// every interval until the returned function is called or ctx ends: how
// long the tool has run, so that a host that resets its request timeout
// on progress waits for a long command.
func reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, tool string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			el := time.Since(start)
			// A failed send (the client went away) ends nothing: the call's
			// own context says whether it goes on.
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      el.Seconds(),
				Message:       fmt.Sprintf("%s running for %s", tool, el.Round(time.Second)),
			})
		}
	})
	return func() { close(done); wg.Wait() }
}
