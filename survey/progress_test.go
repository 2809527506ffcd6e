package survey

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Both overlapping stages are drawn on one line; the probe total grows as
// resolution finds targets; a nil progress (not a TTY) draws nothing.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf}
	res := p.begin("resolve", 20)
	probe := p.begin("probe", 0)
	res.add(10)
	probe.grow(30)
	probe.add(3)
	p.draw(true)
	line := buf.String()
	assert.Regexp(t, `^\rresolve \[#{7}-{7}\] 10/20 \d+/s ETA \S+ \| probe \[#-{13}\] 3/30 `, line)
	assert.True(t, bytes.HasSuffix(buf.Bytes(), []byte("\n")))

	var none *progress
	s := none.begin("probe", 5)
	s.add(1)
	s.grow(1)
	assert.Nil(t, s)
}
