package survey

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Domain is one entry of a ranked list.
type Domain struct {
	Rank int
	Name string // ASCII (punycode), lower case, no trailing dot
}

// ListInfo describes the list a run used; it goes into the run header.
type ListInfo struct {
	Source      string `json:"source"` // file path or "tranco"
	ID          string `json:"id,omitempty"`
	RetrievedAt string `json:"retrieved_at,omitempty"`
	SHA256      string `json:"sha256"`
	Lines       int    `json:"lines"`
	Malformed   int    `json:"malformed"`
	Duplicates  int    `json:"duplicates"`
	IDNs        int    `json:"idns"`
	Domains     int    `json:"domains"`
	// FirstMalformed holds a few bad lines (line number: reason) for the log.
	FirstMalformed []string `json:"first_malformed,omitempty"`
}

const maxReportedMalformed = 5

// maxLineLen bounds a list line: a rank, a comma and a 253-byte name fit
// many times over; a longer line is malformed (reported with its number),
// and the lines after it are still read.
const maxLineLen = 4096

// readLine returns the next line without its end; long reports a line
// longer than the reader's buffer, whose rest is skipped.
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	b, prefix, err := br.ReadLine()
	if err != nil {
		return nil, false, err
	}
	for prefix {
		long = true
		if _, prefix, err = br.ReadLine(); err != nil {
			if err == io.EOF {
				return nil, true, nil
			}
			return nil, true, err
		}
	}
	return b, long, nil
}

// idnaProfile converts to the ASCII form resolvers want (UTS #46 lookup).
var idnaProfile = idna.Lookup

// ParseList reads a CSV "rank,domain" list (a bare "domain" per line is
// accepted too) and returns at most top unique domains (top <= 0: all).
// Malformed lines are counted, never fatal.
func ParseList(r io.Reader, top int) ([]Domain, ListInfo, error) {
	return parseList(r, top, 1<<16)
}

// parseList sizes its tables for about hint domains (growing a 1M-entry
// map by doubling was a quarter of the parse time).
func parseList(r io.Reader, top, hint int) ([]Domain, ListInfo, error) {
	var info ListInfo
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, h), maxLineLen)
	if top > 0 {
		hint = min(top, hint)
	}
	hint = max(min(hint, 1<<21), 16)
	seen := make(map[string]struct{}, hint)
	out := make([]Domain, 0, hint)
	malformed := func(err error) {
		info.Malformed++
		if len(info.FirstMalformed) < maxReportedMalformed {
			info.FirstMalformed = append(info.FirstMalformed, fmt.Sprintf("line %d: %v", info.Lines, err))
		}
	}
	for {
		b, long, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, info, fmt.Errorf("read list: line %d: %w", info.Lines+1, err)
		}
		info.Lines++
		if top > 0 && len(out) >= top {
			continue // keep hashing the whole file
		}
		if long {
			malformed(fmt.Errorf("longer than %d bytes", maxLineLen))
			continue
		}
		line := strings.TrimSpace(string(b))
		if info.Lines == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if line == "" || line[0] == '#' {
			continue
		}
		d, idn, err := parseLine(line, len(out)+info.Duplicates+info.Malformed+1)
		if err != nil {
			malformed(err)
			continue
		}
		if _, dup := seen[d.Name]; dup {
			info.Duplicates++
			continue
		}
		if idn {
			info.IDNs++
		}
		seen[d.Name] = struct{}{}
		out = append(out, d)
	}
	info.SHA256 = hex.EncodeToString(h.Sum(nil))
	info.Domains = len(out)
	return out, info, nil
}

func parseLine(line string, implicitRank int) (Domain, bool, error) {
	rank := implicitRank
	name := line
	if i := strings.IndexByte(line, ','); i >= 0 {
		rs := strings.TrimSpace(line[:i])
		n, err := strconv.Atoi(rs)
		if err != nil || n <= 0 {
			return Domain{}, false, fmt.Errorf("bad rank %q", truncate(rs))
		}
		rank = n
		name = strings.TrimSpace(line[i+1:])
		if strings.IndexByte(name, ',') >= 0 {
			return Domain{}, false, fmt.Errorf("too many fields")
		}
	}
	ascii, idn, err := normalizeDomain(name)
	if err != nil {
		return Domain{}, false, err
	}
	return Domain{Rank: rank, Name: ascii}, idn, nil
}

// normalizeDomain lower-cases, strips one trailing dot and converts an IDN
// to punycode; it rejects names a resolver would not accept.
func normalizeDomain(name string) (string, bool, error) {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", false, fmt.Errorf("empty domain")
	}
	idn := false
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			idn = true
			break
		}
	}
	ascii := name
	if idn { // ASCII names skip IDNA: its STD3 rules reject "_", found in real lists
		var err error
		if ascii, err = idnaProfile.ToASCII(name); err != nil {
			return "", false, fmt.Errorf("bad domain %q: %v", truncate(name), err)
		}
	}
	ascii = strings.ToLower(ascii)
	if len(ascii) > 253 || !strings.Contains(ascii, ".") {
		return "", false, fmt.Errorf("bad domain %q", truncate(name))
	}
	label := 0 // length of the current label
	for i := 0; i <= len(ascii); i++ {
		if i == len(ascii) || ascii[i] == '.' {
			if label == 0 || label > 63 {
				return "", false, fmt.Errorf("bad domain %q: empty or long label", truncate(name))
			}
			label = 0
			continue
		}
		c := ascii[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", false, fmt.Errorf("bad domain %q: character %q", truncate(name), c)
		}
		label++
	}
	return ascii, idn, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// LoadList reads a list file: CSV, or a .zip holding one CSV (as Tranco
// serves it). The sha256 is of the file as stored.
func LoadList(path string, top int) ([]Domain, ListInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, ListInfo{}, fmt.Errorf("read list: %w", err)
	}
	sum := sha256.Sum256(b)
	var r io.Reader = bytes.NewReader(b)
	if bytes.HasPrefix(b, []byte("PK\x03\x04")) {
		r, err = zipCSV(b)
		if err != nil {
			return nil, ListInfo{}, fmt.Errorf("list %s: %w", path, err)
		}
	}
	// Tranco lines average ~20 bytes.
	ds, info, err := parseList(r, top, len(b)/20+16)
	info.Source = path
	info.SHA256 = hex.EncodeToString(sum[:])
	return ds, info, err
}

func zipCSV(b []byte) (io.Reader, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("open zip: %w", err)
	}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("open %s in zip: %w", f.Name, err)
		}
		// A top-1M CSV is ~22 MB; cap what a hostile zip can expand to.
		data, err := io.ReadAll(io.LimitReader(rc, 256<<20))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s in zip: %w", f.Name, err)
		}
		return bytes.NewReader(data), nil
	}
	return nil, fmt.Errorf("zip holds no file")
}
