// Command skipnode is the skiprange peer daemon: it joins or starts an overlay, stores its range
// of keys in Pebble, serves client requests on /skiprange/client/1.0.0, balances load with
// NIXMIG, and exposes Prometheus metrics. `skipnode --help` explains its flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/gologshim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/p2p"
	"github.com/skiprange/skiprange/skipgraph"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the node could not start or failed while running
	exitUsage   = 2 // bad flags, environment or config file
)

func run(args []string, stdout, stderr io.Writer) int {
	o, err := loadOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "skipnode: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "skipnode: %v\n", err)
		return exitUsage
	}
	defer func() { _ = log.Sync() }()
	if err := serve(o, log, stdout); err != nil {
		log.Error("skipnode stopped", zap.Error(err))
		return exitFailure
	}
	return exitOK
}

// newLogger builds the zap logger and routes libp2p's loggers (go-log and slog) through it.
func newLogger(o *options, stderr io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if _, err := golog.LevelFromString(o.libp2pLog); err != nil {
		return nil, fmt.Errorf("--libp2p-log-level: %w", err)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewConsoleEncoder(encCfg)
	if o.logJSON {
		enc = zapcore.NewJSONEncoder(encCfg)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(stderr)), level)
	golog.SetPrimaryCore(core)
	lvl, _ := golog.LevelFromString(o.libp2pLog)
	golog.SetAllLoggers(lvl)
	gologshim.SetDefaultHandler(golog.SlogHandler())
	return zap.New(core), nil
}

// serve runs the node until a signal: the first leaves gracefully, a second exits at once.
func serve(o *options, log *zap.Logger, stdout io.Writer) error {
	key, err := p2p.LoadOrCreateIdentity(o.identity)
	if err != nil {
		return err
	}
	st, err := store.OpenPebble(filepath.Join(o.dataDir, "store"), log.Named("pebble"))
	if err != nil {
		return err
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := p2p.Config{
		Identity: key, ListenAddrs: o.listen, Bootstrap: o.peers, Network: o.network, NewNetwork: o.newNetwork,
		Node: o.node, Store: st, Logger: log, Registerer: reg, RingCheck: o.ringCheck,
	}
	if o.ringCheck == 0 {
		cfg.RingCheck = -1 // off; p2p takes 0 for its default
	}
	if o.joinAt != "" {
		k := overlay.Key(o.joinAt)
		cfg.JoinAt = &k
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rt, err := p2p.Start(ctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	// Signals are caught from here on, before the address goes out: whoever saw the node start
	// (a supervisor, a script reading stdout) and stops it gets a graceful leave, never the
	// default action that kills the process. During Start a signal still kills it: it owns
	// nothing yet.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ai := rt.AddrInfo()
	addrs, _ := peer.AddrInfoToP2pAddrs(&ai)
	log.Info("node started", zap.Stringer("peer", ai.ID), zap.Any("addrs", addrs))
	for _, a := range addrs {
		fmt.Fprintln(stdout, a)
	}
	var httpSrv *http.Server
	if o.metricsAddr != "" {
		httpSrv, err = serveHTTP(o.metricsAddr, reg, rt, log)
		if err != nil {
			rt.Close()
			return err
		}
		defer httpSrv.Close()
	}

	sig := <-sigs
	log.Info("signal: leaving gracefully (a second signal exits at once)", zap.Stringer("signal", sig))
	done := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(context.Background(), o.leaveWait)
		defer cancel()
		done <- rt.Leave(lctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("graceful leave: %w", err)
		}
		log.Info("left the overlay: range handed over")
		return nil
	case sig := <-sigs:
		log.Warn("second signal: exiting without finishing the leave", zap.Stringer("signal", sig))
		rt.Close()
		return nil
	}
}

// serveHTTP serves /metrics and /healthz. /healthz answers 200 once the node owns a range.
func serveHTTP(addr string, reg *prometheus.Registry, rt *p2p.Runtime, log *zap.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			State string `json:"state"`
			Range string `json:"range,omitempty"`
			Items int    `json:"items"`
		}
		var owns bool
		err := rt.Do(r.Context(), func(n *node.Node) {
			body.State, body.Items, owns = n.State().String(), n.Store().Len(), n.Owns()
			if owns {
				body.Range = n.Range().String()
			}
		})
		w.Header().Set("Content-Type", "application/json")
		switch {
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			body.State = "unresponsive"
		case !owns || body.State != skipgraph.StateActive.String():
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", zap.Error(err))
		}
	}()
	log.Info("metrics and health", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return srv, nil
}
