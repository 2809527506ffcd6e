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
	"strconv"
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
	fmt.Fprintf(&b, titleFmt, Printable(t.Title))
	if t.Note != "" {
		fmt.Fprintf(&b, noteFmt, Printable(t.Note))
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
	t = printableTable(t)
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
	t = printableTable(t)
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
	cells := make([]string, 0, len(t.Columns))
	for r := range t.All() { // rows made on demand are written as read back
		cells = cells[:0]
		for _, c := range r {
			cells = append(cells, CSVCell(c))
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// CSVCell neutralises a cell a spreadsheet would take for a formula
// (OWASP, CSV injection): one starting with = + - @, a tab or a carriage
// return gets a leading single quote, unless it is a number (a negative
// RTT difference stays a number) or a lone "-".
func CSVCell(c string) string {
	if c == "" || c == "-" || !strings.ContainsRune("=+-@\t\r", rune(c[0])) {
		return c // "-": a placeholder, not a formula
	}
	if _, err := strconv.ParseFloat(c, 64); err == nil {
		return c
	}
	return "'" + c
}

// Printable escapes what a terminal would act on in a probe-reported
// string (ESC sequences, BEL, CR, backspace: cursor moves, clipboard
// writes through OSC 52): C0 and C1 controls and DEL become \xNN.
func Printable(s string) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1: // not UTF-8: the byte itself
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case isControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// printableTable is t with every heading and cell Printable.
func printableTable(t analysis.Table) analysis.Table {
	esc := func(cells []string) []string {
		out := make([]string, len(cells))
		for i, c := range cells {
			out[i] = Printable(c)
		}
		return out
	}
	t.Columns = esc(t.Columns)
	rows := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = esc(r)
	}
	t.Rows = rows
	return t
}
