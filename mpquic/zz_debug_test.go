package mpquic

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
)

type fileWC struct{ *os.File }

func TestZZRebindDebug(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conf := &Config{Qlog: func(isClient bool, odcid []byte) io.WriteCloser {
		f, _ := os.Create("/tmp/rebind.sqlog")
		return fileWC{f}
	}}
	r := picoquicToMPQUIC(t, ctx, pqOpts{size: 4 << 20, conf: conf, pqArgs: []string{"-f", "1"}})
	checkTotalBytes(t, r)
}
