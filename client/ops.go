package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/overlay/pb"
)

// call sends a request and turns a status other than OK into a *StatusError, returning the
// reply with it.
func (c *Client) call(ctx context.Context, entry peer.AddrInfo, req *pb.ClientRequest) (*pb.ClientReply, error) {
	rep, err := c.Do(ctx, entry, req)
	if err != nil {
		return nil, err
	}
	return rep, statusErr(req.GetOp(), rep)
}

// Get reads key. The value is in the reply's Value; a missing key is an error matching
// ErrNotFound, a key in a lost range one matching ErrLost.
func (c *Client) Get(ctx context.Context, entry peer.AddrInfo, key []byte) (*pb.ClientReply, error) {
	return c.call(ctx, entry, &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_GET, Key: key})
}

// Put writes key = value.
func (c *Client) Put(ctx context.Context, entry peer.AddrInfo, key, value []byte) (*pb.ClientReply, error) {
	return c.call(ctx, entry, &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_PUT, Key: key, Value: value})
}

// Delete removes key. Whether deleting an absent key is an error (ErrNotFound) is up to the node.
func (c *Client) Delete(ctx context.Context, entry peer.AddrInfo, key []byte) (*pb.ClientReply, error) {
	return c.call(ctx, entry, &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_DELETE, Key: key})
}

// PutBatch writes items in one request (bulk loading); the reply's Stored counts the items
// stored. A batch larger than a frame fails with ErrTooLarge before anything is sent; the node
// also bounds the items per batch.
func (c *Client) PutBatch(ctx context.Context, entry peer.AddrInfo, items []*pb.Item) (*pb.ClientReply, error) {
	return c.call(ctx, entry, &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_PUT_BATCH, Items: items})
}

// Scan reads the keys in [start, end) on the key circle, at most limit of them (0: the node's
// maximum), in one request. start == end reads the whole circle; an empty end reads up to the
// largest key. When a limit cut the answer short the reply has More set and Continuation, the
// first key not returned; Incomplete says part of the range was lost with a failed node.
func (c *Client) Scan(ctx context.Context, entry peer.AddrInfo, start, end []byte, limit uint32) (*pb.ClientReply, error) {
	return c.call(ctx, entry, &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_SCAN, Key: start, End: end, Limit: limit})
}

// Status asks the entry node to describe itself; nothing is routed.
func (c *Client) Status(ctx context.Context, entry peer.AddrInfo) (*pb.NodeStatus, error) {
	rep, err := c.call(ctx, entry, &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_STATUS})
	if err != nil {
		return nil, err
	}
	if rep.GetNode() == nil {
		return nil, &TransportError{Op: pb.ClientOp_CLIENT_OP_STATUS, Peer: entry.ID, Kind: ErrProtocol,
			Err: errors.New("the node answered OK without a status")}
	}
	return rep.GetNode(), nil
}

// ScanResult gathers the pages of ScanAll.
type ScanResult struct {
	Items []*pb.Item
	// More: the scan stopped at its maximum with keys left; Continuation is the first of them.
	More         bool
	Continuation []byte
	// Incomplete: part of the range was lost with a failed node; keys there may be missing.
	Incomplete bool
	Pages      int
	Hops       uint32   // summed over the pages
	ServedBy   [][]byte // the peer IDs (bytes) of the nodes that served, in order, without repeats
}

// ScanAll reads [start, end) like Scan, following continuations until the range is exhausted or
// max items have been read (max ≤ 0: no maximum — mind the size of the range). Every page asks
// for the items still wanted; a node that refuses that limit as above its maximum per answer
// (STATUS_INVALID) is asked again for its maximum, and the surplus is cut off here.
func (c *Client) ScanAll(ctx context.Context, entry peer.AddrInfo, start, end []byte, max int) (*ScanResult, error) {
	res := &ScanResult{}
	seen := make(map[string]bool)
	key := start
	nodeMax := max <= 0 // ask for the node's maximum (limit 0)
	for {
		var limit uint32
		if !nodeMax {
			limit = uint32(min(max-len(res.Items), math.MaxInt32))
		}
		rep, err := c.Scan(ctx, entry, key, end, limit)
		if errors.Is(err, ErrInvalid) && limit > 0 {
			nodeMax = true
			continue
		}
		if err != nil {
			return res, err
		}
		res.Pages++
		res.Hops += rep.GetHops()
		res.Incomplete = res.Incomplete || rep.GetIncomplete()
		for _, id := range rep.GetServedBy() {
			if !seen[string(id)] {
				seen[string(id)] = true
				res.ServedBy = append(res.ServedBy, id)
			}
		}
		items := rep.GetItems()
		if max > 0 && len(res.Items)+len(items) > max {
			// More than wanted: resume at the first item left out.
			cut := max - len(res.Items)
			res.Items = append(res.Items, items[:cut]...)
			res.More, res.Continuation = true, items[cut].GetKey()
			return res, nil
		}
		res.Items = append(res.Items, items...)
		if !rep.GetMore() {
			return res, nil
		}
		next := rep.GetContinuation()
		if max > 0 && len(res.Items) >= max {
			res.More, res.Continuation = true, next
			return res, nil
		}
		// Continuing from end would read the whole circle, continuing in place would loop: a
		// node must make progress.
		if bytes.Equal(next, end) || bytes.Equal(next, key) {
			return res, &TransportError{Op: pb.ClientOp_CLIENT_OP_SCAN, Peer: entry.ID, Kind: ErrProtocol,
				Err: fmt.Errorf("scan made no progress: more items announced, continuation %q after %d items", next, len(items))}
		}
		key = next
	}
}

// Prefix reads the keys that start with p: the range [p, PrefixEnd(p)), following continuations
// up to max items (max ≤ 0: all of them). The empty prefix reads every key.
func (c *Client) Prefix(ctx context.Context, entry peer.AddrInfo, p []byte, max int) (*ScanResult, error) {
	return c.ScanAll(ctx, entry, p, PrefixEnd(p), max)
}

// PrefixEnd returns the smallest key greater than every key with prefix p, so that the keys with
// prefix p are exactly [p, PrefixEnd(p)): trailing 0xff bytes are dropped and the last remaining
// byte is incremented ("ab" → "ac", "a\xff" → "b"). For the empty prefix and for all-0xff
// prefixes no such key exists and the result is empty, which as the end of a scan means "up to
// the largest key". p is not modified.
func PrefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			end := append([]byte(nil), p[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}
