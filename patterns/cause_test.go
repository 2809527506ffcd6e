package patterns

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
)

// portalAnswers tells a captive portal's answer (511, a redirect to
// another host) from a server's own (200, a redirect on the same host, a
// relative one, nothing at all).
func TestPortalAnswers(t *testing.T) {
	lo := loopback(t)
	serve := func(h http.HandlerFunc) netip.AddrPort {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().(*net.TCPAddr).AddrPort()
	}
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	cases := []struct {
		name string
		ap   netip.AddrPort
		want bool
	}{
		{"302 to the portal's login page", serve(redirect("http://portal.lab/login")), true},
		{"511", serve(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNetworkAuthenticationRequired) }), true},
		{"200", serve(func(w http.ResponseWriter, r *http.Request) {}), false},
		{"relative redirect", serve(redirect("/index.html")), false},
		{"sink answering nothing", sink.Addr().(*net.TCPAddr).AddrPort(), false},
	}
	// A server redirecting to https on its own address.
	self := serve(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://"+r.Host+"/", http.StatusMovedPermanently)
	})
	cases = append(cases, struct {
		name string
		ap   netip.AddrPort
		want bool
	}{"redirect to https on the same address", self, false})
	for _, c := range cases {
		got, detail := portalAnswers(context.Background(), lo, c.ap)
		if got != c.want {
			t.Errorf("%s: portal %v (%s), want %v", c.name, got, detail, c.want)
		}
	}
}
