package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

// replyMeta is what every single-key command reports besides its result.
type replyMeta struct {
	Hops  uint32 `json:"hops"`
	Owner string `json:"owner,omitempty"`
}

func meta(rep *pb.ClientReply) replyMeta {
	m := replyMeta{Hops: rep.GetHops()}
	if rep.GetOwner() != nil {
		m.Owner = refString(rep.GetOwner())
	}
	return m
}

func putCmd() *command {
	return &command{
		name: "put", args: "KEY VALUE", nargs: 2,
		summary: "write KEY = VALUE",
		help: `Writes one item through the entry node, which routes it to the node that owns KEY.
An existing value is replaced.

Examples:
  skipctl put apple red
  skipctl put "two words" "a longer value"
  skipctl --hex put 0000000000000001 ff00
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				key, err := a.keyArg("KEY", args[0])
				if err != nil {
					return err
				}
				a.subject = show(key, a.g.hex)
				value, err := a.valueArg(args[1])
				if err != nil {
					return err
				}
				return a.writeKey(ctx, "put", "stored", key, func(c *client.Client, entry peer.AddrInfo) (*pb.ClientReply, error) {
					return c.Put(ctx, entry, key, value)
				})
			}
		},
	}
}

func metaText(rep *pb.ClientReply) string {
	s := fmt.Sprintf("%d hop%s", rep.GetHops(), plural(int(rep.GetHops())))
	if rep.GetOwner() != nil {
		s = "owner " + refShort(rep.GetOwner()) + ", " + s
	}
	return s
}

func getCmd() *command {
	return &command{
		name: "get", args: "KEY", nargs: 1,
		summary: "print the value of KEY",
		help: `Prints the value of KEY on stdout, as it is (in hex with --hex), followed by a newline.
An absent key prints nothing on stdout and exits with status 1; so does a key in a range that
was lost with a failed node (it may have existed: the message says so).

Examples:
  skipctl get apple
  skipctl get apple --json
  if skipctl get apple >/dev/null 2>&1; then echo present; fi
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				key, err := a.keyArg("KEY", args[0])
				if err != nil {
					return err
				}
				a.subject = show(key, a.g.hex)
				c, entry, err := a.connect(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				rep, err := c.Get(ctx, entry, key)
				if err != nil {
					return err
				}
				if a.g.json {
					k, kh := jsonBytes(key, a.g.hex)
					v, vh := jsonBytes(rep.GetValue(), a.g.hex)
					a.writeJSON(struct {
						OK       bool   `json:"ok"`
						Command  string `json:"command"`
						Key      string `json:"key"`
						KeyHex   string `json:"key_hex,omitempty"`
						Value    string `json:"value"`
						ValueHex string `json:"value_hex,omitempty"`
						replyMeta
					}{true, "get", k, kh, v, vh, meta(rep)})
					return nil
				}
				fmt.Fprintln(a.stdout, showRaw(rep.GetValue(), a.g.hex))
				return nil
			}
		},
	}
}

func delCmd() *command {
	return &command{
		name: "del", args: "KEY", nargs: 1,
		summary: "delete KEY",
		help: `Deletes KEY. When the node reports the key absent, skipctl says so and exits with
status 1.

Examples:
  skipctl del apple
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				key, err := a.keyArg("KEY", args[0])
				if err != nil {
					return err
				}
				a.subject = show(key, a.g.hex)
				return a.writeKey(ctx, "del", "deleted", key, func(c *client.Client, entry peer.AddrInfo) (*pb.ClientReply, error) {
					return c.Delete(ctx, entry, key)
				})
			}
		},
	}
}

// writeKey runs put and del: send makes the write through the entry node, and the reply is
// printed as "<done> KEY (hops, owner)" or, with --json, as {ok, command, key, hops, owner}.
func (a *app) writeKey(ctx context.Context, cmd, done string, key []byte, send func(*client.Client, peer.AddrInfo) (*pb.ClientReply, error)) error {
	c, entry, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := send(c, entry)
	if err != nil {
		return err
	}
	if a.g.json {
		k, kh := jsonBytes(key, a.g.hex)
		a.writeJSON(struct {
			OK      bool   `json:"ok"`
			Command string `json:"command"`
			Key     string `json:"key"`
			KeyHex  string `json:"key_hex,omitempty"`
			replyMeta
		}{true, cmd, k, kh, meta(rep)})
		return nil
	}
	fmt.Fprintf(a.stdout, "%s %s (%s)\n", done, show(key, a.g.hex), metaText(rep))
	return nil
}

const defaultScanLimit = 100

func scanCmd() *command {
	return &command{
		name: "scan", args: "START END", nargs: 2,
		summary: "print the items with START <= key < END",
		help: `Prints the items of the range [START, END) in key order, one per line: key, a tab,
value. Keys and values that are not printable text are shown Go-quoted ("a b", "a\x00b") or,
when mostly binary, as 0x-hex (0x00000000000000ff); use --hex for binary data. The key space is a circle: START > END wraps around past the largest key,
START = END reads every key, and an empty END ("") reads up to the largest key.

skipctl follows the nodes' continuations until --limit items are printed or the range is
exhausted. A summary goes to stderr; when more items remain it says where to resume. When part
of the range was lost with a failed node, the output may be incomplete: skipctl warns and exits
with status 1.

Examples:
  skipctl scan a n                       # keys from "a" up to, not including, "n"
  skipctl scan a "" --limit 0            # every key from "a" on
  skipctl scan "" ""                     # the first 100 keys of the whole circle
  skipctl --hex scan 00 80 --json
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			limit := fs.Int("limit", defaultScanLimit, "print at most `N` items; 0: all of them")
			return func(ctx context.Context, args []string) error {
				start, err := a.keyArg("START", args[0])
				if err != nil {
					return err
				}
				end, err := a.keyArg("END", args[1])
				if err != nil {
					return err
				}
				if *limit < 0 {
					return badUsage("--limit must be >= 0, got %d", *limit)
				}
				return a.scan(ctx, "scan", start, end, nil, *limit)
			}
		},
	}
}

func prefixCmd() *command {
	return &command{
		name: "prefix", args: "P", nargs: 1,
		summary: "print the items whose key starts with P",
		help: `Prints the items whose key starts with P — the range [P, P') where P' is the smallest
key after every key with prefix P — in the format of scan. The empty prefix ("") matches every
key.

Examples:
  skipctl prefix app
  skipctl prefix user/42/ --limit 0 --json
  skipctl --hex prefix 00ff
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			limit := fs.Int("limit", defaultScanLimit, "print at most `N` items; 0: all of them")
			return func(ctx context.Context, args []string) error {
				p, err := a.keyArg("P", args[0])
				if err != nil {
					return err
				}
				if *limit < 0 {
					return badUsage("--limit must be >= 0, got %d", *limit)
				}
				return a.scan(ctx, "prefix", p, client.PrefixEnd(p), p, *limit)
			}
		},
	}
}

// scan runs scan and prefix. prefix is nil for scan.
func (a *app) scan(ctx context.Context, cmd string, start, end, prefix []byte, limit int) error {
	c, entry, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.ScanAll(ctx, entry, start, end, limit)
	if err != nil {
		if len(res.Items) == 0 || !errors.Is(err, client.ErrProtocol) {
			return err
		}
		// A node that stopped making progress: print what arrived, then fail.
		fmt.Fprintf(a.stderr, "skipctl %s: %v\n", cmd, err)
	}
	a.printScan(cmd, start, end, prefix, res)
	if err != nil {
		return exitError{exitUnreachable, "the scan did not complete"}
	}
	if res.Incomplete {
		return exitError{exitNotFound, "part of the range was lost with a failed node; the items above may be incomplete"}
	}
	return nil
}

func (a *app) printScan(cmd string, start, end, prefix []byte, res *client.ScanResult) {
	if a.g.json {
		out := struct {
			OK           bool       `json:"ok"`
			Command      string     `json:"command"`
			Prefix       *string    `json:"prefix,omitempty"`
			Range        *jsonRange `json:"range"`
			Count        int        `json:"count"`
			Items        []jsonItem `json:"items"`
			More         bool       `json:"more"`
			Continuation *string    `json:"continuation,omitempty"`
			Incomplete   bool       `json:"incomplete"`
			Pages        int        `json:"pages"`
			Hops         uint32     `json:"hops"`
			ServedBy     []string   `json:"served_by"`
		}{
			OK: true, Command: cmd, Range: rangeJSON(&pb.KeyRange{Start: start, End: end}, a.g.hex),
			Count: len(res.Items), Items: []jsonItem{}, More: res.More, Incomplete: res.Incomplete,
			Pages: res.Pages, Hops: res.Hops, ServedBy: peerIDs(res.ServedBy),
		}
		if prefix != nil {
			p, _ := jsonBytes(prefix, a.g.hex)
			out.Prefix = &p
		}
		for _, it := range res.Items {
			out.Items = append(out.Items, itemJSON(it, a.g.hex))
		}
		if res.More {
			s, _ := jsonBytes(res.Continuation, a.g.hex)
			out.Continuation = &s
		}
		a.writeJSON(out)
		return
	}
	for _, it := range res.Items {
		fmt.Fprintf(a.stdout, "%s\t%s\n", show(it.GetKey(), a.g.hex), show(it.GetValue(), a.g.hex))
	}
	summary := fmt.Sprintf("%d item%s from %d node%s", len(res.Items), plural(len(res.Items)), len(res.ServedBy), plural(len(res.ServedBy)))
	if res.More {
		if cmd == "scan" {
			summary += "; more from " + show(res.Continuation, a.g.hex) + ": " + resumeHint(res.Continuation, end, a.g.hex)
		} else {
			summary += fmt.Sprintf("; more from %s (raise --limit, 0 for all)", show(res.Continuation, a.g.hex))
		}
	}
	fmt.Fprintf(a.stderr, "-- %s\n", summary)
	if res.Incomplete {
		fmt.Fprintln(a.stderr, "warning: part of the range was lost with a failed node; keys there may be missing")
	}
}

// resumeHint is the command that continues a scan from cont: in hex when a key would not survive
// a shell as text.
func resumeHint(cont, end []byte, hexMode bool) string {
	if !hexMode && (!shellSafe(cont) || !shellSafe(end)) {
		hexMode = true
	}
	if hexMode {
		return fmt.Sprintf("skipctl --hex scan %s %s", show(cont, true), show(end, true))
	}
	return fmt.Sprintf("skipctl scan %s %s", shellArg(cont), shellArg(end))
}

// shellSafe: the key can be written as a shell argument in text (empty, or printable without a
// single quote).
func shellSafe(b []byte) bool {
	return len(b) == 0 || (printable(b) && !strings.Contains(string(b), "'"))
}

// shellArg quotes a shellSafe key for a shell when needed.
func shellArg(b []byte) string {
	switch s := string(b); {
	case s == "":
		return `""`
	case strings.ContainsAny(s, "\"$*?[]{}()<>|&;#~!`\\"):
		return "'" + s + "'"
	default:
		return s
	}
}
