package memtrim

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func trim() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	var advised int64
	for _, m := range readOnlyMappings(maps, exe) {
		// MADV_DONTNEED on a private file mapping that was never written
		// only unmaps: the next access maps the file's page again. Never
		// on a writable mapping, whose private copies would be lost.
		if err := madvise(m, unix.MADV_RANDOM); err != nil {
			return advised, fmt.Errorf("madvise random %#x: %w", m.addr, err)
		}
		if err := madvise(m, unix.MADV_DONTNEED); err != nil {
			return advised, fmt.Errorf("madvise dontneed %#x: %w", m.addr, err)
		}
		advised += int64(m.len)
	}
	return advised, nil
}

type mapping struct{ addr, len uintptr }

// madvise on an address range of this process's own mappings (no Go
// memory is involved, so no slice stands for it).
func madvise(m mapping, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.addr, m.len, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// readOnlyMappings lists the mappings of file exe that are neither
// writable nor shared, from the text of /proc/self/maps.
func readOnlyMappings(maps []byte, exe string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Join(f[5:], " ") != exe || len(f[1]) != 4 || f[1][1] != '-' || f[1][3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || b <= a {
			continue
		}
		out = append(out, mapping{uintptr(a), uintptr(b - a)})
	}
	return out
}

func resident() (Stats, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Stats{}, false
	}
	var s Stats
	var seen int
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "RssFile":
			dst = &s.File
		case "RssAnon":
			dst = &s.Anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Stats{}, false
		}
		*dst = kb << 10
		seen++
	}
	return s, seen == 2
}
