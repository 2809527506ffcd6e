package h3

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/quic-go/qpack"
)

// Every static table entry, encoded by quic-go's QPACK encoder (which
// references the static table for exact matches and Huffman-codes
// literals), decodes to itself: a wrong entry in our table would come out
// as another field.
func TestStaticTableAgainstQuicGoQPACK(t *testing.T) {
	for i, f := range staticTable {
		var buf bytes.Buffer
		enc := qpack.NewEncoder(&buf)
		if err := enc.WriteField(qpack.HeaderField{Name: f.Name, Value: f.Value}); err != nil {
			t.Fatal(err)
		}
		got, err := decodeFieldSection(buf.Bytes(), 4096)
		if err != nil || len(got) != 1 || got[0] != f {
			t.Errorf("entry %d %v: decoded %v, %v", i, f, got, err)
		}
		// quic-go refers to the entry by its index: exactly one byte
		// after the prefix for indices below 63.
		if i < 63 && f.Value != "" && buf.Len() != 3 {
			t.Errorf("entry %d %v: quic-go did not index it (%x): our table disagrees with RFC 9204's", i, f, buf.Bytes())
		}
	}
	if len(staticTable) != 99 {
		t.Errorf("%d static entries, RFC 9204 Appendix A has 99", len(staticTable))
	}
}

// Our encoding decodes with quic-go's decoder, and back with ours.
func TestFieldSectionRoundTrip(t *testing.T) {
	fields := []Field{{":method", "GET"}, {":scheme", "https"}, {":authority", "example.test:4433"},
		{":path", "/bulk?n=1"}, {"user-agent", "mptester"}, {"x-custom", strings.Repeat("v", 300)},
		{"content-type", "text/plain"}, {"accept", "*/*"}}
	b := appendFieldSection(nil, fields)
	dec := qpack.NewDecoder()
	next := dec.Decode(b)
	for i, want := range fields {
		hf, err := next()
		if err != nil || hf.Name != want.Name || hf.Value != want.Value {
			t.Fatalf("quic-go decoded field %d as %v, %v; want %v", i, hf, err, want)
		}
	}
	got, err := decodeFieldSection(b, 1<<20)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(fields) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
}

func TestFieldSectionRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"dynamic insert count": {0x01, 0x00},
		"dynamic indexed":      {0x00, 0x00, 0x80},
		"static index 99":      {0x00, 0x00, 0xff, 0x24},
		"post-base":            {0x00, 0x00, 0x10},
		"truncated literal":    {0x00, 0x00, 0x5f, 0x05, 0x05, 'a'},
		"uppercase name":       {0x00, 0x00, 0x23, 'A', 'b', 'c', 0x00},
	} {
		if _, err := decodeFieldSection(b, 4096); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	big := appendFieldSection(nil, []Field{{"x", strings.Repeat("v", 5000)}})
	if _, err := decodeFieldSection(big, 4096); err == nil {
		t.Error("a field section over the limit decoded")
	}
}

// FuzzDecodeFieldSection: bytes from the network never panic, and what
// decodes re-encodes to something that decodes the same.
func FuzzDecodeFieldSection(f *testing.F) {
	f.Add(appendFieldSection(nil, []Field{{":status", "200"}, {"content-length", "5"}}))
	var buf bytes.Buffer
	enc := qpack.NewEncoder(&buf)
	enc.WriteField(qpack.HeaderField{Name: "x-huffman", Value: "some value here"})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := decodeFieldSection(b, 8192)
		if err != nil {
			return
		}
		again, err := decodeFieldSection(appendFieldSection(nil, fields), 1<<20)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(fields) {
			t.Fatalf("re-encoded %v decoded as %v, %v", fields, again, err)
		}
	})
}
