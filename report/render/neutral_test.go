package render_test

import (
	"bytes"
	"encoding/csv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/report/render"
)

// TestTextEscapesControlBytes: a probe-reported string cannot move the
// cursor, ring, or write the clipboard (OSC 52) through text or Markdown.
func TestTextEscapesControlBytes(t *testing.T) {
	evil := "wl\x1b]52;c;aGk=\x07an0\r\u009b2J\x9b"
	tb := analysis.Table{Name: "x", Title: "paths " + evil, Columns: []string{"path"}, Rows: [][]string{{evil}}}
	for _, f := range []string{"text", "md"} {
		var b bytes.Buffer
		require.NoError(t, render.Write(&b, f, []analysis.Table{tb}, nil))
		for _, c := range b.String() {
			if c != '\n' && c != utf8.RuneError {
				assert.False(t, c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0), "%s: control %U written", f, c)
			}
		}
		assert.True(t, utf8.ValidString(b.String()), f)
		assert.Contains(t, b.String(), `wl\x1b]52;c;aGk=\x07an0\x0d\x9b2J\x9b`, f)
	}
}

// TestCSVNeutralisesFormulas: cells a spreadsheet would run as formulas
// get a leading quote (OWASP); numbers stay numbers.
func TestCSVNeutralisesFormulas(t *testing.T) {
	cells := []string{"=HYPERLINK(\"x\")", "+1+1", "-1+cmd|' /C calc'!A0", "@SUM(A1)", "\tx", "\rx", "-3.5", "-1.5e-05", "+2", "wlan0", ""}
	want := []string{"'=HYPERLINK(\"x\")", "'+1+1", "'-1+cmd|' /C calc'!A0", "'@SUM(A1)", "'\tx", "'\rx", "-3.5", "-1.5e-05", "+2", "wlan0", ""}
	var b bytes.Buffer
	require.NoError(t, render.CSV(&b, analysis.Table{Columns: make([]string, len(cells)), Rows: [][]string{cells}}))
	rows, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, want, rows[1])
}
