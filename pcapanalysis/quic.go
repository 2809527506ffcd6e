package pcapanalysis

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"time"
)

// quicTracker counts QUIC connections by connection ID (RFC 9000 §5.1,
// §17.2): long headers carry DCID and SCID in clear; a short header's DCID
// has no length on the wire, so it is matched against the IDs already
// learnt, by each length in use.
type quicTracker struct {
	byCID  map[string]*quicConn
	lens   map[int]int // CID length -> number of known CIDs of that length
	byPath map[flowKey]*quicConn
	conns  []*quicConn // open
	done   []*QUICConn
	nextID int
}

type quicConn struct {
	q     *QUICConn
	cids  []string
	paths map[flowKey]bool
	last  int64
	done  bool
}

func newQUICTracker() *quicTracker {
	return &quicTracker{byCID: map[string]*quicConn{}, lens: map[int]int{}, byPath: map[flowKey]*quicConn{}}
}

// parseLong returns version, DCID and SCID of a long-header packet.
func parseLong(b []byte) (uint32, []byte, []byte, bool) {
	if len(b) < 7 || b[0]&0x80 == 0 {
		return 0, nil, nil, false
	}
	v := binary.BigEndian.Uint32(b[1:])
	dl := int(b[5])
	if dl > 20 || len(b) < 6+dl+1 {
		return 0, nil, nil, false
	}
	d := b[6 : 6+dl]
	sl := int(b[6+dl])
	if sl > 20 || len(b) < 7+dl+sl {
		return 0, nil, nil, false
	}
	if v != 0 && b[0]&0x40 == 0 {
		return 0, nil, nil, false // the fixed bit must be set (RFC 9000 §17.2)
	}
	return v, d, b[7+dl : 7+dl+sl], true
}

func (qt *quicTracker) learn(qc *quicConn, cid []byte) {
	if len(cid) == 0 {
		return
	}
	k := string(cid)
	if _, ok := qt.byCID[k]; ok {
		return
	}
	qt.byCID[k] = qc
	qt.lens[len(cid)]++
	qc.cids = append(qc.cids, k)
}

func (qt *quicTracker) packet(p *packet, t int64, wire int) {
	b := p.Data
	if len(b) == 0 {
		return
	}
	k, _ := keyOf(p.Src, p.Dst)
	var qc *quicConn
	if b[0]&0x80 != 0 {
		v, d, s, ok := parseLong(b)
		if !ok || v == 0 {
			return // not QUIC, or version negotiation
		}
		qc = qt.byCID[string(d)]
		if qc == nil && len(s) > 0 {
			qc = qt.byCID[string(s)]
		}
		// A new connection starts with the client's padded Initial (RFC
		// 9000 §14.1) whose DCID, chosen at random, is at least 8 bytes
		// (§7.2); anything else with unknown IDs (a server answering a
		// zero-length client ID, as quic-go clients use) belongs to its path.
		fresh := p.Payload >= 1200 && b[0]&0x30 == 0 && len(d) >= 8
		if qc == nil && !fresh {
			qc = qt.byPath[k]
		}
		if qc == nil {
			if !fresh {
				return
			}
			qt.nextID++
			qc = &quicConn{paths: map[flowKey]bool{}, q: &QUICConn{ID: qt.nextID, Version: fmt.Sprintf("0x%08x", v), Start: time.Unix(0, t).UTC()}}
			qt.conns = append(qt.conns, qc)
		}
		qt.learn(qc, d)
		qt.learn(qc, s)
	} else if b[0]&0x40 != 0 {
		for n := range qt.lens {
			if len(b) >= 1+n {
				if c := qt.byCID[string(b[1:1+n])]; c != nil {
					qc = c
					break
				}
			}
		}
		if qc == nil {
			qc = qt.byPath[k]
		}
	}
	if qc == nil || qc.done {
		return
	}
	if !qc.paths[k] {
		qc.paths[k] = true
		qc.q.Paths = append(qc.q.Paths, p.Src.String()+"-"+p.Dst.String())
		qt.byPath[k] = qc
	}
	qc.q.Packets++
	qc.q.Bytes += int64(p.Payload)
	qc.last = t
	qc.q.End = time.Unix(0, t).UTC()
}

func (qt *quicTracker) drop(qc *quicConn) {
	qc.done = true
	for _, c := range qc.cids {
		if qt.byCID[c] == qc {
			delete(qt.byCID, c)
			qt.lens[len(c)]--
			if qt.lens[len(c)] == 0 {
				delete(qt.lens, len(c))
			}
		}
	}
	for k := range qc.paths {
		if qt.byPath[k] == qc {
			delete(qt.byPath, k)
		}
	}
	for _, c := range qc.cids {
		qc.q.CIDs = append(qc.q.CIDs, hex.EncodeToString([]byte(c)))
	}
	qc.paths = nil
}

func (qt *quicTracker) scan(now, idle int64) {
	open := qt.conns[:0]
	for _, qc := range qt.conns {
		if now-qc.last > idle {
			qt.drop(qc)
			qt.done = append(qt.done, qc.q)
			continue
		}
		open = append(open, qc)
	}
	clear(qt.conns[len(open):])
	qt.conns = open
}

func (qt *quicTracker) finish(r *Report) {
	for _, qc := range qt.conns {
		qt.drop(qc)
		qt.done = append(qt.done, qc.q)
	}
	r.QUIC = append(r.QUIC, qt.done...)
	sort.Slice(r.QUIC, func(i, j int) bool { return r.QUIC[i].ID < r.QUIC[j].ID })
}
