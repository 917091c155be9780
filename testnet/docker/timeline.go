package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Timeline records every event and check of a run, with its time since the start, in a file
// that outlives the run: a failed check in CI is explained by the lines around it.
type Timeline struct {
	mu    sync.Mutex
	f     *os.File
	path  string
	start time.Time
}

// NewTimeline creates $TMPDIR/skiprange-chaos-<time>.log (a suffix keeps concurrent runs apart).
func NewTimeline() (*Timeline, error) {
	now := time.Now()
	name := fmt.Sprintf("skiprange-chaos-%s-%d.log", now.Format("20060102-150405"), os.Getpid())
	path := filepath.Join(os.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{f: f, path: path, start: now}
	tl.Event("start", "timeline of a skiprange docker chaos run, started %s", now.Format(time.RFC3339Nano))
	return tl, nil
}

// Path returns the file's path.
func (tl *Timeline) Path() string { return tl.path }

// Start returns the time the timeline began.
func (tl *Timeline) Start() time.Time { return tl.start }

// Since returns the time since the timeline began.
func (tl *Timeline) Since() time.Duration { return time.Since(tl.start) }

// Event writes one line: the time since the start, the kind in brackets, the message.
func (tl *Timeline) Event(kind, format string, args ...any) {
	tl.At(time.Now(), kind, format, args...)
}

// At writes a line for something that happened at t.
func (tl *Timeline) At(t time.Time, kind, format string, args ...any) {
	line := fmt.Sprintf("%9.3fs  %-10s %s", t.Sub(tl.start).Seconds(), "["+kind+"]", fmt.Sprintf(format, args...))
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.f != nil {
		fmt.Fprintln(tl.f, line)
	}
}

// Close flushes and closes the file; later events are dropped.
func (tl *Timeline) Close() error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.f == nil {
		return nil
	}
	err := tl.f.Close()
	tl.f = nil
	return err
}
