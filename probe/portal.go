package probe

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// CheckPortal sends a plain HTTP GET / to ap over path p and reports
// whether a captive portal answered: 511 Network Authentication Required
// (RFC 6585 §6), or a redirect whose Location names another host (a
// relative one, or one to the same address, is the server's own). detail
// says what was answered. The request is half-closed, so a server that
// answers nothing and waits for EOF ends the check at once; ctx bounds it.
func CheckPortal(ctx context.Context, p Path, ap netip.AddrPort) (portal bool, detail string) {
	host := ap.String()
	c, err := DialContext(ctx, p, "tcp", host)
	if err != nil {
		return false, err.Error()
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: mptester\r\nConnection: close\r\n\r\n", host); err != nil {
		return false, err.Error()
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(c, 64<<10)), nil)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	detail = "HTTP " + resp.Status
	switch resp.StatusCode {
	case http.StatusNetworkAuthenticationRequired:
		return true, detail
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			return false, detail
		}
		detail += " to " + loc.String()
		return loc.Host != "" && !strings.EqualFold(loc.Host, host) && !strings.EqualFold(loc.Hostname(), ap.Addr().String()), detail
	}
	return false, detail
}

// DetectPortal returns what shows a captive portal on p ("" when nothing
// does): two names that cannot exist (RFC 6761 .invalid) both resolve
// through the path's own DNS, and plain HTTP to the address they resolve
// to answers as a portal does (CheckPortal). Two DNS queries, and one
// HTTP request only when both resolve; each bounded by timeout.
func DetectPortal(ctx context.Context, p Path, timeout time.Duration) string {
	f := Family4
	if _, ok := p.SourceAddr(f); !ok {
		f = Family6
	}
	r, err := NewResolver(p, ResolverOptions{Timeout: timeout, Retries: 1})
	if err != nil {
		return ""
	}
	var (
		wg      sync.WaitGroup
		answers [2][]netip.Addr
	)
	for i := range answers {
		wg.Go(func() {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			answers[i] = r.Lookup(ctx, "mptester-"+hex.EncodeToString(b)+".invalid", f).Answers
		})
	}
	wg.Wait()
	if len(answers[0]) == 0 || len(answers[1]) == 0 {
		return "" // names that cannot exist do not resolve: no hijacking DNS
	}
	ap := netip.AddrPortFrom(answers[0][0], 80)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	portal, detail := CheckPortal(hctx, p, ap)
	if !portal {
		return ""
	}
	return fmt.Sprintf("portal: names that cannot exist resolve to %s; %s answers %s", answers[0][0], ap, detail)
}
