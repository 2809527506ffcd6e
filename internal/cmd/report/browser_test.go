package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
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
	}{{"files", inputs}, {"fleet", []string{"--db", dsn}}} {
		page := filepath.Join(dir, src.name+".html")
		_, _, err := execute(t, append([]string{"--format", "html", "-o", page}, src.args...)...)
		require.NoError(t, err)
		want := readJSON(t, src.args...).Figures
		require.NotEmpty(t, want)
		checkPage(ctx, t, b, art, src.name, "file://"+page, want)
	}

	// The collect server's GET /v1/report, as an admin's browser sees it.
	b.Headers = map[string]string{"Authorization": "Bearer " + srv.admin}
	checkPage(ctx, t, b, art, "server", srv.url+"/v1/report", readJSON(t, "--db", dsn).Figures)
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
