package run

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// GitHub Actions reads workflow commands ("::error title=T::MESSAGE") from
// a step's stdout and stderr; run writes them to stderr, since stdout may
// be the JSON document. A command's data and its property values are
// escaped as the runner unescapes them (actions/toolkit's command.ts):
// '%', CR and LF everywhere, ':' and ',' also in properties.
var (
	ghData     = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	ghProperty = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
)

func escapeData(s string) string     { return ghData.Replace(s) }
func escapeProperty(s string) string { return ghProperty.Replace(s) }

// annotate writes an error annotation per failed test.
func (r *ciReport) annotate(w io.Writer) error {
	for _, c := range r.cases {
		if c.Skipped != "" || !c.failed() {
			continue
		}
		if _, err := fmt.Fprintf(w, "::error title=%s::%s\n", escapeProperty("mptester "+c.Name), escapeData(c.message())); err != nil {
			return err
		}
	}
	return nil
}

// mdCell makes s one Markdown table cell: no line breaks, pipes escaped.
var mdCell = strings.NewReplacer("|", `\|`, "\r\n", " ", "\n", " ", "\r", " ")

// summary is the run as Markdown for $GITHUB_STEP_SUMMARY: a line with
// the counts and the server, then a table of the tests, failures first.
func (r *ciReport) summary() string {
	tests, failures, skipped := r.counts()
	var b strings.Builder
	mark := "✅"
	if failures > 0 || (r.status != "ok" && r.status != "running") {
		mark = "❌"
	}
	server, fp := "", ""
	for _, p := range r.props {
		switch p[0] {
		case "server":
			server = p[1]
		case "fingerprint":
			fp = p[1]
		}
	}
	fmt.Fprintf(&b, "### %s mptester run against `%s`\n\n", mark, mdCell.Replace(server))
	fmt.Fprintf(&b, "%d tests: %d passed, %d failed, %d not applicable. Status **%s**", tests, tests-failures-skipped, failures, skipped, mdCell.Replace(r.status))
	if r.reason != "" {
		fmt.Fprintf(&b, " (%s)", mdCell.Replace(r.reason))
	}
	fmt.Fprintf(&b, "; certificate %s.\n\n", mdCell.Replace(fp))
	b.WriteString("| test | result | time | details |\n|---|---|---|---|\n")
	row := func(c ciCase, result, details string) {
		fmt.Fprintf(&b, "| %s | %s | %ss | %s |\n", mdCell.Replace(c.Name), result, seconds(c.Time), mdCell.Replace(details))
	}
	for _, c := range r.cases {
		if c.Skipped == "" && c.failed() {
			row(c, "❌ "+mdCell.Replace(c.Status), c.message())
		}
	}
	for _, c := range r.cases {
		if c.Skipped == "" && !c.failed() {
			row(c, "✅ passed", "")
		}
	}
	for _, c := range r.cases {
		if c.Skipped != "" {
			row(c, "➖ not applicable", c.Skipped)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// github reports the run to GitHub Actions: annotations on w, the summary
// appended to the step summary file (when the runner names one).
func (r *ciReport) github(w io.Writer, summaryFile string) error {
	if err := r.annotate(w); err != nil {
		return err
	}
	if summaryFile == "" {
		return nil
	}
	f, err := os.OpenFile(summaryFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
	}
	if _, err := io.WriteString(f, r.summary()); err != nil {
		f.Close()
		return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
	}
	return nil
}
