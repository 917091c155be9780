//go:build linux

package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Why: a large run reads another node's state at every simulated hop, all over a heap of
// gigabytes, and with 4 KB pages nearly every such read also misses the processor's table of
// address translations. Go leaves huge pages for its heap to the kernel's global setting, which
// is "madvise" on many machines (this one's included): only memory a process marks gets them.
// A 50,000-node balancing run took 42 minutes with them and 53 without (docs/BENCHMARKS.md,
// thirty-seventh session).

// hugePagePeriod is how often the heap's mappings are looked at again: the heap grows as the
// overlay is built and loaded, and each new mapping starts without the mark.
const hugePagePeriod = time.Second

// keepHeapOnHugePages marks the Go heap's mappings for transparent huge pages until stop is
// closed, and has the kernel collapse the pages of each newly marked mapping into huge pages at
// once (pages touched before the mark would otherwise wait for the kernel's slow background
// scan). It does nothing when the kernel's setting is "always" (done already) or "never"
// (refused), and gives up quietly on a kernel without the calls (before Linux 6.1 for the
// collapse): this is an optimisation, never a reason to fail a run.
func keepHeapOnHugePages(stop <-chan struct{}) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		return
	}
	heap := heapAddress()
	var marked []span
	tick := time.NewTicker(hugePagePeriod)
	defer tick.Stop()
	for {
		maps, err := heapMappings(heap)
		if err != nil {
			return
		}
		for _, m := range maps {
			for _, gap := range unmarked(marked, m) {
				if madvise(gap, unix.MADV_HUGEPAGE) != nil {
					return
				}
				_ = madvise(gap, unix.MADV_COLLAPSE) // best effort: EINVAL before 6.1, EAGAIN under memory pressure
				marked = mark(marked, gap)
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// span is an address range [start, end).
type span struct{ start, end uintptr }

// madvise gives the kernel advice on the pages of s.
func madvise(s span, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// unmarked returns the parts of m outside the marked spans (sorted, disjoint, not adjacent).
// Only those are advised: the kernel merges a newly marked mapping with the marked one next to
// it, and collapsing the older part again would bring back memory the Go runtime gave back.
func unmarked(marked []span, m span) []span {
	var gaps []span
	at := m.start
	for _, s := range marked {
		if s.end <= at || s.start >= m.end {
			continue
		}
		if s.start > at {
			gaps = append(gaps, span{at, s.start})
		}
		at = max(at, s.end)
	}
	if at < m.end {
		gaps = append(gaps, span{at, m.end})
	}
	return gaps
}

// mark adds s to the marked spans, keeping them sorted and merging those that touch.
func mark(marked []span, s span) []span {
	out := make([]span, 0, len(marked)+1)
	for _, x := range marked {
		switch {
		case x.end < s.start:
			out = append(out, x)
		case s.end < x.start:
			out = append(out, s)
			s = x
		default:
			s = span{min(s.start, x.start), max(s.end, x.end)}
		}
	}
	return append(out, s)
}

// heapAddress returns the address of a fresh heap allocation: Go's heap arenas lie next to one
// another, far from the process's other mappings.
func heapAddress() uintptr {
	probe := make([]byte, 1<<20) // large enough never to be placed anywhere but the heap
	return uintptr(unsafe.Pointer(&probe[0]))
}

// heapReach is how far from the probe a mapping may start and still be taken for the heap's.
const heapReach = 1 << 40

// heapMappings lists the process's private anonymous read-write mappings within heapReach of
// the heap address.
func heapMappings(heap uintptr) ([]span, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		fields := bytes.Fields(sc.Bytes())
		if len(fields) != 5 || string(fields[1]) != "rw-p" || string(fields[4]) != "0" {
			continue // a file, a named region ([heap], [stack]), or not private read-write
		}
		lo, hi, ok := bytes.Cut(fields[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if s := (span{uintptr(start), uintptr(end)}); s.start+heapReach > heap && s.start < heap+heapReach {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}
