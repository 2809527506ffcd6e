package linkstats

import (
	"encoding/binary"
	"os"
	"syscall"
)

// rtnl_link_stats64 field indexes (linux/if_link.h).
const (
	statRxPackets = iota
	statTxPackets
	statRxBytes
	statTxBytes
	_ // rx_errors
	_ // tx_errors
	statRxDropped
	statTxDropped
	_ // multicast
	_ // collisions
	_ // rx_length_errors
	statRxOverErrors
	_ // rx_crc_errors
	_ // rx_frame_errors
	statRxFifoErrors
	statRxMissedErrors
)

func read(names []string, dst []Counters, found []bool) error {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return os.NewSyscallError("netlink", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return os.NewSyscallError("netlink", err)
	}
	for i := range found {
		found[i] = false
	}
	for i := range msgs {
		if msgs[i].Header.Type != syscall.RTM_NEWLINK {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&msgs[i])
		if err != nil {
			continue
		}
		var name string
		var stats []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFLA_IFNAME:
				n := len(a.Value)
				for n > 0 && a.Value[n-1] == 0 {
					n--
				}
				name = string(a.Value[:n])
			case iflaStats64:
				stats = a.Value
			}
		}
		for j, want := range names {
			if want != name || len(stats) < 8*(statRxMissedErrors+1) {
				continue
			}
			u := func(k int) uint64 { return binary.NativeEndian.Uint64(stats[8*k:]) }
			dst[j] = Counters{RxPackets: u(statRxPackets), TxPackets: u(statTxPackets), RxBytes: u(statRxBytes), TxBytes: u(statTxBytes),
				RxDropped: u(statRxDropped), TxDropped: u(statTxDropped), RxOverErrors: u(statRxOverErrors),
				RxFifoErrors: u(statRxFifoErrors), RxMissedErrors: u(statRxMissedErrors)}
			if j < len(found) {
				found[j] = true
			}
		}
	}
	return nil
}

// iflaStats64 is IFLA_STATS64 (syscall's table stops before it).
const iflaStats64 = 23
