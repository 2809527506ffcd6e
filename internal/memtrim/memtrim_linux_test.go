package memtrim

import (
	"crypto/sha256"
	"fmt"
	"os"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	maps := []byte(`00400000-013b2000 r-xp 00000000 08:01 123 /opt/mp tester/bin
013b2000-02423000 r--p 00fb2000 08:01 123 /opt/mp tester/bin
02423000-029e3000 rw-p 02023000 08:01 123 /opt/mp tester/bin
02a00000-02b00000 r--s 00000000 08:01 123 /opt/mp tester/bin
7f00000000-7f00001000 r-xp 00000000 08:01 9 /usr/lib/libc.so.6
7f00002000-7f00003000 ---p 00000000 00:00 0
garbage
`)
	got := readOnlyMappings(maps, "/opt/mp tester/bin")
	want := []mapping{{0x400000, 0x13b2000 - 0x400000}, {0x13b2000, 0x2423000 - 0x13b2000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("mappings %x, want %x (not the writable, shared or other files' ones)", got, want)
	}
}

// TestTrimDropsFilePages: after Trim the binary's file pages are no longer
// resident and the code still runs (its pages come back on demand).
func TestTrimDropsFilePages(t *testing.T) {
	before, ok := Resident()
	if !ok {
		t.Fatal("no RssFile/RssAnon in /proc/self/status")
	}
	n, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Stat("/proc/self/exe")
	if n <= 0 || exe == nil || n > exe.Size()+1<<20 {
		t.Fatalf("advised %d bytes of a %v-byte binary", n, exe)
	}
	after, _ := Resident()
	// What the test runtime touches in between comes back one page a
	// time now; the drop must still be most of what was resident.
	if after.File > before.File/2 {
		t.Fatalf("file-backed RSS %d KiB before, %d KiB after Trim: not dropped", before.File>>10, after.File>>10)
	}
	// Code that has not run yet in this test maps back in on demand.
	if sum := sha256.Sum256([]byte("abc")); fmt.Sprintf("%x", sum[:4]) != "ba7816bf" {
		t.Fatalf("sha256 after Trim: %x", sum)
	}
	t.Logf("file RSS %d KiB -> %d KiB (anon %d KiB), %d MiB advised", before.File>>10, after.File>>10, after.Anon>>10, n>>20)
}
