package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// sse writes server-sent events. Headers go out with the first event, so an
// error before that is still an ordinary JSON error response.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	// retry, if set, is sent first ("retry:"): how long a client that lost
	// the stream waits before it reconnects. Streams that answer a
	// reconnect (Last-Event-ID) set it.
	retry time.Duration
}

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w, rc: http.NewResponseController(w)} }

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// sseRetry is the reconnection delay the exec and process output streams
// ask for.
const sseRetry = 3 * time.Second

func (e *sse) start() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not hold the stream back
	e.w.WriteHeader(http.StatusOK)
	if e.retry > 0 {
		fmt.Fprintf(e.w, "retry: %d\n\n", e.retry.Milliseconds())
	}
}

// event writes one event and flushes it at once.
func (e *sse) event(name, id string, v any) error {
	e.start()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteByte('\n')
	if id != "" {
		buf.WriteString("id: ")
		buf.WriteString(id)
		buf.WriteByte('\n')
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	if _, err := e.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return e.rc.Flush()
}

func chunkOf(text, b64 string) api.OutputChunk {
	return api.OutputChunk{Text: text, Base64: b64}
}

// execEndID is the id of an exec stream's last event (exit or error): a
// client that reconnects after it has the whole stream.
const execEndID = "end"

// execResumed answers an exec that carries Last-Event-ID, and reports
// whether it did: such a request is a client reconnecting to a stream it
// lost (an EventSource-style client repeats the POST with the last id it
// saw), and running the command again would run it twice. A client that
// had the whole stream gets 204, which tells it to stop; one that lost the
// stream midway gets 409, since the daemon keeps no copy of an exec's
// stream to resume from.
func (s *Server) execResumed(w http.ResponseWriter, r *http.Request) bool {
	ids, ok := r.Header[http.CanonicalHeaderKey("Last-Event-ID")]
	if !ok {
		return false
	}
	if len(ids) == 1 && ids[0] == execEndID {
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	s.writeError(w, r, errdefs.New(errdefs.ErrConflict, "this request repeats an exec whose event stream was cut off (Last-Event-ID %q), "+
		"and warren does not run a command twice: its result is lost with the stream. "+
		"To follow a long command across reconnects, start it as a process (POST /v1/sessions/{id}/processes) "+
		"and read its output (GET .../processes/{pid}/output), which resumes from Last-Event-ID", strings.Join(ids, ",")))
	return true
}

// execStream answers an exec with server-sent events: stdout and stderr as
// they are produced, then exit. Events have ids (a count, then "end" on
// the last), so that a client that reconnects says so with Last-Event-ID
// (execResumed).
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, ereq *session.ExecRequest) {
	e := newSSE(w)
	e.retry = sseRetry
	var chunkers [3]wire.Chunker
	names := [3]string{"", "stdout", "stderr"}
	seq := 0
	nextID := func() string {
		seq++
		return strconv.Itoa(seq)
	}
	send := func(ch byte, p []byte) error {
		if ch != session.ChanStdout && ch != session.ChanStderr {
			return nil
		}
		text, raw := chunkers[ch].Next(p)
		b64 := wire.Base64(raw)
		if text == "" && b64 == "" {
			return nil
		}
		return e.event(names[ch], nextID(), chunkOf(text, b64))
	}
	res, err := s.m.Exec(r.Context(), tenant(r), r.PathValue("id"), ereq, send)
	if err != nil {
		if !e.started {
			s.writeError(w, r, err)
			return
		}
		c := errdefs.ClassOf(err)
		e.event("error", execEndID, api.Error{Error: api.ErrorBody{Code: c.String(), Message: err.Error()}})
		return
	}
	for _, ch := range []byte{session.ChanStdout, session.ChanStderr} {
		if b64 := wire.Base64(chunkers[ch].Flush()); b64 != "" {
			e.event(names[ch], nextID(), api.OutputChunk{Base64: b64})
		}
	}
	e.event("exit", execEndID, toAPIResult(res))
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) {
	var req api.StartProcessRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.m.StartProcess(r.Context(), tenant(r), r.PathValue("id"), &session.StartProcessRequest{
		Command: req.Command, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd,
		TTY: req.TTY, Cols: req.Cols, Rows: req.Rows, Stdin: req.Stdin, User: req.User,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPIProcess(info))
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	list, err := s.m.ListProcesses(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ProcessList{Processes: make([]api.Process, 0, len(list))}
	for i := range list {
		out.Processes = append(out.Processes, toAPIProcess(&list[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) {
	info, err := s.m.GetProcess(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("pid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIProcess(info))
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) {
	if err := s.m.KillProcess(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("pid")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) signalProcess(w http.ResponseWriter, r *http.Request) {
	var req api.SignalRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	sig, err := parseSignal(req.Signal)
	if err == nil {
		err = s.m.SignalProcess(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("pid"), sig)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) resizeProcess(w http.ResponseWriter, r *http.Request) {
	var req api.ResizeRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.m.ResizeProcess(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("pid"), req.Cols, req.Rows); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) writeStdin(w http.ResponseWriter, r *http.Request) {
	eof := false
	if v := r.URL.Query().Get("eof"); v != "" {
		var err error
		if eof, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, badQuery("eof", v, "must be true or false"))
			return
		}
	}
	n, err := s.m.WriteStdin(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("pid"), http.MaxBytesReader(w, r.Body, s.m.MaxFileBytes()), eof)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.StdinWritten{Written: n})
}

// processOutput streams a process's output from an offset: server-sent
// events by default, raw bytes for Accept: application/octet-stream.
func (s *Server) processOutput(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var offset int64
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.writeError(w, r, badQuery("offset", v, "must be a whole number (negative: that many bytes back from the end)"))
			return
		}
		offset = n
	}
	// An EventSource reconnects with its original URL: the last event's id
	// says where it really stopped.
	resumed := false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			offset, resumed = n, true
		}
	}
	follow := false
	if v := q.Get("follow"); v != "" {
		var err error
		if follow, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, badQuery("follow", v, "must be true or false"))
			return
		}
	}
	ctx, tn, id, pid := r.Context(), tenant(r), r.PathValue("id"), r.PathValue("pid")
	if strings.Contains(r.Header.Get("Accept"), "application/octet-stream") && !wantsSSE(r) {
		s.rawOutput(w, r, ctx, tn, id, pid, offset, follow)
		return
	}
	if resumed {
		// An EventSource reconnects whenever a stream ends, also after the
		// exit event: once the process has exited and the client has all
		// its output, 204 tells it to stop.
		info, err := s.m.GetProcess(ctx, tn, id, pid)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !info.Running && offset >= info.OutputBytes {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	e := newSSE(w)
	e.retry = sseRetry
	if follow && !resumed {
		// A followed process may stay silent for hours: the stream
		// starts now, once the process is known, so the client is not
		// left without even an answer's headers. (A resumed stream
		// checked the process above.)
		if _, err := s.m.GetProcess(ctx, tn, id, pid); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if follow {
		e.start()
		http.NewResponseController(w).Flush()
	}
	pos := offset // the offset after what was sent: the ids' value
	_, err := s.m.ProcessOutput(ctx, tn, id, pid, offset, follow, func(ev session.OutputEvent) error {
		switch ev.Kind {
		case "gap":
			pos = ev.To
			return e.event("gap", strconv.FormatInt(ev.To, 10), api.OutputGap{From: ev.From, To: ev.To})
		case "exit":
			ex := api.ProcessExit{ExitCode: ev.ExitCode}
			if ev.Signal > 0 {
				ex.Signal = signalName(ev.Signal)
			}
			// With an id, so that a client that saw no output still
			// reconnects with Last-Event-ID, and gets 204.
			id := ""
			if pos >= 0 {
				id = strconv.FormatInt(pos, 10)
			}
			return e.event("exit", id, ex)
		}
		// Offsets are exact, so a chunk goes as it came: text when it is
		// valid UTF-8 (a character split between chunks makes both
		// base64), else base64.
		chunk := api.OutputChunk{Offset: &ev.Offset, Stream: "stdout"}
		if ev.Chan == session.ChanStderr {
			chunk.Stream = "stderr"
		}
		chunk.Text, chunk.Base64 = textOf(ev.Data)
		if chunk.Base64 != "" {
			chunk.Text = ""
		}
		pos = ev.Offset + int64(len(ev.Data))
		return e.event("output", strconv.FormatInt(pos, 10), chunk)
	})
	if err != nil {
		if !e.started {
			s.writeError(w, r, err)
			return
		}
		c := errdefs.ClassOf(err)
		e.event("error", "", api.Error{Error: api.ErrorBody{Code: c.String(), Message: err.Error()}})
		return
	}
	e.start() // an empty answer is still a stream
}

func (s *Server) rawOutput(w http.ResponseWriter, r *http.Request, ctx context.Context, tn, id, pid string, offset int64, follow bool) {
	rc := http.NewResponseController(w)
	started, early := false, false
	if follow {
		// Warren-Output-Offset names the first byte's offset, so the
		// headers wait for it; but a followed process that has nothing
		// to send yet may stay silent for hours, and the client must
		// not wait that long for an answer. Its next byte is at the
		// offset asked for (made absolute here, so that the agent
		// starts exactly there): the answer starts now.
		info, err := s.m.GetProcess(ctx, tn, id, pid)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		abs := offset
		if abs < 0 {
			abs = max(0, info.OutputBytes+abs)
		}
		if info.Running && abs >= info.OutputBytes {
			offset, early, started = abs, true, true
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Warren-Output-Offset", strconv.FormatInt(abs, 10))
			w.WriteHeader(http.StatusOK)
			rc.Flush()
		}
	}
	_, err := s.m.ProcessOutput(ctx, tn, id, pid, offset, follow, func(ev session.OutputEvent) error {
		if ev.Kind == "gap" && early {
			// Over the buffer's size of output came between the
			// check and the stream (it would take a flood): the
			// offset in the headers is wrong, so the answer breaks
			// off rather than hand out misplaced bytes.
			return errdefs.New(errdefs.ErrConflict, "the output moved past the offset in the headers")
		}
		if ev.Kind != "output" {
			return nil
		}
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Warren-Output-Offset", strconv.FormatInt(ev.Offset, 10))
			w.WriteHeader(http.StatusOK)
		}
		if _, err := w.Write(ev.Data); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		if !started {
			s.writeError(w, r, err)
			return
		}
		panic(http.ErrAbortHandler)
	}
	if !started {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Warren-Output-Offset", strconv.FormatInt(max(0, offset), 10))
		w.WriteHeader(http.StatusOK)
	}
}

// replayBytes is how much of a shell's recent output an attaching client
// gets, so its screen redraws.
const replayBytes = 64 << 10

// shell bridges a WebSocket to a login shell on a terminal in the session,
// new or (with ?process=ID) one that is already running.
//
// Nothing starts before the upgrade has succeeded: a shell begun for a
// client whose handshake then fails (a refused origin, a broken request)
// would run on with nobody there, and each one holds one of the session's
// few terminals. So everything that can refuse the request is checked
// first and answered with the envelope; a new shell starts only on the
// upgraded connection, and if it cannot start the client hears why there
// (an "error" message, then a close).
func (s *Server) shell(w http.ResponseWriter, r *http.Request) {
	if err := checkHandshake(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.cfg.Origins.CheckWebSocket(r, identity(r).Method == auth.MethodToken); err != nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "%w", err))
		return
	}
	q := r.URL.Query()
	ctx, tn, id := r.Context(), tenant(r), r.PathValue("id")
	cols, _ := strconv.Atoi(q.Get("cols"))
	rows, _ := strconv.Atoi(q.Get("rows"))
	killOnClose, _ := strconv.ParseBool(q.Get("kill_on_close"))
	pid := q.Get("process")
	var info *session.ProcessInfo
	var err error
	if pid == "" {
		_, err = s.m.Get(ctx, tn, id) // a session that is not there is an HTTP 404, as for every call
	} else {
		info, err = s.m.GetProcess(ctx, tn, id, pid)
		if err == nil && !info.TTY {
			err = errdefs.New(errdefs.ErrInvalidArgument, "process %s has no terminal to attach to", pid)
		}
		if err == nil && cols > 0 && rows > 0 {
			err = s.m.ResizeProcess(ctx, tn, id, pid, cols, rows)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The origin was checked above, with the token rule Accept lacks.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the client already
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	// The connection's own context: the request's ends with the hijack.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if info == nil {
		info, err = s.m.StartProcess(cctx, tn, id, &session.StartProcessRequest{Login: true, TTY: true, Cols: cols, Rows: rows})
		if err != nil {
			s.shellFailed(cctx, c, r, err)
			return
		}
	}
	pid = info.ID
	if err := wsJSON(cctx, c, api.ShellMessage{Type: "process", ID: pid}); err != nil {
		return
	}
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		from := max(info.OutputStart, info.OutputBytes-replayBytes)
		_, err := s.m.ProcessOutput(cctx, tn, id, pid, from, true, func(ev session.OutputEvent) error {
			switch ev.Kind {
			case "output":
				return c.Write(cctx, websocket.MessageBinary, ev.Data)
			case "exit":
				code := ev.ExitCode
				msg := api.ShellMessage{Type: "exit", ExitCode: &code}
				if ev.Signal > 0 {
					msg.Signal = signalName(ev.Signal)
				}
				return wsJSON(cctx, c, msg)
			}
			return nil
		})
		if err == nil {
			c.Close(websocket.StatusNormalClosure, "the shell exited")
		} else if cctx.Err() == nil {
			c.Close(websocket.StatusInternalError, errdefs.ClassOf(err).String())
		}
		cancel()
	}()
	for {
		typ, data, err := c.Read(cctx)
		if err != nil {
			break
		}
		if typ == websocket.MessageText {
			if msg, ok := controlMessage(data); ok {
				if msg.Type == "resize" {
					_ = s.m.ResizeProcess(cctx, tn, id, pid, msg.Cols, msg.Rows) // a resize of an ended shell: the output side reports the end
				}
				continue // a control message of a newer client: not for the terminal
			}
			// Keystrokes as text, as wscat and xterm.js's attach addon
			// send them: input like a binary message.
		}
		if _, err := s.m.WriteStdin(cctx, tn, id, pid, bytes.NewReader(data), false); err != nil {
			c.Close(websocket.StatusPolicyViolation, err.Error())
			cancel()
		}
	}
	cancel()
	<-outDone
	if killOnClose {
		kctx, kcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.m.KillProcess(kctx, tn, id, pid); err != nil && errdefs.ClassOf(err) != errdefs.ErrNotFound {
			s.log.Warn("end a shell whose client left", "session_id", id, "pid", pid, "error", err)
		}
		kcancel()
	}
}

// controlMessage reports whether a text message is a ShellMessage: a JSON
// object with a type. Any other text is terminal input.
func controlMessage(data []byte) (api.ShellMessage, bool) {
	var msg api.ShellMessage
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &msg) != nil || msg.Type == "" {
		return api.ShellMessage{}, false
	}
	return msg, true
}

// shellFailed tells a client on an upgraded connection that its shell
// could not start: an "error" message with the envelope's code and
// message, then a close whose status says whether to retry (1013, try
// again later, for exhausted resources and an unavailable daemon) or not
// (1008, policy violation; 1011 for a bug), with the code as its reason.
func (s *Server) shellFailed(ctx context.Context, c *websocket.Conn, r *http.Request, err error) {
	cl := errdefs.ClassOf(err)
	if cl == errdefs.ErrInternal {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "request_id", edge.RequestID(r.Context()), "error", err)
	}
	edge.Failed(r.Context(), err) // for the access log and the audit record
	// The close that follows carries the class too, for a client that
	// missed this message.
	_ = wsJSON(ctx, c, api.ShellMessage{Type: "error", Error: &api.ErrorBody{Code: cl.String(), Message: err.Error()}})
	status := websocket.StatusPolicyViolation
	switch cl {
	case errdefs.ErrResourceExhausted, errdefs.ErrUnavailable:
		status = websocket.StatusTryAgainLater
	case errdefs.ErrInternal:
		status = websocket.StatusInternalError
	}
	c.Close(status, cl.String())
}

// checkHandshake checks what websocket.Accept checks of an upgrade request
// (RFC 6455 section 4.2.1), so that a request it would refuse is refused
// with the envelope, before anything starts.
func checkHandshake(w http.ResponseWriter, r *http.Request) error {
	bad := func(format string, args ...any) error {
		return errdefs.New(errdefs.ErrInvalidArgument, "the shell is a WebSocket: "+format, args...)
	}
	switch {
	case !headerHasToken(r.Header, "Upgrade", "websocket") || !headerHasToken(r.Header, "Connection", "upgrade"):
		w.Header().Set("Upgrade", "websocket")
		return bad("send an upgrade request (Connection: Upgrade, Upgrade: websocket)")
	case !r.ProtoAtLeast(1, 1):
		return bad("the upgrade needs HTTP/1.1, not %s", r.Proto)
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		return bad("Sec-WebSocket-Version %q is not 13, the one version there is", r.Header.Get("Sec-WebSocket-Version"))
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return bad("want one Sec-WebSocket-Key header, not %d", len(keys))
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0])); err != nil || len(k) != 16 {
		return bad("Sec-WebSocket-Key %q is not 16 bytes in base64", keys[0])
	}
	return nil
}

// headerHasToken reports whether a comma-separated header has token, in
// any case.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func wsJSON(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}
