package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs skipctl with args and the environment env.
func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(&out, &errb, func(k string) string { return env[k] })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	code := a.run(ctx, args)
	return result{out.String(), errb.String(), code}
}

// fakePeer is a valid multiaddr of a peer that nothing needs to reach.
func fakePeer(t *testing.T) string {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return "/ip4/127.0.0.1/tcp/1/p2p/" + id.String()
}

func TestUsageErrors(t *testing.T) {
	p := fakePeer(t)
	long := strings.Repeat("k", client.MaxKeyLen+1)
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "Usage:"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"unknown flag", []string{"get", "--nope", "k"}, "flag provided but not defined"},
		{"bad global flag", []string{"--timeout", "soon", "status"}, "invalid value"},
		{"too few args", []string{"--peer", p, "put", "k"}, "takes 2 arguments"},
		{"too many args", []string{"--peer", p, "get", "a", "b"}, "takes 1 argument"},
		{"status takes none", []string{"--peer", p, "status", "x"}, "no arguments"},
		{"no peer", []string{"get", "k"}, "no entry node"},
		{"malformed multiaddr", []string{"--peer", "/ip4/300.1.1.1/tcp/1/p2p/x", "get", "k"}, "malformed multiaddr"},
		{"missing p2p", []string{"--peer", "/ip4/127.0.0.1/tcp/4001", "get", "k"}, "/p2p/<peer-id>"},
		{"key too large", []string{"--peer", p, "get", long}, "over the key limit"},
		{"value too large", []string{"--peer", p, "put", "k", strings.Repeat("v", client.MaxValueLen+1)}, "over the value limit"},
		{"bad hex", []string{"--peer", p, "--hex", "get", "zz"}, "not hexadecimal"},
		{"negative limit", []string{"--peer", p, "scan", "a", "b", "--limit", "-1"}, "--limit"},
		{"zero timeout", []string{"--peer", p, "--timeout", "0s", "status"}, "--timeout"},
		{"ring max", []string{"--peer", p, "ring", "--max", "0"}, "--max"},
		{"bench reads", []string{"--peer", p, "bench", "--reads", "1.5"}, "--reads"},
		{"bench workload", []string{"--peer", p, "bench", "--workload", "gauss"}, "--workload must be"},
		{"bench words file", []string{"--peer", p, "bench", "--workload", "words"}, "needs --words FILE"},
		{"bench pulse width", []string{"--peer", p, "bench", "--width", "2"}, "Width"},
		{"help unknown", []string{"help", "nope"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, tc.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q should contain %q", r.stderr, tc.want)
			}
			if tc.args != nil && r.stdout != "" {
				t.Errorf("a usage error printed on stdout: %q", r.stdout)
			}
		})
	}
}

func TestUsageErrorJSON(t *testing.T) {
	r := runCLI(t, map[string]string{"SKIPCTL_PEER": "not-an-addr"}, "get", "k", "--json")
	if r.code != exitUsage {
		t.Fatalf("exit %d", r.code)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if doc["ok"] != false || doc["class"] != "bad_address" || doc["exit_code"] != float64(exitUsage) || doc["command"] != "get" {
		t.Errorf("error document %v", doc)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		r := runCLI(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Exit codes:") || !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}} {
			r := runCLI(t, nil, args...)
			if r.code != 0 || !strings.Contains(r.stdout, "skipctl "+c.name) || !strings.Contains(r.stdout, "Examples:") ||
				!strings.Contains(r.stdout, "--peer") {
				t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
			}
		}
	}
	// Every documented exit code is in the overview.
	r := runCLI(t, nil, "help")
	for _, code := range []string{"0  success", "1  not found", "2  usage error", "3  no answer", "4  the overlay"} {
		if !strings.Contains(r.stdout, code) {
			t.Errorf("help lacks exit code %q", code)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	limit := fs.Int("limit", 0, "")
	js := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, []string{"a", "--limit", "5", "-", "--json", "--", "-b", "--json"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pos, " ") != "a - -b --json" || *limit != 5 || !*js {
		t.Errorf("pos %q limit %d json %v", pos, *limit, *js)
	}
	// A flag value that looks like a flag is taken as the value.
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	peerFlag := fs.String("peer", "", "")
	if _, err := parseInterspersed(fs, []string{"--peer=-x"}); err != nil || *peerFlag != "-x" {
		t.Errorf("--peer=-x: %v %q", err, *peerFlag)
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{nil, 0},
		{badUsage("x"), 2},
		{client.ErrBadAddress, 2},
		{&client.TransportError{Kind: client.ErrTooLarge}, 2},
		{&client.StatusError{Status: pb.Status_STATUS_NOT_FOUND}, 1},
		{&client.StatusError{Status: pb.Status_STATUS_LOST}, 1},
		{&client.TransportError{Kind: client.ErrUnreachable}, 3},
		{&client.TransportError{Kind: client.ErrTimeout}, 3},
		{&client.TransportError{Kind: client.ErrProtocol}, 3},
		{&client.StatusError{Status: pb.Status_STATUS_ERROR}, 4},
		{&client.StatusError{Status: pb.Status_STATUS_INVALID}, 4},
		{&client.StatusError{Status: pb.Status_STATUS_HOP_LIMIT}, 4},
		{exitError{3, "x"}, 3},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}

func TestShow(t *testing.T) {
	for _, tc := range []struct {
		in      string
		hexMode bool
		want    string
	}{
		{"apple", false, "apple"},
		{"", false, `""`},
		{"two words", false, `"two words"`},
		{"a\x00b", false, `"a\x00b"`},
		{"\xff", false, "0xff"},
		{"\x00\x00\x00\x00\x00\x00\x01\x00", false, "0x0000000000000100"},
		{"bin\x00ary", false, `"bin\x00ary"`},
		{"héllo", false, "héllo"},
		{"\x00\xff", true, "00ff"},
		{"", true, `""`},
	} {
		if got := show([]byte(tc.in), tc.hexMode); got != tc.want {
			t.Errorf("show(%q, %v) = %s, want %s", tc.in, tc.hexMode, got, tc.want)
		}
	}
	s, h := jsonBytes([]byte("a\xffb"), false)
	if h != "61ff62" || !strings.HasPrefix(s, "a") {
		t.Errorf("jsonBytes of invalid UTF-8 = %q, %q", s, h)
	}
}
