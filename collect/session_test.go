package collect_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionNotToken: the fleet-page cookie holds a session id, never
// the admin token; the id is no Bearer token; after logout the same
// cookie opens nothing; HTML answers carry the CSP and the other
// security headers as HTTP headers.
func TestSessionNotToken(t *testing.T) {
	e := newEnv(t, nil)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.url+"/login", url.Values{"token": {e.adminTok}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var sid *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Value != "" {
			sid = ck
		}
	}
	require.NotNil(t, sid)
	assert.NotEqual(t, e.adminTok, sid.Value, "the cookie is not the token")
	assert.NotContains(t, sid.Value, e.adminTok)

	get := func(path string) answer {
		req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
		require.NoError(t, err)
		req.AddCookie(sid)
		return do(t, req)
	}
	page := get("/")
	require.Equal(t, http.StatusOK, page.code)
	assert.Contains(t, string(page.body), "fleet-probes", "signed in")
	for _, a := range []answer{page, get("/v1/report?probe=pi1")} {
		csp := a.hdr.Get("Content-Security-Policy")
		assert.Contains(t, csp, "default-src 'none'")
		assert.Contains(t, csp, "frame-ancestors 'none'")
		assert.Equal(t, "nosniff", a.hdr.Get("X-Content-Type-Options"))
		assert.Equal(t, "DENY", a.hdr.Get("X-Frame-Options"))
	}
	assert.Equal(t, http.StatusUnauthorized, e.get(t, "/v1/runs", sid.Value).code, "a session id is no Bearer token")

	req, err := http.NewRequest(http.MethodPost, e.url+"/logout", nil)
	require.NoError(t, err)
	req.AddCookie(sid)
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	after := get("/")
	assert.Equal(t, http.StatusOK, after.code)
	assert.True(t, strings.Contains(string(after.body), `name="token"`), "the old cookie opens only the sign-in page")
}
