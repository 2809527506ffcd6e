package report

import (
	"bytes"
	"context"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/browsertest"
	"github.com/mptester/mptester/report/analysis"
)

type shownFigure struct {
	Name  string  `json:"name"`
	W     float64 `json:"w"`
	H     float64 `json:"h"`
	Paths int     `json:"paths"`
	Texts int     `json:"texts"`
	// Panels of small multiples, the most legend lines one has, and
	// whether any legend box intersects its plot's box.
	Panels    int  `json:"panels"`
	MaxLegend int  `json:"maxLegend"`
	Legend    int  `json:"legend"` // legend lines over all panels
	Overlap   bool `json:"overlap"`
}

// figuresJS measures each figure as shown: the plot drawn for this width
// (the page holds a wide and a narrow one), its marks, and each panel's
// legend against the plot's box.
const figuresJS = `[...document.querySelectorAll('figure.plot')].map(f => {
  const shown = el => el.getBoundingClientRect().width > 0;
  const panels = [...f.querySelectorAll('.panel')];
  let maxLegend = 0, legend = 0, overlap = false, first = null;
  for (const p of panels) {
    const s = [...p.querySelectorAll('svg')].find(shown);
    if (!s) continue;
    first = first || s;
    const leg = p.querySelector('ul.legend');
    if (!leg) continue;
    maxLegend = Math.max(maxLegend, leg.querySelectorAll('li').length);
    legend += leg.querySelectorAll('li').length;
    const a = s.getBoundingClientRect(), b = leg.getBoundingClientRect();
    if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) overlap = true;
  }
  const r = first ? first.getBoundingClientRect() : {width: 0, height: 0};
  return {name: f.dataset.figure, w: r.width, h: r.height, panels: panels.length, maxLegend, legend, overlap,
    paths: first ? first.querySelectorAll('path').length : 0, texts: first ? first.querySelectorAll('text').length : 0};
})`

// TestHTMLInHeadlessChromium loads the report page in a real browser,
// desktop and light, then phone-sized and dark: no console message, no
// network request, every figure drawn with a size and marks, the page no
// wider than a phone (tables scroll in their own box), the dark scheme
// applied; a screenshot of each is kept (in $ARTIFACTS when set). A page
// that loads something and logs an error is detected, so the checks can
// fail.
func TestHTMLInHeadlessChromium(t *testing.T) {
	chromium := browsertest.Path(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	// The files' page (survey, patterns, mobile) and a store's fleet page.
	storeDir := t.TempDir()
	dsn := filepath.Join(storeDir, "collect.db")
	srv := newFleetServer(t, dsn, storeDir, []string{"p1", "p2", "p3"})
	plantFleet(t, srv)
	b, err := browsertest.Start(ctx, chromium, filepath.Join(dir, "profile"))
	require.NoError(t, err)
	defer b.Close()
	art := browsertest.ArtifactDir(t)
	for _, src := range []struct {
		name string
		args []string
	}{{"files", inputs}, {"fleet", []string{"--db", dsn, "--since", "2026-10-01"}}} {
		page := filepath.Join(dir, src.name+".html")
		_, _, err := execute(t, append([]string{"--format", "html", "-o", page}, src.args...)...)
		require.NoError(t, err)
		want := readJSON(t, src.args...).Figures
		require.NotEmpty(t, want)
		checkPage(ctx, t, b, art, src.name, "file://"+page, want)
	}

	// The collect server's GET /v1/report, as an admin's browser sees it.
	b.Headers = map[string]string{"Authorization": "Bearer " + srv.admin}
	// (For one probe: the exact report; the fleet's week would be the
	// roll-ups, which this harness's handler never derives.)
	checkPage(ctx, t, b, art, "server", srv.url+"/v1/report?probe=p1", readJSON(t, "--db", dsn, "--probe", "p1", "--since", "2026-10-01").Figures)
	b.Headers = nil

	// The detector's control: a page that fetches and logs is caught.
	bad := filepath.Join(dir, "bad.html")
	require.NoError(t, os.WriteFile(bad, []byte(`<!DOCTYPE html><html><body><img src="http://127.0.0.1:1/x.png">`+
		`<script>console.error("planted")</script></body></html>`), 0o644))
	p, err := b.Open(ctx, "file://"+bad, 800, 600, false)
	require.NoError(t, err)
	assert.Contains(t, p.Requests, "http://127.0.0.1:1/x.png")
	assert.Contains(t, p.Console, "console.error: planted")
}

func checkPage(ctx context.Context, t *testing.T, b *browsertest.Browser, art, name, url string, want []analysis.Figure) {
	for _, v := range []struct {
		name          string
		width, height int
		dark          bool
	}{{name + "-desktop-light", 1280, 900, false}, {name + "-phone-dark", 390, 844, true}} {
		p, err := b.Open(ctx, url, v.width, v.height, v.dark)
		require.NoError(t, err, v.name)
		assert.Empty(t, p.Console, "%s: console", v.name)
		assert.Empty(t, p.Requests, "%s: network requests", v.name)
		var figs []shownFigure
		require.NoError(t, p.Eval(ctx, figuresJS, &figs))
		var wantNames, gotNames []string
		series := map[string]int{}
		for i := range want {
			wantNames = append(wantNames, want[i].Name)
			if want[i].Kind != analysis.KindBars || len(want[i].Series) > 1 {
				series[want[i].Name] = len(want[i].Series)
			}
		}
		for _, f := range figs {
			gotNames = append(gotNames, f.Name)
			assert.Greater(t, f.W, 200.0, "%s %s width", v.name, f.Name)
			assert.Less(t, f.W, float64(v.width), "%s %s fits the viewport", v.name, f.Name)
			assert.Greater(t, f.H, 100.0, "%s %s height", v.name, f.Name)
			assert.Greater(t, f.Paths, 5, "%s %s: drawn marks", v.name, f.Name)
			assert.Greater(t, f.Texts, 3, "%s %s: labels", v.name, f.Name)
			assert.GreaterOrEqual(t, f.Panels, 1, "%s %s: panels", v.name, f.Name)
			assert.LessOrEqual(t, f.MaxLegend, 4, "%s %s: at most four series a panel", v.name, f.Name)
			assert.False(t, f.Overlap, "%s %s: a legend over the plot", v.name, f.Name)
			assert.Equal(t, series[f.Name], f.Legend, "%s %s: every series named in a legend beside its plot", v.name, f.Name)
		}
		assert.ElementsMatch(t, wantNames, gotNames, "%s: every figure on the page, once", v.name)
		var layout struct {
			ScrollW float64 `json:"scrollW"`
			InnerW  float64 `json:"innerW"`
			BG      string  `json:"bg"`
		}
		require.NoError(t, p.Eval(ctx, `({scrollW: document.documentElement.scrollWidth, innerW: window.innerWidth,
  bg: getComputedStyle(document.body).backgroundColor})`, &layout))
		assert.LessOrEqual(t, layout.ScrollW, layout.InnerW, "%s: the page scrolls sideways", v.name)
		if v.dark {
			assert.Equal(t, "rgb(18, 18, 18)", layout.BG)
		} else {
			assert.Equal(t, "rgb(255, 255, 255)", layout.BG)
		}
		shot, err := p.Screenshot(ctx)
		require.NoError(t, err)
		img, err := png.Decode(bytes.NewReader(shot))
		require.NoError(t, err)
		assert.InDelta(t, v.width, img.Bounds().Dx(), 20, "a scrollbar at most")
		out := filepath.Join(art, "report-"+v.name+".png")
		require.NoError(t, os.WriteFile(out, shot, 0o644))
		t.Logf("screenshot %s", out)
	}
}

// TestFleetPageInHeadlessChromium: the collector's GET / in a real
// browser. Without the cookie it is a sign-in form; an admin token typed
// into it opens the fleet page (probes with last seen, backlog and status,
// the fleet views), kept in an HttpOnly, Secure, SameSite=Strict cookie,
// never in a URL; each probe links to the report of its runs, which the
// cookie opens. A probe's token is refused with a page saying why, and
// the page fits a phone.
func TestFleetPageInHeadlessChromium(t *testing.T) {
	chromium := browsertest.Path(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	storeDir := t.TempDir()
	srv := newFleetServer(t, filepath.Join(storeDir, "collect.db"), storeDir, []string{"p1", "p2", "p3"})
	plantFleet(t, srv)
	// One run that did not end ok: the only row of the recent failures.
	failed := genRun(headerLine(t), rand.New(rand.NewPCG(3, 3)), "p2", "run", time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC), 2, 1, 2)
	failed.body = bytes.Replace(failed.body, []byte(`"status":"ok"`), []byte(`"status":"partial"`), 1)
	srv.upload(t, failed)
	// The handler alone runs no deriver: roll the runs up as it would.
	_, err := srv.srv.ReindexAll(ctx)
	require.NoError(t, err)
	// The planted runs' week (the page's default is the last 7 days).
	week := "/?since=2026-11-01&until=2026-11-08"

	// The cookie as the server sets it, and what it refuses.
	login := func(token string) *http.Response {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(srv.url+"/login", url.Values{"token": {token}})
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := login(srv.admin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	ck := resp.Cookies()[0]
	assert.True(t, ck.HttpOnly && ck.Secure && ck.SameSite == http.SameSiteStrictMode, "cookie %+v", ck)
	assert.Equal(t, "/", resp.Header.Get("Location"), "no token in the redirect")
	assert.Equal(t, http.StatusForbidden, login(srv.tokens["p1"]).StatusCode, "a probe's token")
	assert.Equal(t, http.StatusUnauthorized, login("nope").StatusCode)
	// The cookie authenticates reads only: a write with it is refused.
	req, err := http.NewRequest(http.MethodPut, srv.url+"/v1/probes/p1/config", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.AddCookie(ck)
	wr, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	wr.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, wr.StatusCode, "a write needs the Authorization header")

	b, err := browsertest.Start(ctx, chromium, filepath.Join(dir, "profile"))
	require.NoError(t, err)
	defer b.Close()
	art := browsertest.ArtifactDir(t)
	waitFor := func(p *browsertest.Page, cond string) {
		t.Helper()
		var ok bool
		for range 60 {
			if err := p.Eval(ctx, `new Promise(r => setTimeout(() => r(!!(`+cond+`)), 200))`, &ok); err == nil && ok {
				return
			}
		}
		t.Fatalf("page never showed %s", cond)
	}
	signIn := func(p *browsertest.Page, token string) {
		t.Helper()
		var v any
		require.NoError(t, p.Eval(ctx, `(() => { document.querySelector('#token').value = `+strconv.Quote(token)+`;
  document.querySelector('form').submit(); return 1; })()`, &v))
	}

	// A probe's token: refused, with the reason, and no fleet shown.
	p, err := b.Open(ctx, srv.url+"/", 1280, 900, false)
	require.NoError(t, err)
	waitFor(p, `document.querySelector('form[action="/login"]')`)
	signIn(p, srv.tokens["p2"])
	waitFor(p, `document.querySelector('#error')`)
	var refused string
	require.NoError(t, p.Eval(ctx, `document.querySelector('#error').textContent`, &refused))
	assert.Contains(t, refused, `probe "p2"`)

	// The admin token: the fleet page, then its window picked.
	p, err = b.Open(ctx, srv.url+"/", 1280, 900, false)
	require.NoError(t, err)
	signIn(p, srv.admin)
	waitFor(p, `document.querySelector('#t-fleet-probes')`)
	p, err = b.Open(ctx, srv.url+week, 1280, 900, false)
	require.NoError(t, err)
	waitFor(p, `document.querySelector('#t-fleet-buckets')`)
	var page struct {
		Failed [][]string `json:"failed"`
		URL    string     `json:"url"`
		Cookie string     `json:"cookie"`
		Rows   [][]string `json:"rows"`
		Links  []string   `json:"links"`
		Figs   []string   `json:"figs"`
	}
	require.NoError(t, p.Eval(ctx, `({url: location.href, cookie: document.cookie,
  failed: [...document.querySelectorAll('#t-fleet-failures tbody tr')].map(tr => [...tr.cells].map(c => c.textContent)),
  rows: [...document.querySelectorAll('#t-fleet-probes tbody tr')].map(tr => [...tr.cells].map(c => c.textContent)),
  links: [...document.querySelectorAll('#t-fleet-probes tbody a')].map(a => a.getAttribute('href')),
  figs: [...document.querySelectorAll('figure.plot')].map(f => f.dataset.figure)})`, &page))
	assert.Equal(t, srv.url+week, page.URL, "no token in the URL")
	assert.Empty(t, page.Cookie, "the cookie is HttpOnly")
	require.Len(t, page.Rows, 3)
	for i, name := range []string{"p1", "p2", "p3"} {
		assert.Equal(t, name, page.Rows[i][0])
		assert.Equal(t, map[string]string{"p1": "7", "p2": "8", "p3": "7"}[name], page.Rows[i][3], "%s: runs uploaded", name)
		assert.NotEqual(t, "never", page.Rows[i][1], "%s: last seen", name)
		assert.Equal(t, "/v1/report?probe="+name+"&since=2026-11-01T00%3A00%3A00Z&until=2026-11-08T00%3A00%3A00Z", page.Links[i], "the probe's runs in the window")
	}
	assert.NotEmpty(t, page.Figs, "the fleet views")
	require.Len(t, page.Failed, 1, "the one run that did not end ok")
	assert.Equal(t, []string{"p2", failed.id, "run", "2026-11-04T00:00:00Z", "partial"}, page.Failed[0])
	shot, err := p.Screenshot(ctx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(art, "fleet-page-desktop.png"), shot, 0o644))

	// A probe's link opens its report with the cookie alone.
	var v any
	require.NoError(t, p.Eval(ctx, `(() => { document.querySelector('#t-fleet-probes tbody a').click(); return 1; })()`, &v))
	waitFor(p, `document.querySelector('#t-findings') && location.search.startsWith('?probe=p1&since=2026-11-01')`)

	// On a phone: no sideways scroll outside the tables' own boxes.
	p, err = b.Open(ctx, srv.url+week, 390, 844, true)
	require.NoError(t, err)
	waitFor(p, `document.querySelector('#t-fleet-buckets')`)
	var layout struct {
		ScrollW float64 `json:"scrollW"`
		InnerW  float64 `json:"innerW"`
	}
	require.NoError(t, p.Eval(ctx, `({scrollW: document.documentElement.scrollWidth, innerW: window.innerWidth})`, &layout))
	assert.LessOrEqual(t, layout.ScrollW, layout.InnerW, "the fleet page scrolls sideways on a phone")
	assert.Empty(t, p.Console)
	assert.Empty(t, p.Requests)
	shot, err = p.Screenshot(ctx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(art, "fleet-page-phone.png"), shot, 0o644))
}
