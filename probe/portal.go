package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
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
