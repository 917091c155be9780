package p2p

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
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
//
// ReadMsg returns io.EOF only when the stream ends cleanly between two frames; a stream that
// ends inside a frame (even right after its length prefix) gives io.ErrUnexpectedEOF, and a
// frame announced longer than MaxFrameSize gives an error wrapping io.ErrShortBuffer without
// its body being read.
func NewFrameReader(r io.Reader) pbio.ReadCloser {
	fr := &frameReader{r: bufio.NewReader(r)}
	fr.c, _ = r.(io.Closer)
	return fr
}

// keptFrameBuffer bounds the buffer a frameReader keeps between frames: a stream that once
// carried a large handoff chunk does not hold megabytes for the rest of its life.
const keptFrameBuffer = 64 << 10

type frameReader struct {
	r   *bufio.Reader
	c   io.Closer
	buf []byte
}

func (fr *frameReader) ReadMsg(m proto.Message) error {
	n, err := binary.ReadUvarint(fr.r) // io.EOF only if no byte of the prefix was read
	if err != nil {
		return err
	}
	if n > MaxFrameSize {
		return fmt.Errorf("frame of %d bytes exceeds the %d-byte limit: %w", n, MaxFrameSize, io.ErrShortBuffer)
	}
	var buf []byte
	if n <= keptFrameBuffer {
		if len(fr.buf) < int(n) {
			fr.buf = make([]byte, n)
		}
		buf = fr.buf[:n]
	} else {
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(fr.r, buf); err != nil {
		if errors.Is(err, io.EOF) { // the prefix arrived, the body did not
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return proto.Unmarshal(buf, m)
}

func (fr *frameReader) Close() error {
	if fr.c == nil {
		return nil
	}
	return fr.c.Close()
}

// NewFrameWriter writes messages to w as varint-delimited frames.
func NewFrameWriter(w io.Writer) pbio.WriteCloser { return pbio.NewDelimitedWriter(w) }

// FrameTooLarge reports whether m would exceed MaxFrameSize; senders check before writing.
func FrameTooLarge(m proto.Message) bool { return proto.Size(m) > MaxFrameSize }
