package patterns

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"
)

// Debian's gtlsclient (ngtcp2 and nghttp3 over GnuTLS: an HTTP/3 client
// nobody here wrote) fetches a bulk object from the server's mpquic port,
// as `mptester serve` runs it, and gets the exact bytes.
func TestNgtcp2FetchesBulkFromServer(t *testing.T) {
	bin, err := exec.LookPath("gtlsclient")
	if err != nil {
		nstest.SkipUnless(t, "gtlsclient not found (apt-get install ngtcp2-client)")
	}
	srv := startServer(t, Limits{})
	port := strconv.Itoa(int(srv.port("mpquic")))
	const size = 4 << 20
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-q", "--exit-on-all-streams-close", "--download", dir,
		"127.0.0.1", port, "https://localhost:"+port+"/bulk/"+strconv.Itoa(size)+"/ngtcp2").CombinedOutput()
	if err != nil {
		t.Fatalf("gtlsclient: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "ngtcp2"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(NewBulkBody(size))
	if !bytes.Equal(got, want) {
		t.Fatalf("gtlsclient got %d bytes, want %d (exact bytes: %v)", len(got), len(want), bytes.Equal(got, want))
	}
}
