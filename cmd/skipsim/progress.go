package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a progress bar on a terminal, or prints a line every few seconds elsewhere.
type progress struct {
	w       io.Writer
	tty     bool
	off     bool
	phase   string
	detail  string // what the run says of its phase (set after the phase began), shown after the time
	last    time.Time
	started time.Time
}

func newProgress(w io.Writer, off bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, tty: tty, off: off, started: time.Now()}
}

func (p *progress) update(phase string, done, total int) {
	if p.off {
		return
	}
	now := time.Now()
	newPhase := phase != p.phase
	if newPhase {
		p.detail = ""
	}
	if newPhase && p.phase != "" && p.tty {
		fmt.Fprintln(p.w)
	}
	every := 5 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if !newPhase && now.Sub(p.last) < every && done < total {
		return
	}
	p.phase, p.last = phase, now
	frac := 0.0
	if total > 0 {
		frac = min(1, float64(done)/float64(total))
	}
	elapsed := now.Sub(p.started).Round(time.Second)
	if p.tty {
		const width = 30
		filled := int(frac * width)
		fmt.Fprintf(p.w, "\r%-18s [%s%s] %5.1f%% %d/%d  %s  %-20s", phase,
			strings.Repeat("█", filled), strings.Repeat("░", width-filled), 100*frac, done, total, elapsed, p.detail)
		return
	}
	line := fmt.Sprintf("%s: %d/%d (%.0f%%) after %s", phase, done, total, 100*frac, elapsed)
	if p.detail != "" {
		line += ", " + p.detail
	}
	fmt.Fprintln(p.w, line)
}

// setDetail sets what the lines of the current phase show after the time.
func (p *progress) setDetail(detail string) { p.detail = detail }

func (p *progress) finish() {
	if !p.off && p.tty && p.phase != "" {
		fmt.Fprintln(p.w)
	}
}

// overThres is how progress lines say how many nodes are over thres.
func overThres(nodes int) string { return fmt.Sprintf("%d nodes over thres", nodes) }
