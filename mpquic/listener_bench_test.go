//go:build unix

package mpquic

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far: the
// connections' goroutines count as well as the benchmark's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkListenerFakeInitial is what one fake Initial costs the
// listener's read loop (random bytes shaped like an Initial, as a flood
// sends them): its Initial keys derived from the destination ID, header
// protection and the AEAD tried on a copy, then dropped. B/op is garbage;
// retained-B/op what stays on the heap (nothing: no state).
func BenchmarkListenerFakeInitial(b *testing.B) {
	l, _ := testListener(b, nil)
	fakes := make([][]byte, 1024)
	for i := range fakes {
		fakes[i] = fakeInitial(make([]byte, 1500))
	}
	from := udp(2, 1000)
	heap0 := heapInUse()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		l.dispatch(datagram{b: fakes[i%len(fakes)], from: from})
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(int64(heapInUse())-int64(heap0))/float64(b.N), "retained-B/op")
	if s := l.Stats(); s.Undecryptable != uint64(b.N) || s.HalfOpen != 0 {
		b.Fatalf("stats %+v", s)
	}
}

// BenchmarkListenerHalfOpen is what a decryptable Initial that never
// completes its handshake costs: a real ClientHello under a fresh
// connection ID is decrypted, admitted, and answered with the server's
// flight by its connection, which then waits for the handshake timeout.
// cpu-ns/op counts every goroutine's CPU until each connection has sent
// its flight; retained-B/op is the heap each half-open connection holds.
// Caps and Retry are off to measure the connection itself.
func BenchmarkListenerHalfOpen(b *testing.B) {
	l, rc := testListener(b, &Config{MaxHalfOpen: 1 << 30, MaxHalfOpenPerSource: 1 << 30, RetryAboveHalfOpen: -1, RetryAboveRate: -1})
	hello := clientHelloPayload(b)
	heap0 := heapInUse()
	pkts := make([][]byte, b.N)
	for i := range pkts {
		pkts[i] = sealInitial(b, randomID(8), randomID(8), nil, hello, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		l.dispatch(datagram{b: pkts[i], from: udp(byte(i%250), 1000+i/250)})
	}
	// Each connection answers with at least one datagram.
	deadline := time.Now().Add(time.Minute)
	for len(rc.sent()) < b.N && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if got := len(rc.sent()); got < b.N {
		b.Fatalf("%d of %d connections answered", got, b.N)
	}
	pkts = nil
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(int64(heapInUse())-int64(heap0))/float64(b.N), "retained-B/op")
	if s := l.Stats(); s.HalfOpen != b.N {
		b.Fatalf("stats %+v", s)
	}
}

// BenchmarkListenerRetry is what a decryptable Initial costs when the
// listener answers it with a Retry instead of a connection (RequireRetry,
// or beyond the automatic thresholds under a flood): the check, a token
// sealed, a Retry built and written (to memory here: the system call is
// not counted).
func BenchmarkListenerRetry(b *testing.B) {
	l, rc := testListener(b, &Config{RequireRetry: true})
	hello := clientHelloPayload(b)
	pkts := make([][]byte, 1024)
	for i := range pkts {
		pkts[i] = sealInitial(b, randomID(8), randomID(8), nil, hello, 0)
	}
	from := udp(2, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		l.dispatch(datagram{b: pkts[i%len(pkts)], from: from})
		if i%1024 == 1023 {
			rc.mu.Lock()
			rc.out = rc.out[:0]
			rc.mu.Unlock()
		}
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if s := l.Stats(); s.RetriesSent != uint64(b.N) || s.HalfOpen != 0 {
		b.Fatalf("stats %+v", s)
	}
}
