package transport

import (
	"context"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/nw"
)

// MPTCP on macOS: an nw_connection with a multipath service (probe/nw)
// under the same Go TLS as over Linux's kernel MPTCP.

var (
	// useNetworkFramework: the mptcp transport dials through
	// Network.framework (macOS has no MPTCP sockets).
	useNetworkFramework = runtime.GOOS == "darwin"
	// networkFramework is the framework's API (tests give nwfake).
	networkFramework = nw.System
)

// keyNetworkFramework is the sample key of an MPTCP connection on macOS.
const keyNetworkFramework = "nw_path"

// reportWait bounds the wait for the establishment report.
const reportWait = time.Second

func dialNetworkFramework(ctx context.Context, o Options, addr netip.AddrPort) (*nw.Conn, *MPTCPStatus, error) {
	if err := probe.CheckTarget(ctx, o.Primary(), addr.Addr()); err != nil {
		return nil, nil, err
	}
	api, err := networkFramework()
	if err != nil {
		return nil, nil, err
	}
	svc := o.MPTCPService
	if svc == nw.ServiceDisabled {
		svc = nw.DefaultService
	}
	cfg := nw.Config{Service: svc, Interface: o.Primary().Name, Prohibit: prohibitedTypes(o.Paths)}
	c, err := nw.Dial(ctx, api, addr.Addr().Unmap().String(), strconv.Itoa(int(addr.Port())), cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, &MPTCPStatus{Service: svc.String()}, nil
}

// establishment adds the framework's establishment report, once the
// setup time is taken (asking costs a round on the framework's queue).
func establishment(ctx context.Context, c *nw.Conn, st *MPTCPStatus) {
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	st.Establishment = c.EstablishmentReport(ctx)
}

// interfaceTypes maps a path's kind to Network.framework's type.
var interfaceTypes = map[probe.Kind]nw.InterfaceType{
	probe.KindWiFi: nw.InterfaceWiFi, probe.KindCellular: nw.InterfaceCellular,
	probe.KindEthernet: nw.InterfaceWired, probe.KindLoopback: nw.InterfaceLoopback,
}

// prohibitedTypes are the interface types none of the selected paths has:
// the framework may open subflows on any interface it likes, so what the
// selection leaves out is prohibited. A path whose kind is not known
// prohibits nothing (it could be of any type).
func prohibitedTypes(paths []PathRole) []nw.InterfaceType {
	have := map[nw.InterfaceType]bool{}
	for _, p := range paths {
		t, ok := interfaceTypes[p.Kind]
		if !ok {
			return nil
		}
		have[t] = true
	}
	var out []nw.InterfaceType
	for _, t := range []nw.InterfaceType{nw.InterfaceWiFi, nw.InterfaceCellular, nw.InterfaceWired, nw.InterfaceOther} {
		if !have[t] {
			out = append(out, t)
		}
	}
	return out
}

// Unavailable lists what an MPTCP sample on macOS cannot give:
// Network.framework exposes no subflows, no tcp_info and no
// retransmission count.
var Unavailable = []string{"subflows", "tcp_info", "retransmissions", "bytes_on_wire"}

// NWInterface is one interface of a connection's current path.
type NWInterface struct {
	nw.Interface
	// Path is the selected path of that name ("" when none is).
	Path string `json:"path,omitempty"`
}

// NetworkFrameworkState is a sample of an MPTCP connection on macOS: the
// connection's current path as Network.framework reports it, and the
// stream bytes the adapter counted. What the framework does not give is
// named in Unavailable, never written as zero.
type NetworkFrameworkState struct {
	State      string         `json:"state"`
	Status     nw.PathStatus  `json:"status"`
	Interfaces []NWInterface  `json:"interfaces"`
	Local      netip.AddrPort `json:"local"`
	Remote     netip.AddrPort `json:"remote"`
	// StreamSent and StreamReceived are bytes of the stream (TLS records)
	// the framework took and delivered, not bytes on the wire.
	StreamSent     uint64   `json:"stream_bytes_sent"`
	StreamReceived uint64   `json:"stream_bytes_received"`
	Unavailable    []string `json:"unavailable"`
}

// Retransmissions: unknown on macOS (RetransmissionsUnknown says so).
func (s *NetworkFrameworkState) Retransmissions() uint64 { return 0 }

// RetransmissionsUnknown: the framework gives no count.
func (s *NetworkFrameworkState) RetransmissionsUnknown() bool { return true }

// Bytes of the stream.
func (s *NetworkFrameworkState) Bytes() (sent, received uint64) {
	return s.StreamSent, s.StreamReceived
}

func sampleNetworkFramework(c *nw.Conn, paths []PathRole) State {
	pi, err := c.Path()
	if err != nil {
		return errState("current path: " + err.Error())
	}
	st := &NetworkFrameworkState{State: c.State().String(), Status: pi.Status, Interfaces: make([]NWInterface, 0, len(pi.Interfaces)),
		Local: pi.Local, Remote: pi.Remote, Unavailable: Unavailable}
	st.StreamSent, st.StreamReceived = c.Bytes()
	for _, i := range pi.Interfaces {
		ni := NWInterface{Interface: i}
		for _, p := range paths {
			if p.Name == i.Name {
				ni.Path = p.Name
			}
		}
		st.Interfaces = append(st.Interfaces, ni)
	}
	return State{Key: keyNetworkFramework, Data: st}
}
