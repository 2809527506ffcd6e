package pcapanalysis

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/gopacket/gopacket"
)

type flowKey struct{ a, b Endpoint }

func keyOf(s, d Endpoint) (flowKey, bool) {
	if lessEP(s, d) {
		return flowKey{s, d}, false
	}
	return flowKey{d, s}, true
}

func lessEP(x, y Endpoint) bool {
	if x.Addr.V6 != y.Addr.V6 {
		return !x.Addr.V6
	}
	for i := range x.Addr.B {
		if x.Addr.B[i] != y.Addr.B[i] {
			return x.Addr.B[i] < y.Addr.B[i]
		}
	}
	return x.Port < y.Port
}

// mapping is one DSS mapping in absolute 64-bit DSN.
type mapping struct {
	dsn uint64
	ssn uint32 // relative to the subflow's ISN
	n   uint32 // bytes; ^0 for an infinite mapping
}

type tsEntry struct {
	val uint32
	t   int64
}

// dirState is one direction of a subflow, in the subflow's own
// orientation (0 = from the subflow's SYN sender).
type dirState struct {
	isn    uint32
	hasISN bool
	high   uint32 // relative end of the highest sequence seen
	maps   [8]mapping
	nmaps  int
	ts     [32]tsEntry
	nts    int
	lastTS uint32
	fin    bool
}

// flow is one TCP connection: a plain TCP connection or an MPTCP subflow.
type flow struct {
	sub       *Subflow
	client    Endpoint
	dir       [2]dirState
	conn      *mpConn
	synT      int64
	synackT   int64
	serverISN uint32
	hsDone    bool
	first     int64
	last      int64
	mptcp     bool
	closed    bool
	rst       bool
	plainTCP  *Connection // set when this flow is a plain TCP connection
	synKey    uint64      // MP_CAPABLE v0 SYN key
	hasSynKey bool
	version   int
	id        int
	offered   bool // MP_CAPABLE on the SYN
	randA     uint32
	randB     uint32
	hmacB     uint64 // SYN-ACK's truncated HMAC
	hasHmacB  bool
}

// interval is data sequence space [s, e) first carried by subflow owner.
type interval struct {
	s, e  uint64
	owner int
}

// mpConn is one MPTCP connection being assembled.
type mpConn struct {
	c       *Connection
	keys    [2]uint64
	hasKey  [2]bool
	tokens  [2]uint32
	idsn    [2]uint64
	high    [2]uint64 // highest DSN end seen, for 32-bit DSN expansion
	hasHigh [2]bool
	cover   [2][]interval
	flows   []*flow
	open    int
	version int
	first   int64
	last    int64
}

// maxIntervals bounds the coverage kept per direction; older intervals are
// merged into one of unknown owner (bytes overlapping it count as
// retransmitted, not reinjected).
const maxIntervals = 1 << 14

type analyzer struct {
	opts     Options
	flows    map[flowKey]*flow
	byToken  map[uint32]*mpConn
	quic     *quicTracker
	rep      *Report
	nextID   int
	lastScan int64
	now      int64
	p        packet
	perAddr  map[string]*AddrBytes
}

func newAnalyzer(opts Options) *analyzer {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	return &analyzer{
		opts:    opts,
		flows:   map[flowKey]*flow{},
		byToken: map[uint32]*mpConn{},
		quic:    newQUICTracker(),
		rep:     &Report{LinkTypes: map[int]int64{}, Warnings: []string{}},
		perAddr: map[string]*AddrBytes{},
	}
}

func (a *analyzer) packet(lt int, data []byte, ci gopacket.CaptureInfo, ifName func(int) string) error {
	a.rep.Packets++
	a.rep.LinkTypes[lt]++
	t := ci.Timestamp.UnixNano()
	if a.rep.Packets == 1 {
		a.rep.First = ci.Timestamp
	}
	if t > a.now {
		a.now = t
		a.rep.Last = ci.Timestamp
	}
	p := &a.p
	p.IfIndex, p.HasTS, p.NMPTCP, p.snapShort, p.Proto = -1, false, 0, false, 0
	ver, nb, err := decodeLink(lt, data, p)
	if err != nil {
		return err
	}
	if ver == 0 {
		a.rep.Other++
		return nil
	}
	wire := ci.Length - (len(data) - len(nb))
	ok, err := decodeIP(ver, nb, wire, p)
	if err != nil {
		return err
	}
	if !ok {
		if p.snapShort {
			a.rep.SnapShort++
		} else {
			a.rep.Other++
		}
		return nil
	}
	iface := ""
	if p.IfIndex >= 0 {
		iface = fmt.Sprintf("if%d", p.IfIndex)
	} else if n := ifName(ci.InterfaceIndex); n != "" {
		iface = n
	}
	switch p.Proto {
	case 6:
		a.rep.TCPPackets++
		if err := a.tcp(p, t, iface); err != nil {
			return err
		}
	case 17:
		a.rep.UDPPackets++
		a.quic.packet(p, t, ci.Length)
	}
	if t-a.lastScan > int64(time.Second) {
		a.scan(t)
	}
	return nil
}

// scan frees flows closed for a second and flows idle for the idle timeout.
func (a *analyzer) scan(now int64) {
	a.lastScan = now
	for k, f := range a.flows {
		if (f.closed && now-f.last > int64(time.Second)) || now-f.last > int64(a.opts.IdleTimeout) {
			delete(a.flows, k)
			a.endFlow(f)
		}
	}
	a.quic.scan(now, int64(a.opts.IdleTimeout))
}

// warn records something the capture made us read around.
func (a *analyzer) warn(msg string) { a.rep.Warnings = append(a.rep.Warnings, msg) }

func (a *analyzer) finish() *Report {
	for k, f := range a.flows {
		delete(a.flows, k)
		a.endFlow(f)
	}
	// Connections left without subflows (none) or with open ones are done.
	for _, mc := range a.byToken {
		a.emitMP(mc)
	}
	a.quic.finish(a.rep)
	r := a.rep
	// Numbered in the order their first packet appeared.
	sort.Slice(r.Connections, func(i, j int) bool { return r.Connections[i].ID < r.Connections[j].ID })
	for i, c := range r.Connections {
		c.ID = i + 1
	}
	for _, ab := range a.perAddr {
		r.Summary.PerAddress = append(r.Summary.PerAddress, *ab)
	}
	sort.Slice(r.Summary.PerAddress, func(i, j int) bool { return r.Summary.PerAddress[i].Addr < r.Summary.PerAddress[j].Addr })
	r.Summary.QUIC = len(r.QUIC)
	for _, q := range r.QUIC {
		r.Summary.QUICPaths += len(q.Paths)
	}
	return r
}

func (a *analyzer) id() int { a.nextID++; return a.nextID }

func ms(d int64) float64 { return float64(d) / 1e6 }

func (a *analyzer) tcp(p *packet, t int64, iface string) error {
	k, rev := keyOf(p.Src, p.Dst)
	f := a.flows[k]
	syn := p.TCPFlags&flagSYN != 0
	ack := p.TCPFlags&flagACK != 0
	if f != nil && syn && !ack && f.dir[0].hasISN && p.Seq != f.dir[0].isn && p.Src == f.client {
		// A new connection on the same 4-tuple.
		delete(a.flows, k)
		a.endFlow(f)
		f = nil
	}
	if f == nil && !syn && p.Payload == 0 {
		// An empty segment of a flow we do not know (the last ACK or a RST
		// after the flow was freed, a keepalive) starts no connection.
		a.rep.Stray++
		return nil
	}
	if f == nil {
		f = &flow{client: p.Src, first: t, id: a.id()}
		if syn && ack {
			f.client = p.Dst // we missed the SYN
		}
		f.sub = &Subflow{Client: f.client.String(), Interface: iface, AddrID: -1, Closed: "open", Start: time.Unix(0, t).UTC()}
		if f.client == p.Src {
			f.sub.Server = p.Dst.String()
		} else {
			f.sub.Server = p.Src.String()
		}
		a.flows[k] = f
		_ = rev
	}
	f.last = t
	d := 0
	if p.Src != f.client {
		d = 1
	}
	ds := &f.dir[d]
	if syn {
		ds.isn, ds.hasISN = p.Seq, true
		if d == 0 && !ack && f.synT == 0 {
			f.synT = t
		}
		if d == 1 && ack && f.synackT == 0 {
			f.synackT = t
			f.serverISN = p.Seq
		}
	} else if d == 0 && ack && !f.hsDone && f.synackT != 0 && p.Ack == f.serverISN+1 {
		f.hsDone = true
		if f.synT != 0 {
			f.sub.HandshakeRTT = ms(t - f.synT)
		}
	}
	if !ds.hasISN {
		// Joined mid-connection: sequence numbers count from here.
		ds.isn, ds.hasISN = p.Seq-1, true
	}
	// MPTCP options first: the segment's own mapping covers its payload.
	for i := 0; i < p.NMPTCP; i++ {
		o, err := ParseOption(p.MPTCP[i], syn, ack)
		if err != nil {
			return err
		}
		a.mpOption(f, d, &o, p, t)
	}
	if p.HasTS {
		a.tsRTT(f, d, p, t)
	}
	rel := p.Seq - ds.isn
	if syn {
		rel++
	}
	n := uint32(p.Payload)
	newBytes := int64(0)
	if n > 0 {
		end := rel + n
		if int32(end-ds.high) > 0 {
			if int32(rel-ds.high) >= 0 {
				newBytes = int64(n)
			} else {
				newBytes = int64(end - ds.high)
			}
			ds.high = end
		}
	}
	f.sub.Dir[f.cdir(d)].Wire += int64(p.IPLen)
	a.account(f, d, rel, n, newBytes, t)
	if p.TCPFlags&flagRST != 0 {
		f.closed, f.rst = true, true
	}
	if p.TCPFlags&flagFIN != 0 {
		ds.fin = true
		if f.dir[0].fin && f.dir[1].fin {
			f.closed = true
		}
	}
	return nil
}

// cdir converts a subflow direction to the connection's direction.
func (f *flow) cdir(d int) int {
	if f.sub.flipped {
		return 1 - d
	}
	return d
}

func (a *analyzer) account(f *flow, d int, rel, n uint32, newBytes int64, t int64) {
	cd := f.cdir(d)
	db := &f.sub.Dir[cd]
	db.Packets++
	if n == 0 {
		return
	}
	db.Payload += int64(n)
	if f.conn == nil {
		if !f.mptcp {
			db.Data += newBytes
			db.Retransmitted += int64(n) - newBytes
		} else {
			db.Unmapped += int64(n)
		}
		return
	}
	mc := f.conn
	ds := &f.dir[d]
	for n > 0 {
		m := ds.find(rel)
		if m == nil {
			db.Unmapped += int64(n)
			return
		}
		k := n
		if m.n != ^uint32(0) {
			if left := m.ssn + m.n - rel; left < k {
				k = left
			}
		}
		s := m.dsn + uint64(rel-m.ssn)
		a.cover(mc, f, cd, s, s+uint64(k), t)
		rel += k
		n -= k
	}
}

func (ds *dirState) find(rel uint32) *mapping {
	for i := ds.nmaps - 1; i >= 0; i-- {
		m := &ds.maps[i]
		if rel-m.ssn < m.n {
			return m
		}
	}
	return nil
}

func (ds *dirState) addMap(m mapping) {
	for i := 0; i < ds.nmaps; i++ {
		if ds.maps[i].ssn == m.ssn && ds.maps[i].dsn == m.dsn {
			if m.n > ds.maps[i].n {
				ds.maps[i].n = m.n
			}
			return
		}
	}
	if ds.nmaps == len(ds.maps) {
		copy(ds.maps[:], ds.maps[1:])
		ds.nmaps--
	}
	ds.maps[ds.nmaps] = m
	ds.nmaps++
}

// cover records data sequence space [s, e) carried by subflow f in
// connection direction cd, splitting it into new data, reinjection (first
// carried by another subflow) and retransmission (by this one).
func (a *analyzer) cover(mc *mpConn, f *flow, cd int, s, e uint64, t int64) {
	c := mc.c
	db := &f.sub.Dir[cd]
	me := f.sub.Index
	iv := mc.cover[cd]
	if !mc.hasHigh[cd] || e > mc.high[cd] {
		mc.high[cd], mc.hasHigh[cd] = e, true
	}
	first := func() {
		if c.FirstDataSubflow < 0 {
			c.FirstDataSubflow, c.FirstDataDir = me, cd
		}
	}
	// Fast path: beyond everything seen.
	if len(iv) == 0 || s >= iv[len(iv)-1].e {
		db.Data += int64(e - s)
		first()
		if len(iv) > 0 && iv[len(iv)-1].e == s && iv[len(iv)-1].owner == me {
			iv[len(iv)-1].e = e
		} else {
			iv = append(iv, interval{s, e, me})
		}
		mc.cover[cd] = a.trim(iv)
		return
	}
	i := sort.Search(len(iv), func(i int) bool { return iv[i].e > s })
	var gaps []interval
	reinj := int64(0)
	pos := s
	for ; i < len(iv) && pos < e; i++ {
		x := iv[i]
		if x.s > pos {
			ge := min(x.s, e)
			gaps = append(gaps, interval{pos, ge, me})
			pos = ge
			if pos >= e {
				break
			}
		}
		ov := min(x.e, e) - pos
		if x.owner == me || x.owner < 0 {
			db.Retransmitted += int64(ov)
		} else {
			reinj += int64(ov)
		}
		pos += ov
	}
	if pos < e {
		gaps = append(gaps, interval{pos, e, me})
	}
	if reinj > 0 {
		db.Reinjected += reinj
		c.Reinjections[cd]++
		c.ReinjectedBytes[cd] += reinj
	}
	for _, g := range gaps {
		db.Data += int64(g.e - g.s)
		first()
		j := sort.Search(len(iv), func(j int) bool { return iv[j].s >= g.e })
		iv = append(iv, interval{})
		copy(iv[j+1:], iv[j:])
		iv[j] = g
	}
	mc.cover[cd] = a.trim(iv)
}

func (a *analyzer) trim(iv []interval) []interval {
	if len(iv) <= maxIntervals {
		return iv
	}
	h := len(iv) / 2
	iv[0] = interval{iv[0].s, iv[h-1].e, -1}
	return append(iv[:1], iv[h:]...)
}

func (a *analyzer) tsRTT(f *flow, d int, p *packet, t int64) {
	ds := &f.dir[d]
	if (p.Payload > 0 || p.TCPFlags&(flagSYN|flagFIN) != 0) && (ds.nts == 0 || p.TSval != ds.lastTS) {
		if ds.nts == len(ds.ts) {
			copy(ds.ts[:], ds.ts[1:])
			ds.nts--
		}
		ds.ts[ds.nts] = tsEntry{p.TSval, t}
		ds.nts++
		ds.lastTS = p.TSval
	}
	if p.TCPFlags&flagACK == 0 {
		return
	}
	o := &f.dir[1-d]
	for i := 0; i < o.nts; i++ {
		if o.ts[i].val == p.TSecr {
			f.sub.TSRTT[f.cdir(1-d)].add(ms(t - o.ts[i].t))
			copy(o.ts[:], o.ts[i+1:o.nts])
			o.nts -= i + 1
			return
		}
	}
}

// keyHash gives the token and IDSN of a key (RFC 8684 §3.1: SHA-256 for
// version 1, SHA-1 for version 0 of RFC 6824).
func keyHash(key uint64, version int) (uint32, uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], key)
	if version == 0 {
		h := sha1.Sum(b[:])
		return binary.BigEndian.Uint32(h[:4]), binary.BigEndian.Uint64(h[12:])
	}
	h := sha256.Sum256(b[:])
	return binary.BigEndian.Uint32(h[:4]), binary.BigEndian.Uint64(h[24:])
}

// Token is the MPTCP token of a version 1 key (RFC 8684 §3.2).
func Token(key uint64) uint32 { t, _ := keyHash(key, 1); return t }

// IDSN is the initial data sequence number of a version 1 key.
func IDSN(key uint64) uint64 { _, s := keyHash(key, 1); return s }

func (a *analyzer) newMP(f *flow, version int) *mpConn {
	mc := &mpConn{version: version, first: f.first}
	mc.c = &Connection{ID: f.id, Kind: "mptcp", Client: f.sub.Client, Server: f.sub.Server, Version: version,
		Handshake: f.synT != 0, FirstDataSubflow: -1, FirstDataDir: -1, Start: f.sub.Start}
	a.attach(mc, f)
	return mc
}

func (a *analyzer) attach(mc *mpConn, f *flow) {
	f.conn = mc
	f.mptcp = true
	f.sub.Index = len(mc.flows)
	mc.flows = append(mc.flows, f)
	mc.c.Subflows = append(mc.c.Subflows, f.sub)
	mc.open++
	if f.plainTCP != nil {
		f.plainTCP = nil
	}
}

// verifyJoin checks the SYN-ACK's truncated HMAC of an MP_JOIN against the
// connection's keys (RFC 8684 §3.2: HMAC-SHA256 keyed with Key-B then
// Key-A over R-B then R-A, leftmost 64 bits; A sent the SYN), which proves
// the subflow belongs to the connection its token named.
func (a *analyzer) verifyJoin(f *flow) {
	mc := f.conn
	if mc == nil || !f.hasHmacB || !mc.hasKey[0] || !mc.hasKey[1] || mc.version == 0 {
		return
	}
	ka, kb := mc.keys[0], mc.keys[1]
	if f.sub.flipped {
		ka, kb = kb, ka
	}
	var key [16]byte
	binary.BigEndian.PutUint64(key[:], kb)
	binary.BigEndian.PutUint64(key[8:], ka)
	var msg [8]byte
	binary.BigEndian.PutUint32(msg[:], f.randB)
	binary.BigEndian.PutUint32(msg[4:], f.randA)
	h := hmac.New(sha256.New, key[:])
	h.Write(msg[:])
	f.sub.JoinVerified = binary.BigEndian.Uint64(h.Sum(nil)) == f.hmacB
}

func (a *analyzer) setKey(mc *mpConn, side int, key uint64) {
	if mc.hasKey[side] {
		return
	}
	mc.keys[side], mc.hasKey[side] = key, true
	mc.tokens[side], mc.idsn[side] = keyHash(key, mc.version)
	a.byToken[mc.tokens[side]] = mc
	if side == 0 {
		mc.c.TokenC = fmt.Sprintf("%08x", mc.tokens[0])
	} else {
		mc.c.TokenS = fmt.Sprintf("%08x", mc.tokens[1])
	}
}

// expand widens a 32-bit DSN or data ACK to 64 bits next to ref.
func expand(v uint64, is64 bool, ref uint64) uint64 {
	if is64 {
		return v
	}
	c := ref&^0xffffffff | v
	switch {
	case c > ref && c-ref > 1<<31 && c >= 1<<32:
		c -= 1 << 32
	case c < ref && ref-c > 1<<31:
		c += 1 << 32
	}
	return c
}

func (a *analyzer) mpOption(f *flow, d int, o *Option, p *packet, t int64) {
	syn := p.TCPFlags&flagSYN != 0
	ack := p.TCPFlags&flagACK != 0
	if o.Capable != nil && syn && !ack {
		// Offered only: a server that does not answer in kind makes this
		// plain TCP (RFC 8684 §3.7 fallback).
		f.offered = true
	} else {
		f.mptcp = true
	}
	switch {
	case o.Capable != nil:
		c := o.Capable
		f.version = int(c.Version)
		switch {
		case syn && !ack:
			if c.HasSenderKey { // version 0 SYN
				f.synKey, f.hasSynKey = c.SenderKey, true
			}
		case syn && ack:
			if f.conn == nil {
				mc := a.newMP(f, int(c.Version))
				if f.hasSynKey {
					a.setKey(mc, 0, f.synKey)
				}
				if c.HasSenderKey {
					a.setKey(mc, 1, c.SenderKey)
				}
			}
		default:
			if f.conn == nil {
				a.newMP(f, int(c.Version))
			}
			if c.HasSenderKey && c.HasReceiverKy {
				// Sent by the client: sender's key is the client's.
				a.setKey(f.conn, f.cdir(d), c.SenderKey)
				a.setKey(f.conn, 1-f.cdir(d), c.ReceiverKey)
			}
			if c.HasDataLen && p.Payload > 0 && f.conn.hasKey[f.cdir(d)] {
				// RFC 8684 §3.1: data with the third ACK maps to IDSN+1.
				f.dir[d].addMap(mapping{dsn: f.conn.idsn[f.cdir(d)] + 1, ssn: 1, n: uint32(c.DataLen)})
			}
		}
	case o.Join != nil:
		j := o.Join
		switch j.Form {
		case JoinSYN:
			f.sub.Join, f.sub.Backup, f.sub.AddrID = true, j.Backup, int(j.AddrID)
			f.randA = j.Random
			if mc := a.byToken[j.Token]; mc != nil && f.conn == nil {
				// The token is the receiver's: if it is the server's, this
				// subflow's SYN sender is the connection's client.
				f.sub.flipped = mc.hasKey[0] && mc.tokens[0] == j.Token && !(mc.hasKey[1] && mc.tokens[1] == j.Token)
				a.attach(mc, f)
			}
		case JoinSYNACK:
			if d == 1 {
				f.sub.Join = true
				f.randB, f.hmacB, f.hasHmacB = j.Random, j.TruncHMAC, true
				a.verifyJoin(f)
			}
		}
	case o.DSS != nil:
		ds := o.DSS
		mc := f.conn
		if mc == nil {
			return
		}
		cd := f.cdir(d)
		if ds.HasMap {
			ref := mc.idsn[cd]
			if mc.hasHigh[cd] {
				ref = mc.high[cd]
			}
			dsn := expand(ds.DSN, ds.DSN64, ref)
			n := uint32(ds.DataLen)
			if n == 0 {
				n = ^uint32(0)
				mc.c.Fallback = true
			}
			if !(ds.DataFin && ds.DataLen == 1 && ds.SSN == 0) {
				f.dir[d].addMap(mapping{dsn: dsn, ssn: ds.SSN, n: n})
			}
		}
	case o.AddAddr != nil:
		if f.conn != nil && !o.AddAddr.Echo {
			ad := Addr{V6: len(o.AddAddr.Addr) == 16}
			copy(ad.B[:], o.AddAddr.Addr)
			s := fmt.Sprintf("id %d %s", o.AddAddr.AddrID, ad)
			if o.AddAddr.HasPort {
				s += fmt.Sprintf(" port %d", o.AddAddr.Port)
			}
			f.conn.c.AddAddr = append(f.conn.c.AddAddr, s)
		}
	case o.Subtype == SubRemove:
		if f.conn != nil {
			f.conn.c.RemoveAddr += len(o.RemoveIDs)
		}
	case o.Subtype == SubPrio:
		f.sub.Backup = o.Backup
		if f.conn != nil {
			f.conn.c.Prio++
		}
	case o.Subtype == SubFail:
		if f.conn != nil {
			f.conn.c.Fail++
		}
	case o.Subtype == SubFastclose:
		if f.conn != nil {
			f.conn.c.Fastclose = true
		}
	case o.Subtype == SubTCPRST:
		if f.conn != nil {
			f.conn.c.TCPRST++
		}
	}
}

func (a *analyzer) endFlow(f *flow) {
	f.sub.End = time.Unix(0, f.last).UTC()
	switch {
	case f.rst:
		f.sub.Closed = "rst"
	case f.closed:
		f.sub.Closed = "fin"
	}
	if mc := f.conn; mc != nil {
		if f.last > mc.last {
			mc.last = f.last
		}
		mc.open--
		if mc.open == 0 {
			a.emitMP(mc)
		}
		return
	}
	c := &Connection{ID: f.id, Kind: "tcp", Client: f.sub.Client, Server: f.sub.Server, Handshake: f.synT != 0,
		Start: f.sub.Start, End: f.sub.End, Duration: ms(f.last-f.first) / 1000, FirstDataSubflow: -1, FirstDataDir: -1}
	if f.mptcp {
		c.Kind = "mptcp-orphan" // subflow of a connection the capture did not show
	} else if f.offered {
		c.Fallback = true // MPTCP offered, not agreed
	}
	c.Subflows = []*Subflow{f.sub}
	for cd := 0; cd < 2; cd++ {
		c.Data[cd] = f.sub.Dir[cd].Data
		if c.Data[cd] > 0 && c.FirstDataSubflow < 0 {
			c.FirstDataSubflow, c.FirstDataDir = 0, cd
		}
	}
	a.finishConn(c)
}

func (a *analyzer) emitMP(mc *mpConn) {
	for _, tk := range mc.tokens {
		if a.byToken[tk] == mc {
			delete(a.byToken, tk)
		}
	}
	if mc.c == nil {
		return
	}
	c := mc.c
	mc.c = nil
	for _, f := range mc.flows {
		if f.first < mc.first {
			mc.first = f.first
		}
		if f.last > mc.last {
			mc.last = f.last
		}
	}
	for cd := 0; cd < 2; cd++ {
		if mc.hasKey[cd] && mc.hasHigh[cd] {
			var got int64
			for _, s := range c.Subflows {
				got += s.Dir[cd].Data
			}
			c.Missing[cd] = max(0, int64(mc.high[cd]-(mc.idsn[cd]+1))-got)
		}
	}
	mc.cover = [2][]interval{}
	c.Start, c.End = time.Unix(0, mc.first).UTC(), time.Unix(0, mc.last).UTC()
	c.Duration = ms(mc.last-mc.first) / 1000
	a.finishConn(c)
}

// finishConn derives the per-connection totals and hands the connection on.
func (a *analyzer) finishConn(c *Connection) {
	addr := map[string]*AddrBytes{}
	var order []string
	c.Data = [2]int64{}
	for _, s := range c.Subflows {
		if s.Dir[0].Data+s.Dir[1].Data > 0 {
			c.PathsWithData++
		}
		for d := 0; d < 2; d++ {
			if s.Dir[d].Data > 0 {
				c.PathsWithDataDir[d]++
			}
		}
		c.Data[0] += s.Dir[0].Data
		c.Data[1] += s.Dir[1].Data
		host := hostOf(s.Client)
		if s.flipped {
			host = hostOf(s.Server)
		}
		ab := addr[host]
		if ab == nil {
			ab = &AddrBytes{Addr: host}
			addr[host] = ab
			order = append(order, host)
		}
		ab.Data[0] += s.Dir[0].Data
		ab.Data[1] += s.Dir[1].Data
	}
	for _, h := range order {
		c.PerAddress = append(c.PerAddress, *addr[h])
	}
	c.SinglePath = c.PathsWithData == 1
	sm := &a.rep.Summary
	if c.Kind == "mptcp" {
		sm.MPTCP++
		if c.SinglePath {
			sm.MPTCPSinglePath++
		}
		for d := 0; d < 2; d++ {
			if c.PathsWithDataDir[d] > 0 {
				sm.MPTCPWithDataDir[d]++
			}
			if c.PathsWithDataDir[d] == 1 {
				sm.MPTCPSinglePathDir[d]++
			}
		}
		if c.Reinjections[0]+c.Reinjections[1] > 0 {
			sm.MPTCPWithReinject++
		}
		sm.ReinjectedBytes += c.ReinjectedBytes[0] + c.ReinjectedBytes[1]
		for _, ab := range c.PerAddress {
			t := a.perAddr[ab.Addr]
			if t == nil {
				t = &AddrBytes{Addr: ab.Addr}
				a.perAddr[ab.Addr] = t
			}
			t.Data[0] += ab.Data[0]
			t.Data[1] += ab.Data[1]
		}
	} else {
		sm.TCP++
	}
	if a.opts.OnConnection != nil {
		a.opts.OnConnection(c)
		return
	}
	a.rep.Connections = append(a.rep.Connections, c)
}

// hostOf strips the port from an Endpoint string.
func hostOf(ep string) string {
	for i := len(ep) - 1; i >= 0; i-- {
		if ep[i] == ':' {
			h := ep[:i]
			if len(h) > 1 && h[0] == '[' {
				h = h[1 : len(h)-1]
			}
			return h
		}
	}
	return ep
}
