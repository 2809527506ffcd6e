package rawprobe

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/icmp"
)

// TestAppendSYN: gopacket decodes the hand-built SYN to the same fields,
// and the checksum over pseudo-header and segment verifies (sums to
// 0xffff), for IPv4 and IPv6; building allocates nothing.
func TestAppendSYN(t *testing.T) {
	for _, c := range [][2]string{{"198.18.0.2", "198.19.1.7"}, {"fd00::2", "fd00:1::99"}} {
		src, dst := netip.MustParseAddr(c[0]), netip.MustParseAddr(c[1])
		b := appendSYN(nil, src, dst, 61234, 443, 0xdeadbeef)
		require.Len(t, b, synLen)
		var tcp layers.TCP
		require.NoError(t, tcp.DecodeFromBytes(b, gopacket.NilDecodeFeedback))
		assert.Equal(t, layers.TCPPort(61234), tcp.SrcPort)
		assert.Equal(t, layers.TCPPort(443), tcp.DstPort)
		assert.Equal(t, uint32(0xdeadbeef), tcp.Seq)
		assert.True(t, tcp.SYN)
		assert.False(t, tcp.ACK || tcp.RST || tcp.FIN)
		require.Len(t, tcp.Options, 1)
		assert.Equal(t, layers.TCPOptionKind(layers.TCPOptionKindMSS), tcp.Options[0].OptionType)
		assert.Equal(t, []byte{0x05, 0xb4}, tcp.Options[0].OptionData)
		assert.Equal(t, uint16(0xffff), fold(pseudoHeaderSum(src, dst, 6, len(b))+sum16(b)), "checksum of %s", c)
		h, ok := parseTCP(b)
		require.True(t, ok)
		assert.Equal(t, tcpHeader{sport: 61234, dport: 443, ack: 0, flags: tcpSYN}, h)
		var buf [64]byte
		assert.Zero(t, testing.AllocsPerRun(100, func() { appendSYN(buf[:0], src, dst, 1, 2, 3) }))
	}
}

// TestAppendEcho: x/net/icmp parses the hand-built echo request (and
// verifies nothing we got wrong: the ICMPv4 checksum is checked by sum).
func TestAppendEcho(t *testing.T) {
	b := appendEcho(nil, false, 0x1234, 7, 0xfeedf00d)
	m, err := icmp.ParseMessage(1, b)
	require.NoError(t, err)
	e := m.Body.(*icmp.Echo)
	assert.Equal(t, 0x1234, e.ID)
	assert.Equal(t, 7, e.Seq)
	assert.Len(t, e.Data, echoDataLen)
	assert.Equal(t, uint16(0xffff), fold(sum16(b)))
	b6 := appendEcho(nil, true, 0x1234, 8, 9)
	assert.Equal(t, byte(icmp6EchoRequest), b6[0])
	// A reply is the request with the reply type (and checksum).
	b[0] = icmp4EchoReply
	id, seq, token, ok := parseEchoReply(b, false)
	assert.True(t, ok)
	assert.Equal(t, [2]uint16{0x1234, 7}, [2]uint16{id, seq})
	assert.Equal(t, uint32(0xfeedf00d), token, "the data echoed")
	_, _, _, ok = parseEchoReply(b, true)
	assert.False(t, ok, "an ICMPv4 reply on the ICMPv6 socket")
	b6[0] = icmp6EchoReply
	id, seq, token, ok = parseEchoReply(b6, true)
	assert.True(t, ok)
	assert.Equal(t, [3]uint32{0x1234, 8, 9}, [3]uint32{uint32(id), uint32(seq), token})
	var buf [64]byte
	assert.Zero(t, testing.AllocsPerRun(100, func() { appendEcho(buf[:0], false, 1, 2, 3) }))
}

// FuzzParseProbeReplies: the readers of bytes from the network never
// panic, and agree with gopacket on every TCP header it accepts.
func FuzzParseProbeReplies(f *testing.F) {
	src, dst := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.19.1.7")
	f.Add(appendSYN(nil, src, dst, 1, 2, 3))
	f.Add(appendEcho(nil, false, 1, 2, 3))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseEchoReply(b, false)
		parseEchoReply(b, true)
		h, ok := parseTCP(b)
		var tcp layers.TCP
		if tcp.DecodeFromBytes(b, gopacket.NilDecodeFeedback) == nil && ok {
			if h.sport != uint16(tcp.SrcPort) || h.dport != uint16(tcp.DstPort) || h.ack != tcp.Ack ||
				(h.flags&tcpSYN != 0) != tcp.SYN || (h.flags&tcpACK != 0) != tcp.ACK || (h.flags&tcpRST != 0) != tcp.RST {
				t.Fatalf("parseTCP %+v, gopacket %+v", h, tcp)
			}
		}
	})
}
