package survey

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws one line on a terminal (stderr) with every stage that has
// begun: done/total, rate and ETA. Resolution and probing overlap, so both
// are shown; the probe total grows as resolution finds targets. It is only
// used when stderr is a TTY.
type progress struct {
	mu     sync.Mutex // one line drawn at a time; guards stages
	w      io.Writer
	stages []*stageProgress
}

type stageProgress struct {
	name  string
	done  atomic.Int64
	total atomic.Int64
	start time.Time
}

// begin adds a stage and returns its counters (nil when nothing is drawn).
func (p *progress) begin(stage string, total int) *stageProgress {
	if p == nil {
		return nil
	}
	s := &stageProgress{name: stage, start: time.Now()}
	s.total.Store(int64(total))
	p.mu.Lock()
	p.stages = append(p.stages, s)
	p.mu.Unlock()
	return s
}

func (s *stageProgress) add(n int) {
	if s != nil {
		s.done.Add(int64(n))
	}
}

func (s *stageProgress) grow(n int) {
	if s != nil {
		s.total.Add(int64(n))
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
	if len(p.stages) == 0 {
		return
	}
	var parts []string
	for _, s := range p.stages {
		parts = append(parts, s.line(8+12/len(p.stages)))
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(p.w, "\r%s   %s", strings.Join(parts, " | "), end)
}

func (s *stageProgress) line(width int) string {
	done, total := s.done.Load(), s.total.Load()
	el := time.Since(s.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	eta := "?"
	if rate > 0 && total >= done {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	fill := 0
	if total > 0 {
		fill = int(int64(width) * min(done, total) / total)
	}
	bar := strings.Repeat("#", fill) + strings.Repeat("-", width-fill)
	return fmt.Sprintf("%s [%s] %d/%d %.0f/s ETA %s", s.name, bar, done, total, rate, eta)
}
