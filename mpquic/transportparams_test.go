package mpquic

import (
	"errors"
	"net"
	"testing"
)

// A peer with a zero-length connection ID that offers multipath: the
// draft (§"Handshake Negotiation and Transport Parameter") makes it a
// PROTOCOL_VIOLATION when we offer multipath too; plain QUIC otherwise.
func TestMultipathZeroLengthCID(t *testing.T) {
	stls, _ := testTLS(t)
	for _, c := range []struct {
		name    string
		conf    Config
		wantErr bool
	}{
		{"multipath offered", Config{}, true},
		{"multipath disabled here", Config{DisableMultipath: true}, false},
	} {
		conf, err := c.conf.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		conn := newConn(false, discardConn{}, &net.UDPAddr{}, conf, stls)
		conn.p0().dcid = []byte{} // the client's zero-length source ID
		maxPath := uint32(3)
		p := DefaultTransportParameters()
		p.InitialSCID, p.InitialMaxPathID = []byte{}, &maxPath
		err = conn.setPeerParams(p.Append(nil))
		if !c.wantErr {
			if err != nil || conn.multipath {
				t.Errorf("%s: %v, multipath %v; want plain QUIC", c.name, err, conn.multipath)
			}
			continue
		}
		var te *TransportError
		if !errors.As(err, &te) || te.Code != ProtocolViolation || te.FrameType != 0 ||
			te.Reason != "initial_max_path_id received in a packet with a zero-length connection ID" {
			t.Errorf("%s: %v; want PROTOCOL_VIOLATION naming initial_max_path_id and the zero-length connection ID", c.name, err)
		}
	}
}
