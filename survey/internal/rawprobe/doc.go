// Package rawprobe is the survey's probing engine: it sends one probe at a
// time (tcp-syn and icmp from a raw socket bound to a path, tcp-connect
// through the OS's connect) and says what answered and when, timed by the
// kernel's receive stamps. Raw engines are also a Batch the survey's event
// loop drives: many probes a system call, no goroutine per probe. What the
// engine sees of host overload goes to the caller's HostMonitor.
//
// The path a probe leaves by is a probe.Path (package probe: the probe
// host's paths); the packets are built and parsed here (packets.go).
package rawprobe
