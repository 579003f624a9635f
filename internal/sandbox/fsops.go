package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// FS runs one filesystem call of E2B's envd in the agent.
func (sb *Sandbox) FS(ctx context.Context, req *agentproto.FSRequest) (*agentproto.FSReply, error) {
	s, err := sb.conn.Call(agentproto.OpFS, req, nil)
	if err != nil {
		return nil, sb.callError(ctx, nil, err)
	}
	// A large listing arrives as Data before the Reply.
	r := agentproto.NewDataReader(ctx, s)
	data, err := io.ReadAll(io.LimitReader(r, maxListBytes+1))
	if err != nil {
		return nil, sb.callError(ctx, s, err)
	}
	var rep agentproto.FSReply
	if err := r.Reply(&rep); err != nil {
		return nil, sb.callError(ctx, s, err)
	}
	if rep.EntriesStreamed {
		if len(data) > maxListBytes {
			s.Cancel()
			return nil, errdefs.New(errdefs.ErrTooLarge, "the listing of %s is larger than %d bytes", req.Path, maxListBytes)
		}
		if err := json.Unmarshal(data, &rep.Entries); err != nil {
			return nil, fmt.Errorf("decode listing: %w", err)
		}
	}
	return &rep, nil
}

func toFSEntry(e *agentproto.FSEntry) session.FSEntry {
	return session.FSEntry{Entry: toEntry(&e.Entry), UID: e.UID, GID: e.GID, Owner: e.Owner, Group: e.Group,
		Resolved: e.Resolved, Metadata: e.Metadata}
}

func (s sessionSandbox) FS(ctx context.Context, req *session.FSRequest) (*session.FSReply, error) {
	rep, err := s.sb.FS(ctx, &agentproto.FSRequest{Op: req.Op, Path: req.Path, Dest: req.Dest, Depth: req.Depth,
		User: req.User, Metadata: req.Metadata, Own: req.Own})
	if err != nil {
		return nil, err
	}
	out := &session.FSReply{Existed: rep.Existed, Home: rep.Home}
	if rep.Entry != nil {
		e := toFSEntry(rep.Entry)
		out.Entry = &e
	}
	if rep.Entries != nil {
		out.Entries = make([]session.FSEntry, len(rep.Entries))
		for i := range rep.Entries {
			out.Entries[i] = toFSEntry(&rep.Entries[i])
		}
	}
	return out, nil
}

var _ session.FSSandbox = sessionSandbox{}

// maxWatchLine bounds one event line of a watch.
const maxWatchLine = 1 << 20

// FSWatch runs a watch in the agent, calling fn for each event until the
// directory goes away (nil), fn fails or ctx ends.
func (sb *Sandbox) FSWatch(ctx context.Context, req *agentproto.FSWatchRequest, fn func(*agentproto.FSWatchEvent) error) error {
	s, err := sb.conn.Call(agentproto.OpFSWatch, req, nil)
	if err != nil {
		return sb.callError(ctx, nil, err)
	}
	var line []byte
	for {
		m, err := s.Recv(ctx)
		if err != nil {
			s.Cancel()
			return sb.callError(ctx, s, err)
		}
		switch m.Type {
		case agentproto.FrameData:
			line = append(line, m.Payload...)
			for {
				i := bytes.IndexByte(line, '\n')
				if i < 0 {
					break
				}
				var ev agentproto.FSWatchEvent
				err := json.Unmarshal(line[:i], &ev)
				line = line[i+1:]
				if err != nil {
					s.Cancel()
					return fmt.Errorf("decode watch event: %w", err)
				}
				if err := fn(&ev); err != nil {
					s.Cancel()
					return err
				}
			}
			if len(line) > maxWatchLine {
				s.Cancel()
				return errdefs.New(errdefs.ErrTooLarge, "a watch event is larger than %d bytes", maxWatchLine)
			}
			line = append([]byte(nil), line...)
		case agentproto.FrameReply:
			return nil
		case agentproto.FrameError:
			return agentproto.DecodeError(m.Payload)
		}
	}
}

func (s sessionSandbox) FSWatch(ctx context.Context, req *session.FSWatchRequest, fn func(session.FSWatchEvent) error) error {
	return s.sb.FSWatch(ctx, &agentproto.FSWatchRequest{Path: req.Path, Recursive: req.Recursive, IncludeEntry: req.IncludeEntry, User: req.User},
		func(ev *agentproto.FSWatchEvent) error {
			out := session.FSWatchEvent{Start: ev.Start, Name: ev.Name, Type: ev.Type}
			if ev.Entry != nil {
				e := toFSEntry(ev.Entry)
				out.Entry = &e
			}
			return fn(out)
		})
}

var _ session.FSWatcher = sessionSandbox{}
