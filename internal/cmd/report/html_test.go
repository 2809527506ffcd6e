package report

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report/analysis"
)

// jsonReport is --format json as read back.
type jsonReport struct {
	Tables  []analysis.Table  `json:"tables"`
	Figures []analysis.Figure `json:"figures"`
}

func readJSON(t *testing.T, args ...string) jsonReport {
	t.Helper()
	out, _, err := execute(t, append([]string{"--format", "json"}, args...)...)
	require.NoError(t, err)
	var r jsonReport
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	return r
}

// TestJSONHoldsTablesAndFigures: the JSON carries every table the CSV
// files hold, row for row, and figures whose ECDF data equal the rtt-cdf
// table's rows (the plot draws exactly the table).
func TestJSONHoldsTablesAndFigures(t *testing.T) {
	r := readJSON(t, inputs...)
	var names []string
	for _, tb := range r.Tables {
		names = append(names, tb.Name)
		want, _, err := execute(t, append([]string{"--format", "csv", "--section", tb.Name}, inputs...)...)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
		assert.Len(t, tb.Rows, len(lines)-1, tb.Name)
	}
	assert.Equal(t, "findings", names[0], "the answer first")
	assert.Equal(t, "provenance", names[len(names)-3], "what made the report at the end")
	var cdf *analysis.Figure
	for i := range r.Figures {
		if r.Figures[i].Name == "rtt-cdf" {
			cdf = &r.Figures[i]
		}
	}
	require.NotNil(t, cdf)
	assert.Equal(t, analysis.KindECDF, cdf.Kind)
	var tb analysis.Table
	for _, x := range r.Tables {
		if x.Name == "rtt-cdf" {
			tb = x
		}
	}
	n := 0
	for _, s := range cdf.Series {
		require.Len(t, s.Y, len(s.X))
		for i := range s.X {
			row := tb.Rows[n]
			n++
			assert.True(t, strings.HasSuffix(s.Name, " "+row[0]) || s.Name == row[0], "series %q is cell %q", s.Name, row[0])
			assert.Equal(t, row[1], ms(s.X[i]))
			assert.Equal(t, row[2], frac(s.Y[i]))
		}
		assert.InDelta(t, 1.0, s.Y[len(s.Y)-1], 1e-12, s.Name)
	}
	assert.Equal(t, len(tb.Rows), n, "every ECDF row is plotted")
	// Provenance names the tool and the schema versions read.
	prov := r.Tables[len(r.Tables)-3].Rows
	assert.Contains(t, prov, []string{"tool", "mptester dev"})
	assert.Contains(t, prov, []string{"schema_versions", "1.0 1.1"})
}

// TestHTMLIsSelfContained: one page, every figure inline as SVG, nothing
// loaded from anywhere (no src/href but in-page anchors, a CSP forbidding
// any fetch), light and dark, a viewport for phones.
func TestHTMLIsSelfContained(t *testing.T) {
	out, _, err := execute(t, append([]string{"--format", "html"}, inputs...)...)
	require.NoError(t, err)
	r := readJSON(t, inputs...)
	require.NotEmpty(t, r.Figures)
	for _, f := range r.Figures {
		re := regexp.MustCompile(`(?s)<figure id="f-` + regexp.QuoteMeta(f.Name) + `"[^>]*>\s*<div class="panels"><div class="panel">.*?<div class="wide"><svg.*?</svg>\s*</div><div class="narrow"><svg.*?</svg>\s*</div>`)
		assert.Regexp(t, re, out, f.Name)
	}
	assert.Equal(t, len(r.Figures), strings.Count(out, "<figure "))
	for _, m := range regexp.MustCompile(`(?i)(?:src|href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(out, -1) {
		assert.True(t, strings.HasPrefix(m[1], "#"), "external reference %q", m[1])
	}
	assert.NotContains(t, out, "url(")
	assert.NotContains(t, out, "@import")
	assert.Contains(t, out, "default-src 'none'")
	assert.Contains(t, out, "prefers-color-scheme: dark")
	assert.Contains(t, out, `name="viewport"`)
	for _, tb := range r.Tables {
		assert.Contains(t, out, `id="t-`+tb.Name+`"`)
	}
}

func TestSVGAndPNGFiles(t *testing.T) {
	svg, pngDir := t.TempDir(), t.TempDir()
	_, _, err := execute(t, append([]string{"-o", filepath.Join(t.TempDir(), "r.txt"), "--svg", svg, "--png", pngDir}, inputs...)...)
	require.NoError(t, err)
	for _, name := range []string{"rtt-cdf", "unresponsive"} {
		b, err := os.ReadFile(filepath.Join(svg, name+".svg"))
		require.NoError(t, err)
		assert.Contains(t, string(b), "<svg")
		assert.Contains(t, string(b), "</svg>")
		f, err := os.Open(filepath.Join(pngDir, name+".png"))
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		assert.Greater(t, img.Bounds().Dx(), 500)
	}
}

func ms(v float64) string   { return strconv.FormatFloat(v, 'f', 3, 64) }
func frac(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
