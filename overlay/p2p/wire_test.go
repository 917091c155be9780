package p2p

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/overlay/pb"
)

// sampleEnvelopes returns messages of several kinds, with bytes fields that a reader reusing its
// buffer would corrupt if it aliased them.
func sampleEnvelopes() []*pb.Envelope {
	from := &pb.NodeRef{Id: []byte("node-a"), Start: []byte("k100"), Version: 3, Mvec: 0xdeadbeef, Addrs: [][]byte{[]byte("addr-1")}}
	return []*pb.Envelope{
		{From: from, Cause: pb.Cause_CAUSE_CLIENT, Body: &pb.Envelope_Lookup{Lookup: &pb.Lookup{
			ReqId: 7, Origin: from, Op: pb.Op_OP_PUT, Value: bytes.Repeat([]byte("v"), 3000),
			Route: &pb.Route{Key: []byte("key-1"), Hops: 2},
		}}},
		{From: from, Cause: pb.Cause_CAUSE_MAINTAIN, Body: &pb.Envelope_Ping{Ping: &pb.Ping{Seq: 1, Table: true}}},
		{}, // an empty envelope is a zero-length frame
		{From: from, Body: &pb.Envelope_Handoff{Handoff: &pb.Handoff{
			XferId: 9, Kind: pb.HandoffKind_HANDOFF_LEAVE, Start: []byte("a"), End: []byte("m"),
			Items: []*pb.Item{{Key: []byte("b"), Value: []byte("bee")}, {Key: []byte("c"), Value: bytes.Repeat([]byte{0}, 70000)}},
			Last:  true,
		}}},
		{From: from, Body: &pb.Envelope_LookupReply{LookupReply: &pb.LookupReply{ReqId: 7, Status: pb.Status_STATUS_NOT_FOUND, Error: "no"}}},
	}
}

func TestFramesRoundTripWithOneReader(t *testing.T) {
	msgs := sampleEnvelopes()
	var buf bytes.Buffer
	w := NewFrameWriter(&buf)
	for _, m := range msgs {
		if err := w.WriteMsg(m); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	// One reader for the whole stream: it buffers, so a reader per frame would lose data.
	r := NewFrameReader(&buf)
	var got []*pb.Envelope
	for range msgs {
		m := new(pb.Envelope)
		if err := r.ReadMsg(m); err != nil {
			t.Fatalf("read frame %d: %v", len(got), err)
		}
		got = append(got, m)
	}
	// Compare only once all are read: a later read must not overwrite an earlier message.
	for i := range msgs {
		if !proto.Equal(got[i], msgs[i]) {
			t.Errorf("frame %d: got %v, want %v", i, got[i], msgs[i])
		}
	}
	if err := r.ReadMsg(new(pb.Envelope)); !errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read past the last frame: got %v, want a clean io.EOF", err)
	}
}

// exactEnvelope builds an envelope whose encoding is exactly size bytes.
func exactEnvelope(t *testing.T, size int) *pb.Envelope {
	t.Helper()
	m := &pb.Envelope{Body: &pb.Envelope_Handoff{Handoff: &pb.Handoff{Items: []*pb.Item{{Key: []byte("k")}}}}}
	item := m.GetHandoff().Items[0]
	n := size - proto.Size(m)
	for range 8 {
		item.Value = make([]byte, max(n, 0))
		if d := size - proto.Size(m); d == 0 {
			return m
		} else {
			n += d
		}
	}
	t.Fatalf("could not build a %d-byte envelope (got %d)", size, proto.Size(m))
	return nil
}

func TestFrameSizeLimit(t *testing.T) {
	if FrameTooLarge(sampleEnvelopes()[0]) {
		t.Fatal("a small message is reported too large")
	}
	atLimit := exactEnvelope(t, MaxFrameSize)
	if FrameTooLarge(atLimit) {
		t.Fatalf("a message of exactly MaxFrameSize (%d bytes) is reported too large", MaxFrameSize)
	}
	var buf bytes.Buffer
	if err := NewFrameWriter(&buf).WriteMsg(atLimit); err != nil {
		t.Fatal(err)
	}
	got := new(pb.Envelope)
	if err := NewFrameReader(&buf).ReadMsg(got); err != nil {
		t.Fatalf("a frame of exactly MaxFrameSize is refused: %v", err)
	}
	if len(got.GetHandoff().GetItems()[0].GetValue()) != len(atLimit.GetHandoff().Items[0].Value) {
		t.Fatal("the frame at the limit did not round-trip")
	}

	over := exactEnvelope(t, MaxFrameSize+1)
	if !FrameTooLarge(over) {
		t.Fatalf("a message of MaxFrameSize+1 bytes is not reported too large")
	}
	// The writer does not check (senders do); the reader must refuse the frame.
	buf.Reset()
	if err := NewFrameWriter(&buf).WriteMsg(over); err != nil {
		t.Fatal(err)
	}
	// client.Client tells this case from others by io.ErrShortBuffer.
	if err := NewFrameReader(&buf).ReadMsg(new(pb.Envelope)); !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("a frame longer than MaxFrameSize: got %v, want an error wrapping io.ErrShortBuffer", err)
	}
}

// readWithin runs one ReadMsg on a fresh reader over r and fails the test if it does not return
// within a few seconds.
func readWithin(t *testing.T, r io.Reader) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- NewFrameReader(r).ReadMsg(new(pb.Envelope)) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("ReadMsg hangs")
		return nil
	}
}

func TestOversizedHeaderRefusedWithoutReadingBody(t *testing.T) {
	// Only the length prefix arrives, and the writer keeps the stream open: the reader must
	// refuse from the header alone, not wait for 32 MiB that will never come.
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { _, _ = pw.Write(binary.AppendUvarint(nil, MaxFrameSize+1)) }()
	if err := readWithin(t, pr); !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("a header announcing MaxFrameSize+1 bytes: got %v, want an error wrapping io.ErrShortBuffer", err)
	}
	// A header announcing an absurd length (beyond int range on 32-bit) is refused too.
	if err := readWithin(t, bytes.NewReader(binary.AppendUvarint(nil, 1<<62))); err == nil {
		t.Fatal("a header announcing 2^62 bytes was accepted")
	}
}

func TestTruncatedFrame(t *testing.T) {
	var buf bytes.Buffer
	if err := NewFrameWriter(&buf).WriteMsg(sampleEnvelopes()[0]); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for _, cut := range []int{1, 2, len(whole) / 2, len(whole) - 1} {
		err := readWithin(t, bytes.NewReader(whole[:cut]))
		if err == nil {
			t.Errorf("frame cut at %d of %d bytes: no error", cut, len(whole))
		} else if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			// handleOverlay closes quietly on io.EOF: a cut frame must not look like a clean end.
			t.Errorf("frame cut at %d of %d bytes: got a clean io.EOF", cut, len(whole))
		}
	}
	// A writer that goes away in the middle of a frame (a closed pipe, as a dead stream).
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(whole[:len(whole)/2])
		_ = pw.Close()
	}()
	if err := readWithin(t, pr); err == nil {
		t.Fatal("a frame cut by the writer closing: no error")
	}
	// A truncated varint header.
	if err := readWithin(t, bytes.NewReader([]byte{0x80})); err == nil {
		t.Fatal("a truncated length prefix: no error")
	}
	// Garbage of the right length is an error too, not a silently empty message.
	garbage := binary.AppendUvarint(nil, 4)
	garbage = append(garbage, 0xff, 0xff, 0xff, 0xff)
	if err := readWithin(t, bytes.NewReader(garbage)); err == nil {
		t.Fatal("an undecodable frame: no error")
	}
}
