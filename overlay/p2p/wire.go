package p2p

import (
	"io"

	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio/pbio"
	"google.golang.org/protobuf/proto"
)

// Protocol identifiers. A change that old nodes cannot read gets a new version; a node answers
// an unknown protocol by resetting the stream (libp2p's multistream negotiation does that).
const (
	// OverlayProtocol carries node-to-node Envelopes, one frame each, one way.
	OverlayProtocol protocol.ID = "/skiprange/overlay/1.0.0"
	// ClientProtocol carries one ClientRequest and its ClientReply per stream.
	ClientProtocol protocol.ID = "/skiprange/client/1.0.0"
	// ClientVersion is the ClientRequest.version this code speaks.
	ClientVersion = 1
)

// MaxFrameSize bounds one frame on either protocol. Protocol limits (item sizes, items per
// message and per handoff chunk) are set so that every well-formed message fits.
const MaxFrameSize = 32 << 20

// NewFrameReader reads varint-delimited protobuf messages of at most MaxFrameSize bytes from r.
// It buffers: keep one per stream.
func NewFrameReader(r io.Reader) pbio.ReadCloser { return pbio.NewDelimitedReader(r, MaxFrameSize) }

// NewFrameWriter writes messages to w as varint-delimited frames.
func NewFrameWriter(w io.Writer) pbio.WriteCloser { return pbio.NewDelimitedWriter(w) }

// FrameTooLarge reports whether m would exceed MaxFrameSize; senders check before writing.
func FrameTooLarge(m proto.Message) bool { return proto.Size(m) > MaxFrameSize }
