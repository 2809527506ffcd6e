package list

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
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
	Date        string `json:"date,omitempty"` // the Tranco list's own date
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

// MaxDomains bounds a list: at most MaxDomains-1 domains (the survey
// keeps a domain's index in 24 bits, beside a path index).
const MaxDomains = 1 << 24

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
	// parseList returns what it read also with an error.
	l, info, err := parseList(r, top, 1<<16)
	domains := l.Slice()
	l.Close()
	return domains, info, err
}

// parseList reads the list into a compact DomainList, sizing its tables
// for about hint domains (growing them by doubling was a quarter of the
// parse time of a 1M list). Duplicates are found with a hash set of list
// indexes (8 bytes a slot) instead of a map of names.
func parseList(r io.Reader, top, hint int) (*DomainList, ListInfo, error) {
	var info ListInfo
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, h), maxLineLen)
	if top > 0 {
		hint = min(top, hint)
	}
	hint = max(min(hint, 1<<21), 16)
	out := newDomainList(hint)
	seen := newNameSet(hint)
	malformed := func(err error) {
		info.Malformed++
		if len(info.FirstMalformed) < maxReportedMalformed {
			info.FirstMalformed = append(info.FirstMalformed, fmt.Sprintf("line %d: %v", info.Lines, err))
		}
	}
	defer out.names.Done()
	for {
		b, long, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, info, fmt.Errorf("read list: line %d: %w", info.Lines+1, err)
		}
		info.Lines++
		if top > 0 && out.Len() >= top {
			continue // keep hashing the whole file
		}
		if out.Len() == MaxDomains-1 {
			return out, info, fmt.Errorf("line %d: more than %d domains (use --top)", info.Lines, MaxDomains-1)
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
		d, idn, err := parseLine(line, out.Len()+info.Duplicates+info.Malformed+1)
		if err != nil {
			malformed(err)
			continue
		}
		if _, isNew := seen.insert(out, []byte(d.Name), out.Len()); !isNew {
			info.Duplicates++
			continue
		}
		if idn {
			info.IDNs++
		}
		out.add(d.Rank, []byte(d.Name))
	}
	info.SHA256 = hex.EncodeToString(h.Sum(nil))
	info.Domains = out.Len()
	if cap(out.lens) > out.Len()+out.Len()/8 { // sized from the file: --top or duplicates left room
		out.lens = slices.Clone(out.lens)
	}
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
	l, info, err := OpenList(path, top)
	if l == nil {
		return nil, info, err
	}
	defer l.Close()
	return l.Slice(), info, err
}

// OpenList is LoadList into a compact DomainList, reading the file as a
// stream (a top-1M list is never in memory whole); Close the list when
// done with it.
func OpenList(path string, top int) (*DomainList, ListInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ListInfo{}, fmt.Errorf("read list: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, ListInfo{}, fmt.Errorf("read list: %w", err)
	}
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, ListInfo{}, fmt.Errorf("read list: %w", err)
	}
	sum := sha256.New()
	var r io.Reader = io.TeeReader(f, sum)
	if n == 4 && string(magic[:]) == "PK\x03\x04" {
		if _, err := io.Copy(sum, f); err != nil {
			return nil, ListInfo{}, fmt.Errorf("read list: %w", err)
		}
		rc, err := zipCSV(f, st.Size())
		if err != nil {
			return nil, ListInfo{}, fmt.Errorf("list %s: %w", path, err)
		}
		defer rc.Close()
		r = rc
	}
	// Tranco lines average ~20 bytes. parseList reads to the end, so the
	// hash is of the whole file.
	l, info, err := parseList(r, top, int(st.Size()/20)+16)
	info.Source = path
	info.SHA256 = hex.EncodeToString(sum.Sum(nil))
	if err != nil {
		l.Close()
		return nil, info, err
	}
	return l, info, nil
}

// zipCSV opens the first file of a zip for reading.
func zipCSV(f io.ReaderAt, size int64) (io.ReadCloser, error) {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, fmt.Errorf("open zip: %w", err)
	}
	for _, zf := range zr.File {
		if zf.FileInfo().IsDir() {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, fmt.Errorf("open %s in zip: %w", zf.Name, err)
		}
		// A top-1M CSV is ~22 MB; cap what a hostile zip can expand to.
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(rc, 256<<20), rc}, nil
	}
	return nil, fmt.Errorf("zip holds no file")
}
