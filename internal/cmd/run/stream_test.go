package run

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report"
)

// Each record reaches the output when its test ends; the finished document
// is a valid run document with every record.
func TestDocStream(t *testing.T) {
	// Times with trailing zeros: the envelope still wants nine digits.
	at := time.Date(2026, 11, 23, 14, 0, 0, 120000000, time.UTC)
	for _, n := range []int{0, 1, 3} {
		hdr, err := report.NewHeader("run", "p", []report.Path(nil), map[string]any{"servers": []string{"x"}})
		require.NoError(t, err)
		hdr.StartedAt = at
		var out bytes.Buffer
		ds, err := newDocStream(&out, hdr)
		require.NoError(t, err)
		for i := range n {
			rec := []byte(`{"type":"pattern_test","index":` + string(rune('0'+i)) + `,"status":"success"}`)
			require.NoError(t, ds.record(rec))
			assert.Contains(t, out.String(), `"index": `+string(rune('0'+i)), "record %d not written when its test ended", i)
		}
		require.NoError(t, ds.end(at.Add(time.Second), report.StatusOK, ""))
		require.NoError(t, report.ValidateDocument(out.Bytes()), out.String())
		var doc report.Document
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
		assert.Len(t, doc.Records, n)
		assert.Equal(t, report.StatusOK, doc.Status)
		assert.Equal(t, hdr.RunID, doc.RunID)
		assert.JSONEq(t, string(hdr.Config), string(doc.Config))
	}
}
