package list

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkParseList1M parses a synthetic 1M-line Tranco CSV (with a few
// IDNs and duplicates, as real lists have).
func BenchmarkParseList1M(b *testing.B) {
	var buf bytes.Buffer
	for i := 1; i <= 1_000_000; i++ {
		switch {
		case i%1000 == 0:
			fmt.Fprintf(&buf, "%d,bücher%d.de\n", i, i)
		case i%777 == 0:
			fmt.Fprintf(&buf, "%d,site%d.com\n", i, i-1)
		default:
			fmt.Fprintf(&buf, "%d,site%d.com\n", i, i)
		}
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ds, _, err := parseList(bytes.NewReader(data), 0, len(data)/20) // as LoadList sizes it
		if err != nil || ds.Len() < 990_000 {
			b.Fatal(err, ds.Len())
		}
		ds.Close()
	}
}
