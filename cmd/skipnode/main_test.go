package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skiprange/skiprange/nixmig"
)

// clearEnv removes every SKIPNODE_* variable for the test, so that the caller's environment
// cannot leak into the options.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SKIPNODE_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "skipnode.conf")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, args ...string) *options {
	t.Helper()
	var stderr bytes.Buffer
	o, err := loadOptions(args, &stderr)
	if err != nil {
		t.Fatalf("loadOptions(%q): %v\n%s", args, err, stderr.String())
	}
	return o
}

func mustFail(t *testing.T, wants []string, args ...string) error {
	t.Helper()
	o, err := loadOptions(args, io.Discard)
	if err == nil {
		t.Fatalf("loadOptions(%q) accepted: %+v", args, o)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("loadOptions(%q): error %q does not mention %q", args, err, w)
		}
	}
	return err
}

func TestDefaults(t *testing.T) {
	clearEnv(t)
	o := mustLoad(t)
	if o.dataDir != "skipnode-data" || o.network != "skiprange" || o.newNetwork || o.metricsAddr != "127.0.0.1:9100" {
		t.Errorf("defaults: %+v", o)
	}
	if !slices.Equal(o.listen, list{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}) {
		t.Errorf("default listen %q", o.listen)
	}
	if o.node.Balance.Algorithm != nixmig.NIXMIG || o.leaveWait != time.Minute {
		t.Errorf("defaults: algorithm %v, leave timeout %v", o.node.Balance.Algorithm, o.leaveWait)
	}
}

func TestPrecedence(t *testing.T) {
	clearEnv(t)
	file := writeConfig(t, `# settings for a test
network = from-file
data-dir = /file/dir
log-level = warn
thres = 10
over-thres = 100
listen = /ip4/127.0.0.1/tcp/1
listen = /ip4/127.0.0.1/tcp/2

new-network = true
`)
	// The file alone.
	o := mustLoad(t, "--config", file)
	if o.network != "from-file" || o.dataDir != "/file/dir" || o.logLevel != "warn" || !o.newNetwork ||
		o.node.Balance.Thres != 10 || o.node.Balance.OverThres != 100 {
		t.Errorf("file settings not applied: %+v", o)
	}
	if !slices.Equal(o.listen, list{"/ip4/127.0.0.1/tcp/1", "/ip4/127.0.0.1/tcp/2"}) {
		t.Errorf("listen from the file: %q", o.listen)
	}

	// The environment beats the file; the file still fills the rest.
	t.Setenv("SKIPNODE_NETWORK", "from-env")
	t.Setenv("SKIPNODE_DATA_DIR", "/env/dir")
	t.Setenv("SKIPNODE_LISTEN", "/ip4/127.0.0.1/tcp/3, /ip4/127.0.0.1/tcp/4")
	t.Setenv("SKIPNODE_THRES", "20")
	o = mustLoad(t, "--config", file)
	if o.network != "from-env" || o.dataDir != "/env/dir" || o.logLevel != "warn" || o.node.Balance.Thres != 20 || o.node.Balance.OverThres != 100 {
		t.Errorf("env over file: %+v", o)
	}
	// A list takes the first source that sets it, without accumulating the others.
	if !slices.Equal(o.listen, list{"/ip4/127.0.0.1/tcp/3", "/ip4/127.0.0.1/tcp/4"}) {
		t.Errorf("listen from env over file: %q", o.listen)
	}

	// Flags beat both.
	o = mustLoad(t, "--config", file, "--network", "from-flag", "--listen", "/ip4/127.0.0.1/tcp/5", "--thres=30")
	if o.network != "from-flag" || o.dataDir != "/env/dir" || o.logLevel != "warn" || o.node.Balance.Thres != 30 {
		t.Errorf("flag over env over file: %+v", o)
	}
	if !slices.Equal(o.listen, list{"/ip4/127.0.0.1/tcp/5"}) {
		t.Errorf("listen from the flag: %q", o.listen)
	}

	// The file named by SKIPNODE_CONFIG.
	t.Setenv("SKIPNODE_CONFIG", file)
	if o = mustLoad(t); o.logLevel != "warn" {
		t.Errorf("SKIPNODE_CONFIG not read: log level %q", o.logLevel)
	}
	// A flag setting a bool to false beats a file setting it to true.
	if o = mustLoad(t, "--new-network=false"); o.newNetwork {
		t.Error("--new-network=false lost to the config file")
	}
}

func TestListFlags(t *testing.T) {
	clearEnv(t)
	o := mustLoad(t, "--listen", "/ip4/127.0.0.1/tcp/1", "--listen", "/ip4/127.0.0.1/tcp/2,/ip4/127.0.0.1/udp/2/quic-v1",
		"--listen=/ip6/::1/tcp/3 , ", "--bootstrap", bootA+","+bootB)
	want := list{"/ip4/127.0.0.1/tcp/1", "/ip4/127.0.0.1/tcp/2", "/ip4/127.0.0.1/udp/2/quic-v1", "/ip6/::1/tcp/3"}
	if !slices.Equal(o.listen, want) {
		t.Errorf("listen %q, want %q", o.listen, want)
	}
	if !slices.Equal(o.bootstrap, list{bootA, bootB}) || len(o.peers) != 2 || o.peers[1].String() != "{"+peerB+": [/ip4/10.0.0.2/tcp/4001]}" {
		t.Errorf("bootstrap %q, parsed %v", o.bootstrap, o.peers)
	}
}

// Two well-formed bootstrap addresses.
const (
	peerA = "12D3KooWGRUVh7VGYoQVqkZLsd3Rv7vvimcfuEiFNW9WVRX8gpmz"
	peerB = "12D3KooWRBy97UB99e3J6hiPesre1MZeuNQvfan4gBziswrRJsNK"
	bootA = "/ip4/10.0.0.1/tcp/4001/p2p/" + peerA
	bootB = "/ip4/10.0.0.2/tcp/4001/p2p/" + peerB
)

func TestConfigFileErrors(t *testing.T) {
	clearEnv(t)
	cases := []struct {
		name, content, line string
		wants               []string
	}{
		{"unknown setting", "network = x\n# comment\nfoo = 1\n", ":3:", []string{`"foo"`, "unknown"}},
		{"config inside config", "config = other.conf\n", ":1:", []string{"config"}},
		{"malformed line", "\nnetwork x\n", ":2:", []string{"network x"}},
		{"missing name", "  = 5\n", ":1:", nil},
		{"bad value", "network = x\nthres = lots\n", ":2:", []string{"thres"}},
		{"bad bool", "new-network = maybe\n", ":1:", []string{"new-network"}},
		{"bad duration", "leave-timeout = 5\n", ":1:", []string{"leave-timeout"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.content)
			mustFail(t, append([]string{path + c.line}, c.wants...), "--config", path)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.conf")
		mustFail(t, []string{"nope.conf"}, "--config", path)
	})
	t.Run("a bad line is not reached when the flag is given", func(t *testing.T) {
		// Settings given by flags are skipped, but the file is still checked as a whole.
		path := writeConfig(t, "thres = lots\n")
		mustLoad(t, "--config", path, "--thres", "5")
		path = writeConfig(t, "bogus = 1\n")
		mustFail(t, []string{path + ":1:"}, "--config", path, "--thres", "5")
	})
}

func TestEnvErrors(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"SKIPNODE_THRES", "lots"},
		{"SKIPNODE_NEW_NETWORK", "maybe"},
		{"SKIPNODE_LEAVE_TIMEOUT", "soon"},
		{"SKIPNODE_TTL", "1.5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(c.name, c.value)
			mustFail(t, []string{c.name, c.value})
			// A flag for the same setting means the variable is not read at all.
			flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(c.name, "SKIPNODE_"), "_", "-"))
			good := map[string]string{"thres": "5", "new-network": "true", "leave-timeout": "1s", "ttl": "3"}[flagName]
			mustLoad(t, "--"+flagName+"="+good)
		})
	}
}

func TestValidation(t *testing.T) {
	clearEnv(t)
	mustFail(t, []string{"foo"}, "--algorithm", "foo")
	for _, alg := range []string{"none", "nixmig", "nix", "mig", "ib"} {
		if o := mustLoad(t, "--algorithm", alg); o.node.Balance.Algorithm.String() != alg {
			t.Errorf("--algorithm %s gave %v", alg, o.node.Balance.Algorithm)
		}
	}
	mustFail(t, []string{"thres"}, "--thres", "0")
	mustFail(t, []string{"thres"}, "--thres", "-5")
	mustFail(t, []string{"thres"}, "--thres", "NaN")
	mustFail(t, []string{"overThres"}, "--thres", "50", "--over-thres", "50")
	mustFail(t, []string{"overThres"}, "--thres", "50", "--over-thres", "40")
	mustFail(t, []string{"overThres"}, "--thres", "500") // above the default over-thres
	mustLoad(t, "--thres", "50", "--over-thres", "50.5")
	mustFail(t, nil, "--a", "0")
	mustFail(t, nil, "--a", "1.5")
	mustFail(t, []string{"ttl", "[1, 63]"}, "--ttl", "0")
	mustFail(t, []string{"ttl", "[1, 63]"}, "--ttl", "64")
	mustLoad(t, "--ttl", "63")
	mustFail(t, []string{"largest ttl", "[0, 63]"}, "--ttl-max", "-1")
	mustFail(t, []string{"largest ttl", "[0, 63]"}, "--ttl-max", "64")
	mustLoad(t, "--ttl", "3", "--ttl-max", "12")
	mustFail(t, []string{"tombstone"}, "--tombstone-ttl", "0s")
	mustFail(t, []string{"tombstone"}, "--max-tombstones", "0")
	if o := mustLoad(t, "--tombstone-ttl", "72h", "--max-tombstones", "500"); o.node.SkipGraph.TombstoneTTL != 72*time.Hour || o.node.SkipGraph.MaxTombstones != 500 {
		t.Errorf("--tombstone-ttl 72h --max-tombstones 500 gave %v, %d", o.node.SkipGraph.TombstoneTTL, o.node.SkipGraph.MaxTombstones)
	}
	mustFail(t, []string{"--data-dir"}, "--data-dir", "")
	mustFail(t, []string{"--listen", `"nonsense"`}, "--listen", "nonsense")
	mustFail(t, []string{"--listen", `"/ip4/300.0.0.1/tcp/1"`}, "--listen", "/ip4/300.0.0.1/tcp/1")
	mustFail(t, []string{"--bootstrap", `"nonsense"`}, "--bootstrap", "nonsense")
	mustFail(t, []string{"--bootstrap", "/p2p/<peer id>"}, "--bootstrap", "/ip4/10.0.0.1/tcp/4001")
	mustFail(t, []string{"--bootstrap", `"/ip4/10.0.0.1/tcp/4001/p2p/a"`}, "--bootstrap", "/ip4/10.0.0.1/tcp/4001/p2p/a")
	mustFail(t, []string{`"extra"`}, "--new-network", "extra")
	mustFail(t, []string{`"extra"`}, "extra", "--new-network")
	mustFail(t, nil, "--no-such-flag")
}

func TestRunExitCodes(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--new-network", "-help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Errorf("run(%q) = %d, want 0", args, code)
		}
		help := stderr.String()
		for _, want := range []string{"Usage:", "skipnode --new-network --data-dir", "--bootstrap /ip4/", "SKIPNODE_", "-data-dir", "-listen", "-algorithm"} {
			if !strings.Contains(help, want) {
				t.Errorf("run(%q): the help text lacks %q:\n%s", args, want, help)
			}
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) wrote to stdout: %q", args, stdout.String())
		}
	}
	bad := writeConfig(t, "nonsense\n")
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"stray"},
		{"--thres", "0"},
		{"--algorithm", "best"},
		{"--config", bad},
		{"--log-level", "loud"},
		{"--libp2p-log-level", "loud"},
		{"--ring-check", "-1m"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("run(%q) = %d, want %d; stderr:\n%s", args, code, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), "skipnode") {
			t.Errorf("run(%q): no message on stderr", args)
		}
	}
	t.Setenv("SKIPNODE_TTL", "many")
	var stderr bytes.Buffer
	if code := run(nil, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "SKIPNODE_TTL") {
		t.Errorf("bad SKIPNODE_TTL: exit %d, stderr %q", code, stderr.String())
	}
}

// ---- end to end: the real binary ----

// syncBuffer collects a child's output while the test reads it, and tells of every write.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // capacity 1
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{written: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.written <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type daemon struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
}

var metricsURL = regexp.MustCompile(`"url": "http://([^"/]+)/metrics"`)

// startDaemon runs the binary with args; it is killed when the test ends.
func startDaemon(t *testing.T, bin, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, name: name, done: make(chan struct{}), stdout: newSyncBuffer(), stderr: newSyncBuffer()}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.stdout, d.stderr
	d.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SKIPNODE_") })
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, d.stdout.String(), name, d.stderr.String())
		}
	})
	return d
}

// waitOutput checks f each time out is written to, until f returns a non-empty string, the
// daemon exits, or timeout passes. It returns the moment the awaited output arrives.
func (d *daemon) waitOutput(out *syncBuffer, what string, timeout time.Duration, f func(string) string) string {
	d.t.Helper()
	deadline := time.After(timeout)
	for {
		if s := f(out.String()); s != "" {
			return s
		}
		select {
		case <-out.written:
		case <-d.done:
			if s := f(out.String()); s != "" {
				return s
			}
			d.t.Fatalf("%s exited (%v) while waiting for %s", d.name, d.cmd.ProcessState, what)
		case <-deadline:
			d.t.Fatalf("%s: no %s after %v", d.name, what, timeout)
		}
	}
}

// addr returns the first line of the daemon's stdout: its /p2p/ multiaddr.
func (d *daemon) addr() string {
	return d.waitOutput(d.stdout, "address on stdout", 15*time.Second, func(out string) string {
		if line, _, ok := strings.Cut(out, "\n"); ok {
			return line
		}
		return ""
	})
}

// httpAddr returns the host:port of /metrics and /healthz, as logged.
func (d *daemon) httpAddr() string {
	return d.waitOutput(d.stderr, "metrics url in the log", 15*time.Second, func(out string) string {
		if m := metricsURL.FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return ""
	})
}

type health struct {
	code  int
	State string `json:"state"`
	Range string `json:"range"`
	Items int    `json:"items"`
}

func getHealth(hostport string) (health, error) {
	var h health
	resp, err := http.Get("http://" + hostport + "/healthz")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	h.code = resp.StatusCode
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("healthz body: %w", err)
	}
	return h, nil
}

// waitHealth polls /healthz until ok accepts its answer.
func (d *daemon) waitHealth(hostport, what string, ok func(health) bool) health {
	d.t.Helper()
	var last health
	var lastErr error
	deadline := time.Now().Add(15 * time.Second)
	for {
		last, lastErr = getHealth(hostport)
		if lastErr == nil && ok(last) {
			return last
		}
		select {
		case <-d.done:
			d.t.Fatalf("%s exited (%v) while waiting for %s", d.name, d.cmd.ProcessState, what)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: no %s after 15s; last /healthz: %+v, %v", d.name, what, last, lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) terminate(within time.Duration) int {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatalf("signal %s: %v", d.name, err)
	}
	select {
	case <-d.done:
	case <-time.After(within):
		d.t.Fatalf("%s did not exit within %v of SIGTERM", d.name, within)
	}
	return d.cmd.ProcessState.ExitCode()
}

func peerID(t *testing.T, addr string) string {
	t.Helper()
	_, id, ok := strings.Cut(addr, "/p2p/")
	if !ok || id == "" || strings.Contains(id, "/") {
		t.Fatalf("address %q does not end in /p2p/<peer id>", addr)
	}
	return id
}

func buildBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "skipnode")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/skipnode")
	build.Dir = filepath.Join("..", "..") // the module root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestDaemonEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	dir1, dir2 := filepath.Join(t.TempDir(), "n1"), filepath.Join(t.TempDir(), "n2")
	common := []string{"--listen", "/ip4/127.0.0.1/tcp/0", "--metrics", "127.0.0.1:0", "--network", fmt.Sprintf("e2e-%d", os.Getpid())}
	args1 := append([]string{"--new-network", "--data-dir", dir1}, common...)

	n1 := startDaemon(t, bin, "node1", args1...)
	addr1 := n1.addr()
	id1 := peerID(t, addr1)
	if !strings.HasPrefix(addr1, "/ip4/127.0.0.1/tcp/") {
		t.Errorf("node1 address %q is not on the requested listen address", addr1)
	}
	http1 := n1.httpAddr()

	n2 := startDaemon(t, bin, "node2", append([]string{"--data-dir", dir2, "--bootstrap", addr1}, common...)...)
	id2 := peerID(t, n2.addr())
	if id2 == id1 {
		t.Fatal("two data directories gave the same peer id")
	}
	http2 := n2.httpAddr()

	active := func(h health) bool { return h.code == http.StatusOK && h.State == "active" && h.Range != "" }
	h1 := n1.waitHealth(http1, "node1 active", active)
	h2 := n2.waitHealth(http2, "node2 active", active)
	if h1.Range == "[full circle)" || h2.Range == "[full circle)" || h1.Range == h2.Range {
		// Both active but not split: wait for node1 to see the join.
		h1 = n1.waitHealth(http1, "node1 split with node2", func(h health) bool { return active(h) && h.Range != "[full circle)" })
	}
	t.Logf("node1 %s owns %s, node2 %s owns %s", id1, h1.Range, id2, h2.Range)

	for _, hp := range []string{http1, http2} {
		resp, err := http.Get("http://" + hp + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s/metrics: status %d", hp, resp.StatusCode)
		}
		for _, want := range []string{"skiprange_node_items ", "skiprange_events_total{", "skiprange_node_range_fraction ", "skiprange_node_tombstones ",
			`skiprange_node_counter_total{name="balance_numbered"}`} {
			if !bytes.Contains(body, []byte(want)) {
				t.Errorf("%s/metrics lacks %s", hp, strings.TrimSpace(want))
			}
		}
	}

	// node2 leaves gracefully: node1 takes its range back and owns the whole circle.
	if code := n2.terminate(20 * time.Second); code != 0 {
		t.Fatalf("node2 ended with %d (%v) after SIGTERM, want exit 0", code, n2.cmd.ProcessState)
	}
	if !strings.Contains(n2.stderr.String(), "left the overlay") {
		t.Errorf("node2 did not log that it left")
	}
	n1.waitHealth(http1, "node1 owning the full circle", func(h health) bool { return active(h) && h.Range == "[full circle)" })

	// node1 is the last node: its leave is immediate.
	if code := n1.terminate(20 * time.Second); code != 0 {
		t.Fatalf("node1 ended with %d (%v) after SIGTERM, want exit 0", code, n1.cmd.ProcessState)
	}
	if !strings.Contains(n1.stderr.String(), "left the overlay") {
		t.Errorf("node1 did not log that it left")
	}

	// Restarted over the same data directory, node1 keeps its identity.
	again := startDaemon(t, bin, "node1-again", args1...)
	if id := peerID(t, again.addr()); id != id1 {
		t.Fatalf("restarted node has peer id %s, was %s", id, id1)
	}
	// A SIGTERM right after the address is printed is handled like any other: a graceful exit.
	if code := again.terminate(20 * time.Second); code != 0 {
		t.Fatalf("restarted node ended with %d (%v) after SIGTERM, want exit 0", code, again.cmd.ProcessState)
	}
}
