// Package client talks to a skiprange overlay from outside it, over the client protocol
// (/skiprange/client/1.0.0): it opens a stream to one node — the entry point — writes one
// pb.ClientRequest frame and reads one pb.ClientReply frame. The entry node routes the request
// through the overlay on the client's behalf, so a client needs to know a single node.
//
// A Client owns a client-only libp2p host: it listens nowhere, dials over TCP and QUIC-v1 and
// secures connections with Noise. Connections are kept and reused, so one Client can issue many
// concurrent requests (every request gets its own stream).
//
//	c, err := client.New(ctx)
//	if err != nil { … }
//	defer c.Close()
//	entry, err := client.ParsePeer("/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW…")
//	if err != nil { … }
//	_, err = c.Put(ctx, entry, []byte("apple"), []byte("red"))
//	rep, err := c.Get(ctx, entry, []byte("apple")) // rep.Value == "red"
//
// Errors come in classes that callers test with errors.Is:
//
//   - ErrBadAddress: ParsePeer could not use the address.
//   - ErrTooLarge: the request exceeds p2p.MaxFrameSize; it was not sent.
//   - ErrUnreachable: no connection to the node could be made.
//   - ErrTimeout: the request's deadline passed (context.Canceled marks a cancelled one).
//   - ErrProtocol: the stream failed — reset by the node, protocol not supported, a malformed or
//     missing reply.
//   - ErrNotFound, ErrLost: the node answered STATUS_NOT_FOUND or STATUS_LOST.
//   - ErrOverlay (and ErrInvalid for STATUS_INVALID): the node answered an error status; the
//     *StatusError carries the node's explanation.
//
// Class maps an error to a short, stable name of its class for reports.
//
// Do sends any request and returns every reply, whatever its status; the convenience methods
// (Get, Put, Delete, Scan, ScanAll, Prefix, PutBatch, Status) turn a status other than OK into a
// *StatusError and still return the reply next to it, for its hops and owner. Ring walks the
// level-0 ring from the entry node and reports what it finds wrong rather than hanging on it.
package client
