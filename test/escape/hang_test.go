package escape

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
)

// TestNoHangs: operations that used to wait forever on something the
// session controls answer in bounded time: listing or describing a FIFO
// (it was opened, which waits for a writer, and each call left an agent
// thread blocked), and writing to the stdin of a terminal process that
// never reads.
func TestNoHangs(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "hang", nil)
	b.out(t, "mkfifo /tmp/fifo && mkdir -p /tmp/d && mkfifo /tmp/d/inner")
	threads := func() int {
		// The agent's threads, counted from the host.
		pids := sessionInitPids(t)
		if len(pids) != 1 {
			t.Fatalf("want one sandbox PID 1, found %v", pids)
		}
		return countTasks(t, pids[0])
	}
	before := threads()
	for i := 0; i < 30; i++ {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		_, err := h.Client.ListFiles(ctx, b.id, "/tmp/fifo")
		cancel()
		if codeOf(err) != "invalid_argument" {
			t.Fatalf("list of a FIFO: %v, want invalid_argument at once", err)
		}
	}
	if e, err := h.Client.StatFile(bg, b.id, "/tmp/fifo"); err != nil || e.Type != "other" {
		t.Errorf("stat of a FIFO: %+v, %v", e, err)
	}
	if ents, err := h.Client.ListFiles(bg, b.id, "/tmp/d"); err != nil || len(ents) != 1 {
		t.Errorf("list of a directory holding a FIFO: %+v, %v", ents, err)
	}
	if after := threads(); after > before+3 {
		t.Errorf("the agent went from %d to %d threads over 30 FIFO listings", before, after)
	}

	t.Run("stdin of a terminal that does not read", func(t *testing.T) {
		p, err := h.Client.StartProcess(bg, b.id, &api.StartProcessRequest{Argv: []string{"sleep", "1000"}, TTY: true})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Client.KillProcess(bg, b.id, p.ID)
		line := strings.Repeat("x", 1023) + "\n"
		data := bytes.Repeat([]byte(line), 4096) // 4 MiB
		start := time.Now()
		ctx, cancel := context.WithTimeout(bg, 60*time.Second)
		defer cancel()
		n, err := h.Client.WriteStdin(ctx, b.id, p.ID, bytes.NewReader(data), false)
		took := time.Since(start)
		t.Logf("stdin write to a terminal that never reads: %d bytes, %v, after %v", n, err, took.Round(time.Millisecond))
		if err == nil {
			t.Fatalf("4 MiB into a terminal that never reads went through (%d bytes)", n)
		}
		if codeOf(err) != "conflict" || took > 30*time.Second {
			t.Errorf("stdin write: %v after %v, want conflict within the stall bound", err, took)
		}
		// The process, and its stdin, still answer.
		if _, err := h.Client.WriteStdin(bg, b.id, p.ID, strings.NewReader(""), false); err != nil {
			t.Errorf("an empty stdin write after the stall: %v", err)
		}
	})
	b.alive(t, "the hang attempts")
}

// countTasks is the number of threads of host pid.
func countTasks(t testing.TB, pid string) int {
	t.Helper()
	b := statusOf(t, pid)
	n, err := strconv.Atoi(statusField(b, "Threads"))
	if err != nil {
		t.Fatalf("threads of %s: %v", pid, err)
	}
	return n
}
