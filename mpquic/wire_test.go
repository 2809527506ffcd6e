package mpquic

import (
	"bytes"
	"errors"
	"testing"
)

func TestSplitCoalescedDatagram(t *testing.T) {
	client, _ := InitialKeys(rfcDCID)
	dcid, scid := rfcDCID, []byte{9, 9, 9, 9}
	var dgram []byte
	for i, pt := range []PacketType{PacketInitial, PacketHandshake} {
		payload := bytes.Repeat([]byte{0x01}, 30+i)
		hdr, err := AppendLongHeader(nil, LongHeader{Type: pt, DCID: dcid, SCID: scid, Token: []byte("tok")}, uint64(i), 2, len(payload))
		if err != nil {
			t.Fatal(err)
		}
		dgram, err = client.Protect(dgram, hdr, payload, uint64(i), 0)
		if err != nil {
			t.Fatal(err)
		}
	}
	hdr, _ := AppendShortHeader(nil, ShortHeader{DCID: dcid}, 5, 1)
	dgram, _ = client.Protect(dgram, hdr, bytes.Repeat([]byte{0x01}, 10), 5, 0)

	pkts, err := SplitDatagram(dgram, len(dcid))
	if err != nil {
		t.Fatal(err)
	}
	want := []PacketType{PacketInitial, PacketHandshake, Packet1RTT}
	if len(pkts) != len(want) {
		t.Fatalf("%d packets, want 3", len(pkts))
	}
	total := 0
	for i, p := range pkts {
		total += len(p.Data)
		if p.Header.Type != want[i] || !bytes.Equal(p.Header.DCID, dcid) {
			t.Fatalf("packet %d: %+v", i, p.Header)
		}
		if i == 0 && string(p.Header.Token) != "tok" {
			t.Fatalf("token %q", p.Header.Token)
		}
		o, err := client.Unprotect(p.Data, p.Header.PNOffset, -1, 0)
		if err != nil || o.PN != []uint64{0, 1, 5}[i] {
			t.Fatalf("packet %d: pn %d err %v", i, o.PN, err)
		}
	}
	if total != len(dgram) {
		t.Fatalf("split covers %d of %d bytes", total, len(dgram))
	}

	// A broken second packet leaves the first one usable.
	bad := append(bytes.Clone(dgram[:len(pkts[0].Data)]), 0xc0, 0, 0)
	got, err := SplitDatagram(bad, len(dcid))
	if !errors.Is(err, ErrInvalidPacket) || len(got) != 1 {
		t.Fatalf("split of a truncated tail: %d packets, %v", len(got), err)
	}
}
