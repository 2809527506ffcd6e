package shared

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
)

// StartTestServer serves every traffic pattern, exactly as `mptester serve`
// does (patterns.NewServer with its default limits and a self-signed
// certificate), on the lab's server addresses in the Internet namespace:
// every listening transport of the registry on the ports `mptester run`
// uses by default (its default and alternative ports), so the servers in
// lab.json answer `run` as its help shows. It records the server in
// lab.json and returns a stop function.
func StartTestServer(ctx context.Context, l *lab.Lab, log *slog.Logger) (func(), error) {
	addrs := []string{lab.Server4.String(), lab.Server6.String()}
	cert, fp, err := certs.SelfSigned(addrs)
	if err != nil {
		return nil, err
	}
	var opened []io.Closer
	closeAll := func() {
		for _, c := range opened {
			_ = c.Close()
		}
	}
	sockets := map[string][]any{}
	ports := map[string][]int{}
	for _, d := range transport.Listeners() {
		for _, port := range []uint16{d.DefaultPort, d.AltPort} {
			if port == 0 {
				continue
			}
			ports[d.Name] = append(ports[d.Name], int(port))
			for _, a := range addrs {
				addr := net.JoinHostPort(a, strconv.Itoa(int(port)))
				var sock io.Closer
				if d.Network == "tcp" {
					// MPTCP-capable: the kernel falls back to TCP for TCP clients.
					sock, err = l.ListenTCP(addr, true)
				} else {
					sock, err = l.ListenUDPNet(map[bool]string{true: "udp4", false: "udp6"}[a == lab.Server4.String()], addr)
				}
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("test server: %w", err)
				}
				opened = append(opened, sock)
				sockets[d.Name] = append(sockets[d.Name], sock)
			}
		}
	}
	srv, err := patterns.NewServer(patterns.ServerConfig{Certificate: cert, Sockets: sockets,
		Limits: patterns.DefaultLimits(), Logger: log})
	if err != nil {
		closeAll()
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		closeAll()
		return nil, err
	}
	ts := &lab.TestServer{Ports: ports, Fingerprint: fp,
		Run: fmt.Sprintf("mptester lab exec --name %s -- mptester run --server %s --pin %s", l.Info().Name, lab.Server4, fp)}
	if err := l.SetTestServer(ts); err != nil {
		_ = srv.Shutdown(ctx)
		return nil, err
	}
	log.Info("test server up", "addrs", addrs, "ports", ports, "fingerprint", fp)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
