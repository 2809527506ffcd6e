package survey

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"os"

	"github.com/mptester/mptester/survey/internal/spill"
)

// addrIndex numbers the resolved addresses 0, 1, 2, ... in order of first
// sight and keeps, per address, everything the run knows of it in one
// fixed-size record: the address, the resolution paths it is known on and,
// per probe path, its target's state and result (the domains that
// resolved to it are in runner.doms). A real top-1M list resolves to
// ~1.5M addresses (the lab's 1M world to ~160K), so past addrMemRecords
// the records go to an unlinked temporary file, read and written in place
// (memory that does not grow with the list). What stays in memory is the
// lookup table (spill.IndexTable: 4 bytes a slot, at most half
// full; a lookup reads a record only when 7 bits of its hash match).
//
// Callers serialise every call (runner.mu). A file error is kept (err)
// and the run ends with it; a record that could not be read reads as
// empty.
type addrIndex struct {
	spill.IndexTable // Len: the addresses numbered
	seed             maphash.Seed
	paths            int
	recSize          int
	mem              []byte // records [0, memRecs)
	memRecs          int
	f                *os.File // records from memRecs on
	err              error
	buf              []byte
}

// addrRec is one address's record, decoded.
type addrRec struct {
	addr netip.Addr
	on   uint16 // resolution paths it is known on (bits of path indexes)
	path [maxPaths]pathRec
}

// pathRec is an address's target from one probe path.
type pathRec struct {
	state    uint8 // targetNone, ...
	flags    uint8 // resSet, resResponsive, resOverloaded
	medianMs float32
}

const (
	resSet uint8 = 1 << iota
	resResponsive
	resOverloaded
)

const (
	// addrMemRecords is how many records stay in memory (the 100K lab
	// world's ~40K addresses; 2 MB at two paths).
	addrMemRecords = 1 << 16
	addrHead       = 19 // address 16, IPv4 flag 1, on 2
	pathRecSize    = 6  // state 1, flags 1, median 4
)

// testAddrMemRecords, when > 0, replaces addrMemRecords (tests).
var testAddrMemRecords = 0

// errTooManyAddrs: more addresses than the table can number.
var errTooManyAddrs = errors.New("more than 33M resolved addresses")

func newAddrIndex(paths int) *addrIndex {
	x := &addrIndex{seed: maphash.MakeSeed(), paths: paths, recSize: addrHead + pathRecSize*paths, memRecs: addrMemRecords}
	if testAddrMemRecords > 0 {
		x.memRecs = testAddrMemRecords
	}
	x.buf = make([]byte, x.recSize)
	return x
}

func (x *addrIndex) len() int { return x.Len() }

func (x *addrIndex) hash(a netip.Addr) uint64 {
	b := a.As16()
	h := maphash.Bytes(x.seed, b[:])
	if a.Is4() {
		h = ^h // 1.2.3.4 and ::ffff:1.2.3.4 are different addresses
	}
	return h
}

// lookup returns a's number, or the slot where it would go.
func (x *addrIndex) lookup(a netip.Addr, h uint64) (int32, int, bool) {
	i, slot, ok := x.Find(h, func(i int) bool { return x.addr(int32(i)) == a })
	return int32(i), slot, ok
}

// get returns a's number.
func (x *addrIndex) get(a netip.Addr) (int32, bool) {
	i, _, ok := x.lookup(a, x.hash(a))
	return i, ok
}

// insert returns a's number, numbering it (with an empty record) if new;
// -1 when it cannot (err says why).
func (x *addrIndex) insert(a netip.Addr) (int32, bool) {
	h := x.hash(a)
	i, slot, ok := x.lookup(a, h)
	if ok {
		return i, false
	}
	if x.Len() >= spill.MaxTableItems {
		x.fail(errTooManyAddrs)
		return -1, false
	}
	i = int32(x.Len())
	x.store(i, &addrRec{addr: a})
	x.Add(h, int(i), slot, func(j int) uint64 { return x.hash(x.addr(int32(j))) })
	return i, true
}

// addr is address number i.
func (x *addrIndex) addr(i int32) netip.Addr { return decodeAddr(x.read(i)) }

func decodeAddr(b []byte) netip.Addr {
	if b[16]&1 != 0 {
		return netip.AddrFrom4([4]byte(b[12:16]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}

// load decodes record i.
func (x *addrIndex) load(i int32) addrRec {
	b := x.read(i)
	r := addrRec{addr: decodeAddr(b)}
	r.on = binary.LittleEndian.Uint16(b[17:])
	for pi := range x.paths {
		p := b[addrHead+pathRecSize*pi:]
		r.path[pi] = pathRec{state: p[0], flags: p[1], medianMs: math.Float32frombits(binary.LittleEndian.Uint32(p[2:]))}
	}
	return r
}

// store encodes r as record i.
func (x *addrIndex) store(i int32, r *addrRec) {
	b := x.buf
	a := r.addr.As16()
	copy(b, a[:])
	b[16] = 0
	if r.addr.Is4() {
		b[16] = 1
	}
	binary.LittleEndian.PutUint16(b[17:], r.on)
	for pi := range x.paths {
		p := b[addrHead+pathRecSize*pi:]
		p[0], p[1] = r.path[pi].state, r.path[pi].flags
		binary.LittleEndian.PutUint32(p[2:], math.Float32bits(r.path[pi].medianMs))
	}
	if int(i) < x.memRecs {
		off := int(i) * x.recSize
		if off+x.recSize > len(x.mem) {
			x.mem = append(x.mem, make([]byte, off+x.recSize-len(x.mem))...)
		}
		copy(x.mem[off:], b)
		return
	}
	if x.f == nil && x.err == nil {
		f, err := spill.UnlinkedTemp("mptester-survey-addrs-*")
		if err != nil {
			x.fail(err)
			return
		}
		x.f = f
	}
	if x.f != nil {
		if _, err := x.f.WriteAt(b, x.fileOff(i)); err != nil {
			x.fail(err)
		}
	}
}

// read returns record i's bytes (valid until the next call).
func (x *addrIndex) read(i int32) []byte {
	if int(i) < x.memRecs {
		off := int(i) * x.recSize
		return x.mem[off : off+x.recSize]
	}
	b := x.buf
	if x.f == nil {
		clear(b)
		return b
	}
	if _, err := x.f.ReadAt(b, x.fileOff(i)); err != nil {
		x.fail(err)
		clear(b)
	}
	return b
}

func (x *addrIndex) fileOff(i int32) int64 { return int64(int(i)-x.memRecs) * int64(x.recSize) }

func (x *addrIndex) fail(err error) {
	if x.err == nil {
		x.err = fmt.Errorf("survey: address records: %w", err)
	}
}

// close removes the temporary file.
func (x *addrIndex) close() {
	if x.f != nil {
		spill.CloseTemp(x.f)
		x.f = nil
	}
}
