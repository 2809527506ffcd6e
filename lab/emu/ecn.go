package emu

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// ECN is what a direction does to the ECN field (RFC 3168 §5: the two
// low bits of the IPv4 TOS / IPv6 traffic class) of the packets its queue
// admits: a middlebox that clears the field, or a router that marks
// ECN-capable packets Congestion Experienced. Both are counted
// (DirStats.ECNBleached, ECNMarkedCE): ground truth for the ECN a
// transport reports.
type ECN struct {
	Bleach bool // clear the field of every packet that has one set
	// CEEvery marks every CEEvery-th ECT(0)/ECT(1) packet CE (1: all of
	// them); 0: none. Not-ECT packets are never marked.
	CEEvery int
}

func (e ECN) String() string {
	switch {
	case e.Bleach:
		return "bleach"
	case e.CEEvery > 0:
		return "ce/" + strconv.Itoa(e.CEEvery)
	}
	return "off"
}

// parseECN reads bleach, ce/N (every Nth ECT packet marked CE) or off.
func parseECN(s string) (ECN, error) {
	switch s = strings.ToLower(s); {
	case s == "off" || s == "none":
		return ECN{}, nil
	case s == "bleach":
		return ECN{Bleach: true}, nil
	case strings.HasPrefix(s, "ce/"):
		n, err := strconv.Atoi(s[3:])
		if err != nil || n < 1 {
			return ECN{}, fmt.Errorf("ecn=ce/N wants N >= 1 (every Nth ECN-capable packet marked CE), got %q", s[3:])
		}
		return ECN{CEEvery: n}, nil
	}
	return ECN{}, fmt.Errorf("want bleach, ce/N or off")
}

// ECN codepoints.
const (
	ecnNotECT = 0
	ecnCE     = 3
)

// ecnField is an IP packet's ECN codepoint; ok false if pkt is not IPv4 or
// IPv6 with a full header.
func ecnField(pkt []byte) (cp byte, ok bool) {
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		return pkt[1] & 3, true
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		return pkt[1] >> 4 & 3, true
	}
	return 0, false
}

// setECNField rewrites the codepoint, and an IPv4 header's checksum.
func setECNField(pkt []byte, cp byte) {
	if pkt[0]>>4 == 6 {
		pkt[1] = pkt[1]&^0x30 | cp<<4
		return
	}
	pkt[1] = pkt[1]&^3 | cp
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || ihl > len(pkt) {
		return
	}
	pkt[10], pkt[11] = 0, 0
	var sum uint32
	for i := 0; i < ihl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(pkt[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(pkt[10:], ^uint16(sum))
}

// applyECN does e to a packet the queue admitted (reader goroutine only).
func (d *direction) applyECN(pkt []byte, e ECN) {
	cp, ok := ecnField(pkt)
	if !ok || cp == ecnNotECT {
		return
	}
	switch {
	case e.Bleach:
		setECNField(pkt, ecnNotECT)
		d.ecnBleached.Add(1)
	case e.CEEvery > 0 && cp != ecnCE:
		d.ectSeen++
		if d.ectSeen%uint64(e.CEEvery) == 0 {
			setECNField(pkt, ecnCE)
			d.ecnMarkedCE.Add(1)
		}
	}
}
