//go:build !linux

package transport

import "net"

// Protocol-state sampling reads Linux socket options; elsewhere a sample
// says it is unavailable.
func sampleTCP(*net.TCPConn) State { return errState("tcp_info sampling needs Linux") }

func sampleMPTCP(*net.TCPConn) State { return errState("mptcp_info sampling needs Linux") }
