package agent

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/internal/linkstats"
)

// meterEvery is how often a running task's interfaces are read: the most
// a task can overshoot its budget is what the path carries in this time
// (and in the few milliseconds its process group takes to stop).
const meterEvery = 100 * time.Millisecond

// meter watches the interfaces of limit while a task runs and calls cut
// once one has counted its limit since the start.
type meter struct {
	names []string
	base  []int64
	last  []int64
	done  chan struct{}
	wg    sync.WaitGroup
	read  func([]string) ([]int64, error)
}

// readCounters is the kernel's count of the bytes each interface received
// and sent (internal/linkstats).
func readCounters(names []string) ([]int64, error) {
	cs := make([]linkstats.Counters, len(names))
	found := make([]bool, len(names))
	if err := linkstats.Read(names, cs, found); err != nil {
		return nil, err
	}
	out := make([]int64, len(names))
	for i, c := range cs {
		if found[i] {
			out[i] = int64(c.RxBytes + c.TxBytes)
		}
	}
	return out, nil
}

func (a *Agent) startMeter(limit map[string]int64, cut func(error)) *meter {
	m := &meter{done: make(chan struct{}), read: a.Meter}
	if m.read == nil {
		m.read = readCounters
	}
	for name := range limit {
		m.names = append(m.names, name)
	}
	slices.Sort(m.names)
	if len(m.names) == 0 {
		return m
	}
	base, err := m.read(m.names)
	if err != nil {
		a.log().Warn("data budget: no interface counters; counting the bytes results record only", "err", err)
		m.names = nil
		return m
	}
	m.base, m.last = base, slices.Clone(base)
	m.wg.Go(func() {
		t := time.NewTicker(meterEvery)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
			}
			now, err := m.read(m.names)
			if err != nil {
				continue
			}
			copy(m.last, now)
			for i, name := range m.names {
				if used := now[i] - m.base[i]; used >= limit[name] {
					cut(fmt.Errorf("%w of %s: the interface counted %s since the task started, %s were left this month",
						ErrBudgetCut, name, mb(used), mb(limit[name])))
					return
				}
			}
		}
	})
	return m
}

// stop ends the watch and returns the bytes each interface counted.
func (m *meter) stop() map[string]int64 {
	if len(m.names) == 0 {
		return nil
	}
	close(m.done)
	m.wg.Wait()
	if now, err := m.read(m.names); err == nil {
		m.last = now
	}
	out := map[string]int64{}
	for i, name := range m.names {
		out[name] = max(m.last[i]-m.base[i], 0)
	}
	return out
}
