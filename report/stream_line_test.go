package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type lineRec struct {
	Type    string       `json:"type"`
	Domain  string       `json:"domain"`
	Answers []netip.Addr `json:"answers"`
	Err     string       `json:"error,omitempty"`
	Big     []string     `json:"big,omitempty"`
}

// Each record's line is what json.Marshal gives plus a newline (HTML
// escaped, as before the stream reused its buffer), also right after a
// record too big for the buffer to be kept.
func TestStreamLineIsMarshal(t *testing.T) {
	recs := []any{
		lineRec{Type: "resolution", Domain: "a.example", Answers: []netip.Addr{netip.MustParseAddr("198.18.0.1")}},
		lineRec{Type: "resolution", Domain: "<b>&amp;\u2028é.example", Err: "no answer from [fd00::1]:53 within 2s"},
		lineRec{Type: "big", Big: []string{strings.Repeat("x", 2<<20)}},
		lineRec{Type: "resolution", Domain: "after.big", Answers: []netip.Addr{}},
		map[string]any{"type": "map", "z": 1, "a": []int{}},
	}
	var out bytes.Buffer
	s, err := NewStream(&out, goldenHeader())
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, s.Write(r))
	}
	require.NoError(t, s.Close(StatusOK, ""))
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 8<<20)
	require.True(t, sc.Scan()) // header
	for i, r := range recs {
		require.True(t, sc.Scan(), "record %d", i)
		want, err := json.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(want), sc.Text(), "record %d", i)
	}
	require.Less(t, s.line.Cap(), 1<<20, "the big record's buffer is kept")
}

// A record that cannot be encoded writes nothing, and the next one is whole.
func TestStreamBadRecordWritesNothing(t *testing.T) {
	var out bytes.Buffer
	s, err := NewStream(&out, goldenHeader())
	require.NoError(t, err)
	n := out.Len()
	require.Error(t, s.Write(map[string]any{"type": "bad", "f": func() {}}))
	require.Equal(t, n, out.Len())
	require.NoError(t, s.Write(lineRec{Type: "ok"}))
	require.Equal(t, `{"type":"ok","domain":"","answers":null}`+"\n", out.String()[n:])
}

func BenchmarkStreamWrite(b *testing.B) {
	s, err := NewStream(io.Discard, goldenHeader())
	require.NoError(b, err)
	rec := lineRec{Type: "resolution", Domain: "www.example.com", Answers: []netip.Addr{
		netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("fd00::1")}}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
}
