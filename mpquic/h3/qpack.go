package h3

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http2/hpack"
)

// QPACK (RFC 9204) with the static table only: our dynamic table has
// capacity 0 (we never send SETTINGS_QPACK_MAX_TABLE_CAPACITY), so a peer
// may reference nothing but the static table (§3.2.3), and we encode with
// static references and literals only, never needing the encoder or
// decoder streams. String literals may be Huffman-coded by the peer
// (§4.1.2, RFC 7541 §5.2: hpack's decoder).

// Field is one field line.
type Field struct{ Name, Value string }

// errDecompression is QPACK_DECOMPRESSION_FAILED (§6).
var errDecompression = errors.New("h3: QPACK decompression failed")

// staticTable is RFC 9204 Appendix A, indexed from 0 (§3.1).
var staticTable = [...]Field{
	{":authority", ""}, {":path", "/"}, {"age", "0"}, {"content-disposition", ""},
	{"content-length", "0"}, {"cookie", ""}, {"date", ""}, {"etag", ""},
	{"if-modified-since", ""}, {"if-none-match", ""}, {"last-modified", ""}, {"link", ""},
	{"location", ""}, {"referer", ""}, {"set-cookie", ""},
	{":method", "CONNECT"}, {":method", "DELETE"}, {":method", "GET"}, {":method", "HEAD"},
	{":method", "OPTIONS"}, {":method", "POST"}, {":method", "PUT"},
	{":scheme", "http"}, {":scheme", "https"},
	{":status", "103"}, {":status", "200"}, {":status", "304"}, {":status", "404"}, {":status", "503"},
	{"accept", "*/*"}, {"accept", "application/dns-message"},
	{"accept-encoding", "gzip, deflate, br"}, {"accept-ranges", "bytes"},
	{"access-control-allow-headers", "cache-control"}, {"access-control-allow-headers", "content-type"},
	{"access-control-allow-origin", "*"},
	{"cache-control", "max-age=0"}, {"cache-control", "max-age=2592000"}, {"cache-control", "max-age=604800"},
	{"cache-control", "no-cache"}, {"cache-control", "no-store"}, {"cache-control", "public, max-age=31536000"},
	{"content-encoding", "br"}, {"content-encoding", "gzip"},
	{"content-type", "application/dns-message"}, {"content-type", "application/javascript"},
	{"content-type", "application/json"}, {"content-type", "application/x-www-form-urlencoded"},
	{"content-type", "image/gif"}, {"content-type", "image/jpeg"}, {"content-type", "image/png"},
	{"content-type", "text/css"}, {"content-type", "text/html; charset=utf-8"},
	{"content-type", "text/plain"}, {"content-type", "text/plain;charset=utf-8"},
	{"range", "bytes=0-"},
	{"strict-transport-security", "max-age=31536000"},
	{"strict-transport-security", "max-age=31536000; includesubdomains"},
	{"strict-transport-security", "max-age=31536000; includesubdomains; preload"},
	{"vary", "accept-encoding"}, {"vary", "origin"},
	{"x-content-type-options", "nosniff"}, {"x-xss-protection", "1; mode=block"},
	{":status", "100"}, {":status", "204"}, {":status", "206"}, {":status", "302"},
	{":status", "400"}, {":status", "403"}, {":status", "421"}, {":status", "425"}, {":status", "500"},
	{"accept-language", ""},
	{"access-control-allow-credentials", "FALSE"}, {"access-control-allow-credentials", "TRUE"},
	{"access-control-allow-headers", "*"},
	{"access-control-allow-methods", "get"}, {"access-control-allow-methods", "get, post, options"},
	{"access-control-allow-methods", "options"},
	{"access-control-expose-headers", "content-length"},
	{"access-control-request-headers", "content-type"},
	{"access-control-request-method", "get"}, {"access-control-request-method", "post"},
	{"alt-svc", "clear"}, {"authorization", ""},
	{"content-security-policy", "script-src 'none'; object-src 'none'; base-uri 'none'"},
	{"early-data", "1"}, {"expect-ct", ""}, {"forwarded", ""}, {"if-range", ""}, {"origin", ""},
	{"purpose", "prefetch"}, {"server", ""}, {"timing-allow-origin", "*"},
	{"upgrade-insecure-requests", "1"}, {"user-agent", ""}, {"x-forwarded-for", ""},
	{"x-frame-options", "deny"}, {"x-frame-options", "sameorigin"},
}

// staticIndex maps a field to its exact entry and a name to its first.
var staticExact, staticName = func() (map[Field]int, map[string]int) {
	e, n := map[Field]int{}, map[string]int{}
	for i, f := range staticTable {
		e[f] = i
		if _, ok := n[f.Name]; !ok {
			n[f.Name] = i
		}
	}
	return e, n
}()

// appendInt appends i as an integer with an n-bit prefix (RFC 7541 §5.1,
// RFC 9204 §4.1.1); first holds the bits above the prefix.
func appendInt(b []byte, first byte, n uint, i uint64) []byte {
	max := uint64(1)<<n - 1
	if i < max {
		return append(b, first|byte(i))
	}
	b = append(b, first|byte(max))
	i -= max
	for i >= 128 {
		b = append(b, byte(i%128)|0x80)
		i /= 128
	}
	return append(b, byte(i))
}

// readInt reads an n-bit-prefixed integer from b.
func readInt(b []byte, n uint) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errDecompression
	}
	max := uint64(1)<<n - 1
	i := uint64(b[0]) & max
	b = b[1:]
	if i < max {
		return i, b, nil
	}
	var m uint
	for {
		if len(b) == 0 || m > 56 {
			return 0, nil, errDecompression
		}
		c := b[0]
		b = b[1:]
		i += uint64(c&0x7f) << m
		m += 7
		if c&0x80 == 0 {
			return i, b, nil
		}
	}
}

// readString reads a string literal whose length has an n-bit prefix and
// whose Huffman flag is the bit just above it.
func readString(b []byte, n uint, limit int) (string, []byte, error) {
	if len(b) == 0 {
		return "", nil, errDecompression
	}
	huff := b[0]&(1<<n) != 0
	l, b, err := readInt(b, n)
	if err != nil || l > uint64(len(b)) || l > uint64(limit) {
		return "", nil, errDecompression
	}
	s := b[:l]
	b = b[l:]
	if !huff {
		return string(s), b, nil
	}
	d, err := hpack.HuffmanDecodeToString(s)
	if err != nil || len(d) > limit {
		return "", nil, errDecompression
	}
	return d, b, nil
}

// appendFieldSection encodes fields as a field section (§4.5) with a
// Required Insert Count and Base of 0: static references where a field or
// its name is in the table, literals otherwise, never Huffman-coded.
func appendFieldSection(b []byte, fields []Field) []byte {
	b = append(b, 0, 0)
	for _, f := range fields {
		if i, ok := staticExact[f]; ok {
			b = appendInt(b, 0xc0, 6, uint64(i)) // indexed, static (§4.5.2)
			continue
		}
		if i, ok := staticName[f.Name]; ok {
			b = appendInt(b, 0x50, 4, uint64(i)) // literal with static name reference (§4.5.4)
		} else {
			b = appendInt(b, 0x20, 3, uint64(len(f.Name))) // literal with literal name (§4.5.6)
			b = append(b, f.Name...)
		}
		b = appendInt(b, 0, 7, uint64(len(f.Value)))
		b = append(b, f.Value...)
	}
	return b
}

// decodeFieldSection decodes a field section that references only the
// static table; limit bounds the decoded size (names and values plus 32
// bytes a field, as SETTINGS_MAX_FIELD_SECTION_SIZE counts, RFC 9114
// §4.2.2).
func decodeFieldSection(b []byte, limit int) ([]Field, error) {
	ric, b, err := readInt(b, 8)
	if err != nil {
		return nil, err
	}
	if ric != 0 {
		// A dynamic table reference: ours has capacity 0 (§2.2.1, §4.5.1.1).
		return nil, fmt.Errorf("%w: required insert count %d with a table of capacity 0", errDecompression, ric)
	}
	if _, b, err = readInt(b, 7); err != nil { // sign and Delta Base: meaningless without a table
		return nil, err
	}
	var fields []Field
	size := 0
	for len(b) > 0 {
		var f Field
		c := b[0]
		switch {
		case c&0x80 != 0: // indexed field line (§4.5.2)
			if c&0x40 == 0 {
				return nil, fmt.Errorf("%w: dynamic table reference", errDecompression)
			}
			var i uint64
			if i, b, err = readInt(b, 6); err != nil {
				return nil, err
			}
			if i >= uint64(len(staticTable)) {
				return nil, fmt.Errorf("%w: static index %d", errDecompression, i)
			}
			f = staticTable[i]
		case c&0x40 != 0: // literal with name reference (§4.5.4)
			if c&0x10 == 0 {
				return nil, fmt.Errorf("%w: dynamic table reference", errDecompression)
			}
			var i uint64
			if i, b, err = readInt(b, 4); err != nil {
				return nil, err
			}
			if i >= uint64(len(staticTable)) {
				return nil, fmt.Errorf("%w: static index %d", errDecompression, i)
			}
			f.Name = staticTable[i].Name
			if f.Value, b, err = readString(b, 7, limit); err != nil {
				return nil, err
			}
		case c&0x20 != 0: // literal with literal name (§4.5.6)
			if f.Name, b, err = readString(b, 3, limit); err != nil {
				return nil, err
			}
			if f.Value, b, err = readString(b, 7, limit); err != nil {
				return nil, err
			}
		default: // post-base references (§4.5.3, §4.5.5): dynamic only
			return nil, fmt.Errorf("%w: post-base reference", errDecompression)
		}
		if size += len(f.Name) + len(f.Value) + 32; size > limit {
			return nil, errHeaderTooLarge
		}
		if f.Name != strings.ToLower(f.Name) || f.Name == "" {
			return nil, fmt.Errorf("%w: field name %q", errMessage, f.Name)
		}
		fields = append(fields, f)
	}
	return fields, nil
}
