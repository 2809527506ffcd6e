package lab_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/probe"
)

// portalSeen is what a client measures of a captive portal on one path.
type portalSeen struct {
	a4        []netip.Addr // A of server.lab
	status    int          // HTTP GET http://198.19.0.1/ (0: no answer)
	location  string
	tlsVerify string // HTTPS to 198.19.0.1:443 as server.lab: the verification error, "" when none
	udp       bool   // UDP echo on port 7
}

func measurePortal(t *testing.T, p probe.Path) portalSeen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var s portalSeen
	r, err := probe.NewResolver(p, probe.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.a4 = r.Lookup(ctx, lab.ServerName, probe.Family4).Answers
	dial := func(port int) net.Conn {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		c, err := probe.DialContext(dctx, p, "tcp", fmt.Sprintf("198.19.0.1:%d", port))
		if err != nil {
			return nil
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		return c
	}
	if c := dial(80); c != nil {
		fmt.Fprintf(c, "GET /check HTTP/1.1\r\nHost: 198.19.0.1\r\nConnection: close\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			s.status, s.location = resp.StatusCode, resp.Header.Get("Location")
			resp.Body.Close()
		}
		c.Close()
	}
	if c := dial(443); c != nil {
		tc := tls.Client(c, &tls.Config{ServerName: lab.ServerName})
		err := tc.HandshakeContext(ctx)
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) {
			s.tlsVerify = cv.Error()
		}
		tc.Close()
	}
	uc, err := probe.ListenUDP(ctx, p, probe.Family4)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	buf := make([]byte, 64)
	for range 3 {
		_, _ = uc.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.19.0.1:7")))
		_ = uc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, _, err := uc.ReadFrom(buf); err == nil {
			s.udp = true
			break
		}
	}
	return s
}

// A portal on wlan0: its DNS answers the portal for every name, HTTP
// anywhere answers 302 to the login page, HTTPS fails verification, UDP
// is dropped; wwan0 (clean) sees none of it, and portal=off gives wlan0
// back its clean view.
func TestLabPortal(t *testing.T) {
	requireNft(t)
	on := true
	l := labtest.Start(t, lab.Options{Impair: map[string]lab.ImpairChange{"wlan0": {Portal: &on}}})
	if !labtest.IsChild() {
		st := l.Status(t)
		if len(st.Impairments) != 1 || st.Impairments[0].Kind != "portal" || st.Impairments[0].Path != "wlan0" {
			t.Errorf("status impairments %+v, want wlan0 portal", st.Impairments)
		}
	}
	if !l.InClient(t) {
		return
	}
	login := "http://" + lab.PortalName + lab.PortalLoginPath
	w := measurePortal(t, l.Path(t, "wlan0"))
	if !slices.Equal(w.a4, []netip.Addr{lab.PortalAddr4}) || w.status != http.StatusFound || w.location != login || w.tlsVerify == "" || w.udp {
		t.Errorf("wlan0 behind the portal: %+v; want A %s, 302 to %s, a verification error, no UDP", w, lab.PortalAddr4, login)
	}
	c := measurePortal(t, l.Path(t, "wwan0"))
	if !slices.Equal(c.a4, []netip.Addr{lab.Server4}) || c.status != 0 || c.tlsVerify != "" || !c.udp {
		t.Errorf("clean wwan0: %+v; want A %s, no HTTP answer (the lab's drain server), no verification error, UDP", c, lab.Server4)
	}
	l.Set(t, "wlan0", "portal=off")
	if w := measurePortal(t, l.Path(t, "wlan0")); !slices.Equal(w.a4, []netip.Addr{lab.Server4}) || w.status != 0 || w.tlsVerify != "" || !w.udp {
		t.Errorf("wlan0 after portal=off: %+v; want the clean view", w)
	}
}
