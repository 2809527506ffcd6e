package mpquic

// payloadBuf is the scratch a packet's frames are written to before
// buildDatagram copies them behind the header: one per space kind, since
// a datagram holds at most one packet of each, reused rather than
// allocated per packet (3% of the CPU of an iperf download).
func (c *Conn) payloadBuf(si, avail int) []byte {
	if cap(c.payloads[si]) < avail {
		c.payloads[si] = make([]byte, 0, max(avail, maxDatagramSize))
	}
	return c.payloads[si][:0]
}
