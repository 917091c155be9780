package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 0, "skipnet demo"},
		{[]string{"help"}, 0, "skipctl ring"},
		{[]string{"demo", "--help"}, 0, "-width"},
		{[]string{"help", "up"}, 0, "-nodes"},
		{[]string{"launch"}, 2, `unknown command "launch"`},
		{[]string{"demo", "--width", "2"}, 2, "--width must lie in (0, 1]"},
		{[]string{"demo", "--nodes", "1"}, 2, "--nodes must be at least 2"},
		{[]string{"up", "--nodes", "0"}, 2, "--nodes must be at least 1"},
		{[]string{"up", "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"demo", "--rate", "x"}, 2, "invalid value"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("skipnet %v: exit %d, output %q %q; want exit %d and %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.want)
		}
	}
}

// TestDemo runs a small demo end to end: the pulse overloads a node, NIXMIG balances it, every
// read is right.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs real nodes for several seconds")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"demo", "--nodes", "6", "--keys", "600", "--rate", "200", "--thres", "40"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"--- NIXMIG starts ---", "every node under thres 40", "0 wrong answers"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
