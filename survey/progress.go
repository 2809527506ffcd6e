package survey

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws one line per stage on a terminal (stderr): done/total,
// rate and ETA. It is only used when stderr is a TTY.
type progress struct {
	mu    sync.Mutex // one line drawn at a time
	w     io.Writer
	stage atomic.Pointer[string]
	done  atomic.Int64
	total atomic.Int64
	start atomic.Int64 // unix ns of the stage start
}

func (p *progress) begin(stage string, total int) {
	if p == nil {
		return
	}
	if old := p.stage.Load(); old != nil {
		p.draw(true)
	}
	p.stage.Store(&stage)
	p.done.Store(0)
	p.total.Store(int64(total))
	p.start.Store(time.Now().UnixNano())
}

func (p *progress) add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

func (p *progress) run(ctx context.Context) {
	if p == nil {
		return
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.draw(true)
			return
		case <-t.C:
			p.draw(false)
		}
	}
}

func (p *progress) draw(final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stage.Load()
	if st == nil {
		return
	}
	done, total := p.done.Load(), p.total.Load()
	el := time.Since(time.Unix(0, p.start.Load())).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	eta := "?"
	if rate > 0 && total >= done {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	width := 30
	fill := 0
	if total > 0 {
		fill = int(int64(width) * min(done, total) / total)
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '-'
		if i < fill {
			bar[i] = '#'
		}
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(p.w, "\r%-8s [%s] %d/%d %.0f/s ETA %s   %s", *st, bar, done, total, rate, eta, end)
}
