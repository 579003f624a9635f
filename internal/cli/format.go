package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("print json: %w", err)
	}
	return nil
}

// parseKV parses repeated K=V flag values into a map (nil when there are
// none).
func parseKV(flag string, values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(values))
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE", flag, v)
		}
		m[k] = val
	}
	return m, nil
}

// shortDuration formats d in its largest whole unit: 45s, 12m, 5h, 3d.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// age formats how long before now t was: "5m ago".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	return shortDuration(d) + " ago"
}

// until formats how long after now t is: "in 12m", or "expired".
func until(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	if d <= 0 {
		return "expired"
	}
	return "in " + shortDuration(d)
}

// humanBytes formats n in binary units: 512B, 1.5KiB, 12MiB, 2.0GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	suffix := "KMGTPE"[exp : exp+1]
	if v < 10 && v != float64(int64(v)) {
		return fmt.Sprintf("%.1f%siB", v, suffix)
	}
	return fmt.Sprintf("%.0f%siB", v, suffix)
}

// secondsUp returns d in whole seconds, rounded up.
func secondsUp(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// millisUp returns d in whole milliseconds, rounded up.
func millisUp(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}
