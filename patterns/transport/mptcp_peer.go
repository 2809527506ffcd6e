package transport

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"sync"
)

// HeaderClientMPTCP is the response header in which mptester serve tells
// an HTTP client whether its connection spoke MPTCP ("yes" or "no"), so a
// client that cannot tell by itself (macOS) records the server's view.
const HeaderClientMPTCP = "Mptester-Client-Mptcp"

// ClientSpokeMPTCP says whether the client of a TCP connection this host
// accepted spoke MPTCP; ok is false where the OS cannot tell. On Linux a
// client without MP_CAPABLE gets a plain TCP socket from accept, and an
// MPTCP socket that fell back answers SOL_MPTCP options with EOPNOTSUPP
// (ENOPROTOOPT over IPv6); the standard library checks MPTCP_INFO that way
// (kernel 5.16+) and the socket's protocol on older kernels.
func ClientSpokeMPTCP(c net.Conn) (used, ok bool) {
	tc, isTCP := c.(*net.TCPConn)
	if !isTCP || runtime.GOOS != "linux" {
		return false, false
	}
	mp, err := tc.MultipathTCP()
	if err != nil {
		return false, false
	}
	return mp, true
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// clientMPTCPKey carries a served HTTP connection's ClientSpokeMPTCP.
type clientMPTCPKey struct{}

// sayClientMPTCP adds HeaderClientMPTCP to every response on a connection
// whose MPTCP use is known.
func sayClientMPTCP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := r.Context().Value(clientMPTCPKey{}).(bool); ok {
			w.Header().Set(HeaderClientMPTCP, yesNo(v))
		}
		h.ServeHTTP(w, r)
	})
}

// serverSaysRT records the server's HeaderClientMPTCP of each response
// in the connection's status (the last answer counts); mu serialises
// concurrent requests' answers.
type serverSaysRT struct {
	rt http.RoundTripper
	st *MPTCPStatus
	mu *sync.Mutex
}

func (s serverSaysRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	var v bool
	switch resp.Header.Get(HeaderClientMPTCP) {
	case "yes":
		v = true
	case "no":
	default:
		return resp, nil
	}
	s.mu.Lock()
	s.st.ServerSaw = &v
	s.mu.Unlock()
	return resp, nil
}

// withClientMPTCP is the http.Server's ConnContext: the MPTCP use of the
// connection the listener recorded when it handed it over.
func (l *tcpListener) withClientMPTCP(ctx context.Context, c net.Conn) context.Context {
	l.mu.Lock()
	v, ok := l.clientMPTCP[c]
	l.mu.Unlock()
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, clientMPTCPKey{}, v)
}
