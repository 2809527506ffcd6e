package emu

import (
	"encoding/binary"
	"os"
	"sync"
)

// LowLatency makes each running Link hold a PM QoS request of 0 µs CPU
// wake-up latency (/dev/cpu_dma_latency, as cyclictest does) until the last
// Link stops. On a VM whose idle vCPUs halt, waking a halted vCPU for the
// next packet took milliseconds (measured: survey RTT error p50 4 ms with
// idle CPUs, 0.1 ms with the request held); with the request the idle loop
// polls instead of halting. Unprivileged processes cannot open the file;
// the emulator then runs without it.
var LowLatency = true

var qos struct {
	sync.Mutex
	links int
	f     *os.File
}

func holdLowLatency() (release func()) {
	if !LowLatency {
		return func() {}
	}
	qos.Lock()
	defer qos.Unlock()
	if qos.links == 0 {
		if f, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0); err == nil {
			var zero [4]byte
			binary.NativeEndian.PutUint32(zero[:], 0)
			if _, err := f.Write(zero[:]); err == nil {
				qos.f = f
			} else {
				f.Close()
			}
		}
	}
	qos.links++
	return func() {
		qos.Lock()
		defer qos.Unlock()
		qos.links--
		if qos.links == 0 && qos.f != nil {
			qos.f.Close() // closing the file drops the request
			qos.f = nil
		}
	}
}
