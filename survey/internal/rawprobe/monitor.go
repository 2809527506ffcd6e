package rawprobe

import "time"

// MaxVerdictWait bounds how long a verdict waits for a late receive loop;
// past it the probe is suspect rather than a timeout.
const MaxVerdictWait = 10 * time.Second

// HostMonitor hears of what an engine sees of host overload: replies the
// host may have dropped, sends it refused, and how late and how full its
// receive loops ran. The survey's host-health monitor is one.
type HostMonitor interface {
	// LostDuring: replies arriving in (from, to] may have been dropped by
	// the host (n drops of a probe socket's queue when sock, else of the
	// host's).
	LostDuring(from, to time.Time, n uint64, sock bool)
	// SendFailed: the host refused a send at at for lack of buffers.
	SendFailed(at time.Time)
	// RecvLag: a receive loop handled a packet d after it arrived.
	RecvLag(d time.Duration)
	// QueueFill: how full a probe socket's receive queue is (0..1).
	QueueFill(f float64)
}
