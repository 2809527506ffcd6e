package upload

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// RedirectError: the collector answered a request with a redirect. A
// probe reaches its collector only at the configured URL and follows no
// redirect: one could carry its token over plain HTTP, or point its
// requests at the probe's own network (loopback, LAN, cloud metadata).
type RedirectError struct {
	Status   int
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("the collector answered %d, a redirect to %q; a probe follows no redirect (upload.url names the collector)", e.Status, e.Location)
}

// OriginError: a request to the collector was about to leave for another
// scheme or host than the configured URL's (never sent).
type OriginError struct{ Want, Got string }

func (e *OriginError) Error() string {
	return fmt.Sprintf("request to %q refused: the collector is %q only", e.Got, e.Want)
}

// Guard returns a copy of hc that reaches only base's scheme and host:
// redirects are errors (*RedirectError, naming the Location) and a request
// for any other origin fails before a connection is made (*OriginError),
// so plain HTTP never replaces an https:// URL and every connection is
// one the pinned TLS configuration checks.
func Guard(hc *http.Client, base string) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	g := *hc
	g.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		loc := req.URL.String()
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
			if l := req.Response.Header.Get("Location"); l != "" {
				loc = l
			}
		}
		return &RedirectError{Status: status, Location: loc}
	}
	u, err := url.Parse(base)
	if err != nil {
		u = &url.URL{}
	}
	g.Transport = originOnly{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Host), next: hc.Transport}
	return &g
}

type originOnly struct {
	scheme, host string
	next         http.RoundTripper
}

func (o originOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if o.scheme == "" || strings.ToLower(req.URL.Scheme) != o.scheme || strings.ToLower(req.URL.Host) != o.host {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &OriginError{Want: o.scheme + "://" + o.host, Got: req.URL.Scheme + "://" + req.URL.Host}
	}
	next := o.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(req)
}

// IsMisdirected reports whether err is a redirect or a request for
// another origin: the collector's answer, not the network; retrying
// cannot help.
func IsMisdirected(err error) bool {
	var re *RedirectError
	var oe *OriginError
	return errors.As(err, &re) || errors.As(err, &oe)
}

// CollectorText is what a collector said, fit for a log line or a
// terminal: cut to at most n bytes, every rune that is not printable
// (control characters, C1 codes such as CSI, newlines, invalid UTF-8)
// written as its Go escape, so no answer can forge a line or drive a
// terminal.
func CollectorText(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\' || !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
		default:
			sb.WriteRune(r)
		}
		b = b[size:]
	}
	if cut {
		sb.WriteString("...")
	}
	return sb.String()
}
