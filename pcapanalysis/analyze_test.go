package pcapanalysis

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	keyC = uint64(0x1111222233334444)
	keyS = uint64(0x5555666677778888)
)

// scenario writes a capture whose every figure is known: an MPTCP
// connection with an initial subflow, a join that carries data and a
// reinjection, a backup join that carries nothing; a plain TCP connection
// with a retransmission; an IPv6 TCP connection; two QUIC connections, one
// seen on two paths.
func scenario(tb testing.TB) []byte {
	s := newSynth(tb)
	C1, C2, C3, S := "198.18.0.1:40000", "198.18.2.1:40001", "198.18.3.1:40002", "198.18.1.1:443"
	ic, is := IDSN(keyC), IDSN(keyS)
	ms := time.Millisecond
	// Initial subflow, 20 ms round trip.
	s.tcp(seg{src: C1, dst: S, syn: true, seq: 1000, opts: [][]byte{capSYN()}, tsval: 100})
	s.after(20 * ms).tcp(seg{src: S, dst: C1, syn: true, ack: true, seq: 5000, ackn: 1001, opts: [][]byte{capSYNACK(keyS)}, tsval: 900, tsecr: 100})
	s.after(100 * time.Microsecond).tcp(seg{src: C1, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{capACK(keyC, keyS)}, tsval: 101, tsecr: 900})
	// Up: 3000 bytes in one mapping over three segments (8-byte DSN, none, 4-byte DSN with checksum).
	s.after(ms).tcp(seg{src: C1, dst: S, ack: true, seq: 1001, ackn: 5001, payload: 1000, opts: [][]byte{dss8(1, ic+1, 1, 3000)}, tsval: 102, tsecr: 900})
	s.tcp(seg{src: C1, dst: S, ack: true, seq: 2001, ackn: 5001, payload: 1000, tsval: 102, tsecr: 900})
	s.tcp(seg{src: C1, dst: S, ack: true, seq: 3001, ackn: 5001, payload: 1000, opts: [][]byte{dss4(uint32(ic+1), 1, 3000)}, tsval: 102, tsecr: 900})
	// Down: 10 x 1000 bytes, each acknowledged 20 ms later echoing its TSval.
	for i := uint32(0); i < 10; i++ {
		s.after(ms).tcp(seg{src: S, dst: C1, ack: true, seq: 5001 + i*1000, ackn: 4001, payload: 1000,
			opts: [][]byte{dss8(uint32(ic+3001), is+1+uint64(i)*1000, 1+i*1000, 1000)}, tsval: 1000 + i, tsecr: 102})
		s.after(20 * ms).tcp(seg{src: C1, dst: S, ack: true, seq: 4001, ackn: 5001 + (i+1)*1000, tsval: 200 + i, tsecr: 1000 + i})
	}
	// The last one again on the same subflow: a retransmission, not new data.
	s.after(ms).tcp(seg{src: S, dst: C1, ack: true, seq: 5001 + 9000, ackn: 4001, payload: 1000,
		opts: [][]byte{dss8(uint32(ic+3001), is+1+9000, 1+9000, 1000)}, tsval: 1010, tsecr: 209})

	// Join subflow, 40 ms round trip, carrying 5000 new bytes down and
	// reinjecting 2000 bytes first sent on the initial subflow.
	s.after(ms).tcp(seg{src: C2, dst: S, syn: true, seq: 7000, opts: [][]byte{joinSYN(Token(keyS), false)}, tsval: 300})
	s.after(40 * ms).tcp(seg{src: S, dst: C2, syn: true, ack: true, seq: 9000, ackn: 7001, opts: [][]byte{joinSYNACK()}, tsval: 400, tsecr: 300})
	s.after(50 * time.Microsecond).tcp(seg{src: C2, dst: S, ack: true, seq: 7001, ackn: 9001, opts: [][]byte{joinACK()}, tsval: 301, tsecr: 400})
	for i := uint32(0); i < 5; i++ {
		s.after(ms).tcp(seg{src: S, dst: C2, ack: true, seq: 9001 + i*1000, ackn: 7001, payload: 1000,
			opts: [][]byte{dss8(uint32(ic+3001), is+1+10000+uint64(i)*1000, 1+i*1000, 1000)}, tsval: 401, tsecr: 301})
	}
	for i := uint32(0); i < 2; i++ {
		s.after(ms).tcp(seg{src: S, dst: C2, ack: true, seq: 14001 + i*1000, ackn: 7001, payload: 1000,
			opts: [][]byte{dss8(uint32(ic+3001), is+1+8000+uint64(i)*1000, 5001+i*1000, 1000)}, tsval: 402, tsecr: 301})
	}
	// Backup join: established, carries nothing.
	s.after(ms).tcp(seg{src: C3, dst: S, syn: true, seq: 100, opts: [][]byte{joinSYN(Token(keyS), true)}, tsval: 500})
	s.after(30 * ms).tcp(seg{src: S, dst: C3, syn: true, ack: true, seq: 200, ackn: 101, opts: [][]byte{joinSYNACK()}, tsval: 600, tsecr: 500})
	s.tcp(seg{src: C3, dst: S, ack: true, seq: 101, ackn: 201, opts: [][]byte{joinACK()}, tsval: 501, tsecr: 600})
	// Close every subflow.
	for _, x := range []struct {
		c      string
		cs, ss uint32
	}{{C1, 4001, 15001}, {C2, 7001, 16001}, {C3, 101, 201}} {
		s.after(ms).tcp(seg{src: x.c, dst: S, ack: true, fin: true, seq: x.cs, ackn: x.ss, tsval: 700, tsecr: 1})
		s.tcp(seg{src: S, dst: x.c, ack: true, fin: true, seq: x.ss, ackn: x.cs + 1, tsval: 701, tsecr: 700})
	}

	// Plain TCP, 1234 bytes up (sent twice), 4321 down.
	P, W := "198.18.0.1:40100", "198.18.1.1:80"
	s.after(ms).tcp(seg{src: P, dst: W, syn: true, seq: 1, noTS: true})
	s.after(10 * ms).tcp(seg{src: W, dst: P, syn: true, ack: true, seq: 100, ackn: 2, noTS: true})
	s.tcp(seg{src: P, dst: W, ack: true, seq: 2, ackn: 101, noTS: true})
	s.tcp(seg{src: P, dst: W, ack: true, seq: 2, ackn: 101, payload: 1234, noTS: true})
	s.after(ms).tcp(seg{src: P, dst: W, ack: true, seq: 2, ackn: 101, payload: 1234, noTS: true})
	s.tcp(seg{src: W, dst: P, ack: true, seq: 101, ackn: 1236, payload: 4321, noTS: true})
	s.tcp(seg{src: P, dst: W, ack: true, fin: true, seq: 1236, ackn: 4422, noTS: true})
	s.tcp(seg{src: W, dst: P, ack: true, fin: true, seq: 4422, ackn: 1237, noTS: true})

	// IPv6 TCP, 200 bytes up, no handshake in the capture.
	s.after(ms).tcp(seg{src: "[fd00::1]:40200", dst: "[fd00::2]:80", ack: true, seq: 50, ackn: 60, payload: 200, noTS: true})

	// QUIC: connection A on two paths, connection B, and DNS noise.
	initial := func(d, sc []byte, n int) []byte {
		b := cat([]byte{0xc3}, be32(1), []byte{byte(len(d))}, d, []byte{byte(len(sc))}, sc)
		return append(b, make([]byte, n-len(b))...)
	}
	short := func(d []byte, n int) []byte { b := cat([]byte{0x41}, d); return append(b, make([]byte, n-len(b))...) }
	odcid, ccid, scid := []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{0xa1, 0xa2, 0xa3, 0xa4}, []byte{0xb1, 0xb2, 0xb3, 0xb4, 0xb5}
	Q1, Q2, QS := "198.18.0.1:50000", "198.18.2.1:50001", "198.18.1.1:443"
	s.after(ms).udp(Q1, QS, initial(odcid, ccid, 1200))
	s.after(ms).udp(QS, Q1, initial(ccid, scid, 300))
	s.udp(Q1, QS, short(scid, 100))
	s.udp(QS, Q1, short(ccid, 100))
	s.udp(Q2, QS, short(scid, 100)) // migrated path, same CID
	s.udp(QS, Q2, short(ccid, 100))
	s.udp(Q2, QS, short([]byte{9, 9, 9, 9, 9}, 100)) // unknown CID on a known path
	s.udp("198.18.0.1:50002", QS, initial([]byte{8, 7, 6, 5, 4, 3, 2, 1}, nil, 1250))
	// Two seconds later (the closed flows are freed) DNS noise, and a late
	// ACK of the plain TCP connection: a stray, not a new connection.
	s.after(2*time.Second).udp("198.18.0.1:53000", "198.18.1.1:53", make([]byte, 40))
	s.tcp(seg{src: P, dst: W, ack: true, seq: 1237, ackn: 4423, noTS: true})
	return s.buf.Bytes()
}

func TestScenarioExact(t *testing.T) {
	r, err := Analyze(context.Background(), bytes.NewReader(scenario(t)), Options{})
	require.NoError(t, err)
	require.Len(t, r.Connections, 3)
	assert.Equal(t, int64(1), r.Stray)
	mp := r.Connections[0]
	assert.Equal(t, "mptcp", mp.Kind)
	assert.True(t, mp.Handshake)
	assert.Equal(t, "198.18.0.1:40000", mp.Client)
	assert.Equal(t, [2]int64{3000, 15000}, mp.Data)
	assert.Equal(t, [2]int64{0, 0}, mp.Missing)
	assert.Equal(t, [2]int64{0, 2}, mp.Reinjections)
	assert.Equal(t, [2]int64{0, 2000}, mp.ReinjectedBytes)
	assert.Equal(t, 2, mp.PathsWithData)
	assert.False(t, mp.SinglePath)
	assert.Equal(t, 0, mp.FirstDataSubflow)
	assert.Equal(t, 0, mp.FirstDataDir)
	require.Len(t, mp.Subflows, 3)
	s0, s1, s2 := mp.Subflows[0], mp.Subflows[1], mp.Subflows[2]
	assert.Equal(t, DirBytes{Packets: 16, Wire: 56 + 72 + (72 + 1000) + (52 + 1000) + (68 + 1000) + 10*52 + 52, Payload: 3000, Data: 3000}, s0.Dir[0])
	assert.Equal(t, DirBytes{Packets: 13, Wire: 64 + 11*(72+1000) + 52, Payload: 11000, Data: 10000, Retransmitted: 1000}, s0.Dir[1])
	assert.Equal(t, DirBytes{Packets: 9, Wire: 68 + 7*(72+1000) + 52, Payload: 7000, Data: 5000, Reinjected: 2000}, s1.Dir[1])
	assert.Equal(t, int64(0), s2.Dir[0].Data+s2.Dir[1].Data)
	assert.True(t, s2.Backup)
	assert.False(t, s1.Backup)
	assert.True(t, s1.Join)
	assert.False(t, s1.JoinVerified, "the scenario's SYN-ACK HMAC is made up")
	assert.InDelta(t, 20.1, s0.HandshakeRTT, 1e-6)
	assert.InDelta(t, 40.05, s1.HandshakeRTT, 1e-6)
	// The SYN-ACK's TSval echoed 0.1 ms later, then ten data segments echoed after 20 ms.
	assert.Equal(t, 11, s0.TSRTT[1].N)
	assert.InDelta(t, 0.1, s0.TSRTT[1].Min, 1e-6)
	assert.InDelta(t, (10*20+0.1)/11, s0.TSRTT[1].Mean, 1e-6)
	assert.InDelta(t, 20, s0.TSRTT[1].Max, 1e-6)
	for _, s := range mp.Subflows {
		assert.Equal(t, "fin", s.Closed)
	}
	assert.Equal(t, []AddrBytes{{"198.18.0.1", [2]int64{3000, 10000}}, {"198.18.2.1", [2]int64{0, 5000}}, {"198.18.3.1", [2]int64{0, 0}}}, mp.PerAddress)
	assert.Equal(t, Token(keyC), parseHex32(t, mp.TokenC))
	assert.Equal(t, Token(keyS), parseHex32(t, mp.TokenS))

	tc := r.Connections[1]
	assert.Equal(t, "tcp", tc.Kind)
	assert.Equal(t, [2]int64{1234, 4321}, tc.Data)
	assert.Equal(t, int64(1234), tc.Subflows[0].Dir[0].Retransmitted)
	assert.True(t, tc.SinglePath)
	assert.InDelta(t, 10, tc.Subflows[0].HandshakeRTT, 1e-6)

	v6 := r.Connections[2]
	assert.Equal(t, "[fd00::1]:40200", v6.Client)
	assert.False(t, v6.Handshake)
	assert.Equal(t, [2]int64{200, 0}, v6.Data)

	require.Len(t, r.QUIC, 2)
	assert.Len(t, r.QUIC[0].Paths, 2)
	assert.Equal(t, int64(7), r.QUIC[0].Packets)
	assert.Len(t, r.QUIC[1].Paths, 1)
	assert.Equal(t, [2]int{1, 2}, mp.PathsWithDataDir)
	assert.Equal(t, Summary{TCP: 2, MPTCP: 1, MPTCPWithReinject: 1, MPTCPSinglePathDir: [2]int{1, 0}, MPTCPWithDataDir: [2]int{1, 1}, ReinjectedBytes: 2000, QUIC: 2, QUICPaths: 3,
		PerAddress: []AddrBytes{{"198.18.0.1", [2]int64{3000, 10000}}, {"198.18.2.1", [2]int64{0, 5000}}, {"198.18.3.1", [2]int64{0, 0}}}}, r.Summary)
}

func parseHex32(t *testing.T, s string) uint32 {
	var v uint32
	for _, c := range s {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint32(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint32(c-'a') + 10
		default:
			t.Fatalf("bad hex %q", s)
		}
	}
	return v
}

// packetsOf returns the records of a pcap as (capture info, data) pairs.
func packetsOf(t *testing.T, capture []byte) (layers.LinkType, []gopacket.CaptureInfo, [][]byte) {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(capture))
	require.NoError(t, err)
	var cis []gopacket.CaptureInfo
	var data [][]byte
	for {
		d, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return r.LinkType(), cis, data
		}
		require.NoError(t, err)
		cis, data = append(cis, ci), append(data, d)
	}
}

// TestTruncatedLastPacket: a capture cut inside its last packet (pcap,
// pcapng, gzip'd pcap) is analysed up to the cut exactly as the capture
// of the packets before it is, with a warning naming the packet; Strict
// keeps it an error.
func TestTruncatedLastPacket(t *testing.T) {
	lt, cis, data := packetsOf(t, scenario(t))
	n := len(cis)
	require.Greater(t, n, 50)
	pcapOf := func(k int) []byte {
		var b bytes.Buffer
		w := pcapgo.NewWriter(&b)
		require.NoError(t, w.WriteFileHeader(65535, lt))
		for i := 0; i < k; i++ {
			require.NoError(t, w.WritePacket(cis[i], data[i]))
		}
		return b.Bytes()
	}
	ngOf := func(k int) []byte {
		var b bytes.Buffer
		w, err := pcapgo.NewNgWriter(&b, lt)
		require.NoError(t, err)
		for i := 0; i < k; i++ {
			ci := cis[i]
			ci.InterfaceIndex = 0
			require.NoError(t, w.WritePacket(ci, data[i]))
		}
		require.NoError(t, w.Flush())
		return b.Bytes()
	}
	gzOf := func(b []byte) []byte {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, err := zw.Write(b)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		return z.Bytes()
	}
	whole, ng := pcapOf(n), ngOf(n)
	for _, c := range []struct {
		name        string
		cut, before []byte
	}{
		{"pcap", whole[:len(whole)-10], pcapOf(n - 1)},
		{"pcap-record-header", whole[:len(whole)-len(data[n-1])-8], pcapOf(n - 1)},
		{"pcapng", ng[:len(ng)-10], ngOf(n - 1)},
		{"pcap.gz", gzOf(whole[:len(whole)-10]), pcapOf(n - 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := Analyze(context.Background(), bytes.NewReader(c.before), Options{})
			require.NoError(t, err)
			require.Empty(t, want.Warnings)
			got, err := Analyze(context.Background(), bytes.NewReader(c.cut), Options{})
			require.NoError(t, err)
			require.Len(t, got.Warnings, 1)
			assert.Contains(t, got.Warnings[0], fmt.Sprintf("packet %d: capture truncated", n))
			assert.Equal(t, int64(n-1), got.Packets)
			got.Warnings = want.Warnings
			if !assert.ObjectsAreEqual(want, got) {
				t.Errorf("the cut capture's report is not the report of the %d packets before the cut", n-1)
			}

			_, err = Analyze(context.Background(), bytes.NewReader(c.cut), Options{Strict: true})
			var pe *PacketError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), "truncated")
			assert.Equal(t, int64(n), pe.Packet)
		})
	}
}

func TestMalformed(t *testing.T) {
	good := scenario(t)
	var pe *PacketError
	var err error

	_, err = Analyze(context.Background(), bytes.NewReader([]byte("hello world, not a capture")), Options{})
	assert.ErrorIs(t, err, ErrInput)
	assert.Contains(t, err.Error(), "not a pcap")

	// Packet 1's TCP data offset made 4 (16 bytes): malformed, named.
	bad := append([]byte(nil), good...)
	const tcpOff = 24 + 16 + 14 + 20 + 12
	bad[tcpOff] = 0x40
	_, err = Analyze(context.Background(), bytes.NewReader(bad), Options{})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int64(1), pe.Packet)
	assert.Contains(t, err.Error(), "data offset")
	assert.True(t, errors.Is(err, ErrInput))
}

var update = flag.Bool("update", false, "rewrite the golden files")

func TestGolden(t *testing.T) {
	capture := scenario(t)
	if *update {
		// The command's tests read the same capture.
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "scenario.pcap"), capture, 0o644))
	}
	r, err := Analyze(context.Background(), bytes.NewReader(capture), Options{})
	require.NoError(t, err)
	r.File = "scenario.pcap"
	for _, f := range Formats {
		var b bytes.Buffer
		require.NoError(t, Render(&b, f, []*Report{r}))
		golden := filepath.Join("testdata", "scenario."+f)
		if *update {
			require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		assert.Equal(t, string(want), b.String(), "%s differs; -update rewrites it", golden)
	}
}

// TestMissingData: a segment the capture did not show (of three in one
// mapping) is data sequence space below the highest byte seen that no
// segment carried.
func TestMissingData(t *testing.T) {
	s := newSynth(t)
	C, S := "198.18.0.1:40000", "198.18.1.1:443"
	ic := IDSN(keyC)
	s.tcp(seg{src: C, dst: S, syn: true, seq: 1000, opts: [][]byte{capSYN()}})
	s.tcp(seg{src: S, dst: C, syn: true, ack: true, seq: 5000, ackn: 1001, opts: [][]byte{capSYNACK(keyS)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{capACK(keyC, keyS)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, payload: 1000, opts: [][]byte{dss8(1, ic+1, 1, 3000)}})
	// seq 2001..3000 not captured
	s.tcp(seg{src: C, dst: S, ack: true, seq: 3001, ackn: 5001, payload: 1000})
	r, err := Analyze(context.Background(), bytes.NewReader(s.buf.Bytes()), Options{})
	require.NoError(t, err)
	require.Len(t, r.Connections, 1)
	assert.Equal(t, [2]int64{2000, 0}, r.Connections[0].Data)
	assert.Equal(t, [2]int64{1000, 0}, r.Connections[0].Missing)
}

// TestGzipPcap: a gzip'd pcap reads as the pcap does.
func TestGzipPcap(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err := zw.Write(scenario(t))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	r, err := Analyze(context.Background(), &z, Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(65), r.Packets)
	assert.Equal(t, 1, r.Summary.MPTCP)
}

// TestJoinFromServer: a subflow the server opens (its MP_JOIN carries the
// client's token) is counted in the connection's directions: what the
// server sends on it is down, and its client-side address is the
// connection client's.
func TestJoinFromServer(t *testing.T) {
	s := newSynth(t)
	C, C2, S, S2 := "198.18.0.1:40000", "198.18.2.1:40001", "198.18.1.1:443", "198.18.1.1:50000"
	is := IDSN(keyS)
	s.tcp(seg{src: C, dst: S, syn: true, seq: 1000, opts: [][]byte{capSYN()}})
	s.tcp(seg{src: S, dst: C, syn: true, ack: true, seq: 5000, ackn: 1001, opts: [][]byte{capSYNACK(keyS)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{capACK(keyC, keyS)}})
	s.tcp(seg{src: S2, dst: C2, syn: true, seq: 70, opts: [][]byte{joinSYN(Token(keyC), false)}})
	s.tcp(seg{src: C2, dst: S2, syn: true, ack: true, seq: 90, ackn: 71, opts: [][]byte{joinSYNACK()}})
	s.tcp(seg{src: S2, dst: C2, ack: true, seq: 71, ackn: 91, opts: [][]byte{joinACK()}})
	s.tcp(seg{src: S2, dst: C2, ack: true, seq: 71, ackn: 91, payload: 700, opts: [][]byte{dss8(1, is+1, 1, 700)}})
	s.tcp(seg{src: S, dst: C, ack: true, seq: 5001, ackn: 1001, payload: 300, opts: [][]byte{dss8(1, is+701, 1, 300)}})
	r, err := Analyze(context.Background(), bytes.NewReader(s.buf.Bytes()), Options{})
	require.NoError(t, err)
	require.Len(t, r.Connections, 1)
	c := r.Connections[0]
	require.Len(t, c.Subflows, 2)
	j := c.Subflows[1]
	assert.Equal(t, S2, j.Client, "the join's SYN sender")
	assert.Equal(t, int64(700), j.Dir[1].Data, "down on the server's subflow")
	assert.Equal(t, [2]int64{0, 1000}, c.Data)
	assert.Equal(t, [2]int64{0, 0}, c.Missing)
	assert.Equal(t, 1, c.FirstDataSubflow)
	assert.Equal(t, 1, c.FirstDataDir)
	assert.Equal(t, []AddrBytes{{"198.18.0.1", [2]int64{0, 300}}, {"198.18.2.1", [2]int64{0, 700}}}, c.PerAddress)
}

// TestCoverBounded: a connection whose scheduler switches subflow on every
// segment keeps at most maxIntervals ranges per direction; every byte is
// still counted once, and data resent from the forgotten (merged) part
// counts as retransmitted, not reinjected.
func TestCoverBounded(t *testing.T) {
	a := newAnalyzer(Options{})
	mc := &mpConn{c: &Connection{FirstDataSubflow: -1}}
	fs := [2]*flow{{sub: &Subflow{Index: 0}}, {sub: &Subflow{Index: 1}}}
	const n = 3 * maxIntervals
	for i := uint64(0); i < n; i++ {
		a.cover(mc, fs[i&1], 1, i*100, i*100+100, 0)
		if len(mc.cover[1]) > maxIntervals {
			t.Fatalf("%d ranges after %d segments", len(mc.cover[1]), i+1)
		}
	}
	assert.Equal(t, int64(n*100), fs[0].sub.Dir[1].Data+fs[1].sub.Dir[1].Data)
	a.cover(mc, fs[1], 1, 0, 100, 0) // first sent on subflow 0, long forgotten
	assert.Equal(t, int64(100), fs[1].sub.Dir[1].Retransmitted)
	a.cover(mc, fs[1], 1, (n-2)*100, (n-1)*100, 0) // recent, sent on subflow 0
	assert.Equal(t, int64(100), fs[1].sub.Dir[1].Reinjected)
	assert.Equal(t, int64(1), mc.c.Reinjections[1])
}

// TestLinkTypes: the scenario rewritten with each link-layer header this
// package reads (Linux cooked v1 and v2, raw IP, BSD loopback) analyses
// exactly as over Ethernet.
func TestLinkTypes(t *testing.T) {
	want, err := Analyze(context.Background(), bytes.NewReader(scenario(t)), Options{})
	require.NoError(t, err)
	for _, lt := range []struct {
		name string
		lt   layers.LinkType
		hdr  func(v6 bool) []byte
	}{
		{"sll", layers.LinkTypeLinuxSLL, func(v6 bool) []byte {
			h := make([]byte, 16)
			binary.BigEndian.PutUint16(h[14:], map[bool]uint16{false: 0x0800, true: 0x86dd}[v6])
			return h
		}},
		{"sll2", layers.LinkTypeLinuxSLL2, func(v6 bool) []byte {
			h := make([]byte, 20)
			binary.BigEndian.PutUint16(h[0:], map[bool]uint16{false: 0x0800, true: 0x86dd}[v6])
			binary.BigEndian.PutUint32(h[4:], 3)
			return h
		}},
		{"raw", layers.LinkTypeRaw, func(bool) []byte { return nil }},
		{"null", layers.LinkTypeNull, func(v6 bool) []byte {
			return binary.LittleEndian.AppendUint32(nil, map[bool]uint32{false: 2, true: 30}[v6])
		}},
	} {
		t.Run(lt.name, func(t *testing.T) {
			in, err := pcapgo.NewReader(bytes.NewReader(scenario(t)))
			require.NoError(t, err)
			var out bytes.Buffer
			w := pcapgo.NewWriter(&out)
			require.NoError(t, w.WriteFileHeader(65536, lt.lt))
			for {
				data, ci, err := in.ReadPacketData()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				ip := data[14:]
				b := append(lt.hdr(ip[0]>>4 == 6), ip...)
				ci.CaptureLength, ci.Length = len(b), len(b)
				require.NoError(t, w.WritePacket(ci, b))
			}
			got, err := Analyze(context.Background(), &out, Options{})
			require.NoError(t, err)
			got.LinkTypes = want.LinkTypes
			if lt.name == "sll2" {
				for _, c := range got.Connections {
					for _, s := range c.Subflows {
						assert.Equal(t, "if3", s.Interface)
						s.Interface = ""
					}
				}
			}
			assert.Equal(t, want, got)
		})
	}
}

// TestOfferedNotAgreed: MP_CAPABLE on the SYN only (the server is not
// MPTCP-capable) is a plain TCP connection whose data counts as such.
func TestOfferedNotAgreed(t *testing.T) {
	s := newSynth(t)
	C, S := "198.18.0.1:40000", "198.18.1.1:443"
	s.tcp(seg{src: C, dst: S, syn: true, seq: 1000, opts: [][]byte{capSYN()}})
	s.tcp(seg{src: S, dst: C, syn: true, ack: true, seq: 5000, ackn: 1001})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, payload: 500})
	r, err := Analyze(context.Background(), bytes.NewReader(s.buf.Bytes()), Options{})
	require.NoError(t, err)
	require.Len(t, r.Connections, 1)
	c := r.Connections[0]
	assert.Equal(t, "tcp", c.Kind)
	assert.True(t, c.Fallback)
	assert.Equal(t, [2]int64{500, 0}, c.Data)
	assert.Zero(t, c.Subflows[0].Dir[0].Unmapped)
}

// TestSignals: ADD_ADDR (the echo not counted again), REMOVE_ADDR,
// MP_PRIO, MP_FAIL, MP_TCPRST and MP_FASTCLOSE reach the connection.
func TestSignals(t *testing.T) {
	s := newSynth(t)
	C, S := "198.18.0.1:40000", "198.18.1.1:443"
	s.tcp(seg{src: C, dst: S, syn: true, seq: 1000, opts: [][]byte{capSYN()}})
	s.tcp(seg{src: S, dst: C, syn: true, ack: true, seq: 5000, ackn: 1001, opts: [][]byte{capSYNACK(keyS)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{capACK(keyC, keyS)}})
	s.tcp(seg{src: S, dst: C, ack: true, seq: 5001, ackn: 1001, opts: [][]byte{mpOpt(SubAddAddr, 0, cat([]byte{5}, []byte{198, 18, 9, 1}, be16(8443), be64(1))...)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{mpOpt(SubAddAddr, 1, cat([]byte{5}, []byte{198, 18, 9, 1}, be16(8443))...)}})
	s.tcp(seg{src: S, dst: C, ack: true, seq: 5001, ackn: 1001, opts: [][]byte{mpOpt(SubRemove, 0, 5, 6)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{mpOpt(SubPrio, 1)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{mpOpt(SubFail, 0, cat([]byte{0}, be64(7))...)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{mpOpt(SubTCPRST, 1, 2)}})
	s.tcp(seg{src: C, dst: S, ack: true, seq: 1001, ackn: 5001, opts: [][]byte{mpOpt(SubFastclose, 0, cat([]byte{0}, be64(keyS))...)}})
	r, err := Analyze(context.Background(), bytes.NewReader(s.buf.Bytes()), Options{})
	require.NoError(t, err)
	require.Len(t, r.Connections, 1)
	c := r.Connections[0]
	assert.Equal(t, []string{"id 5 198.18.9.1 port 8443"}, c.AddAddr)
	assert.Equal(t, 2, c.RemoveAddr)
	assert.Equal(t, 1, c.Prio)
	assert.True(t, c.Subflows[0].Backup)
	assert.Equal(t, 1, c.Fail)
	assert.Equal(t, 1, c.TCPRST)
	assert.True(t, c.Fastclose)
	var b bytes.Buffer
	require.NoError(t, Render(&b, "text", []*Report{r}))
	assert.Contains(t, b.String(), "ADD_ADDR id 5 198.18.9.1 port 8443; REMOVE_ADDR 2; MP_PRIO 1; MP_FAIL 1; MP_TCPRST 1; MP_FASTCLOSE")
}
