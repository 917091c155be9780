package p2p

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio/pbio"
	"github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// senderQueue bounds the messages waiting for one peer. Delivery is not guaranteed (the
// protocol retries what matters), so a peer too slow to drain its queue loses messages rather
// than stall the node.
const senderQueue = 1024

// sender owns the one outgoing overlay stream to a peer: messages go out in order, one frame
// each, over a stream opened on first use, replaced after an error, closed when idle.
type sender struct {
	r     *Runtime
	to    peer.ID
	queue chan *pb.Envelope
	quit  chan struct{}
}

// sendTo hands m to the peer's sender without blocking.
func (r *Runtime) sendTo(to overlay.NodeID, m *pb.Envelope) {
	s, ok := r.senders[to]
	if !ok {
		pid, err := peer.IDFromBytes([]byte(to))
		if err != nil {
			r.stats.sendErrors.Add(1)
			r.log.Warn("message for a malformed peer id dropped", zap.Binary("to", []byte(to)))
			return
		}
		s = &sender{r: r, to: pid, queue: make(chan *pb.Envelope, senderQueue), quit: make(chan struct{})}
		r.senders[to] = s
		r.wg.Add(1)
		go s.run()
	}
	select {
	case s.queue <- m:
	default:
		r.stats.dropped.Add(1)
	}
}

func (s *sender) close() { close(s.quit) }

func (s *sender) run() {
	defer s.r.wg.Done()
	var st network.Stream
	var w pbio.WriteCloser
	reset := func() {
		if st != nil {
			_ = st.Reset()
			st, w = nil, nil
		}
	}
	defer reset()
	idle := time.NewTimer(s.r.cfg.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-s.r.stop:
			return
		case <-idle.C:
			if st != nil {
				_ = st.Close()
				st, w = nil, nil
			}
			continue
		case m := <-s.queue:
			if !idle.Stop() {
				select {
				case <-idle.C:
				default:
				}
			}
			idle.Reset(s.r.cfg.IdleTimeout)
			if FrameTooLarge(m) {
				s.r.stats.sendErrors.Add(1)
				s.r.log.Error("message exceeds the frame limit, dropped", zap.Stringer("to", s.to), zap.String("type", bodyName(m)))
				continue
			}
			// A stream that broke since its last use (the peer restarted) fails the first
			// write: one retry on a fresh stream. A message that could not be handed over is
			// given back to the node, which routes a routed one on by another link.
			delivered := false
			for attempt := 0; attempt < 2 && !delivered; attempt++ {
				if st == nil {
					ctx, cancel := context.WithTimeout(s.r.ctx, s.r.cfg.WriteTimeout)
					ns, err := s.r.host.NewStream(ctx, s.to, OverlayProtocol)
					cancel()
					if err != nil {
						s.r.stats.sendErrors.Add(1)
						if ce := s.r.log.Check(zap.DebugLevel, "no stream to the peer: the message goes back to the node"); ce != nil {
							ce.Write(zap.Stringer("to", s.to), zap.String("type", bodyName(m)), zap.Error(err))
						}
						break
					}
					st, w = ns, NewFrameWriter(ns)
				}
				_ = st.SetWriteDeadline(time.Now().Add(s.r.cfg.WriteTimeout))
				if err := w.WriteMsg(m); err != nil {
					if ce := s.r.log.Check(zap.DebugLevel, "write failed; retrying on a fresh stream"); ce != nil {
						ce.Write(zap.Stringer("to", s.to), zap.String("type", bodyName(m)), zap.Int("attempt", attempt), zap.Error(err))
					}
					reset()
					continue
				}
				s.r.stats.framesOut.Add(1)
				if s.r.metrics != nil {
					s.r.metrics.sent(bodyName(m))
				}
				delivered = true
			}
			if !delivered {
				s.r.post(func() { s.r.node.Undeliverable(overlay.NodeID(s.to), m) })
			}
		}
	}
}

// handleOverlay reads the frames of one incoming overlay stream and queues each message for the
// loop. A frame that does not decode, or exceeds MaxFrameSize, resets the stream: the peer is
// broken or hostile, and nothing after it on the stream can be trusted.
func (r *Runtime) handleOverlay(st network.Stream) {
	from := overlay.NodeID(st.Conn().RemotePeer())
	rd := NewFrameReader(st)
	for {
		_ = st.SetReadDeadline(time.Now().Add(r.cfg.IdleTimeout))
		m := new(pb.Envelope)
		if err := rd.ReadMsg(m); err != nil {
			switch {
			case errors.Is(err, io.EOF):
				_ = st.Close()
			case errors.Is(err, os.ErrDeadlineExceeded):
				_ = st.Close() // idle
			case errors.Is(err, network.ErrReset):
				_ = st.Reset()
			default:
				r.stats.badFrames.Add(1)
				r.log.Warn("bad overlay frame: stream reset", zap.Stringer("peer", st.Conn().RemotePeer()), zap.Error(err))
				_ = st.Reset()
			}
			return
		}
		r.stats.framesIn.Add(1)
		if r.metrics != nil {
			r.metrics.received(bodyName(m))
		}
		if !r.post(func() {
			r.learnAddrs(m, time.Now())
			r.node.Handle(from, m)
		}) {
			_ = st.Reset()
			return
		}
	}
}

// isUnknownSkiprangeProtocol matches skiprange protocols this node does not speak (another
// version), so that they are counted before the stream is reset.
func isUnknownSkiprangeProtocol(id protocol.ID) bool {
	return strings.HasPrefix(string(id), "/skiprange/") && id != OverlayProtocol && id != ClientProtocol &&
		!strings.HasPrefix(string(id), DHTPrefix+"/kad/")
}

func (r *Runtime) handleUnknown(st network.Stream) {
	r.stats.badProtocol.Add(1)
	r.log.Warn("stream for an unknown skiprange protocol reset", zap.String("protocol", string(st.Protocol())), zap.Stringer("peer", st.Conn().RemotePeer()))
	_ = st.Reset()
}

// learnedAddrs are the addresses last recorded for a peer, and when.
type learnedAddrs struct {
	key string
	at  time.Time
}

// learnedAddrTTL is how long learned addresses stay in the peerstore. The same addresses heard
// again are recorded again once half of it has passed: recorded only once, they expired after
// the first hour, and a node called on after a long partition was dialled through the DHT.
const learnedAddrTTL = time.Hour

// learnAddrs records the listen addresses carried by every node descriptor in m, so that the
// node can reach the peers it hears of without asking the DHT.
func (r *Runtime) learnAddrs(m *pb.Envelope, now time.Time) {
	walkNodeRefs(m.ProtoReflect(), func(ref *pb.NodeRef) {
		if len(ref.Addrs) == 0 || overlay.NodeID(ref.Id) == r.self {
			return
		}
		id, err := peer.IDFromBytes(ref.Id)
		if err != nil {
			return
		}
		key := string(joinBytes(ref.Addrs))
		if l := r.learned[id]; l.key == key && now.Sub(l.at) < learnedAddrTTL/2 {
			return
		}
		var addrs []multiaddr.Multiaddr
		for _, b := range ref.Addrs {
			if a, err := multiaddr.NewMultiaddrBytes(b); err == nil {
				addrs = append(addrs, a)
			}
		}
		r.host.Peerstore().AddAddrs(id, addrs, learnedAddrTTL)
		r.learned[id] = learnedAddrs{key: key, at: now}
	})
}

func joinBytes(parts [][]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, byte(len(p)), byte(len(p)>>8))
		out = append(out, p...)
	}
	return out
}

var nodeRefName = (&pb.NodeRef{}).ProtoReflect().Descriptor().FullName()

// walkNodeRefs calls fn for every NodeRef in m, however deep.
func walkNodeRefs(m protoreflect.Message, fn func(*pb.NodeRef)) {
	if m.Descriptor().FullName() == nodeRefName {
		if ref, ok := m.Interface().(*pb.NodeRef); ok {
			fn(ref)
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkNodeRefs(l.Get(i).Message(), fn)
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					walkNodeRefs(mv.Message(), fn)
				}
				return true
			})
		default:
			walkNodeRefs(v.Message(), fn)
		}
		return true
	})
}

// bodyName names an envelope's message type for metrics, e.g. "lookup" or "balance".
func bodyName(m *pb.Envelope) string {
	od := m.ProtoReflect().Descriptor().Oneofs().ByName("body")
	if od == nil {
		return "unknown"
	}
	fd := m.ProtoReflect().WhichOneof(od)
	if fd == nil {
		return "empty"
	}
	return string(fd.Name())
}
