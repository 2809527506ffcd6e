package archtest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// issueRef is a tracker reference: the word issue (or issues) and a number.
// Code says why in its own words or cites an RFC, a draft or a study in
// ../shared/papers; an issue number sends the reader to a tracker the
// code outlives.
var issueRef = regexp.MustCompile(`(?i)\bissues? #?[0-9]+`)

// TestNoIssueNumbersInCode: no Go file and no script cites an issue number.
func TestNoIssueNumbersInCode(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasPrefix(rel, "scripts"+string(filepath.Separator)) && !strings.HasPrefix(rel, ".ci"+string(filepath.Separator)) {
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if m := issueRef.FindString(sc.Text()); m != "" {
				found = append(found, rel+":"+strconv.Itoa(n)+": "+m)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: say why in the code's own words (or cite the RFC, draft or study), not an issue number", f)
	}
}
