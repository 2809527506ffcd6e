package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/patterns"
)

// The ports `mptester run` uses by default (its --tcp-port, --quic-port and
// --quic-alt-port), so the lab's servers answer `run` as its help shows.
const (
	serveTCPPort = 443
	serveAltPort = 6121
)

// startTestServer serves every traffic pattern, exactly as `mptester serve`
// does (patterns.NewServer with its default limits and a self-signed
// certificate), on the lab's server addresses in the Internet namespace:
// TLS/TCP (MPTCP-capable) on 443, QUIC on 443 and 6121. It records the
// server in lab.json and returns a stop function.
func startTestServer(ctx context.Context, l *lab.Lab, log *slog.Logger) (func(), error) {
	addrs := []string{lab.Server4.String(), lab.Server6.String()}
	cert, fp, err := patterns.SelfSigned(addrs)
	if err != nil {
		return nil, err
	}
	ml := &multiListener{conns: make(chan net.Conn), done: make(chan struct{})}
	var quic []net.PacketConn
	closeAll := func() {
		_ = ml.Close()
		for _, c := range quic {
			_ = c.Close()
		}
	}
	for _, a := range addrs {
		ln, err := l.ListenTCP(net.JoinHostPort(a, strconv.Itoa(serveTCPPort)), true)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("test server: %w", err)
		}
		ml.add(ln)
		network := map[bool]string{true: "udp4", false: "udp6"}[a == lab.Server4.String()]
		for _, port := range []int{serveTCPPort, serveAltPort} {
			pc, err := l.ListenUDPNet(network, net.JoinHostPort(a, strconv.Itoa(port)))
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("test server: %w", err)
			}
			quic = append(quic, pc)
		}
	}
	srv, err := patterns.NewServer(patterns.ServerConfig{Certificate: cert, TCPListener: ml, QUICConns: quic,
		Limits: patterns.DefaultLimits(), Logger: log})
	if err != nil {
		closeAll()
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		closeAll()
		return nil, err
	}
	ts := &lab.TestServer{TCPPort: serveTCPPort, QUICPorts: []int{serveTCPPort, serveAltPort}, Fingerprint: fp,
		Run: fmt.Sprintf("mptester lab exec --name %s -- mptester run --server %s --pin %s", l.Info().Name, lab.Server4, fp)}
	if err := l.SetTestServer(ts); err != nil {
		closeAll()
		return nil, err
	}
	log.Info("test server up", "addrs", addrs, "tcp", serveTCPPort, "quic", ts.QUICPorts, "fingerprint", fp)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		closeAll()
	}, nil
}

// multiListener accepts from several listeners (one per server address) as
// one, since the server takes a single TCP listener.
type multiListener struct {
	lns   []net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func (m *multiListener) add(ln net.Listener) {
	m.lns = append(m.lns, ln)
	m.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			select {
			case m.conns <- c:
			case <-m.done:
				_ = c.Close()
				return
			}
		}
	})
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			_ = ln.Close()
		}
	})
	return nil
}

func (m *multiListener) Addr() net.Addr {
	if len(m.lns) == 0 {
		return &net.TCPAddr{}
	}
	return m.lns[0].Addr()
}
