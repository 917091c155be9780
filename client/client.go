package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/overlay/p2p"
	"github.com/skiprange/skiprange/overlay/pb"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Item size limits of a skipnode with the default configuration (p2p.DefaultNodeConfig): a node
// answers STATUS_INVALID to larger keys or values. Callers may check before sending; a node
// configured otherwise has the last word.
var (
	MaxKeyLen   = p2p.DefaultNodeConfig().SkipGraph.MaxKeyLen
	MaxValueLen = p2p.DefaultNodeConfig().SkipGraph.MaxValueLen
)

// Client is a client-only libp2p host that sends requests to skiprange nodes. It is safe for
// concurrent use.
type Client struct {
	h       host.Host
	timeout time.Duration
}

// Option configures New.
type Option func(*Client)

// WithTimeout sets the timeout of requests whose context has no deadline (default
// DefaultTimeout). d ≤ 0 keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// New starts a client host: a fresh Ed25519 identity, no listen addresses, TCP and QUIC-v1
// transports, Noise security. ctx only guards the start; the host lives until Close.
func New(ctx context.Context, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &Client{timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	h, err := libp2p.New(
		libp2p.NoListenAddrs,
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.UserAgent("skiprange-client"),
		libp2p.DisableMetrics(),
		// A client bounds its own concurrency; libp2p's default limits would only add
		// spurious failures under a benchmark.
		libp2p.ResourceManager(&network.NullResourceManager{}),
	)
	if err != nil {
		return nil, fmt.Errorf("client: start libp2p host: %w", err)
	}
	c.h = h
	return c, nil
}

// Close shuts the host down, closing every connection.
func (c *Client) Close() error {
	return c.h.Close()
}

// Host returns the client's libp2p host.
func (c *Client) Host() host.Host { return c.h }

// Timeout returns the timeout applied to requests whose context has no deadline.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Do sends req to the entry node and returns its reply, whatever the reply's status. It connects
// (or reuses a connection), opens a stream for p2p.ClientProtocol, writes the request as one frame
// and reads one reply frame. The exchange is bounded by ctx's deadline, or by the client's timeout
// when ctx has none; cancelling ctx aborts it. Do sets req.Version to p2p.ClientVersion when it
// is zero. Errors are *TransportError of class ErrTooLarge (nothing sent), ErrUnreachable,
// ErrTimeout, ErrProtocol or context.Canceled.
func (c *Client) Do(ctx context.Context, entry peer.AddrInfo, req *pb.ClientRequest) (*pb.ClientReply, error) {
	if req == nil {
		return nil, &TransportError{Peer: entry.ID, Kind: ErrProtocol, Err: errors.New("nil request")}
	}
	op := req.GetOp()
	if req.Version == 0 {
		req.Version = p2p.ClientVersion
	}
	if p2p.FrameTooLarge(req) {
		return nil, &TransportError{Op: op, Peer: entry.ID, Kind: ErrTooLarge,
			Err: fmt.Errorf("%d bytes encoded, over the frame limit of %d bytes; split it", proto.Size(req), p2p.MaxFrameSize)}
	}
	if entry.ID == "" {
		return nil, &TransportError{Op: op, Kind: ErrUnreachable, Err: fmt.Errorf("%w: no peer ID", ErrBadAddress)}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, classify(ctx, op, entry.ID, ErrTimeout, "before sending", err)
	}
	if err := c.h.Connect(ctx, entry); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// No connection in time (a dead node's QUIC address fails only at the deadline):
			// the node is unreachable rather than slow.
			return nil, &TransportError{Op: op, Peer: entry.ID, Kind: ErrUnreachable,
				Err: fmt.Errorf("connect: no connection to %v before the deadline: %w", entry.Addrs, err)}
		}
		return nil, classify(ctx, op, entry.ID, ErrUnreachable, "connect", err)
	}
	s, err := c.h.NewStream(ctx, entry.ID, p2p.ClientProtocol)
	if err != nil {
		return nil, classify(ctx, op, entry.ID, ErrUnreachable, "open stream", err)
	}
	// The deadline bounds blocked reads and writes; cancellation resets the stream.
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	fail := func(step string, err error) (*pb.ClientReply, error) {
		_ = s.Reset()
		return nil, classify(ctx, op, entry.ID, ErrProtocol, step, err)
	}
	if err := p2p.NewFrameWriter(s).WriteMsg(req); err != nil {
		return fail("send request", err)
	}
	// Half-close: the request is complete. A node that ignores the half-close still answers.
	_ = s.CloseWrite()
	rep := new(pb.ClientReply)
	if err := p2p.NewFrameReader(s).ReadMsg(rep); err != nil {
		switch {
		case errors.Is(err, io.EOF):
			err = errors.New("the node closed the stream without replying")
		case errors.Is(err, io.ErrUnexpectedEOF):
			err = errors.New("the node closed the stream in the middle of its reply")
		case errors.Is(err, io.ErrShortBuffer):
			err = fmt.Errorf("reply frame larger than %d bytes", p2p.MaxFrameSize)
		}
		return fail("read reply", err)
	}
	_ = s.Close()
	return rep, nil
}
