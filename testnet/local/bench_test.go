package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/p2p"
	"github.com/skiprange/skiprange/overlay/pb"
)

// The benchmarks of issue #4 (docs/BENCHMARKS.md): a 32-node loopback network shared by the
// benchmarks of one run, loaded with benchKeys keys of benchValue bytes.
const (
	benchNodes = 32
	benchKeys  = 20000
	benchValue = 100
)

var (
	benchOnce sync.Once
	benchNet  *Network
	benchErr  error
)

func benchNetwork(b *testing.B) *Network {
	b.Helper()
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(3, 4))
		// Balancing stays off: the scans' load would otherwise make NIXMIG move data while the
		// latencies are measured.
		benchNet, benchErr = Start(context.Background(), benchNodes, Options{HoldBalancing: true,
			JoinAt: func(int) overlay.Key { return overlay.Key(keyOf(rng.IntN(benchKeys))) },
		})
		if benchErr != nil {
			return
		}
		c, err := client.New(context.Background())
		if err != nil {
			benchErr = err
			return
		}
		defer c.Close()
		e, _ := benchNet.Entry()
		val := make([]byte, benchValue)
		for lo := 0; lo < benchKeys; lo += 200 {
			var items []*pb.Item
			for i := lo; i < min(lo+200, benchKeys); i++ {
				items = append(items, &pb.Item{Key: []byte(keyOf(i)), Value: val})
			}
			if _, err := c.PutBatch(context.Background(), e, items); err != nil {
				benchErr = err
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchNet
}

// reportLatencies adds p50 and p99 (in ms) and mean hops to a benchmark's results.
func reportLatencies(b *testing.B, lat []time.Duration, hops int) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(hops)/float64(len(lat)), "hops/op")
}

// BenchmarkRoundTripFloor: one request/response over a fresh libp2p stream between two hosts on
// loopback — the floor a lookup hop is compared with.
func BenchmarkRoundTripFloor(b *testing.B) {
	newHost := func() (hostT, error) {
		return libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableMetrics())
	}
	srv, err := newHost()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.SetStreamHandler(p2p.ClientProtocol, func(s network.Stream) {
		req := new(pb.ClientRequest)
		if err := p2p.NewFrameReader(s).ReadMsg(req); err != nil {
			_ = s.Reset()
			return
		}
		_ = p2p.NewFrameWriter(s).WriteMsg(&pb.ClientReply{Value: req.Key})
		_ = s.Close()
	})
	cli, err := newHost()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	if err := cli.Connect(ctx, peer.AddrInfo{ID: srv.ID(), Addrs: srv.Addrs()}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s, err := cli.NewStream(ctx, srv.ID(), p2p.ClientProtocol)
		if err != nil {
			b.Fatal(err)
		}
		if err := p2p.NewFrameWriter(s).WriteMsg(&pb.ClientRequest{Key: []byte("k")}); err != nil {
			b.Fatal(err)
		}
		if err := p2p.NewFrameReader(s).ReadMsg(new(pb.ClientReply)); err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
		lat = append(lat, time.Since(t0))
	}
	reportLatencies(b, lat, 0)
}

// benchOps runs op b.N times from one client through random entry nodes, sequentially.
func benchOps(b *testing.B, op func(c *client.Client, e peer.AddrInfo, rng *rand.Rand) (*pb.ClientReply, error)) {
	nw := benchNetwork(b)
	c, err := client.New(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	es := entries(nw)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, e := range es { // connect first: the benchmark measures requests, not dials
		if _, err := c.Status(context.Background(), e); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	hops := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rep, err := op(c, es[rng.IntN(len(es))], rng)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		hops += int(rep.Hops)
	}
	reportLatencies(b, lat, hops)
}

func BenchmarkGet32(b *testing.B) {
	benchOps(b, func(c *client.Client, e peer.AddrInfo, rng *rand.Rand) (*pb.ClientReply, error) {
		return c.Get(context.Background(), e, []byte(keyOf(rng.IntN(benchKeys))))
	})
}

func BenchmarkScan100Keys32(b *testing.B) {
	benchOps(b, func(c *client.Client, e peer.AddrInfo, rng *rand.Rand) (*pb.ClientReply, error) {
		lo := rng.IntN(benchKeys - 100)
		rep, err := c.Scan(context.Background(), e, []byte(keyOf(lo)), []byte(keyOf(lo+100)), 0)
		if err == nil && len(rep.Items) != 100 {
			err = fmt.Errorf("scan returned %d items, want 100", len(rep.Items))
		}
		return rep, err
	})
}

// BenchmarkGetThroughput32: one client with 16 requests in flight; ops/s is the single-client
// throughput.
func BenchmarkGetThroughput32(b *testing.B) {
	nw := benchNetwork(b)
	c, err := client.New(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	es := entries(nw)
	b.SetParallelism(16 / max(1, runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	t0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			if _, err := c.Get(context.Background(), es[rng.IntN(len(es))], []byte(keyOf(rng.IntN(benchKeys)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "ops/s")
}

// BenchmarkHandoff: a node joins next to the owner of handoffItems items of 1 KiB and takes half
// of them; items/s and MB/s are the handoff rate.
func BenchmarkHandoff(b *testing.B) {
	const handoffItems, size = 20000, 1024
	var moved, bytes float64
	var took time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		nw, err := Start(context.Background(), 1, Options{})
		if err != nil {
			b.Fatal(err)
		}
		rt := nw.Running()[0]
		val := make([]byte, size)
		for lo := 0; lo < handoffItems; lo += 200 {
			var items []overlay.Item
			for j := lo; j < lo+200; j++ {
				items = append(items, overlay.Item{Key: overlay.Key(keyOf(j)), Value: val})
			}
			if r, err := rt.Request(context.Background(), func(n *nodeT) uint64 { return n.PutBatch(items) }); err != nil || r.Status != pb.Status_STATUS_OK {
				b.Fatal(r, err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		m, err := nw.Add(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		took += time.Since(t0)
		var got int
		_ = m.Runtime.Do(context.Background(), func(n *nodeT) { got = n.Store().Len() })
		moved += float64(got)
		bytes += float64(got) * float64(size+6)
		b.StopTimer()
		nw.Close()
	}
	b.ReportMetric(moved/took.Seconds(), "items/s")
	b.ReportMetric(bytes/took.Seconds()/1e6, "MB/s")
}

// TestMemoryPerNode reports the heap per node of a 32-node network at idle and under reads
// (go test -run MemoryPerNode -v ./testnet/local/ with SKIPRANGE_BENCH=1).
func TestMemoryPerNode(t *testing.T) {
	if !benchEnabled() {
		t.Skip("set SKIPRANGE_BENCH=1 to measure (docs/BENCHMARKS.md)")
	}
	heap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse)
	}
	base := heap()
	nw := startNet(t, benchNodes, Options{})
	c := newClient(t)
	load(t, c, nw, benchKeys)
	time.Sleep(2 * time.Second)
	idle := heap()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	es := entries(nw)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = c.Get(context.Background(), es[rng.IntN(len(es))], []byte(keyOf(rng.IntN(benchKeys))))
			}
		}(w)
	}
	time.Sleep(5 * time.Second)
	busy := heap()
	close(stop)
	wg.Wait()
	t.Logf("heap per node: idle %.1f MiB, under 16 concurrent readers %.1f MiB (%d nodes, %d keys of %d bytes in all)",
		(idle-base)/benchNodes/(1<<20), (busy-base)/benchNodes/(1<<20), benchNodes, benchKeys, benchValue)
}

type hostT = host.Host

func benchEnabled() bool { return os.Getenv("SKIPRANGE_BENCH") != "" }
