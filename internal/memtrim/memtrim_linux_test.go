package memtrim

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// exeResident sums the resident kB of the binary's read-only mappings
// (/proc/self/smaps): what Trim acts on, apart from the C libraries a race
// build maps too.
func exeResident(t *testing.T) int {
	t.Helper()
	exe, _ := os.Readlink("/proc/self/exe")
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, in := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && strings.Join(f[5:], " ") == exe && !strings.Contains(f[1], "w")
			continue
		}
		if in && len(f) == 3 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			total += n
		}
	}
	return total
}

// TestTrimDropsFilePages: after Trim the binary's pages are no longer
// resident and the code still runs (its pages come back on demand).
func TestTrimDropsFilePages(t *testing.T) {
	if _, ok := Resident(); !ok {
		t.Fatal("no RssFile/RssAnon in /proc/self/status")
	}
	before := exeResident(t)
	n, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Stat("/proc/self/exe")
	if n <= 0 || exe == nil || n > exe.Size()+1<<20 {
		t.Fatalf("advised %d bytes of a %v-byte binary", n, exe)
	}
	after := exeResident(t)
	// What the test's runtime and this measurement touch in between
	// comes back (~1.6 MB of a 3 MB test binary's resident pages); a
	// quarter must still be gone (without Trim none is).
	if before < 1024 || after > before*3/4 {
		t.Fatalf("the binary's resident pages: %d KiB before, %d KiB after Trim", before, after)
	}
	// Code that has not run yet in this test maps back in on demand.
	if sum := sha256.Sum256([]byte("abc")); fmt.Sprintf("%x", sum[:4]) != "ba7816bf" {
		t.Fatalf("sha256 after Trim: %x", sum)
	}
	t.Logf("the binary's resident pages %d KiB -> %d KiB, %d MiB advised", before, after, n>>20)
}
