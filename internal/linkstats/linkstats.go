// Package linkstats reads network interfaces' packet and drop counters
// (the kernel's rtnl_link_stats64) in the calling thread's network
// namespace. The survey's health monitor watches its paths' interfaces
// with it (a probe dropped by a full transmit queue never leaves the host,
// and is no loss of the network), and the lab reports its TUN devices' drops as its own loss.
package linkstats

import "errors"

// Counters of one interface, cumulative since it was created.
type Counters struct {
	RxPackets, TxPackets uint64
	// Bytes at the interface (the agent's data budget meter).
	RxBytes, TxBytes     uint64
	RxDropped, TxDropped uint64
	// Receive-ring overflows: the driver had no room for an arriving
	// frame (rx_over_errors, rx_fifo_errors, rx_missed_errors).
	RxOverErrors, RxFifoErrors, RxMissedErrors uint64
}

// QueueDrops is what the interface's own queues dropped: packets handed
// to it for transmission (the TUN's or the driver's ring full) and frames
// its receive ring had no room for. RxDropped is left out: on real NICs it
// also counts frames of protocols nobody handles (LLDP, ...), which cost
// no reply.
func (c Counters) QueueDrops() uint64 {
	return c.TxDropped + c.RxOverErrors + c.RxFifoErrors + c.RxMissedErrors
}

// ErrUnsupported: no interface counters on this system.
var ErrUnsupported = errors.New("interface counters unsupported on this system")

// Read fills dst[i] with the counters of interface names[i]; found[i]
// (when found is not nil) says whether it exists.
func Read(names []string, dst []Counters, found []bool) error {
	return read(names, dst, found)
}
