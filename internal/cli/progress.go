package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/warrenhq/warren/api"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// pullDisplay shows a pull's progress on w. On a terminal it is a live
// display, one line per layer redrawn in place a few times a second; else
// it writes a plain line for each step that matters (a layer starts, a
// layer is done, extracting), never one per chunk.
type pullDisplay struct {
	w   io.Writer
	tty bool
	ref string
	now func() time.Time

	layers   []api.PullProgress // by layer index - 1
	status   string             // the image's step
	drawn    int                // lines on screen (tty)
	lastDraw time.Time
}

func newPullDisplay(w io.Writer, ref string, tty bool, now func() time.Time) *pullDisplay {
	return &pullDisplay{w: w, tty: tty, ref: ref, now: now}
}

// redrawEvery bounds how often the live display is redrawn.
const redrawEvery = 100 * time.Millisecond

func (d *pullDisplay) update(p api.PullProgress) error {
	if p.Layers > len(d.layers) {
		d.layers = append(d.layers, make([]api.PullProgress, p.Layers-len(d.layers))...)
	}
	var prev api.PullProgress
	if p.Layer > 0 && p.Layer <= len(d.layers) {
		prev = d.layers[p.Layer-1]
		d.layers[p.Layer-1] = p
	} else {
		d.status = p.Status
	}
	if d.tty {
		// Redraw on every change of step, and at most every redrawEvery
		// while bytes come in.
		if p.Layer > 0 && p.Status == prev.Status && d.now().Sub(d.lastDraw) < redrawEvery {
			return nil
		}
		return d.draw()
	}
	var line string
	switch {
	case p.Layer == 0 && p.Status == "resolving":
		line = "resolving " + d.ref
	case p.Layer == 0 && p.Status == "exists":
		line = "the image is stored already"
	case p.Layer == 0 && p.Status == "extracting":
		line = fmt.Sprintf("extracting %d layers", p.Layers)
	case p.Layer > 0 && p.Status == "downloading" && prev.Status != "downloading":
		line = fmt.Sprintf("layer %d/%d %s: downloading %s", p.Layer, p.Layers, shortDigest(p.Digest), humanBytes(p.Total))
	case p.Layer > 0 && p.Status == "downloaded":
		line = fmt.Sprintf("layer %d/%d %s: done", p.Layer, p.Layers, shortDigest(p.Digest))
	}
	if line == "" {
		return nil
	}
	_, err := fmt.Fprintln(d.w, line)
	return err
}

// barWidth is the width of a layer's progress bar.
const barWidth = 20

// draw redraws the live display: the lines of the last draw are
// overwritten.
func (d *pullDisplay) draw() error {
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", d.drawn)
	}
	lines := 0
	line := func(s string) {
		b.WriteString("\r\x1b[2K")
		b.WriteString(s)
		b.WriteByte('\n')
		lines++
	}
	line(fmt.Sprintf("%s: %s", d.ref, d.statusText()))
	for i, l := range d.layers {
		if l.Status == "" {
			continue
		}
		text := l.Status
		if l.Status == "downloading" || l.Status == "downloaded" {
			text = fmt.Sprintf("%-11s %s %9s / %-9s", l.Status, bar(l.Current, l.Total), humanBytes(l.Current), humanBytes(l.Total))
		}
		line(fmt.Sprintf("  %d/%d %s  %s", i+1, len(d.layers), shortDigest(l.Digest), text))
	}
	d.drawn = lines
	d.lastDraw = d.now()
	_, err := io.WriteString(d.w, b.String())
	return err
}

func (d *pullDisplay) statusText() string {
	switch d.status {
	case "", "resolving":
		if len(d.layers) > 0 {
			return "downloading"
		}
		return "resolving"
	case "exists":
		return "stored already"
	}
	return d.status
}

// bar draws current of total as a bar of barWidth cells.
func bar(current, total int64) string {
	n := 0
	if total > 0 {
		n = int(min(current, total) * barWidth / total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", barWidth-n) + "]"
}

// done ends the display after the pull.
func (d *pullDisplay) done(status string) error {
	if !d.tty {
		return nil
	}
	d.status = status
	return d.draw()
}
