package cmdutil

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDispatch(t *testing.T) {
	type opts struct{ via string }
	run := func(_ context.Context, o *opts) error { o.via = "run"; return nil }
	seam := func(_ context.Context, o *opts) error { o.via = "runF"; return nil }
	o := &opts{}
	assert.NoError(t, Dispatch(context.Background(), o, nil, run))
	assert.Equal(t, "run", o.via, "no runF: the command's run")
	assert.NoError(t, Dispatch(context.Background(), o, seam, run))
	assert.Equal(t, "runF", o.via, "a planted runF replaces run")
}
