package list

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleList = "\ufeff1,google.com\n2,Example.COM.\n3,example.com\n" +
	"x,bad-rank.com\n5,bücher.de\n6,\n7,a..b\n8,has space.com\n9,a,b\n10,nodot\n11,MÜNCHEN.de\n" +
	"# comment\n\n12,under_score.net\n"

func TestParseList(t *testing.T) {
	ds, info, err := ParseList(strings.NewReader(sampleList), 0)
	require.NoError(t, err)
	names := []string{}
	for _, d := range ds {
		names = append(names, d.Name)
	}
	assert.Equal(t, []string{"google.com", "example.com", "xn--bcher-kva.de", "xn--mnchen-3ya.de", "under_score.net"}, names)
	assert.Equal(t, 1, info.Duplicates)
	assert.Equal(t, 6, info.Malformed, info.FirstMalformed) // bad rank, empty, a..b, space, 3 fields, nodot
	assert.Equal(t, 2, info.IDNs)
	assert.Equal(t, 5, info.Domains)
	assert.Equal(t, 5, ds[2].Rank)
	assert.Len(t, info.FirstMalformed, maxReportedMalformed)
	assert.Len(t, info.SHA256, 64)

	top, _, err := ParseList(strings.NewReader(sampleList), 2)
	require.NoError(t, err)
	assert.Len(t, top, 2)
}

func TestLoadListZip(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("top-1m.csv")
	require.NoError(t, err)
	w.Write([]byte("1,a.com\n2,b.com\n"))
	require.NoError(t, zw.Close())
	p := filepath.Join(t.TempDir(), "top-1m.csv.zip")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	ds, info, err := LoadList(p, 0)
	require.NoError(t, err)
	assert.Len(t, ds, 2)
	assert.Equal(t, p, info.Source)

	bad := filepath.Join(t.TempDir(), "bad.zip")
	require.NoError(t, os.WriteFile(bad, []byte("PK\x03\x04garbage"), 0o644))
	_, _, err = LoadList(bad, 0)
	assert.ErrorContains(t, err, "zip")
}

func FuzzParseList(f *testing.F) {
	f.Add([]byte(sampleList))
	f.Add([]byte("1,xn--\n2,\xff\xfe.com\n3,-a.com\n"))
	f.Add([]byte(strings.Repeat("a", 70) + ".com\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, info, err := ParseList(bytes.NewReader(b), 0)
		if err != nil {
			return
		}
		if info.Domains != len(ds) {
			t.Fatalf("Domains %d != %d", info.Domains, len(ds))
		}
		seen := map[string]bool{}
		for _, d := range ds {
			if seen[d.Name] || d.Name == "" || len(d.Name) > 253 {
				t.Fatalf("bad or duplicate domain %q", d.Name)
			}
			seen[d.Name] = true
			for i := 0; i < len(d.Name); i++ {
				if d.Name[i] >= 0x80 || (d.Name[i] >= 'A' && d.Name[i] <= 'Z') {
					t.Fatalf("not ASCII lower case: %q", d.Name)
				}
			}
		}
	})
}

// An over-long line and names a resolver would not accept are reported with
// their line numbers; the lines after them are still read.
func TestParseListBadLinesNamed(t *testing.T) {
	in := "1,a.test\n2," + strings.Repeat("x", 10000) + ".test\n3,exa mple.test\n4,b.test\n5,-\n6,c.test"
	ds, info, err := ParseList(strings.NewReader(in), 0)
	require.NoError(t, err)
	got := []string{}
	for _, d := range ds {
		got = append(got, d.Name)
	}
	assert.Equal(t, []string{"a.test", "b.test", "c.test"}, got)
	assert.Equal(t, 3, info.Malformed)
	require.Len(t, info.FirstMalformed, 3)
	assert.Equal(t, "line 2: longer than 4096 bytes", info.FirstMalformed[0])
	assert.Contains(t, info.FirstMalformed[1], "line 3: bad domain")
	assert.Contains(t, info.FirstMalformed[2], "line 5: bad domain")
	assert.Equal(t, 6, info.Lines)
}
