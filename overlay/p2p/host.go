package p2p

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"
)

func init() {
	// libp2p backs off from a peer for 5 s and more after one failed dial. Our peers restart in a
	// second or two (a rolling restart); with the default, a node could not send to a neighbour
	// that was already back, and the two declared each other dead (found by the docker chaos
	// test). Failure detection is the protocol's business, so back off briefly.
	swarm.BackoffBase = 200 * time.Millisecond
	swarm.BackoffCoef = 200 * time.Millisecond
	swarm.BackoffMax = 5 * time.Second
}

// withoutLoopback leaves out loopback addresses when there are others: a peer that dials
// another's 127.0.0.1 reaches itself, and that failed dial (with the backoff after it) held up
// the dial of the address that works.
func withoutLoopback(addrs []ma.Multiaddr) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range addrs {
		if !manet.IsIPLoopback(a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return addrs // a loopback-only node (testnet/local): its loopback addresses are all it has
	}
	return out
}

// DHTPrefix keeps skiprange's DHT apart from the public IPFS one: nodes only ever talk to
// nodes of their own kind.
const DHTPrefix = "/skiprange"

// LoadOrCreateIdentity reads the node's private key from path, or creates an Ed25519 key there
// (readable by the owner only) when the file does not exist. The key is the node's identity:
// keeping it lets a restarted node take its place back.
func LoadOrCreateIdentity(path string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("identity key %s is corrupt (move it away to start as a new node): %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read identity key: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate identity key: %w", err)
	}
	raw, err = crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode identity key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	return key, nil
}

// hostConfig is what newHost needs.
type hostConfig struct {
	identity    crypto.PrivKey
	listenAddrs []string
	bootstrap   []peer.AddrInfo
	registerer  prometheus.Registerer
	gater       coreconnmgr.ConnectionGater
}

// newHost starts a libp2p host on TCP and QUIC with Noise, a connection manager whose
// protections keep skip-graph neighbours connected, and resource limits sized for the overlay:
// many small streams to neighbours, a few long handoff streams, and client streams. The DHT runs
// in server mode on skiprange's own protocol prefix, for peer routing and rendezvous.
func newHost(cfg hostConfig) (host.Host, *dht.IpfsDHT, error) {
	cm, err := connmgr.NewConnManager(256, 512, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, nil, fmt.Errorf("connection manager: %w", err)
	}
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	// Overlay streams are long-lived (one per neighbour and direction) and carry handoff chunks
	// of up to MaxFrameSize; client streams are short and many.
	limits.AddProtocolLimit(OverlayProtocol,
		rcmgr.BaseLimit{Streams: 4096, StreamsInbound: 2048, StreamsOutbound: 2048, Memory: 256 << 20},
		rcmgr.BaseLimitIncrease{Streams: 1024, StreamsInbound: 512, StreamsOutbound: 512, Memory: 64 << 20})
	limits.AddProtocolLimit(ClientProtocol,
		rcmgr.BaseLimit{Streams: 2048, StreamsInbound: 2048, StreamsOutbound: 64, Memory: 256 << 20},
		rcmgr.BaseLimitIncrease{Streams: 512, StreamsInbound: 512, Memory: 64 << 20})
	limits.AddProtocolPeerLimit(OverlayProtocol,
		rcmgr.BaseLimit{Streams: 64, StreamsInbound: 32, StreamsOutbound: 32, Memory: 2 * MaxFrameSize},
		rcmgr.BaseLimitIncrease{})
	limits.AddProtocolPeerLimit(ClientProtocol,
		rcmgr.BaseLimit{Streams: 256, StreamsInbound: 256, StreamsOutbound: 16, Memory: 4 * MaxFrameSize},
		rcmgr.BaseLimitIncrease{})
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()))
	if err != nil {
		return nil, nil, fmt.Errorf("resource manager: %w", err)
	}
	opts := []libp2p.Option{
		libp2p.Identity(cfg.identity),
		libp2p.ListenAddrStrings(cfg.listenAddrs...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.ConnectionManager(cm),
		libp2p.ResourceManager(rm),
		libp2p.DisableRelay(),
		libp2p.AddrsFactory(withoutLoopback),
	}
	if cfg.gater != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.gater))
	}
	if cfg.registerer != nil {
		opts = append(opts, libp2p.PrometheusRegisterer(cfg.registerer))
	} else {
		opts = append(opts, libp2p.DisableMetrics())
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("start libp2p host: %w", err)
	}
	kad, err := dht.New(h,
		dht.Mode(dht.ModeServer),
		dht.ProtocolPrefix(DHTPrefix),
		dht.DisableValues(),
		dht.BootstrapPeers(cfg.bootstrap...),
	)
	if err != nil {
		_ = h.Close()
		return nil, nil, fmt.Errorf("start DHT: %w", err)
	}
	if err := kad.Bootstrap(context.Background()); err != nil {
		_ = kad.Close()
		_ = h.Close()
		return nil, nil, fmt.Errorf("bootstrap DHT: %w", err)
	}
	return h, kad, nil
}
