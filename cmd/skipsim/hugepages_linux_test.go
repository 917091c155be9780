//go:build linux

package main

import (
	"bufio"
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestUnmarkedPartsOfAMapping(t *testing.T) {
	marked := []span{{10, 20}, {30, 40}}
	for _, c := range []struct {
		m    span
		want []span
	}{
		{span{10, 20}, nil},
		{span{12, 18}, nil},
		{span{0, 10}, []span{{0, 10}}},
		{span{0, 50}, []span{{0, 10}, {20, 30}, {40, 50}}},
		{span{15, 35}, []span{{20, 30}}},
		{span{40, 45}, []span{{40, 45}}},
		{span{5, 20}, []span{{5, 10}}},
	} {
		if got := unmarked(marked, c.m); !reflect.DeepEqual(got, c.want) {
			t.Errorf("unmarked(%v, %v) = %v, want %v", marked, c.m, got, c.want)
		}
	}
}

func TestMarkKeepsSpansSortedAndMerged(t *testing.T) {
	var marked []span
	for _, s := range []span{{30, 40}, {10, 20}, {50, 60}, {20, 25}, {38, 52}} {
		marked = mark(marked, s)
	}
	if want := []span{{10, 25}, {30, 60}}; !reflect.DeepEqual(marked, want) {
		t.Errorf("marked = %v, want %v", marked, want)
	}
}

// TestHeapIsMarkedForHugePages checks with the kernel's own account (/proc/self/smaps, flag
// "hg") that the mapping holding a fresh heap object gets marked. It needs the "madvise"
// setting: under "always" or "never" the keeper has nothing to do.
func TestHeapIsMarkedForHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		t.Skipf("transparent huge pages not left to each process here (%q, %v)", strings.TrimSpace(string(mode)), err)
	}
	obj := make([]byte, 64<<20)
	at := uintptr(unsafe.Pointer(&obj[0]))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { keepHeapOnHugePages(stop); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for !hugePageFlag(t, at) {
		if time.Now().After(deadline) {
			t.Fatal("the heap mapping holding a fresh object was not marked for huge pages")
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-done
	obj[0] = 1
}

// hugePageFlag reports whether the mapping holding address at carries the flag "hg".
func hugePageFlag(t *testing.T, at uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inside := false
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			inside = err1 == nil && err2 == nil && uintptr(start) <= at && at < uintptr(end)
			continue
		}
		if inside && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line, " hg")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return false
}
