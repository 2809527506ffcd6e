//go:build !linux

package interop

import "net"

// The relay reads and forwards ECN codepoints on Linux only.
func enableTOS(*net.UDPConn) {}
func ecnOf([]byte) byte      { return 0 }
func ecnMsg(byte) []byte     { return nil }
