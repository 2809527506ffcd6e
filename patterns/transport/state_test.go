package transport

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// fullInfo builds what the kernel writes for MPTCP_FULL_INFO with one
// IPv4 subflow, from the uapi layout.
func fullInfo(subflows uint32) (hdr, sf, ti []byte) {
	ne := binary.NativeEndian
	hdr = make([]byte, FullInfoLen)
	ne.PutUint32(hdr[0:], TCPInfoLen)
	ne.PutUint32(hdr[4:], TCPInfoLen)
	ne.PutUint32(hdr[8:], SubflowInfoLen)
	ne.PutUint32(hdr[12:], SubflowInfoLen)
	ne.PutUint32(hdr[16:], subflows)
	ne.PutUint32(hdr[20:], 8)
	mi := hdr[fullInfoHdrLen:]
	mi[0] = byte(subflows - 1)
	ne.PutUint32(mi[12:], 0xdeadbeef)
	ne.PutUint64(mi[56:], 12345)
	mi[80] = byte(subflows)
	sf = make([]byte, 8*SubflowInfoLen)
	ti = make([]byte, 8*TCPInfoLen)
	for i := range int(subflows) {
		s := sf[i*SubflowInfoLen:]
		ne.PutUint32(s, uint32(i+1))
		ne.PutUint16(s[8:], afInet)
		binary.BigEndian.PutUint16(s[10:], 5000)
		copy(s[12:], []byte{198, 18, 1, 2})
		r := s[8+sockaddrLen:]
		ne.PutUint16(r, afInet6)
		binary.BigEndian.PutUint16(r[2:], 443)
		copy(r[8:], netip.MustParseAddr("fd00:200::1").AsSlice())
		t := ti[i*TCPInfoLen:]
		ne.PutUint32(t[68:], 20000) // rtt
		ne.PutUint64(t[120:], uint64(1000*(i+1)))
	}
	return hdr, sf, ti
}

func TestDecodeFullInfo(t *testing.T) {
	st, err := DecodeFullInfo(fullInfo(2))
	if err != nil {
		t.Fatal(err)
	}
	if st.NumSubflow != 2 || len(st.Subflows) != 2 || st.Info.Token != 0xdeadbeef || st.Info.BytesSent != 12345 || st.Info.SubflowsTotal != 2 {
		t.Fatalf("decoded %+v", st)
	}
	sf := st.Subflows[1]
	if sf.ID != 2 || sf.Local != netip.MustParseAddrPort("198.18.1.2:5000") || sf.Remote != netip.MustParseAddrPort("[fd00:200::1]:443") ||
		sf.TCP.RTT != 20000 || sf.TCP.BytesAcked != 2000 {
		t.Fatalf("subflow %+v", sf)
	}
	hdr, sf2, ti := fullInfo(2)
	if _, err := DecodeFullInfo(hdr, sf2[:10], ti); err == nil {
		t.Fatal("short subflow buffer accepted")
	}
}

func FuzzDecodeFullInfo(f *testing.F) {
	hdr, sf, ti := fullInfo(1)
	f.Add(hdr, sf, ti)
	f.Add(hdr[:50], sf[:5], ti[:5])
	f.Fuzz(func(t *testing.T, hdr, sf, ti []byte) {
		st, err := DecodeFullInfo(hdr, sf, ti)
		if err == nil && len(st.Subflows) > len(sf) {
			t.Fatalf("%d subflows from %d bytes", len(st.Subflows), len(sf))
		}
		_, _ = DecodeMPTCPInfo(hdr)
		_ = DecodeTCPInfo(ti)
	})
}

// TestMPTCPPathStates: a subflow in its second RTO with 3 segments
// unacked becomes a path in timeout, inactive, with its in-flight bytes.
func TestMPTCPPathStates(t *testing.T) {
	m := MPTCPState{Subflows: []Subflow{
		{Path: "wlan0", TCP: TCPInfo{State: 1, Retransmits: 2, RTO: 800_000, RTT: 210_000, Unacked: 3, SndMSS: 1400, BytesSent: 9000, BytesReceived: 7000}},
		{Path: "wwan0", Backup: true, TCP: TCPInfo{State: 1, RTO: 240_000, RTT: 40_000}},
	}}
	var _ PathStater = &m
	ps := m.PathStates()
	w, c := ps[0], ps[1]
	if w.Path != "wlan0" || w.Active || w.RTOs != 2 || w.RTO != 800*time.Millisecond || w.SRTT != 210*time.Millisecond ||
		w.InFlight != 4200 || w.Sent != 9000 || w.Received != 7000 || w.Backup {
		t.Fatalf("wlan0 %+v", w)
	}
	if !c.Backup || !c.Active || c.SRTT != 40*time.Millisecond {
		t.Fatalf("wwan0 %+v", c)
	}
}

// diagMsg is a sock_diag answer: struct inet_diag_msg, then attrs with
// INET_DIAG_ULP_INFO nesting INET_ULP_INFO_NAME and _MPTCP with flags.
func diagMsg(flags uint32) []byte {
	attr := func(t uint16, v []byte) []byte {
		b := make([]byte, 4, 4+len(v)+3)
		binary.NativeEndian.PutUint16(b, uint16(4+len(v)))
		binary.NativeEndian.PutUint16(b[2:], t)
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	f := make([]byte, 4)
	binary.NativeEndian.PutUint32(f, flags)
	mp := append(attr(1, make([]byte, 4)), attr(mptcpSubflowAttrFlag, f)...)
	ulp := append(attr(1, []byte("mptcp\x00")), attr(inetULPInfoMPTCP|0x8000, mp)...)
	msg := make([]byte, inetDiagMsgLen)
	msg = append(msg, attr(2, make([]byte, 8))...) // INET_DIAG_INFO first
	return append(msg, attr(inetDiagULPInfo|0x8000, ulp)...)
}

func TestDecodeSubflowFlags(t *testing.T) {
	f, err := DecodeSubflowFlags(diagMsg(SubflowBackupLocal | 0x40))
	if err != nil || f != SubflowBackupLocal|0x40 {
		t.Fatalf("%#x %v", f, err)
	}
	m := diagMsg(1)
	for _, bad := range [][]byte{nil, m[:inetDiagMsgLen], m[:len(m)-6], make([]byte, inetDiagMsgLen+8)} {
		if _, err := DecodeSubflowFlags(bad); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
}

func FuzzDecodeSubflowFlags(f *testing.F) {
	f.Add(diagMsg(0x31))
	f.Add(diagMsg(0)[:80])
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = DecodeSubflowFlags(b) })
}
