package netns

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mptester/mptester/internal/nstest"
)

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestDoEntersAndLeaves: fn runs in the namespace asked for, its error
// comes back, and afterwards no thread of the process is left in that
// namespace, so no later goroutine runs there unasked (a thread unlocked
// without going back would be reused in it).
func TestDoEntersAndLeaves(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t)
	want := nsInode(t, "/run/netns/"+ns.Name)
	for range 20 {
		var inside uint64
		if err := Do(ns.Name, func() error { inside = nsInode(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
			t.Fatal(err)
		}
		if inside != want {
			t.Fatalf("fn ran in netns %d, want %s's %d", inside, ns.Name, want)
		}
	}
	planted := errors.New("planted")
	if err := Do(ns.Name, func() error { return planted }); !errors.Is(err, planted) {
		t.Fatalf("Do returned %v, want fn's error", err)
	}
	if err := Do("mpt-no-such-netns", func() error { t.Error("fn ran without its namespace"); return nil }); err == nil {
		t.Fatal("Do into a namespace that does not exist: no error")
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		var st unix.Stat_t
		err := unix.Stat("/proc/self/task/"+task.Name()+"/ns/net", &st)
		switch {
		case errors.Is(err, unix.ENOENT): // the thread ended since the listing
		case err != nil:
			t.Fatal(err)
		case st.Ino == want:
			t.Errorf("thread %s is still in %s after Do returned", task.Name(), ns.Name)
		}
	}
}
