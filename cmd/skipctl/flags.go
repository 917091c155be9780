package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/client"
)

// globals are the flags every command accepts, before or after its name.
type globals struct {
	peer    string
	json    bool
	timeout time.Duration
	hex     bool
}

var globalNames = map[string]bool{"peer": true, "json": true, "timeout": true, "hex": true}

func isGlobal(name string) bool { return globalNames[name] }

// register defines the global flags on fs, with the values parsed so far as defaults, so that a
// flag given before the command carries over and one given after it wins.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.peer, "peer", g.peer, "entry node `multiaddr` with /p2p/<peer-id> (default $SKIPCTL_PEER)")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document on stdout")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "limit for each request")
	fs.BoolVar(&g.hex, "hex", g.hex, "keys and values are hexadecimal, in arguments and output")
}

// parseInterspersed parses flags wherever they appear among the positional arguments, as long as
// they come before "--"; everything after "--" is positional. A lone "-" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			pos = append(pos, arg)
			continue
		}
		flags = append(flags, arg)
		name := strings.TrimLeft(arg, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) { // the flag's value, whatever it looks like
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

// printFlags lists the flags of fs selected by keep, as --name TYPE  usage (default).
func printFlags(w io.Writer, fs *flag.FlagSet, keep func(string) bool) {
	type line struct{ left, right string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		if !keep(f.Name) {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if typ != "" {
			left += " " + typ
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && !strings.Contains(usage, "(default") {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		lines = append(lines, line{left, usage})
		width = max(width, len(left))
	})
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s  %s\n", width, l.left, l.right)
	}
}

// entry parses --peer.
func (a *app) entry() (peer.AddrInfo, error) {
	if strings.TrimSpace(a.g.peer) == "" {
		return peer.AddrInfo{}, badUsage("no entry node: pass --peer /ip4/<ip>/tcp/<port>/p2p/<peer-id> or set SKIPCTL_PEER (a node prints its address at start)")
	}
	ai, err := client.ParsePeer(a.g.peer)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("--peer: %w", err)
	}
	return ai, nil
}

// connect parses --peer and starts a client; the caller closes it.
func (a *app) connect(ctx context.Context) (*client.Client, peer.AddrInfo, error) {
	entry, err := a.entry()
	if err != nil {
		return nil, entry, err
	}
	c, err := a.newClient(ctx, a.g.timeout)
	if err != nil {
		return nil, entry, err
	}
	return c, entry, nil
}

// keyArg decodes a key argument (hex with --hex) and checks its size.
func (a *app) keyArg(what, s string) ([]byte, error) {
	b, err := a.bytesArg(what, s)
	if err != nil {
		return nil, err
	}
	if len(b) > client.MaxKeyLen {
		return nil, badUsage("%s is %d bytes, over the key limit of %d bytes", what, len(b), client.MaxKeyLen)
	}
	return b, nil
}

// valueArg decodes a value argument and checks its size.
func (a *app) valueArg(s string) ([]byte, error) {
	b, err := a.bytesArg("VALUE", s)
	if err != nil {
		return nil, err
	}
	if len(b) > client.MaxValueLen {
		return nil, badUsage("VALUE is %d bytes, over the value limit of %d bytes", len(b), client.MaxValueLen)
	}
	return b, nil
}

func (a *app) bytesArg(what, s string) ([]byte, error) {
	if !a.g.hex {
		return []byte(s), nil
	}
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"))
	if err != nil {
		return nil, badUsage("%s %q is not hexadecimal (--hex is set): %v", what, s, err)
	}
	return b, nil
}
