// Package render writes an analysis.Report as aligned text, Markdown, CSV,
// JSON or one self-contained HTML page, and draws its figures (gonum/plot)
// as SVG or PNG. Formats differ only in layout: every one shows the same
// cells; HTML and JSON add the figures.
package render

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mptester/mptester/report/analysis"
)

// Formats lists the formats Write accepts.
var Formats = []string{"text", "md", "csv", "json", "html"}

// ErrFormat is returned for a format not in Formats.
var ErrFormat = errors.New("unknown report format")

// Write renders tables (and, in html and json, figs) in format. CSV holds
// one table only (the caller picks it with --section or writes one file per
// table with CSV).
func Write(w io.Writer, format string, tables []analysis.Table, figs []analysis.Figure) error {
	switch format {
	case "html":
		return HTML(w, "mptester report", tables, figs)
	case "json":
		return JSON(w, tables, figs)
	case "text":
		return each(w, tables, Text)
	case "md":
		return each(w, tables, Markdown)
	case "csv":
		if len(tables) != 1 {
			return fmt.Errorf("csv writes one table, got %d: choose one with --section", len(tables))
		}
		return CSV(w, tables[0])
	}
	return fmt.Errorf("%w %q (want one of %s)", ErrFormat, format, strings.Join(Formats, ", "))
}

func each(w io.Writer, tables []analysis.Table, f func(io.Writer, analysis.Table) error) error {
	for i, t := range tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := f(w, t); err != nil {
			return err
		}
	}
	return nil
}

// framed writes a table's title and note, then its body, or for a Long
// table only how many rows it holds (the terminal formats leave exact
// ECDFs to CSV).
func framed(w io.Writer, t analysis.Table, titleFmt, noteFmt string, body func(*strings.Builder)) error {
	var b strings.Builder
	fmt.Fprintf(&b, titleFmt, t.Title)
	if t.Note != "" {
		fmt.Fprintf(&b, noteFmt, t.Note)
	}
	if t.Long {
		fmt.Fprintf(&b, "(%d rows: write them with --format csv --section %s)\n", t.Len(), t.Name)
	} else {
		body(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Text writes a table aligned for a terminal.
func Text(w io.Writer, t analysis.Table) error {
	return framed(w, t, "%s\n", "  %s\n", func(b *strings.Builder) { textBody(b, t) })
}

func textBody(b *strings.Builder, t analysis.Table) {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = utf8.RuneCountInString(c)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 && numeric(c) { // numbers right-aligned
				b.WriteString(pad + c)
			} else if i < len(cells)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		b.WriteString("\n")
	}
	line(t.Columns)
	for _, r := range t.Rows {
		line(r)
	}
}

func numeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' && r != '-' {
			return false
		}
	}
	return true
}

// Markdown writes a table as a GitHub-flavoured Markdown table.
func Markdown(w io.Writer, t analysis.Table) error {
	return framed(w, t, "## %s\n\n", "%s\n\n", func(b *strings.Builder) { markdownBody(b, t) })
}

func markdownBody(b *strings.Builder, t analysis.Table) {
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	row(t.Columns)
	b.WriteString("|")
	for range t.Columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		row(r)
	}
}

// CSV writes one table with a header row, every row whole.
func CSV(w io.Writer, t analysis.Table) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Columns); err != nil {
		return err
	}
	for r := range t.All() { // rows made on demand are written as read back
		if err := cw.Write(r); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
